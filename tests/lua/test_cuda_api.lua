-- The cuda table and device moves (without a GPU: test_cuda_nogpu.lua): on a
-- GPU, devices, transfers, the caching
-- allocator's numbers, out-of-memory recovery, streams and events.
local T = require("harness")
local test, eq, ok, raises, close = T.test, T.eq, T.ok, T.raises, T.close

local function gpu() return cuda and cuda.is_available() end
local function need_gpu() if not gpu() then T.skip("no CUDA device") end end

test("cuda.manual_seed seeds the one generator every device draws from", function()
  cuda.manual_seed(7)
  local a = torch.rand(4):tolist()
  torch.manual_seed(7)
  close(torch.rand(4), a, 0, 0, "same values as torch.manual_seed")
  cuda.manual_seed_all(7)
  close(torch.rand(4), a, 0, 0, "manual_seed_all")
  if gpu() then
    cuda.manual_seed(7)
    close(torch.rand(4, {device = "cuda"}), a, 0, 0, "the GPU draws the same values")
  end
end)

test("float32 matmul precision setting", function()
  eq(torch.get_float32_matmul_precision(), "highest", "default")
  torch.set_float32_matmul_precision("high")
  eq(torch.get_float32_matmul_precision(), "high", "set")
  torch.set_float32_matmul_precision("highest")
  raises(function() torch.set_float32_matmul_precision("fast") end, "invalid option 'fast'")
end)

test("devices: names, properties, ordinals, scopes", function()
  need_gpu()
  local n = cuda.device_count()
  ok(n >= 1, "device_count")
  eq(cuda.current_device(), 0, "device 0 first")
  local p = cuda.get_device_properties(0)
  ok(p.total_memory > 0 and p.major >= 1 and p.multi_processor_count > 0 and p.L2_cache_size > 0, "properties")
  ok(p.uuid:match("^GPU%-"), "uuid")
  eq(cuda.get_device_name(0), p.name, "name")
  ok(tostring(p):match("^_CudaDeviceProperties%(name="), "properties print")
  raises(function() cuda.set_device(n) end, "invalid device ordinal")
  raises(function() torch.zeros(1, {device = "cuda:" .. n}) end, "invalid device ordinal cuda:" .. n)
  local free, total = cuda.mem_get_info()
  ok(free > 0 and total >= free, "mem_get_info")
  do
    local _ <close> = cuda.device(n - 1)
    eq(cuda.current_device(), n - 1, "inside the scope")
    eq(torch.zeros(1, {device = "cuda"}).device.index, n - 1, "'cuda' is the current device")
  end
  eq(cuda.current_device(), 0, "restored after the scope")
  eq(cuda.device(n - 1, function() return cuda.current_device() end), n - 1, "function form")
  eq(cuda.current_device(), 0, "restored after the function")
  ok(type(cuda.version) == "string", "cuda.version")
end)

test("transfers: both ways, casts, strides, non_blocking, pinned memory", function()
  need_gpu()
  local x = torch.randn(64, 33)
  local g = x:cuda()
  local lit = torch.tensor({{1, 2}, {3, 4}}, {device = "cuda", dtype = "float64"})
  ok(lit.is_cuda and lit.dtype == torch.float64, "torch.tensor with a device lands there")
  close(lit, {{1, 2}, {3, 4}}, 0, 0, "its values")
  ok(g.is_cuda and g:get_device() == 0 and tostring(g.device) == "cuda:0", "on cuda:0")
  close(g, x, 0, 0, "round trip")
  close(x:t():cuda(), x:t(), 0, 0, "non-contiguous source")
  close(x:to("cuda", "float64"):cpu(), x, 0, 0, "cast with the move")
  close(g:sum():item(), x:sum():item(), 1e-4, 1e-4, "item of a CUDA tensor")
  local p = x:pin_memory()
  ok(p:is_pinned() and not x:is_pinned(), "pinned copy")
  local a = p:to("cuda", {non_blocking = true})
  local back = a:to("cpu", {non_blocking = true})
  ok(back:is_pinned(), "a non-blocking copy to the host lands in pinned memory")
  close(back, x, 0, 0, "read after it landed")
  local dst = torch.zeros(64, 33, {device = "cuda"})
  dst:copy_(x)
  close(dst, x, 0, 0, "copy_ across devices")
  local col = torch.zeros(64, 1)
  col:copy_(g[{{}, {0, 1}}])
  close(col, x[{{}, {0, 1}}], 0, 0, "copy_ of a strided CUDA view to the host")
  raises(function() return g + x end, "expected all tensors on the same device, got cuda:0 and cpu")
  close(g + torch.tensor(2.0), x + 2, 0, 0, "a 0-dim CPU tensor is a scalar")
  raises(function() torch.gather(x, 0, torch.zeros(1, 33, {dtype = "int64", device = "cuda"})) end, "same device")
end)

