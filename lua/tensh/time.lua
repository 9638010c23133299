-- tensh.time: Python's time module for ported scripts, as
--   local time = require "tensh.time"     -- import time
--   local start = time.time()              -- start = time.time()
-- Lua's own clocks do not fit: os.clock() is CPU time summed over tensh's
-- threads, os.time() counts whole seconds.
local torch = torch
local M = {}

-- seconds since the epoch, to the nanosecond (CLOCK_REALTIME)
M.time = torch._time

-- seconds on a monotonic clock: only differences mean anything (CLOCK_MONOTONIC)
M.perf_counter = torch._clock
M.monotonic = torch._clock

return M
