-- Mixed precision (lua/tensh/amp.lua, src/autograd/autocast.*): the dtype each op
-- family runs in under torch.autocast on the suite's device, against
-- PyTorch's lists written out here (not read from autocast.def); values
-- against the same op on inputs cast by hand; gradients reaching float32
-- weights in float32; the weight-cast cache; nesting and the function form;
-- GradScaler's bookkeeping, its fused inf/NaN check against a plain Lua
-- loop, a training run whose scale backs off on an injected inf and grows
-- back and whose loss meets float32's; checkpoints; and the error paths.
local T = require "harness"
local test, eq, ok, close, raises = T.test, T.eq, T.ok, T.close, T.raises

local dev = T.device
-- the low-precision dtypes autocast offers on this device (PyTorch: bfloat16 on
-- the CPU; float16 and bfloat16 on CUDA)
local lows = dev == "cpu" and {torch.bfloat16} or {torch.float16, torch.bfloat16}

local function randn(...) return torch.randn(...) end

local function region(dtype) return torch.autocast(dev, {dtype = dtype}) end

-- ---- which dtype each family runs in --------------------------------------

-- PyTorch's autocast op reference: ops that run in float32 on CUDA but keep
-- their input's dtype on the CPU, and those that are float32 on both
local fp32_on_cuda_only = {
  exp = function(x) return x:exp() end,
  log = function(x) return x:abs():add(1):log() end,
  log1p = function(x) return x:abs():log1p() end,
  rsqrt = function(x) return x:abs():add(1):rsqrt() end,
  reciprocal = function(x) return x:add(10):reciprocal() end,
  pow_scalar = function(x) return x:pow(2) end,
  pow = function(x) return x:abs():pow(x) end,
  softmax = function(x) return torch.softmax(x, 1) end,
  log_softmax = function(x) return torch.log_softmax(x, 1) end,
  cumsum = function(x) return torch.cumsum(x, 1) end,
  sum = function(x) return x:sum() end,
  norm = function(x) return x:norm() end,
  layer_norm = function(x) return nn.functional.layer_norm(x, {x.shape[1]}) end,
}
local fp32_everywhere = {
  prod = function(x) return x:prod(1) end,
  mse_loss = function(x) return nn.functional.mse_loss(x, torch.zeros_like(x)) end,
  l1_loss = function(x) return nn.functional.l1_loss(x, torch.zeros_like(x)) end,
  cross_entropy = function(x) return nn.functional.cross_entropy(x, torch.zeros(x.shape[0], {dtype = torch.int64})) end,
  bce_with_logits = function(x)
    return nn.functional.binary_cross_entropy_with_logits(x, torch.zeros_like(x))
  end,
}
-- ops outside every list: they run in their inputs' dtype
local untouched = {
  relu = function(x) return x:relu() end,
  add = function(x) return x + x end,
  mean = function(x) return x:mean() end,
  tanh = function(x) return x:tanh() end,
  max = function(x) return x:amax() end,
}

