-- Issue 21, the elementwise part: wrong answers (fmod, sinh and friends,
-- asinh/acosh overflow, isclose with infinities, clamp with min > max,
-- sign/floor_divide/hardsigmoid on special values) and missing ops (asin,
-- acos, atan, atan2, erf, erfinv, copysign, bitwise ops, div's rounding
-- modes, round's decimals, clamp with tensor bounds, the negative/absolute
-- aliases). Values and gradients against PyTorch 1.13's
-- (tests/fixtures/elementwise21/elementwise21_torch.lua, made by
-- gen_elementwise21_fixture.py next to it), gradients against finite
-- differences too, layouts against the contiguous result, CUDA against the
-- CPU. On the cuda pass (TENSH_TEST_DEVICE) the fixture runs on the GPU.
local T = require "harness"
local G = require "gradcheck"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local nan, inf = 0 / 0, math.huge

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local fixture = dofile(here .. "../fixtures/elementwise21/elementwise21_torch.lua")

-- a fixture tensor ({shape, data} or {shape, bool}) in dtype dt
local function tensor(f, dt)
  local values = f.bool or f.data
  if #f.shape == 0 then return torch.tensor(values[1], {dtype = dt}) end
  return torch.tensor(values, {dtype = dt}):view(table.unpack(f.shape))
end

-- PyTorch's CPU kernels (SLEEF) and libm are each within an ulp or two of the
-- true value: float32 to 3 ulp, float64 to 4
local RTOL = {["torch.float32"] = 3.6e-7, ["torch.float64"] = 9e-16}

-- zeros carry PyTorch's sign (1/x tells -0 from +0)
local function zero_signs(actual, expected, what)
  local a, e = T.flat(actual), T.flat(expected)
  for i = 1, #e do
    if e[i] == 0 and type(a[i]) == "number" and 1 / a[i] ~= 1 / e[i] then
      error(("%s: element %d: expected %s0, got %s0"):format(what, i - 1, 1 / e[i] < 0 and "-" or "+",
        1 / a[i] < 0 and "-" or "+"), 2)
    end
  end
end

-- float32 erfinv near +-1: PyTorch's CPU kernel runs its Newton steps in
-- float32 and keeps ~5 digits (erfinv(-0.999999f) -3.4570882, the true value
-- -3.4570747); tensh's is float64's rounded (the float32 test below checks it)
local LOOSER = {["erfinv float32"] = 1e-5}

local function check_values(y, want, dt, what)
  eq(tostring(y.dtype), "torch." .. dt, what .. " dtype")
  eq(tostring(y.shape), tostring(want.shape), what .. " shape")
  close(y, want, LOOSER[what:gsub(" %(.*%)$", "")] or RTOL[tostring(y.dtype)] or 0, 0, what)
  zero_signs(y, want, what)
end

-- ---- the fixture ------------------------------------------------------------------

local METHODLESS = {hardsigmoid = true, allclose = false}
local NO_INPLACE = {isclose = true, allclose = true, hardsigmoid = true}

-- torch's function for a case, its method, and its in-place method (nil when none)
local function callers(case)
  local op, o = case.op, case.opts
  local has_opts = next(o) ~= nil
  local function with_opts(f)
    return function(...)
      if not has_opts then return f(...) end
      local a = table.pack(...)
      a[a.n + 1] = o
      return f(table.unpack(a, 1, a.n + 1))
    end
  end
  if op == "hardsigmoid" then return nn.functional.hardsigmoid end
  local fn = with_opts(torch[op])
  local method = function(self, ...) return with_opts(self[op])(self, ...) end
  local inplace = not NO_INPLACE[op] and function(self, ...) return with_opts(self[op .. "_"])(self, ...) end
  return fn, method, inplace
end

local function inputs_of(case)
  local args = {}
  for k, inp in ipairs(case.inputs) do
    args[k] = inp.number ~= nil and inp.number or tensor(inp.value, inp.dtype)
  end
  return args
end

