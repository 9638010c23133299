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

-- Median of each phase over `iters` calls of the phases in order (each a
-- function), after `warmup` calls; returns {ms per phase..., total = ms,
-- cpu = ms} where total is the median of the sums (not the sum of the
-- medians) and cpu the median of the process's CPU time per step (all
-- threads: at one thread it is the wall time minus waiting for a core, the
-- figure that holds on a loaded machine).
function M.phases_ms(phases, warmup, iters, dev)
  local sync = dev:sub(1, 4) == "cuda" and cuda.synchronize or function() end
  for _ = 1, warmup do
    for _, fn in ipairs(phases) do fn() end
  end
  sync()
  local per, totals, cpu = {}, {}, {}
  for p = 1, #phases do per[p] = {} end
  for i = 1, iters do
    collectgarbage()
    local total, c0 = 0, os.clock()
    for p, fn in ipairs(phases) do
      local t = torch._clock()
      fn()
      sync()
      local ms = (torch._clock() - t) * 1e3
      per[p][i], total = ms, total + ms
    end
    totals[i], cpu[i] = total, (os.clock() - c0) * 1e3
  end
  local function median(v)
    table.sort(v)
    return v[#v // 2 + 1]
  end
  local out = {total = median(totals), cpu = median(cpu)}
  for p = 1, #phases do out[p] = median(per[p]) end
  return out
end

-- What a result depends on besides the code, as JSON fields to append to a
-- line: the threads (OpenMP's team, OpenBLAS's) and OpenBLAS's kernel family
-- (OPENBLAS_CORETYPE or its own choice), the same keys the peers print.
function M.run_fields()
  local blas = torch._blas_info()
  return ('"threads": %d, "blas_threads": %d, "blas_core": %q'):format(torch.get_num_threads(), blas.threads,
    blas.core)
end

return M
