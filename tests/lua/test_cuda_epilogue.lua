-- A Linear layer's GEMMs with cuBLASLt's epilogues on CUDA (the simulated
-- device emulates them): the forward's bias added by the GEMM
-- (CUBLASLT_EPILOGUE_BIAS, the op gemm_bias: one launch, no bias copy), and
-- the backward's weight and bias gradients from one GEMM (BGRADB / BGRADA,
-- gemm_bgrad: no reduction of its own). Values against the CPU in float64 on
-- fresh random inputs of odd sizes, transposed and stepped operands, the half
-- types under autocast, TF32; the launches counted; where cuBLASLt declines
-- (float64, a bias that broadcasts, a stepped operand, TENSH_SIM_LT_DECLINE=1)
-- the composed path gives the same values. Runs only with a CUDA device.
local T = require "harness"
local test, close, eq, ok = T.test, T.close, T.eq, T.ok

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

-- a CPU tensor of normal values: shape as a table or as sizes
local function cpu_randn(...)
  local s = {...}
  if type(s[1]) == "table" then s = s[1] end
  return torch.randn(s, {device = "cpu"})
end

-- launches of fn on the current device, fn's results
local function launches(fn)
  cuda.synchronize()
  local l0 = cuda.launch_count()
  local r = table.pack(fn())
  return cuda.launch_count() - l0, table.unpack(r, 1, r.n)
end

-- rtol = atol by dtype: float32 sums of K products, the half types round each input and the result
local TOL = {float32 = 2e-5, float16 = 2e-2, bfloat16 = 6e-2}

