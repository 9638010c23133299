-- int8 and int16 as PyTorch has them: names and aliases, promotion (the table
-- PyTorch 1.13's torch.promote_types prints), wrap-around arithmetic against
-- int64 results wrapped in Lua, casts both ways, reductions, indexing,
-- sorting, matmul, creation, printing and safetensors. On the cuda pass
-- (TENSH_TEST_DEVICE=cuda) every tensor made here lives on the device.
local T = require "harness"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok

local NARROW = {int8 = 8, int16 = 16}

-- v (an integer) wrapped into a signed integer of `bits` bits, as two's complement
local function wrap(v, bits)
  local m = 1 << bits
  v = v % m
  if v >= m >> 1 then v = v - m end
  return v
end

local function wrapped(list, bits) return T.map(list, function(v) return wrap(v, bits) end) end

-- exact comparison of values and dtype
local function same(got, want_list, dt, what)
  eq(got.dtype, torch[dt], what .. " dtype")
  close(got, want_list, 0, 0, what)
end

test("int8 and int16: names, aliases, cast methods, element sizes", function()
  eq(torch.int8, "torch.int8", "torch.int8")
  eq(torch.int16, "torch.int16", "torch.int16")
  eq(torch.short, torch.int16, "torch.short")
  eq(rawget(torch, "char"), nil, "torch.char (PyTorch has none; Tensor:char() is int8)")
  local x = torch.tensor({1, -2, 3})
  eq(x:char().dtype, torch.int8, "char()")
  eq(x:short().dtype, torch.int16, "short()")
  eq(x:char():element_size(), 1, "int8 element_size")
  eq(x:short():element_size(), 2, "int16 element_size")
  eq(torch.zeros(2, {dtype = "short"}).dtype, torch.int16, "dtype 'short'")
  eq(torch.zeros(2, {dtype = "torch.int8"}).dtype, torch.int8, "dtype 'torch.int8'")
  eq(x:type(torch.int8).dtype, torch.int8, "type(int8)")
  eq(x:to(torch.int16).dtype, torch.int16, "to(int16)")
  raises(function() torch.zeros(2, {dtype = "int4"}) end, "int16, int8, uint8", "unknown dtype lists int8/int16")
end)

-- PyTorch 1.13: torch.promote_types(a, b) for every pair of these dtypes
-- (printed by /usr/bin/python3 with Debian's python3-torch), rows and columns in this order.
local ORDER = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool", "int8", "int16"}
local PROMOTE = {
  "float32 float64 float32 float32 float32 float32 float32 float32 float32 float32",
  "float64 float64 float64 float64 float64 float64 float64 float64 float64 float64",
  "float32 float64 float16 float32 float16 float16 float16 float16 float16 float16",
  "float32 float64 float32 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16",
  "float32 float64 float16 bfloat16 int64 int64 int64 int64 int64 int64",
  "float32 float64 float16 bfloat16 int64 int32 int32 int32 int32 int32",
  "float32 float64 float16 bfloat16 int64 int32 uint8 uint8 int16 int16",
  "float32 float64 float16 bfloat16 int64 int32 uint8 bool int8 int16",
  "float32 float64 float16 bfloat16 int64 int32 int16 int8 int8 int16",
  "float32 float64 float16 bfloat16 int64 int32 int16 int16 int16 int16",
}

test("binary ops promote as torch.promote_types", function()
  for i, a in ipairs(ORDER) do
    local row = {}
    for w in PROMOTE[i]:gmatch("%S+") do row[#row + 1] = w end
    for j, b in ipairs(ORDER) do
      local x, y = torch.ones(2, {dtype = a}), torch.ones(2, {dtype = b})
      eq(torch.add(x, y).dtype, torch[row[j]], a .. " + " .. b)
      eq(x:eq(y).dtype, torch.bool, a .. " == " .. b .. " gives bool")
    end
  end
  -- uint8 + int8 -> int16, exactly
  local u = torch.tensor({200, 255, 0}, {dtype = "uint8"})
  local s = torch.tensor({-128, 127, -1}, {dtype = "int8"})
  same(u + s, {72, 382, -1}, "int16", "uint8 + int8")
  local u2, s2 = torch.tensor({255, 5, 0}, {dtype = "uint8"}), torch.tensor({-1, 5, 0}, {dtype = "int8"})
  same(u2:eq(s2), {false, true, true}, "bool", "uint8 eq int8 compares values (255 ~= -1), not bits")
  same(s2:lt(u2), {true, false, false}, "bool", "int8 < uint8 by value")
end)

test("scalars keep the narrow dtype (ints) or give the default float", function()
  local x = torch.tensor({100, -100, 1}, {dtype = "int8"})
  same(x * 300, wrapped({30000, -30000, 300}, 8), "int8", "int8 * 300 wraps")
  eq((x * 2.5).dtype, torch.float32, "int8 * 2.5")
  close(x * 2.5, {250, -250, 2.5}, 0, 0, "int8 * 2.5 values")
  eq((x / 2).dtype, torch.float32, "int8 / 2")
  same(x + true, {101, -99, 2}, "int8", "int8 + true")
end)

-- Random values of a narrow dtype as a Lua list and a tensor.
local function narrow_rand(shape, dt, lo, hi)
  local bits = NARROW[dt]
  lo, hi = lo or -(1 << (bits - 1)), hi or (1 << (bits - 1)) - 1
  local list = T.rand_list(shape, lo, hi, true)
  return list, torch.tensor(list, {dtype = dt})
end

test("elementwise arithmetic wraps around as int64 results wrapped to the dtype", function()
  for dt, bits in pairs(NARROW) do
    local al, a = narrow_rand({5, 6}, dt)
    local bl, b = narrow_rand({5, 6}, dt)
    local wide_a, wide_b = a:long(), b:long()
    local function check(got, wide, what) same(got, wrapped(wide:tolist(), bits), dt, dt .. " " .. what) end
    check(a + b, wide_a + wide_b, "add")
    check(a - b, wide_a - wide_b, "sub")
    check(a * b, wide_a * wide_b, "mul")
    check(a:add(b, {alpha = 3}), wide_a:add(wide_b, {alpha = 3}), "add alpha 3")
    check(-a, -wide_a, "neg")
    check(a:abs(), wide_a:abs(), "abs")
    check(a:sign(), wide_a:sign(), "sign")
    check(torch.maximum(a, b), torch.maximum(wide_a, wide_b), "maximum")
    check(torch.minimum(a, b), torch.minimum(wide_a, wide_b), "minimum")
    check(a:clamp(-20, 30), wide_a:clamp(-20, 30), "clamp")
    check(a:relu(), wide_a:relu(), "relu")
    check(a ^ 3, wide_a ^ 3, "pow 3")
    local nz = b:masked_fill(b:eq(0), 7)
    check(a // nz, wide_a // nz:long(), "floor_divide")
    check(a % nz, wide_a % nz:long(), "remainder")
    -- broadcast and non-contiguous: a transposed view with a row
    local row = b[1]
    check(a:t() + row:reshape(6, 1), wide_a:t() + wide_b[1]:reshape(6, 1), "transposed + broadcast column")
    check(a[{{}, {0, 6, 2}}] * 5, wide_a[{{}, {0, 6, 2}}] * 5, "stepped * 5")
    -- comparisons give the int64 answers
    for _, op in ipairs({"eq", "ne", "lt", "le", "gt", "ge"}) do
      close(a[op](a, b), wide_a[op](wide_a, wide_b), 0, 0, dt .. " " .. op)
    end
    close(torch.logical_and(a, b), torch.logical_and(wide_a, wide_b), 0, 0, dt .. " logical_and")
    close(a:logical_not(), wide_a:logical_not(), 0, 0, dt .. " logical_not")
    -- in place
    local c = a:clone()
    c:add_(b)
    check(c, wide_a + wide_b, "add_")
    local _ = al, bl
  end
  -- the edges PyTorch prints: int8 127 + 1 = -128, -(-128) = -128, abs(-128) = -128, -128 // -1 = -128
  local e = torch.tensor({127, -128}, {dtype = "int8"})
  same(e + 1, {-128, -127}, "int8", "int8 127 + 1")
  same(-e, {-127, -128}, "int8", "int8 neg")
  same(e:abs(), {127, -128}, "int8", "int8 abs")
  same(e // -1, {-127, -128}, "int8", "int8 // -1")
  local h = torch.tensor({32767, -32768}, {dtype = "int16"})
  same(h + 1, {-32768, -32767}, "int16", "int16 32767 + 1")
  same(h * 2, {-2, 0}, "int16", "int16 * 2")
end)

test("integer errors: division by zero, float-only ops", function()
  for dt in pairs(NARROW) do
    local a = torch.tensor({1, 2}, {dtype = dt})
    raises(function() return a // torch.zeros(2, {dtype = dt}) end, "division by zero", dt .. " // 0")
    eq(a:sqrt().dtype, torch.float32, dt .. " sqrt promotes to float32")
    close(a:sqrt(), {1, math.sqrt(2)}, 1e-6, 0, dt .. " sqrt")
  end
end)

test("casts to and from every dtype", function()
  local vals = {-100, -1, 0, 1, 7, 100}
  for dt in pairs(NARROW) do
    local x = torch.tensor(vals, {dtype = dt})
    for _, other in ipairs(ORDER) do
      local y = x:to(other)
      eq(y.dtype, torch[other], dt .. " -> " .. other)
      local want = other == "bool" and T.map(vals, function(v) return v ~= 0 end)
        or other == "uint8" and T.map(vals, function(v) return v % 256 end) or vals
      close(y, want, 0, 0, dt .. " -> " .. other)
      if other ~= "bool" and other ~= "uint8" then close(y:to(dt), vals, 0, 0, other .. " -> " .. dt) end
    end
  end
  -- from int64: wraps; from floats: truncates toward zero
  same(torch.tensor({200, -200, 40000, 128}):char(), {-56, 56, 64, -128}, "int8", "int64 -> int8 wraps")
  same(torch.tensor({40000, -40000, 65535}):short(), {-25536, 25536, -1}, "int16", "int64 -> int16 wraps")
  same(torch.tensor({3.7, -3.7, 127.9, -128.5}):char(), {3, -3, 127, -128}, "int8", "float32 -> int8 truncates")
  same(torch.tensor({1000.5, -32768.9}, {dtype = "float64"}):short(), {1000, -32768}, "int16", "float64 -> int16")
  same(torch.tensor({true, false}):short(), {1, 0}, "int16", "bool -> int16")
  same(torch.tensor({255, 128}, {dtype = "uint8"}):char(), {-1, -128}, "int8", "uint8 -> int8 reinterprets")
  same(torch.tensor({-1, -128}, {dtype = "int8"}):byte(), {255, 128}, "uint8", "int8 -> uint8")
  -- copy_ across dtypes, into a strided view
  local dst = torch.zeros(3, 2, {dtype = "int8"})
  dst:t():copy_(torch.tensor({{1, 2, 300}, {-1, -2, -300}}))
  same(dst, {{1, -1}, {2, -2}, {44, -44}}, "int8", "copy_ int64 -> strided int8")
  eq(torch.tensor(-5, {dtype = "int8"}):item(), -5, "item")
  eq(math.type(torch.tensor(-5, {dtype = "int16"}):item()), "integer", "item is a Lua integer")
end)

test("reductions: sums and products in int64, extremes in the dtype", function()
  for dt, bits in pairs(NARROW) do
    local _, a = narrow_rand({4, 7}, dt)
    local w = a:long()
    same(a:sum(), w:sum():tolist(), "int64", dt .. " sum")
    same(a:sum(1), w:sum(1):tolist(), "int64", dt .. " sum(1)")
    same(a:t():sum(1), w:t():sum(1):tolist(), "int64", dt .. " transposed sum(1)")
    same(a:sum(0, {dtype = "float64"}), w:sum(0):tolist(), "float64", dt .. " sum(dtype float64)")
    local small = (a % 5) - 2
    same(small:prod(1), small:long():prod(1):tolist(), "int64", dt .. " prod(1)")
    same(a:max(), w:max():tolist(), dt, dt .. " max")
    same(a:amin(0), w:amin(0):tolist(), dt, dt .. " amin(0)")
    local mv, mi = a:max(1)
    local wv, wi = w:max(1)
    same(mv, wv:tolist(), dt, dt .. " max(1) values")
    close(mi, wi, 0, 0, dt .. " max(1) indices")
    close(a:argmin(1), w:argmin(1), 0, 0, dt .. " argmin(1)")
    same(a:cumsum(1), w:cumsum(1):tolist(), "int64", dt .. " cumsum")
    close(a:mean({dtype = "float64"}), w:double():mean(), 1e-12, 0, dt .. " mean(dtype float64)")
    ok(a:ne(0):any():item() and not a:eq(1000 % (1 << (bits - 1))):all():item(), dt .. " any/all")
    eq(a:ne(0):sum():item(), w:ne(0):sum():item(), dt .. " nonzero count")
  end
  -- int8 sums do not wrap: 100 * 100 elements
  same(torch.full({100}, 100, {dtype = "int8"}):sum(), 10000, "int64", "int8 sum to int64")
  same(torch.zeros(0, {dtype = "int16"}):sum(), 0, "int64", "empty int16 sum")
end)

test("indexing, joining and masks keep the dtype", function()
  for dt, bits in pairs(NARROW) do
    local _, a = narrow_rand({5, 4}, dt)
    local w = a:long()
    local idx = torch.tensor({4, 0, 2, 2})
    same(a:index_select(0, idx), w:index_select(0, idx):tolist(), dt, dt .. " index_select")
    same(a[idx], w[idx]:tolist(), dt, dt .. " a[idx]")
    local g = torch.randint(0, 4, {5, 3})
    same(a:gather(1, g), w:gather(1, g):tolist(), dt, dt .. " gather")
    local m = a:gt(0)
    same(a:masked_select(m), w:masked_select(m):tolist(), dt, dt .. " masked_select")
    same(a:masked_fill(m, -3), w:masked_fill(m, -3):tolist(), dt, dt .. " masked_fill")
    same(torch.where(m, a, a:neg()), wrapped(torch.where(m, w, w:neg()):tolist(), bits), dt, dt .. " where")
    same(torch.cat({a, a:t():contiguous():t()}, 1), torch.cat({w, w}, 1):tolist(), dt, dt .. " cat")
    same(torch.stack({a[0], a[1]}), torch.stack({w[0], w[1]}):tolist(), dt, dt .. " stack")
    close(a:nonzero(), w:nonzero(), 0, 0, dt .. " nonzero")
    local src = a:clone()
    local si = torch.randint(0, 5, {5, 4})
    same(a:scatter_add(0, si, src), wrapped(w:scatter_add(0, si, src:long()):tolist(), bits), dt, dt .. " scatter_add wraps")
    same(a:scatter(0, torch.tensor({{1, 1, 1, 1}}), src[{{0, 1}}]),
      w:scatter(0, torch.tensor({{1, 1, 1, 1}}), src[{{0, 1}}]:long()):tolist(), dt, dt .. " scatter")
    local b = a:clone()
    b[{{1, 3}}] = 9
    local wb = w:clone()
    wb[{{1, 3}}] = 9
    same(b, wb:tolist(), dt, dt .. " slice assignment")
    same(a:unique(), w:unique():tolist(), dt, dt .. " unique")
  end
end)

test("sort, argsort and topk order signed narrow values", function()
  for dt in pairs(NARROW) do
    local _, a = narrow_rand({6, 33}, dt)
    local w = a:long()
    for _, desc in ipairs({false, true}) do
      local v, i = a:sort({dim = 1, descending = desc})
      local wv = w:sort({dim = 1, descending = desc})
      same(v, wv:tolist(), dt, dt .. " sort values desc=" .. tostring(desc))
      close(a:gather(1, i), wv, 0, 0, dt .. " sort indices desc=" .. tostring(desc))
    end
    local ties = (a % 3):to(dt)
    local _, ti = ties:sort({dim = 1, stable = true})
    local _, wi = ties:long():sort({dim = 1, stable = true})
    close(ti, wi, 0, 0, dt .. " stable sort with ties")
    local tv = a:topk(5, {dim = 1})
    same(tv, w:topk(5, {dim = 1}):tolist(), dt, dt .. " topk")
    close(a:argsort(0), w:argsort(0), 0, 0, dt .. " argsort(0)")
  end
  same(torch.tensor({5, -3, 0, -128, 127}, {dtype = "int8"}):sort(), {-128, -3, 0, 5, 127}, "int8", "int8 extremes")
  same(torch.tensor({5, -3, 0, -32768, 32767}, {dtype = "int16"}):sort({descending = true}),
    {32767, 5, 0, -3, -32768}, "int16", "int16 extremes descending")
end)

test("matmul on int8 and int16 wraps as the wrapped int64 product", function()
  for dt, bits in pairs(NARROW) do
    local _, a = narrow_rand({3, 5, 4}, dt)
    local _, b = narrow_rand({4, 6}, dt)
    same(a:matmul(b), wrapped(a:long():matmul(b:long()):tolist(), bits), dt, dt .. " batched matmul")
    same(a[0]:t():mm(a[1]), wrapped(a[0]:long():t():mm(a[1]:long()):tolist(), bits), dt, dt .. " mm transposed")
    same(a[0][0]:dot(a[1][0]), wrap(a[0][0]:long():dot(a[1][0]:long()):item(), bits), dt, dt .. " dot")
  end
  same(torch.tensor({{100, -2}, {3, 4}}, {dtype = "int8"}):matmul(torch.tensor({{2, 0}, {0, 1}}, {dtype = "int8"})),
    {{-56, -2}, {6, 4}}, "int8", "int8 matmul as PyTorch")
end)

test("creation with int8 and int16", function()
  same(torch.arange(5, {dtype = torch.int16}), {0, 1, 2, 3, 4}, "int16", "arange")
  same(torch.arange(-6, 6, 4, {dtype = torch.int8}), {-6, -2, 2}, "int8", "arange step")
  same(torch.full({2}, 3, {dtype = torch.int8}), {3, 3}, "int8", "full")
  same(torch.full({2}, -300, {dtype = torch.int16}), {-300, -300}, "int16", "full negative")
  same(torch.zeros(2, {dtype = torch.int8}), {0, 0}, "int8", "zeros")
  same(torch.ones(2, {dtype = torch.int16}), {1, 1}, "int16", "ones")
  same(torch.zeros_like(torch.ones(3, {dtype = "int8"})), {0, 0, 0}, "int8", "zeros_like")
  same(torch.tensor({-128, 127}, {dtype = "int8"}), {-128, 127}, "int8", "tensor")
  for dt, bits in pairs(NARROW) do
    local lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
    local r = torch.randint(lo, hi, {2000}, {dtype = dt})
    eq(r.dtype, torch[dt], dt .. " randint dtype")
    ok(r:min():item() >= lo and r:max():item() < hi, dt .. " randint in range")
    ok(r:min():item() < lo / 2 and r:max():item() > hi / 2, dt .. " randint covers the range")
    local s = torch.randint(-3, 3, {500}, {dtype = dt})
    ok(s:min():item() == -3 and s:max():item() == 2, dt .. " randint [-3, 3)")
  end
end)

test("printing as PyTorch", function()
  local cpu = {device = "cpu"}
  eq(tostring(torch.tensor({{1, -2}, {3, 4}}, {dtype = "int8", device = "cpu"})),
    "tensor([[ 1, -2],\n        [ 3,  4]], dtype=torch.int8)", "int8 matrix")
  eq(tostring(torch.tensor({127, -128, 5}, {dtype = "int8", device = "cpu"})),
    "tensor([ 127, -128,    5], dtype=torch.int8)", "int8 vector")
  eq(tostring(torch.tensor(-25536, {dtype = "int16", device = "cpu"})), "tensor(-25536, dtype=torch.int16)", "int16 scalar")
  eq(tostring(torch.zeros(0, {dtype = "int16", device = "cpu"})), "tensor([], dtype=torch.int16)", "empty int16")
  local _ = cpu
end)

test("safetensors round trip of int8 and int16 (I8, I16)", function()
  local path = os.tmpname()
  local a = torch.tensor({{-128, 127}, {0, -1}}, {dtype = "int8"})
  local b = torch.tensor({-32768, 32767, 12345}, {dtype = "int16"})
  torch.save({a = a, b = b:t()}, path)
  local f = io.open(path, "rb")
  local bytes = f:read("a")
  f:close()
  ok(bytes:find('"dtype":"I8"', 1, true), "header names I8")
  ok(bytes:find('"dtype":"I16"', 1, true), "header names I16")
  local back = torch.load(path)
  os.remove(path)
  same(back.a, {{-128, 127}, {0, -1}}, "int8", "int8 back")
  same(back.b, {-32768, 32767, 12345}, "int16", "int16 back")
end)

test("cuda and cpu agree on int8 and int16 (skipped without a device)", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  for dt, bits in pairs(NARROW) do
    local _, a = narrow_rand({7, 9}, dt)
    local _, b = narrow_rand({7, 9}, dt)
    a, b = a:cpu(), b:cpu()
    local ac, bc = a:cuda(), b:cuda()
    local function agree(got, want, what)
      ok(got.is_cuda, what .. " on cuda")
      eq(got.dtype, want.dtype, what .. " dtype")
      close(got:cpu(), want, 0, 0, what)
    end
    agree(ac + bc, a + b, dt .. " add")
    agree(ac * bc, a * b, dt .. " mul")
    agree(ac:t() - bc:t(), a:t() - b:t(), dt .. " transposed sub")
    agree(ac // 3, a // 3, dt .. " // 3")
    agree(ac:clamp(200, 300), a:clamp(200, 300), dt .. " clamp above the range")
    agree(ac:clamp(-1000, 1000), a:clamp(-1000, 1000), dt .. " clamp beyond the range")
    agree(ac:sum(1), a:sum(1), dt .. " sum(1)")
    agree(ac:cumsum(0), a:cumsum(0), dt .. " cumsum(0)")
    agree(ac:max(0), a:max(0), dt .. " max(0)")
    agree(ac:sort({dim = 1}), a:sort({dim = 1}), dt .. " sort")
    agree(ac:matmul(bc:t()), a:matmul(b:t()), dt .. " matmul")
    agree(ac:float(), a:float(), dt .. " -> float32")
    agree((ac:float() * 1.5):to(dt), (a:float() * 1.5):to(dt), "float32 -> " .. dt)
    agree(ac:to(bits == 8 and "int16" or "int8"), a:to(bits == 8 and "int16" or "int8"), dt .. " narrow cast")
    agree(ac:eq(bc), a:eq(b), dt .. " eq")
    agree(ac[ac:gt(0)], a[a:gt(0)], dt .. " masked index")
  end
end)

T.run()