for _, case in ipairs(fixture) do
  if case.op ~= "clamp_tensor" then
    test("torch fixture: " .. case.name, function()
      local fn, method, inplace = callers(case)
      local args = inputs_of(case)
      local want = tensor(case.y, case.dtype == "bool" and "bool" or case.dtype)
      if case.grads then
        for _, a in ipairs(args) do if torch.is_tensor(a) and a:is_floating_point() then a:requires_grad_() end end
      end
      local y = fn(table.unpack(args))
      if case.op == "allclose" then
        eq(y, want:item(), case.name)
        return
      end
      check_values(y, want, case.dtype, case.name)
      if case.grads then
        eq(y.grad_fn.name, case.grad_fn, case.name .. " grad_fn")
        y:backward(tensor(case.w, case.dtype))
        for k, g in ipairs(case.grads) do
          if not g.none then close(args[k].grad, tensor(g.value, "float64"), 1e-13, 1e-15, case.name .. " grad " .. k) end
        end
        return
      end
      if METHODLESS[case.op] then return end
      -- the method, and the in-place form where the result keeps the first input's dtype
      check_values(method(table.unpack(args)), want, case.dtype, case.name .. " (method)")
      local first = args[1]
      if inplace and first.dtype == y.dtype then
        local x = first:clone()
        local r = inplace(x, table.unpack(args, 2))
        ok(rawequal(r, x), case.name .. ": the in-place form returns its tensor")
        check_values(x, want, case.dtype, case.name .. " (in place)")
      end
    end)
  end
end

local function opt(f) return f and tensor(f, "float64") or nil end

