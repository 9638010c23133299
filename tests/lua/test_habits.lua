-- PyTorch's habits in Lua (issue 10): for x, y in loader, ds[0], schedulers
-- with positional arguments, ReduceLROnPlateau, index 0 on the library's
-- lists, pin_memory without a GPU.
local T = require "harness"
local test, eq, ok, raises, close = T.test, T.eq, T.ok, T.raises, T.close

-- lists compare by their printed form
local function same(got, want, what) eq(T.fmt(got), T.fmt(want), what) end

local function seq_close(got, want, what)
  eq(#got, #want, what .. ": length")
  for i = 1, #want do
    ok(math.abs(got[i] - want[i]) <= 1e-12 * math.max(1, math.abs(want[i])),
      ("%s: step %d: got %.17g, want %.17g"):format(what, i, got[i], want[i]))
  end
end

test("for x, y in loader do runs one epoch per loop, break included", function()
  local xs, ys = torch.arange(10):float():view(5, 2), torch.arange(5)
  local loader = data.DataLoader(data.TensorDataset(xs, ys), {batch_size = 2})
  for _ = 1, 2 do -- a second loop is a second epoch
    local seen, rows = {}, 0
    for x, y in loader do
      eq(x.shape[0], y.shape[0], "batch rows")
      for _, v in ipairs(y:tolist()) do seen[#seen + 1] = v end
      rows = rows + x.shape[0]
    end
    same(seen, {0, 1, 2, 3, 4}, "labels in order")
    eq(rows, 5, "rows")
  end
  -- a loop left by break: the next loop starts a fresh epoch
  for _, y in loader do same(y:tolist(), {0, 1}, "first batch") break end
  local first
  for _, y in loader do first = first or y:tolist() end
  same(first, {0, 1}, "after break, a new epoch")
  -- the same batches as loader:iter()
  local a, b = {}, {}
  for x in loader do a[#a + 1] = x:sum():item() end
  for x in loader:iter() do b[#b + 1] = x:sum():item() end
  same(a, b, "same as iter()")
  -- a Lua-path dataset (collate_fn) iterates the same way
  local n = 0
  for batch in data.DataLoader(data.TensorDataset(xs), {batch_size = 2, collate_fn = function(s) return #s end}) do
    n = n + batch
  end
  eq(n, 5, "collate_fn path")
end)

test("ds[i] is ds:get(i), counting from 0", function()
  local xs, ys = torch.randn(4, 3), torch.tensor({7, 8, 9, 10})
  local ds = data.TensorDataset(xs, ys)
  for i = 0, 3 do
    local s, g = ds[i], ds:get(i)
    close(s[1], g[1], 0, 0, "x " .. i)
    eq(s[2]:item(), ys[i]:item(), "y " .. i)
  end
  raises(function() return ds[4] end, "out of range")
  local sub = data.Subset(ds, {3, 1})
  eq(sub[0][2]:item(), 10, "Subset[0]")
  eq(sub[1][2]:item(), 8, "Subset[1]")
  eq(data.ConcatDataset({ds, sub})[5][2]:item(), 8, "ConcatDataset[5]")
  ok(ds.get ~= nil and ds.tensors ~= nil, "fields still read")
end)

local function opt_with(lr, n)
  local groups = {}
  for i = 1, n or 1 do groups[i] = {params = {torch.zeros(1, {requires_grad = true})}, lr = lr} end
  return optim.SGD(groups, {lr = lr})
end

local function run(s, opt, steps)
  local out = {opt.param_groups[1].lr}
  for _ = 1, steps do s:step() out[#out + 1] = opt.param_groups[1].lr end
  return out
end

test("schedulers take PyTorch's positional arguments", function()
  local S = optim.lr_scheduler
  local o1, o2 = opt_with(1), opt_with(1)
  seq_close(run(S.StepLR(o1, 3, 0.5), o1, 7), run(S.StepLR(o2, {step_size = 3, gamma = 0.5}), o2, 7), "StepLR")
  local o = opt_with(1)
  seq_close(run(S.StepLR(o, 3, 0.5), o, 7), {1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25}, "StepLR values")
  o = opt_with(2)
  seq_close(run(S.LambdaLR(o, function(e) return 1 / (e + 1) end), o, 3), {2, 1, 2 / 3, 0.5}, "LambdaLR")
  o = opt_with(1)
  seq_close(run(S.MultiStepLR(o, {2, 4}, 0.1), o, 5), {1, 1, 0.1, 0.1, 0.1 * 0.1, 0.1 * 0.1}, "MultiStepLR")
  o = opt_with(1)
  seq_close(run(S.ExponentialLR(o, 0.5), o, 3), {1, 0.5, 0.25, 0.125}, "ExponentialLR")
  o = opt_with(1)
  local cos = run(S.CosineAnnealingLR(o, 4, 0.2), o, 4)
  close(torch.tensor(cos[5]), torch.tensor(0.2), 1e-12, 1e-12, "CosineAnnealingLR reaches eta_min")
  o = opt_with(1)
  seq_close(run(S.LinearLR(o, 0.5, 1, 2), o, 3), {0.5, 0.75, 1, 1}, "LinearLR")
  -- positional and options together; the same option twice is an error
  o = opt_with(1)
  seq_close(run(S.StepLR(o, 2, {gamma = 0.1}), o, 2), {1, 1, 0.1}, "positional + options")
  raises(function() S.StepLR(opt_with(1), 2, {step_size = 3}) end,
    "StepLR: 'step_size' given both as an argument and as an option")
  raises(function() S.StepLR(opt_with(1), 2, 0.1, -1, 5) end, "StepLR: expected at most 3 positional arguments, got 4")
end)

test("ReduceLROnPlateau: PyTorch's schedule, worked by hand", function()
  local S = optim.lr_scheduler
  -- min, abs threshold 0 (better means lower), patience 2, cooldown 1, factor 0.5, min_lr 0.2
  local o = opt_with(1)
  local s = S.ReduceLROnPlateau(o, {mode = "min", factor = 0.5, patience = 2, threshold = 0, threshold_mode = "abs",
    cooldown = 1, min_lr = 0.2})
  local metrics = {10, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}
  local want = {1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2, 0.2}
  local got = {}
  for i, m in ipairs(metrics) do s:step(m) got[i] = o.param_groups[1].lr end
  seq_close(got, want, "min/abs")
  eq(s:get_last_lr()[1], 0.2, "get_last_lr")
  eq(s.last_epoch, #metrics, "last_epoch")
  -- the same, positionally, on two groups with one min_lr each; a tensor metric
  o = opt_with(1, 2)
  s = S.ReduceLROnPlateau(o, "min", 0.5, 2, 0, "abs", 1, {0.2, 0.4})
  for _, m in ipairs(metrics) do s:step(torch.tensor(m)) end
  eq(o.param_groups[1].lr, 0.2, "group 1 stops at its min_lr")
  eq(o.param_groups[2].lr, 0.4, "group 2 stops at its min_lr (0.5 -> max(0.25, 0.4))")
end)

test("ReduceLROnPlateau: max mode with a relative threshold; errors", function()
  local S = optim.lr_scheduler
  local o = opt_with(1)
  -- better means > best * 1.1; patience 0: every step that is not better cuts the lr
  local s = S.ReduceLROnPlateau(o, "max", 0.1, 0, 0.1)
  local got = {}
  for i, m in ipairs({1, 1.05, 1.2, 1.3}) do s:step(m) got[i] = o.param_groups[1].lr end
  seq_close(got, {1, 0.1, 0.1, 0.1 * 0.1}, "max/rel")
  -- defaults: patience 10, factor 0.1, threshold 1e-4 relative
  o = opt_with(1)
  s = S.ReduceLROnPlateau(o)
  for _ = 1, 11 do s:step(5.0) end
  eq(o.param_groups[1].lr, 1, "11 equal steps: 10 bad, not more than patience")
  s:step(5.0)
  close(torch.tensor(o.param_groups[1].lr), torch.tensor(0.1), 1e-15, 0, "12th step cuts")
  s:step(5.0 * (1 - 1e-5))
  eq(s.num_bad_epochs, 1, "a gain below the relative threshold is not an improvement")
  -- eps: a cut smaller than eps is skipped
  o = opt_with(1e-9)
  s = S.ReduceLROnPlateau(o, {patience = 0})
  s:step(1) s:step(1)
  eq(o.param_groups[1].lr, 1e-9, "cut below eps skipped")
  raises(function() S.ReduceLROnPlateau(opt_with(1), {factor = 1.0}) end, "ReduceLROnPlateau: factor must be a number < 1.0, got 1.0")
  raises(function() S.ReduceLROnPlateau(opt_with(1), "mid") end, "ReduceLROnPlateau: mode \"mid\" is unknown")
  raises(function() S.ReduceLROnPlateau(opt_with(1), {threshold_mode = "x"}) end, "threshold mode \"x\" is unknown")
  raises(function() S.ReduceLROnPlateau(opt_with(1, 2), {min_lr = {0.1}}) end, "expected 2 min_lrs (one per group), got 1")
  raises(function() S.ReduceLROnPlateau(opt_with(1), {paitence = 2}) end, "ReduceLROnPlateau: unknown option 'paitence'")
  raises(function() S.ReduceLROnPlateau(opt_with(1)):step("x") end, "the metric must be a number or a one-element tensor")
  raises(function() S.ReduceLROnPlateau(opt_with(1)):step(torch.zeros(2)) end, "got a tensor of 2 elements")
  -- state_dict round trip
  o = opt_with(1)
  s = S.ReduceLROnPlateau(o, {patience = 1})
  s:step(3) s:step(4)
  local s2 = S.ReduceLROnPlateau(opt_with(1), {patience = 1})
  s2:load_state_dict(s:state_dict())
  eq(s2.best, 3, "best") eq(s2.num_bad_epochs, 1, "bad epochs")
end)

test("index 0 on the library's lists says they count from 1", function()
  local m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
  local o = optim.SGD(m:parameters(), {lr = 0.1})
  local s = optim.lr_scheduler.StepLR(o, 1)
  raises(function() return o.param_groups[0].lr end, "param_groups: Lua lists count from 1")
  raises(function() return m:parameters()[0] end, "parameters(): Lua lists count from 1")
  raises(function() return m:children()[0] end, "children(): Lua lists count from 1")
  raises(function() return m:modules()[0] end, "modules(): Lua lists count from 1")
  raises(function() return m:buffers()[0] end, "buffers(): Lua lists count from 1")
  raises(function() return s:get_last_lr()[0] end, "get_last_lr(): Lua lists count from 1")
  raises(function() return o.param_groups[1].params[0] end, "params: Lua lists count from 1")
  raises(function() return nn.ModuleDict({a = nn.ReLU()}):keys()[0] end, "ModuleDict:keys(): Lua lists count from 1")
  -- still Lua lists: [1], #, ipairs, table functions, and a list the library takes back
  eq(#m:parameters(), 2, "#")
  ok(torch.is_tensor(m:parameters()[1]), "[1]")
  local n = 0
  for _, p in ipairs(m:parameters()) do n = n + p:numel() end
  eq(n, 9, "ipairs")
  eq(m:parameters()[3], nil, "past the end is nil, as any list")
  eq(o.param_groups[1].lr, 0.1, "[1]")
  optim.Adam(m:parameters()) -- the list goes back into the library
  nn.utils.clip_grad_norm_(m:parameters(), 1.0)
  local msg = raises(function() return m:parameters()[0] end, "the first element is [1]")
  ok(msg:find("test_habits.lua", 1, true), "at the caller's line: " .. msg)
end)

test("pin_memory on a machine without a GPU warns once", function()
  if cuda.is_available() then T.skip("a CUDA device is present") end
  -- the warning goes to stderr: run a child tensh and read it
  local exe = (os.getenv("TENSH_BUILD") or "../../build") .. "/tensh"
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write([[
local ds = data.TensorDataset(torch.zeros(4, 2))
for _ = 1, 3 do
  for x in data.DataLoader(ds, {batch_size = 2, pin_memory = true}) do assert(not x:is_pinned()) end
end
print("done")
]])
  f:close()
  local p = io.popen(("%q %q 2>&1"):format(exe, script))
  local out = p:read("a")
  p:close()
  os.remove(script)
  local _, count = out:gsub("'pin_memory' is true but no CUDA device is found", "")
  eq(count, 1, "one warning: " .. out)
  ok(out:find("done", 1, true), "the script ran on")
end)

test("library tables are strict: a missing name raises and suggests the nearest", function()
  raises(function() return torch.flaot32 end, "torch has no field 'flaot32' (did you mean 'float32'?)")
  raises(function() return torch.zeros(2, {dtype = torch.flaot32}) end, "did you mean 'float32'?")
  raises(function() return nn.Lienar end, "nn has no field 'Lienar' (did you mean 'Linear'?)")
  raises(function() return nn.functional.rleu end, "nn.functional has no field 'rleu' (did you mean 'relu'?)")
  raises(function() return nn.init.xavier_unifrom_ end, "did you mean 'xavier_uniform_'?")
  raises(function() return optim.Adma end, "optim has no field 'Adma' (did you mean 'Adam'?)")
  raises(function() return optim.lr_scheduler.StepLr end, "did you mean 'StepLR'?")
  raises(function() return data.DataLoder end, "data has no field 'DataLoder' (did you mean 'DataLoader'?)")
  raises(function() return data.transforms.Normalise end, "did you mean 'Normalize'?")
  raises(function() return cuda.is_avaliable end, "cuda has no field 'is_avaliable' (did you mean 'is_available'?)")
  -- nothing near: no suggestion
  local msg = raises(function() return torch.completely_unknown_name end, "torch has no field 'completely_unknown_name'")
  ok(not msg:find("did you mean", 1, true), "no suggestion: " .. msg)
  -- the caller's line
  ok(msg:find("test_habits.lua", 1, true), "at the caller's line: " .. msg)
  -- private names and the fields a build may lack can be probed; writes work
  eq(torch._no_such_private_thing, nil, "private probe")
  ok(cuda.version == nil or type(cuda.version) == "string", "cuda.version probe")
  eq(rawget(torch, "flaot32"), nil, "rawget probes")
  torch.my_constant = 3
  eq(torch.my_constant, 3, "a new field")
  torch.my_constant = nil
  eq(torch[1], nil, "a non-string key")
end)

test("wrong method names on tensors and modules suggest the nearest; '.' for ':' says so", function()
  local t = torch.ones(3)
  raises(function() return t:itme() end, "Tensor has no field 'itme' (did you mean 'item'?)")
  raises(function() return t.shpae end, "Tensor has no field 'shpae' (did you mean 'shape'?)")
  raises(function() return t:unsqeeze(0) end, "did you mean 'unsqueeze'?")
  eq(t.grad, nil, "a property that is nil still reads as nil")
  eq(t:sum():item(), 3, "methods still work")
  raises(function() return t:sum().item() end,
    "bad argument #1 to 'item' (tensor expected, got no value; a method is called with ':', as t:item())")
  raises(function() return t.size() end, "a method is called with ':', as t:size()")
  local m = nn.Linear(3, 2)
  raises(function() return m:foward(t) end, "Linear has no field 'foward' (did you mean 'forward'?)")
  raises(function() return m:paramters() end, "did you mean 'parameters'?")
  -- module attributes that are missing and not near a method read as nil (user code probes its own)
  eq(m.hidden_state, nil, "a user attribute")
  local lin = nn.Linear(3, 2, {bias = false})
  eq(lin.bias, nil, "a registered nil parameter")
  local Net = nn.Module:extend("Net")
  function Net:init() self.cache = nil end
  function Net:forward(x) if self.cache == nil then self.cache = x end return x end
  local net = Net()
  eq(net(t):sum():item(), 3, "a user module that probes its own attribute")
  raises(function() return net:fowrard(t) end, "Net has no field 'fowrard' (did you mean 'forward'?)")
end)

T.run()
