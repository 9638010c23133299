-- The functions lua/tensh/tensor_extra.lua composes (isnan ... new_tensor)
-- against Lua references, gradients against finite differences, with
-- non-contiguous, broadcast and empty inputs and the error messages. On the
-- cuda pass every tensor made here lives on the device.
local T = require "harness"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local G = require "gradcheck"
local function gradcheck(f, tensors, name)
  local lists = {}
  for i, t in ipairs(tensors) do lists[i] = t:double():tolist() end
  G.check(name, f, lists)
end

local nan, inf = 0 / 0, math.huge

-- each name is both torch.X and Tensor:X
local function both_exist(names)
  for _, n in ipairs(names) do
    ok(rawget(torch, n) ~= nil, "torch." .. n)
    ok(rawget(torch._methods, n) ~= nil, "Tensor:" .. n)
  end
end

test("isnan, isinf, isfinite, nan_to_num", function()
  both_exist({"isnan", "isinf", "isfinite", "nan_to_num"})
  local l = {1.5, nan, inf, -inf, 0, -2}
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16"}) do
    local x = torch.tensor(l, {dtype = dt})
    close(x:isnan(), {false, true, false, false, false, false}, 0, 0, dt .. " isnan")
    close(torch.isinf(x), {false, false, true, true, false, false}, 0, 0, dt .. " isinf")
    close(x:isfinite(), {true, false, false, false, true, true}, 0, 0, dt .. " isfinite")
    eq(x:isnan().dtype, torch.bool, dt .. " isnan dtype")
  end
  local x = torch.tensor(l, {dtype = "float64"})
  close(x:nan_to_num(), {1.5, 0, 1.7976931348623157e308, -1.7976931348623157e308, 0, -2}, 0, 0, "nan_to_num defaults")
  close(torch.nan_to_num(x, 9, 8, -7), {1.5, 9, 8, -7, 0, -2}, 0, 0, "nan_to_num values")
  close(x:nan_to_num({posinf = 5}), {1.5, 0, 5, -1.7976931348623157e308, 0, -2}, 0, 0, "nan_to_num posinf only")
  close(torch.tensor(l):nan_to_num(), {1.5, 0, 3.4028234663852886e38, -3.4028234663852886e38, 0, -2}, 0, 0,
    "float32 nan_to_num")
  -- integers: never NaN nor infinite
  local i = torch.tensor({1, -2, 3}, {dtype = "int16"})
  close(i:isnan(), {false, false, false}, 0, 0, "int16 isnan")
  close(i:isinf(), {false, false, false}, 0, 0, "int16 isinf")
  close(i:isfinite(), {true, true, true}, 0, 0, "int16 isfinite")
  -- non-contiguous and empty
  local m = torch.tensor({{1, nan}, {inf, 2}})
  close(m:t():isnan(), {{false, false}, {true, false}}, 0, 0, "transposed isnan")
  eq(torch.zeros(0, 3):isinf().shape, torch.Size({0, 3}), "empty isinf")
  raises(function() torch.isnan(3) end, "torch.isnan", "a number")
end)

test("square, clamp_min, clamp_max, addcmul, addcdiv against float64 references", function()
  both_exist({"square", "clamp_min", "clamp_max", "addcmul", "addcdiv"})
  local al, bl, cl = T.rand_list({3, 4}, -2, 2), T.rand_list({3, 4}, -2, 2), T.rand_list({3, 4}, 0.5, 2)
  local a, b, c = torch.tensor(al, {dtype = "float64"}), torch.tensor(bl, {dtype = "float64"}), torch.tensor(cl, {dtype = "float64"})
  local function ref(f) local r = {} for i = 1, 3 do r[i] = {} for j = 1, 4 do r[i][j] = f(al[i][j], bl[i][j], cl[i][j]) end end return r end
  close(a:square(), ref(function(x) return x * x end), 1e-14, 0, "square")
  close(torch.clamp_min(a, -0.5), ref(function(x) return math.max(x, -0.5) end), 0, 0, "clamp_min")
  close(a:clamp_max(0.25), ref(function(x) return math.min(x, 0.25) end), 0, 0, "clamp_max")
  close(torch.addcmul(a, b, c, {value = 0.5}), ref(function(x, y, z) return x + 0.5 * y * z end), 1e-14, 1e-14, "addcmul")
  close(a:addcdiv(b, c), ref(function(x, y, z) return x + y / z end), 1e-14, 1e-14, "addcdiv")
  close(a:addcdiv(b, c, {value = -2}), ref(function(x, y, z) return x - 2 * y / z end), 1e-14, 1e-14, "addcdiv value")
  -- broadcast: a row tensor1 with a column tensor2
  local r = torch.addcmul(torch.zeros(3, 4, {dtype = "float64"}), b[0], c[{{}, {0, 1}}])
  close(r[2][3], bl[1][4] * cl[3][1], 1e-14, 0, "addcmul broadcast")
  eq(torch.tensor({-3, 4}, {dtype = "int8"}):square().dtype, torch.int8, "int8 square keeps int8")
  close(torch.tensor({true, false}):square(), {1, 0}, 0, 0, "bool square")
  eq(torch.tensor({true}):square().dtype, torch.int64, "bool square dtype")
  raises(function() torch.tensor({1}):addcdiv(torch.tensor({1}), torch.tensor({2})) end, "integer division", "int addcdiv")
  raises(function() a:addcmul(b, 3) end, "addcmul", "addcmul with a number")
  -- gradients
  gradcheck(function(x, y, z) return torch.addcmul(x, y, z, {value = 0.7}) end, {a, b, c}, "addcmul")
  gradcheck(function(x, y, z) return torch.addcdiv(x, y, z, {value = 0.7}) end, {a, b, c}, "addcdiv")
  gradcheck(function(x) return x:square() end, {a}, "square")
  gradcheck(function(x) return x:clamp_min(0.1) end, {a}, "clamp_min")
end)

test("tril and triu: every diagonal, batches, non-square, gradients", function()
  both_exist({"tril", "triu"})
  local l = T.rand_list({2, 3, 5}, -1, 1)
  local x = torch.tensor(l, {dtype = "float64"})
  for _, k in ipairs({-4, -1, 0, 1, 2, 6}) do
    local lo, up = {}, {}
    for b = 1, 2 do
      lo[b], up[b] = {}, {}
      for i = 1, 3 do
        lo[b][i], up[b][i] = {}, {}
        for j = 1, 5 do
          lo[b][i][j] = (j - i <= k) and l[b][i][j] or 0
          up[b][i][j] = (j - i >= k) and l[b][i][j] or 0
        end
      end
    end
    close(x:tril(k), lo, 0, 0, "tril " .. k)
    close(torch.triu(x, k), up, 0, 0, "triu " .. k)
  end
  -- the Transformer's causal mask
  local mask = torch.triu(torch.ones(4, 4), 1):bool()
  close(mask, {{false, true, true, true}, {false, false, true, true}, {false, false, false, true},
    {false, false, false, false}}, 0, 0, "causal mask")
  local s = torch.full({3, 3}, -inf):triu(1)
  close(s, {{0, -inf, -inf}, {0, 0, -inf}, {0, 0, 0}}, 0, 0, "triu of -inf (no NaN)")
  close(x:transpose(1, 2):tril(), x:transpose(1, 2):contiguous():tril(), 0, 0, "tril of a transposed view")
  eq(torch.tensor({{1, 2}, {3, 4}}, {dtype = "int16"}):tril().dtype, torch.int16, "int16 tril")
  eq(torch.zeros(0, 3):triu().shape, torch.Size({0, 3}), "empty triu")
  raises(function() torch.ones(3):tril() end, "tril: input tensor must have at least 2 dimensions", "1-d")
  raises(function() torch.ones(3, 3):triu(0.5) end, "triu: diagonal must be an integer", "fraction")
  gradcheck(function(y) return y:tril(-1) end, {x}, "tril")
  gradcheck(function(y) return y:triu(1) end, {x[0]}, "triu")
end)

