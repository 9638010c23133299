-- CUDA matrix products (the BMM kernel: cuBLAS / cuBLASLt, the tiled integer
-- kernel) against the CPU on the same inputs: every dtype, transposed,
-- stepped (cuBLAS cannot read them: packed first), broadcast batches, empty
-- dims, batches past one cuBLAS call, large products, addmm's alpha/beta,
-- TF32, integer wrapping, and the error paths. Runs only with a GPU.
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

local FLOATS = {"float32", "float64", "float16", "bfloat16"}
local INTS = {"int64", "int32", "int16", "int8", "uint8"}
-- rtol = atol per dtype: float32 in full precision, the half types round once
local TOL = {float32 = 1e-5, float64 = 1e-12, float16 = 1e-2, bfloat16 = 2e-2, int64 = 0, int32 = 0, int16 = 0, int8 = 0, uint8 = 0}

-- A CPU tensor of dtype dt and shape s: normal values for floats (rounded to
-- the dtype first, so both devices see the same inputs), integers in a range
-- whose products wrap for the small types.
local function make(dt, s)
  if dt == "int64" then return torch.randint(-1099511627776, 1099511627776, s) end -- 2^40: products wrap
  if dt == "int32" then return torch.randint(-100000, 100000, s):to("int32") end
  if dt == "uint8" then return torch.randint(0, 256, s):to("uint8") end
  if dt == "int16" then return torch.randint(-32768, 32768, s):to("int16") end
  if dt == "int8" then return torch.randint(-128, 128, s):to("int8") end
  return torch.randn(s):to(dt)
end

-- Runs f on the CPU tensors and on their CUDA copies (views are rebuilt by
-- f itself from the moved bases) and compares.
local function same(what, dt, f, ...)
  local cpu = {...}
  local gpu = {}
  for i, t in ipairs(cpu) do gpu[i] = t:cuda() end
  local want = f(table.unpack(cpu))
  local got = f(table.unpack(gpu))
  eq(got.is_cuda, true, what .. ": result on cuda")
  eq(got.dtype, want.dtype, what .. ": dtype")
  eq(tostring(got.shape), tostring(want.shape), what .. ": shape")
  local r = TOL[dt]
  -- sums of K products: the absolute error scales with sqrt(K) for the floats
  close(got:cpu():double(), want:double(), r, r * 4, what)
end

-- max |got - want| - rtol*|want| <= atol, computed with tensor ops (large results)
local function close_big(got, want, rtol, atol, what)
  local g, w = got:cpu():double(), want:double()
  local worst = ((g - w):abs() - w:abs() * rtol):max():item()
  T.ok(worst <= atol, ("%s: max error past the tolerance by %g (rtol %g, atol %g)"):format(what, worst, rtol, atol))
end

test("mm, matmul, bmm, mv, dot: every dtype against the CPU", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8"}) do
    local a, b = make(dt, {37, 53}), make(dt, {53, 29})
    same(dt .. " mm", dt, function(x, y) return torch.mm(x, y) end, a, b)
    same(dt .. " matmul", dt, function(x, y) return x:matmul(y) end, a, b)
    local ba, bb = make(dt, {5, 17, 9}), make(dt, {5, 9, 13})
    same(dt .. " bmm", dt, function(x, y) return torch.bmm(x, y) end, ba, bb)
    local v = make(dt, {53})
    same(dt .. " mv", dt, function(x, y) return torch.mv(x, y) end, a, v)
    same(dt .. " dot", dt, function(x, y) return torch.dot(x, y) end, v, v)
    -- (batch..., M, K) @ (K, N): the linear layer's fold into one GEMM
    same(dt .. " folded", dt, function(x, y) return x:matmul(y) end, make(dt, {3, 4, 53}), b)
  end
end)

