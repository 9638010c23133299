-- nn: modules (registration, traversal, to/half, train/eval, zero_grad,
-- apply, state_dict, printing), each layer's forward against a reference in
-- Lua doubles, nn.init distributions, gradients reaching every parameter,
-- small models fitting synthetic data, and the error messages.
local T = require "harness"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local F = nn.functional
local F64 = {dtype = "float64"}

-- ---- helpers -------------------------------------------------------------------

local function shape(t) return t.shape:totable() end

local function rand_tensor(sz, lo, hi)
  local l = T.rand_list(sz, lo, hi)
  return torch.tensor(l, F64), l
end

-- a list of tensors as a set of identities
local function ids(list)
  local s = {}
  for _, t in ipairs(list) do s[t] = true end
  return s
end

-- [a, b] x [b, c] in Lua
local function matmul(a, b)
  local out = {}
  for i = 1, #a do
    out[i] = {}
    for j = 1, #b[1] do
      local s = 0
      for k = 1, #b do s = s + a[i][k] * b[k][j] end
      out[i][j] = s
    end
  end
  return out
end

local function transpose(a)
  local out = {}
  for j = 1, #a[1] do
    out[j] = {}
    for i = 1, #a do out[j][i] = a[i][j] end
  end
  return out
end

local function mean_var(vals)
  local n, s = #vals, 0
  for _, v in ipairs(vals) do s = s + v end
  local m = s / n
  local q = 0
  for _, v in ipairs(vals) do q = q + (v - m) ^ 2 end
  return m, q / n
end

-- erf to ~1e-15 (series for small |x|, continued fraction beyond): the GELU reference
local function erf(x)
  local ax = math.abs(x)
  local r
  if ax < 2.5 then
    local sum, term, n = ax, ax, 0
    repeat
      n = n + 1
      term = term * -ax * ax / n
      local add = term / (2 * n + 1)
      sum = sum + add
    until math.abs(add) < 1e-17
    r = 2 / math.sqrt(math.pi) * sum
  else
    -- erfc by a continued fraction (Lentz)
    local f, c, d = ax, ax, 0
    for k = 1, 60 do
      local an = k / 2
      d = 1 / (ax + an * d)
      c = ax + an / c
      f = f * c * d
    end
    r = 1 - math.exp(-ax * ax) / math.sqrt(math.pi) / f
  end
  return x < 0 and -r or r
end

-- cross-entropy from log_softmax and gather: the losses file may not be merged
local function cross_entropy(logits, y)
  if F.cross_entropy then return F.cross_entropy(logits, y) end
  return -torch.log_softmax(logits, 1):gather(1, y:unsqueeze(1)):mean()
end

-- whether conv2d records autograd (being wired on main)
local function conv_autograd()
  local w = torch.randn(1, 1, 1, 1, {requires_grad = true})
  local okc, y = pcall(torch.conv2d, torch.randn(1, 1, 2, 2), w)
  return okc and y.grad_fn ~= nil
end

local function norm_autograd(fn)
  local w = torch.ones(3, {requires_grad = true})
  local okn, y = pcall(fn, w)
  return okn and y.grad_fn ~= nil
end

-- ---- nn.Parameter ----------------------------------------------------------------------

test("Parameter: a leaf that requires grad and shares the tensor's storage", function()
  local t = torch.randn(3, 4)
  local p = nn.Parameter(t)
  eq(p.requires_grad, true, "requires_grad")
  eq(p.is_leaf, true, "is_leaf")
  eq(t.requires_grad, false, "the source is untouched")
  eq(p:data_ptr(), t:data_ptr(), "same storage")
  ok(nn.is_parameter(p) and not nn.is_parameter(t), "is_parameter")
  local q = nn.Parameter(torch.randn(2), false)
  eq(q.requires_grad, false, "requires_grad = false")
  ok(nn.is_parameter(q), "still a parameter")
  -- from a non-leaf: detached
  local a = torch.randn(2, {requires_grad = true})
  local r = nn.Parameter(a * 2)
  eq(r.is_leaf, true, "a parameter from a non-leaf is a leaf")
  raises(function() nn.Parameter(3) end, "nn.Parameter: expected a tensor, got number")
end)

-- ---- registration and traversal ------------------------------------------------------------

local Net = nn.Module:extend("Net")
function Net:init(hidden)
  hidden = hidden or 8
  self.fc1 = nn.Linear(4, hidden)
  self.act = nn.ReLU()
  self.scale = nn.Parameter(torch.ones(1))
  self.fc2 = nn.Linear(hidden, 3)
  self:register_buffer("steps", torch.zeros(1))
  self.note = "plain"
end
function Net:forward(x) return self.fc2(self.act(self.fc1(x))) * self.scale end

