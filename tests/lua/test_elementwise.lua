-- Elementwise ops against Lua double references, over dtypes, broadcasting,
-- non-contiguous, empty and 0-dim inputs, plus every error path.
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises

local function sigmoid(x) return 1 / (1 + math.exp(-x)) end
local function erf(x) -- Abramowitz-Stegun 7.1.26 is too coarse; use a series/continued fraction
  local t = 1 / (1 + 0.5 * math.abs(x))
  local y = 1 - t * math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
  return x >= 0 and y or -y
end

local unary = {
  exp = math.exp, sin = math.sin, cos = math.cos, tanh = function(x) return (math.exp(2 * x) - 1) / (math.exp(2 * x) + 1) end,
  sigmoid = sigmoid, abs = math.abs, neg = function(x) return -x end,
  relu = function(x) return x > 0 and x or 0 end, silu = function(x) return x * sigmoid(x) end,
  floor = math.floor, ceil = math.ceil, sign = function(x) return x > 0 and 1 or x < 0 and -1 or 0 end,
  reciprocal = function(x) return 1 / x end,
  gelu = function(x) return 0.5 * x * (1 + erf(x / math.sqrt(2))) end,
  sinc = function(x) return x == 0 and 1 or math.sin(math.pi * x) / (math.pi * x) end,
}
local positive = {
  log = math.log, sqrt = math.sqrt, rsqrt = function(x) return 1 / math.sqrt(x) end,
  log1p = function(x) return math.log(1 + x) end,
}
-- ops called with parameters, or giving bool: {call, reference}
local called = {
  pow_scalar = {function(t) return t:pow(3) end, function(x) return x ^ 3 end},
  logical_not = {function(t) return t:logical_not():double() end, function(x) return x == 0 and 1 or 0 end},
}

