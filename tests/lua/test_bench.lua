-- bench.Timer, Measurement and Compare: statistics against numpy's
-- definitions worked by hand, the autorange stopping rules on a scripted
-- clock, known work (a spin of known length: it cannot end early, so its
-- time has an exact lower bound; the upper bounds leave room for a loaded
-- machine), what a Measurement records, Compare's table as PyTorch lays it
-- out, and the errors.
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises
local json = require "tensh.json"

local function near(a, b, what) ok(math.abs(a - b) <= 1e-12 * math.max(1, math.abs(b)), ("%s: expected %.17g, got %.17g"):format(what, b, a)) end

test("Measurement statistics are numpy's (median, mean, linear percentiles, IQR)", function()
  -- raw block times over 2 runs each: per-run times 2, 0.5, 1.5, 1, 5
  local m = bench.Measurement({number_per_run = 2, raw_times = {4, 1, 3, 2, 10}, task_spec = {label = "add"}})
  T.close(m.times, {2, 0.5, 1.5, 1, 5}, 0, 1e-15, "times")
  near(m.median, 1.5, "median")
  near(m.mean, 2.0, "mean")
  near(m.p25, 1.0, "p25") -- position (5-1)*0.25 = 1: the second smallest
  near(m.p75, 2.0, "p75")
  near(m.iqr, 1.0, "iqr")
  -- interquartile points 1, 1.5, 2: std sqrt(1/6), ci 1.645*std/sqrt(3) = 0.388, log10(1.5/0.388) = 0.59
  eq(m:significant_figures(), 1, "significant figures")
  ok(m.has_warnings, "an IQR of 67% of the median warns")
  local even = bench.Measurement({number_per_run = 1, raw_times = {1, 2, 3, 4}})
  near(even.median, 2.5, "median of an even count")
  near(even.p25, 1.75, "p25 interpolates") -- position 0.75
  near(even.p75, 3.25, "p75 interpolates")
  -- no spread: the confidence interval is its floor, 25 ns; log10(10 ms / 25 ns) = 5.6, capped at 4
  local tight = bench.Measurement({number_per_run = 10, raw_times = {0.1, 0.1, 0.1, 0.1}})
  ok(not tight.has_warnings and tight:meets_confidence(0.1), "no spread, no warning")
  eq(tight:significant_figures(), 4, "no spread: the most figures")
end)

test("a Measurement prints as PyTorch prints one", function()
  local m = bench.Measurement({number_per_run = 2, raw_times = {4, 1, 3, 2, 10}, task_spec = {label = "add", sub_label = "1 elem",
    description = "float32", num_threads = 2}})
  local s = tostring(m)
  local first, rest = s:match("^([^\n]*)\n(.*)$")
  ok(first:match("^<torch%.utils%.benchmark%.utils%.common%.Measurement object at 0x%x+>$"), "first line: " .. first)
  eq(rest, table.concat({
    "add: 1 elem",
    "float32",
    "  Median: 1.50 s",
    "  IQR:    1.00 s (1.00 to 2.00)",
    "  5 measurements, 2 runs per measurement, 2 threads",
    "  WARNING: Interquartile range is 66.7% of the median measurement.",
    "           This suggests significant environmental influence."}, "\n"), "repr")
  local one = bench.Measurement({number_per_run = 100, raw_times = {2.5e-4}, task_spec = {label = "x"}})
  eq(tostring(one):match("\n(.*)$"), "x\n  2.50 us\n  1 measurement, 100 runs , 1 thread", "one block: no IQR line")
  local three = bench.Measurement({number_per_run = 1, raw_times = {1e-3, 1.01e-3, 1.02e-3}, task_spec = {label = "x"}})
  ok(not tostring(three):find("IQR"), "fewer than 4 blocks: no IQR line")
  ok(tostring(three):find("  Median: 1.01 ms", 1, true), "ms unit")
end)

test("select_unit and trim_sigfig", function()
  eq(select(1, bench.select_unit(5e-9)), "ns", "ns")
  eq(select(1, bench.select_unit(5e-6)), "us", "us")
  eq(select(1, bench.select_unit(5e-4)), "us", "500 us")
  eq(select(1, bench.select_unit(5e-2)), "ms", "ms")
  eq(select(1, bench.select_unit(5)), "s", "s")
  near(bench.trim_sigfig(3.14159, 2), 3.1, "trim 2")
  near(bench.trim_sigfig(2512, 2), 2500, "trim 2 of thousands")
end)

