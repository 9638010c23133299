-- Optimizers (optim.SGD/Adam/AdamW/RMSprop) against updates computed here in
-- plain Lua doubles, state_dict round trips, lr schedulers against PyTorch's
-- formulas and documented values, gradient clipping, small training runs,
-- and the error paths.
local T = require "harness"
local F = require "tensh.nn.losses"
local U = require "tensh.nn.utils"
local test, eq, raises, ok, close = T.test, T.eq, T.raises, T.ok, T.close
local R = T.rand_list
local S = optim.lr_scheduler

local function f64(l, rg) return torch.tensor(l, {dtype = "float64", requires_grad = rg}) end

-- ---- Lua references: one element at a time, state in plain tables -----------

local function sgd_ref(p, g, st, o)
  local lr, mom, damp, wd = o.lr or 1e-3, o.momentum or 0, o.dampening or 0, o.weight_decay or 0
  for i = 1, #p do
    local d = o.maximize and -g[i] or g[i]
    d = d + wd * p[i]
    if mom ~= 0 then
      if st[i] == nil then st[i] = d else st[i] = mom * st[i] + (1 - damp) * d end
      d = o.nesterov and d + mom * st[i] or st[i]
    end
    p[i] = p[i] - lr * d
  end
end

local function adam_ref(p, g, st, o, decoupled)
  local lr, eps = o.lr or 1e-3, o.eps or 1e-8
  local b1, b2 = (o.betas or {0.9, 0.999})[1], (o.betas or {0.9, 0.999})[2]
  local wd = o.weight_decay or (decoupled and 1e-2 or 0)
  st.t = (st.t or 0) + 1
  for i = 1, #p do
    local s = st[i] or {m = 0, v = 0, vmax = 0}
    st[i] = s
    local d = o.maximize and -g[i] or g[i]
    if decoupled then p[i] = p[i] * (1 - lr * wd) else d = d + wd * p[i] end
    s.m = b1 * s.m + (1 - b1) * d
    s.v = b2 * s.v + (1 - b2) * d * d
    s.vmax = math.max(s.vmax, s.v)
    local v = o.amsgrad and s.vmax or s.v
    local mhat_scale = 1 / (1 - b1 ^ st.t)
    local denom = math.sqrt(v) / math.sqrt(1 - b2 ^ st.t) + eps
    p[i] = p[i] - lr * mhat_scale * s.m / denom
  end
end

local function rmsprop_ref(p, g, st, o)
  local lr, a, eps, wd, mom = o.lr or 1e-2, o.alpha or 0.99, o.eps or 1e-8, o.weight_decay or 0, o.momentum or 0
  for i = 1, #p do
    local s = st[i] or {sq = 0, ga = 0, buf = 0}
    st[i] = s
    local d = o.maximize and -g[i] or g[i]
    d = d + wd * p[i]
    s.sq = a * s.sq + (1 - a) * d * d
    local avg
    if o.centered then
      s.ga = a * s.ga + (1 - a) * d
      avg = math.sqrt(s.sq - s.ga * s.ga) + eps
    else
      avg = math.sqrt(s.sq) + eps
    end
    if mom > 0 then
      s.buf = mom * s.buf + d / avg
      p[i] = p[i] - lr * s.buf
    else
      p[i] = p[i] - lr * d / avg
    end
  end
end

-- Runs `steps` steps of optimizer `make` on a (2, 3) and a (4) float64
-- parameter with fresh random grads, against ref(p, g, state, opts).
local function check_optimizer(name, make, ref, o, steps)
  local p1, p2 = R({2, 3}), R({4})
  local a, b = f64(p1, true), f64(p2, true)
  local opt = make({a, b}, o)
  local r1, r2, s1, s2 = T.flat(p1), T.flat(p2), {}, {}
  for step = 1, steps or 4 do
    local g1, g2 = R({2, 3}), R({4})
    a.grad, b.grad = f64(g1), f64(g2)
    opt:step()
    ref(r1, T.flat(g1), s1, o)
    ref(r2, T.flat(g2), s2, o)
    close(a, r1, 1e-10, 1e-12, ("%s step %d, param 0"):format(name, step))
    close(b, r2, 1e-10, 1e-12, ("%s step %d, param 1"):format(name, step))
  end
  ok(a.requires_grad and a.is_leaf, name .. ": the parameter stays a leaf that requires grad")
end

-- ---- optimizers ----------------------------------------------------------------

test("SGD against hand-computed updates", function()
  local make = function(p, o) return optim.SGD(p, o) end
  check_optimizer("sgd", make, sgd_ref, {lr = 0.1})
  check_optimizer("sgd momentum", make, sgd_ref, {lr = 0.1, momentum = 0.9})
  check_optimizer("sgd dampening", make, sgd_ref, {lr = 0.05, momentum = 0.8, dampening = 0.3, weight_decay = 0.1})
  check_optimizer("sgd nesterov", make, sgd_ref, {lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01})
  check_optimizer("sgd maximize", make, sgd_ref, {lr = 0.1, momentum = 0.5, maximize = true, weight_decay = 0.2})
  check_optimizer("sgd default lr", make, sgd_ref, {})
end)

test("Adam and AdamW against hand-computed updates", function()
  local adam = function(p, o) return optim.Adam(p, o) end
  local adamw = function(p, o) return optim.AdamW(p, o) end
  local w = function(p, g, s, o) return adam_ref(p, g, s, o, true) end
  check_optimizer("adam", adam, adam_ref, {lr = 0.1}, 5)
  check_optimizer("adam defaults", adam, adam_ref, {})
  check_optimizer("adam wd betas eps", adam, adam_ref, {lr = 0.05, betas = {0.8, 0.9}, eps = 1e-3, weight_decay = 0.1})
  check_optimizer("adam amsgrad", adam, adam_ref, {lr = 0.1, amsgrad = true}, 6)
  check_optimizer("adam maximize", adam, adam_ref, {lr = 0.1, maximize = true, weight_decay = 0.1})
  check_optimizer("adamw", adamw, w, {lr = 0.1})
  check_optimizer("adamw wd amsgrad", adamw, w, {lr = 0.1, weight_decay = 0.3, amsgrad = true, maximize = true}, 5)
end)

test("RMSprop against hand-computed updates", function()
  local make = function(p, o) return optim.RMSprop(p, o) end
  check_optimizer("rmsprop", make, rmsprop_ref, {})
  check_optimizer("rmsprop momentum", make, rmsprop_ref, {lr = 0.05, momentum = 0.9, alpha = 0.9})
  check_optimizer("rmsprop centered", make, rmsprop_ref, {lr = 0.01, centered = true, weight_decay = 0.1}, 5)
  check_optimizer("rmsprop centered momentum maximize", make, rmsprop_ref,
    {lr = 0.01, centered = true, momentum = 0.5, maximize = true, eps = 1e-4}, 5)
end)

-- (the fuzzer's find, issue 26: printing a value nested 200000 deep overflowed Lua's stack)
test("bad option values nested deep, holding themselves or long are shown cut short", function()
  local p = nn.Linear(2, 2):parameters()
  local deep, cyclic = {}, {}
  local t = deep
  for _ = 1, 200000 do t[1] = {}; t = t[1] end
  cyclic[1] = cyclic
  raises(function() optim.RMSprop(p, {alpha = deep}) end, "RMSprop: invalid alpha value: {{{{{{{{{...}}}}}}}}} (expected")
  raises(function() optim.Adam(p, {betas = cyclic}) end, "Adam: betas must be a list of two numbers, got {{{{{{{{{...}}}}}}}}}")
  local long = {}
  for i = 1, 20 do long[i] = i end
  raises(function() optim.SGD(p, {lr = 0.1, momentum = long}) end,
    "SGD: invalid momentum value: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, ...}")
end)

