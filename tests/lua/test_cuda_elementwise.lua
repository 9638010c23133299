-- CUDA elementwise and copy kernels against the CPU (the oracle): each case
-- runs the same op on the same inputs on both devices and compares, over
-- every dtype, contiguous, transposed, stepped, misaligned, broadcast, 0-dim,
-- empty and large inputs, scalars from Lua, and the CPU's error cases.
-- Skipped without a CUDA device.
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

local FLOATS = {"float32", "float64", "float16", "bfloat16"}
local INTS = {"int64", "int32", "int16", "int8", "uint8"}
local ALL = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}

local function is_float(dt) return dt == "float32" or dt == "float64" or dt == "float16" or dt == "bfloat16" end

-- rtol, atol for a result dtype: CPU and GPU libm differ by an ulp or two
local function tol(dt)
  dt = tostring(dt):gsub("^torch%.", "")
  if dt == "float32" then return 1e-5, 1e-6 end
  if dt == "float64" then return 1e-12, 1e-12 end
  if dt == "float16" or dt == "bfloat16" then return 1e-2, 1e-2 end
  return 0, 0
end

-- A CPU tensor of dtype dt with values the ops keep defined.
local function sample(shape, dt)
  if dt == "bool" then return torch.randint(0, 2, shape):bool() end
  if dt == "uint8" then return torch.randint(0, 256, shape):to("uint8") end
  if dt == "int64" or dt == "int32" or dt == "int16" or dt == "int8" then return torch.randint(-100, 100, shape):to(dt) end
  return (torch.randn(shape) * 3):to(dt)
end

-- got (on cuda) against want (on the cpu): device, dtype, shape, values
local function same(got, want, what, rtol, atol)
  T.ok(got.is_cuda, what .. ": result is not on cuda")
  eq(got.dtype, want.dtype, what .. " dtype")
  eq(tostring(got.shape), tostring(want.shape), what .. " shape")
  local r, a = tol(want.dtype)
  close(got:cpu(), want, rtol or r, atol or a, what)
end

-- views of a (6, 8) tensor that take each path of the kernels
local LAYOUTS = {
  {"contiguous", function(t) return t end},
  {"transposed", function(t) return t:t() end},
  {"step 2", function(t) return t[{{}, {0, 8, 2}}] end},
  {"misaligned", function(t) return t:reshape(48)[{{1, 48}}] end},
  {"expanded", function(t) return t[{{0, 1}}]:expand(6, 8) end},
  {"0-dim", function(t) return t[2][3] end},
}