test("transposed operands go to cuBLAS through its trans flags", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int64"}) do
    local a, b = make(dt, {23, 31}), make(dt, {19, 23})
    same(dt .. " a:t() @ b:t()", dt, function(x, y) return x:t():mm(y:t()) end, a, b)
    same(dt .. " a:t() @ a", dt, function(x) return x:t():mm(x) end, a)
    same(dt .. " a @ a:t()", dt, function(x) return x:mm(x:t()) end, a)
    local ba, bb = make(dt, {3, 11, 7}), make(dt, {3, 11, 5})
    same(dt .. " bmm of transposed", dt, function(x, y) return torch.bmm(x:transpose(1, 2), y) end, ba, bb)
    same(dt .. " bmm both transposed", dt, function(x, y) return torch.bmm(x:transpose(1, 2), y:transpose(1, 2)) end,
         ba, make(dt, {3, 6, 11}))
  end
end)

test("stepped and expanded operands: packed for cuBLAS, read in place by the tiled kernel", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int32"}) do
    local big = make(dt, {16, 20})
    -- no unit stride in either matrix dim: the half types reach the kernel like this
    same(dt .. " both dims stepped", dt, function(x) return x[{{0, 16, 2}, {0, 20, 2}}]:mm(x[{{1, 16, 2}, {1, 20, 2}}]:t()) end,
         big)
    same(dt .. " rows stepped", dt, function(x, w) return x[{{0, 16, 2}}]:matmul(w) end, big, make(dt, {20, 3}))
    same(dt .. " columns stepped", dt, function(x) local c = x[{{}, {0, 20, 2}}] return c:t():matmul(c) end, big)
    same(dt .. " expanded rows", dt, function(r, w) return r:expand(6, 20):matmul(w) end, make(dt, {1, 20}), make(dt, {20, 4}))
    -- a batch of one matrix against a batch of 5 (batch stride 0), and (2,1,..) @ (5,..)
    same(dt .. " broadcast batch", dt, function(x, y) return torch.matmul(x, y) end, make(dt, {1, 6, 7}), make(dt, {5, 7, 3}))
    same(dt .. " broadcast batch dims", dt, function(x, y) return torch.matmul(x, y) end, make(dt, {2, 1, 3, 4}),
         make(dt, {5, 4, 6}))
    same(dt .. " expanded batch, stepped", dt, function(x, y) return torch.matmul(x[{{}, {0, 8, 2}, {0, 10, 2}}]:expand(4, 4, 5), y) end,
         make(dt, {1, 8, 10}), make(dt, {4, 5, 3}))
  end
end)

test("empty dims: K = 0 gives zeros, M, N or batch 0 give empty results", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float16", "int64"}) do
    local z = torch.mm(torch.zeros({3, 0}, {dtype = dt}):cuda(), torch.zeros({0, 4}, {dtype = dt}):cuda())
    eq(tostring(z.shape), "torch.Size([3, 4])", dt .. " K = 0 shape")
    close(z:cpu():double(), torch.zeros({3, 4}, {dtype = "float64"}), 0, 0, dt .. " K = 0 is zeros")
    same(dt .. " M = 0", dt, function(x, y) return torch.mm(x, y) end, make(dt, {0, 5}), make(dt, {5, 4}))
    same(dt .. " N = 0", dt, function(x, y) return torch.mm(x, y) end, make(dt, {3, 5}), make(dt, {5, 0}))
    same(dt .. " batch 0", dt, function(x, y) return torch.bmm(x, y) end, make(dt, {0, 3, 5}), make(dt, {0, 5, 2}))
    same(dt .. " dot of empty", dt, function(x, y) return torch.dot(x, y) end, make(dt, {0}), make(dt, {0}))
  end
end)

test("addmm: alpha, beta, beta 0 ignores NaN in the bias, K = 0", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float64", "float16", "int64"}) do
    local bias, a, b = make(dt, {6, 5}), make(dt, {6, 7}), make(dt, {7, 5})
    for _, ab in ipairs({{1, 1}, {0.5, 2}, {0, 3}, {-1, 1}, {2, 0}}) do
      local beta, alpha = ab[1], ab[2]
      if dt ~= "int64" or (beta == math.floor(beta) and alpha == math.floor(alpha)) then
        same(("%s addmm beta %g alpha %g"):format(dt, beta, alpha), dt,
             function(c, x, y) return torch.addmm(c, x, y, {beta = beta, alpha = alpha}) end, bias, a, b)
      end
    end
    same(dt .. " addmm broadcast bias", dt, function(c, x, y) return torch.addmm(c, x, y, {beta = 2}) end,
         make(dt, {5}), a, b)
    same(dt .. " addmm K = 0", dt, function(c, x, y) return torch.addmm(c, x, y, {beta = 3, alpha = 2}) end, bias,
         make(dt, {6, 0}), make(dt, {0, 5}))
  end
  local nanb = torch.full({4, 3}, 0 / 0):cuda()
  local r = torch.addmm(nanb, torch.ones(4, 2):cuda(), torch.ones(2, 3):cuda(), {beta = 0})
  close(r:cpu(), torch.full({4, 3}, 2), 0, 0, "beta 0: NaN in the bias does not leak")
end)