test("float32 parameters follow the same updates within float32 rounding", function()
  local p = R({5})
  local a = torch.tensor(p, {requires_grad = true})
  local opt = optim.Adam({a}, {lr = 0.1, weight_decay = 0.1})
  local r, st = T.flat(p), {}
  for _ = 1, 3 do
    local g = R({5})
    a.grad = torch.tensor(g)
    opt:step()
    adam_ref(r, g, st, {lr = 0.1, weight_decay = 0.1})
  end
  eq(a.dtype, torch.float32, "dtype kept")
  close(a, r, 1e-5, 1e-6, "float32 adam")
  -- the plain case (no weight decay, amsgrad or maximize) has its own
  -- vectorised float loop: sizes past a vector and a thread's share, and the
  -- moments too
  for _, n in ipairs({5, 37, 70001}) do
    local p2 = R({n})
    local b = torch.tensor(p2, {requires_grad = true})
    local opt2 = optim.Adam({b}, {lr = 0.05, betas = {0.8, 0.95}, eps = 1e-6})
    local r2, st2 = T.flat(p2), {}
    for _ = 1, 4 do
      local g = R({n})
      b.grad = torch.tensor(g)
      opt2:step()
      adam_ref(r2, g, st2, {lr = 0.05, betas = {0.8, 0.95}, eps = 1e-6})
    end
    close(b, r2, 1e-5, 1e-6, "float32 plain adam, " .. n .. " elements")
    local s, m, v = opt2.state[b], {}, {}
    for i = 1, n do m[i], v[i] = st2[i].m, st2[i].v end
    close(s.exp_avg, m, 1e-5, 1e-7, "exp_avg, " .. n .. " elements")
    close(s.exp_avg_sq, v, 1e-5, 1e-9, "exp_avg_sq, " .. n .. " elements")
  end
end)

