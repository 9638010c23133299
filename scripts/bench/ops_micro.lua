-- Micro-benchmarks, the twin of ../shared/peers/ops_micro.py: per-op
-- overhead (a 1-element add), elementwise bandwidth (an add of 16 Mi
-- elements, 64 Mi on a GPU), matmul rate (float32 at 1024; on a GPU float32,
-- tf32 and bfloat16 at 4096) and softmax over rows (1024 x 1024; 8192 x 4096).
-- Prints one JSON object per case on stdout, with the peer's keys.
-- Run: build/tensh scripts/bench/ops_micro.lua [--device cpu|cuda]
-- (default: cuda when available, as the peer; threads: OMP_NUM_THREADS)
local bench = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local dev = bench.device(arg)
local on_gpu = dev:sub(1, 4) == "cuda"
local function time_ms(fn, warmup, iters) return bench.time_ms(fn, warmup, iters, dev) end

local function round(x, digits)
  local m = 10 ^ digits
  return math.floor(x * m + 0.5) / m
end

-- A flat JSON object; keys in the given order so lines read alike.
local function emit(fields)
  local parts = {}
  for _, kv in ipairs(fields) do
    local k, v = kv[1], kv[2]
    local s
    if type(v) == "string" then s = string.format("%q", v)
    elseif type(v) == "table" then s = "[" .. table.concat(v, ", ") .. "]"
    elseif math.type(v) == "integer" then s = tostring(v)
    else s = string.format("%.14g", v) end
    parts[#parts + 1] = string.format("%q: %s", k, s)
  end
  parts[#parts + 1] = bench.run_fields()
  print("{" .. table.concat(parts, ", ") .. "}")
  io.stdout:flush()
end

local function case(bench, ...)
  local f = {{"bench", bench}, {"impl", "tensh"}, {"device", dev}}
  for _, kv in ipairs({...}) do f[#f + 1] = kv end
  f[#f + 1] = {"version", torch.__version__}
  emit(f)
end

-- 1-element add: what one op costs in the binding, the op layer and the
-- allocator, with no arithmetic to hide it.
do
  local a, b = torch.ones(1, {device = dev}), torch.ones(1, {device = dev})
  local n = 1000
  local us = time_ms(function() for _ = 1, n do local _ = a + b end end, 3, 20) * 1e3 / n
  case("op_overhead_add1", {"us_per_op", round(us, 3)})
end

-- Large add: memory bandwidth, counting two reads and one write per element.
do
  local numel = on_gpu and (64 << 20) or (16 << 20)
  local x, y = torch.randn(numel, {device = dev}), torch.randn(numel, {device = dev})
  local ms = time_ms(function() local _ = x + y end, 3, 20)
  case("add_bandwidth", {"numel", numel}, {"gb_per_s", round(3 * 4 * numel / ms / 1e6, 1)})
end

for _, dtype in ipairs(on_gpu and {"float32", "tf32", "bfloat16"} or {"float32"}) do
  local tf32 = dtype == "tf32"
  torch.set_float32_matmul_precision(tf32 and "high" or "highest")
  local dt = tf32 and "float32" or dtype
  local n = on_gpu and 4096 or 1024
  local p, q = torch.randn(n, n, {device = dev, dtype = dt}), torch.randn(n, n, {device = dev, dtype = dt})
  local ms = time_ms(function() local _ = torch.matmul(p, q) end, 3, 20)
  case("matmul", {"n", n}, {"dtype", dtype}, {"tflops", round(2 * n ^ 3 / ms / 1e9, 2)})
end
torch.set_float32_matmul_precision("highest")

do
  local rows, cols = 1024, 1024
  if on_gpu then rows, cols = 8192, 4096 end
  local s = torch.randn(rows, cols, {device = dev})
  local ms = time_ms(function() local _ = s:softmax(-1) end, 3, 20)
  case("softmax_rows", {"shape", {rows, cols}}, {"gb_per_s", round(2 * 4 * rows * cols / ms / 1e6, 1)})
end