for _, low in ipairs(lows) do
  test("autocast " .. low .. ": products and convolutions run in " .. low, function()
    local a, b = randn(4, 6), randn(6, 3)
    local x, w, bias = randn(2, 3, 8, 8), randn(5, 3, 3, 3), randn(5)
    local _ <close> = region(low)
    eq(a:matmul(b).dtype, low, "matmul")
    eq(torch.mm(a, b).dtype, low, "mm")
    eq(torch.bmm(randn(2, 4, 6), randn(2, 6, 3)).dtype, low, "bmm")
    eq(torch.addmm(randn(3), a, b).dtype, low, "addmm")
    eq(nn.functional.linear(a, randn(5, 6), randn(5)).dtype, low, "linear")
    eq(nn.functional.conv2d(x, w, bias).dtype, low, "conv2d")
    eq(nn.functional.conv1d(randn(2, 3, 9), randn(4, 3, 3), randn(4)).dtype, low, "conv1d")
    -- mv is on CUDA's list only
    eq(torch.mv(a, randn(6)).dtype, dev == "cuda" and low or torch.float32, "mv")
  end)

  test("autocast " .. low .. ": float32 ops and untouched ops", function()
    local x = randn(4, 5):to(low) -- a low-precision activation, as a layer gives it
    local _ <close> = region(low)
    for name, f in pairs(fp32_on_cuda_only) do
      eq(f(x).dtype, dev == "cuda" and torch.float32 or low, name)
    end
    for name, f in pairs(fp32_everywhere) do eq(f(x).dtype, torch.float32, name) end
    for name, f in pairs(untouched) do eq(f(x).dtype, low, name) end
    -- float64 is never cast, either way
    eq(randn(3, 3, {dtype = torch.float64}):matmul(randn(3, 3, {dtype = torch.float64})).dtype, torch.float64, "f64")
    -- integer inputs are not eligible
    eq(torch.tensor({{1, 2}, {3, 4}}):matmul(torch.tensor({{1}, {1}})).dtype, torch.int64, "int64 matmul")
    -- ops with mixed inputs promote (torch's type promotion; dot is on CUDA's promote list)
    eq((x + randn(4, 5)).dtype, torch.float32, "add of low and float32")
    if dev == "cuda" then eq(torch.dot(randn(5):to(low), randn(5)).dtype, torch.float32, "dot promotes") end
  end)

  -- every unary op of the registry (T.unary_ops): float32 on CUDA where
  -- PyTorch's CUDA float32 list names it, its input's dtype otherwise
  test("autocast " .. low .. ": every unary op of the registry, as PyTorch's lists say", function()
    local fp32_on_cuda = {exp = true, log = true, log1p = true, rsqrt = true, reciprocal = true, pow_scalar = true,
                          expm1 = true, log2 = true, log10 = true, tan = true, sinh = true, cosh = true, asin = true,
                          acos = true, erfinv = true}
    local call = {clamp = function(x) return x:clamp(-1, 1) end, pow_scalar = function(x) return x:pow(2) end}
    local x = randn(4, 5):to(low)
    local names, ops = T.unary_ops()
    local checked = 0
    for _, name in ipairs(names) do
      local f = call[name] or function(t) return t[name](t) end
      if pcall(f, x) then -- ops of integers only (bitwise_not) have nothing to cast
        local want = ops[name].kind == "unary_bool" and torch.bool or dev == "cuda" and fp32_on_cuda[name] and torch.float32 or low
        local _ <close> = region(low)
        eq(f(x).dtype, want, name)
        checked = checked + 1
      end
    end
    ok(checked >= 35, "unary ops checked: " .. checked)
  end)

  test("autocast " .. low .. ": values equal the op on inputs cast by hand", function()
    local a, b = randn(7, 9), randn(9, 5)
    local want = a:to(low):matmul(b:to(low))
    local got
    do
      local _ <close> = region(low)
      got = a:matmul(b)
    end
    eq(got.dtype, low)
    ok(torch.equal(got, want), "autocast matmul == matmul of cast inputs")
    close(got:float():tolist(), a:matmul(b):tolist(), 0.05, 0.1, "close to float32")
    -- a float32-list op on low-precision input: the same as casting by hand
    local x = randn(3, 8):to(low)
    local s
    do
      local _ <close> = region(low)
      s = torch.softmax(x, 1)
    end
    local ref = dev == "cuda" and torch.softmax(x:float(), 1) or torch.softmax(x, 1)
    ok(torch.equal(s, ref), "softmax")
  end)

  test("autocast " .. low .. ": backward runs in the forward's dtypes, weights get float32 grads", function()
    local w = randn(6, 4, {requires_grad = true})
    local x = randn(3, 6)
    local y
    do
      local _ <close> = region(low)
      y = x:matmul(w)
      eq(y.dtype, low)
      -- backward inside the region is not autocast: the matmul's backward stays in `low`
      y:float():sum():backward()
    end
    eq(w.grad.dtype, torch.float32, "grad of a float32 weight")
    -- reference: the same graph built by hand
    local w2 = w:detach():clone():requires_grad_(true)
    x:to(low):matmul(w2:to(low)):float():sum():backward()
    ok(torch.equal(w.grad, w2.grad), "grad equals the hand-cast graph's")
    close(w.grad:tolist(), x:t():matmul(torch.ones(3, 4)):tolist(), 0.02, 0.05, "near the float32 gradient")
  end)
