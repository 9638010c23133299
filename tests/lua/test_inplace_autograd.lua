-- In-place ops in the autograd graph (issue 21): copy_, fill_, zero_,
-- masked_fill(_), scatter(_add)_, index_put_ / x[i] = v and the elementwise
-- _ ops record a node as PyTorch does, through a view's base (CopySlices,
-- AsStridedBackward0) too; the storage's version counter and the saved-tensor
-- check; prod's gradient at zeros; Tensor.register_hook. Each program runs
-- against PyTorch's gradients, grad_fn names and versions
-- (tests/fixtures/inplace21/inplace21_torch.lua, made by
-- gen_inplace21_fixture.py next to it) and against finite differences. On the
-- cuda pass (TENSH_TEST_DEVICE) the same programs run on the GPU.
local T = require "harness"
local G = require "gradcheck"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local F64 = {dtype = "float64"}

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local fixture = dofile(here .. "../fixtures/inplace21/inplace21_torch.lua")

local function tensor(f, opts)
  if f.bool then return torch.tensor(f.bool):view(f.shape) end
  local t = torch.tensor(f.data, opts or F64)
  return #f.shape == 0 and t:view({}) or t:view(f.shape)
end

-- index constants are int64 in the fixture's data lists
local function index(f) return torch.tensor(f.data, {dtype = "int64"}):view(f.shape) end

-- The programs of gen_inplace21_fixture.py, one per case name: (inputs, constants) -> out, {name = tensor}
local P = {}
function P.copy_broadcast(i)
  local y = i.a * 2
  y:copy_(i.s)
  return y * i.a, {y = y}
end
function P.copy_from_float32(i)
  local y = i.a * 1
  y:copy_(i.s:float())
  return y * y, {y = y}
end
function P.masked_fill_tensor_value(i, c)
  local y = i.a * 1
  y:masked_fill_(c.mask, i.v)
  return y * y, {y = y}
end
function P.masked_fill_broadcast_mask(i, c)
  local m = i.a:masked_fill(c.mask, 2.5)
  return m * i.a, {m = m}
end
function P.masked_fill_mask_larger(i, c)
  local m = i.a:masked_fill(c.mask, -1.0)
  return m, {m = m}
end
function P.scatter_inplace(i, c)
  local y = i.a:clone():scatter_(1, c.idx, i.s)
  return y, {y = y}
end
function P.scatter_add_inplace(i, c)
  local y = i.a:clone():scatter_add_(1, c.idx, i.s)
  return y * y, {y = y}
end
function P.index_put_int(i, c)
  local y = i.a * 1
  y[c.idx] = i.v
  return y * i.a, {y = y}
end
function P.index_put_mask(i, c)
  local y = i.a * 1
  y[c.mask] = i.v
  return y * y, {y = y}
end
function P.index_put_number(i, c)
  local y = i.a * 1
  y[c.idx] = 0.5
  return y * y, {y = y}
end
function P.setitem_select(i)
  local y = i.a * 1
  y[1] = i.s
  return y * i.a, {y = y}
end
function P.setitem_number_slice(i)
  local y = i.a * 1
  y[{{0, 2}, 1}] = 7.0
  return y * y, {y = y}
end
function P.narrow_copy(i)
  local y = i.a * 1
  y:narrow(1, 1, 2):copy_(i.s)
  return y * y, {y = y}
end
function P.view_mul_tensor(i)
  local y = i.a * 1
  local v = y:select(1, 2)
  v:mul_(i.w)
  return y * 3, {y = y, v = v}
end
function P.transposed_view_add(i)
  local y = i.a * 1
  y:t()[1]:add_(i.s)
  return y * y, {y = y}
end
function P.stale_overlapping_views(i)
  local y = i.a * 1
  local v1, v2 = y[{{0, 2}}], y[{{1, 3}}]
  v1:mul_(3)
  return v2 * v2, {v2 = v2, y = y}
end
function P.buffer_rows(i)
  local buf = torch.zeros(3, 2, F64)
  buf[1] = i.s
  buf[2] = i.t * 2
  return buf * buf, {buf = buf}
end
function P.expanded_stale_view(i, c)
  local buf = torch.zeros(3, F64)
  local e = buf:expand(2, 3)
  buf:copy_(i.s)
  return e * c.w, {e = e, buf = buf}
end
function P.fill_number(i)
  local y = i.a * 2
  y:fill_(3.0)
  local z = i.a * 1
  z:zero_()
  return y * i.a + z, {y = y, z = z}
end
function P.fill_tensor_value(i)
  local y = i.a * 2
  y:fill_(i.v)
  return y * i.a, {y = y}