-- every unary op of the registry that takes no parameters (clamp and pow are
-- the next case's)
local UNARY = {}
for _, n in ipairs(T.unary_ops()) do
  if n ~= "clamp" and n ~= "pow_scalar" then UNARY[#UNARY + 1] = n end
end

-- op n on a CPU tensor a and its cuda copy ac: the same values, or the same
-- error where the dtype is not the op's (bitwise_not of a float)
local function same_or_refused(n, ac, a, what)
  local okc, want = pcall(a[n], a)
  if okc then return same(ac[n](ac), want, what) end
  raises(function() return ac[n](ac) end, tostring(want):match("^.-:%d+: (.*)$") or tostring(want), what)
end

test("cuda unary ops match the cpu over dtypes and layouts", function()
  need_cuda()
  for _, dt in ipairs(ALL) do
    local x = sample({6, 8}, dt)
    local xc = x:cuda()
    for _, l in ipairs(LAYOUTS) do
      local a, ac = l[2](x), l[2](xc)
      -- float ops of integers compute in float32 (the op layer casts on the device)
      for _, n in ipairs(UNARY) do same_or_refused(n, ac, a, dt .. " " .. l[1] .. " " .. n) end
    end
  end
end)

test("cuda unary ops with parameters: clamp, pow, gelu tanh", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8"}) do
    local x = sample({6, 8}, dt)
    for _, l in ipairs(LAYOUTS) do
      local a, ac = l[2](x), l[2](x:cuda())
      local w = dt .. " " .. l[1]
      same(ac:clamp(-1, 1), a:clamp(-1, 1), w .. " clamp")
      same(ac:clamp({min = 2}), a:clamp({min = 2}), w .. " clamp min")
      same(ac:clamp(nil, 3), a:clamp(nil, 3), w .. " clamp max")
      same(ac:clamp(5, 2), a:clamp(5, 2), w .. " clamp min > max")
      same(ac:pow(2), a:pow(2), w .. " pow 2")
      same(ac:pow(3), a:pow(3), w .. " pow 3")
      if is_float(dt) then
        same(ac:pow(0.5), a:pow(0.5), w .. " pow 0.5")
        same(ac:pow(-1.5), a:pow(-1.5), w .. " pow -1.5")
        same(ac:gelu({approximate = "tanh"}), a:gelu({approximate = "tanh"}), w .. " gelu tanh")
        same(ac:clamp(-0.5, 0.25), a:clamp(-0.5, 0.25), w .. " clamp fractional")
      end
    end
  end
end)

test("cuda unary ops on special values: NaN, inf, -0, halves", function()
  need_cuda()
  local vals = {0 / 0, math.huge, -math.huge, 0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e-30, -7.25, 100.0}
  for _, dt in ipairs(FLOATS) do
    local x = torch.tensor(vals):to(dt)
    local xc = x:cuda()
    for _, n in ipairs(UNARY) do same_or_refused(n, xc, x, dt .. " special " .. n) end
    same(xc:clamp(-1, 1), x:clamp(-1, 1), dt .. " clamp NaN")
    same(xc:pow(2), x:pow(2), dt .. " pow 2 special")
  end
  -- sign(-0) is +0, as the CPU and PyTorch 1.13 ((0 < x) - (x < 0)): 1/sign(-0) is inf
  local z = torch.tensor({-0.0}):cuda():sign()
  eq(1 / z:cpu():item(), math.huge, "sign(-0) is +0")
  close(torch.tensor({0.5, 1.5, 2.5, -0.5, -2.5}):cuda():round():cpu(), {0, 2, 2, 0, -2}, 0, 0, "half to even")
end)

test("cuda integer unary ops wrap as the cpu", function()
  need_cuda()
  eq(torch.tensor({math.mininteger}):cuda():neg():cpu():item(), math.mininteger, "neg of the minimum")
  eq(torch.tensor({math.mininteger}):cuda():abs():cpu():item(), math.mininteger, "abs of the minimum")
  local i32 = torch.tensor({-2147483648, 2147483647, 5}, {dtype = "int32"})
  same(i32:cuda():neg(), i32:neg(), "int32 neg")
  same(i32:cuda():abs(), i32:abs(), "int32 abs")
  local u8 = torch.tensor({0, 1, 200, 255}, {dtype = "uint8"})
  same(u8:cuda():neg(), u8:neg(), "uint8 neg wraps")
  same(u8:cuda():pow(3), u8:pow(3), "uint8 pow wraps")
  local big = torch.tensor({3, -3, 7})
  same(big:cuda():pow(41), big:pow(41), "int64 pow wraps")
end)

local BINARY = {"add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "minimum",
                "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"}
local BOOL_OK = {add = true, mul = true, div = true, maximum = true, minimum = true, eq = true, ne = true, lt = true,
                 le = true, gt = true, ge = true, logical_and = true, logical_or = true}

-- (a, b) pairs of views of two (6, 8) tensors, and a third form with b broadcast
local PAIRS = {
  {"contiguous", function(a, b) return a, b end},
  {"transposed", function(a, b) return a:t(), b:t() end},
  {"mixed", function(a, b) return a:t(), b:reshape(8, 6) end},
  {"step 2", function(a, b) return a[{{}, {0, 8, 2}}], b[{{}, {1, 8, 2}}] end},
  {"misaligned", function(a, b) return a:reshape(48)[{{1, 48}}], b:reshape(48)[{{0, 47}}] end},
  {"broadcast row", function(a, b) return a, b[{{2, 3}}] end},
  {"broadcast column", function(a, b) return a[{{}, {0, 1}}], b end},
  {"0-dim cuda", function(a, b) return a, b[1][1] end},
  {"0-dim both", function(a, b) return a[0][0], b[1][1] end},
}

-- b with no zeros (integer division) and small non-negative exponents for pow
local function operands(dt, op)
  local a, b = sample({6, 8}, dt), sample({6, 8}, dt)
  if not is_float(dt) and dt ~= "bool" then
    if op == "pow" then b = torch.randint(0, 6, {6, 8}):to(dt) end
    if op == "floor_divide" or op == "remainder" then b = torch.where(b:eq(0), 3, b) end
  end
  return a, b
end

test("cuda binary and comparison ops match the cpu over dtypes and layouts", function()
  need_cuda()
  for _, dt in ipairs(ALL) do
    for _, op in ipairs(BINARY) do
      if dt ~= "bool" or BOOL_OK[op] then
        local a, b = operands(dt, op)
        local ac, bc = a:cuda(), b:cuda()
        for _, p in ipairs(PAIRS) do
          local x, y = p[2](a, b)
          local xc, yc = p[2](ac, bc)
          same(xc[op](xc, yc), x[op](x, y), dt .. " " .. p[1] .. " " .. op)
        end
      end
    end
  end
end)

test("cuda binary ops with Lua numbers and cpu 0-dim tensors on either side", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8"}) do
    local a = sample({6, 8}, dt)
    local ac = a:cuda()
    local w = dt .. " "
    same(ac + 3, a + 3, w .. "+ 3")
    same(2 - ac, 2 - a, w .. "2 - x")
    same(ac * 1.5, a * 1.5, w .. "* 1.5 (promotes ints)")
    same(ac / 4, a / 4, w .. "/ 4")
    same(ac // 3, a // 3, w .. "// 3")
    same(ac % 3, a % 3, w .. "% 3")
    same(ac:t() * 2, a:t() * 2, w .. "transposed * 2")
    same(ac:gt(1), a:gt(1), w .. "gt 1")
    same(ac:eq(0), a:eq(0), w .. "eq 0")
    local s = torch.tensor(2, {dtype = dt}) -- a 0-dim tensor on the cpu, taken as a scalar
    same(ac * s, a * s, w .. "* cpu 0-dim")
    same(s - ac, s - a, w .. "cpu 0-dim - x")
    same(ac:add(a:cuda(), {alpha = 3}), a:add(a, {alpha = 3}), w .. "add alpha 3")
    same(ac:sub(a:cuda(), {alpha = 2}), a:sub(a, {alpha = 2}), w .. "sub alpha 2")
    if is_float(dt) then
      same(ac:add(ac, {alpha = 0.1}), a:add(a, {alpha = 0.1}), w .. "add alpha 0.1")
      same(2 ^ ac, 2 ^ a, w .. "2 ^ x")
      same(ac ^ 0.5, a ^ 0.5, w .. "x ^ 0.5")
    end
  end
end)

test("cuda binary ops on special values: NaN in maximum, remainder signs", function()
  need_cuda()
  local av = {0 / 0, 1.0, 0 / 0, -0.0, 0.0, 7.5, -7.5, 7.5, -7.5, math.huge, 5.0, -5.0}
  local bv = {1.0, 0 / 0, 0 / 0, 0.0, -0.0, 2.0, 2.0, -2.0, -2.0, 1.0, 0.0, 0.0}
  for _, dt in ipairs(FLOATS) do
    local a, b = torch.tensor(av):to(dt), torch.tensor(bv):to(dt)
    local ac, bc = a:cuda(), b:cuda()
    for _, op in ipairs(BINARY) do same(ac[op](ac, bc), a[op](a, b), dt .. " special " .. op) end
  end
  local a, b = torch.tensor({7, -7, 7, -7, math.mininteger}), torch.tensor({2, 2, -2, -2, -1})
  same(a:cuda() // b:cuda(), a // b, "int floor_divide signs, min // -1 wraps")
  same(a:cuda() % b:cuda(), a % b, "int remainder signs")
  close((a:cuda() // b:cuda()):cpu(), {3, -4, -4, 3, math.mininteger}, 0, 0, "floor_divide values")
end)

test("cuda integer errors match the cpu's", function()
  need_cuda()
  local a = torch.tensor({7, -7, 3}):cuda()
  local z = torch.tensor({1, 0, 2}):cuda()
  raises(function() return a // z end, "division by zero", "tensor divisor")
  raises(function() return a % z end, "division by zero", "tensor remainder")
  raises(function() return a // 0 end, "division by zero", "scalar divisor")
  raises(function() return a:to("int32") % 0 end, "division by zero", "int32 scalar remainder")
  raises(function() return a ^ torch.tensor({1, -1, 2}):cuda() end, "negative integer powers", "int pow")
  raises(function() return a:pow(-2) end, "negative integer powers", "int pow scalar")
  -- bases 1 and -1 have integer negative powers
  same(torch.tensor({1, -1, -1}):cuda() ^ torch.tensor({-3, -3, -2}):cuda(),
       torch.tensor({1, -1, -1}) ^ torch.tensor({-3, -3, -2}), "+-1 to negative powers")
  -- the session and the device go on
  same(a + 1, torch.tensor({8, -6, 4}), "after the errors")
end)

test("cuda where and lerp", function()
  need_cuda()
  for _, dt in ipairs(ALL) do
    local c = torch.randint(0, 2, {6, 8}):bool()
    local a, b = sample({6, 8}, dt), sample({6, 8}, dt)
    local cc, ac, bc = c:cuda(), a:cuda(), b:cuda()
    same(torch.where(cc, ac, bc), torch.where(c, a, b), dt .. " where")
    same(torch.where(cc:t(), ac:t(), bc[{{0, 1}}]:expand(6, 8):t()), torch.where(c:t(), a:t(), b[{{0, 1}}]:expand(6, 8):t()),
         dt .. " where strided, broadcast")
    same(torch.where(cc[{{}, {0, 1}}], ac, bc), torch.where(c[{{}, {0, 1}}], a, b), dt .. " where broadcast cond")
    if dt ~= "bool" then
      same(torch.where(cc, ac, 0), torch.where(c, a, 0), dt .. " where with a Lua number")
    end
  end
  for _, dt in ipairs(FLOATS) do
    local s, e, w = sample({6, 8}, dt), sample({6, 8}, dt), torch.rand({6, 8}):to(dt) * 1.4 - 0.2
    local sc, ec, wc = s:cuda(), e:cuda(), w:cuda()
    same(torch.lerp(sc, ec, wc), torch.lerp(s, e, w), dt .. " lerp")
    same(torch.lerp(sc:t(), ec:t(), 0.3), torch.lerp(s:t(), e:t(), 0.3), dt .. " lerp scalar weight < 0.5")
    same(torch.lerp(sc, ec, 0.75), torch.lerp(s, e, 0.75), dt .. " lerp scalar weight >= 0.5")
  end
end)

test("cuda in-place ops on contiguous and strided views", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float16", "int64", "int32"}) do
    local x = sample({6, 8}, dt)
    local xc = x:cuda()
    xc:add_(2)
    x:add_(2)
    xc:t():mul_(3)
    x:t():mul_(3)
    xc[{{}, {0, 8, 2}}]:neg_()
    x[{{}, {0, 8, 2}}]:neg_()
    xc:clamp_(-20, 20)
    x:clamp_(-20, 20)
    same(xc, x, dt .. " in-place chain")
  end
end)

test("cuda empty and 0-dim operands", function()
  need_cuda()
  for _, dt in ipairs(ALL) do
    local e = sample({0, 8}, dt):cuda()
    eq((e + e):numel(), 0, dt .. " empty add")
    eq(e:eq(e):numel(), 0, dt .. " empty eq")
    eq(e:to("float32"):numel(), 0, dt .. " empty copy")
    eq(torch.where(e:bool(), e, e):numel(), 0, dt .. " empty where")
    local s = torch.tensor(3):to(dt)
    same(s:cuda() * s:cuda(), s * s, dt .. " 0-dim mul")
  end
  local z = torch.zeros({0, 3}, {device = "cuda"})
  z:fill_(1)
  eq(z:numel(), 0, "empty fill")
  eq(torch.arange(0, {device = "cuda"}):numel(), 0, "empty arange")
  eq(torch.linspace(0, 1, 0, {device = "cuda"}):numel(), 0, "empty linspace")
end)

test("cuda large tensors: vector path with a tail, strided path, copies", function()
  need_cuda()
  local n = (1 << 20) + 3 -- not a multiple of any vector width
  local x = torch.randn({n})
  local xc = x:cuda()
  same(xc + xc * 2, x + x * 2, "large add mul", 0, 0) -- IEEE, each op rounded once: exact
  same(xc:exp(), x:exp(), "large exp")
  same(xc:to("float16"), x:to("float16"), "large cast to float16", 0, 0)
  local m = torch.randn({1024, 1031})
  local mc = m:cuda()
  same(mc:t():sigmoid(), m:t():sigmoid(), "large transposed sigmoid")
  same(mc:t():contiguous(), m:t():contiguous(), "large transposed copy", 0, 0)
  same(mc[{{}, {0, 1031, 3}}]:to("float64"), m[{{}, {0, 1031, 3}}]:to("float64"), "large stepped cast", 0, 0)
  close(mc:t():cpu(), m:t(), 0, 0, "large strided to cpu")
  same(m:t():cuda(), m:t(), "large strided to cuda", 0, 0)
  local i = torch.randint(-1000, 1000, {n}):to("int32")
  same(i:cuda() // 7, i // 7, "large int32 floor_divide")
end)

test("cuda copies between every pair of dtypes", function()
  need_cuda()
  for _, sd in ipairs(ALL) do
    local x = sample({5, 7}, sd)
    for _, dd in ipairs(ALL) do
      -- float to uint8 is defined in C for values in [0, 256) only
      local src = (is_float(sd) and dd == "uint8") and x:abs() or x
      local sc = src:cuda()
      same(sc:to(dd), src:to(dd), sd .. " -> " .. dd, 0, 0)
      same(sc:t():to(dd), src:t():to(dd), sd .. " -> " .. dd .. " transposed", 0, 0)
      local dst = torch.zeros({5, 7}, {dtype = dd}):cuda()
      dst:copy_(src) -- from the cpu, with a cast
      same(dst, src:to(dd), sd .. " -> " .. dd .. " copy_ from cpu", 0, 0)
      local back = torch.zeros({7, 5}, {dtype = dd})
      back:t():copy_(sc) -- to a strided cpu view, with a cast
      close(back, src:to(dd):t(), 0, 0, sd .. " -> " .. dd .. " copy_ to strided cpu")
    end
  end
end)

test("cuda copy_ broadcasts, fills views, and takes scalars", function()
  need_cuda()
  local dst = torch.zeros({4, 5}, {device = "cuda"})
  dst:copy_(torch.tensor({1, 2, 3, 4, 5})) -- cpu int64 row, broadcast and cast
  close(dst:cpu(), torch.tensor({1, 2, 3, 4, 5}):float():expand(4, 5), 0, 0, "broadcast row from cpu")
  dst:copy_(torch.tensor(3.5))
  close(dst:cpu(), torch.full({4, 5}, 3.5), 0, 0, "cpu 0-dim source")
  dst:t():copy_(torch.arange(20):reshape(5, 4)) -- into a transposed view
  close(dst:cpu(), torch.arange(20):reshape(5, 4):t():float(), 0, 0, "into a transposed view")
  local row = torch.tensor({{9.0, 8.0, 7.0, 6.0, 5.0}}):cuda()
  dst:copy_(row)
  close(dst:cpu(), torch.tensor({{9.0, 8.0, 7.0, 6.0, 5.0}}):expand(4, 5), 0, 0, "broadcast row on the device")
  dst[{{}, {0, 5, 2}}]:fill_(-1)
  local want = torch.tensor({{9.0, 8.0, 7.0, 6.0, 5.0}}):expand(4, 5):clone()
  want[{{}, {0, 5, 2}}]:fill_(-1)
  close(dst:cpu(), want, 0, 0, "fill a stepped view")
end)

test("cuda fill matches the cpu's conversions", function()
  need_cuda()
  for _, dt in ipairs(ALL) do
    for _, v in ipairs({0, -1, 1, 7, 300, -2.5, 0.1, 65504, 1e10}) do
      local ok, want = pcall(torch.full, {3, 5}, v, {dtype = dt})
      if ok then same(torch.full({3, 5}, v, {dtype = dt, device = "cuda"}), want, dt .. " full " .. v, 0, 0) end
    end
  end
end)

test("cuda arange and linspace equal the cpu's bits", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int64", "int32"}) do
    same(torch.arange(0, 100, 0.1, {dtype = dt, device = "cuda"}), torch.arange(0, 100, 0.1, {dtype = dt}), dt .. " arange 0.1", 0, 0)
    same(torch.arange(-7, 1000, 3, {dtype = dt, device = "cuda"}), torch.arange(-7, 1000, 3, {dtype = dt}), dt .. " arange int", 0, 0)
    same(torch.linspace(-1, 1, 1001, {dtype = dt, device = "cuda"}), torch.linspace(-1, 1, 1001, {dtype = dt}), dt .. " linspace", 0, 0)
    same(torch.linspace(3, 10, 1, {dtype = dt, device = "cuda"}), torch.linspace(3, 10, 1, {dtype = dt}), dt .. " linspace 1", 0, 0)
    same(torch.linspace(0.1, 0.7, 7, {dtype = dt, device = "cuda"}), torch.linspace(0.1, 0.7, 7, {dtype = dt}), dt .. " linspace 7", 0, 0)
  end
  same(torch.arange(1 << 21, {device = "cuda"}), torch.arange(1 << 21), "large int64 arange", 0, 0)
end)

T.run()
