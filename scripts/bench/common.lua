-- What the benchmark scripts share, after ../shared/peers/common.py: the
-- device (--device cpu|cuda, cuda by default when available, as the peers)
-- and the median timing of a call. Loaded with dofile beside the script.
local M = {}

function M.device(args)
  local dev = (cuda and cuda.is_available()) and "cuda" or "cpu"
  for i = 1, #args do
    if args[i] == "--device" then dev = assert(args[i + 1], "--device needs a value") end
    dev = args[i]:match("^%-%-device=(.+)$") or dev
  end
  return dev
end

-- Median of `iters` timed calls of fn, in milliseconds, after `warmup` calls
-- (the peer's common.time_ms), synchronising a GPU around each call. Garbage
-- from the previous call is collected outside the timed region, as CPython's
-- refcounting frees it at once.
function M.time_ms(fn, warmup, iters, dev)
  local sync = dev:sub(1, 4) == "cuda" and cuda.synchronize or function() end
  for _ = 1, warmup do fn() end
  sync()
  local times = {}
  for i = 1, iters do
    collectgarbage()
    local t = torch._clock()
    fn()
    sync()
    times[i] = (torch._clock() - t) * 1e3
  end
  table.sort(times)
  return times[iters // 2 + 1]
end

return M
