-- float32 erf, exact GELU and GELU's backward (src/cpu/vmath.h's ts_erff on
-- the CPU) against float64 on dense grids: every binade of both signs
-- (subnormals to the largest finite), a fine linear grid over [-6, 6] (both
-- pieces of the approximation and the seam at 0.921875, the tail where erf
-- rounds to +-1), +-0, +-inf, NaN; strided operands against contiguous ones,
-- the half types against float32. On the cuda pass the same checks hold the
-- device's erf to the same bound.
local T = require "harness"
local test, eq, ok = T.test, T.eq, T.ok
local nan, inf = 0 / 0, math.huge

-- a float32's bits as an integer that orders floats (-0 and +0 are both 0)
local function key(v)
  local b = string.unpack("<i4", string.pack("<f", v))
  if b < 0 then b = -(b & 0x7fffffff) end
  return b
end

-- float32 values: every 2^k-th bit pattern of [0, inf) with both signs, a
-- linear grid over [-6, 6] in steps of 1e-4 (rounded to float32), and the
-- specials
local function grid(step_bits)
  local v = {0.0, -0.0, inf, -inf, nan, 0.921875, -0.921875, 4.0, -4.0}
  for b = 0, 0x7f7fffff, step_bits do
    local x = string.unpack("<f", string.pack("<I4", b))
    v[#v + 1], v[#v + 2] = x, -x
  end
  for i = -60000, 60000 do v[#v + 1] = i * 1e-4 end
  return v
end

-- the largest distance in float32 ulps between a float32 result and the
-- float32 rounding of the float64 reference (NaN must match NaN, zeros their sign)
local function max_ulps(xs, got, want, what)
  local worst, at = 0, nil
  for i = 1, #want do
    local g, w = got[i], want[i]
    if w ~= w then
      ok(g ~= g, ("%s(%.9g): expected NaN, got %.9g"):format(what, xs[i], g))
    else
      w = string.unpack("<f", string.pack("<f", w)) -- rounded to float32
      ok(g == g, ("%s(%.9g): got NaN, expected %.9g"):format(what, xs[i], w))
      if w == 0 then eq(1 / g, 1 / w, ("%s(%.9g): zero's sign"):format(what, xs[i])) end
      local d = math.abs(key(g) - key(w))
      if d > worst then worst, at = d, i end
    end
  end
  return worst, at and xs[at]
end

test("float32 erf is within 2 ulp of float64's over every binade, the specials and a dense grid", function()
  local xs = grid(0x3fff) -- ~65,000 patterns a sign: 128 per binade
  local x = torch.tensor(xs, {dtype = "float32"})
  local got, want = x:erf():tolist(), x:double():erf():tolist()
  local xs32 = x:tolist()
  local worst, at = max_ulps(xs32, got, want, "erf")
  ok(worst <= 2, ("erf: %d ulp from float64's at x = %.9g"):format(worst, at or 0))
  local f = x:isfinite()
  eq(torch.erf(x[f]):equal(x[f]:erf()), true, "torch.erf and Tensor:erf")
end)

test("float32 erf on strided views, in place and in the half types", function()
  local x = torch.linspace(-5, 5, 4001, {dtype = "float32"})
  local want = x:erf()
  -- a stepped view and a transposed one take the strided loop
  eq(x[{{0, nil, 3}}]:erf():equal(want[{{0, nil, 3}}]), true, "stepped view")
  local m = x[{{0, 4000}}]:view(40, 100)
  eq(m:t():erf():equal(want[{{0, 4000}}]:view(40, 100):t()), true, "transposed view")
  local y = x:clone()
  y:erf_()
  eq(y:equal(want), true, "erf_")
  for _, dt in ipairs({"float16", "bfloat16"}) do
    local h = x:to(dt)
    -- computed in float32, rounded on the store
    eq(h:erf():equal(h:float():erf():to(dt)), true, dt .. " erf")
  end
  eq(torch.tensor({}, {dtype = "float32"}):erf():numel(), 0, "empty")
  eq(torch.tensor(0.5, {dtype = "float32"}):erf():dim(), 0, "0-dim")
end)

-- GELU's float32 error comes from erf's (about 2 ulp of a value near 1) and
-- the cancellation in 1 + erf(x / sqrt 2) for negative x, the same in
-- PyTorch's float kernel: bounded by |x| 2^-22 plus a relative 2^-21
local function check_abs(xs, got, want, what, scale)
  for i = 1, #want do
    local g, w = got[i], want[i]
    if w ~= w then
      ok(g ~= g, ("%s(%.9g): expected NaN, got %.9g"):format(what, xs[i], g))
    else
      local tol = scale(xs[i]) * 2 ^ -22 + math.abs(w) * 2 ^ -21
      ok(g == w or math.abs(g - w) <= tol, ("%s(%.9g): expected %.9g, got %.9g"):format(what, xs[i], w, g))
    end
  end
end

test("float32 exact GELU and its backward against float64 over a dense grid and the specials", function()
  local xs = {0.0, -0.0, inf, -inf, nan, 1e-30, -1e-30, 1e-40, -1e-40, 1e30, -1e30}
  for i = -100000, 100000 do xs[#xs + 1] = i * 1e-4 end -- [-10, 10]: GELU's tail reaches float's bottom
  local x = torch.tensor(xs, {dtype = "float32"})
  local x64 = x:double()
  local xs32 = x:tolist()
  local finite = x:isfinite()
  check_abs(xs32, x:gelu():tolist(), x64:gelu():tolist(), "gelu", math.abs)
  -- the backward of the finite points (gelu'(+-inf) is NaN for PyTorch as for tensh: inf * 0)
  local xf = x[finite]:clone():requires_grad_()
  local xf64 = x64[finite]:clone():requires_grad_()
  local g32 = torch.autograd.grad(nn.functional.gelu(xf):sum(), xf)[1]
  local g64 = torch.autograd.grad(nn.functional.gelu(xf64):sum(), xf64)[1]
  check_abs(xf:detach():tolist(), g32:tolist(), g64:tolist(), "gelu backward", function(v) return 1 + math.abs(v) end)
end)

test("GELU forward and backward: strided operands match contiguous ones, tanh approximation unchanged", function()
  local x = torch.linspace(-6, 6, 3001, {dtype = "float32"})
  local g = torch.linspace(-1, 1, 3001, {dtype = "float32"})
  for _, approx in ipairs({"none", "tanh"}) do
    local function grad_of(xv, gv)
      local leaf = xv:detach():requires_grad_()
      return torch.autograd.grad({nn.functional.gelu(leaf, {approximate = approx})}, {leaf}, {grad_outputs = {gv}})[1]
    end
    local y, dy = nn.functional.gelu(x, {approximate = approx}), grad_of(x, g)
    local s = {{0, nil, 2}}
    eq(nn.functional.gelu(x[s], {approximate = approx}):equal(y[s]), true, approx .. ": stepped forward")
    eq(grad_of(x[s], g[s]):equal(dy[s]), true, approx .. ": stepped backward")
    local x64 = x:double()
    local y64, dy64 = nn.functional.gelu(x64, {approximate = approx}), grad_of(x64, g:double())
    local xs = x:tolist()
    check_abs(xs, y:tolist(), y64:tolist(), "gelu " .. approx, math.abs)
    check_abs(xs, dy:tolist(), dy64:tolist(), "gelu backward " .. approx, function(v) return 1 + math.abs(v) end)
  end
end)

T.run()