-- a scripted clock: the block time is a function of the call count
local function scripted(per_run, overhead, block_times)
  local calls, nblocks = {}, 0
  return calls, function(number)
    calls[#calls + 1] = number
    if number == 0 then return overhead end
    if block_times and number == block_times.number then
      nblocks = nblocks + 1
      return block_times[math.min(nblocks, #block_times)]
    end
    return number * per_run
  end
end

test("blocked_autorange: block size by powers of ten, blocks until min_run_time", function()
  local calls, clock = scripted(3e-4, 1e-6)
  local setups = 0
  local t = bench.Timer({stmt = function() end, setup = function() setups = setups + 1 end, timer = clock, device = "cpu"})
  local m = t:blocked_autorange({min_run_time = 0.2})
  -- 5 empty blocks (overhead), then 1, 10, 100 runs: at 100 the overhead is 5e-5 of the
  -- block (<= 1e-4) and the block (0.03 s) is over min_run_time / 1000
  T.eq(T.fmt({table.unpack(calls, 1, 8)}), T.fmt({0, 0, 0, 0, 0, 1, 10, 100}), "estimation calls")
  eq(m.number_per_run, 100, "number per run")
  eq(#m.raw_times, 7, "blocks of 0.03 s until 0.2 s: 7")
  eq(#calls, 8 + 7, "no more blocks")
  eq(m.metadata.warmup.runs, 111, "the estimation is the warm-up")
  near(m.metadata.warmup.seconds, 5e-6 + 111 * 3e-4, "warm-up seconds")
  eq(setups, 1, "setup runs once")
  -- a block slower than min_run_time stops the estimate at once
  local calls2, slow = scripted(0.5, 1e-6)
  local m2 = bench.Timer({stmt = function() end, timer = slow, device = "cpu"}):blocked_autorange({min_run_time = 0.2})
  eq(m2.number_per_run, 1, "slow statement: one run per block")
  eq(#m2.raw_times, 1, "one block already exceeds min_run_time")
end)

test("adaptive_autorange: stops when more than 3 blocks have an IQR under threshold x median", function()
  -- blocks of 100 runs: noisy first, then steady. The estimate's 100-run block
  -- takes the first scripted time, so the loop sees 0.09, 0.03, 0.09, 0.03, ...;
  -- by hand the IQR first drops under 10% of the median at the 9th block:
  -- seven 0.03 and two 0.09 put both quartiles (positions 2 and 6) on 0.03;
  -- at the 8th the upper quartile (position 5.25) is still 0.045
  local noisy = {number = 100, 0.03, 0.09, 0.03, 0.09, 0.03, 0.03, 0.03, 0.03, 0.03}
  local _, clock = scripted(3e-4, 1e-6, noisy)
  local m = bench.Timer({stmt = function() end, timer = clock, device = "cpu"}):adaptive_autorange()
  eq(m.number_per_run, 100, "block size for 0.05 s")
  eq(#m.raw_times, 9, "blocks until the IQR settles")
  -- always noisy: max_run_time ends it
  local always = {number = 100, 0.03, 0.09, 0.03, 0.09, 0.03, 0.09, 0.03, 0.09, 0.03, 0.09}
  for i = 1, 100 do always[#always + 1] = i % 2 == 0 and 0.03 or 0.09 end
  local _, clock2 = scripted(3e-4, 1e-6, always)
  local m2 = bench.Timer({stmt = function() end, timer = clock2, device = "cpu"}):adaptive_autorange({max_run_time = 0.5})
  local total = 0
  for _, t in ipairs(m2.raw_times) do total = total + t end
  ok(total > 0.5 and total - m2.raw_times[#m2.raw_times] <= 0.5, "stops at the first block past max_run_time, total " .. total)
end)

test("known work: a spin of known length", function()
  local spin = 0.002
  local t = bench.Timer({stmt = function() torch._busy_wait(spin) end, label = "spin", device = "cpu"})
  local m = t:timeit(5)
  eq(m.number_per_run, 5, "timeit: number per run")
  eq(#m.raw_times, 1, "timeit: one block")
  ok(m.median >= spin, ("a spin cannot end early: %.6f s"):format(m.median))
  ok(m.median < spin * 25, ("a loaded machine stretches it, but not 25x: %.6f s"):format(m.median))
  eq(m.metadata.warmup.runs, 2, "timeit warms up max(number // 100, 2) runs")
  ok(m.metadata.warmup.seconds >= 2 * spin, "warm-up time is measured")
  local b = bench.Timer({stmt = function() torch._busy_wait(spin) end, device = "cpu"}):blocked_autorange({min_run_time = 0.05})
  ok(b.median >= spin and b.p25 >= spin, "blocked: every quantile above the spin")
  local total = 0
  for _, x in ipairs(b.raw_times) do total = total + x end
  ok(total >= 0.05, "blocks cover min_run_time")
  ok(total - b.raw_times[#b.raw_times] < 0.05, "and stop at the first block past it")
  local sorted = table.move(b.times, 1, #b.times, 1, {})
  table.sort(sorted)
  near(b.median, bench._percentile(sorted, 50), "median of the blocks")
  ok(b.median <= sorted[#sorted] and b.median >= sorted[1], "median inside the range")
end)

test("a Measurement records what its number depends on", function()
  local t = bench.Timer({stmt = function() local x = torch.empty(1000000, {device = "cpu"}) end, num_threads = 1, device = "cpu"})
  local m = t:timeit(3)
  local env = m.metadata.env
  eq(env.threads, 1, "threads")
  ok(env.build == "CPU" or env.build == "CUDA" or env.build == "simulated", "build: " .. tostring(env.build))
  ok(type(env.blas_core) == "string" and #env.blas_core > 0, "BLAS kernel family")
  eq(env.device, "cpu", "device")
  ok(type(env.device_name) == "string" and #env.device_name > 0, "device name")
  ok(m.metadata.peak_cpu_bytes >= 4000000, "the 4 MB tensor is in the CPU peak: " .. m.metadata.peak_cpu_bytes)
  local rec = json.decode(m:json())
  for _, k in ipairs({"median", "mean", "iqr", "p25", "p75", "number_per_run", "block_seconds", "warmup", "env",
                      "peak_cpu_bytes", "peak_device_bytes", "num_threads"}) do
    ok(rec[k] ~= nil, "json has " .. k)
  end
  near(rec.median, m.median, "json median")
  -- num_threads is set for the measurement and restored after
  local before = torch.get_num_threads()
  local seen
  bench.Timer({stmt = function() seen = torch.get_num_threads() end, num_threads = 1, device = "cpu"}):timeit(2)
  eq(seen, 1, "threads inside")
  eq(torch.get_num_threads(), before, "threads restored")
end)

test("string statements run with the given globals", function()
  local a = torch.ones(3)
  local m = bench.Timer({stmt = "local y = a + a", setup = "a = a * 2", globals = {a = a}, device = "cpu"}):timeit(10)
  eq(m.number_per_run, 10, "ran")
  ok(tostring(m):find("local y = a + a", 1, true), "the statement is the title")
  ok(tostring(m):find("setup: a = a * 2", 1, true), "the setup is shown")
end)

-- PyTorch's Timer(stmt="y = x + 1", setup="x = torch.ones(3)") runs both in one
-- namespace; each string once had an environment of its own, so stmt did not
-- see x. globals gives the initial names (copied, as PyTorch copies the dict).
test("string setup and stmt share one environment; globals seeds it, _G is read behind it", function()
  -- PyTorch's own example: no globals
  bench.Timer({stmt = "y = x + 1", setup = "x = torch.ones(3)", device = "cpu"}):timeit(3)
  eq(rawget(_G, "x"), nil, "setup's names stay in the timer's environment")
  eq(rawget(_G, "y"), nil, "stmt's names too")
  -- globals seeds the environment
  local count = {stmt = 0, setup = 0}
  local g = {count = count}
  local m = bench.Timer({stmt = "y = x + 1; count.stmt = count.stmt + 1",
    setup = "x = torch.ones(3); count.setup = count.setup + 1", globals = g, device = "cpu"}):timeit(5)
  eq(m.number_per_run, 5, "ran")
  eq(count.setup, 1, "setup ran once")
  ok(count.stmt >= 5, "stmt ran with setup's x: " .. count.stmt)
  eq(g.x, nil, "the globals table is copied, not written")
  eq(getmetatable(g), nil, "nor given a metatable")
  raises(function() bench.Timer({stmt = "y = 1", globals = 5}) end, "Timer: option 'globals': table expected, got number")
end)

local function fixed(sub, desc, median, threads, label)
  return bench.Measurement({number_per_run = 1, raw_times = {median, median, median, median},
    task_spec = {label = label or "add", sub_label = sub, description = desc, num_threads = threads or 1}})
end

test("Compare prints PyTorch's table", function()
  local c = bench.Compare({fixed("n=1", "a", 1e-6), fixed("n=1", "b", 2.5e-6), fixed("n=2", "a", 10e-6)})
  eq(tostring(c), table.concat({
    "[--------- add ----------]",
    "           |   a    |   b ",
    "1 threads: ---------------",
    "      n=1  |  1.0   |  2.5",
    "      n=2  |  10.0  |     ",
    "",
    "Times are in microseconds (us).",
    ""}, "\n"), "table")
  -- replicates merge; thread counts make row groups; each label its own table
  local c2 = bench.Compare({fixed("n=1", "a", 1e-3), fixed("n=1", "a", 3e-3), fixed("n=1", "a", 1e-3, 2),
    fixed("x", "a", 1, 1, "other")})
  local s = tostring(c2)
  ok(s:find("1 threads: ", 1, true) and s:find("2 threads: ", 1, true), "a group per thread count")
  ok(s:find("[--- other ---]", 1, true) or s:find("other", 1, true), "second label")
  local rows = json.decode(c2:json())
  eq(#rows, 3, "merged: 3 tasks")
  near(rows[1].median, 2e-3, "the replicates' median (8 pooled times)")
  c2:colorize()
  ok(tostring(c2):find("\27[92m", 1, true), "colour on request")
  c:trim_significant_figures()
  ok(tostring(c):find("10.0", 1, true) or tostring(c):find("10", 1, true), "trimmed")
end)

test("errors name the function and what was expected", function()
  raises(function() bench.Timer({}) end, "Timer: option 'stmt' is required")
  raises(function() bench.Timer({stmt = function() end, nope = 1}) end, "Timer: unknown option 'nope'")
  raises(function() bench.Timer({stmt = function() end, num_threads = 0}) end, "num_threads': a positive integer expected")
  raises(function() bench.Timer({stmt = 5}) end, "option 'stmt': function or string expected, got number")
  raises(function() bench.Timer({stmt = "x ="}) end, "option 'stmt' does not compile")
  local t = bench.Timer({stmt = function() end, device = "cpu"})
  raises(function() t:blocked_autorange({min_run_time = "x"}) end, "option 'min_run_time': number expected, got string")
  raises(function() t:timeit(0) end, "Timer.timeit: number must be an integer >= 1")
  raises(function() t:timeit(1 << 31) end, "Timer.timeit: number must be at most 2^31 - 1")
  raises(function() t:blocked_autorange({min_run_time = math.huge}) end, "option 'min_run_time': seconds (or a ratio) in (0, 86400]")
  raises(function() t:adaptive_autorange({threshold = 0 / 0}) end, "option 'threshold': seconds (or a ratio) in (0, 86400]")
  raises(function() torch._busy_wait(1e300) end, "_busy_wait: seconds must be in [0, 10]")
  raises(function() torch._bench_block(function() end, math.maxinteger) end, "_bench_block: number must be in [0, 2^31 - 1]")
  raises(function() bench.Compare({1}) end, "Compare: expected a Measurement at position 1, got number")
  raises(function() bench.Measurement({number_per_run = 1, raw_times = {}}) end, "raw_times must be a non-empty list")
  local failing = bench.Timer({stmt = function() error("boom") end, device = "cpu"})
  raises(function() failing:timeit(3) end, "boom")
  ok(torch.get_num_threads() >= 1, "the session goes on")
end)

test("on CUDA: events time the block, device memory and name are recorded", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  local x = torch.randn(256, 256, {device = "cuda"})
  local t = bench.Timer({stmt = function() local y = x:matmul(x) local z = torch.empty(1000000, {device = "cuda"}) end,
    device = "cuda"})
  local m = t:timeit(3)
  ok(m.median > 0, "a positive time")
  eq(m.metadata.env.device, ("cuda:%d"):format(cuda.current_device()), "device")
  eq(m.metadata.env.device_name, cuda.get_device_name(), "device name")
  ok(m.metadata.peak_device_bytes >= 4000000, "device peak: " .. m.metadata.peak_device_bytes)
  -- on a GPU the end event is recorded after the host's work, so an idle stream's
  -- events enclose it; the simulated device runs queued work at the next
  -- synchronisation and times only that
  if m.metadata.env.build ~= "simulated" then
    local spin = bench.Timer({stmt = function() torch._busy_wait(0.002) end, device = "cuda"}):timeit(3)
    ok(spin.median >= 0.0019, "events enclose the host work between them: " .. spin.median)
  end
  raises(function() bench.Timer({stmt = function() end, device = "cuda:99"}):timeit(1) end, "")
end)

test("median takes a torch.Size as its list (found by the fuzzer)", function()
  eq(bench.median(torch.Size({3, 1, 2})), 2, "median of the dims")
  eq(bench.median(torch.Size({7})), 7, "one dim")
end)

T.run()