for _, case in ipairs(fixture) do
  if case.op == "clamp_tensor" then
    test("torch fixture: " .. case.name, function()
      local x, lo, hi = tensor(case.x, "float64"):requires_grad_(), opt(case.lo), opt(case.hi)
      if lo then lo:requires_grad_() end
      if hi then hi:requires_grad_() end
      local y = torch.clamp(x, lo, hi)
      check_values(y, tensor(case.y, "float64"), "float64", case.name)
      eq(y.grad_fn.name, case.grad_fn, case.name .. " grad_fn")
      y:backward(tensor(case.w, "float64"))
      close(x.grad, tensor(case.grad_x, "float64"), 0, 0, case.name .. " grad x")
      -- (the bounds' gradients are sums over the broadcast dims: the order of the sums may differ)
      if lo then close(lo.grad, tensor(case.grad_lo, "float64"), 1e-15, 0, case.name .. " grad min") end
      if hi then close(hi.grad, tensor(case.grad_hi, "float64"), 1e-15, 0, case.name .. " grad max") end
      -- the options form and clamp_ (in place, recorded) give the same
      local y2 = x:clamp({min = lo, max = hi})
      close(y2, y, 0, 0, case.name .. " options form")
      local z = x:detach():clone():requires_grad_()
      local w = z * 1
      w:clamp_(lo and lo:detach(), hi and hi:detach())
      close(w, y, 0, 0, case.name .. " clamp_")
      w:sum():backward()
      close(z.grad, tensor(case.grad_x, "float64"):ne(0):double(), 0, 0, case.name .. " clamp_ grad")
    end)
  end
end

-- ---- the issue's examples, by name ---------------------------------------------------

test("issue 21's numbers: fmod's sign, sinh/cosh of negatives, asinh/acosh of large float32", function()
  eq(torch.fmod(torch.tensor(-3), 2):item(), -1, "fmod(-3, 2)")
  eq(torch.remainder(torch.tensor(-3), 2):item(), 1, "remainder(-3, 2) stays Python's")
  close(torch.tensor({-10.0}):sinh(), {-11013.2328747}, 1e-7, 0, "float32 sinh(-10)")
  local s20 = torch.tensor({-20.0}):sinh():item()
  ok(s20 > -math.huge and s20 < -2.4e8, "float32 sinh(-20) is finite: " .. s20)
  close(torch.tensor({89.0}):sinh(), {2.2448064e38}, 1e-6, 0, "float32 sinh(89): PyTorch's finite value")
  eq(torch.tensor({90.0, -90.0}):sinh():tolist()[1], inf, "float32 sinh(90) overflows to inf, not NaN")
  eq(torch.tensor({-90.0}):sinh():item(), -inf, "float32 sinh(-90)")
  close(torch.tensor({-40.0}, {dtype = "float64"}):sinh(), {-math.exp(40) / 2}, 1e-15, 0, "float64 sinh(-40)")
  close(torch.tensor({-89.0}):cosh(), {2.2448064e38}, 1e-6, 0, "float32 cosh(-89)")
  close(torch.tensor({1e20, -1e20, 1e38}):asinh(), {46.744849, -46.744849, 88.191376}, 1e-7, 0, "float32 asinh")
  close(torch.tensor({1e20, 1e38}):acosh(), {46.744849, 88.191376}, 1e-7, 0, "float32 acosh")
  close(torch.tensor({-20.0, 20.0}):tanh(), {-1, 1}, 0, 0, "tanh saturates")
end)

test("sign(NaN) and sign(-0) are +0, floor_divide of infinities, hardsigmoid(NaN), isclose of infinities", function()
  local s = torch.tensor({nan, -0.0, -2, 3}):sign():tolist()
  eq(1 / s[1], inf, "sign(NaN) is +0")
  eq(1 / s[2], inf, "sign(-0) is +0")
  eq(s[3] .. " " .. s[4], "-1.0 1.0", "sign")
  local f = torch.floor_divide(torch.tensor({inf, 3.0, 1.0}, {dtype = "float64"}), torch.tensor({2.0, -inf, 0.1}, {dtype = "float64"})):tolist()
  ok(f[1] ~= f[1], "floor_divide(inf, 2) is NaN")
  eq(f[2], -1.0, "floor_divide(3, -inf)")
  eq(f[3], 9.0, "floor_divide(1, 0.1) as Python's 1.0 // 0.1 (floor(1 / 0.1) is 10)")
  ok(nn.functional.hardsigmoid(torch.tensor({nan})):item() ~= nn.functional.hardsigmoid(torch.tensor({nan})):item(),
    "hardsigmoid(NaN) is NaN")
  local c = torch.isclose(torch.tensor({inf, inf, 1.0}), torch.tensor({inf, -inf, inf})):tolist()
  eq(table.concat({tostring(c[1]), tostring(c[2]), tostring(c[3])}, " "), "true false false", "isclose")
  eq(torch.allclose(torch.tensor({1.0}), torch.tensor({inf})), false, "allclose(1, inf)")
end)

-- ---- layouts, shapes, devices -----------------------------------------------------------

local UNARY21 = {"sinh", "cosh", "tanh", "asinh", "atanh", "expm1", "exp2", "log2", "log10", "tan", "asin", "acos",
                 "atan", "erf", "erfinv", "trunc", "sign", "acosh"}
local BINARY21 = {"fmod", "atan2", "copysign", "remainder", "floor_divide"}

-- inputs inside every op's domain: (-0.9, 0.9), and 1 + that for acosh
local function domain_input(shape, dt)
  return (torch.rand(shape, {dtype = "float64"}) * 1.8 - 0.9):to(dt)
end
local function shift(op, x) return op == "acosh" and x:abs() + 1 or x end

test("non-contiguous, broadcast, empty and 0-dim inputs give the contiguous answers", function()
  for _, dt in ipairs({"float32", "float64"}) do
    local base = domain_input({4, 6}, dt)
    for _, op in ipairs(UNARY21) do
      local x = shift(op, base)
      local want = x[op](x)
      close(x:t()[op](x:t()), want:t(), 0, 0, dt .. " " .. op .. " transposed")
      close(x[{{}, {0, 6, 2}}][op](x[{{}, {0, 6, 2}}]), want[{{}, {0, 6, 2}}], 0, 0, dt .. " " .. op .. " stepped")
      local e = x[op](x:narrow(0, 0, 0))
      eq(tostring(e.shape), "torch.Size([0, 6])", op .. " empty")
      local z = x[1][2]
      local r = z[op](z)
      eq(r:dim(), 0, op .. " 0-dim")
      close(r, want[1][2], 0, 0, op .. " 0-dim value")
      local ex = x[{{0, 1}}]:expand(4, 6)
      close(ex[op](ex), want[{{0, 1}}]:expand(4, 6), 0, 0, op .. " expanded")
    end
    local a, b = base * 4, base:flip(1) * 3 + 0.5
    for _, op in ipairs(BINARY21) do
      local want = torch[op](a, b)
      close(torch[op](a:t(), b:t()), want:t(), 0, 0, dt .. " " .. op .. " transposed")
      local row = b[{{1, 2}}]
      close(torch[op](a, row), torch[op](a, row:expand(4, 6):contiguous()), 0, 0, dt .. " " .. op .. " broadcast row")
      close(torch[op](a, 1.5), torch[op](a, torch.full({4, 6}, 1.5, {dtype = dt})), 0, 0, dt .. " " .. op .. " number")
      eq(tostring(torch[op](a:narrow(0, 0, 0), b:narrow(0, 0, 0)).shape), "torch.Size([0, 6])", op .. " empty")
      local z = torch[op](a[0][0], b[1][1])
      eq(z:dim(), 0, op .. " 0-dim")
      close(z, torch[op](a[0][0]:reshape(1), b[1][1]:reshape(1)), 0, 0, op .. " 0-dim value")
    end
  end
  -- integers: bitwise ops, fmod and div's modes over a transposed and a broadcast operand
  local i = torch.arange(-12, 12):view(4, 6)
  local j = torch.tensor({{3, -5, 7, 2, -1, 9}})
  for _, op in ipairs({"bitwise_and", "bitwise_or", "bitwise_xor", "fmod", "remainder", "floor_divide"}) do
    close(torch[op](i:t(), j:t()), torch[op](i, j:expand(4, 6):contiguous()):t(), 0, 0, "int " .. op)
  end
  close(torch.div(i:t(), j:t(), {rounding_mode = "trunc"}), torch.div(i, j:expand(4, 6), {rounding_mode = "trunc"}):t(),
    0, 0, "int div trunc")
  close(i:t():bitwise_not(), i:bitwise_not():t(), 0, 0, "int bitwise_not transposed")
end)

-- values the CPU computes in float64 (checked against PyTorch above) are the
-- reference for float32, float16 and bfloat16 on either device
test("float32 and the half types follow float64 within their precision", function()
  local x64 = domain_input({64}, "float64")
  for _, op in ipairs(UNARY21) do
    local x = shift(op, x64)
    -- to the dtype's rounding (and float32's few ulp) of the float64 op at the
    -- input rounded to the dtype: rounding x is not the op's error
    for _, d in ipairs({{"float32", 4e-7, 1e-30}, {"float16", 1e-3, 1e-7}, {"bfloat16", 8e-3, 1e-30}}) do
      local xd = x:to(d[1])
      local got = xd[op](xd)
      eq(tostring(got.dtype), "torch." .. d[1], op .. " " .. d[1] .. " dtype")
      close(got:double(), xd:double()[op](xd:double()), d[2], d[3], op .. " " .. d[1])
    end
  end
end)