-- Every unary op of the registry against a reference: a Lua formula above,
-- or PyTorch's values in tests/fixtures/elementwise21 (test_elementwise21.lua
-- checks those); a new op without either fails here, naming it.
test("unary ops match float64 references (float32 and float64)", function()
  local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
  local by_torch = {}
  for _, case in ipairs(dofile(here .. "../fixtures/elementwise21/elementwise21_torch.lua")) do by_torch[case.op] = true end
  local lacking = {}
  for _, dt in ipairs({"float32", "float64"}) do
    local tol = dt == "float32" and 1e-5 or 1e-12
    local vals, pvals = T.rand_list({4, 5}, -3, 3), T.rand_list({3, 4}, 0.1, 5)
    local x, p = torch.tensor(vals, {dtype = dt}), torch.tensor(pvals, {dtype = dt})
    for _, name in ipairs(T.unary_ops()) do
      local rt = name == "gelu" and math.max(tol, 1e-6) or tol
      if unary[name] then
        close(x[name](x), T.map(vals, unary[name]), rt, rt, dt .. " " .. name)
        close(torch[name](x), T.map(vals, unary[name]), rt, rt, "torch." .. name)
      elseif positive[name] then
        close(p[name](p), T.map(pvals, positive[name]), tol, tol, dt .. " " .. name)
      elseif called[name] then
        close(called[name][1](x), T.map(vals, called[name][2]), tol, tol, dt .. " " .. name)
      elseif not by_torch[name] and dt == "float64" then
        lacking[#lacking + 1] = name
      end
    end
  end
  eq(table.concat(lacking, ", "), "", "unary ops of the registry with no reference (a Lua formula here or PyTorch's values)")
end)

test("round is half to even, as torch", function()
  close(torch.tensor({0.5, 1.5, 2.5, -0.5, -1.5, 2.4}):round(), {0, 2, 2, -0, -2, 2})
end)

test("half and bfloat16 compute in float and round on store", function()
  local vals = {0.1, 1.5, -2.25, 3.0}
  for _, dt in ipairs({"float16", "bfloat16"}) do
    local x = torch.tensor(vals, {dtype = dt})
    eq(x.dtype, "torch." .. dt, "dtype")
    close(x:exp():float(), T.map(vals, math.exp), dt == "float16" and 1e-3 or 1e-2, 0, dt .. " exp")
    close((x * 2):float(), T.map(vals, function(v) return 2 * v end), 1e-2, 1e-3, dt .. " mul")
  end
end)

test("integer inputs of float ops become float32", function()
  local x = torch.tensor({1, 2, 3})
  eq(x.dtype, "torch.int64", "tensor from integers")
  eq(x:exp().dtype, "torch.float32", "exp(int)")
  eq(x:abs().dtype, "torch.int64", "abs(int)")
  close(x:sqrt(), {1, math.sqrt(2), math.sqrt(3)})
end)

test("binary ops and operators with broadcasting and Lua numbers on either side", function()
  local av, bv = T.rand_list({3, 1, 4}), T.rand_list({2, 1})
  local a, b = torch.tensor(av, {dtype = "float64"}), torch.tensor(bv, {dtype = "float64"})
  local function ref(f)
    local out = {}
    for i = 1, 3 do
      out[i] = {}
      for j = 1, 2 do
        out[i][j] = {}
        for k = 1, 4 do out[i][j][k] = f(av[i][1][k], bv[j][1]) end
      end
    end
    return out
  end
  eq(tostring((a + b).shape), "torch.Size([3, 2, 4])", "broadcast shape")
  close(a + b, ref(function(x, y) return x + y end), 1e-12)
  close(a - b, ref(function(x, y) return x - y end), 1e-12)
  close(a * b, ref(function(x, y) return x * y end), 1e-12)
  close(a / b, ref(function(x, y) return x / y end), 1e-12)
  close(torch.maximum(a, b), ref(math.max), 1e-12)
  close(a:add(b, {alpha = 2}), ref(function(x, y) return x + 2 * y end), 1e-12)
  close(2 - a, T.map(av, function(x) return 2 - x end), 1e-12)
  close(a * 3, T.map(av, function(x) return x * 3 end), 1e-12)
  close(1 / a, T.map(av, function(x) return 1 / x end), 1e-12)
  close(-a, T.map(av, function(x) return -x end), 1e-12)
  close(a ^ 2, T.map(av, function(x) return x * x end), 1e-12)
  close(2 ^ a, T.map(av, function(x) return 2 ^ x end), 1e-12)
end)

test("floor division and remainder follow Python's signs", function()
  local a, b = torch.tensor({7, -7, 7, -7}), torch.tensor({2, 2, -2, -2})
  close(a // b, {3, -4, -4, 3})
  close(a % b, {1, 1, -1, -1})
  close(a:float() % b:float(), {1, 1, -1, -1})
  close(a:float() // b:float(), {3, -4, -4, 3})
  eq((a // b).dtype, "torch.int64", "int floor division stays int")
  eq((a / b).dtype, "torch.float32", "true division of ints is float")
  raises(function() return a // torch.tensor({0, 1, 1, 1}) end, "division by zero")
end)

test("type promotion follows torch", function()
  local i32 = torch.tensor({1, 2}, {dtype = "int32"})
  eq((i32 + 1).dtype, "torch.int32", "int32 + Lua integer")
  eq((i32 + 1.5).dtype, "torch.float32", "int32 + Lua float")
  eq((i32 + torch.tensor({1, 2})).dtype, "torch.int64", "int32 + int64")
  local h = torch.tensor({1.0}, {dtype = "float16"})
  eq((h + 1.5).dtype, "torch.float16", "float16 + Lua float")
  eq((h + torch.tensor({1.0}, {dtype = "bfloat16"})).dtype, "torch.float32", "float16 + bfloat16")
  eq((h + torch.tensor(2.0, {dtype = "float64"})).dtype, "torch.float16", "0-dim float64 does not promote a float16 tensor")
  eq((i32 + torch.tensor(2.5, {dtype = "float64"})).dtype, "torch.float64", "0-dim float promotes an int tensor")
  eq((torch.tensor({true}) + torch.tensor({true})).dtype, "torch.bool", "bool + bool")
  close(i32 + 1.5, {2.5, 3.5})
end)

test("comparisons and logical ops give bool tensors", function()
  local a, b = torch.tensor({1, 2, 3}), torch.tensor({3, 2, 1})
  close(a:lt(b), {true, false, false})
  close(a:le(b), {true, true, false})
  close(a:eq(b), {false, true, false})
  close(a:ne(2), {true, false, true})
  close(a:gt(1.5), {false, true, true})
  close(a:ge(b), {false, true, true})
  eq(a:lt(b).dtype, "torch.bool", "comparison dtype")
  close(torch.logical_and(a:gt(1), b:gt(1)), {false, true, false})
  close(torch.logical_or(a:gt(2), b:gt(2)), {true, false, true})
  close(a:gt(1):logical_not(), {true, false, false})
end)

test("non-contiguous and expanded inputs", function()
  local vals = T.rand_list({4, 6})
  local x = torch.tensor(vals, {dtype = "float64"})
  local xt = x:t()
  T.ok(not xt:is_contiguous(), "t() is not contiguous")
  local ref = {}
  for j = 1, 6 do ref[j] = {} for i = 1, 4 do ref[j][i] = math.exp(vals[i][j]) end end
  close(xt:exp(), ref, 1e-12)
  local strided = x[{ {}, {0, 6, 2} }]
  local sref = {}
  for i = 1, 4 do sref[i] = {vals[i][1] * 2, vals[i][3] * 2, vals[i][5] * 2} end
  close(strided * 2, sref, 1e-12)
  local row = torch.tensor({1, 2, 3}):expand(2, 3)
  close(row + 1, {{2, 3, 4}, {2, 3, 4}})
end)

test("empty and 0-dim tensors", function()
  local e = torch.zeros(0, 3)
  eq(tostring((e + 1).shape), "torch.Size([0, 3])", "empty shape")
  eq((e:exp()):numel(), 0, "empty numel")
  local s = torch.tensor(2.5)
  eq(s:dim(), 0, "0-dim")
  eq((s * 2):item(), 5.0, "0-dim arithmetic")
  eq(tostring((s + torch.ones(2, 2)).shape), "torch.Size([2, 2])", "0-dim broadcasts")
end)

test("large tensors take the parallel path and stay exact", function()
  local n = 1 << 20
  local x = torch.arange(n, {dtype = "float64"})
  local y = x * 2 + 1
  eq(y[0]:item(), 1.0, "first")
  eq(y[n - 1]:item(), 2.0 * (n - 1) + 1, "last")
  eq(y[12345]:item(), 24691.0, "middle")
end)

test("clamp, where, lerp, pow, gelu tanh", function()
  local x = torch.tensor({-2.0, -0.5, 0.5, 2.0})
  close(x:clamp(-1, 1), {-1, -0.5, 0.5, 1})
  close(x:clamp({min = 0}), {0, 0, 0.5, 2})
  close(x:clamp(nil, 0), {-2, -0.5, 0, 0})
  close(torch.tensor({1, 5, 9}):clamp(2, 6), {2, 5, 6})
  close(torch.where(x:gt(0), x, 0), {0, 0, 0.5, 2})
  close(torch.lerp(torch.zeros(4), torch.ones(4) * 10, 0.3), {3, 3, 3, 3}, 1e-6)
  close(x:pow(2), {4, 0.25, 0.25, 4})
  eq(torch.tensor({2, 3}):pow(2).dtype, "torch.int64", "int pow int")
  close(torch.tensor({2, 3}):pow(2), {4, 9})
  close(torch.tensor({4, 9}):pow(0.5), {2, 3})
  local g = x:gelu({approximate = "tanh"})
  close(g, T.map({-2.0, -0.5, 0.5, 2.0}, function(v)
    return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3))) end), 1e-5, 1e-6)
end)

test("in-place variants write into the tensor and refuse unsafe casts", function()
  local x = torch.tensor({1.0, 2.0, 3.0})
  local r = x:add_(1)
  T.ok(rawequal(r, x), "add_ returns self")
  close(x, {2, 3, 4})
  x:mul_(torch.tensor({2.0, 2.0, 2.0})):sub_(1)
  close(x, {3, 5, 7})
  x:clamp_(4, 6)
  close(x, {4, 5, 6})
  x:exp_():log_()
  close(x, {4, 5, 6}, 1e-5)
  x:fill_(7)
  close(x, {7, 7, 7})
  x:zero_()
  close(x, {0, 0, 0})
  local i = torch.tensor({1, 2})
  raises(function() i:add_(1.5) end, "can't be cast")
  raises(function() x:add_(torch.ones(2)) end, "broadcast")
  local m = torch.zeros(2, 3)
  m:add_(torch.tensor({1.0, 2.0, 3.0}))
  close(m, {{1, 2, 3}, {1, 2, 3}})
end)

test("bad input gives clear errors", function()
  local x = torch.ones(2, 3)
  raises(function() return x + torch.ones(4) end, "cannot be broadcast")
  raises(function() return x + "a" end, "tensor or number expected, got string")
  raises(function() return x:exp("a", "b") + nil end, "tensor or number expected, got nil")
  raises(function() return torch.exp(3) end, "tensor expected, got number")
  raises(function() return torch.tensor({true}):neg() end, "bool")
  raises(function() return torch.tensor({true}) - torch.tensor({false}) end, "bool")
  raises(function() return torch.where(x, x, x) end, "bool tensor")
  raises(function() return x:clamp() end, "min")
  raises(function() return torch.tensor({2}):pow(-1) end, "negative integer powers")
  -- the session goes on
  close(x + 1, {{2, 2, 2}, {2, 2, 2}})
end)

test("integer edge values wrap instead of undefined behaviour", function()
  eq(torch.tensor({math.mininteger}):neg():item(), math.mininteger, "neg of the minimum wraps")
  eq(torch.tensor({math.mininteger}):abs():item(), math.mininteger, "abs of the minimum wraps, as torch")
  local r = torch.randint(-1, math.maxinteger, {100}):tolist()
  for _, v in ipairs(r) do T.ok(v >= -1, "randint over a range wider than int64 stays in range") end
  eq(torch.eye(0, math.maxinteger):numel(), 0, "eye with no rows")
end)

T.run()