test("integer products wrap as on the CPU (uint8, int32, int64)", function()
  need_cuda()
  for _, dt in ipairs(INTS) do
    same(dt .. " wrapping mm", dt, function(x, y) return x:mm(y) end, make(dt, {40, 70}), make(dt, {70, 33}))
    same(dt .. " wrapping bmm", dt, function(x, y) return torch.bmm(x, y) end, make(dt, {3, 20, 40}), make(dt, {3, 40, 17}))
  end
  local big = torch.tensor({{4611686018427387904, 3}}):cuda() -- 2^62
  local r = big:mm(torch.tensor({{4}, {1}}):cuda())
  eq(r:cpu():tolist()[1][1], 3, "2^62 * 4 wraps to 0, plus 3")
end)

test("batches past one cuBLAS call (more than 65535 entries)", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float16", "bfloat16"}) do
    same(dt .. " 70000 small products", dt, function(x, y) return torch.bmm(x, y) end, make(dt, {70000, 2, 3}),
         make(dt, {70000, 3, 2}))
    same(dt .. " 70000 broadcast", dt, function(x, y) return torch.matmul(x, y) end, make(dt, {1, 2, 3}),
         make(dt, {70000, 3, 2}))
  end
end)

test("large products (over 2^20 results) match the CPU", function()
  need_cuda()
  local a, b = torch.randn({1100, 700}), torch.randn({700, 1000})
  close_big(a:cuda():mm(b:cuda()), a:mm(b), 1e-4, 1e-3, "float32 1100x700 @ 700x1000")
  local ad, bd = a:double(), b:double()
  close_big(ad:cuda():mm(bd:cuda()), ad:mm(bd), 1e-12, 1e-10, "float64")
  for _, dt in ipairs({"float16", "bfloat16"}) do
    local ah, bh = a:to(dt), b:to(dt)
    close_big(ah:cuda():mm(bh:cuda()), ah:float():mm(bh:float()), 2e-2, 0.3, dt .. " vs float32 on the CPU")
  end
  local ia, ib = torch.randint(-50, 50, {300, 400}), torch.randint(-50, 50, {400, 3600})
  close_big(ia:cuda():mm(ib:cuda()), ia:mm(ib), 0, 0, "int64 300x400 @ 400x3600")
end)

test("float32 matmul precision: TF32 when allowed, full float32 by default", function()
  need_cuda()
  if not torch.set_float32_matmul_precision then T.skip("torch.set_float32_matmul_precision is not bound yet") end
  local a, b = torch.randn({256, 512}), torch.randn({512, 128})
  local want = a:double():mm(b:double())
  torch.set_float32_matmul_precision("high")
  local ok, err = pcall(function() close_big(a:cuda():mm(b:cuda()), want, 1e-2, 0.1, "tf32") end)
  torch.set_float32_matmul_precision("highest")
  if not ok then error(err, 0) end
  close_big(a:cuda():mm(b:cuda()), want, 1e-4, 1e-4, "highest")
end)

test("errors are the CPU's: bool, mixed dtypes, mixed devices, shapes", function()
  need_cuda()
  local a = torch.ones(2, 3):cuda()
  raises(function() torch.mm(a:to("bool"), a:t():to("bool")) end, "mm is not implemented for bool tensors")
  raises(function() torch.mm(a, a:t():double()) end, "mm: expected both operands to have the same dtype")
  raises(function() torch.mm(a, torch.ones(3, 2)) end, "mm: expected all tensors on the same device")
  raises(function() torch.mm(a, a) end, "mm: shapes (2, 3) and (2, 3) cannot be multiplied")
end)

T.run()