test("cuda matches the cpu for the new kernels, every dtype they take", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  local function same(got, want, what, rtol, atol)
    ok(got.is_cuda, what .. " on cuda")
    eq(tostring(got.dtype), tostring(want.dtype), what .. " dtype")
    close(got:cpu(), want, rtol, atol, what)
  end
  local tol = {float32 = {2e-6, 1e-7}, float64 = {1e-14, 1e-15}, float16 = {1e-3, 1e-3}, bfloat16 = {1e-2, 1e-2}}
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16"}) do
    local base = domain_input({5, 7}, "float64"):to(dt):to("cpu")
    for _, op in ipairs(UNARY21) do
      local x = shift(op, base)
      same(x:cuda():t()[op](x:cuda():t()), x:t()[op](x:t()), dt .. " " .. op, tol[dt][1], tol[dt][2])
    end
    local a, b = (base * 4):to("cpu"), (base:flip(0) * 3 + 0.5):to("cpu")
    for _, op in ipairs(BINARY21) do
      same(torch[op](a:cuda(), b:cuda()[{{0, 1}}]), torch[op](a, b[{{0, 1}}]), dt .. " " .. op, tol[dt][1], tol[dt][2])
    end
    for _, d in ipairs({-2, 0, 2}) do
      same((a * 50):cuda():round({decimals = d}), (a * 50):round({decimals = d}), dt .. " round " .. d, tol[dt][1], tol[dt][2])
    end
    same(torch.div(a:cuda(), b:cuda(), {rounding_mode = "trunc"}), torch.div(a, b, {rounding_mode = "trunc"}), dt .. " div trunc", 0, 0)
    same(a:cuda():clamp(0.5, -0.5), a:clamp(0.5, -0.5), dt .. " clamp min > max", 0, 0)
  end
  local special = torch.tensor({nan, inf, -inf, 0.0, -0.0, 3.0, -7.5, 1e30}, {device = "cpu"})
  local div = torch.tensor({2.0, 2.0, 3.0, -inf, inf, 0.0, 0.7, -3.0}, {device = "cpu"})
  for _, op in ipairs({"floor_divide", "fmod", "remainder", "copysign", "atan2"}) do
    same(torch[op](special:cuda(), div:cuda()), torch[op](special, div), "special " .. op, 0, 0)
    zero_signs(torch[op](special:cuda(), div:cuda()):cpu(), torch[op](special, div), "special " .. op .. " zero signs")
  end
  same(special:cuda():sign(), special:sign(), "special sign", 0, 0)
  zero_signs(special:cuda():sign():cpu(), special:sign(), "special sign zero signs")
  for _, dt in ipairs({"int64", "int32", "int16", "int8", "uint8", "bool"}) do
    local x = dt == "bool" and torch.randint(0, 2, {5, 7}, {device = "cpu"}):bool()
      or torch.randint(-100, 100, {5, 7}, {device = "cpu"}):to(dt)
    local y = dt == "bool" and x:logical_not() or (x * 3 + 1):to(dt)
    for _, op in ipairs({"bitwise_and", "bitwise_or", "bitwise_xor"}) do
      same(torch[op](x:cuda():t(), y:cuda():t()), torch[op](x:t(), y:t()), dt .. " " .. op, 0, 0)
    end
    same(x:cuda():bitwise_not(), x:bitwise_not(), dt .. " bitwise_not", 0, 0)
    if dt ~= "bool" then
      local nz = torch.where(y:eq(0), 1, y):to(dt)
      for _, op in ipairs({"fmod", "floor_divide"}) do same(torch[op](x:cuda(), nz:cuda()), torch[op](x, nz), dt .. " " .. op, 0, 0) end
      same(torch.div(x:cuda(), nz:cuda(), {rounding_mode = "trunc"}), torch.div(x, nz, {rounding_mode = "trunc"}), dt .. " div trunc", 0, 0)
      same(x:cuda():clamp(5, -5), x:clamp(5, -5), dt .. " clamp min > max", 0, 0)
    end
  end
  raises(function() return torch.fmod(torch.tensor({3}):cuda(), torch.tensor({0}):cuda()) end, "integer division by zero", "cuda int fmod by 0")
  raises(function() return torch.div(torch.tensor({3}):cuda(), torch.tensor({0}):cuda(), {rounding_mode = "trunc"}) end,
    "integer division by zero", "cuda int div trunc by 0")
  -- clamp with tensor bounds, and its gradients, on the device
  local x = torch.randn(4, 5, {dtype = "float64", device = "cpu"})
  local lo, hi = torch.randn(4, 1, {dtype = "float64", device = "cpu"}) - 0.5, torch.randn(5, {dtype = "float64", device = "cpu"}) + 0.5
  local function run(d)
    local xs, los, his = x:to(d):detach():requires_grad_(), lo:to(d):detach():requires_grad_(), hi:to(d):detach():requires_grad_()
    local y = torch.clamp(xs, los, his)
    y:backward(torch.ones(4, 5, {dtype = "float64", device = d}))
    return y, xs.grad, los.grad, his.grad
  end
  local c, g = {run("cpu")}, {run("cuda")}
  for k = 1, 4 do same(g[k], c[k], "clamp tensor bounds result/grad " .. k, 0, 0) end
end)

