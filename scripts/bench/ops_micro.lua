-- Micro-benchmarks, the CPU twin of ../shared/peers/ops_micro.py: per-op
-- overhead (a 1-element add), elementwise bandwidth (a 16 Mi-element add),
-- matmul rate (float32, 1024) and softmax over rows (1024 x 1024).
-- Prints one JSON object per case on stdout, with the peer's keys.
-- Run: build/tensh scripts/bench/ops_micro.lua   (threads: OMP_NUM_THREADS)
local clock = torch._clock

-- Median of `iters` timed calls of fn, in milliseconds, after `warmup` calls
-- (the peer's common.time_ms). Garbage from the previous call is collected
-- outside the timed region, as CPython's refcounting frees it immediately.
local function time_ms(fn, warmup, iters)
  for _ = 1, warmup do fn() end
  local times = {}
  for i = 1, iters do
    collectgarbage()
    local t = clock()
    fn()
    times[i] = (clock() - t) * 1e3
  end
  table.sort(times)
  return times[iters // 2 + 1]
end

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
  print("{" .. table.concat(parts, ", ") .. "}")
  io.stdout:flush()
end

local function case(bench, ...)
  local f = {{"bench", bench}, {"impl", "tensh"}, {"device", "cpu"}}
  for _, kv in ipairs({...}) do f[#f + 1] = kv end
  f[#f + 1] = {"version", torch.__version__}
  emit(f)
end

-- 1-element add: what one op costs in the binding, the op layer and the
-- allocator, with no arithmetic to hide it.
do
  local a, b = torch.ones(1), torch.ones(1)
  local n = 1000
  local us = time_ms(function() for _ = 1, n do local _ = a + b end end, 3, 20) * 1e3 / n
  case("op_overhead_add1", {"us_per_op", round(us, 3)})
end

-- Large add: memory bandwidth, counting two reads and one write per element.
do
  local numel = 16 << 20
  local x, y = torch.randn(numel), torch.randn(numel)
  local ms = time_ms(function() local _ = x + y end, 3, 20)
  case("add_bandwidth", {"numel", numel}, {"gb_per_s", round(3 * 4 * numel / ms / 1e6, 1)})
end

-- Matmul and softmax are built on other branches; a case whose op is missing
-- (or not yet working) prints nothing rather than a wrong number.
if torch.matmul then
  local n = 1024
  local p, q = torch.randn(n, n), torch.randn(n, n)
  if pcall(torch.matmul, p, q) then
    local ms = time_ms(function() local _ = torch.matmul(p, q) end, 3, 20)
    case("matmul", {"n", n}, {"dtype", "float32"}, {"tflops", round(2 * n ^ 3 / ms / 1e9, 2)})
  end
end

do
  local rows, cols = 1024, 1024
  local s = torch.randn(rows, cols)
  if s.softmax and pcall(s.softmax, s, -1) then
    local ms = time_ms(function() local _ = s:softmax(-1) end, 3, 20)
    case("softmax_rows", {"shape", {rows, cols}}, {"gb_per_s", round(2 * 4 * rows * cols / ms / 1e6, 1)})
  end
end