end

test("autocast caches the cast of a float32 leaf weight within a region", function()
  local w = randn(8, 8, {requires_grad = true})
  local x = randn(4, 8)
  local function copies(f)
    torch.backends._dispatch_counts(true)
    local before = torch.backends._dispatch_counts()[dev].copy
    f()
    local after = torch.backends._dispatch_counts(false)[dev].copy
    return after - before
  end
  local low = lows[1]
  -- three products with the same weight: x cast three times, w once
  local n = copies(function()
    local _ <close> = region(low)
    for _ = 1, 3 do x:matmul(w) end
  end)
  eq(n, 4, "copies with the cache")
  local m = copies(function()
    local _ <close> = torch.autocast(dev, {dtype = low, cache_enabled = false})
    for _ = 1, 3 do x:matmul(w) end
  end)
  eq(m, 6, "copies without it")
  -- a weight changed in place inside the region is cast again
  local y1, y2
  do
    local _ <close> = region(low)
    y1 = x:matmul(w)
    torch.no_grad(function() w:add_(1) end)
    y2 = x:matmul(w)
  end
  ok(not torch.equal(y1, y2), "the changed weight is used")
  ok(torch.equal(y2, x:to(low):matmul(w:detach():to(low))), "y2 from the new weight")
end)

test("autocast regions nest, restore on exit, and are per device type", function()
  local a, b = randn(3, 3), randn(3, 3)
  local low = lows[1]
  eq(torch.is_autocast_enabled(dev), false)
  do
    local _ <close> = region(low)
    eq(torch.is_autocast_enabled(dev), true)
    eq(torch.get_autocast_dtype(dev), low)
    do
      local _ <close> = torch.autocast(dev, {enabled = false})
      eq(a:matmul(b).dtype, torch.float32, "inner disabled region")
      eq(torch.is_autocast_enabled(dev), false)
    end
    eq(a:matmul(b).dtype, low, "outer region again")
    if #lows > 1 then
      local _ <close> = region(lows[2])
      eq(a:matmul(b).dtype, lows[2], "inner region with another dtype")
    end
    eq(a:matmul(b).dtype, low, "outer dtype restored")
  end
  eq(torch.is_autocast_enabled(dev), false)
  eq(a:matmul(b).dtype, torch.float32, "after the region")
  if dev == "cuda" then -- a CPU region leaves CUDA tensors alone
    local _ <close> = torch.autocast("cpu")
    eq(a:matmul(b).dtype, torch.float32, "cuda tensors under a CPU region")
    eq(torch.randn(3, 3, {device = "cpu"}):matmul(torch.randn(3, 3, {device = "cpu"})).dtype, torch.bfloat16)
  end
end)

test("autocast's function form returns the function's results and closes on an error", function()
  local a, b = randn(3, 3), randn(3, 3)
  local low = lows[1]
  local dt, n = torch.autocast(dev, {dtype = low}, function(x, y) return x:matmul(y).dtype, 42 end, a, b)
  eq(dt, low)
  eq(n, 42)
  local okk, err = pcall(torch.autocast, dev, {dtype = low}, function() error("boom") end)
  ok(not okk and tostring(err):find("boom"), "the error passes through")
  eq(torch.is_autocast_enabled(dev), false, "closed after the error")
  eq(a:matmul(b).dtype, torch.float32)
end)

test("the spellings: torch.autocast, torch.amp, torch.cuda.amp, torch.cpu.amp", function()
  eq(torch.amp, amp)
  eq(torch.autocast, amp.autocast)
  ok(type(torch.cuda.amp.autocast) == "function" and type(torch.cuda.amp.GradScaler) == "function")
  local a = randn(2, 2)
  if dev == "cpu" then
    local _ <close> = torch.cpu.amp.autocast()
    eq(a:matmul(a).dtype, torch.bfloat16)
  else
    local _ <close> = torch.cuda.amp.autocast()
    eq(a:matmul(a).dtype, torch.float16, "torch.cuda.amp.autocast defaults to float16")
  end
end)