-- ---- errors ----------------------------------------------------------------------------

test("errors name the function and what was wrong", function()
  raises(function() return torch.bitwise_and(torch.tensor({1.5}), 1) end, "bitwise_and: expected integer or bool tensors, got float32")
  raises(function() return torch.tensor({1.5}):bitwise_not() end, "bitwise_not: expected integer or bool tensors, got float32")
  raises(function() return torch.tensor({1.5}):bitwise_not_() end, "bitwise_not: expected integer or bool tensors")
  raises(function() return torch.tensor({1, 2}) | 1.5 end, "bitwise_or: expected integer or bool tensors, got float32")
  raises(function() return torch.round(torch.tensor({15}), {decimals = 1}) end, "round: decimals is only supported for floating-point tensors, got int64")
  raises(function() return torch.tensor({15}):round_({decimals = -1}) end, "round: decimals is only supported for floating-point tensors")
  raises(function() return torch.round(torch.tensor({1.5}), {decimal = 1}) end, "round: unknown option 'decimal' (expected one of: decimals; did you mean 'decimals'?)")
  raises(function() return torch.round(torch.tensor({1.5}), {decimals = 1.5}) end, "decimals")
  raises(function() return torch.sinh(torch.tensor({1.5}), {out = 1}) end, "sinh: unknown option 'out' (sinh takes no options)")
  raises(function() return torch.tensor({1.5}):exp_({inplace = true}) end, "exp_: unknown option 'inplace' (exp_ takes no options)")
  raises(function() return torch.tensor({1.5}):negative({x = 1}) end, "neg: unknown option 'x'")
  raises(function() return torch.div(torch.tensor({1.5}), 2, {rounding_mode = "round"}) end,
    "div: rounding_mode must be nil, 'trunc' or 'floor', got 'round'")
  raises(function() return torch.div(torch.tensor({1.5}), 2, {rounding_mode = 3}) end, "div: rounding_mode must be nil, 'trunc' or 'floor', got number")
  raises(function() return torch.true_divide(torch.tensor({1.5}), 2, {rounding_mode = "floor"}) end, "true_divide: unknown option 'rounding_mode'")
  raises(function() return torch.fmod(torch.tensor({3}), 0) end, "fmod: integer division by zero")
  raises(function() return torch.fmod(torch.tensor({3}), torch.tensor({0})) end, "fmod: integer division by zero")
  raises(function() return torch.div(torch.tensor({3}), torch.tensor({0}), {rounding_mode = "trunc"}) end, "integer division by zero")
  raises(function() return torch.fmod(torch.tensor({true}), torch.tensor({true})) end, "fmod is not supported for two bool tensors")
  raises(function() return torch.div(torch.tensor({true}), torch.tensor({true}), {rounding_mode = "trunc"}) end, "not supported for two bool tensors")
  raises(function() return torch.clamp(torch.tensor({1.0}), "a") end, "clamp: 'min' must be a number or a tensor, got string")
  raises(function() return torch.clamp(torch.tensor({1.0}), nil, true) end, "clamp: 'max' must be a number or a tensor, got boolean")
  raises(function() return torch.clamp(torch.tensor({1.0}), {max = {}}) end, "clamp: option 'max' must be a number or a tensor, got table")
  raises(function() return torch.clamp(torch.tensor({1.0})) end, "clamp: at least one of 'min' or 'max' must not be nil")
  raises(function() return torch.clamp(torch.tensor({true}), torch.tensor({false})) end, "clamp is not supported for bool tensors")
  raises(function() return torch.clamp(torch.ones(2, 3), torch.ones(4)) end, "shapes (2, 3) and (4,) cannot be broadcast")
  raises(function() return torch.ones(3):clamp_(torch.ones(2, 3)) end, "clamp_: output with shape (3,) doesn't match the broadcast shape (2, 3)")
  raises(function() return torch.ones(3, {dtype = "int64"}):clamp_(torch.tensor({0.5})) end, "clamp_: result type float32 can't be cast to the desired output type int64")
  raises(function() return torch.atan2(torch.ones(2), torch.ones(3)) end, "atan2: shapes (2,) and (3,) cannot be broadcast")
  raises(function() return torch.tensor({1}):fmod_(1.5) end, "fmod: result type float32 can't be cast to the desired output type int64")
end)