test("autograd across devices: the gradient comes back to the CPU leaf", function()
  need_gpu()
  local w = torch.randn(5, {requires_grad = true})
  local y = (w:cuda() * 3):sum()
  y:backward()
  eq(w.grad.device.type, "cpu", "grad on the leaf's device")
  close(w.grad, {3, 3, 3, 3, 3}, 0, 0)
end)

test("caching allocator: allocated, reserved, peaks, stats, summary, empty_cache", function()
  need_gpu()
  collectgarbage()
  cuda.empty_cache()
  cuda.reset_peak_memory_stats()
  local base = cuda.memory_allocated()
  local t = torch.empty(1000, {device = "cuda"}) -- 4000 bytes round to 4096
  eq(cuda.memory_allocated() - base, 4096, "rounded to 512")
  ok(cuda.memory_reserved() >= cuda.memory_allocated(), "reserved >= allocated")
  t = nil
  collectgarbage()
  eq(cuda.memory_allocated(), base, "freed when collected")
  eq(cuda.max_memory_allocated() - base, 4096, "peak kept")
  local s = cuda.memory_stats()
  for _, k in ipairs({"allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                      "active_bytes.large_pool.peak", "num_alloc_retries", "num_ooms", "allocation.all.allocated"}) do
    ok(math.type(s[k]) == "integer", "memory_stats key " .. k)
  end
  ok(cuda.memory_summary():find("Allocated memory", 1, true), "summary table")
  cuda.empty_cache()
  ok(cuda.memory_reserved() <= cuda.memory_allocated() + (2 << 20), "empty_cache releases free segments")
end)

test("a loop that drops GPU tensors runs at flat device memory", function()
  need_gpu()
  collectgarbage()
  local x = torch.randn(1 << 18, {device = "cuda"}) -- 1 MiB
  local before = cuda.memory_reserved()
  for _ = 1, 20000 do local _ = x * 2 + 1 end
  ok(cuda.memory_reserved() <= before + (64 << 20), "reserved stays flat: " .. cuda.memory_reserved() - before)
end)

test("out of memory: a clear error, the memory usable again", function()
  need_gpu()
  local _, total = cuda.mem_get_info()
  local huge = math.floor(total / 4 * 2) -- elements of float32: twice the device
  raises(function() torch.empty(huge, {device = "cuda"}) end, "CUDA out of memory: tried to allocate")
  local y = torch.ones(1000, {device = "cuda"})
  eq(y:sum():item(), 1000, "session goes on")
  -- tensors Lua has dropped are collected before the error: a half-size block fits again and again
  local half = math.floor(total / 4 * 0.4)
  for _ = 1, 3 do local _ = torch.empty(half, {device = "cuda"}) end
  ok(cuda.memory_stats()["num_ooms"] >= 1, "counted")
end)

test("streams and events", function()
  need_gpu()
  local s = cuda.Stream()
  ok(s ~= cuda.current_stream(), "a new stream")
  eq(cuda.current_stream(), cuda.default_stream(), "default is current")
  local x = torch.randn(1 << 20, {device = "cuda"})
  local y
  do
    local _ <close> = cuda.stream(s)
    eq(cuda.current_stream(), s, "inside the scope")
    y = x * 2
  end
  eq(cuda.current_stream(), cuda.default_stream(), "restored")
  cuda.current_stream():wait_stream(s)
  close(y:cpu(), (x * 2):cpu(), 0, 0, "work on another stream")
  s:synchronize()
  ok(s:query(), "idle after synchronize")
  local a, b = cuda.Event({enable_timing = true}), cuda.Event({enable_timing = true})
  raises(function() a:elapsed_time(b) end, "Both events must be recorded before calculating elapsed time.")
  a:record()
  for _ = 1, 10 do local _ = x * x end
  b:record()
  b:synchronize()
  ok(b:query(), "done")
  ok(a:elapsed_time(b) >= 0, "elapsed_time in ms")
  local c, d = cuda.Event(), cuda.Event()
  c:record(); d:record()
  raises(function() c:elapsed_time(d) end, "enable_timing=True")
  local e = s:record_event()
  e:wait()
  x:record_stream(s)
  raises(function() torch.ones(2):record_stream(s) end, "expected a CUDA tensor")
end)

-- (the fuzzer's find, issue 26: the event was checked by Event's own method, which named itself '?')
test("Stream:record_event and wait_event name themselves when given something else than an event", function()
  need_gpu()
  local s = cuda.Stream()
  raises(function() s:record_event(torch.zeros(1)) end, "bad argument #1 to 'record_event' (cuda.Event expected, got Tensor)")
  raises(function() s:wait_event(3) end, "bad argument #1 to 'wait_event' (cuda.Event expected, got number)")
  raises(function() s:wait_event() end, "bad argument #1 to 'wait_event' (cuda.Event expected, got no value)")
  local e = cuda.Event()
  eq(s:record_event(e), e, "record_event(e) returns e")
  s:wait_event(e)
end)

T.run()
