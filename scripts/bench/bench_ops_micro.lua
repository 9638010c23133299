-- Micro-benchmarks, the twin of scripts/bench/twins/ops_micro.py: per-op overhead
-- (1000 1-element adds per run), elementwise bandwidth (an add of 16 Mi
-- elements, 64 Mi on a GPU), matmul (float32 at 1024; on a GPU float32, tf32
-- and bfloat16 at 4096) and softmax and log_softmax over rows (1024 x 1024;
-- 8192 x 4096).
-- Each run does what one call of the twin's timed function does.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()
local on_gpu = dev:sub(1, 4) == "cuda"

-- what one op costs in the binding, the op layer and the allocator, with no
-- arithmetic to hide it
bench.case("op_overhead_add1", function(c)
  local a, b = c.a, c.b
  for _ = 1, 1000 do local _ = a + b end
end, {device = dev, setup = function()
  return {a = torch.ones(1, {device = dev}), b = torch.ones(1, {device = dev})}
end})

bench.case("add_bandwidth", function(c) local _ = c.x + c.y end, {device = dev, setup = function()
  local numel = on_gpu and (64 << 20) or (16 << 20)
  return {x = torch.randn(numel, {device = dev}), y = torch.randn(numel, {device = dev})}
end})

bench.case("matmul", function(c) local _ = torch.matmul(c.p, c.q) end, {device = dev,
  params = {dtype = on_gpu and {"float32", "tf32", "bfloat16"} or {"float32"}},
  setup = function(p)
    torch.set_float32_matmul_precision(p.dtype == "tf32" and "high" or "highest")
    local dt = p.dtype == "tf32" and "float32" or p.dtype
    local n = on_gpu and 4096 or 1024
    return {p = torch.randn(n, n, {device = dev, dtype = dt}), q = torch.randn(n, n, {device = dev, dtype = dt})}
  end})

local function rows_setup()
  torch.set_float32_matmul_precision("highest")
  local rows, cols = 1024, 1024
  if on_gpu then rows, cols = 8192, 4096 end
  return {s = torch.randn(rows, cols, {device = dev})}
end
bench.case("softmax_rows", function(c) local _ = c.s:softmax(-1) end, {device = dev, setup = rows_setup})
bench.case("log_softmax_rows", function(c) local _ = c.s:log_softmax(-1) end, {device = dev, setup = rows_setup})

-- the backward of attention at the Transformer benchmark's sizes (batch 16, 4
-- heads, 256 positions, head width 64): tensh's fused scaled_dot_product_attention
-- against PyTorch 1.13's composed softmax(q k^T / 8) v (it has no fused CPU op);
-- a run is one torch.autograd.grad through the graph kept by retain_graph
bench.case("attention_backward", function(c)
  local _ = torch.autograd.grad({c.o}, c.inputs, {grad_outputs = {c.g}, retain_graph = true})
end, {device = dev, setup = function()
  torch.manual_seed(0)
  local function leaf() return torch.randn(16, 4, 256, 64, {device = dev, requires_grad = true}) end
  local q, k, v = leaf(), leaf(), leaf()
  return {o = nn.functional.scaled_dot_product_attention(q, k, v), inputs = {q, k, v},
    g = torch.randn(16, 4, 256, 64, {device = dev})}
end})