test("flip, fliplr, flipud", function()
  both_exist({"flip", "fliplr", "flipud"})
  local x = torch.arange(24, {dtype = torch.float64}):reshape(2, 3, 4)
  local l = x:tolist()
  local function ref(f0, f1, f2)
    local r = {}
    for i = 1, 2 do
      r[i] = {}
      for j = 1, 3 do
        r[i][j] = {}
        for k = 1, 4 do
          r[i][j][k] = l[f0 and 3 - i or i][f1 and 4 - j or j][f2 and 5 - k or k]
        end
      end
    end
    return r
  end
  close(x:flip(0), ref(true, false, false), 0, 0, "flip 0")
  close(torch.flip(x, {0, 2}), ref(true, false, true), 0, 0, "flip {0, 2}")
  close(x:flip(-1), ref(false, false, true), 0, 0, "flip -1")
  close(x:flip(1, 2), ref(false, true, true), 0, 0, "flip 1, 2")
  close(x:fliplr(), ref(false, true, false), 0, 0, "fliplr")
  close(x:flipud(), ref(true, false, false), 0, 0, "flipud")
  close(x:transpose(0, 2):flip(0), x:flip(2):transpose(0, 2), 0, 0, "flip of a view")
  local y = torch.tensor({1, 2, 3}, {dtype = "int8"})
  close(y:flip(0), {3, 2, 1}, 0, 0, "int8 flip")
  eq(y:flip(0).dtype, torch.int8, "flip keeps dtype")
  local one = torch.ones(1, 3)
  local f = one:flip(0)
  f[0][0] = 5
  eq(one[0][0]:item(), 1.0, "flip of a size-1 dim is a copy")
  eq(torch.zeros(0, 2):flip(0).shape, torch.Size({0, 2}), "empty flip")
  raises(function() x:flip(3) end, "flip: Dimension out of range", "dim 3")
  raises(function() x:flip({0, 0}) end, "flip: dim 0 appears multiple times", "repeated")
  raises(function() x:flip() end, "flip: missing argument 'dims'", "no dims")
  raises(function() torch.ones(3):fliplr() end, "fliplr: input must be >= 2-d", "fliplr 1-d")
  gradcheck(function(z) return z:flip({0, 2}) end, {x}, "flip")
end)