test("Module: registration order, parameters and named_parameters", function()
  local m = Net()
  local names, shapes = {}, {}
  for name, p in m:named_parameters() do
    names[#names + 1] = name
    shapes[#shapes + 1] = table.concat(shape(p), "x")
  end
  -- own parameters first, then children in registration order (PyTorch's order)
  eq(table.concat(names, " "), "scale fc1.weight fc1.bias fc2.weight fc2.bias", "names")
  eq(table.concat(shapes, " "), "1 8x4 8 3x8 3", "shapes")
  local ps = m:parameters()
  eq(#ps, 5, "#parameters")
  ok(rawequal(ps[2], m.fc1.weight) and rawequal(ps[1], m.scale), "parameters() are the same objects")
  eq(#m:parameters({recurse = false}), 1, "recurse = false")
  eq(m.note, "plain", "plain attribute")
  eq(m.training, true, "training by default")
  -- a plain tensor, and a non-leaf that requires grad, are attributes, not parameters
  m.plain = torch.ones(2)
  m.cache = m.scale * 2
  eq(#m:parameters(), 5, "plain tensors are not registered")
  ok(torch.is_tensor(m.plain) and torch.is_tensor(m.cache), "still readable")
  -- a leaf that requires grad registers, at the end of the own parameters
  m.extra = torch.zeros(2, {requires_grad = true})
  names = {}
  for name in m:named_parameters() do names[#names + 1] = name end
  eq(table.concat(names, " "), "scale extra fc1.weight fc1.bias fc2.weight fc2.bias", "after a new parameter")
  -- replacing a child keeps its place
  m.fc1 = nn.Linear(4, 8, {bias = false})
  names = {}
  for name in m:named_parameters() do names[#names + 1] = name end
  eq(table.concat(names, " "), "scale extra fc1.weight fc2.weight fc2.bias", "replaced child")
  -- setting a parameter to nil keeps the name registered with no tensor
  m.extra = nil
  eq(m.extra, nil, "parameter set to nil")
  eq(#m:parameters(), 4, "nil parameter is skipped")
  raises(function() m.scale = torch.ones(1) end, "cannot assign 'Tensor' as parameter 'scale'")
  raises(function() m.steps = 3 end, "cannot assign 'number' as buffer 'steps' (tensor or nil expected)")
  raises(function() m.act = 3 end, "cannot assign 'number' as child module 'act'")
end)

test("Module: buffers, persistent = false, register_* errors", function()
  local m = Net()
  m:register_buffer("tmp", torch.ones(2), {persistent = false})
  local names = {}
  for name, b in m:named_buffers() do names[#names + 1] = name .. ":" .. table.concat(shape(b), "x") end
  eq(table.concat(names, " "), "steps:1 tmp:2", "named_buffers")
  eq(#m:buffers(), 2, "#buffers")
  local sd = m:state_dict()
  ok(sd.steps ~= nil and sd.tmp == nil, "non-persistent buffers stay out of state_dict")
  -- assigning a tensor to a buffer's name replaces the buffer
  local nb = torch.full({1}, 7)
  m.steps = nb
  ok(rawequal(m:buffers()[1], nb), "buffer replaced")
  raises(function() m:register_buffer("fc1", torch.ones(1)) end, "register_buffer: attribute 'fc1' already exists")
  raises(function() m:register_buffer("a.b", torch.ones(1)) end, "register_buffer: name can't contain \".\"")
  raises(function() m:register_buffer("x", 3) end, "register_buffer: cannot assign 'number' as buffer 'x'")
  raises(function() m:register_parameter("steps", nn.Parameter(torch.ones(1))) end,
    "register_parameter: attribute 'steps' already exists")
  raises(function() m:add_module("x", 5) end, "add_module: number is not a Module subclass")
  m:register_parameter("w", nil)
  eq(#m:parameters(), 5, "a nil parameter adds nothing")
end)

test("Module: children, modules, named_modules, shared modules listed once", function()
  local shared = nn.Linear(2, 2)
  local inner = nn.Sequential(shared, nn.Tanh())
  local outer = nn.Sequential({{"a", inner}, {"b", shared}, {"c", nn.ReLU()}})
  local names = {}
  for name, m in outer:named_modules() do names[#names + 1] = (name == "" and "<root>" or name) .. "=" .. m:_get_name() end
  eq(table.concat(names, " "), "<root>=Sequential a=Sequential a.0=Linear a.1=Tanh c=ReLU", "named_modules")
  eq(#outer:modules(), 5, "#modules")
  local cn = {}
  for name, m in outer:named_children() do cn[#cn + 1] = name .. "=" .. m:_get_name() end
  eq(table.concat(cn, " "), "a=Sequential b=Linear c=ReLU", "named_children")
  eq(#outer:children(), 3, "#children")
  -- the shared Linear's parameters once in parameters(), under both names in state_dict
  eq(#outer:parameters(), 2, "shared parameters listed once")
  local sd = outer:state_dict()
  ok(sd["a.0.weight"] and sd["b.weight"], "state_dict has both names")
  eq(sd["a.0.weight"]:data_ptr(), sd["b.weight"]:data_ptr(), "same storage")
  ok(rawequal(outer:get_submodule("a.1"), inner[1]), "get_submodule")
  raises(function() outer:get_submodule("a.zz") end, "get_submodule: Sequential has no submodule `zz`")
end)

test("Module: extend, init arguments, __call, forward missing, class errors", function()
  local m = Net(16)
  eq(m.fc1.out_features, 16, "init got its argument")
  local y = m(torch.randn(5, 4))
  eq(tostring(y.shape), "torch.Size([5, 3])", "m(x) runs forward")
  local Sub = Net:extend("Sub")
  function Sub:forward(x) return Net.forward(self, x) + 1 end
  local s = Sub(2)
  eq(s:_get_name(), "Sub", "subclass name")
  eq(s.fc1.out_features, 2, "inherited init")
  eq(tostring(s(torch.zeros(1, 4)).shape), "torch.Size([1, 3])", "subclass forward")
  local Empty = nn.Module:extend("Empty")
  raises(function() Empty()(torch.ones(1)) end, "Empty: forward() is not implemented (define function Empty:forward(...))")
  raises(function() nn.Module:extend("1bad") end, "extend: expected a class name")
  eq(tostring(Net), "<class Net>", "class tostring")
end)

test("Module: positional parameters by name, as Python's keyword arguments", function()
  local l = nn.Linear({in_features = 64, out_features = 32})
  eq(l.in_features, 64, "Linear in_features by name")
  eq(l.out_features, 32, "Linear out_features by name")
  eq(tostring(l.weight.shape), "torch.Size([32, 64])", "weight shape")
  local nb = nn.Linear(64, {out_features = 10, bias = false})
  eq(nb.out_features, 10, "a positional, then a name")
  eq(nb.bias, nil, "the other keys stay options")
  local c = nn.Conv2d({in_channels = 3, out_channels = 16, kernel_size = 3, stride = 1, padding = 1})
  eq(tostring(c), "Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))", "Conv2d by name")
  local p = nn.MaxPool2d({kernel_size = 2, stride = 2})
  eq(tostring(p), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)", "MaxPool2d by name")
  eq(nn.BatchNorm1d({num_features = 4, eps = 1e-3}).eps, 1e-3, "BatchNorm1d by name, with an option")
  eq(tostring(nn.LogSoftmax({dim = 1})), "LogSoftmax(dim=1)", "vararg layers keep their options")
  -- a user's class takes its init's parameter names too
  local LR = nn.Module:extend("LR")
  function LR:init(input_size, output_size) self.linear = nn.Linear(input_size, output_size) end
  eq(LR({input_size = 2, output_size = 5}).linear.out_features, 5, "user class by name")
  eq(LR(2, {output_size = 5}).linear.in_features, 2, "user class, mixed")
  -- an options table that names no parameter is passed through untouched
  local Cfg = nn.Module:extend("Cfg")
  function Cfg:init(config) self.config = config end
  local cfg = {hidden = 3}
  ok(rawequal(Cfg(cfg).config, cfg), "a table of other keys reaches init as it was")
  raises(function() nn.Linear(3, {in_features = 64, out_features = 32}) end,
    "Linear: 'in_features' given both as an argument and as an option")
  raises(function() nn.Linear({in_features = 3, out_features = 2, bogus = 1}) end, "Linear: unknown option 'bogus'")
  raises(function() nn.Linear({out_features = 32}) end, "Linear: in_features must be an integer, got nil")
end)

-- ---- to / half / cuda ----------------------------------------------------------------------------

T.cpu_test("Module:to: same objects when nothing changes, new leaves when the dtype does", function()
  local m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
  local before = m:parameters()
  ok(rawequal(m:to("cpu"), m), "to returns self")
  local after = m:parameters()
  for i = 1, #before do ok(rawequal(before[i], after[i]), "same parameter object " .. i) end
  m:float()
  ok(rawequal(m:parameters()[1], before[1]), "float() on float32 keeps the object")
  -- a gradient moves along
  m[0].weight.grad = torch.ones(4, 3)
  m:half()
  local p = m:parameters()
  for i = 1, #p do
    eq(p[i].dtype, torch.float16, "half parameter " .. i)
    eq(p[i].is_leaf, true, "leaf " .. i)
    eq(p[i].requires_grad, true, "requires_grad " .. i)
    ok(not rawequal(p[i], before[i]), "replaced " .. i)
  end
  eq(m[0].weight.grad.dtype, torch.float16, "grad moved along")
  eq(m[1].running_mean.dtype, torch.float16, "float buffer cast")
  eq(m[1].num_batches_tracked.dtype, torch.int64, "integer buffer kept")
  close(m[0].weight:float(), before[1]:half():float(), 0, 0, "values kept")
  m:eval()
  eq(m(torch.randn(2, 3):half()).dtype, torch.float16, "a half model runs on half inputs")
  m:double()
  eq(m[0].bias.dtype, torch.float64, "double")
  m:to(torch.float32)
  eq(m[0].bias.dtype, torch.float32, "to(torch.float32)")
  m:to({dtype = "float64"})
  eq(m[0].bias.dtype, torch.float64, "to({dtype =})")
  raises(function() m:to("int64") end, "to: nn.Module.to only accepts floating point dtypes, but got desired dtype=torch.int64")
  raises(function() m:to("bogus") end, "to: expected a device")
  if not (cuda and cuda.is_available()) then
    raises(function() m:cuda() end, "not available")
  end
end)

test("Module:cuda(device): an ordinal, \"cuda:N\" or a torch.device, as PyTorch's; anything else says what it takes", function()
  local m = nn.Linear(2, 3)
  raises(function() m:cuda("cpu") end, "cuda: expected a CUDA device (an ordinal, \"cuda:N\" or torch.device), got cpu")
  raises(function() m:cuda(torch.device("cpu")) end, "expected a CUDA device")
  raises(function() m:cuda({}) end, "expected a CUDA device")
  local n = cuda.device_count()
  for _, dev in ipairs({0, "cuda:0", torch.device("cuda:0"), torch.device("cuda", 0)}) do
    if n > 0 then
      eq(tostring(m:cuda(dev).weight.device), "cuda:0", "m:cuda(" .. tostring(dev) .. ")")
      m:cpu()
    else
      raises(function() m:cuda(dev) end, "to: CUDA is not available", "m:cuda(" .. tostring(dev) .. ") without a GPU")
    end
  end
  if n < 2 then
    raises(function() m:cuda(torch.device("cuda:1")) end, n == 0 and "CUDA is not available" or "invalid device ordinal cuda:1")
  end
  -- m:to(0), PyTorch's model.to(rank): a CUDA ordinal
  if n > 0 then
    eq(tostring(m:to(0).weight.device), "cuda:0", "m:to(0)")
    m:cpu()
  else
    raises(function() m:to(0) end, "to: CUDA is not available", "m:to(0) without a GPU")
  end
  eq(tostring(m.weight.device), "cpu", "a failed move leaves the model where it was")
end)

test("Module:to: tied parameters stay tied", function()
  local emb = nn.Embedding(5, 3)
  local head = nn.Linear(3, 5, {bias = false})
  head.weight = emb.weight
  local m = nn.Sequential(emb, head)
  eq(#m:parameters(), 1, "one tied parameter")
  m:double()
  ok(rawequal(m[0].weight, m[1].weight), "still the same object")
  eq(#m:parameters(), 1, "still one parameter")
end)

T.cpu_test("Module:to(cuda): parameters and buffers move, device errors name both devices", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  local m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)):to("cuda")
  for _, p in ipairs(m:parameters()) do eq(tostring(p.device), "cuda:0", "parameter device") end
  eq(tostring(m[1].running_var.device), "cuda:0", "buffer device")
  raises(function() m(torch.randn(2, 3)) end, "input is on cpu but the layer's parameters are on cuda:0")
  local y = m(torch.randn(2, 3, {device = "cuda"}))
  eq(tostring(y.device), "cuda:0", "output device")
  m:cpu()
  eq(tostring(m[0].weight.device), "cpu", "back on the cpu")
end)

-- ---- train / eval ----------------------------------------------------------------------------------

test("train/eval: the flag reaches every submodule; Dropout masks and scales only in training", function()
  local m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.25)))
  ok(rawequal(m:eval(), m), "eval returns self")
  for _, s in ipairs(m:modules()) do eq(s.training, false, "eval " .. s:_get_name()) end
  m:train()
  for _, s in ipairs(m:modules()) do eq(s.training, true, "train " .. s:_get_name()) end
  m:train(false)
  eq(m[1][0].training, false, "train(false)")
  raises(function() m:train("yes") end, "train: training mode is expected to be boolean, got string")
  local d = nn.Dropout(0.25)
  local x = torch.ones(200, 100)
  local y = d(x)
  local vals = T.flat(y)
  local zeros = 0
  for _, v in ipairs(vals) do
    if v == 0 then zeros = zeros + 1
    else ok(math.abs(v - 1 / 0.75) < 1e-6, "kept values are scaled by 1/(1-p), got " .. v) end
  end
  local frac = zeros / #vals
  ok(frac > 0.22 and frac < 0.28, "dropped fraction near 0.25, got " .. frac)
  d:eval()
  ok(rawequal(d(x), x), "eval: identity (the same tensor)")
  -- p = 0 and p = 1
  ok(rawequal(nn.Dropout(0)(x), x), "p = 0 is the identity")
  close(nn.Dropout(1)(torch.ones(3)), {0, 0, 0}, 0, 0, "p = 1 zeroes")
  -- gradient: the same mask
  local a = torch.ones(50, {requires_grad = true})
  local out = nn.Dropout(0.5)(a)
  out:sum():backward()
  close(a.grad, out:detach(), 0, 0, "grad is the mask times 1/(1-p)")
  raises(function() nn.Dropout(1.5) end, "Dropout: dropout probability has to be between 0 and 1, but got 1.5")
  raises(function() F.dropout(x, -0.1) end, "dropout: dropout probability has to be between 0 and 1, but got -0.1")
end)

-- per-channel batch statistics of an (N, C, ...) nested list: means, biased and unbiased vars
local function channel_stats(list, C)
  local vals = {}
  for c = 1, C do vals[c] = {} end
  local function walk(v, c)
    if type(v) ~= "table" then table.insert(vals[c], v) return end
    for _, x in ipairs(v) do walk(x, c) end
  end
  for n = 1, #list do for c = 1, C do walk(list[n][c], c) end end
  local m, vb, vu = {}, {}, {}
  for c = 1, C do
    m[c], vb[c] = mean_var(vals[c])
    vu[c] = vb[c] * #vals[c] / (#vals[c] - 1)
  end
  return m, vb, vu
end

test("BatchNorm2d: batch statistics in training, running statistics in eval", function()
  local bn = nn.BatchNorm2d(3):double()
  eq(table.concat(shape(bn.weight), "x"), "3", "weight shape")
  close(bn.weight, {1, 1, 1}, 0, 0, "weight 1")
  close(bn.bias, {0, 0, 0}, 0, 0, "bias 0")
  local x, xl = rand_tensor({4, 3, 2, 5}, -2, 3)
  local m, vb, vu = channel_stats(xl, 3)
  local y = bn(x)
  -- reference: (x - mean) / sqrt(var + eps)
  local ref = T.map(xl, function(v) return v end)
  for n = 1, 4 do for c = 1, 3 do for h = 1, 2 do for w = 1, 5 do
    ref[n][c][h][w] = (xl[n][c][h][w] - m[c]) / math.sqrt(vb[c] + 1e-5)
  end end end end
  close(y, ref, 1e-9, 1e-9, "training output")
  local rm, rv = {}, {}
  for c = 1, 3 do rm[c] = 0.1 * m[c]; rv[c] = 0.9 + 0.1 * vu[c] end
  close(bn.running_mean, rm, 1e-9, 1e-12, "running_mean")
  close(bn.running_var, rv, 1e-9, 1e-12, "running_var (unbiased)")
  eq(bn.num_batches_tracked:item(), 1, "num_batches_tracked")
  bn(x)
  eq(bn.num_batches_tracked:item(), 2, "num_batches_tracked after two")
  -- eval: running statistics, no update, affine applied
  bn:eval()
  local _ <close> = torch.no_grad()
  bn.weight:copy_(torch.tensor({1, 2, 3}, F64))
  bn.bias:copy_(torch.tensor({0.5, -1, 0}, F64))
  local rm2, rv2 = T.flat(bn.running_mean), T.flat(bn.running_var)
  local x2, xl2 = rand_tensor({2, 3, 1, 2})
  local y2 = bn(x2)
  local w, b = {1, 2, 3}, {0.5, -1, 0}
  local ref2 = T.map(xl2, function(v) return v end)
  for n = 1, 2 do for c = 1, 3 do for k = 1, 2 do
    ref2[n][c][1][k] = (xl2[n][c][1][k] - rm2[c]) / math.sqrt(rv2[c] + 1e-5) * w[c] + b[c]
  end end end
  close(y2, ref2, 1e-9, 1e-9, "eval output")
  eq(bn.num_batches_tracked:item(), 2, "eval does not count")
  close(bn.running_mean, rm2, 0, 0, "eval leaves running_mean")
end)

test("BatchNorm1d: (N, C) and (N, C, L), momentum = false (cumulative), no running stats", function()
  local bn = nn.BatchNorm1d(2, {momentum = false}):double()
  local x1, l1 = rand_tensor({5, 2})
  local x2, l2 = rand_tensor({3, 2, 4})
  bn(x1)
  bn(x2)
  local m1, _, u1 = channel_stats(l1, 2)
  local m2, _, u2 = channel_stats(l2, 2)
  -- momentum None: a plain average of the batch statistics
  close(bn.running_mean, {(m1[1] + m2[1]) / 2, (m1[2] + m2[2]) / 2}, 1e-9, 1e-12, "cumulative mean")
  close(bn.running_var, {(u1[1] + u2[1]) / 2, (u1[2] + u2[2]) / 2}, 1e-9, 1e-12, "cumulative var")
  local nt = nn.BatchNorm1d(2, {track_running_stats = false, affine = false}):double()
  eq(nt.running_mean, nil, "no running_mean")
  eq(#nt:parameters(), 0, "affine = false: no parameters")
  eq(#nt:buffers(), 0, "no buffers")
  nt:eval()
  local y = nt(x1) -- batch statistics even in eval
  local m, vb = channel_stats(l1, 2)
  local ref = {}
  for n = 1, 5 do ref[n] = {(l1[n][1] - m[1]) / math.sqrt(vb[1] + 1e-5), (l1[n][2] - m[2]) / math.sqrt(vb[2] + 1e-5)} end
  close(y, ref, 1e-9, 1e-9, "no running stats: batch statistics")
  raises(function() nn.BatchNorm1d(2)(torch.randn(2, 2, 2, 2)) end, "BatchNorm1d(2): expected 2D or 3D input (got 4D input)")
  raises(function() nn.BatchNorm2d(2)(torch.randn(2, 2, 2)) end, "BatchNorm2d(2): expected 4D input (got 3D input)")
  raises(function() nn.BatchNorm2d(3)(torch.randn(2, 2, 2, 2)) end,
    "BatchNorm2d(3): input has 2 channels (shape (2, 2, 2, 2)), expected 3")
  raises(function() nn.BatchNorm1d(2)(torch.randn(1, 2)) end, "expected more than 1 value per channel when training")
end)

-- ---- zero_grad, apply -----------------------------------------------------------------------------------

test("zero_grad: drops grads by default, zeroes them with set_to_none = false", function()
  local m = Net()
  m(torch.randn(3, 4)):sum():backward()
  for name, p in m:named_parameters() do ok(p.grad ~= nil, "grad after backward: " .. name) end
  m:zero_grad({set_to_none = false})
  for name, p in m:named_parameters() do close(p.grad, torch.zeros_like(p), 0, 0, "zeroed " .. name) end
  m:zero_grad()
  for name, p in m:named_parameters() do eq(p.grad, nil, "none " .. name) end
end)

test("apply: children first, then self; returns self", function()
  local m = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
  local order = {}
  ok(rawequal(m:apply(function(s) order[#order + 1] = s:_get_name() end), m), "returns self")
  eq(table.concat(order, " "), "Linear ReLU Linear Sequential Sequential", "order")
  m:apply(function(s) if s:_get_name() == "Linear" then nn.init.constant_(s.weight, 0.5) end end)
  close(m[1][1].weight, {{0.5, 0.5, 0.5}}, 0, 0, "init through apply")
  raises(function() m:apply(3) end, "apply: expected a function, got number")
end)

-- ---- state_dict -------------------------------------------------------------------------------------------

test("state_dict: flat names, detached, buffers included; load_state_dict round trip", function()
  local a, b = Net(), Net()
  local sd = a:state_dict()
  local keys = {}
  for k, v in pairs(sd) do
    keys[#keys + 1] = k
    eq(v.requires_grad, false, "detached " .. k)
  end
  table.sort(keys)
  eq(table.concat(keys, " "), "fc1.bias fc1.weight fc2.bias fc2.weight scale steps", "keys")
  eq(sd["fc1.weight"]:data_ptr(), a.fc1.weight:data_ptr(), "shares storage")
  local x = torch.randn(6, 4)
  ok(not torch.equal(a(x), b(x)), "different before loading")
  local wb = b.fc1.weight
  local r = b:load_state_dict(sd)
  eq(#r.missing_keys + #r.unexpected_keys, 0, "nothing missing or unexpected")
  ok(torch.equal(a(x), b(x)), "same outputs after loading")
  ok(rawequal(b.fc1.weight, wb), "loaded in place")
  eq(b.fc1.weight.requires_grad, true, "still requires grad")
  -- a copy, not an alias
  torch.no_grad(function() a.fc1.weight:fill_(3) end)
  ok(not torch.equal(a(x), b(x)), "copied, not shared")
  -- dtype conversion on load
  local h = Net():double()
  h:load_state_dict(b:state_dict())
  close(h.fc2.bias, b.fc2.bias, 0, 0, "float32 -> float64 on load")
end)

test("load_state_dict: missing, unexpected and size mismatch errors; nothing changes on error", function()
  local m = nn.Sequential({{"fc1", nn.Linear(784, 128)}, {"fc2", nn.Linear(128, 10)}})
  local good = m:state_dict()
  local before = m.fc1.bias:clone()
  local sd = {}
  for k, v in pairs(good) do sd[k] = torch.zeros_like(v) end
  sd["fc1.weight"] = torch.zeros(256, 784)
  local err = raises(function() m:load_state_dict(sd) end,
    "size mismatch for fc1.weight: copying a param with shape (256, 784) from checkpoint, the shape in current model is (128, 784).")
  ok(err:find("Error(s) in loading state_dict for Sequential:\n\t", 1, true), "heading: " .. err)
  ok(torch.equal(m.fc1.bias, before), "nothing copied on error")
  sd["fc1.weight"] = nil
  sd["fc3.weight"] = torch.zeros(1)
  sd["extra"] = torch.zeros(1)
  err = raises(function() m:load_state_dict(sd) end, "Error(s) in loading state_dict for Sequential:")
  eq(err:match("Error.*$"), 'Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in state_dict: "fc1.weight". '
    .. '\n\tUnexpected key(s) in state_dict: "extra", "fc3.weight". ', "exact message")
  ok(torch.equal(m.fc1.bias, before), "nothing copied on error")
  -- strict = false: loads what matches, reports the rest
  local r = m:load_state_dict(sd, {strict = false})
  eq(table.concat(r.missing_keys, ","), "fc1.weight", "missing_keys")
  eq(table.concat(r.unexpected_keys, ","), "extra,fc3.weight", "unexpected_keys")
  close(m.fc1.bias, torch.zeros(128), 0, 0, "matching keys loaded")
  -- size mismatches fail even with strict = false
  sd["fc2.bias"] = torch.zeros(11)
  raises(function() m:load_state_dict(sd, {strict = false}) end,
    "size mismatch for fc2.bias: copying a param with shape (11,) from checkpoint, the shape in current model is (10,).")
  sd["fc2.bias"] = "nope"
  raises(function() m:load_state_dict(sd, {strict = false}) end,
    'While copying the parameter named "fc2.bias", expected a tensor from checkpoint but received string')
  raises(function() m:load_state_dict(5) end, "load_state_dict: expected a table of name -> tensor, got number")
end)

-- ---- printing ------------------------------------------------------------------------------------------------

test("print(model): PyTorch's layout for a nested model", function()
  local Block = nn.Module:extend("Block")
  function Block:init(c)
    self.conv = nn.Conv2d(c, c, 3, {padding = 1, groups = c, bias = false})
    self.bn = nn.BatchNorm2d(c)
    self.act = nn.Hardswish()
  end
  local Model = nn.Module:extend("Model")
  function Model:init()
    self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, {stride = 2, padding = 1}), nn.BatchNorm2d(16), nn.ReLU({inplace = true}))
    self.blocks = nn.ModuleList({Block(16), Block(16)})
    self.pool = nn.AdaptiveAvgPool2d(1)
    self.head = nn.Sequential({{"flatten", nn.Flatten()}, {"drop", nn.Dropout(0.2)}, {"fc", nn.Linear(16, 10)}})
    self.emb = nn.Embedding(10, 4, {padding_idx = 0})
    self.norm = nn.LayerNorm({4})
    self.acts = nn.ModuleDict({{"gelu", nn.GELU({approximate = "tanh"})}, {"leaky", nn.LeakyReLU(0.2, true)},
      {"sm", nn.Softmax(-1)}, {"hs", nn.Hardsigmoid()}, {"silu", nn.SiLU()}, {"id", nn.Identity()}})
    self.pools = nn.Sequential(nn.MaxPool2d(3, 2, 1), nn.AvgPool2d(2), nn.Conv1d(4, 8, 5, {dilation = 2}),
      nn.BatchNorm1d(8, {affine = false, momentum = 0.01}), nn.Unflatten(1, {2, 4}), nn.Tanh(), nn.Sigmoid(), nn.LogSoftmax(1))
  end
  local expected = [[
Model(
  (stem): Sequential(
    (0): Conv2d(3, 16, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
    (1): BatchNorm2d(16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
    (2): ReLU(inplace=True)
  )
  (blocks): ModuleList(
    (0-1): 2 x Block(
      (conv): Conv2d(16, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=16, bias=False)
      (bn): BatchNorm2d(16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
      (act): Hardswish()
    )
  )
  (pool): AdaptiveAvgPool2d(output_size=1)
  (head): Sequential(
    (flatten): Flatten(start_dim=1, end_dim=-1)
    (drop): Dropout(p=0.2, inplace=False)
    (fc): Linear(in_features=16, out_features=10, bias=True)
  )
  (emb): Embedding(10, 4, padding_idx=0)
  (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True)
  (acts): ModuleDict(
    (gelu): GELU(approximate='tanh')
    (leaky): LeakyReLU(negative_slope=0.2, inplace=True)
    (sm): Softmax(dim=-1)
    (hs): Hardsigmoid()
    (silu): SiLU()
    (id): Identity()
  )
  (pools): Sequential(
    (0): MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)
    (1): AvgPool2d(kernel_size=2, stride=2, padding=0)
    (2): Conv1d(4, 8, kernel_size=(5,), stride=(1,), dilation=(2,))
    (3): BatchNorm1d(8, eps=1e-05, momentum=0.01, affine=False, track_running_stats=True)
    (4): Unflatten(dim=1, unflattened_size=(2, 4))
    (5): Tanh()
    (6): Sigmoid()
    (7): LogSoftmax(dim=1)
  )
)]]
  eq(tostring(Model()), expected, "repr")
  eq(tostring(nn.Sequential()), "Sequential()", "empty Sequential")
  eq(tostring(nn.ModuleList()), "ModuleList()", "empty ModuleList")
  eq(tostring(nn.Linear(3, 2, {bias = false})), "Linear(in_features=3, out_features=2, bias=False)", "no bias")
  eq(tostring(nn.BatchNorm2d(4, {momentum = false, eps = 1e-3})),
    "BatchNorm2d(4, eps=0.001, momentum=None, affine=True, track_running_stats=True)", "momentum None")
  eq(tostring(nn.Dropout()), "Dropout(p=0.5, inplace=False)", "default dropout")
  eq(tostring(nn.Conv2d(2, 4, {3, 1}, {padding = "same", bias = false})),
    "Conv2d(2, 4, kernel_size=(3, 1), stride=(1, 1), padding=same, bias=False)", "padding same")
  eq(tostring(nn.LeakyReLU()), "LeakyReLU(negative_slope=0.01)", "default slope")
  eq(tostring(nn.ReLU6()), "ReLU6()", "ReLU6")
  eq(tostring(nn.LayerNorm({2, 3}, {eps = 1e-6})), "LayerNorm((2, 3), eps=1e-06, elementwise_affine=True)", "2-D LayerNorm")
  -- a custom extra_repr on a leaf prints inline
  local Scale = nn.Module:extend("Scale")
  function Scale:extra_repr() return "factor=2.0" end
  eq(tostring(nn.Sequential(Scale())), "Sequential(\n  (0): Scale(factor=2.0)\n)", "custom extra_repr")
end)

-- ---- containers ------------------------------------------------------------------------------------------------

test("Sequential: index from 0, negative, #, pairs, append, insert, named forms", function()
  local a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
  local s = nn.Sequential(a, b)
  eq(#s, 2, "#s")
  ok(rawequal(s[0], a) and rawequal(s[1], b) and rawequal(s[-1], b) and rawequal(s[-2], a), "indexing")
  s:append(c)
  eq(#s, 3, "append")
  ok(rawequal(s[2], c), "appended at the end")
  local seen = {}
  for i, m in pairs(s) do seen[#seen + 1] = i .. m:_get_name() end
  eq(table.concat(seen, " "), "0Linear 1ReLU 2Linear", "pairs from 0")
  local t = nn.Tanh()
  s:insert(1, t)
  ok(rawequal(s[1], t) and rawequal(s[2], b), "insert")
  local names = {}
  for n in s:named_children() do names[#names + 1] = n end
  eq(table.concat(names, " "), "0 1 2 3", "renumbered")
  s[1] = nn.Sigmoid()
  eq(s[1]:_get_name(), "Sigmoid", "setitem")
  -- forward chains
  local x = torch.randn(4, 2)
  close(s(x), c(s[2](s[1](a(x)))), 1e-6, 1e-6, "forward chains the modules")
  -- named forms
  local named = nn.Sequential({fc = nn.Linear(1, 1), act = nn.ReLU()})
  names = {}
  for n in named:named_children() do names[#names + 1] = n end
  eq(table.concat(names, " "), "act fc", "keyed table: sorted names")
  eq(named.fc:_get_name(), "Linear", "by name")
  eq(named[0]:_get_name(), "ReLU", "by position")
  local ordered = nn.Sequential({{"z", nn.ReLU()}, {"a", nn.Tanh()}})
  names = {}
  for n in ordered:named_children() do names[#names + 1] = n end
  eq(table.concat(names, " "), "z a", "pairs keep their order")
  local fromlist = nn.Sequential({nn.ReLU(), nn.Tanh()})
  eq(#fromlist, 2, "a list of modules")
  raises(function() return s[4] end, "Sequential: index 4 is out of range for 4 modules")
  raises(function() return s[-5] end, "Sequential: index -5 is out of range for 4 modules")
  raises(function() nn.Sequential(nn.ReLU(), 3) end, "Sequential: argument 2 must be a module, got number")
  raises(function() nn.Sequential({{"a", 3}}) end, "Sequential: element 1 must be a module or a {name, module} pair")
  raises(function() s[0] = 5 end, "Sequential: only modules can be stored, got number")
  raises(function() s:append("x") end, "Sequential:append: expected a module, got string")
end)

test("ModuleList and ModuleDict", function()
  local l = nn.ModuleList({nn.Linear(2, 2), nn.ReLU()})
  eq(#l, 2, "#list")
  l:append(nn.Linear(2, 1))
  l:extend({nn.Tanh()})
  eq(#l, 4, "append/extend")
  eq(l[-1]:_get_name(), "Tanh", "negative index")
  eq(#l:parameters(), 4, "parameters of the list")
  local x = torch.randn(3, 2)
  local y = x
  for _, m in pairs(l) do y = m(y) end
  eq(table.concat(shape(y), "x"), "3x1", "iterate and call")
  raises(function() l(x) end, "ModuleList has no forward()")
  local d = nn.ModuleDict({{"enc", nn.Linear(2, 3)}, {"dec", nn.Linear(3, 2)}})
  eq(#d, 2, "#dict")
  eq(table.concat(d:keys(), " "), "enc dec", "keys in order")
  eq(d.enc.out_features, 3, "by field")
  eq(d["dec"].in_features, 3, "by key")
  ok(d:contains("enc") and not d:contains("x"), "contains")
  d:update({{"act", nn.ReLU()}})
  local ks = {}
  for k, m in pairs(d) do ks[#ks + 1] = k .. "=" .. m:_get_name() end
  eq(table.concat(ks, " "), "enc=Linear dec=Linear act=ReLU", "pairs in order")
  eq(d:pop("act"):_get_name(), "ReLU", "pop")
  eq(#d, 2, "after pop")
  eq(#d:values(), 2, "values")
  raises(function() d:pop("zz") end, "ModuleDict:pop: no module named 'zz'")
  raises(function() nn.ModuleDict({a = 3}) end, "ModuleDict: 'a' must be a module, got number")
end)

-- ---- layers against references ------------------------------------------------------------------------------------

test("Linear: shapes, init bounds, forward against a Lua matmul, non-contiguous/1-D/empty inputs", function()
  local lin = nn.Linear(5, 3):double()
  eq(table.concat(shape(lin.weight), "x"), "3x5", "weight (out, in)")
  eq(table.concat(shape(lin.bias), "x"), "3", "bias (out)")
  local bound = 1 / math.sqrt(5)
  for _, v in ipairs(T.flat(lin.weight)) do ok(math.abs(v) <= bound, "weight within 1/sqrt(fan_in)") end
  for _, v in ipairs(T.flat(lin.bias)) do ok(math.abs(v) <= bound, "bias within 1/sqrt(fan_in)") end
  local W, B = lin.weight:tolist(), lin.bias:tolist()
  local x, xl = rand_tensor({4, 5})
  local ref = matmul(xl, transpose(W))
  for i = 1, 4 do for j = 1, 3 do ref[i][j] = ref[i][j] + B[j] end end
  close(lin(x), ref, 1e-12, 1e-12, "2-D input")
  -- a transposed (non-contiguous) input
  local xt = torch.tensor(transpose(xl), F64):t()
  ok(not xt:is_contiguous(), "non-contiguous")
  close(lin(xt), ref, 1e-12, 1e-12, "non-contiguous input")
  -- 3-D and 1-D inputs
  close(lin(x:reshape(2, 2, 5)), {{ref[1], ref[2]}, {ref[3], ref[4]}}, 1e-12, 1e-12, "3-D input")
  close(lin(x[0]), ref[1], 1e-12, 1e-12, "1-D input")
  eq(table.concat(shape(lin(torch.zeros(0, 5, F64))), "x"), "0x3", "empty batch")
  local nb = nn.Linear(5, 3, {bias = false}):double()
  eq(nb.bias, nil, "bias = false")
  close(nb(x), matmul(xl, transpose(nb.weight:tolist())), 1e-12, 1e-12, "no bias")
  raises(function() lin(torch.randn(2, 4, F64)) end, "Linear(5 -> 3): input has 4 features (shape (2, 4)), expected 5")
  raises(function() nn.Linear(784, 256)(torch.randn(32, 512)) end, "Linear(784 -> 256): input has 512 features")
  raises(function() lin("x") end, "Linear(5 -> 3): expected a tensor input, got string")
  raises(function() nn.Linear(2.5, 3) end, "Linear: in_features must be an integer, got 2.5")
  raises(function() nn.Linear(2, 3, {bais = true}) end, "Linear: unknown option 'bais'")
end)

local function act_ref(name, v)
  if name == "relu" then return math.max(v, 0) end
  if name == "relu6" then return math.min(math.max(v, 0), 6) end
  if name == "leaky" then return v > 0 and v or 0.2 * v end
  if name == "gelu" then return 0.5 * v * (1 + erf(v / math.sqrt(2))) end
  if name == "gelu_tanh" then return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3))) end
  if name == "silu" then return v / (1 + math.exp(-v)) end
  if name == "sigmoid" then return 1 / (1 + math.exp(-v)) end
  if name == "tanh" then return math.tanh(v) end
  if name == "hardswish" then return v * math.min(math.max(v + 3, 0), 6) / 6 end
  if name == "hardsigmoid" then return math.min(math.max(v + 3, 0), 6) / 6 end
end

test("activations: forward against Lua formulas (non-contiguous and 0-dim inputs too)", function()
  local cases = {
    {"relu", nn.ReLU()}, {"relu6", nn.ReLU6()}, {"leaky", nn.LeakyReLU(0.2)}, {"gelu", nn.GELU()},
    {"gelu_tanh", nn.GELU({approximate = "tanh"})}, {"silu", nn.SiLU()}, {"sigmoid", nn.Sigmoid()},
    {"tanh", nn.Tanh()}, {"hardswish", nn.Hardswish()}, {"hardsigmoid", nn.Hardsigmoid()},
  }
  local l = T.rand_list({3, 4}, -5, 5)
  l[1][1], l[1][2], l[1][3] = -3, 3, 0 -- the kinks
  local x = torch.tensor(l, F64)
  local xt = torch.tensor(transpose(l), F64):t()
  for _, c in ipairs(cases) do
    local ref = T.map(l, function(v) return act_ref(c[1], v) end)
    close(c[2](x), ref, 1e-10, 1e-12, c[1])
    close(c[2](xt), ref, 1e-10, 1e-12, c[1] .. " non-contiguous")
    close(c[2](torch.tensor(1.5, F64)), act_ref(c[1], 1.5), 1e-10, 1e-12, c[1] .. " 0-dim")
    eq(c[2](torch.zeros(0, 3)):numel(), 0, c[1] .. " empty")
    close(c[2](x:float()), ref, 1e-5, 1e-6, c[1] .. " float32")
  end
  -- in place: relu/silu modify their input when no grad is needed
  local y = torch.tensor({-1, 2}, F64)
  local r = nn.ReLU({inplace = true})(y)
  ok(rawequal(r, y), "ReLU(inplace) returns its input")
  close(y, {0, 2}, 0, 0, "ReLU(inplace) modified it")
  local z = torch.tensor({-1, 2}, F64)
  nn.LeakyReLU(0.5, true)(z)
  close(z, {-0.5, 2}, 0, 0, "LeakyReLU(inplace)")
  local h = torch.tensor({-1, 4}, F64)
  nn.Hardswish({inplace = true})(h)
  close(h, {act_ref("hardswish", -1), 4}, 1e-12, 0, "Hardswish(inplace)")
  raises(function() nn.GELU({approximate = "fast"}) end, "GELU: approximate must be 'none' or 'tanh', got 'fast'")
  raises(function() nn.ReLU()(3) end, "ReLU: expected a tensor input, got number")
end)

test("composed activations: gradients match PyTorch's formulas", function()
  local l = {-4, -3, -1.5, -0.5, 0.5, 1, 2.5, 3, 4}
  local function grad_of(mod)
    local x = torch.tensor(l, {dtype = "float64", requires_grad = true})
    mod(x):sum():backward()
    return x.grad
  end
  close(grad_of(nn.LeakyReLU(0.1)), T.map(l, function(v) return v > 0 and 1 or 0.1 end), 0, 0, "leaky_relu")
  -- hardswish: 0 below -3, (2x + 3) / 6 on [-3, 3], 1 above
  close(grad_of(nn.Hardswish()), T.map(l, function(v)
    if v < -3 then return 0 elseif v <= 3 then return (2 * v + 3) / 6 else return 1 end
  end), 1e-12, 1e-12, "hardswish")
  -- hardsigmoid: 1/6 strictly inside (-3, 3), 0 at and beyond the kinks
  close(grad_of(nn.Hardsigmoid()), T.map(l, function(v) return (v > -3 and v < 3) and 1 / 6 or 0 end), 1e-12, 1e-12,
    "hardsigmoid")
  -- in-place variants on a tensor that needs grad compute out of place
  local x = torch.tensor(l, {dtype = "float64", requires_grad = true})
  local y = nn.Hardswish({inplace = true})(x * 1)
  y:sum():backward()
  ok(x.grad ~= nil, "inplace hardswish under autograd still differentiates")
end)

test("Softmax, LogSoftmax: rows against Lua, implicit dim, negative dim", function()
  local l = T.rand_list({3, 4}, -3, 3)
  local x = torch.tensor(l, F64)
  local sm, lsm = {}, {}
  for i = 1, 3 do
    local mx = math.max(table.unpack(l[i]))
    local s = 0
    for j = 1, 4 do s = s + math.exp(l[i][j] - mx) end
    sm[i], lsm[i] = {}, {}
    for j = 1, 4 do
      sm[i][j] = math.exp(l[i][j] - mx) / s
      lsm[i][j] = l[i][j] - mx - math.log(s)
    end
  end
  close(nn.Softmax(1)(x), sm, 1e-12, 1e-12, "softmax dim 1")
  close(nn.Softmax(-1)(x), sm, 1e-12, 1e-12, "softmax dim -1")
  close(nn.Softmax()(x), sm, 1e-12, 1e-12, "implicit dim is 1 for 2-D")
  close(nn.LogSoftmax(1)(x), lsm, 1e-12, 1e-12, "log_softmax")
  close(nn.Softmax(0)(x:t()), transpose(sm), 1e-12, 1e-12, "softmax dim 0 of the transpose")
  close(F.softmax(x, {dim = 1}), sm, 1e-12, 1e-12, "F.softmax with options")
  close(F.softmax(x:float(), 1, nil, "float64"), sm, 1e-6, 1e-7, "F.softmax dtype")
  raises(function() nn.Softmax(1.5) end, "Softmax: dim must be an integer, got 1.5")
end)

test("Flatten, Unflatten, Identity", function()
  local x = torch.randn(2, 3, 4, 5)
  eq(table.concat(shape(nn.Flatten()(x)), "x"), "2x60", "Flatten default")
  eq(table.concat(shape(nn.Flatten(0, 1)(x)), "x"), "6x4x5", "Flatten(0, 1)")
  eq(table.concat(shape(nn.Flatten({start_dim = 2})(x)), "x"), "2x3x20", "Flatten start_dim 2")
  close(nn.Flatten()(x), T.map(x:tolist(), function(v) return v end), 0, 0, "values in order")
  local u = nn.Unflatten(1, {3, 2})
  eq(table.concat(shape(u(torch.randn(4, 6))), "x"), "4x3x2", "Unflatten")
  local y = nn.Identity(54, {unused = true})(x)
  ok(rawequal(y, x), "Identity returns its input")
end)

-- the Lua reference for conv2d on nested lists: x (N, C, H, W), w (O, C/g, kh, kw)
local function conv2d_ref(x, w, b, stride, pad, dil, groups)
  local N, Cin, H, W = #x, #x[1], #x[1][1], #x[1][1][1]
  local O, Cg, kh, kw = #w, #w[1], #w[1][1], #w[1][1][1]
  local OH = (H + 2 * pad[1] - dil[1] * (kh - 1) - 1) // stride[1] + 1
  local OW = (W + 2 * pad[2] - dil[2] * (kw - 1) - 1) // stride[2] + 1
  local og = O // groups
  local out = {}
  for n = 1, N do
    out[n] = {}
    for o = 1, O do
      out[n][o] = {}
      local g = (o - 1) // og
      for i = 1, OH do
        out[n][o][i] = {}
        for j = 1, OW do
          local s = b and b[o] or 0
          for c = 1, Cg do
            for p = 1, kh do
              for q = 1, kw do
                local hh = (i - 1) * stride[1] - pad[1] + (p - 1) * dil[1]
                local ww = (j - 1) * stride[2] - pad[2] + (q - 1) * dil[2]
                if hh >= 0 and hh < H and ww >= 0 and ww < W then
                  s = s + x[n][g * Cg + c][hh + 1][ww + 1] * w[o][c][p][q]
                end
              end
            end
          end
          out[n][o][i][j] = s
        end
      end
    end
  end
  return out
end

test("Conv2d: weight shape, init bounds, forward against a Lua loop (stride, padding, dilation, groups)", function()
  local conv = nn.Conv2d(4, 6, {3, 2}, {stride = {2, 1}, padding = {1, 0}, dilation = {1, 2}, groups = 2}):double()
  eq(table.concat(shape(conv.weight), "x"), "6x2x3x2", "weight (out, in/groups, kh, kw)")
  local bound = 1 / math.sqrt(2 * 3 * 2)
  for _, v in ipairs(T.flat(conv.weight)) do ok(math.abs(v) <= bound, "weight bound") end
  for _, v in ipairs(T.flat(conv.bias)) do ok(math.abs(v) <= bound, "bias bound") end
  local x, xl = rand_tensor({2, 4, 5, 6})
  local ref = conv2d_ref(xl, conv.weight:tolist(), conv.bias:tolist(), {2, 1}, {1, 0}, {1, 2}, 2)
  torch.no_grad(function()
    close(conv(x), ref, 1e-10, 1e-10, "conv2d")
    -- unbatched (C, H, W) input
    close(conv(x[0]), ref[1], 1e-10, 1e-10, "unbatched")
    -- a non-contiguous input: the same values through a permute
    local xp = x:permute(0, 2, 3, 1):contiguous():permute(0, 3, 1, 2)
    ok(not xp:is_contiguous(), "non-contiguous")
    close(conv(xp), ref, 1e-10, 1e-10, "non-contiguous input")
    -- depthwise, no bias, padding 'same' with an even kernel (asymmetric padding)
    local dw = nn.Conv2d(4, 4, 2, {groups = 4, bias = false, padding = "same"}):double()
    local y = dw(x)
    eq(table.concat(shape(y), "x"), "2x4x5x6", "same keeps the size")
    local xpad = F.pad(x, {0, 1, 0, 1})
    close(y, conv2d_ref(xpad:tolist(), dw.weight:tolist(), nil, {1, 1}, {0, 0}, {1, 1}, 4), 1e-10, 1e-10, "same, even kernel")
  end)
  raises(function() conv(torch.randn(2, 3, 5, 6, F64)) end,
    "Conv2d(4 -> 6, kernel_size=(3, 2)): input has 3 channels (shape (2, 3, 5, 6)), expected 4")
  raises(function() conv(torch.randn(5, 6, F64)) end,
    "Conv2d(4 -> 6, kernel_size=(3, 2)): expected a 4-D or 3-D input (N, C, H, W) or (C, H, W), got shape (5, 6)")
  raises(function() nn.Conv2d(3, 6, 3, {groups = 2}) end, "Conv2d: in_channels must be divisible by groups")
  raises(function() nn.Conv2d(4, 6, 3, {stride = 2, padding = "same"}) end,
    "Conv2d: padding='same' is not supported for strided convolutions")
  raises(function() nn.Conv2d(4, 6, 3, {padding = "full"}) end, "Conv2d: invalid padding string 'full'")
  raises(function() nn.Conv2d(4, 6, 3, {padding_mode = "reflect"}) end, "Conv2d: padding_mode 'reflect' is not supported")
  raises(function() nn.Conv2d(4, 6, {3, 3, 3}) end, "Conv2d: kernel_size must be an integer or a list of 2 integers")
end)

test("Conv1d: forward against the Lua loop through a 2-D view", function()
  local conv = nn.Conv1d(2, 3, 3, {stride = 2, padding = 1}):double()
  eq(table.concat(shape(conv.weight), "x"), "3x2x3", "weight (out, in, k)")
  local x, xl = rand_tensor({2, 2, 7})
  local x4 = T.map(xl, function(v) return v end)
  for n = 1, 2 do for c = 1, 2 do x4[n][c] = {xl[n][c]} end end
  local w4 = conv.weight:tolist()
  for o = 1, 3 do for c = 1, 2 do w4[o][c] = {w4[o][c]} end end
  local ref = conv2d_ref(x4, w4, conv.bias:tolist(), {1, 2}, {0, 1}, {1, 1}, 1)
  for n = 1, 2 do for o = 1, 3 do ref[n][o] = ref[n][o][1] end end
  torch.no_grad(function() close(conv(x), ref, 1e-10, 1e-10, "conv1d") end)
  raises(function() conv(torch.randn(2, 4, 7, F64)) end, "Conv1d(2 -> 3, kernel_size=(3,)): input has 4 channels")
end)

test("MaxPool2d, AvgPool2d, AdaptiveAvgPool2d against Lua loops", function()
  local x, xl = rand_tensor({2, 3, 5, 6})
  local function pool(kind, k, s, p)
    local out = {}
    for n = 1, 2 do
      out[n] = {}
      for c = 1, 3 do
        out[n][c] = {}
        local OH, OW = (5 + 2 * p - k) // s + 1, (6 + 2 * p - k) // s + 1
        for i = 1, OH do
          out[n][c][i] = {}
          for j = 1, OW do
            local best, sum = -math.huge, 0
            for a = 0, k - 1 do for b = 0, k - 1 do
              local h, w = (i - 1) * s - p + a, (j - 1) * s - p + b
              if h >= 0 and h < 5 and w >= 0 and w < 6 then
                best = math.max(best, xl[n][c][h + 1][w + 1])
                sum = sum + xl[n][c][h + 1][w + 1]
              end
            end end
            out[n][c][i][j] = kind == "max" and best or sum / (k * k)
          end
        end
      end
    end
    return out
  end
  close(nn.MaxPool2d(2)(x), pool("max", 2, 2, 0), 0, 0, "max 2")
  close(nn.MaxPool2d(3, 2, 1)(x), pool("max", 3, 2, 1), 0, 0, "max 3/2/1")
  close(nn.AvgPool2d(2)(x), pool("avg", 2, 2, 0), 1e-12, 1e-12, "avg 2")
  close(nn.AvgPool2d(3, {stride = 1, padding = 1})(x), pool("avg", 3, 1, 1), 1e-12, 1e-12, "avg 3/1/1 counting the padding")
  local out, idx = nn.MaxPool2d(2, {return_indices = true})(x)
  eq(idx.dtype, torch.int64, "indices")
  close(out, pool("max", 2, 2, 0), 0, 0, "with indices")
  local g = {}
  for n = 1, 2 do
    g[n] = {}
    for c = 1, 3 do
      local s = 0
      for _, v in ipairs(T.flat(xl[n][c])) do s = s + v end
      g[n][c] = {{s / 30}}
    end
  end
  close(nn.AdaptiveAvgPool2d(1)(x), g, 1e-12, 1e-12, "global average")
  close(nn.AdaptiveAvgPool2d({1, 1})(x), g, 1e-12, 1e-12, "global average, pair")
  eq(table.concat(shape(nn.AdaptiveAvgPool2d({2, 3})(x)), "x"), "2x3x2x3", "adaptive shape")
  raises(function() nn.AdaptiveAvgPool2d({1, 2, 3}) end, "AdaptiveAvgPool2d: output_size must be an integer or a list of 2 integers")
  raises(function() nn.MaxPool2d() end, "MaxPool2d: kernel_size is required")
end)

-- (issue 26: nn.AdaptiveAvgPool2d(torch.Size{3, 4}) was accepted, then its forward raised an unclear error)
test("pooling layers and their functional forms take torch.Size sizes as the lists they hold", function()
  local x = rand_tensor({2, 3, 6, 7})
  local x1 = rand_tensor({2, 3, 9})
  local S = torch.Size
  local function same(a, b, what) close(a, b:tolist(), 0, 0, what) end
  same(nn.AdaptiveAvgPool2d(S({3, 4}))(x), F.adaptive_avg_pool2d(x, {3, 4}), "AdaptiveAvgPool2d")
  same(F.adaptive_avg_pool2d(x, S({2, 5})), F.adaptive_avg_pool2d(x, {2, 5}), "adaptive_avg_pool2d")
  same(nn.AdaptiveMaxPool2d(S({3, 4}))(x), F.adaptive_max_pool2d(x, {3, 4}), "AdaptiveMaxPool2d")
  same(nn.MaxPool2d(S({2, 3}), {stride = S({1, 2}), padding = S({1, 1})})(x),
    F.max_pool2d(x, {2, 3}, {stride = {1, 2}, padding = {1, 1}}), "MaxPool2d")
  same(F.max_pool2d(x, 3, {dilation = S({2, 1})}), F.max_pool2d(x, 3, {dilation = {2, 1}}), "max_pool2d dilation")
  same(nn.AvgPool2d(S({2, 3}), {padding = S({1, 0})})(x), F.avg_pool2d(x, {2, 3}, {padding = {1, 0}}), "AvgPool2d")
  same(nn.MaxPool1d(S({3}), {stride = S({2})})(x1), F.max_pool1d(x1, 3, {stride = 2}), "MaxPool1d")
  same(nn.AvgPool1d(S({3}))(x1), F.avg_pool1d(x1, 3), "AvgPool1d")
  local err = raises(function() F.adaptive_avg_pool2d(x, S({3})) end,
    "nn.functional.adaptive_avg_pool2d: output_size must be an integer or a list of 2 integers, got a list of 1")
  ok(err:find("^[^\n]*test_nn%.lua:%d+: "), "raised at the caller's line: " .. err)
  raises(function() F.max_pool1d(x1, S({2, 2})) end,
    "nn.functional.max_pool1d: kernel_size must be an integer or a list of 1 integer, got a list of 2")
end)

test("LayerNorm: against Lua over the last dims, affine, errors", function()
  local ln = nn.LayerNorm({3, 4}):double()
  eq(table.concat(shape(ln.weight), "x"), "3x4", "weight shape")
  local x, xl = rand_tensor({2, 3, 4}, -3, 3)
  torch.no_grad(function()
    ln.weight:copy_(torch.rand(3, 4, F64))
    ln.bias:copy_(torch.rand(3, 4, F64))
  end)
  local w, b = ln.weight:tolist(), ln.bias:tolist()
  local ref = {}
  for n = 1, 2 do
    local m, v = mean_var(T.flat(xl[n]))
    ref[n] = {}
    for i = 1, 3 do
      ref[n][i] = {}
      for j = 1, 4 do ref[n][i][j] = (xl[n][i][j] - m) / math.sqrt(v + 1e-5) * w[i][j] + b[i][j] end
    end
  end
  close(ln(x), ref, 1e-9, 1e-9, "layer_norm")
  local plain = nn.LayerNorm(4, {elementwise_affine = false}):double()
  eq(#plain:parameters(), 0, "no affine parameters")
  local m1, v1 = mean_var(xl[1][1])
  close(plain(x)[0][0], T.map(xl[1][1], function(v) return (v - m1) / math.sqrt(v1 + 1e-5) end), 1e-9, 1e-9, "no affine")
  raises(function() ln(torch.randn(2, 4, 3, F64)) end,
    "LayerNorm((3, 4)): expected input with shape (*, 3, 4), but got input of shape (2, 4, 3)")
  raises(function() nn.LayerNorm({1, 1, 1, 1, 1, 1, 1, 1, 1}) end,
    "LayerNorm: normalized_shape has 9 dims; tensors have at most 8")
  eq(#nn.LayerNorm({1, 1, 1, 1, 1, 1, 1, 2}).normalized_shape, 8, "8 dims fit")
end)

test("Embedding: normal init, padding_idx row zero and without gradient, lookups, errors", function()
  local e = nn.Embedding(1000, 8, {padding_idx = -1})
  eq(e.padding_idx, 999, "negative padding_idx counts from the end")
  close(e.weight[999], torch.zeros(8), 0, 0, "padding row zeroed")
  local m, v = mean_var(T.flat(e.weight:narrow(0, 0, 999)))
  ok(math.abs(m) < 0.05 and math.abs(v - 1) < 0.06, ("N(0, 1): mean %g var %g"):format(m, v))
  local idx = torch.tensor({{1, 999}, {5, 1}})
  local out = e(idx)
  eq(table.concat(shape(out), "x"), "2x2x8", "shape (*, dim)")
  close(out[0][0], e.weight[1], 0, 0, "row lookup")
  close(out[1][0], e.weight[5], 0, 0, "row lookup 2")
  out:sum():backward()
  local g = e.weight.grad
  close(g[1], torch.full({8}, 2), 0, 0, "row 1 used twice")
  close(g[999], torch.zeros(8), 0, 0, "no gradient for the padding row")
  close(g[0], torch.zeros(8), 0, 0, "unused row")
  local pre = nn.Embedding.from_pretrained(torch.eye(3))
  eq(pre.weight.requires_grad, false, "frozen by default")
  close(pre(torch.tensor({2})), {{0, 0, 1}}, 0, 0, "pretrained rows")
  raises(function() e(torch.tensor({1.0})) end,
    "Embedding(1000, 8): expected an integer index tensor (int64 or int32), got torch.float32")
  -- at once on the CPU, at the next synchronisation (tolist's) on a device, as PyTorch's device asserts
  raises(function() return e(torch.tensor({1000})):tolist() end, "index 1000 is out of range")
  raises(function() nn.Embedding(3, 2, {padding_idx = 3}) end, "Embedding: padding_idx must be within num_embeddings")
end)

test("functional: pad, linear, one_hot, conv2d positional arguments", function()
  local x, xl = rand_tensor({2, 3})
  local p = F.pad(x, {1, 2})
  local ref = {}
  for i = 1, 2 do ref[i] = {0, xl[i][1], xl[i][2], xl[i][3], 0, 0} end
  close(p, ref, 0, 0, "pad last dim")
  local p2 = F.pad(x, {0, 0, 1, 0}, {value = 7})
  close(p2, {{7, 7, 7}, xl[1], xl[2]}, 0, 0, "pad the first dim with a value")
  close(F.pad(x, {-1, 0}), {{xl[1][2], xl[1][3]}, {xl[2][2], xl[2][3]}}, 0, 0, "negative pad crops")
  raises(function() F.pad(x, {1}) end, "pad: padding length must be divisible by 2")
  raises(function() F.pad(x, {1, 1}, "reflect") end, "pad: only mode 'constant' is supported, got 'reflect'")
  local w, b = torch.randn(4, 3, F64), torch.randn(4, F64)
  close(F.linear(x, w, b), x:matmul(w:t()) + b, 1e-12, 1e-12, "linear")
  close(F.one_hot(torch.tensor({0, 2}), 3), {{1, 0, 0}, {0, 0, 1}}, 0, 0, "one_hot")
  local xi = torch.randn(1, 2, 5, 5, F64)
  local wi = torch.randn(2, 2, 3, 3, F64)
  torch.no_grad(function()
    close(F.conv2d(xi, wi, nil, 2, 1), F.conv2d(xi, wi, nil, {stride = 2, padding = 1}), 0, 0, "positional = options")
  end)
  raises(function() F.conv2d(xi, wi, nil, 1, 0, 1, 1, 9) end, "conv2d: expected at most 4 positional arguments, got 5")
  raises(function() F.conv2d(xi, wi, nil, 2, {stride = 2}) end, "conv2d: 'stride' given both as an argument and as an option")
end)

-- ---- losses ---------------------------------------------------------------------------------------------------

test("loss modules wrap the functional losses", function()
  local logits, y = torch.randn(4, 5), torch.tensor({0, 3, 1, 4})
  if not F.cross_entropy then
    raises(function() nn.CrossEntropyLoss()(logits, y) end,
      "CrossEntropyLoss: nn.functional.cross_entropy is not available (tensh.nn.losses is not in this build)")
    eq(tostring(nn.CrossEntropyLoss()), "CrossEntropyLoss()", "repr")
    return
  end
  close(nn.CrossEntropyLoss()(logits, y), F.cross_entropy(logits, y), 1e-6, 1e-7, "CrossEntropyLoss")
  close(nn.CrossEntropyLoss({reduction = "sum"})(logits, y), F.cross_entropy(logits, y, {reduction = "sum"}), 1e-6, 1e-7,
    "reduction")
  local a, b = torch.randn(3, 2), torch.randn(3, 2)
  close(nn.MSELoss()(a, b), F.mse_loss(a, b), 1e-6, 1e-7, "MSELoss")
  local w = torch.rand(5)
  local l = nn.CrossEntropyLoss({weight = w})
  eq(#l:buffers(), 1, "weight is a buffer")
  close(l(logits, y), F.cross_entropy(logits, y, {weight = w}), 1e-6, 1e-7, "weighted")
end)

-- ---- init -------------------------------------------------------------------------------------------------------

test("nn.init: bounds and moments of each distribution, in place on parameters", function()
  local init = nn.init
  local function moments(t)
    local m, v = mean_var(T.flat(t))
    return m, math.sqrt(v)
  end
  local w = nn.Parameter(torch.empty(200, 100))
  ok(rawequal(init.kaiming_uniform_(w), w), "returns the tensor")
  eq(w.requires_grad, true, "still requires grad")
  local bound = math.sqrt(2) * math.sqrt(3 / 100) -- gain sqrt(2) (leaky_relu, a = 0), fan_in 100
  local mx = 0
  for _, v in ipairs(T.flat(w)) do mx = math.max(mx, math.abs(v)) end
  ok(mx <= bound and mx > 0.98 * bound, ("kaiming_uniform_ bound %g, max %g"):format(bound, mx))
  init.kaiming_uniform_(w, {a = math.sqrt(5)})
  mx = 0
  for _, v in ipairs(T.flat(w)) do mx = math.max(mx, math.abs(v)) end
  ok(mx <= 0.1 and mx > 0.098, "a = sqrt(5): bound 1/sqrt(fan_in), max " .. mx)
  init.kaiming_uniform_(w, {mode = "fan_out", nonlinearity = "relu"})
  local _, s = moments(w)
  ok(math.abs(s - math.sqrt(2 / 200)) < 0.04 * math.sqrt(2 / 200), "fan_out: std " .. s)
  init.kaiming_normal_(w, 0, "fan_in", "relu")
  local m
  m, s = moments(w)
  ok(math.abs(m) < 0.005 and math.abs(s - math.sqrt(2 / 100)) < 0.03 * math.sqrt(2 / 100), "kaiming_normal_ std " .. s)
  init.xavier_uniform_(w, {gain = 2})
  bound = 2 * math.sqrt(6 / 300)
  mx = 0
  for _, v in ipairs(T.flat(w)) do mx = math.max(mx, math.abs(v)) end
  ok(mx <= bound and mx > 0.98 * bound, "xavier_uniform_ bound")
  init.xavier_normal_(w)
  m, s = moments(w)
  ok(math.abs(s - math.sqrt(2 / 300)) < 0.03 * math.sqrt(2 / 300), "xavier_normal_ std " .. s)
  init.uniform_(w, -2, 3)
  m = moments(w)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(T.flat(w)) do lo, hi = math.min(lo, v), math.max(hi, v) end
  ok(lo >= -2 and hi <= 3 and math.abs(m - 0.5) < 0.05, "uniform_(-2, 3)")
  init.normal_(w, {mean = 3, std = 0.5})
  m, s = moments(w)
  ok(math.abs(m - 3) < 0.01 and math.abs(s - 0.5) < 0.01, "normal_(3, 0.5)")
  init.constant_(w, 0.25)
  close(w:sum(), 0.25 * 20000, 0, 0, "constant_")
  init.zeros_(w)
  close(w:abs():sum(), 0, 0, 0, "zeros_")
  init.ones_(w)
  close(w:sum(), 20000, 0, 0, "ones_")
  eq(w.is_leaf, true, "in place under no_grad: still a leaf")
  -- the layers' own initialisation: weight and bias uniform within 1/sqrt(fan_in), reaching it
  local function max_abs(t)
    local m2 = 0
    for _, v in ipairs(T.flat(t)) do m2 = math.max(m2, math.abs(v)) end
    return m2
  end
  for _, layer in ipairs({nn.Linear(100, 300), nn.Conv2d(8, 300, 3, {groups = 2})}) do
    local fan_in = init._calculate_fan_in_and_fan_out(layer.weight)
    local b = 1 / math.sqrt(fan_in)
    for _, name in ipairs({"weight", "bias"}) do
      local mx2 = max_abs(layer[name])
      ok(mx2 <= b and mx2 > 0.95 * b, ("%s %s: bound %g, max %g"):format(layer:_get_name(), name, b, mx2))
    end
  end
  -- conv fans count the receptive field
  local fi, fo = init._calculate_fan_in_and_fan_out(torch.empty(8, 4, 3, 3))
  eq(fi .. "," .. fo, "36,72", "conv fans")
  close(init.calculate_gain("tanh"), 5 / 3, 1e-15, 0, "gain tanh")
  close(init.calculate_gain("leaky_relu", 0.2), math.sqrt(2 / 1.04), 1e-15, 0, "gain leaky_relu")
  close(init.calculate_gain("relu"), math.sqrt(2), 1e-15, 0, "gain relu")
  eq(init.calculate_gain("conv2d"), 1, "gain conv2d")
  raises(function() init.kaiming_uniform_(torch.empty(5)) end,
    "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
  raises(function() init.kaiming_uniform_(w, {mode = "fan_avg"}) end, "kaiming_uniform_: mode fan_avg not supported")
  raises(function() init.calculate_gain("swish") end, "calculate_gain: unsupported nonlinearity swish")
  raises(function() init.uniform_(3) end, "bad argument #1 to 'uniform_' (tensor expected, got number)")
end)

-- ---- gradients and training ------------------------------------------------------------------------------------

test("gradients reach every parameter (MLP with LayerNorm, Embedding, BatchNorm1d)", function()
  if not norm_autograd(function(w) return torch.layer_norm(torch.randn(2, 3), {3}, w, nil, 1e-5) end) then
    T.skip("waiting for layer_norm autograd")
  end
  local Model = nn.Module:extend("Model")
  function Model:init()
    self.emb = nn.Embedding(10, 6)
    self.fc = nn.Linear(6, 8)
    self.bn = nn.BatchNorm1d(8)
    self.ln = nn.LayerNorm(8)
    self.out = nn.Linear(8, 3)
  end
  function Model:forward(idx)
    local h = self.emb(idx):mean(1)
    return self.out(F.gelu(self.ln(self.bn(self.fc(h)))))
  end
  local m = Model()
  local y = m(torch.randint(0, 10, {4, 5}))
  cross_entropy(y, torch.tensor({0, 1, 2, 0})):backward()
  for name, p in m:named_parameters() do
    local g = p.grad
    ok(g ~= nil, "grad for " .. name)
    eq(tostring(g.shape), tostring(p.shape), "grad shape " .. name)
    ok(g:abs():sum():item() > 0, "non-zero grad for " .. name)
  end
end)

test("gradients reach every parameter of a CNN (Conv2d, BatchNorm2d, pools)", function()
  if not conv_autograd() then T.skip("waiting for conv autograd") end
  local m = nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(4, 4, 3, {groups = 4, padding = 1}), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
  cross_entropy(m(torch.randn(3, 1, 8, 8)), torch.tensor({0, 1, 1})):backward()
  for name, p in m:named_parameters() do
    ok(p.grad ~= nil, "grad for " .. name)
    eq(tostring(p.grad.shape), tostring(p.shape), "grad shape " .. name)
    ok(p.grad:abs():sum():item() > 0, "non-zero grad for " .. name)
  end
end)

-- Adam written inline (optim may not be merged): returns a step function
local function adam(params, lr)
  local state, t = {}, 0
  return function()
    t = t + 1
    local _ <close> = torch.no_grad()
    for i, p in ipairs(params) do
      local g = p.grad
      if g then
        local s = state[i] or {m = torch.zeros_like(p), v = torch.zeros_like(p)}
        state[i] = s
        s.m:mul_(0.9):add_(g, {alpha = 0.1})
        s.v:mul_(0.999):add_(g * g, {alpha = 0.001})
        local mhat = s.m / (1 - 0.9 ^ t)
        local vhat = s.v / (1 - 0.999 ^ t)
        p:sub_(mhat / (vhat:sqrt() + 1e-8) * lr)
      end
    end
  end
end

test("a small MLP fits a synthetic dataset to near-zero loss", function()
  torch.manual_seed(1)
  local X = torch.randn(64, 4)
  -- labels from a fixed random teacher, so the task is learnable
  local y = X:matmul(torch.randn(4, 3)):argmax(1)
  local model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))
  local step = adam(model:parameters(), 0.02)
  local loss
  for _ = 1, 300 do
    model:zero_grad()
    loss = cross_entropy(model(X), y)
    loss:backward()
    step()
  end
  ok(loss:item() < 0.02, "final loss " .. loss:item())
  model:eval()
  local acc = model(X):argmax(1):eq(y):float():mean():item()
  eq(acc, 1, "training accuracy")
end)

test("a small CNN fits a synthetic dataset to near-zero loss", function()
  if not conv_autograd() then T.skip("waiting for conv autograd") end
  torch.manual_seed(2)
  -- class 0: a bright left half, class 1: a bright right half, plus noise
  local n = 32
  local X = torch.randn(n, 1, 8, 8) * 0.3
  local labels = {}
  torch.no_grad(function()
    for i = 0, n - 1 do
      labels[i + 1] = i % 2
      X[i]:narrow(2, (i % 2) * 4, 4):add_(1)
    end
  end)
  local y = torch.tensor(labels)
  local model = nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(4, 8, 3, {padding = 1}), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
  local step = adam(model:parameters(), 0.03)
  local loss
  for _ = 1, 150 do
    model:zero_grad()
    loss = cross_entropy(model(X), y)
    loss:backward()
    step()
  end
  ok(loss:item() < 0.05, "final loss " .. loss:item())
  model:eval()
  eq(model(X):argmax(1):eq(y):float():mean():item(), 1, "training accuracy")
end)

T.run()