test("parameter groups with their own lr, nil grads skipped", function()
  local a, b, c = f64({1, 2}, true), f64({3, 4}, true), f64({5}, true)
  local opt = optim.SGD({{params = {a, b}}, {params = {c}, lr = 1.0, momentum = 0.5}}, {lr = 0.1})
  eq(#opt.param_groups, 2, "two groups")
  eq(opt.param_groups[1].lr, 0.1, "group 0 takes the default lr")
  eq(opt.param_groups[1].momentum, 0, "group 0 default momentum")
  eq(opt.param_groups[2].lr, 1.0, "group 1 keeps its lr")
  a.grad, c.grad = f64({1, 1}), f64({2})
  opt:step()
  close(a, {0.9, 1.9}, 1e-12, 0, "group 0 with lr 0.1")
  close(b, {3, 4}, 0, 0, "b has no grad: unchanged")
  close(c, {3}, 1e-12, 0, "group 1 with lr 1")
  eq(opt.state[b], nil, "no state for a skipped parameter")
  opt.param_groups[1].lr = 0.5 -- mutable, as schedulers do
  opt:step()
  close(a, {0.4, 1.4}, 1e-12, 0, "new lr used")
  -- a single tensor as a group's params, and add_param_group
  local d = f64({1}, true)
  opt:add_param_group({params = d, lr = 2})
  eq(opt.param_groups[3].params[1], d, "added group")
  eq(opt.param_groups[3].dampening, 0, "defaults filled in")
  raises(function() opt:add_param_group({params = {a}}) end, "some parameters appear in more than one parameter group", "duplicate")
end)

test("zero_grad and step(closure)", function()
  local w = f64({1, -2, 3}, true)
  local opt = optim.SGD({w}, {lr = 0.1})
  local loss = opt:step(function()
    opt:zero_grad()
    local l = (w * w):sum()
    l:backward()
    return l
  end)
  close(loss, 14, 0, 0, "closure's loss returned")
  close(w, {0.8, -1.6, 2.4}, 1e-12, 0, "stepped with the closure's grads")
  ok(w.grad ~= nil, "grad present")
  local g = w.grad
  opt:zero_grad({set_to_none = false})
  close(w.grad, {0, 0, 0}, 0, 0, "zeroed in place")
  ok(rawequal(w.grad, g) or w.grad:data_ptr() == g:data_ptr(), "the same tensor")
  -- several at once (float32, float64, a strided one, float16: the last two one by one)
  local ps = {f64({1, 2}, true), torch.ones(3, {requires_grad = true}), torch.ones(2, 2, {requires_grad = true}),
    torch.ones(2, {dtype = torch.float16, requires_grad = true})}
  for _, p in ipairs(ps) do p.grad = torch.ones_like(p) * 3 end
  ps[3].grad = torch.ones(2, 2):t() * 3
  optim.SGD(ps):zero_grad({set_to_none = false})
  for i, p in ipairs(ps) do eq(p.grad:abs():sum():item(), 0, "grad " .. i .. " zeroed") end
  opt:zero_grad()
  eq(w.grad, nil, "set_to_none by default")
  -- step under an outer no_grad still lets the closure build a graph
  torch.no_grad(function()
    opt:step(function() local l = (w * w):sum(); l:backward(); return l end)
  end)
  ok(w.grad ~= nil, "closure ran with grad enabled")
  eq(torch.is_grad_enabled(), true, "grad mode restored")
end)

test("state_dict has PyTorch's layout and a round trip continues identically", function()
  for _, make in ipairs({
    function(p) return optim.Adam(p, {lr = 0.05, amsgrad = true}) end,
    function(p) return optim.SGD(p, {lr = 0.05, momentum = 0.9, nesterov = true}) end,
    function(p) return optim.RMSprop({{params = {p[1]}}, {params = {p[2]}, lr = 0.003}}, {centered = true, momentum = 0.3}) end,
    function(p) return optim.AdamW(p) end,
  }) do
    local init1, init2 = R({3, 2}), R({2})
    local a, b = f64(init1, true), f64(init2, true)
    local opt = make({a, b})
    local grads = {}
    for i = 1, 6 do grads[i] = {f64(R({3, 2})), f64(R({2}))} end
    for i = 1, 3 do a.grad, b.grad = grads[i][1], grads[i][2]; opt:step() end
    local sd = opt:state_dict()
    local name = opt.__name
    ok(sd.state[0] ~= nil and sd.state[1] ~= nil, name .. ": state keyed from 0")
    local flat_params = {}
    for _, g in ipairs(sd.param_groups) do for _, i in ipairs(g.params) do flat_params[#flat_params + 1] = i end end
    eq(T.fmt(flat_params), "{0, 1}", name .. ": params as indices")
    ok(type(sd.param_groups[1].lr) == "number", name .. ": hyperparameters saved")
    if name ~= "SGD" then
      ok(torch.is_tensor(sd.state[0].step), name .. ": step is a tensor")
      eq(sd.state[0].step:item(), 3.0, name .. ": step count")
      eq(sd.state[0].step.dtype, torch.float32, name .. ": step dtype")
    else
      ok(torch.is_tensor(sd.state[0].momentum_buffer), "SGD momentum_buffer")
    end
    -- a second optimizer over copies of the parameters, loaded from sd
    local a2, b2 = a:detach():clone():requires_grad_(), b:detach():clone():requires_grad_()
    local opt2 = make({a2, b2})
    opt2:load_state_dict(sd)
    for i = 4, 6 do
      a.grad, b.grad = grads[i][1], grads[i][2]
      a2.grad, b2.grad = grads[i][1]:clone(), grads[i][2]:clone()
      opt:step()
      opt2:step()
    end
    close(a2, a, 0, 0, name .. ": param 0 after the round trip")
    close(b2, b, 0, 0, name .. ": param 1 after the round trip")
  end
end)

test("load_state_dict casts the state to the parameter's dtype and checks sizes", function()
  local a = f64({1, 2}, true)
  local opt = optim.Adam({a})
  a.grad = f64({1, 1})
  opt:step()
  local sd = opt:state_dict()
  local b = torch.tensor({1.0, 2.0}, {requires_grad = true})
  local opt2 = optim.Adam({b})
  opt2:load_state_dict(sd)
  eq(opt2.state[b].exp_avg.dtype, torch.float32, "cast to float32")
  -- rawequal: an identity test (== compares the values of one-element tensors only)
  ok(not rawequal(opt2.state[b].exp_avg, sd.state[0].exp_avg), "a copy")
  raises(function() optim.Adam({f64({1, 2}, true), f64({1}, true)}):load_state_dict(sd) end,
    "loaded state dict contains a parameter group that doesn't match the size of optimizer's group", "group size")
  raises(function() optim.Adam({{params = {f64({1}, true)}}, {params = {f64({1}, true)}}}):load_state_dict(sd) end,
    "loaded state dict has a different number of parameter groups (1) than the optimizer (2)", "group count")
  raises(function() optim.Adam({f64({1, 2, 3}, true)}):load_state_dict(sd) end,
    "state 'exp_avg' of parameter 0 has size torch.Size([2]) but the parameter has size torch.Size([3])", "state size")
  raises(function() opt2:load_state_dict(42) end, "expected a table with 'state' and 'param_groups'", "not a table")
  raises(function() opt2:load_state_dict({state = {}, param_groups = {{params = {0}, lr = -1, betas = {0.9, 0.999}, eps = 1e-8,
    weight_decay = 0, amsgrad = false, maximize = false}}}) end, "invalid lr value: -1", "bad saved lr")
end)

test("optimizer errors", function()
  local w = torch.randn(2, {requires_grad = true})
  raises(function() optim.SGD({w}, {lr = -0.1}) end, "SGD: invalid lr value: -0.1", "negative lr")
  raises(function() optim.Adam({w}, {betas = {0.9, 1.0}}) end, "Adam: invalid beta parameter at index 1: 1.0", "beta2 = 1")
  raises(function() optim.AdamW({w}, {betas = {-0.1, 0.9}}) end, "invalid beta parameter at index 0", "beta1 < 0")
  raises(function() optim.Adam({w}, {betas = 0.9}) end, "betas must be a list of two numbers", "betas type")
  raises(function() optim.Adam({w}, {eps = -1}) end, "invalid eps value", "eps")
  raises(function() optim.RMSprop({w}, {alpha = -1}) end, "invalid alpha value", "alpha")
  raises(function() optim.SGD({w}, {momentum = -1}) end, "invalid momentum value", "momentum")
  raises(function() optim.SGD({w}, {weight_decay = -1}) end, "invalid weight_decay value", "weight_decay")
  raises(function() optim.SGD({w}, {nesterov = true}) end, "Nesterov momentum requires a momentum and zero dampening", "nesterov")
  raises(function() optim.SGD({torch.randn(2)}) end, "optimizer can only optimize tensors that require grad", "no requires_grad")
  raises(function() optim.SGD({w, 3}) end, "optimizer can only optimize tensors, but parameter 2 is a number", "non-tensor")
  raises(function() optim.SGD({w * 2}) end, "can't optimize a non-leaf tensor", "non-leaf")
  raises(function() optim.SGD({}) end, "optimizer got an empty parameter list", "empty")
  raises(function() optim.SGD(w) end, "params should be a list of tensors or a list of parameter groups, but got Tensor", "bare tensor")
  raises(function() optim.SGD({w, w}) end, "appears twice", "duplicate in a group")
  raises(function() optim.Adam({w}, {learning_rate = 0.1}) end, "Adam: unknown option 'learning_rate'", "typo")
  raises(function() optim.Adam({w}, {amsgrad = 1}) end, "amsgrad must be true or false", "flag type")
  raises(function() optim.Adam({{params = {w}, lr = -1}}) end, "invalid lr value: -1", "group lr")
  raises(function() optim.Adam({w}):step(3) end, "closure must be a function", "closure")
  -- the in-place update of a leaf is refused outside no_grad: step runs under it
  local before = w:detach():clone()
  local opt = optim.SGD({w}, {lr = 0.1})
  w.grad = torch.ones(2)
  opt:step()
  close(w, (before - 0.1):tolist(), 1e-6, 0, "updated in place")
  eq(torch.is_grad_enabled(), true, "grad mode restored after step")
end)

-- ---- gradient clipping -----------------------------------------------------------

test("clip_grad_norm_ and clip_grad_value_", function()
  local g1, g2 = R({2, 3}), R({4})
  local function setup()
    local a, b, c = f64(R({2, 3}), true), f64(R({4}), true), f64({1}, true)
    a.grad, b.grad = f64(g1), f64(g2)
    return a, b, c
  end
  local all = T.flat(g1)
  for _, v in ipairs(g2) do all[#all + 1] = v end
  local function pnorm(p)
    if p == math.huge then
      local m = 0
      for _, v in ipairs(all) do m = math.max(m, math.abs(v)) end
      return m
    end
    local s = 0
    for _, v in ipairs(all) do s = s + math.abs(v) ^ p end
    return s ^ (1 / p)
  end
  for _, p in ipairs({2, 1, 3, math.huge}) do
    local a, b, c = setup()
    local total = pnorm(p)
    local max_norm = total / 2
    local got = U.clip_grad_norm_({a, b, c}, max_norm, {norm_type = p})
    eq(got:dim(), 0, "0-dim total")
    close(got, total, 1e-10, 0, "total norm p=" .. p)
    local coef = max_norm / (total + 1e-6)
    close(a.grad, T.map(g1, function(v) return v * coef end), 1e-10, 1e-14, "clipped grads p=" .. p)
    close(b.grad, T.map(g2, function(v) return v * coef end), 1e-10, 1e-14, "clipped grads p=" .. p)
    eq(c.grad, nil, "nil grad untouched")
  end
  local a, b = setup()
  U.clip_grad_norm_({a, b}, pnorm(2) * 10)
  close(a.grad, g1, 0, 0, "below max_norm: unchanged")
  close(U.clip_grad_norm_(a, 1e9), pnorm(2) * 0 + math.sqrt((function() local s = 0 for _, v in ipairs(T.flat(g1)) do s = s + v * v end return s end)()), 1e-10, 0, "a single tensor")
  close(U.clip_grad_norm_({f64({1}, true)}, 1.0), 0, 0, 0, "no grads: total 0")
  a.grad = f64({{0 / 0, 1, 1}, {1, 1, 1}})
  raises(function() U.clip_grad_norm_({a}, 1.0, {error_if_nonfinite = true}) end, "non-finite", "nonfinite")
  ok(U.clip_grad_norm_({a}, 1.0):item() ~= U.clip_grad_norm_({a}, 1.0):item(), "NaN norm without the check")
  raises(function() U.clip_grad_norm_({a, "x"}, 1.0) end, "clip_grad_norm_: parameters[2] must be a tensor, got string", "type")
  raises(function() U.clip_grad_norm_({a}, "1") end, "max_norm must be a number", "max_norm")
  raises(function() U.clip_grad_norm_({a}, 1, {norm = 2}) end, "unknown option 'norm'", "option")
  -- clip_grad_value_
  a, b = setup()
  U.clip_grad_value_({a, b}, 0.5)
  close(a.grad, T.map(g1, function(v) return math.max(-0.5, math.min(0.5, v)) end), 0, 0, "clamped")
  close(b.grad, T.map(g2, function(v) return math.max(-0.5, math.min(0.5, v)) end), 0, 0, "clamped")
  raises(function() U.clip_grad_value_({a}, nil) end, "clip_value must be a number", "clip_value")
end)

-- ---- lr schedulers ------------------------------------------------------------------

local function lrs(sched, n, group)
  local out = {sched:get_last_lr()[group or 1]}
  for _ = 2, n do sched:step(); out[#out + 1] = sched:get_last_lr()[group or 1] end
  return out
end

local function opt_with(lr, extra)
  local o = {lr = lr}
  for k, v in pairs(extra or {}) do o[k] = v end
  return optim.SGD({torch.zeros(1, {requires_grad = true})}, o)
end

test("StepLR, MultiStepLR, ExponentialLR, LinearLR: PyTorch's documented sequences", function()
  -- the examples in PyTorch's docstrings
  local s = lrs(S.StepLR(opt_with(0.05), {step_size = 30}), 100)
  for e = 0, 99 do close(s[e + 1], e < 30 and 0.05 or e < 60 and 0.005 or e < 90 and 0.0005 or 0.00005, 1e-12, 0, "StepLR epoch " .. e) end
  s = lrs(S.MultiStepLR(opt_with(0.05), {milestones = {30, 80}, gamma = 0.1}), 100)
  for e = 0, 99 do close(s[e + 1], e < 30 and 0.05 or e < 80 and 0.005 or 0.0005, 1e-12, 0, "MultiStepLR epoch " .. e) end
  s = lrs(S.MultiStepLR(opt_with(1), {milestones = {2, 2, 4}, gamma = 0.5}), 6)
  close(s, {1, 1, 0.25, 0.25, 0.125, 0.125}, 1e-15, 0, "a repeated milestone")
  s = lrs(S.LinearLR(opt_with(0.05), {start_factor = 0.5, total_iters = 4}), 7)
  close(s, {0.025, 0.03125, 0.0375, 0.04375, 0.05, 0.05, 0.05}, 1e-12, 0, "LinearLR")
  s = lrs(S.LinearLR(opt_with(0.1)), 7)
  local ref = {}
  for e = 0, 6 do ref[e + 1] = 0.1 * (1 / 3 + (1 - 1 / 3) * math.min(e, 5) / 5) end
  close(s, ref, 1e-12, 0, "LinearLR defaults")
  s = lrs(S.ExponentialLR(opt_with(0.1), {gamma = 0.9}), 5)
  close(s, {0.1, 0.09, 0.081, 0.0729, 0.06561}, 1e-12, 0, "ExponentialLR")
  s = lrs(S.LambdaLR(opt_with(0.1), {lr_lambda = function(e) return 1 / (e + 1) end}), 4)
  close(s, {0.1, 0.05, 0.1 / 3, 0.025}, 1e-15, 0, "LambdaLR")
  -- closed forms through step(epoch)
  local st = S.StepLR(opt_with(0.05), {step_size = 30})
  st:step(65)
  close(st:get_last_lr(), {0.0005}, 1e-12, 0, "StepLR step(epoch)")
end)

test("CosineAnnealingLR: PyTorch's recursive form, exactly", function()
  for _, c in ipairs({{lr = 0.1, T = 10, eta = 0}, {lr = 0.05, T = 3, eta = 0.001}}) do
    local s = S.CosineAnnealingLR(opt_with(c.lr), {T_max = c.T, eta_min = c.eta})
    local got = lrs(s, 4 * c.T + 3)
    -- the recursion PyTorch's get_lr() applies, step by step from the group's lr
    local lr, ref = c.lr, {c.lr}
    for e = 1, 4 * c.T + 2 do
      if (e - 1 - c.T) % (2 * c.T) == 0 then
        lr = lr + (c.lr - c.eta) * (1 - math.cos(math.pi / c.T)) / 2
      else
        lr = (1 + math.cos(math.pi * e / c.T)) / (1 + math.cos(math.pi * (e - 1) / c.T)) * (lr - c.eta) + c.eta
      end
      ref[#ref + 1] = lr
    end
    for i = 1, #got do eq(got[i], ref[i], ("cosine T=%d epoch %d"):format(c.T, i - 1)) end
    -- and it stays within rounding of the closed form (cos period 2 T_max)
    for e = 0, #got - 1 do
      close(got[e + 1], c.eta + (c.lr - c.eta) * (1 + math.cos(math.pi * e / c.T)) / 2, 1e-9, 1e-15, "closed form epoch " .. e)
    end
  end
  -- chainable: an lr changed by hand is followed from where it is
  local opt = opt_with(1.0)
  local s = S.CosineAnnealingLR(opt, {T_max = 10})
  s:step()
  opt.param_groups[1].lr = 0.5
  s:step()
  close(s:get_last_lr()[1], (1 + math.cos(math.pi * 2 / 10)) / (1 + math.cos(math.pi / 10)) * 0.5, 1e-15, 0, "chained")
end)

local function onecycle_ref(step, N, max_lr, o)
  local pct_start, div, fdiv = o.pct_start or 0.3, o.div_factor or 25, o.final_div_factor or 1e4
  local init = max_lr / div
  local min = init / fdiv
  local function an(a, b, pct)
    if o.anneal_strategy == "linear" then return (b - a) * pct + a end
    return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)
  end
  local phases
  if o.three_phase then
    phases = {{pct_start * N - 1, init, max_lr, 0.95, 0.85}, {2 * pct_start * N - 2, max_lr, init, 0.85, 0.95},
      {N - 1, init, min, 0.95, 0.95}}
  else
    phases = {{pct_start * N - 1, init, max_lr, 0.95, 0.85}, {N - 1, max_lr, min, 0.85, 0.95}}
  end
  local start = 0
  for i, ph in ipairs(phases) do
    if step <= ph[1] or i == #phases then
      local pct = (step - start) / (ph[1] - start)
      return an(ph[2], ph[3], pct), an(ph[4], ph[5], pct)
    end
    start = ph[1]
  end
end

test("OneCycleLR: lr and momentum / beta1 against PyTorch's phases", function()
  for _, o in ipairs({{}, {anneal_strategy = "linear"}, {three_phase = true, pct_start = 0.25}, {div_factor = 10, final_div_factor = 100}}) do
    local opt = opt_with(0.1, {momentum = 0.9})
    local args = {max_lr = 0.5, total_steps = 20}
    for k, v in pairs(o) do args[k] = v end
    local s = S.OneCycleLR(opt, args)
    for step = 0, 19 do
      if step > 0 then s:step() end
      local lr, m = onecycle_ref(step, 20, 0.5, o)
      close(s:get_last_lr()[1], lr, 1e-12, 1e-15, ("onecycle %s step %d lr"):format(T.fmt(o), step))
      close(opt.param_groups[1].momentum, m, 1e-12, 0, ("onecycle step %d momentum"):format(step))
    end
    s:step() -- step total_steps is allowed, as PyTorch
    raises(function() s:step() end, "OneCycleLR: tried to step 21 times; the specified number of total steps is 20", "past the end")
  end
  -- Adam: beta1 cycles, beta2 kept; epochs * steps_per_epoch
  local opt = optim.Adam({torch.zeros(1, {requires_grad = true})}, {betas = {0.9, 0.99}})
  local s = S.OneCycleLR(opt, {max_lr = {0.01}, epochs = 2, steps_per_epoch = 5})
  eq(s.total_steps, 10, "epochs * steps_per_epoch")
  local lr, m = onecycle_ref(0, 10, 0.01, {})
  close(s:get_last_lr(), {lr}, 1e-12, 0, "initial lr = max_lr / div_factor")
  eq(opt.param_groups[1].betas[1], m, "beta1 = max_momentum")
  eq(opt.param_groups[1].betas[2], 0.99, "beta2 kept")
  s:step()
  close(opt.param_groups[1].betas[1], select(2, onecycle_ref(1, 10, 0.01, {})), 1e-12, 0, "beta1 cycles")
  -- no cycling when asked
  local opt2 = opt_with(0.1, {momentum = 0.7})
  S.OneCycleLR(opt2, {max_lr = 1, total_steps = 5, cycle_momentum = false}):step()
  eq(opt2.param_groups[1].momentum, 0.7, "momentum untouched")
end)

test("schedulers: several groups, state_dict round trip, last_epoch, errors", function()
  local p1, p2 = torch.zeros(1, {requires_grad = true}), torch.zeros(1, {requires_grad = true})
  local opt = optim.SGD({{params = {p1}, lr = 1}, {params = {p2}, lr = 0.1}})
  local s = S.StepLR(opt, {step_size = 2, gamma = 0.5})
  for _ = 1, 3 do s:step() end
  close(s:get_last_lr(), {0.5, 0.05}, 1e-15, 0, "both groups")
  eq(opt.param_groups[1].initial_lr, 1, "initial_lr recorded")
  -- round trip into a fresh optimizer + scheduler
  local sd, osd = s:state_dict(), opt:state_dict()
  eq(sd.optimizer, nil, "no optimizer in the state")
  eq(sd.last_epoch, 3, "last_epoch saved")
  local opt2 = optim.SGD({{params = {torch.zeros(1, {requires_grad = true})}, lr = 1}, {params = {torch.zeros(1, {requires_grad = true})}, lr = 0.1}})
  opt2:load_state_dict(osd)
  local s2 = S.StepLR(opt2, {step_size = 7})
  s2:load_state_dict(sd)
  for _ = 1, 4 do s:step(); s2:step() end
  close(s2:get_last_lr(), s:get_last_lr(), 0, 0, "continues identically")
  -- the same with cosine, whose recursion reads the group's lr
  local o3 = opt_with(0.2)
  local c3 = S.CosineAnnealingLR(o3, {T_max = 7})
  for _ = 1, 3 do c3:step() end
  local o4 = opt_with(0.2)
  o4:load_state_dict(o3:state_dict())
  local c4 = S.CosineAnnealingLR(o4, {T_max = 7})
  c4:load_state_dict(c3:state_dict())
  for _ = 1, 5 do c3:step(); c4:step() end
  eq(c4:get_last_lr()[1], c3:get_last_lr()[1], "cosine continues identically")
  -- resuming with last_epoch needs initial_lr
  raises(function() S.StepLR(opt_with(0.1), {step_size = 2, last_epoch = 3}) end,
    "param 'initial_lr' is not specified in param_groups[0] when resuming an optimizer", "resume")
  local o5 = opt_with(0.1)
  o5.param_groups[1].initial_lr = 1.0
  local c5 = S.CosineAnnealingLR(o5, {T_max = 4, last_epoch = 1})
  close(c5:get_last_lr(), {(1 + math.cos(math.pi * 2 / 4)) / 2}, 1e-15, 0, "resumed at epoch 2 from the closed form")
  -- errors
  raises(function() S.StepLR(opt_with(0.1), {}) end, "StepLR: step_size must be a positive integer, got nil", "step_size")
  raises(function() S.StepLR(42, {step_size = 1}) end, "StepLR: expected an optimizer (with param_groups) as argument 1, got number", "optimizer")
  raises(function() S.StepLR(opt_with(0.1), {step_size = 2, gama = 0.5}) end, "unknown option 'gama'", "typo")
  raises(function() S.CosineAnnealingLR(opt_with(0.1), {T_max = 0}) end, "T_max must be a positive integer", "T_max")
  raises(function() S.MultiStepLR(opt_with(0.1), {milestones = {1.5}}) end, "milestones[1] must be an integer", "milestones")
  raises(function() S.LinearLR(opt_with(0.1), {start_factor = 0}) end, "start_factor must be in (0, 1]", "start_factor")
  raises(function() S.LinearLR(opt_with(0.1), {end_factor = 2}) end, "end_factor must be in [0, 1]", "end_factor")
  raises(function() S.OneCycleLR(opt_with(0.1), {max_lr = 1}) end, "you must define either total_steps OR (epochs AND steps_per_epoch)", "steps")
  raises(function() S.OneCycleLR(opt_with(0.1), {max_lr = 1, total_steps = 10, anneal_strategy = "exp"}) end,
    "anneal_strategy must be one of 'cos' or 'linear'", "strategy")
  raises(function() S.OneCycleLR(opt_with(0.1), {max_lr = 1, total_steps = 10, pct_start = 2}) end, "pct_start", "pct_start")
  raises(function() S.OneCycleLR(opt_with(0.1), {max_lr = {1, 2}, total_steps = 10}) end, "max_lr must be a number or a list of 1 numbers", "max_lr")
  raises(function() S.LambdaLR(opt_with(0.1), {lr_lambda = 3}) end, "lr_lambda must be a function", "lambda")
  raises(function() S.OneCycleLR(opt_with(0.1), {max_lr = 1, total_steps = 10, div_factor = nn.ReLU()}) end,
    "OneCycleLR: div_factor must be a number, got ReLU", "div_factor")
  raises(function() S.OneCycleLR(opt_with(0.1), {max_lr = 1, total_steps = 10, final_div_factor = "2"}) end,
    "OneCycleLR: final_div_factor must be a number, got 2", "final_div_factor")
  -- an object is shown by its type's name, a list or a torch.Size by its items
  raises(function() S.CosineAnnealingLR(opt_with(0.1), {T_max = 3, eta_min = nn.ReLU()}) end,
    "eta_min must be a number, got ReLU", "an object in the message")
  raises(function() optim.Adam(opt_with(0.1).param_groups[1].params, {lr = nn.ReLU()}) end,
    "Adam: invalid lr value: ReLU", "an object given to an optimizer, named")
  raises(function() S.MultiStepLR(opt_with(0.1), {milestones = nn.ReLU()}) end,
    "MultiStepLR: milestones must be a list of integers, got ReLU", "an object for a list")
  local o = opt_with(1)
  local ms = S.MultiStepLR(o, {milestones = torch.Size({2, 1}), gamma = 0.5})
  for _ = 1, 2 do o:step(); ms:step() end
  T.close(o.param_groups[1].lr, 0.25, 0, 0, "a torch.Size as milestones, as a list")
end)

-- ---- training to convergence ---------------------------------------------------------

test("each optimizer trains a small regression and a classifier to near-zero loss", function()
  torch.manual_seed(1)
  local X = torch.randn(64, 3)
  local w_true = torch.tensor({{1.5}, {-2.0}, {0.5}})
  local Y = X:matmul(w_true) + 0.3
  -- two linearly separable classes for the classifier
  local Xc = torch.randn(64, 2)
  local yc = Xc:select(1, 0):gt(0):long()
  local cases = {
    {"SGD", function(p) return optim.SGD(p, {lr = 0.1, momentum = 0.9}) end},
    {"SGD nesterov", function(p) return optim.SGD(p, {lr = 0.05, momentum = 0.9, nesterov = true}) end},
    {"Adam", function(p) return optim.Adam(p, {lr = 0.05}) end},
    {"AdamW", function(p) return optim.AdamW(p, {lr = 0.05, weight_decay = 1e-4}) end},
    {"RMSprop", function(p) return optim.RMSprop(p, {lr = 0.01}) end},
  }
  for _, c in ipairs(cases) do
    local W, b = torch.zeros(3, 1, {requires_grad = true}), torch.zeros(1, {requires_grad = true})
    local opt = c[2]({W, b})
    local loss
    for _ = 1, 300 do
      opt:zero_grad()
      loss = F.mse_loss(X:matmul(W) + b, Y)
      loss:backward()
      opt:step()
    end
    ok(loss:item() < 1e-3, ("%s regression: final loss %g"):format(c[1], loss:item()))
    local Wc, bc = torch.zeros(2, 2, {requires_grad = true}), torch.zeros(2, {requires_grad = true})
    opt = c[2]({Wc, bc})
    for _ = 1, 300 do
      opt:zero_grad()
      loss = F.cross_entropy(Xc:matmul(Wc) + bc, yc)
      loss:backward()
      opt:step()
    end
    ok(loss:item() < 0.1, ("%s classifier: final loss %g"):format(c[1], loss:item()))
  end
end)

T.test("the fused Adam/AdamW step matches the op-by-op one", function()
  for _, cfg in ipairs({{"Adam", {}}, {"AdamW", {weight_decay = 0.1}}, {"Adam", {amsgrad = true, weight_decay = 0.01}},
                        {"Adam", {maximize = true}}}) do
    local base = torch.randn(4, 3, {dtype = "float64"})
    local fused = base:clone():requires_grad_()           -- contiguous: takes torch._adam_step
    local plain = base:t():contiguous():t():requires_grad_() -- non-contiguous: the op-by-op path
    T.ok(not plain:is_contiguous(), "the second parameter is not contiguous")
    local o1 = optim[cfg[1]]({fused}, cfg[2])
    local o2 = optim[cfg[1]]({plain}, cfg[2])
    for step = 1, 5 do
      local g = torch.randn(4, 3, {dtype = "float64"})
      fused.grad = g:clone()
      plain.grad = g:t():contiguous():t()
      o1:step()
      o2:step()
    end
    T.close(fused, plain:contiguous(), 1e-12, 1e-12, cfg[1] .. " fused vs op-by-op")
  end
end)

T.test("Adam/AdamW capturable: the step count a tensor on the device, the same weights, fused and op by op", function()
  if T.device == "cpu" then -- PyTorch's rule: capturable steps are on CUDA
    local p = torch.randn(3, {requires_grad = true})
    p.grad = torch.randn(3)
    T.raises(function() optim.Adam({p}, {capturable = true}):step() end,
      "Adam: capturable=True needs the parameters on CUDA, but parameter 0 is on cpu")
    T.raises(function() optim.AdamW({p}, {capturable = 1}) end, "AdamW: capturable must be true or false, got 1")
    return
  end
  for _, cfg in ipairs({{"Adam", {}}, {"AdamW", {weight_decay = 0.1}}, {"Adam", {amsgrad = true, weight_decay = 0.01}},
                        {"AdamW", {maximize = true, betas = {0, 0.9}}}}) do
    for _, layout in ipairs({"contiguous", "transposed"}) do -- transposed: the op-by-op path, corrections as tensors
      local base = torch.randn(4, 3, {dtype = "float64"})
      local function leaf() return layout == "contiguous" and base:clone():requires_grad_() or
        base:t():contiguous():t():requires_grad_() end
      local pc, ph = leaf(), leaf()
      local o = {capturable = true}
      for k, v in pairs(cfg[2]) do o[k] = v end
      local oc, oh = optim[cfg[1]]({pc}, o), optim[cfg[1]]({ph}, cfg[2])
      for _ = 1, 5 do
        local g = torch.randn(4, 3, {dtype = "float64"})
        pc.grad, ph.grad = g:clone(), g:clone()
        oc:step()
        oh:step()
      end
      local what = ("%s %s %s"):format(cfg[1], T.fmt(cfg[2]), layout)
      -- fused: the kernel's arithmetic either way; op by op: 1 - beta^t as -expm1(t ln beta), within rounding
      if layout == "contiguous" then T.eq(torch.equal(pc, ph), true, what .. ": the same bits")
      else T.close(pc:cpu(), ph:cpu(), 1e-12, 1e-12, what) end
      local st = oc.state[pc].step
      T.eq(torch.is_tensor(st) and st.device.type, "cuda", what .. ": the count on the device")
      T.eq(st.dtype, torch.float32, what .. ": float32, as PyTorch's")
      T.eq(st:item(), 5, what .. ": five steps")
      T.eq(oc:state_dict().state[0].step:item(), 5, what .. ": state_dict hands it over")
    end
  end
end)

T.test("torch._adam_step with step tensors: incremented, read on the device, the host count's update", function()
  for _, dev in ipairs(T.devices()) do
    local function run(capturable)
      torch.manual_seed(4)
      local o = {device = dev}
      local p, g = torch.randn(7, o), torch.randn(7, o)
      local m, v, vm = torch.zeros(7, o), torch.zeros(7, o), torch.zeros(7, o)
      local s = torch.zeros({}, {dtype = "float32", device = dev})
      for step = 1, 3 do
        torch._adam_step({p}, {g}, {m}, {v}, {vm}, {lr = 0.1, amsgrad = true, weight_decay = 0.2, decoupled = true,
          step = step, steps = capturable and {s} or nil})
      end
      return p, s
    end
    local ph = run(false)
    local pc, s = run(true)
    T.eq(s:item(), 3, dev .. ": the step tensor counted three steps")
    T.eq(torch.equal(pc, ph), true, dev .. ": the same update as with the host's count")
    local one = {torch.ones(2, {device = dev})}
    T.raises(function() torch._adam_step(one, one, one, one, nil, {steps = {torch.zeros(2, {device = dev})}}) end,
      "adam_step: parameter 0: its step must be a one-element float32 tensor on the parameter's device, got float32 with 2 elements")
  end
end)

-- ---- the fused SGD and RMSprop steps (torch._sgd_step, torch._rmsprop_step) ------

-- Every flag combination PyTorch allows (nesterov needs momentum and no dampening).
local function sgd_configs()
  local out = {}
  for _, mom in ipairs({0, 0.9}) do
    for _, damp in ipairs({0, 0.3}) do
      for _, nest in ipairs({false, true}) do
        for _, wd in ipairs({0, 0.1}) do
          for _, max in ipairs({false, true}) do
            if not nest or (mom > 0 and damp == 0) then
              out[#out + 1] = {lr = 0.05, momentum = mom, dampening = damp, nesterov = nest, weight_decay = wd, maximize = max}
            end
          end
        end
      end
    end
  end
  return out
end

local function rmsprop_configs()
  local out = {}
  for _, mom in ipairs({0, 0.5}) do
    for _, cen in ipairs({false, true}) do
      for _, wd in ipairs({0, 0.1}) do
        for _, max in ipairs({false, true}) do
          out[#out + 1] = {lr = 0.01, alpha = 0.9, eps = 1e-6, momentum = mom, centered = cen, weight_decay = wd, maximize = max}
        end
      end
    end
  end
  return out
end

local function cfg_name(o)
  local parts = {}
  for k, v in pairs(o) do parts[#parts + 1] = k .. "=" .. tostring(v) end
  table.sort(parts)
  return table.concat(parts, " ")
end

-- Runs 4 steps of the optimizer over a (3, 5) and a (7) parameter of dtype dt
-- (both contiguous: the fused path) against ref in plain Lua doubles.
local function check_fused(name, make, ref, o, dt, rtol, atol)
  local fn = name == "sgd" and "_sgd_step" or "_rmsprop_step"
  local real, calls = torch[fn], 0
  torch[fn] = function(...) calls = calls + 1; return real(...) end
  local okk, err = pcall(function()
  local p1, p2 = R({3, 5}), R({7})
  local a = torch.tensor(p1, {dtype = dt, requires_grad = true})
  local b = torch.tensor(p2, {dtype = dt, requires_grad = true})
  local opt = make({a, b}, o)
  local r1, r2, s1, s2 = T.flat(a), T.flat(b), {}, {} -- from the stored (rounded) values
  for step = 1, 4 do
    local g1, g2 = torch.tensor(R({3, 5}), {dtype = dt}), torch.tensor(R({7}), {dtype = dt})
    a.grad, b.grad = g1, g2
    opt:step()
    ref(r1, T.flat(g1), s1, o)
    ref(r2, T.flat(g2), s2, o)
    close(a, r1, rtol, atol, ("%s %s step %d, param 0 (%s)"):format(name, tostring(dt), step, cfg_name(o)))
    close(b, r2, rtol, atol, ("%s %s step %d, param 1 (%s)"):format(name, tostring(dt), step, cfg_name(o)))
  end
  eq(a.dtype, dt, name .. ": dtype kept")
  end)
  torch[fn] = real
  if not okk then error(err, 0) end
  eq(calls, 4, name .. ": one fused call per step for the group")
end

test("fused SGD: every flag combination against PyTorch's rule, float64 and float32", function()
  ok(torch._sgd_step ~= nil, "torch._sgd_step exists")
  local make = function(p, o) return optim.SGD(p, o) end
  for _, o in ipairs(sgd_configs()) do
    check_fused("sgd", make, sgd_ref, o, torch.float64, 1e-10, 1e-12)
    check_fused("sgd", make, sgd_ref, o, torch.float32, 1e-5, 1e-5)
  end
end)

test("fused RMSprop: every flag combination against PyTorch's rule, float64 and float32", function()
  ok(torch._rmsprop_step ~= nil, "torch._rmsprop_step exists")
  local make = function(p, o) return optim.RMSprop(p, o) end
  for _, o in ipairs(rmsprop_configs()) do
    check_fused("rmsprop", make, rmsprop_ref, o, torch.float64, 1e-10, 1e-12)
    check_fused("rmsprop", make, rmsprop_ref, o, torch.float32, 1e-4, 1e-5)
  end
end)

test("the fused SGD and RMSprop steps match the op-by-op ones (strided parameters, mixed groups)", function()
  local cfgs = {}
  for _, o in ipairs(sgd_configs()) do cfgs[#cfgs + 1] = {"SGD", o} end
  for _, o in ipairs(rmsprop_configs()) do cfgs[#cfgs + 1] = {"RMSprop", o} end
  for _, cfg in ipairs(cfgs) do
    local base = torch.randn(4, 3, {dtype = "float64"})
    local fused = base:clone():requires_grad_()              -- contiguous: the fused step
    local plain = base:t():contiguous():t():requires_grad_()  -- not contiguous: op by op
    local both = base:clone():requires_grad_()               -- fused, in a group with a strided one
    local strided = base:t():contiguous():t():requires_grad_()
    local o1 = optim[cfg[1]]({fused}, cfg[2])
    local o2 = optim[cfg[1]]({plain}, cfg[2])
    local o3 = optim[cfg[1]]({both, strided}, cfg[2])
    for _ = 1, 4 do
      local g = torch.randn(4, 3, {dtype = "float64"})
      fused.grad, both.grad = g:clone(), g:clone()
      plain.grad, strided.grad = g:t():contiguous():t(), g:t():contiguous():t()
      o1:step(); o2:step(); o3:step()
    end
    local what = cfg[1] .. " " .. cfg_name(cfg[2])
    close(fused, plain:contiguous(), 1e-12, 1e-12, what .. ": fused vs op-by-op")
    close(both, fused, 0, 0, what .. ": fused in a mixed group")
    close(strided, plain:contiguous(), 0, 0, what .. ": op-by-op in a mixed group")
  end
end)

test("fused SGD: momentum buffers made lazily (nil grads, added groups), state_dict unchanged", function()
  local a, b = f64({1, 2, 3}, true), f64({4, 5}, true)
  local opt = optim.SGD({a, b}, {lr = 0.1, momentum = 0.9, dampening = 0.5})
  local ra, rb, sa, sb = {1, 2, 3}, {4, 5}, {}, {}
  local o = {lr = 0.1, momentum = 0.9, dampening = 0.5}
  a.grad = f64({1, -1, 2}) -- b has no grad: no buffer
  opt:step()
  sgd_ref(ra, {1, -1, 2}, sa, o)
  eq(opt.state[b], nil, "no state for b yet")
  close(opt.state[a].momentum_buffer, {1, -1, 2}, 0, 0, "first buffer is the grad (no dampening)")
  a.grad, b.grad = f64({0.5, 0.5, 0.5}), f64({2, 3}) -- a's buffer old, b's fresh: one fused call
  opt:step()
  sgd_ref(ra, {0.5, 0.5, 0.5}, sa, o)
  sgd_ref(rb, {2, 3}, sb, o)
  close(a, ra, 1e-12, 1e-12, "a")
  close(b, rb, 1e-12, 1e-12, "b")
  close(opt.state[b].momentum_buffer, {2, 3}, 0, 0, "b's first buffer")
  local sd = opt:state_dict()
  ok(torch.is_tensor(sd.state[0].momentum_buffer) and torch.is_tensor(sd.state[1].momentum_buffer), "buffers saved")
  eq(sd.state[0].step, nil, "SGD keeps no step")
  -- without momentum: no state at all, as PyTorch
  local c = f64({1}, true)
  local opt2 = optim.SGD({c}, {lr = 0.1})
  c.grad = f64({1})
  opt2:step()
  eq(next(opt2.state), nil, "no state without momentum")
end)

test("torch._sgd_step and torch._rmsprop_step directly: fresh flags, several parameters, empty ones", function()
  local o = {lr = 0.1, momentum = 0.8, dampening = 0.25, weight_decay = 0.05, nesterov = false}
  local ps, gs, bufs, fresh, refs, sts = {}, {}, {}, {}, {}, {}
  local shapes = {{3}, {0}, {2, 2}, {5}, {1}}
  for i, sh in ipairs(shapes) do
    local n = sh[2] and sh[1] * sh[2] or sh[1]
    local pv, bv = {}, {}
    for j = 1, n do pv[j] = math.random() * 4 - 2; bv[j] = math.random() end
    ps[i] = f64(pv):reshape(sh)
    gs[i] = f64(R({n})):reshape(sh)
    fresh[i] = i % 2 == 1
    bufs[i] = f64(bv):reshape(sh)
    refs[i], sts[i] = pv, {}
    if not fresh[i] then for j = 1, n do sts[i][j] = bv[j] end end
  end
  torch._sgd_step(ps, gs, bufs, fresh, o)
  for i = 1, #ps do
    sgd_ref(refs[i], T.flat(gs[i]), sts[i], o)
    close(ps[i], refs[i], 1e-12, 1e-12, "sgd param " .. i)
    close(bufs[i], sts[i], 1e-12, 1e-12, "sgd buffer " .. i)
  end
  -- RMSprop centered with momentum: the five tensors per parameter
  local ro = {lr = 0.02, alpha = 0.95, eps = 1e-5, momentum = 0.3, centered = true, weight_decay = 0.1, maximize = true}
  local sq, mb, ga, rp, rs = {}, {}, {}, {}, {}
  for i, sh in ipairs(shapes) do
    sq[i], mb[i], ga[i] = torch.zeros_like(ps[i]), torch.zeros_like(ps[i]), torch.zeros_like(ps[i])
    rp[i], rs[i] = T.flat(ps[i]), {}
  end
  for _ = 1, 3 do
    for i = 1, #ps do gs[i] = f64(R({ps[i]:numel()})):reshape(shapes[i]) end
    torch._rmsprop_step(ps, gs, sq, mb, ga, ro)
    for i = 1, #ps do rmsprop_ref(rp[i], T.flat(gs[i]), rs[i], ro) end
  end
  for i = 1, #ps do close(ps[i], rp[i], 1e-10, 1e-12, "rmsprop param " .. i) end
end)

test("fused step errors: the op layer names the parameter and what is wrong", function()
  local p = f64({1, 2, 3, 4}):reshape({2, 2})
  local g = f64({1, 1, 1, 1}):reshape({2, 2})
  raises(function() torch._sgd_step({p:t()}, {g}, nil, nil, {lr = 0.1}) end,
    "sgd_step: parameter 0: the parameter is not contiguous", "strided parameter")
  raises(function() torch._sgd_step({p, p:clone()}, {g, g:t()}, nil, nil, {lr = 0.1}) end,
    "sgd_step: parameter 1: its grad is not contiguous", "strided grad")
  raises(function() torch._sgd_step({p}, {g}, {f64({0, 0})}, nil, {lr = 0.1, momentum = 0.9}) end,
    "sgd_step: parameter 0: its momentum_buffer's shape differs from the parameter's", "buffer shape")
  raises(function() torch._sgd_step({p}, {g}, nil, nil, {lr = 0.1, momentum = 0.9}) end,
    "bad argument #3", "momentum without buffers")
  raises(function() torch._sgd_step({p}, {g:float()}, nil, nil, {lr = 0.1}) end,
    "sgd_step: parameter 0: its grad is float32 but the parameter is float64", "dtype mismatch")
  raises(function() torch._sgd_step({p:half()}, {g:half()}, nil, nil, {lr = 0.1}) end,
    "sgd_step: parameter 0 is float16; the fused step takes float32 or float64", "float16")
  raises(function() torch._sgd_step({torch.tensor({1, 2})}, {torch.tensor({1, 2})}, nil, nil, {lr = 0.1}) end,
    "parameter 0 is int64", "integer parameter")
  raises(function() torch._sgd_step({p, p:clone()}, {g}, nil, nil, {lr = 0.1}) end,
    "_sgd_step: list 2 has 1 entries, expected 2", "list lengths")
  raises(function() torch._rmsprop_step({p}, {g}, {"x"}, nil, nil, {}) end,
    "_rmsprop_step: list 3 holds a non-tensor at 1", "non-tensor")
  raises(function() torch._rmsprop_step({p}, {g}, {g:clone()}, nil, {}, {centered = true}) end,
    "_rmsprop_step: list 5 has 0 entries, expected 1", "centered without grad_avgs")
  raises(function() torch._rmsprop_step({p}, {g}, {g:clone()}, nil, {f64({1})}, {centered = true}) end,
    "rmsprop_step: parameter 0: its grad_avg's shape differs from the parameter's", "grad_avg shape")
  raises(function() torch._rmsprop_step({p}, {g}, {g:clone()}) end, "options table", "no options")
  -- a failed check changes nothing
  close(p, {1, 2, 3, 4}, 0, 0, "untouched after the errors")
  if cuda and cuda.is_available() then
    raises(function() torch._sgd_step({p:cpu(), p:cuda()}, {g:cpu(), g:cuda()}, nil, nil, {lr = 0.1}) end,
      "sgd_step: parameter 1 is on another device than parameter 0", "devices")
    raises(function() torch._sgd_step({p:cuda()}, {g:cpu()}, nil, nil, {lr = 0.1}) end,
      "sgd_step: parameter 0: its grad is on another device than the parameter", "grad device")
  end
end)

test("CUDA fused SGD and RMSprop steps match the CPU's (sizes past a chunk, unaligned, mixed dtypes)", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  -- parameters: two chunks and a tail, empty, unaligned views (offset 1), tiny, float32 and float64 mixed
  local function make_params()
    local t = {}
    t[1] = torch.randn(2 * 16384 + 5, {dtype = "float32", device = "cpu"})
    t[2] = torch.randn(0, {dtype = "float64", device = "cpu"})
    t[3] = torch.randn(1001, {dtype = "float64", device = "cpu"}):narrow(0, 1, 1000)
    t[4] = torch.randn(3, 7, {dtype = "float32", device = "cpu"})
    t[5] = torch.randn(20001, {dtype = "float32", device = "cpu"}):narrow(0, 1, 20000)
    t[6] = torch.randn(1, {dtype = "float64", device = "cpu"})
    return t
  end
  local function clone_to(list, dev)
    local out = {}
    for i, x in ipairs(list) do out[i] = x:to(dev):contiguous():clone() end
    return out
  end
  local function views_to(list, dev) -- the same unaligned layout on dev
    local out = {}
    for i, x in ipairs(list) do
      if i == 3 or i == 5 then
        out[i] = torch.zeros(x:numel() + 1, {dtype = x.dtype, device = dev}):narrow(0, 1, x:numel())
        out[i]:copy_(x:to(dev))
      else
        out[i] = x:to(dev):clone()
      end
    end
    return out
  end
  local function tol(x) return x.dtype == torch.float32 and 1e-5 or 1e-12 end
  local function compare(what, a, b)
    for i = 1, #a do
      local t = tol(a[i])
      close(a[i]:cpu(), b[i], t, t, ("%s: tensor %d"):format(what, i))
    end
  end
  for _, o in ipairs(sgd_configs()) do
    local base = make_params()
    local pc, pg = views_to(base, "cpu"), views_to(base, "cuda")
    local bc, bg = {}, {}
    for i, x in ipairs(base) do bc[i] = torch.zeros_like(x); bg[i] = torch.zeros_like(x):to("cuda") end
    local fresh = {true, false, true, false, true, false}
    for step = 1, 3 do
      local grads = make_params()
      torch._sgd_step(pc, clone_to(grads, "cpu"), o.momentum ~= 0 and bc or nil, o.momentum ~= 0 and fresh or nil, o)
      torch._sgd_step(pg, clone_to(grads, "cuda"), o.momentum ~= 0 and bg or nil, o.momentum ~= 0 and fresh or nil, o)
      fresh = {false, false, false, false, false, false}
      compare(("sgd step %d (%s) params"):format(step, cfg_name(o)), pg, pc)
      if o.momentum ~= 0 then compare(("sgd step %d buffers"):format(step), bg, bc) end
    end
  end
  for _, o in ipairs(rmsprop_configs()) do
    local base = make_params()
    local pc, pg = views_to(base, "cpu"), views_to(base, "cuda")
    local st = {}
    for _, dev in ipairs({"cpu", "cuda"}) do
      st[dev] = {sq = {}, mb = {}, ga = {}}
      for i, x in ipairs(base) do
        for _, k in ipairs({"sq", "mb", "ga"}) do st[dev][k][i] = torch.zeros_like(x):to(dev) end
      end
    end
    for step = 1, 3 do
      local grads = make_params()
      for _, d in ipairs({{"cpu", pc}, {"cuda", pg}}) do
        local s = st[d[1]]
        torch._rmsprop_step(d[2], clone_to(grads, d[1]), s.sq, o.momentum > 0 and s.mb or nil, o.centered and s.ga or nil, o)
      end
      compare(("rmsprop step %d (%s) params"):format(step, cfg_name(o)), pg, pc)
      compare(("rmsprop step %d square_avg"):format(step), st.cuda.sq, st.cpu.sq)
      if o.momentum > 0 then compare("rmsprop momentum_buffer", st.cuda.mb, st.cpu.mb) end
      if o.centered then compare("rmsprop grad_avg", st.cuda.ga, st.cpu.ga) end
    end
  end
  -- the optimizers on CUDA parameters against the same on the CPU
  for _, name in ipairs({"SGD", "RMSprop"}) do
    local init = torch.randn(64, 33, {dtype = "float32", device = "cpu"})
    local a = init:clone():requires_grad_()
    local b = init:cuda():requires_grad_()
    local o = name == "SGD" and {lr = 0.1, momentum = 0.9, nesterov = true} or {lr = 0.01, centered = true, momentum = 0.2}
    local oa, ob = optim[name]({a}, o), optim[name]({b}, o)
    for _ = 1, 4 do
      local g = torch.randn(64, 33, {dtype = "float32", device = "cpu"})
      a.grad, b.grad = g, g:cuda()
      oa:step(); ob:step()
    end
    close(b:cpu(), a, 1e-5, 1e-5, name .. " on cuda vs cpu")
  end
end)

T.run()