-- ---- aliases, operators, in-place forms ------------------------------------------------

test("negative, absolute and their in-place forms; Lua's & | ~ operators", function()
  local x = torch.tensor({-1.5, 2.0, -0.0})
  close(x:negative(), {1.5, -2.0, 0.0}, 0, 0, "negative")
  close(torch.negative(x), {1.5, -2.0, 0.0}, 0, 0, "torch.negative")
  close(x:absolute(), {1.5, 2.0, 0.0}, 0, 0, "absolute")
  close(torch.absolute(torch.tensor({-3, 4})), {3, 4}, 0, 0, "int absolute")
  local y = x:clone()
  ok(rawequal(y:negative_(), y), "negative_ returns its tensor")
  close(y, {1.5, -2.0, 0.0}, 0, 0, "negative_")
  y:absolute_()
  close(y, {1.5, 2.0, 0.0}, 0, 0, "absolute_")
  local a, b = torch.tensor({12, 10, -1}), torch.tensor({6, 3, 5})
  close(a & b, {4, 2, 5}, 0, 0, "&")
  close(a | b, {14, 11, -1}, 0, 0, "|")
  close(a ~ b, {10, 9, -6}, 0, 0, "~ (exclusive or)")
  close(~a, {-13, -11, 0}, 0, 0, "~ (not)")
  close(a & 6, {4, 2, 6}, 0, 0, "& number")
  close(3 | a, {15, 11, -1}, 0, 0, "number |")
  local t, f = torch.tensor({true, true, false}), torch.tensor({true, false, false})
  eq(table.concat(T.map((t & f):tolist(), tostring), " "), "true false false", "bool &")
  eq(table.concat(T.map((t ~ f):tolist(), tostring), " "), "false true false", "bool ~")
  eq(table.concat(T.map((~t):tolist(), tostring), " "), "false false true", "bool ~: logical not, as PyTorch's ~")
  local u = torch.tensor({0, 5}, {dtype = "uint8"})
  close(~u, {255, 250}, 0, 0, "uint8 ~")
  local c = a:clone()
  c:bitwise_and_(b)
  close(c, {4, 2, 5}, 0, 0, "bitwise_and_")
  c:bitwise_not_()
  close(c, {-5, -3, -6}, 0, 0, "bitwise_not_")
  local q = torch.tensor({7, -7})
  q:div_(2, {rounding_mode = "floor"})
  close(q, {3, -4}, 0, 0, "div_ floor keeps integers")
  local r = torch.tensor({7.0, -7.0})
  r:divide_(2, {rounding_mode = "trunc"})
  close(r, {3, -3}, 0, 0, "divide_ trunc")
  close(torch.tensor({5.0}):true_divide(2), {2.5}, 0, 0, "true_divide")
  close(torch.clamp_min(torch.tensor({1.0, 5.0}), torch.tensor({2.0, 2.0})), {2, 5}, 0, 0, "clamp_min with a tensor")
  close(torch.tensor({1.0, 5.0}):clamp_max(torch.tensor(3.0)), {1, 3}, 0, 0, "clamp_max with a tensor")
  close(torch.clamp(torch.tensor({1, 5, 9}), 2, torch.tensor({4, 4, 10})), {2, 4, 9}, 0, 0, "clamp number and tensor bounds")
  eq(tostring(torch.clamp(torch.tensor({1, 5}), torch.tensor({2.5})).dtype), "torch.float32", "clamp promotes to the bounds' dtype")
end)