end
function P.elementwise_through_views(i)
  local y = i.a * 1.5
  y[0]:mul_(i.b)
  y:add_(i.b)
  y[1]:clamp_(-0.5, 0.5)
  return y * y, {y = y}
end
function P.prod_one_zero(i) return i.x:prod(), {} end
P.prod_two_zeros, P.prod_no_zero = P.prod_one_zero, P.prod_one_zero
function P.prod_dim1(i) return i.x:prod(1), {} end
function P.prod_dim0(i) return i.x:prod(0), {} end
function P.hooks_replace(i)
  local y = i.a * 2
  y:register_hook(function(g) return g * 3 end)
  i.a:register_hook(function(g) return g + 1 end)
  return y * i.a, {y = y}
end
function P.hook_then_inplace(i)
  local y = i.a * 2
  y:register_hook(function(g) return g * 100 end)
  y:add_(1)
  return y * 1, {y = y}
end
-- hooks change the gradient on purpose, and float32 rounds steps of 1e-6
-- away: finite differences do not apply
local NO_FD = {hooks_replace = true, hook_then_inplace = true, copy_from_float32 = true}

local function constants(case)
  local c = {}
  for k, f in pairs(case.const) do c[k] = f.bool and tensor(f) or (k == "idx" and index(f) or tensor(f)) end
  return c
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

for _, case in ipairs(fixture.cases) do
  local program = assert(P[case.name], "no Lua program for " .. case.name)
  test("against PyTorch: " .. case.name, function()
    local c, inputs = constants(case), {}
    for k, f in pairs(case.inputs) do inputs[k] = tensor(f) end
    for k in pairs(case.grads) do inputs[k].requires_grad = true end
    local out, named = program(inputs, c)
    close(out, T.flat(tensor(case.out)), 1e-12, 1e-12, "out")
    ;(out * tensor(case.r)):sum():backward()
    for _, k in ipairs(sorted_keys(case.grads)) do
      ok(inputs[k].grad ~= nil, k .. ".grad is nil")
      close(inputs[k].grad, T.flat(tensor(case.grads[k])), 1e-10, 1e-12, k .. ".grad")
    end
    for k, name in pairs(case.grad_fn) do eq(tostring(named[k].grad_fn), "<" .. name .. ">", k .. ".grad_fn") end
  end)
  if not NO_FD[case.name] then
    test("finite differences: " .. case.name, function()
      local c, names, lists = constants(case), sorted_keys(case.grads), {}
      for n, k in ipairs(names) do lists[n] = tensor(case.inputs[k]):cpu():tolist() end
      local fixed = {}
      for k, f in pairs(case.inputs) do if not case.grads[k] then fixed[k] = tensor(f) end end
      G.check(case.name, function(...)
        local args, i = {...}, {}
        for k, v in pairs(fixed) do i[k] = v end
        for n, k in ipairs(names) do i[k] = args[n] end
        return (program(i, c))
      end, lists)
    end)
  end
end