T.cpu_test("autocast's bad arguments", function()
  raises(function() torch.autocast("xpu") end, "autocast: unsupported device_type 'xpu'")
  raises(function() torch.is_autocast_enabled("x") end, "is_autocast_enabled: unsupported device_type 'x'")
  raises(function() torch.get_autocast_dtype(5) end, "bad argument #1 to 'get_autocast_dtype' (device_type string")
  raises(function() torch.get_autocast_dtype() end, "bad argument #1 to 'get_autocast_dtype' (device_type string")
  raises(function() torch.autocast(3) end, "bad argument #1 to 'autocast' (device_type string")
  raises(function() torch.autocast("cpu", {enabled = 1}) end, "autocast: option 'enabled': boolean expected, got number")
  raises(function() torch.autocast("cpu", {cache_enabled = "no"}) end, "option 'cache_enabled': boolean expected")
  raises(function() torch.autocast("cpu", {dtyp = torch.bfloat16}) end, "autocast: unknown option 'dtyp'")
  raises(function() torch.autocast("cpu", {dtype = "float17"}) end, "option 'dtype': a dtype")
  raises(function() torch.autocast("cpu", 5) end, "autocast: option 'dtype': a dtype such as torch.bfloat16 expected, got 5")
  raises(function() torch.autocast("cpu", {}, 5) end, "bad argument #3 to 'autocast' (function expected")
  eq(torch.is_autocast_enabled("cpu"), false, "no region left open by the errors")
  -- float16 on the CPU: PyTorch warns and disables autocast
  local a = torch.randn(2, 2)
  local dt = torch.autocast("cpu", {dtype = torch.float16}, function() return a:matmul(a).dtype end)
  eq(dt, torch.float32, "disabled")
  if not (cuda and cuda.is_available()) then
    local d = torch.autocast("cuda", {}, function() return torch.is_autocast_enabled("cuda") end)
    eq(d, false, "cuda autocast without CUDA is disabled, as PyTorch")
  else
    raises(function() torch.autocast("cuda", {dtype = torch.float32}) end, "dtype torch.float32 is not supported on cuda")
  end
  eq(torch.is_autocast_enabled("cpu"), false)
end)

-- ---- GradScaler ---------------------------------------------------------------

local function scaler(opts) return amp.GradScaler(dev, opts) end

test("the fused check-and-unscale against a Lua loop, strided and empty tensors", function()
  for _, dt in ipairs({torch.float32, torch.float64, torch.bfloat16, torch.float16}) do
    local a = randn(5, 7):to(dt)
    local b = randn(6, 4):to(dt):t() -- strided
    local e = torch.zeros(0, {dtype = dt})
    local want_a, want_b = a:double():mul(0.25):tolist(), b:double():mul(0.25):tolist()
    local found = torch.zeros({}, {dtype = torch.float32})
    torch._amp_foreach_non_finite_check_and_unscale_({a, b, e}, found, torch.full({}, 0.25))
    eq(found:item(), 0, dt .. ": nothing non-finite")
    close(a:double():tolist(), want_a, 1e-2, 1e-3, dt .. " a")
    close(b:double():tolist(), want_b, 1e-2, 1e-3, dt .. " b (strided)")
    -- one inf, one NaN
    a[{2, 3}] = math.huge
    torch._amp_foreach_non_finite_check_and_unscale_({b, a}, found, torch.full({}, 1.0))
    eq(found:item(), 1, dt .. ": inf found")
    local f2 = torch.zeros({}, {dtype = torch.float32})
    local c = randn(3):to(dt)
    c[1] = 0 / 0
    torch._amp_foreach_non_finite_check_and_unscale_({c}, f2, torch.full({}, 1.0))
    eq(f2:item(), 1, dt .. ": NaN found")
  end
  raises(function() torch._amp_foreach_non_finite_check_and_unscale_({torch.ones(2, {dtype = torch.int64})},
    torch.zeros({}), torch.ones({})) end, "tensor 1 is int64; expected a floating dtype")
  raises(function() torch._amp_foreach_non_finite_check_and_unscale_({torch.ones(2)}, torch.zeros(2), torch.ones({})) end,
    "found_inf must be a one-element float32 tensor")
  raises(function() torch._amp_foreach_non_finite_check_and_unscale_({1}, torch.zeros({}), torch.ones({})) end,
    "element 1 of the list is a number, expected a tensor")
end)