test("unbind and repeat_interleave", function()
  both_exist({"unbind", "repeat_interleave"})
  local x = torch.arange(6):reshape(2, 3)
  local parts = x:unbind(1)
  eq(#parts, 3, "unbind(1) count")
  close(parts[2], {1, 4}, 0, 0, "unbind(1)[2]")
  local rows = torch.unbind(x)
  eq(#rows, 2, "unbind rows")
  close(rows[1], {0, 1, 2}, 0, 0, "unbind()[1]")
  raises(function() return rows[0] end, "Lua lists count from 1", "unbind list index 0")
  close(torch.tensor({1, 2, 3}):repeat_interleave(2), {1, 1, 2, 2, 3, 3}, 0, 0, "scalar repeats, flattened")
  close(x:repeat_interleave(2, {dim = 0}), {{0, 1, 2}, {0, 1, 2}, {3, 4, 5}, {3, 4, 5}}, 0, 0, "dim 0")
  close(x:repeat_interleave(torch.tensor({1, 0, 2}), {dim = 1}), {{0, 2, 2}, {3, 5, 5}}, 0, 0, "tensor repeats dim 1")
  close(torch.repeat_interleave(x, 1), {0, 1, 2, 3, 4, 5}, 0, 0, "repeat 1 flattens")
  raises(function() x:repeat_interleave(torch.tensor({1, 2}), {dim = 1}) end, "same size as input along dim", "bad size")
  raises(function() x:repeat_interleave(-1) end, "repeats can not be negative", "negative")
  local w = torch.tensor({1.0, 2.0, 3.0}, {dtype = "float64"})
  gradcheck(function(z) return z:repeat_interleave(torch.tensor({2, 0, 3})) end, {w}, "repeat_interleave")
  gradcheck(function(z) return torch.unbind(z:reshape(3, 1), 0)[2] * 3 end, {w}, "unbind")
end)

test("cumprod and logcumsumexp against sequential float64 references", function()
  both_exist({"cumprod", "logcumsumexp"})
  for _, n in ipairs({1, 2, 5, 13}) do
    local l = T.rand_list({3, n}, -1.5, 1.5)
    l[2][math.min(3, n)] = 0 -- zeros: no log/exp shortcut
    local x = torch.tensor(l, {dtype = "float64"})
    local cp, lc = {}, {}
    for i = 1, 3 do
      cp[i], lc[i] = {}, {}
      local p, s = 1, 0
      for j = 1, n do
        p = p * l[i][j]
        s = s + math.exp(l[i][j])
        cp[i][j], lc[i][j] = p, math.log(s)
      end
    end
    close(x:cumprod(1), cp, 1e-13, 1e-15, "cumprod n=" .. n)
    close(torch.logcumsumexp(x, -1), lc, 1e-13, 1e-15, "logcumsumexp n=" .. n)
    close(x:t():cumprod(0), x:cumprod(1):t(), 1e-13, 1e-15, "cumprod of a transposed view")
  end
  close(torch.tensor({2, -3, 4}, {dtype = "int8"}):cumprod(0), {2, -6, -24}, 0, 0, "int8 cumprod")
  eq(torch.tensor({2, -3, 4}, {dtype = "int8"}):cumprod(0).dtype, torch.int64, "integer cumprod is int64")
  close(torch.tensor({1000, 1000}, {dtype = "float64"}):logcumsumexp(0), {1000, 1000 + math.log(2)}, 1e-15, 0, "no overflow")
  close(torch.tensor({-inf, -inf}):logcumsumexp(0), {-inf, -inf}, 0, 0, "all -inf")
  eq(torch.zeros(0, 3):cumprod(0).shape, torch.Size({0, 3}), "empty cumprod")
  raises(function() torch.ones(3):cumprod() end, "cumprod: missing argument 'dim'", "no dim")
  raises(function() torch.ones(3):cumprod(1) end, "cumprod: Dimension out of range", "bad dim")
  raises(function() torch.ones(3, {dtype = "int64"}):logcumsumexp(0) end, "expected a floating-point tensor", "int lcse")
  local x = torch.tensor(T.rand_list({2, 6}, -1, 1), {dtype = "float64"})
  gradcheck(function(z) return z:cumprod(1) end, {x}, "cumprod")
  gradcheck(function(z) return z:logcumsumexp(1) end, {x}, "logcumsumexp")
end)

test("type_as, is_floating_point, torch.clone/detach/numel, get_default_dtype", function()
  local x = torch.tensor({1.5, 2.5})
  local i = torch.tensor({1, 2}, {dtype = "int16"})
  eq(i:type_as(x).dtype, torch.float32, "type_as float")
  eq(x:type_as(i).dtype, torch.int16, "type_as int16")
  close(x:type_as(i), {1, 2}, 0, 0, "type_as values")
  ok(x:is_floating_point() and torch.is_floating_point(x), "is_floating_point float")
  ok(not i:is_floating_point(), "is_floating_point int16")
  local c = torch.clone(x)
  c[0] = 9
  eq(x[0]:item(), 1.5, "torch.clone copies")
  local w = torch.ones(2, {requires_grad = true})
  ok(not torch.detach(w).requires_grad, "torch.detach")
  eq(torch.numel(torch.zeros(3, 4)), 12, "torch.numel")
  eq(torch.get_default_dtype(), torch.float32, "get_default_dtype")
  raises(function() x:type_as(3) end, "type_as", "type_as a number")
  raises(function() torch.numel({}) end, "torch.numel", "numel of a table")
end)

test("new_zeros, new_ones, new_full, new_empty, new_tensor", function()
  local x = torch.tensor({1, 2}, {dtype = "int8"})
  local z = x:new_zeros(2, 3)
  eq(z.dtype, torch.int8, "new_zeros dtype")
  eq(z.shape, torch.Size({2, 3}), "new_zeros shape")
  close(z, {{0, 0, 0}, {0, 0, 0}}, 0, 0, "new_zeros values")
  close(x:new_ones({3}), {1, 1, 1}, 0, 0, "new_ones list")
  eq(x:new_ones(torch.Size({2})).shape, torch.Size({2}), "new_ones Size")
  local f = x:new_full({2}, 7, {dtype = torch.float64})
  eq(f.dtype, torch.float64, "new_full dtype option")
  close(f, {7, 7}, 0, 0, "new_full values")
  eq(x:new_empty(0).shape, torch.Size({0}), "new_empty")
  local t = x:new_tensor({{1, 2}, {3, 4}})
  eq(t.dtype, torch.int8, "new_tensor dtype")
  close(t, {{1, 2}, {3, 4}}, 0, 0, "new_tensor values")
  eq(t.device, x.device, "new_tensor device")
  local r = torch.ones(2):new_zeros(2, {requires_grad = true})
  ok(r.requires_grad, "new_zeros requires_grad")
  raises(function() x:new_zeros(2, {dtyp = "float32"}) end, "new_zeros: unknown option 'dtyp'", "bad option")
end)

test("roll, rot90, movedim, tile, diff", function()
  both_exist({"roll", "rot90", "movedim", "tile", "diff"})
  local x = torch.arange(12, {dtype = torch.float64}):reshape(3, 4)
  close(x:roll(1), {{11, 0, 1, 2}, {3, 4, 5, 6}, {7, 8, 9, 10}}, 0, 0, "roll flat")
  close(x:roll(-1, 1), {{1, 2, 3, 0}, {5, 6, 7, 4}, {9, 10, 11, 8}}, 0, 0, "roll dim 1")
  close(torch.roll(x, {1, 2}, {0, 1}), {{10, 11, 8, 9}, {2, 3, 0, 1}, {6, 7, 4, 5}}, 0, 0, "roll two dims")
  raises(function() x:roll("1") end, "roll: shifts must be integers, got", "a string shift")
  raises(function() x:roll({1, 0.5}, {0, 1}) end, "roll: shifts must be integers", "a fractional shift")
  close(x:roll(7, 0), x:roll(1, 0), 0, 0, "roll wraps the shift")
  close(x:rot90(), {{3, 7, 11}, {2, 6, 10}, {1, 5, 9}, {0, 4, 8}}, 0, 0, "rot90")
  close(x:rot90(2), x:flip({0, 1}), 0, 0, "rot90 2")
  close(x:rot90(-1), x:rot90(3), 0, 0, "rot90 -1")
  close(x:rot90(4), x, 0, 0, "rot90 4")
  local y = torch.zeros(2, 3, 4, 5)
  eq(y:movedim(0, 3).shape, torch.Size({3, 4, 5, 2}), "movedim 0 -> 3")
  eq(torch.movedim(y, {0, 1}, {-1, -2}).shape, torch.Size({4, 5, 3, 2}), "movedim lists")
  local z = torch.arange(24):reshape(2, 3, 4)
  close(z:movedim(2, 0), z:permute(2, 0, 1), 0, 0, "movedim values")
  close(torch.tensor({1, 2}):tile(2), {1, 2, 1, 2}, 0, 0, "tile 1-d")
  close(x[{{0, 2}, {0, 2}}]:tile({2, 1}), {{0, 1}, {4, 5}, {0, 1}, {4, 5}}, 0, 0, "tile 2-d")
  eq(torch.tensor({1, 2}):tile({2, 2}).shape, torch.Size({2, 4}), "tile adds dims")
  close(torch.tensor({1, 4, 9, 16}):diff(), {3, 5, 7}, 0, 0, "diff")
  close(torch.tensor({1, 4, 9, 16}):diff({n = 2}), {2, 2}, 0, 0, "diff n=2")
  close(x:diff({dim = 0}), {{4, 4, 4, 4}, {4, 4, 4, 4}}, 0, 0, "diff dim 0")
  close(torch.tensor({1, 3}):diff({prepend = torch.tensor({0}), append = torch.tensor({7})}), {1, 2, 4}, 0, 0, "diff prepend/append")
  close(torch.tensor({true, true, false}):diff(), {false, true}, 0, 0, "bool diff")
  raises(function() x:roll(1, 5) end, "roll: Dimension out of range", "roll dim")
  raises(function() x:rot90(1, {0, 0}) end, "rot90: expected rotation dims to be different", "rot90 dims")
  raises(function() x:tile(-1) end, "tile: repetitions must be non-negative", "tile negative")
  local w = x:tolist()
  gradcheck(function(t) return t:roll(1, 1):rot90() end, {x}, "roll rot90")
  gradcheck(function(t) return t:tile({2, 1}):diff({dim = 0}) end, {x}, "tile diff")
  local _ = w
end)

test("diagonal, diag, trace", function()
  both_exist({"diagonal", "diag", "trace"})
  local x = torch.arange(12, {dtype = torch.float64}):reshape(3, 4)
  close(x:diagonal(), {0, 5, 10}, 0, 0, "diagonal")
  close(x:diagonal(1), {1, 6, 11}, 0, 0, "diagonal 1")
  close(x:diagonal(-1), {4, 9}, 0, 0, "diagonal -1")
  close(x:diagonal(5), {}, 0, 0, "diagonal past the end")
  close(x:t():diagonal(), {0, 5, 10}, 0, 0, "diagonal of a transposed view")
  local b = torch.arange(24):reshape(2, 3, 4)
  close(b:diagonal({dim1 = 1, dim2 = 2}), {{0, 5, 10}, {12, 17, 22}}, 0, 0, "batched diagonal")
  close(b:diagonal(0, 0, 2), {{0, 13}, {4, 17}, {8, 21}}, 0, 0, "diagonal dims 0, 2")
  close(torch.diag(torch.tensor({1, 2})), {{1, 0}, {0, 2}}, 0, 0, "diag 1-d")
  close(torch.tensor({1, 2}):diag(1), {{0, 1, 0}, {0, 0, 2}, {0, 0, 0}}, 0, 0, "diag 1-d, 1")
  close(torch.tensor({1, 2}):diag(-1), {{0, 0, 0}, {1, 0, 0}, {0, 2, 0}}, 0, 0, "diag 1-d, -1")
  close(torch.tensor({inf, 2}):diag(), {{inf, 0}, {0, 2}}, 0, 0, "diag of inf: no NaN")
  close(x:diag(), {0, 5, 10}, 0, 0, "diag 2-d")
  close(x:trace(), 15, 0, 0, "trace")
  eq(torch.tensor({{1, 2}, {3, 4}}, {dtype = "int8"}):trace().dtype, torch.int64, "int trace is int64")
  raises(function() torch.ones(3):trace() end, "trace: expected a matrix", "trace 1-d")
  raises(function() x:diagonal(0, 1, 1) end, "diagonal dimensions cannot be identical", "same dims")
  raises(function() torch.ones(2, 2, 2):diag() end, "diag: expected a 1-d or 2-d tensor", "3-d diag")
  gradcheck(function(t) return t:diagonal(1) end, {x}, "diagonal")
  gradcheck(function(t) return t:diag(-1) end, {torch.tensor({1.5, -2}, {dtype = "float64"})}, "diag")
  gradcheck(function(t) return t:trace() end, {x}, "trace")
end)

test("reductions: count_nonzero, argwhere, aminmax, std_mean, var_mean, nansum, nanmean, median", function()
  both_exist({"count_nonzero", "argwhere", "aminmax", "std_mean", "var_mean", "nansum", "nanmean", "median"})
  local x = torch.tensor({{1, 0, 3}, {0, 0, 6}}, {dtype = "float64"})
  eq(x:count_nonzero():item(), 3, "count_nonzero")
  close(torch.count_nonzero(x, 0), {1, 0, 2}, 0, 0, "count_nonzero dim")
  close(x:argwhere(), {{0, 0}, {0, 2}, {1, 2}}, 0, 0, "argwhere")
  local lo, hi = x:aminmax()
  eq(lo:item(), 0, "aminmax min")
  eq(hi:item(), 6, "aminmax max")
  lo, hi = x:aminmax({dim = 1})
  close(lo, {0, 0}, 0, 0, "aminmax dim min")
  close(hi, {3, 6}, 0, 0, "aminmax dim max")
  local s, m = x:std_mean(1)
  close(s, x:std(1), 0, 0, "std_mean std")
  close(m, {4 / 3, 2}, 1e-15, 0, "std_mean mean")
  local v, m2 = torch.var_mean(x)
  close(v, x:var(), 0, 0, "var_mean var")
  close(m2, 10 / 6, 1e-15, 0, "var_mean mean")
  local n = torch.tensor({{1, nan, 3}, {nan, nan, 4}})
  close(n:nansum(), 8, 0, 0, "nansum")
  close(n:nansum(1), {4, 4}, 0, 0, "nansum dim")
  close(n:nanmean(1), {2, 4}, 0, 0, "nanmean dim")
  close(torch.nanmean(n), 8 / 3, 1e-6, 0, "nanmean")
  close(torch.tensor({nan, nan}):nanmean(), nan, 0, 0, "all NaN nanmean")
  eq(torch.tensor({1, 2}, {dtype = "int16"}):nansum().dtype, torch.int64, "int nansum")
  -- median: the lower one, its index
  local md = torch.tensor({{3, 1, 2, 5}, {9, 7, 8, 6}})
  eq(md:median():item(), 5, "median of all (lower)")
  local mv, mi = md:median(1)
  close(mv, {2, 7}, 0, 0, "median dim values")
  close(mi, {2, 1}, 0, 0, "median dim indices")
  mv = md:median(1, {keepdim = true})
  eq(mv.shape, torch.Size({2, 1}), "median keepdim")
  close(torch.tensor({1, nan, 0}):median(), nan, 0, 0, "median with NaN")
  mv, mi = torch.tensor({{1, nan, 0}}):median(1)
  close(mv, {nan}, 0, 0, "median dim with NaN")
  close(mi, {1}, 0, 0, "median dim NaN index")
  raises(function() torch.zeros(0):median() end, "median: cannot compute the median of an empty tensor", "empty median")
  raises(function() torch.ones(2, {dtype = "int64"}):nanmean() end, "nanmean: expected a floating-point tensor", "int nanmean")
  gradcheck(function(t) return t:nansum(1) end, {x}, "nansum")
  gradcheck(function(t) return (t:median(1)) end, {torch.tensor({{3, 1, 2}, {0.5, 7, 8}}, {dtype = "float64"})}, "median")
end)

test("logical_xor, fmax, fmin, xlogy, deg2rad, rad2deg, logit, signbit", function()
  both_exist({"logical_xor", "fmax", "fmin", "xlogy", "deg2rad", "rad2deg", "logit", "signbit"})
  local a, b = torch.tensor({true, true, false, false}), torch.tensor({true, false, true, false})
  close(a:logical_xor(b), {false, true, true, false}, 0, 0, "logical_xor")
  close(torch.logical_xor(torch.tensor({0, 2}), torch.tensor({0.0, 0.0})), {false, true}, 0, 0, "logical_xor numbers")
  local p, q = torch.tensor({1, nan, nan, -2}), torch.tensor({nan, 3, nan, 5})
  close(torch.fmax(p, q), {1, 3, nan, 5}, 0, 0, "fmax")
  close(p:fmin(q), {1, 3, nan, -2}, 0, 0, "fmin")
  local xl = torch.tensor({0, 0, 2, 3}, {dtype = "float64"})
  local yl = torch.tensor({0, nan, 3, 0.5}, {dtype = "float64"})
  close(xl:xlogy(yl), {0, nan, 2 * math.log(3), 3 * math.log(0.5)}, 1e-15, 0, "xlogy")
  close(torch.xlogy(xl, 2), {0, 0, 2 * math.log(2), 3 * math.log(2)}, 1e-15, 0, "xlogy number")
  close(torch.tensor({180, 90}):deg2rad(), {math.pi, math.pi / 2}, 1e-6, 0, "deg2rad")
  eq(torch.tensor({180}):deg2rad().dtype, torch.float32, "int deg2rad is float")
  close(torch.tensor({math.pi}, {dtype = "float64"}):rad2deg(), {180}, 1e-14, 0, "rad2deg")
  local pr = torch.tensor({0.25, 0.5, 0.9, 0}, {dtype = "float64"})
  close(pr:logit(), {math.log(1 / 3), 0, math.log(9), -inf}, 1e-14, 0, "logit")
  close(pr:logit(0.1), {math.log(1 / 3), 0, math.log(9), math.log(0.1 / 0.9)}, 1e-14, 0, "logit eps")
  close(torch.tensor({-1, -0.0, 0.0, 2}):signbit(), {true, true, false, false}, 0, 0, "signbit")
  close(torch.tensor({-1, 0, 3}, {dtype = "int8"}):signbit(), {true, false, false}, 0, 0, "int signbit")
  gradcheck(function(t, u) return torch.xlogy(t, u) end, {torch.tensor({0.5, 2}, {dtype = "float64"}), torch.tensor({3, 0.25}, {dtype = "float64"})}, "xlogy")
  gradcheck(function(t) return t:logit() end, {torch.tensor({0.2, 0.7}, {dtype = "float64"})}, "logit")
  gradcheck(function(t, u) return torch.fmax(t, u) end, {torch.tensor({0.5, 2}, {dtype = "float64"}), torch.tensor({3, 0.25}, {dtype = "float64"})}, "fmax")
end)

test("broadcast_tensors, atleast, stacks, meshgrid, take_along_dim", function()
  local a, b = torch.ones(3, 1), torch.zeros(1, 4)
  local x, y = torch.broadcast_tensors(a, b)
  eq(x.shape, torch.Size({3, 4}), "broadcast_tensors a")
  eq(y.shape, torch.Size({3, 4}), "broadcast_tensors b")
  eq(torch.atleast_1d(torch.tensor(3)).shape, torch.Size({1}), "atleast_1d")
  eq(torch.atleast_2d(torch.tensor({1, 2})).shape, torch.Size({1, 2}), "atleast_2d")
  eq(torch.atleast_3d(torch.ones(2, 3)).shape, torch.Size({2, 3, 1}), "atleast_3d")
  local p, q = torch.tensor({1, 2}), torch.tensor({3, 4})
  close(torch.hstack({p, q}), {1, 2, 3, 4}, 0, 0, "hstack 1-d")
  close(torch.vstack({p, q}), {{1, 2}, {3, 4}}, 0, 0, "vstack")
  close(torch.column_stack({p, q}), {{1, 3}, {2, 4}}, 0, 0, "column_stack")
  eq(torch.dstack({p, q}).shape, torch.Size({1, 2, 2}), "dstack")
  close(torch.hstack({torch.ones(2, 1), torch.zeros(2, 2)}), {{1, 0, 0}, {1, 0, 0}}, 0, 0, "hstack 2-d")
  local gx, gy = torch.meshgrid(torch.tensor({1, 2, 3}), torch.tensor({4, 5}), {indexing = "ij"})
  close(gx, {{1, 1}, {2, 2}, {3, 3}}, 0, 0, "meshgrid ij x")
  close(gy, {{4, 5}, {4, 5}, {4, 5}}, 0, 0, "meshgrid ij y")
  gx, gy = torch.meshgrid(torch.tensor({1, 2, 3}), torch.tensor({4, 5}), {indexing = "xy"})
  close(gx, {{1, 2, 3}, {1, 2, 3}}, 0, 0, "meshgrid xy x")
  close(gy, {{4, 4, 4}, {5, 5, 5}}, 0, 0, "meshgrid xy y")
  local m = torch.tensor({{10, 30, 20}, {60, 40, 50}})
  local idx = m:argsort(1)
  close(torch.take_along_dim(m, idx, 1), {{10, 20, 30}, {40, 50, 60}}, 0, 0, "take_along_dim sorts")
  close(m:take_along_dim(torch.tensor({5, 0})), {50, 10}, 0, 0, "take_along_dim flat")
  close(m:take_along_dim(torch.tensor({{0}}), 1), {{10}, {60}}, 0, 0, "take_along_dim broadcast")
  raises(function() torch.vstack(p) end, "vstack: expected a list of tensors", "vstack tensor")
  raises(function() torch.meshgrid(p, {indexing = "ji"}) end, "meshgrid: indexing must be 'ij' or 'xy'", "bad indexing")
end)

test("index_add, index_copy, index_fill", function()
  both_exist({"index_add", "index_copy", "index_fill"})
  local x = torch.zeros(3, 4, {dtype = "float64"})
  local src = torch.arange(8, {dtype = torch.float64}):reshape(2, 4)
  close(x:index_add(0, torch.tensor({2, 2}), src), {{0, 0, 0, 0}, {0, 0, 0, 0}, {4, 6, 8, 10}}, 0, 0, "index_add duplicates")
  close(x:index_add(0, torch.tensor({0, 1}), src, {alpha = 2}), {{0, 2, 4, 6}, {8, 10, 12, 14}, {0, 0, 0, 0}}, 0, 0, "alpha")
  local s2 = torch.arange(6, {dtype = torch.float64}):reshape(3, 2):t() -- (2, 3), not contiguous
  close(x:t():index_add(0, torch.tensor({3, 0}), s2), x:t():contiguous():index_add(0, torch.tensor({3, 0}), s2:contiguous()),
    0, 0, "index_add of views")
  close(x:index_copy(0, torch.tensor({2, 0}), src), {{4, 5, 6, 7}, {0, 0, 0, 0}, {0, 1, 2, 3}}, 0, 0, "index_copy")
  close(x:index_fill(1, torch.tensor({1, 3}), -1), {{0, -1, 0, -1}, {0, -1, 0, -1}, {0, -1, 0, -1}}, 0, 0, "index_fill")
  close(torch.index_fill(x, 0, torch.tensor({1}), 5)[1], {5, 5, 5, 5}, 0, 0, "torch.index_fill")
  raises(function() x:index_add(0, torch.tensor({{0}}), src) end, "index_add: index should have dimension 1 or 0", "2-d index")
  gradcheck(function(t, s) return t:index_add(0, torch.tensor({2, 0}), s) end, {x, src}, "index_add")
end)

test("promote_types, result_type, can_cast, get_default_dtype", function()
  eq(torch.promote_types(torch.uint8, torch.int8), torch.int16, "promote uint8 int8")
  eq(torch.promote_types(torch.int32, torch.float16), torch.float16, "promote int32 float16")
  eq(torch.promote_types(torch.bfloat16, torch.float16), torch.float32, "promote bf16 f16")
  eq(torch.result_type(torch.tensor({1}, {dtype = "int8"}), 2), torch.int8, "result_type int8, int")
  eq(torch.result_type(torch.tensor({1}, {dtype = "int8"}), 2.5), torch.float32, "result_type int8, float")
  eq(torch.result_type(torch.tensor({1}, {dtype = "int8"}), torch.tensor(1000)), torch.int8, "0-dim int64 does not promote")
  eq(torch.result_type(torch.tensor({1}, {dtype = "int8"}), torch.tensor({1000})), torch.int64, "1-d int64 promotes")
  eq(torch.result_type(2, 3.5), torch.float32, "two numbers")
  ok(torch.can_cast(torch.int8, torch.float16), "can_cast int8 -> float16")
  ok(not torch.can_cast(torch.float32, torch.int64), "can_cast float -> int")
  ok(not torch.can_cast(torch.int64, torch.bool), "can_cast int -> bool")
  ok(torch.can_cast(torch.bool, torch.uint8), "can_cast bool -> uint8")
  raises(function() torch.promote_types(torch.int8, "int9") end, "promote_types: argument 2 must be a dtype", "bad dtype")
  eq(torch.get_default_dtype(), torch.float32, "default float32")
end)

test("searchsorted, bucketize, bincount", function()
  local seq = torch.tensor({1, 3, 5, 7, 9})
  local v = torch.tensor({{3, 6, 9}, {3, 6, 9}})
  close(torch.searchsorted(seq, v), {{1, 3, 4}, {1, 3, 4}}, 0, 0, "searchsorted left")
  close(torch.searchsorted(seq, v, {right = true}), {{2, 3, 5}, {2, 3, 5}}, 0, 0, "searchsorted right")
  close(torch.searchsorted(seq, v, {side = "right"}), {{2, 3, 5}, {2, 3, 5}}, 0, 0, "searchsorted side")
  local seq2 = torch.tensor({{1, 3, 5, 7, 9}, {2, 4, 6, 8, 10}})
  close(torch.searchsorted(seq2, torch.tensor({{3, 6, 9}, {3, 6, 9}})), {{1, 3, 4}, {1, 2, 4}}, 0, 0, "searchsorted rows")
  eq(torch.searchsorted(seq, 4):item(), 2, "searchsorted number")
  eq(torch.searchsorted(seq, v, {out_int32 = true}).dtype, torch.int32, "out_int32")
  close(torch.bucketize(torch.tensor({{3, 6, 9}, {3, 6, 9}}), torch.tensor({1, 3, 5, 7, 9})), {{1, 3, 4}, {1, 3, 4}}, 0, 0, "bucketize")
  close(torch.tensor({3, 6, 9}):bucketize(torch.tensor({1, 3, 5, 7, 9}), {right = true}), {2, 3, 5}, 0, 0, "bucketize right")
  close(torch.tensor({1, 1, 3, 0}):bincount(), {1, 2, 0, 1}, 0, 0, "bincount")
  close(torch.bincount(torch.tensor({1, 1}), {minlength = 4}), {0, 2, 0, 0}, 0, 0, "bincount minlength")
  close(torch.bincount(torch.tensor({0, 2, 2}), {weights = torch.tensor({0.5, 1, 2})}), {0.5, 0, 3}, 1e-7, 0, "bincount weights")
  eq(torch.bincount(torch.tensor({}, {dtype = "int64"})):numel(), 0, "empty bincount")
  raises(function() torch.bincount(torch.tensor({-1, 2})) end, "bincount: input must be non-negative", "negative")
  raises(function() torch.bincount(torch.tensor({1.5})) end, "bincount: expected a 1-d tensor of non-negative integers", "float")
  raises(function() torch.bucketize(v, seq2) end, "bucketize: boundaries tensor must be 1 dimension", "2-d boundaries")
  -- rows of 2^62 (expanded, no rows): the bisection count stops at 63 bits (1 << 63 wrapped, and it looped for ever)
  local huge = torch.zeros(0, 1):expand(0, 1 << 62)
  eq(tostring(torch.searchsorted(huge, huge).shape), "torch.Size([0, 4611686018427387904])", "2^62 columns, no rows")
  eq(torch.searchsorted(torch.zeros(1):expand((1 << 62) + 7), torch.tensor(0.0)):item(), 0, "2^62 + 7 boundaries")
end)

test("bernoulli, multinomial, normal: shapes, ranges, frequencies", function()
  torch.manual_seed(3)
  local p = torch.full({4000}, 0.3, {dtype = "float64"})
  local b = p:bernoulli()
  eq(b.dtype, torch.float64, "bernoulli dtype")
  local mean = b:mean():item()
  ok(math.abs(mean - 0.3) < 0.03, "bernoulli frequency " .. mean)
  ok(b:eq(0):logical_or(b:eq(1)):all():item(), "bernoulli zeros and ones")
  close(torch.bernoulli(torch.tensor({0.0, 1.0})), {0, 1}, 0, 0, "bernoulli 0 and 1")
  local w = torch.tensor({0.1, 0.0, 0.6, 0.3})
  local s = torch.multinomial(w, 4000, true)
  eq(s.shape, torch.Size({4000}), "multinomial shape")
  local counts = s:bincount({minlength = 4}):tolist()
  eq(counts[2], 0, "multinomial never picks a zero weight")
  ok(math.abs(counts[3] / 4000 - 0.6) < 0.04, "multinomial frequency " .. counts[3])
  local nr = torch.multinomial(torch.tensor({{1.0, 1, 1, 1, 0}, {0.0, 0, 1, 1, 1}}), 3)
  eq(nr.shape, torch.Size({2, 3}), "multinomial rows")
  for r = 0, 1 do
    local seen = {}
    for _, k in ipairs(nr[r]:tolist()) do
      ok(not seen[k], "without replacement: distinct")
      seen[k] = true
    end
  end
  ok(not nr[0]:eq(4):any():item() and not nr[1]:lt(2):any():item(), "zero weights never drawn")
  raises(function() torch.multinomial(w, 5) end, "cannot sample n_sample > prob_dist.size(-1)", "too many")
  raises(function() torch.multinomial(torch.tensor({-1.0, 2}), 1) end, "element < 0", "negative weight")
  local z = torch.normal(2, 3, {20000})
  ok(math.abs(z:mean():item() - 2) < 0.1 and math.abs(z:std():item() - 3) < 0.1, "normal(2, 3)")
  local zm = torch.normal(torch.tensor({0.0, 100.0}), 0.001)
  close(zm, {0, 100}, 0, 0.01, "normal tensor mean")
  eq(torch.normal(torch.zeros(2, 1), torch.ones(1, 3)).shape, torch.Size({2, 3}), "normal broadcast")
  raises(function() torch.normal(0, 1) end, "normal: with numbers for mean and std, give the size", "no size")
end)

test("cdist, cosine_similarity, vdot, baddbmm, addbmm", function()
  local al, bl = T.rand_list({3, 4}, -1, 1), T.rand_list({2, 4}, -1, 1)
  local a, b = torch.tensor(al, {dtype = "float64"}), torch.tensor(bl, {dtype = "float64"})
  local function ref(p)
    local r = {}
    for i = 1, 3 do
      r[i] = {}
      for j = 1, 2 do
        local s, mx = 0, 0
        for k = 1, 4 do
          local d = math.abs(al[i][k] - bl[j][k])
          s, mx = s + d ^ p, math.max(mx, d)
        end
        r[i][j] = p == math.huge and mx or s ^ (1 / p)
      end
    end
    return r
  end
  close(torch.cdist(a, b), ref(2), 1e-13, 0, "cdist p=2")
  close(torch.cdist(a, b, 1), ref(1), 1e-13, 0, "cdist p=1")
  close(torch.cdist(a, b, 3), ref(3), 1e-13, 0, "cdist p=3")
  eq(torch.cdist(a:unsqueeze(0), b:unsqueeze(0)).shape, torch.Size({1, 3, 2}), "batched cdist")
  local cs, ws = {}, {}
  for i = 1, 2 do
    local d, n1, n2 = 0, 0, 0
    for k = 1, 4 do d, n1, n2 = d + al[i][k] * bl[i][k], n1 + al[i][k] ^ 2, n2 + bl[i][k] ^ 2 end
    cs[i] = d / math.sqrt(n1 * n2)
    ws[i] = d
  end
  close(torch.cosine_similarity(a[{{0, 2}}], b), cs, 1e-13, 0, "cosine_similarity")
  close(nn.functional.cosine_similarity(a[{{0, 2}}], b, {dim = 1}), cs, 1e-13, 0, "F.cosine_similarity")
  close(torch.cosine_similarity(torch.zeros(1, 3), torch.ones(1, 3)), {0}, 0, 0, "zero vector")
  close(torch.vdot(a[0], b[0]), ws[1], 1e-13, 0, "vdot")
  local inp = torch.randn(2, 3, 5, {dtype = "float64"})
  local b1, b2 = torch.randn(2, 3, 4, {dtype = "float64"}), torch.randn(2, 4, 5, {dtype = "float64"})
  close(torch.baddbmm(inp, b1, b2, {beta = 0.5, alpha = 2}), inp * 0.5 + b1:bmm(b2) * 2, 1e-13, 1e-13, "baddbmm")
  close(inp[0]:addbmm(b1, b2), inp[0] + b1:bmm(b2):sum(0), 1e-13, 1e-13, "addbmm")
  close(torch.full({2, 3, 5}, nan, {dtype = "float64"}):baddbmm(b1, b2, {beta = 0}), b1:bmm(b2), 1e-13, 1e-13, "beta 0 ignores NaN")
  gradcheck(function(x, y) return torch.cdist(x, y) end, {a, b}, "cdist")
  gradcheck(function(x, y) return torch.cosine_similarity(x, y) end, {a[{{0, 2}}], b}, "cosine_similarity")
  raises(function() torch.cdist(a, torch.ones(2, 3, {dtype = "float64"})) end, "X1 and X2 must have the same number of columns", "cdist columns")
  close(torch.cdist(a, b, {p = 1, compute_mode = "use_mm_for_euclid_dist"}), ref(1), 1e-13, 0, "cdist compute_mode")
  raises(function() torch.cdist(a, b, nn.ReLU()) end, "cdist: p must be a number, got ReLU", "cdist p's type")
  -- scalars and dims checked by the function that takes them, not by an op it calls
  close(torch.cosine_similarity(a, a, {dim = -1}), torch.ones(3, {dtype = "float64"}), 1e-12, 0, "dim -1")
  raises(function() torch.cosine_similarity(a, b, {eps = nn.ReLU()}) end, "cosine_similarity: eps must be a number, got ReLU")
  raises(function() torch.cosine_similarity(a, a, {dim = nn.ReLU()}) end, "cosine_similarity: dim must be an integer, got ReLU")
  raises(function() torch.cosine_similarity(a, a, {dim = 2}) end, "cosine_similarity: Dimension out of range")
  raises(function() torch.baddbmm(b1:bmm(b2), b1, b2, {beta = {}}) end, "baddbmm: beta must be a number, got table")
  raises(function() torch.addbmm(inp[0], b1, b2, {alpha = "2"}) end, 'addbmm: alpha must be a number, got "2"')
  raises(function() torch.addcmul(a, a, a, {value = nn.ReLU()}) end, "addcmul: value must be a number, got ReLU")
  raises(function() a:addcdiv(a, a, {value = true}) end, "addcdiv: value must be a number, got true")
  raises(function() torch.cdist(a, b, 0 / 0) end, "cdist only supports non-negative p values, got", "cdist p NaN")
  raises(function() torch.cdist(a, b, -1) end, "cdist only supports non-negative p values, got -1", "cdist p < 0")
  raises(function() torch.cdist(a, b, {compute_mode = "mm"}) end, 'cdist: "mm" is not a valid value for compute_mode',
    "cdist compute_mode")
end)

test("log2, log10, exp2, expm1, tan, sinh, cosh, asinh, acosh, atanh, trunc, frac, hypot", function()
  both_exist({"log2", "log10", "exp2", "expm1", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "trunc", "frac", "hypot"})
  local xs = {-3.5, -1.25, -0.4, -1e-9, 1e-12, 0.3, 0.75, 2.5, 7}
  local x = torch.tensor(xs, {dtype = "float64"})
  local function ref(f) local r = {} for i, v in ipairs(xs) do r[i] = f(v) end return r end
  local function sinh(v) return math.abs(v) < 1e-6 and v + v ^ 3 / 6 or (math.exp(v) - math.exp(-v)) / 2 end
  local function expm1(v) return math.abs(v) < 1e-6 and v + v * v / 2 or math.exp(v) - 1 end
  local function asinh(v) local a = math.abs(v) local r = a < 1e-6 and a or math.log(a + math.sqrt(a * a + 1)) return v < 0 and -r or r end
  close(x:exp2(), ref(function(v) return 2 ^ v end), 1e-14, 0, "exp2")
  close(x:expm1(), ref(expm1), 1e-14, 0, "expm1")
  close(x:tan(), ref(math.tan), 1e-14, 1e-15, "tan")
  close(x:sinh(), ref(sinh), 1e-14, 0, "sinh")
  close(x:cosh(), ref(function(v) return (math.exp(v) + math.exp(-v)) / 2 end), 1e-14, 0, "cosh")
  close(x:asinh(), ref(asinh), 1e-14, 0, "asinh")
  close(x:trunc(), ref(function(v) return v < 0 and math.ceil(v) or math.floor(v) end), 0, 0, "trunc")
  close(x:frac(), ref(function(v) return v - (v < 0 and math.ceil(v) or math.floor(v)) end), 1e-15, 0, "frac")
  local pos = torch.tensor({1e-3, 0.5, 1, 8, 1000}, {dtype = "float64"})
  close(pos:log2(), {math.log(1e-3, 2), -1, 0, 3, math.log(1000, 2)}, 1e-15, 1e-15, "log2")
  close(torch.log10(pos), {-3, math.log(0.5, 10), 0, math.log(8, 10), 3}, 1e-15, 1e-15, "log10")
  local big = torch.tensor({1, 1.5, 10, 1e200}, {dtype = "float64"})
  close(big:acosh(), {0, math.log(1.5 + math.sqrt(1.25)), math.log(10 + math.sqrt(99)), math.log(2e200)}, 1e-14, 1e-15, "acosh")
  local u = torch.tensor({-0.75, -1e-12, 0.5, 0.99}, {dtype = "float64"})
  close(u:atanh(), {0.5 * math.log(0.25 / 1.75), -1e-12, 0.5 * math.log(3), 0.5 * math.log(1.99 / 0.01)}, 1e-13, 0, "atanh")
  close(torch.tensor({1, -1, 2}, {dtype = "float64"}):atanh(), {inf, -inf, nan}, 0, 0, "atanh edges")
  close(torch.tensor({-0.0, 2.7, -2.7, nan, inf}):trunc(), {-0.0, 2, -2, nan, inf}, 0, 0, "trunc edges")
  close(torch.tensor({5, -3}, {dtype = "int8"}):trunc(), {5, -3}, 0, 0, "int trunc")
  close(torch.hypot(torch.tensor({3, 0, -5e30, inf}), torch.tensor({4, 0, 12e30, 1})), {5, 0, 13e30, inf}, 1e-6, 0, "hypot float32")
  close(torch.tensor({1e-300}, {dtype = "float64"}):hypot(torch.tensor({1e-300}, {dtype = "float64"})), {math.sqrt(2) * 1e-300}, 1e-15, 0, "hypot tiny")
  eq(torch.tensor({1, 2}):log2().dtype, torch.float32, "int log2 is float32")
  raises(function() torch.tensor({1}):frac() end, "frac: expected a floating-point tensor", "int frac")
  -- float32 against the float64 results
  for _, name in ipairs({"exp2", "expm1", "tan", "sinh", "cosh", "asinh", "trunc"}) do
    close(x:float()[name](x:float()), x[name](x), 2e-6, 1e-7, "float32 " .. name)
  end
  local g = torch.tensor({-1.3, -0.2, 0.4, 1.7}, {dtype = "float64"})
  for _, name in ipairs({"exp2", "expm1", "tan", "sinh", "cosh", "asinh", "frac"}) do
    gradcheck(function(t) return t[name](t) end, {g}, name)
  end
  gradcheck(function(t) return t:log2() + t:log10() end, {g:abs()}, "log2 log10")
  gradcheck(function(t) return t:acosh() end, {g:abs() + 1.1}, "acosh")
  gradcheck(function(t) return (t * 0.5):atanh() end, {g}, "atanh")
  gradcheck(function(a, b) return torch.hypot(a, b) end, {g, g:flip(0)}, "hypot")
end)

test("a wrong value for a flag, a dim or a scalar is named by the function given it", function()
  local m = nn.ReLU()
  local a = torch.randn(2, 3)
  local f = torch.tensor({{1, 0 / 0, 2}, {0 / 0, 0, 3}})
  for _, c in ipairs({
    -- flags PyTorch types as bool are refused, not taken as true
    {function() return nn.functional.relu(a, {inplace = 0}) end, "relu: inplace must be a boolean, got 0"},
    {function() return nn.functional.dropout(a, 0.5, "yes") end, 'dropout: training must be a boolean, got "yes"'},
    {function() return torch.median(a, 0, {keepdim = m}) end, "median: keepdim must be a boolean, got ReLU"},
    {function() return torch.aminmax(a, {dim = 0, keepdim = 1}) end, "aminmax: keepdim must be a boolean, got 1"},
    -- dims and scalars checked before the ops inside run
    {function() return torch.aminmax(a, {dim = m}) end, "aminmax: dim must be an integer, got ReLU"},
    {function() return torch.count_nonzero(a, {dim = m}) end, "count_nonzero: dim must be an integer or a list"},
    {function() return torch.nansum(f, {dim = "x"}) end, 'nansum: dim must be an integer or a list of integers, got "x"'},
    {function() return torch.nanmean(f, {dim = {0, 0.5}}) end, "nanmean: dim must be an integer or a list of integers"},
    {function() return torch.nanmean(f, {dtype = m}) end, "nanmean: dtype must be a dtype"},
    {function() return torch.std_mean(f, {dim = m}) end, "std_mean: dim must be an integer or a list of integers, got ReLU"},
    {function() return torch.var_mean(f, {correction = m}) end, "var_mean: correction must be a number, got ReLU"},
    {function() return torch.var_mean(f, {unbiased = 1}) end, "var_mean: unbiased must be a boolean, got 1"},
    {function() return torch.diff(a, {prepend = m}) end, "diff: prepend must be a number or a tensor, got ReLU"},
    {function() return torch.diff(a, {append = "1"}) end, 'diff: append must be a number or a tensor, got "1"'},
    {function() return torch.nan_to_num(f, {posinf = m}) end, "nan_to_num: posinf must be a number, got ReLU"},
    {function() return torch.bernoulli(a:abs():clamp(0, 1), {p = m}) end, "bernoulli: p must be a number or a tensor, got ReLU"},
    -- the C bindings' option messages show an object by its class
    {function() return torch.all(a, {keepdim = m}) end, "all: option 'keepdim' must be a boolean, got ReLU"},
    {function() return a:sum({dim = m}) end, "sum: option 'dim' must be an integer or a list of integers, got ReLU"},
    {function() return torch.zeros_like(a, {device = m}) end, "zeros_like: option 'device': device expected, got ReLU"},
  }) do
    raises(c[1], c[2], c[2])
  end
  -- the values that are right still work, positionally and as options
  close(torch.count_nonzero(torch.tensor({{1, 0, 2}, {0, 0, 3}}), {dim = 0}), torch.tensor({1, 0, 2}), 0, 0, "count_nonzero {dim}")
  close(torch.nansum(f, 1, true), torch.tensor({{3}, {3}}), 0, 0, "nansum positional keepdim")
  close(torch.nansum(f, {dim = 0, keepdim = true}), torch.tensor({{1, 0, 5}}), 0, 0, "nansum options")
  eq(torch.nansum(f, {dtype = "float64"}).dtype, torch.float64, "nansum dtype")
  close(torch.diff(torch.tensor({1, 4, 9}), {prepend = 0, append = torch.tensor({20})}), torch.tensor({1, 3, 5, 11}), 0, 0,
    "diff prepend and append")
  close(torch.nan_to_num(f, 5), torch.tensor({{1, 5, 2}, {5, 0, 3}}), 0, 0, "nan_to_num nan")
end)

T.run()