-- ---- gradients by finite differences (independent of the fixture) ------------------------

test("gradients of the new kernels against finite differences", function()
  local g = {-0.8, -0.3, 0.1, 0.45, 0.7}
  for _, op in ipairs({"sinh", "cosh", "tanh", "asinh", "atanh", "expm1", "exp2", "tan", "asin", "acos", "atan", "erf",
                       "erfinv"}) do
    G.check(op, function(t) return t[op](t) end, {g})
  end
  G.check("acosh", function(t) return t:acosh() end, {{1.2, 1.5, 3.0, 10.0}})
  G.check("log2 log10", function(t) return t:log2() + t:log10() end, {{0.2, 0.5, 1.5, 7.0}})
  G.check("round decimals (zero)", function(t) return t:round({decimals = 1}) * 0 + t end, {{0.123, 0.456}})
  local a, b = {5.5, -5.5, 0.7, -2.2, 3.3}, {2.0, 2.1, -0.3, 0.9, -1.3} -- quotients away from integers (fmod jumps there)
  G.check("fmod", function(x, y) return torch.fmod(x, y) end, {a, b})
  G.check("atan2", function(x, y) return torch.atan2(x, y) end, {a, b})
  G.check("copysign", function(x, y) return torch.copysign(x, y) end, {a, b})
  G.check("clamp tensor bounds", function(x, lo, hi) return torch.clamp(x, lo, hi) end,
    {{{-2.0, 0.5, 1.1, 3.0}, {4.0, -1.0, 2.2, 0.1}}, {{0.3}, {1.0}}, {1.3, 3.1, 0.6, 2.1}})
  G.check("clamp tensor min", function(x, lo) return x:clamp({min = lo}) end, {{-2.0, 0.5, 1.1}, {0.3, 0.7, 0.9}})
  -- an integer x with a float bound: the bound alone gets a gradient
  local lo = torch.tensor({2.5, 0.5}, {dtype = "float64", requires_grad = true})
  torch.clamp(torch.tensor({1, 5}), lo):sum():backward()
  close(lo.grad, {1, 0}, 0, 0, "grad of the min for an integer x")
end)

T.run()