local function tiny_problem()
  torch.manual_seed(7)
  local model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)):to(dev)
  local X = torch.randn(64, 8)
  local Y = X:matmul(torch.linspace(-1, 1, 8):reshape(8, 1)) + 0.1
  return model, X, Y
end

test("GradScaler: scale, unscale_, step, update and their order errors", function()
  local model, X, Y = tiny_problem()
  local opt = optim.SGD(model:parameters(), {lr = 0.1})
  local s = scaler({init_scale = 1024, growth_interval = 2})
  eq(s:get_scale(), 1024)
  local loss = nn.functional.mse_loss(model(X), Y)
  local scaled = s:scale(loss)
  close(scaled:item(), loss:item() * 1024, 1e-6, 0)
  scaled:backward()
  local w = model:parameters()[1]
  local g_scaled = w.grad:clone()
  s:unscale_(opt)
  close(w.grad:tolist(), (g_scaled / 1024):tolist(), 1e-6, 0, "unscaled grads")
  raises(function() s:unscale_(opt) end, "unscale_() has already been called on this optimizer since the last update()")
  -- clipping between unscale_ and step sees the true gradients
  local total = nn.utils.clip_grad_norm_(model:parameters(), 1e9)
  ok(total:item() < 1e3, "clip_grad_norm_ after unscale_ sees unscaled grads")
  local before = w:detach():clone()
  s:step(opt)
  ok(not torch.equal(before, w:detach()), "the step ran")
  raises(function() s:step(opt) end, "step() has already been called since the last update()")
  raises(function() s:unscale_(opt) end, "unscale_() is being called after step()")
  s:update()
  eq(s:get_scale(), 1024, "one good step of two")
  opt:zero_grad()
  s:scale(nn.functional.mse_loss(model(X), Y)):backward()
  s:step(opt)
  s:update()
  eq(s:get_scale(), 2048, "grown after growth_interval good steps")
  raises(function() s:update() end, "No inf checks were recorded prior to update")
  s:update(100.0)
  eq(s:get_scale(), 100.0, "update(new_scale)")
  ok(torch.equal(s:scale(torch.ones({})), torch.full({}, 100.0)), "the device scale follows")
  -- a disabled scaler is a pass-through
  local off = scaler({enabled = false})
  eq(off:get_scale(), 1.0)
  eq(off:scale(loss), loss)
  eq(next(off:state_dict()), nil)
end)

test("GradScaler: an inf gradient skips the step and backs the scale off", function()
  local model, X, Y = tiny_problem()
  local opt = optim.SGD(model:parameters(), {lr = 0.1})
  local s = scaler({init_scale = 256, backoff_factor = 0.25})
  s:scale(nn.functional.mse_loss(model(X), Y)):backward()
  local w = model:parameters()[1]
  w.grad[{1, 1}] = math.huge
  local before = {}
  for i, p in ipairs(model:parameters()) do before[i] = p:detach():clone() end
  s:step(opt)
  for i, p in ipairs(model:parameters()) do ok(torch.equal(before[i], p:detach()), "param " .. i .. " untouched") end
  s:update()
  eq(s:get_scale(), 64, "backed off")
end)