test("the version counter counts one per in-place op, as torch's _version", function()
  local a = torch.randn(2, 3, {requires_grad = true})
  local y = a * 1
  local v = {y._version}
  local steps = {
    function() y:add_(1) end, function() y:mul_(2) end, function() y[0] = 1.0 end,
    function() y:masked_fill_(torch.tensor({true, false, true}), 0.0) end,
    function() y:scatter_(1, torch.tensor({{0}, {1}}), torch.ones(2, 1)) end, function() y:copy_(torch.ones(2, 3)) end,
    function() y:fill_(1.0) end, function() y:zero_() end, function() y[torch.tensor({1})] = 2.0 end,
    function() y:clamp_(0, 1) end, function() y:select(0, 1):mul_(2) end, function() y:t():add_(1) end,
  }
  for _, s in ipairs(steps) do
    s()
    v[#v + 1] = y._version
  end
  torch.no_grad(function()
    y:add_(1)
    v[#v + 1] = y._version
    y:scatter_add_(1, torch.tensor({{0}, {1}}), torch.ones(2, 1))
    v[#v + 1] = y._version
    y:uniform_()
    v[#v + 1] = y._version
  end)
  eq(table.concat(v, " "), table.concat(fixture.versions, " "), "versions")
  eq(y[0]._version, y._version, "a view shares its base's counter")
  eq(y:detach()._version, y._version, "so does detach()")
  local function stepped(make)
    local p = nn.Parameter(torch.randn(3))
    p.grad = torch.ones(3)
    make({p}):step()
    return p._version
  end
  eq(stepped(function(ps) return optim.SGD(ps, {lr = 0.1}) end), fixture.sgd_version, "SGD step")
  eq(stepped(function(ps) return optim.Adam(ps, {lr = 0.1}) end), fixture.adam_version, "Adam step")
  -- a new tensor starts at 0, however it was written (torch's creation functions and ops)
  local x = torch.ones(2, 3)
  local fresh = {
    zeros = torch.zeros(2), ones = x, full = torch.full({2}, 3), eye = torch.eye(3), zeros_like = torch.zeros_like(x),
    tensor = torch.tensor({1, 2}), clone = x:clone(), contiguous = x:t():contiguous(), double = x:double(),
    reshape = x:t():reshape(6), masked_fill = x:masked_fill(x:gt(0), 2), scatter = x:scatter(1, torch.tensor({{0}, {1}}), 5.0),
    one_hot = torch.one_hot(torch.tensor({1, 0}), 3), addmm = torch.addmm(torch.ones(2), x, x:t()), cpu = x:cpu(),
  }
  for name, t in pairs(fresh) do eq(t._version, 0, name .. "._version") end
  local h = torch.zeros(3, 2, {device = "cpu"}):t() -- from the test's device: one copy_, one version
  h:copy_(x)
  eq(h._version, 1, "copy_ across devices into a strided tensor")
end)

test("a saved tensor changed in place makes backward raise PyTorch's message", function()
  local cuda_name = T.device ~= "cpu" and "[torch.cuda." or "[torch." -- torch.cuda.DoubleTensor on a GPU
  local function upto_hint(m) return (m:gsub(" Hint:.*$", ""):gsub("%[torch%.", cuda_name)) end
  local a = torch.randn(3, F64):requires_grad_()
  local b = a * 1
  local y = b * b
  b:add_(1)
  raises(function() y:sum():backward() end, upto_hint(fixture.messages.version))
  local x = torch.randn(2, 3, F64):requires_grad_()
  local e = x:exp() -- saves its output
  e[0] = 1
  raises(function() e:sum():backward() end, upto_hint(fixture.messages.output_version))
  -- changed in no_grad: still caught; restored in value does not matter, the count does
  local c = x * 1
  local z = c * c
  torch.no_grad(function() c:mul_(1) end)
  raises(function() z:sum():backward() end, "is at version 1; expected version 0 instead")
  -- an index saved by a gather, then overwritten
  local idx = torch.tensor({0, 2})
  local g = x:index_select(1, idx)
  idx[0] = 1
  raises(function() g:sum():backward() end, "LongTensor [2]]")
  T.close(x * 0, {0, 0, 0, 0, 0, 0}) -- the session goes on
end)

test("in-place on a leaf that requires grad, or a view of one, raises PyTorch's message", function()
  local w = torch.randn(3, {requires_grad = true})
  for _, f in ipairs({
    function() w:add_(1) end, function() w:copy_(torch.ones(3)) end, function() w:fill_(0) end,
    function() w:zero_() end, function() w:masked_fill_(torch.tensor({true, false, true}), 0) end,
    function() w:scatter_(0, torch.tensor({0}), torch.ones(1)) end, function() w[torch.tensor({1})] = 0 end,
    function() w:clamp_(0, 1) end, function() w:uniform_() end, function() w:exp_() end,
  }) do
    raises(f, fixture.messages.leaf)
  end
  raises(function() w[{{0, 2}}]:mul_(2) end, fixture.messages.view_of_leaf)
  raises(function() w[0] = 5 end, fixture.messages.view_of_leaf)
  close(w.grad == nil and 1 or 0, {1}, 0, 0, "nothing was recorded")
  torch.no_grad(function()
    w:add_(1)
    w[0] = 5
  end) -- as optimizers do
  eq(w.is_leaf, true, "still a leaf")
  raises(function() torch.zeros(3):register_hook(function(g) return g end) end, fixture.messages.hook_no_grad)
end)

test("copy_ and in-place ops follow devices and dtypes back", function()
  local s = torch.randn(3, {dtype = "float32", device = "cpu"}):requires_grad_()
  local y = torch.zeros(2, 3, F64) -- on the test's device
  y:copy_(s)
  ;(y * 2):sum():backward()
  eq(s.grad.dtype, torch.float32, "the gradient in the source's dtype")
  eq(tostring(s.grad.device), "cpu", "and on its device")
  close(s.grad, {4, 4, 4}, 0, 0, "summed over the broadcast rows")
  -- integer destinations are not in the graph
  local n = torch.zeros(3, {dtype = "int64"})
  n:copy_(s * 10)
  eq(n.requires_grad, false, "int64 copy")
end)

test("views of a tensor that does not require grad join the graph when it does", function()
  local buf = torch.zeros(4, F64)
  local head = buf[{{0, 2}}]
  eq(head.requires_grad, false, "before")
  local s = torch.randn(4, F64):requires_grad_()
  buf:copy_(s)
  eq(head.requires_grad, true, "after the base took history")
  eq(tostring(head.grad_fn), "<AsStridedBackward0>", "regenerated")
  head:exp_() -- the fast unary path must not skip the graph now
  buf:sum():backward()
  local e = s:detach():exp():tolist()
  close(s.grad, {e[1], e[2], 1, 1}, 1e-12, 0, "grad through the view's exp_")
  -- a view taken out of the graph (detach_) or made a leaf (requires_grad_) leaves its base alone
  local b2 = torch.zeros(4, F64)
  local cut, own = b2[{{0, 2}}], b2[{{2, 4}}]
  cut:detach_()
  own:requires_grad_()
  b2:copy_(s)
  eq(cut.requires_grad, false, "detach_'ed view")
  eq(own.is_leaf, true, "a view made a leaf stays one")
  raises(function() own:mul_(2) end, fixture.messages.leaf)
end)

test("scatter_ with a source larger than the index: unused source elements get 0", function()
  G.check("scatter_ big src", function(a, s)
    return a:clone():scatter_(1, torch.tensor({{0}, {2}}), s)
  end, {T.rand_list({2, 3}), T.rand_list({2, 3})})
  local s = torch.randn(2, 3, F64):requires_grad_()
  torch.zeros(2, 3, F64):scatter_(1, torch.tensor({{1}, {0}}), s):sum():backward()
  close(s.grad, {1, 0, 0, 1, 0, 0}, 0, 0, "s.grad")
end)

test("empty and 0-dim tensors", function()
  local a = torch.randn(0, 3, F64):requires_grad_()
  local y = a * 1
  y:masked_fill_(torch.zeros(0, 3, {dtype = "bool"}), 1)
  y:copy_(torch.ones(3, F64))
  y:sum():backward()
  eq(a.grad.shape, torch.Size({0, 3}), "empty grad")
  local z = torch.tensor(2.0, F64):requires_grad_()
  local w = z * 3
  w:fill_(z)
  w:add_(z)
  w:backward()
  close(z.grad, {2}, 0, 0, "0-dim: w = z + z")
  local p = torch.tensor(0.0, F64):requires_grad_()
  p:prod():backward()
  close(p.grad, {1}, 0, 0, "prod of one 0")
end)

test("register_hook: every use summed first, remove(), errors, autograd.grad", function()
  local a = torch.randn(3, F64):requires_grad_()
  local seen = {}
  local h = a:register_hook(function(g) seen[#seen + 1] = g:clone() end)
  ;(a * 2 + a * 3):sum():backward()
  eq(#seen, 1, "one call with the whole gradient")
  close(seen[1], {5, 5, 5}, 0, 0, "the sum")
  h:remove()
  h:remove() -- twice is harmless
  ;(a * 2):sum():backward()
  eq(#seen, 1, "removed")
  -- non-leaf hooks run in autograd.grad; leaf hooks do not (as PyTorch)
  local calls = {}
  a:register_hook(function() calls[#calls + 1] = "a" end)
  local y = a * 2
  y:register_hook(function() calls[#calls + 1] = "y" end)
  local g = torch.autograd.grad((y * 3):sum(), {a})
  close(g[1], {6, 6, 6}, 0, 0, "autograd.grad")
  eq(table.concat(calls, ","), "y", "hooks run by autograd.grad")
  -- a hook returning the wrong shape, or failing
  local b = torch.randn(3, F64):requires_grad_()
  b:register_hook(function(gr) return gr:sum() end)
  raises(function() (b * 1):sum():backward() end, "the hook has changed the size of value")
  local c = torch.randn(3, F64):requires_grad_()
  local d = c * 1
  d:register_hook(function() error("hook says no") end)
  raises(function() d:sum():backward() end, "hook says no")
  raises(function() c:register_hook(42) end, "function expected")
  -- graphs with hooks are freed: their functions are dropped after the nodes die
  for _ = 1, 50 do
    local t = c * 2
    t:register_hook(function(gr) return gr end)
    t:sum():backward()
  end
  collectgarbage()
  collectgarbage()
  local ok_again = pcall(function() (c * 2):sum():backward() end)
  ok(ok_again, "the session goes on")
end)

test("an in-place op inside a hook or a no_grad region is not recorded", function()
  local a = torch.randn(3, F64):requires_grad_()
  local y = a * 2
  torch.no_grad(function() y:zero_() end)
  eq(tostring(y.grad_fn), "<MulBackward0>", "no_grad keeps the history")
  y:sum():backward()
  close(a.grad, {2, 2, 2}, 0, 0, "the old history's gradient")
end)

T.run()
