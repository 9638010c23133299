-- The cuda table without a GPU: every device call says why, nothing crashes,
-- the session goes on. Runs where CUDA is built but no device is there (the
-- normal build on this project's machines); tests/run.sh keeps it out of the
-- simulated device's pass, where devices are present.
local T = require("harness")
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises

local function gpu() return cuda and cuda.is_available() end

test("without a GPU every device call says why, and the session goes on", function()
  if gpu() then T.skip("a CUDA device is present") end
  eq(cuda.is_available(), false, "is_available")
  eq(cuda.device_count(), 0, "device_count")
  local x = torch.ones(3)
  raises(function() x:cuda() end, "CUDA is not available")
  raises(function() x:to("cuda:0") end, "CUDA is not available")
  raises(function() torch.zeros(2, {device = "cuda"}) end, "not available")
  raises(function() torch.tensor({1, 2}, {device = "cuda"}) end, "tensor: CUDA is not available")
  if cuda.current_device then -- a CUDA build: the whole table is there
    for _, name in ipairs({"current_device", "synchronize", "get_device_name", "get_device_properties", "mem_get_info", "Stream", "Event"}) do
      raises(function() cuda[name]() end, "cuda." .. name .. ": CUDA is not available")
    end
    cuda.empty_cache() -- nothing to empty: not an error
  end
  raises(function() x:pin_memory() end, "pin_memory: page-locked memory needs CUDA")
  -- wrong options and arguments name what was wrong, GPU or not
  raises(function() x:to("cpu", {non_blocking = 1}) end, "option 'non_blocking' must be a boolean")
  raises(function() x:to(1.5) end, "a device ordinal must be an integer")
  raises(function() x:cuda("cpu") end, "a CUDA device expected")
  raises(function() x:cuda({non_blocking = "yes"}) end, "option 'non_blocking' must be a boolean")
  raises(function() x:to(print) end, "bad argument #1 to 'to' (dtype, device, tensor or options table expected")
  eq(x:is_pinned(), false, "is_pinned")
  eq(x:to("cpu", {non_blocking = true}):sum():item(), 3, "non_blocking to the CPU is a plain copy")
  ok(rawequal(x:cpu(), x), "cpu() of a CPU tensor is the tensor itself")
  eq(x:sum():item(), 3, "session goes on")
end)

test("without a GPU the memory statistics are PyTorch's: 0 bytes, an empty memory_stats()", function()
  if gpu() then T.skip("a CUDA device is present") end
  for _, name in ipairs({"memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                         "memory_cached", "max_memory_cached"}) do
    eq(cuda[name](), 0, name)
    eq(math.type(cuda[name]()), "integer", name .. " is an integer")
  end
  eq(type(cuda.memory_stats()), "table", "memory_stats")
  eq(next(cuda.memory_stats()), nil, "memory_stats is empty")
  cuda.reset_peak_memory_stats() -- nothing to reset: not an error
  cuda.reset_accumulated_memory_stats()
  eq(torch.cuda.memory_allocated(), 0, "torch.cuda")
  -- a script that logs memory runs on
  local line = ("%.1f MB"):format(cuda.max_memory_allocated() / 2 ^ 20)
  eq(line, "0.0 MB", "log line")
end)

T.run()