test("GradScaler: state_dict and load_state_dict through a checkpoint", function()
  local s = scaler({init_scale = 512, growth_factor = 3, backoff_factor = 0.3, growth_interval = 7})
  local model, X, Y = tiny_problem()
  local function scaled_steps(sc, m, n)
    local opt = optim.SGD(m:parameters(), {lr = 0.01})
    for _ = 1, n do
      opt:zero_grad()
      sc:scale(nn.functional.mse_loss(m(X), Y)):backward()
      sc:step(opt)
      sc:update()
    end
  end
  scaled_steps(s, model, 3)
  local path = os.tmpname()
  torch.save({scaler = s:state_dict(), model = model:state_dict()}, path)
  local ck = torch.load(path)
  os.remove(path)
  local r = scaler()
  r:load_state_dict(ck.scaler)
  eq(r:get_scale(), 512)
  eq(r:get_growth_factor(), 3)
  eq(r:get_backoff_factor(), 0.3)
  eq(r:get_growth_interval(), 7)
  eq(r:state_dict()._growth_tracker, 3)
  -- resumed, it grows on the same step the original would
  local model2 = tiny_problem()
  model2:load_state_dict(ck.model)
  scaled_steps(r, model2, 4)
  eq(r:get_scale(), 512 * 3, "grew at the 7th good step")
  raises(function() r:load_state_dict({}) end, "The source state dict is empty")
  raises(function() r:load_state_dict({scale = "x"}) end, "entry 'scale' must be a number")
end)

T.cpu_test("GradScaler's bad arguments", function()
  raises(function() amp.GradScaler("cpu", {growth_factor = 0.5}) end, "The growth factor must be > 1.0")
  raises(function() amp.GradScaler("cpu", {backoff_factor = 2}) end, "The backoff factor must be < 1.0")
  raises(function() amp.GradScaler("cpu", {growth_interval = 0}) end, "growth_interval must be a positive integer")
  raises(function() amp.GradScaler("cpu", {init_scale = "big"}) end, "option 'init_scale': number expected, got string")
  raises(function() amp.GradScaler("cpu", {growth = 2}) end, "GradScaler: unknown option 'growth'")
  raises(function() amp.GradScaler("tpu") end, "GradScaler: unsupported device 'tpu'")
  local s = amp.GradScaler("cpu")
  raises(function() s:unscale_(5) end, "an optimizer expected")
  raises(function() s:scale("loss") end, "outputs must be a tensor or a table of tensors, got string")
  local p = torch.randn(3, {dtype = torch.float16, requires_grad = true})
  p.grad = torch.ones(3, {dtype = torch.float16})
  raises(function() s:unscale_(optim.SGD({p}, {lr = 1})) end, "Attempting to unscale FP16 gradients")
end)

-- ---- training runs --------------------------------------------------------------

-- Trains the tiny regression for `steps` steps; with low, under autocast and a
-- GradScaler (growth_interval 4), injecting an inf into a gradient at step
-- `inject`. Returns the final loss (float32, full batch) and the scales seen.
local function train(low, steps, inject)
  local model, X, Y = tiny_problem()
  local opt = optim.Adam(model:parameters(), {lr = 0.01})
  local s = low and scaler({init_scale = 2 ^ 10, growth_interval = 4}) or nil
  local scales = {}
  for step = 1, steps do
    opt:zero_grad()
    if low then
      local loss
      do
        local _ <close> = torch.autocast(dev, {dtype = low})
        local out = model(X)
        eq(out.dtype, low, "the model's output")
        loss = nn.functional.mse_loss(out, Y)
        eq(loss.dtype, torch.float32, "the loss")
      end
      s:scale(loss):backward()
      if step == inject then model:parameters()[3].grad[{0, 0}] = math.huge end
      s:unscale_(opt)
      nn.utils.clip_grad_norm_(model:parameters(), 10.0)
      s:step(opt)
      s:update()
      scales[step] = s:get_scale()
    else
      nn.functional.mse_loss(model(X), Y):backward()
      opt:step()
    end
  end
  return torch.no_grad(function() return nn.functional.mse_loss(model(X), Y):item() end), scales
end

for _, low in ipairs(lows) do
  test("training with " .. low .. " autocast and GradScaler reaches float32's loss; the scale backs off and grows", function()
    local ref = train(nil, 60)
    local got, scales = train(low, 60, 10)
    eq(scales[9], 2 ^ 10 * 4, "grown twice in 9 good steps (interval 4)")
    eq(scales[10], 2 ^ 10 * 2, "backed off on the injected inf")
    eq(scales[14], 2 ^ 10 * 4, "grown back 4 good steps later")
    ok(ref < 0.05, "float32 learns: " .. ref)
    ok(math.abs(got - ref) < 0.02 + 0.3 * ref, ("loss %g within tolerance of float32's %g"):format(got, ref))
  end)
end

T.run()