-- F.linear on CUDA against float64 on the CPU from the same inputs (rounded to dt first):
-- the output and the gradients of x, weight and bias. shape: x's.
local function check_linear(what, dt, shape, nout, prepare)
  local nin = shape[#shape]
  local x0, w0, b0 = cpu_randn(shape):to(dt), cpu_randn(nout, nin):to(dt), cpu_randn(nout):to(dt)
  local gs = {table.unpack(shape)}
  gs[#gs] = nout
  local g0 = cpu_randn(gs):to(dt)
  local function run(dev, cast)
    local x = x0:to(dev):to(cast):requires_grad_()
    local w = w0:to(dev):to(cast):requires_grad_()
    local b = b0:to(dev):to(cast):requires_grad_()
    local xin, win = x, w
    if prepare then xin, win = prepare(x, w) end
    local y = nn.functional.linear(xin, win, b)
    y:backward(g0:to(dev):to(cast))
    return y, x.grad, w.grad, b.grad
  end
  local want = table.pack(run("cpu", "float64"))
  local got = table.pack(run("cuda", dt))
  local r = TOL[dt]
  for i, name in ipairs({"output", "x's gradient", "weight's gradient", "bias's gradient"}) do
    eq(got[i].dtype, torch[dt], what .. ": " .. name .. "'s dtype")
    -- the bias gradient sums a column of g: its error grows with the rows, as a product's with K
    close(got[i]:cpu():double(), want[i], r, r * 8, what .. ": " .. name)
  end
end

test("Linear on cuda: output and gradients against float64 on the CPU, odd sizes, float32 and the half types", function()
  need_cuda()
  torch.manual_seed(231)
  for _, dt in ipairs({"float32", "float16", "bfloat16"}) do
    check_linear(dt .. " (37, 19) -> 23", dt, {37, 19}, 23)
    check_linear(dt .. " (3, 5, 7) -> 11", dt, {3, 5, 7}, 11) -- rows of a sequence, folded into one GEMM
    check_linear(dt .. " one row", dt, {1, 9}, 6)
    check_linear(dt .. " one output", dt, {8, 9}, 1)
  end
end)

test("Linear on cuda with non-contiguous inputs: transposed, sliced, stepped", function()
  need_cuda()
  torch.manual_seed(232)
  -- x as the transpose of a contiguous (in, rows) matrix, and a weight already transposed once
  check_linear("x transposed", "float32", {13, 17}, 10, function(x, w)
    return x:t():contiguous():t(), w:t():contiguous():t()
  end)
  -- a column slice: rows start 2 floats apart from their neighbours' ends (still one BLAS layout)
  check_linear("x a slice of a wider matrix", "float32", {13, 17}, 10, function(x, w)
    return torch.cat({x, x[{{}, {0, 3}}]}, 1)[{{}, {0, 17}}], w
  end)
  -- a stepped x no BLAS reads: cuBLASLt declines, the composed path packs it
  check_linear("x stepped", "float32", {13, 17}, 10, function(x, w)
    return torch.stack({x, x}, 2):view(13, 34)[{{}, {0, 34, 2}}], w
  end)
  check_linear("x stepped, float16", "float16", {13, 17}, 10, function(x, w)
    return torch.stack({x, x}, 2):view(13, 34)[{{}, {0, 34, 2}}], w
  end)
  -- operands one element past an aligned address: the preference says so, cuBLASLt still takes them
  check_linear("x and weight one element off alignment, float16", "float16", {13, 17}, 10, function(x, w)
    local function off_by_one(t) -- t's values, one element past the start of a new buffer
      local flat = t:reshape(-1)
      return torch.cat({flat[{{0, 1}}], flat})[{{1, flat:numel() + 1}}]:view(t.shape)
    end
    return off_by_one(x), off_by_one(w)
  end)
end)

test("the forward is one launch with the bias in the GEMM's epilogue; the backward two GEMMs", function()
  need_cuda()
  torch.manual_seed(233)
  for _, dt in ipairs({"float32", "float16", "bfloat16"}) do
    local lin = nn.Linear(19, 23):cuda():to(dt)
    local x = cpu_randn(37, 19):cuda():to(dt)
    local n, y = launches(function() return lin(x) end)
    eq(n, 1, dt .. ": forward launches")
    local nb = launches(function() y:backward(torch.ones_like(y)) end)
    -- the ones_like is a fill; x's gradient (not wanted: x is no leaf that requires it) is not computed
    eq(nb, 2, dt .. ": backward launches (the ones, weight and bias gradients in one GEMM)")
    close(lin.bias.grad:cpu():double(), torch.full({23}, 37.0), 0, 0, dt .. ": the bias gradient sums 37 ones")
    -- no launch for the bias in the profiler's view either: one gemm_bias, no copy
    local prof = torch.profiler.profile({activities = {"cpu", "cuda"}}, function() return lin(x) end)
    local rows = {}
    for _, r in ipairs(prof:key_averages().rows) do rows[r.key] = r end
    eq(rows.gemm_bias and rows.gemm_bias.launches, 1, dt .. ": gemm_bias ran once")
    eq(rows.copy, nil, dt .. ": no copy of the bias")
  end
end)

test("addmm on cuda: alpha in the epilogue; beta, broadcast and 2-D biases take the composed path", function()
  need_cuda()
  torch.manual_seed(234)
  local a, b = cpu_randn(11, 7), cpu_randn(7, 5)
  local function both(bias, o)
    local want = torch.addmm(bias:double(), a:double(), b:double(), o)
    local n, got = launches(function() return torch.addmm(bias:cuda(), a:cuda(), b:cuda(), o) end)
    close(got:cpu():double(), want, 1e-5, 1e-5, "addmm " .. T.fmt(o))
    return n
  end
  local v = cpu_randn(5)
  eq(both(v, {alpha = 2.5}), 1, "alpha 2.5: one launch (the copies to the device are no launches)")
  both(v, {beta = 0.5})
  both(v, {beta = 0})
  both(cpu_randn(1), {})      -- a bias of one element broadcasts along the rows too
  both(cpu_randn(11, 5), {})  -- a full matrix
  both(cpu_randn(11, 1), {})
  -- K = 0: the bias alone; an empty M: an empty result
  local e = torch.addmm(v:cuda(), torch.empty(11, 0, {device = "cuda"}), torch.empty(0, 5, {device = "cuda"}))
  close(e:cpu(), v:expand(11, 5), 0, 0, "K = 0")
  eq(tostring(torch.addmm(v:cuda(), torch.empty(0, 7, {device = "cuda"}), b:cuda()).shape), "torch.Size([0, 5])", "M = 0")
end)

test("float64 and TF32: float64 keeps cuBLAS with the bias copied; TF32 rounds the inputs, not the bias", function()
  need_cuda()
  torch.manual_seed(235)
  local lin = nn.Linear(64, 9):cuda():double()
  local x = cpu_randn(33, 64):double():cuda()
  local n, y = launches(function() return lin(x) end)
  eq(n, 2, "float64: the bias copy and the GEMM")
  close(y:cpu(), nn.functional.linear(x:cpu(), lin.weight:cpu(), lin.bias:cpu()), 1e-12, 1e-12, "float64 values")
  local l32 = nn.Linear(64, 9):cuda()
  local x32 = x:float()
  torch.set_float32_matmul_precision("high")
  local ok_, err = pcall(function()
    local got = l32(x32):cpu():double()
    local want = nn.functional.linear(x32:cpu():double(), l32.weight:cpu():double(), l32.bias:cpu():double())
    close(got, want, 5e-3, 5e-3, "TF32 within its 10-bit mantissa")
    local exact = ((got - want):abs():max():item())
    ok(exact > 1e-6, "TF32 rounded the inputs (max difference " .. exact .. ")")
  end)
  torch.set_float32_matmul_precision("highest")
  if not ok_ then error(err, 0) end
end)

test("autocast: a float32 Linear runs in float16 / bfloat16 with the bias in the epilogue", function()
  need_cuda()
  torch.manual_seed(236)
  local lin = nn.Linear(21, 13):cuda()
  local x = cpu_randn(15, 21):cuda()
  for _, dt in ipairs({"float16", "bfloat16"}) do
    local y, n
    do
      local _ <close> = torch.autocast("cuda", {dtype = torch[dt]})
      n, y = launches(function() return lin(x) end)
    end
    eq(y.dtype, torch[dt], dt .. ": the output's dtype")
    -- three casts (x, weight, bias) and the GEMM with its bias
    eq(n, 4, dt .. ": launches")
    local want = nn.functional.linear(x:cpu():to(dt):double(), lin.weight:cpu():to(dt):double(),
      lin.bias:cpu():to(dt):double())
    close(y:cpu():double(), want, TOL[dt], TOL[dt] * 4, dt .. ": values")
    lin:zero_grad()
    y:float():sum():backward()
    eq(lin.bias.grad.dtype, torch.float32, dt .. ": the bias's gradient back in float32")
    close(lin.bias.grad:cpu(), torch.full({13}, 15.0), 0, 0, dt .. ": the bias gradient sums 15 ones")
  end
end)

test("TENSH_SIM_LT_DECLINE=1: cuBLASLt declines, the bias is copied and summed as before, same values", function()
  need_cuda()
  if not os.getenv("TENSH_SIM_DEVICES") then T.skip("TENSH_SIM_LT_DECLINE is the simulated device's switch") end
  local exe = (os.getenv("TENSH_BUILD") or "../../build") .. "/tensh"
  local code = [[
    torch.manual_seed(5)
    local lin = nn.Linear(19, 23):cuda()
    local x = torch.randn(37, 19, {device = "cpu"}):cuda()
    cuda.synchronize()
    local l0 = cuda.launch_count()
    local y = lin(x)
    local l1 = cuda.launch_count()
    y:backward(torch.ones_like(y))
    local l2 = cuda.launch_count()
    print(("launches %d %d"):format(l1 - l0, l2 - l1))
    print(("sums %.6f %.6f"):format(y:sum():item(), lin.weight.grad:sum():item() + lin.bias.grad:sum():item()))
  ]]
  local function run(env)
    local p = assert(io.popen(("%s %q -e %q 2>&1"):format(env, exe, code)))
    local out = p:read("a")
    p:close()
    return out
  end
  local fused, declined = run(""), run("TENSH_SIM_LT_DECLINE=1")
  ok(fused:find("launches 1 2", 1, true), "with cuBLASLt's epilogues: " .. fused)
  ok(declined:find("launches 2 3", 1, true), "declined: a copy and a GEMM, two GEMMs and a sum: " .. declined)
  local s1, s2 = fused:match("sums (%S+ %S+)"), declined:match("sums (%S+ %S+)")
  ok(s1 and s1 == s2, ("the same sums either way: %s vs %s"):format(tostring(s1), tostring(s2)))
end)

T.run()
