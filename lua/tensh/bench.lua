-- The global `bench` (also torch.utils.benchmark): PyTorch's Timer,
-- Measurement and Compare, plus bench.case for `tensh bench` files.
--
--   local t = bench.Timer({stmt = function() y = a + b end, label = "add", num_threads = 1})
--   print(t:blocked_autorange({min_run_time = 0.2}))   -- a Measurement
--   bench.Compare({m1, m2}):print()
--
-- Blocks are timed in C (torch._bench_block): the statement runs `number`
-- times between two readings of the monotonic clock, or, when the Timer's
-- device is CUDA, between two CUDA events with the device synchronised
-- before and after the block. Lua's garbage is collected once before the
-- timed blocks, not before each: freeing a dead tensor is part of an op's
-- cost (CPython's refcounting pays it inside PyTorch's numbers), and a
-- collection before every block would leave a short block's garbage to the
-- next collection, outside every block, so per-run times would shrink with
-- the block size. A block that holds a collection cycle is slower than one
-- that does not: the mean carries that cost, the median may not.
local torch = torch
local raise = require("tensh.errors").raise
local args = require "tensh.args"
local json = require "tensh.json"

local bench = require("tensh.lazy").claim("bench") -- the table the global bench holds from start-up

-- ---- statistics (numpy's, as PyTorch's Measurement uses them) -----------------------------

-- linear interpolation between closest ranks: numpy.percentile's default
local function percentile(sorted, p)
  local n = #sorted
  if n == 0 then return 0 / 0 end
  local pos = (n - 1) * p / 100
  local lo = math.floor(pos)
  local frac = pos - lo
  local a, b = sorted[lo + 1], sorted[math.min(lo + 2, n)]
  return a + (b - a) * frac
end
-- for the tests (test_bench): the statistics' helper, with its arguments checked
function bench._percentile(sorted, p)
  sorted = args.plain(sorted) -- a torch.Size is its list
  if type(sorted) ~= "table" then args.type_error("_percentile", 1, "table (a sorted list of numbers)", sorted) end
  for i = 1, #sorted do
    if type(sorted[i]) ~= "number" then
      args.bad_argument("_percentile", 1, "sorted[%d] is %s, not a number", i, args.typename(sorted[i]))
    end
  end
  if type(p) ~= "number" or not (p >= 0 and p <= 100) then
    args.bad_argument("_percentile", 2, "a percentage in [0, 100] expected, got %s", args.show(p))
  end
  return percentile(sorted, p)
end

local function std(xs) -- population standard deviation (numpy.std)
  local n, s = #xs, 0
  if n == 0 then return 0 / 0 end
  for _, x in ipairs(xs) do s = s + x end
  local mean, v = s / n, 0
  for _, x in ipairs(xs) do v = v + (x - mean) ^ 2 end
  return math.sqrt(v / n)
end

local MAX_SIGNIFICANT_FIGURES, MIN_CONFIDENCE_INTERVAL = 4, 25e-9
local IQR_WARN_THRESHOLD, IQR_GROSS_WARN_THRESHOLD = 0.1, 0.25

local function check_number(fn, what, v)
  if type(v) ~= "number" then raise("%s: %s must be a number, got %s", fn, what, type(v)) end
  return v
end

-- the unit a time prints in: ns, us, ms or s, and its scale
function bench.select_unit(t)
  check_number("select_unit", "t (a time in seconds)", t)
  local e = math.floor(math.log(t, 10) / 3)
  local unit = ({[-3] = "ns", [-2] = "us", [-1] = "ms"})[e] or "s"
  return unit, ({ns = 1e-9, us = 1e-6, ms = 1e-3, s = 1})[unit]
end

function bench.unit_to_english(u)
  return ({ns = "nanosecond", us = "microsecond", ms = "millisecond", s = "second"})[u]
end

local function round_half_even(x)
  local f = math.floor(x)
  local d = x - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then return f + 1 end
  return f
end

-- x to n significant figures (3.14159, 2 -> 3.1)
function bench.trim_sigfig(x, n)
  check_number("trim_sigfig", "x", x)
  if math.type(n) ~= "integer" or n < 1 then
    raise("trim_sigfig: n (the number of significant figures) must be a positive integer, got %s", tostring(n))
  end
  local magnitude = math.ceil(math.log(math.abs(x), 10))
  local scale = 10.0 ^ (magnitude - n)
  return round_half_even(x / scale) * scale
end

-- ---- what a number depends on ----------------------------------------------------------

local commit_cache
local function commit()
  if commit_cache == nil then
    commit_cache = false
    local p = io.popen("git describe --always --dirty --abbrev=12 2>/dev/null")
    if p then
      local s = p:read("l")
      p:close()
      if s and s:match("^%x+") then commit_cache = s end
    end
  end
  return commit_cache or nil
end

local cpu_name_cache
local function cpu_name()
  if not cpu_name_cache then
    cpu_name_cache = "cpu"
    local f = io.open("/proc/cpuinfo")
    if f then
      for line in f:lines() do
        local m = line:match("^model name%s*:%s*(.-)%s*$")
        if m then cpu_name_cache = m break end
      end
      f:close()
    end
  end
  return cpu_name_cache
end

-- ---- Measurement ---------------------------------------------------------------------

local Measurement = {}
Measurement.__index = Measurement
Measurement.__name = "bench.Measurement"
bench.Measurement = Measurement

local TASK_FIELDS = {"stmt", "setup", "label", "sub_label", "description", "env", "num_threads"}

-- bench.Measurement({number_per_run =, raw_times = {...}, task_spec = {...}, metadata =})
function Measurement.new(t)
  if type(t) ~= "table" then
    raise("Measurement: expected a table {number_per_run =, raw_times = {...}, task_spec =}, got %s", type(t))
  end
  if math.type(t.number_per_run) ~= "integer" or t.number_per_run < 1 then
    raise("Measurement: number_per_run must be a positive integer, got %s", tostring(t.number_per_run))
  end
  if type(t.raw_times) ~= "table" or #t.raw_times == 0 then raise("Measurement: raw_times must be a non-empty list") end
  for i, r in ipairs(t.raw_times) do check_number("Measurement", ("raw_times[%d]"):format(i), r) end
  if t.task_spec ~= nil and type(t.task_spec) ~= "table" then
    raise("Measurement: task_spec must be a table (stmt, label, ...) or nil, got %s", type(t.task_spec))
  end
  local m = setmetatable({number_per_run = t.number_per_run, raw_times = t.raw_times,
    task_spec = t.task_spec or {}, metadata = t.metadata}, Measurement)
  for _, k in ipairs(TASK_FIELDS) do m[k] = m.task_spec[k] end
  m.num_threads = m.num_threads or 1
  m.times = {}
  for i, r in ipairs(m.raw_times) do m.times[i] = r / m.number_per_run end
  local sorted = table.move(m.times, 1, #m.times, 1, {})
  table.sort(sorted)
  m._sorted = sorted
  m.median = percentile(sorted, 50)
  local s = 0
  for _, x in ipairs(sorted) do s = s + x end
  m.mean = s / #sorted
  m.p25, m.p75 = percentile(sorted, 25), percentile(sorted, 75)
  m.iqr = m.p75 - m.p25
  m.warnings = {}
  local function warn(msg)
    m.warnings[#m.warnings + 1] = ("  WARNING: Interquartile range is %.1f%% of the median measurement.\n           %s")
      :format(m.iqr / m.median * 100, msg)
  end
  if not m:meets_confidence(IQR_GROSS_WARN_THRESHOLD) then warn("This suggests significant environmental influence.")
  elseif not m:meets_confidence(IQR_WARN_THRESHOLD) then warn("This could indicate system fluctuation.") end
  m.has_warnings = #m.warnings > 0
  return m
end
setmetatable(Measurement, {__call = function(_, t) return Measurement.new(t) end})

function Measurement:meets_confidence(threshold)
  if threshold ~= nil then check_number("meets_confidence", "threshold", threshold) end
  return self.iqr / self.median < (threshold or IQR_WARN_THRESHOLD)
end

-- a rough count of the digits the spread lets one trust (1 to 4), from the
-- interquartile points only
function Measurement:significant_figures()
  local s = self._sorted
  local n = #s
  local lo, hi = n // 4, math.ceil(3 * n / 4)
  local mid = table.move(s, lo + 1, hi, 1, {})
  local ci = math.max(1.645 * std(mid) / math.sqrt(#mid), MIN_CONFIDENCE_INTERVAL)
  local figures = math.floor(math.log(self.median / ci, 10))
  return math.min(math.max(figures, 1), MAX_SIGNIFICANT_FIGURES)
end

local function describe_code(v)
  if type(v) == "string" then return v end
  if type(v) == "function" then
    local info = debug.getinfo(v, "S")
    return ("function <%s:%d>"):format(info.short_src, info.linedefined)
  end
  return nil
end

function Measurement:title()
  local sub = self.sub_label and (": " .. self.sub_label) or ""
  if self.label then return self.label .. sub end
  local stmt = describe_code(self.stmt) or "[Unknown]"
  if not stmt:find("\n") then return stmt .. sub end
  return ("stmt:%s\n  %s"):format(self.sub_label and (" (" .. self.sub_label .. ")") or "", stmt:gsub("\n", "\n  "))
end

function Measurement:as_row_name() return self.sub_label or describe_code(self.stmt) or "[Unknown]" end

local function summarize(m)
  local setup = describe_code(m.setup)
  local setup_str = ""
  if setup and setup ~= "" and setup ~= "pass" then
    setup_str = setup:find("\n") and ("setup:\n  " .. setup:gsub("\n", "\n  ")) or ("setup: " .. setup)
  end
  local out = {}
  for _, s in ipairs({m:title(), m.description or "", setup_str}) do
    if s ~= "" then out[#out + 1] = s:find("\n") and (s .. "\n") or s end
  end
  return table.concat(out, "\n")
end

-- printed as PyTorch prints a Measurement
Measurement.__tostring = function(m)
  require("tensh.classes").check_meta(Measurement, "__tostring", m)
  local n = #m._sorted
  local unit, scale = bench.select_unit(m.median)
  local lines = {("<torch.utils.benchmark.utils.common.Measurement object at %p>"):format(m)}
  lines[#lines + 1] = summarize(m)
  lines[#lines + 1] = ("  %s%.2f %s"):format(n > 1 and "Median: " or "", m.median / scale, unit)
  if n >= 4 then
    lines[#lines + 1] = ("  IQR:    %.2f %s (%.2f to %.2f)"):format(m.iqr / scale, unit, m.p25 / scale, m.p75 / scale)
  end
  lines[#lines + 1] = ("  %d measurement%s, %d runs %s %d thread%s"):format(n, n > 1 and "s" or "", m.number_per_run,
    n > 1 and "per measurement," or ",", m.num_threads, m.num_threads > 1 and "s" or "")
  for _, w in ipairs(m.warnings) do lines[#lines + 1] = w end
  local s = table.concat(lines, "\n"):gsub("^%s+", ""):gsub("%s+$", "")
  local out = {}
  for l in (s .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = l end
  return table.concat(out, "\n")
end

-- merges replicates of one task into one Measurement per task, every
-- time extrapolated to one run (number_per_run = 1), as PyTorch's merge
function Measurement.merge(ms)
  if type(ms) ~= "table" then raise("Measurement.merge: expected a list of Measurements, got %s", type(ms)) end
  local groups, order = {}, {}
  for i, m in ipairs(ms) do
    if getmetatable(m) ~= Measurement then
      raise("Measurement.merge: element %d is not a bench.Measurement (got %s)", i, type(m))
    end
    local key = {}
    for i, k in ipairs(TASK_FIELDS) do key[i] = tostring(describe_code(m[k]) or m[k]) end
    key = table.concat(key, "\0")
    if not groups[key] then groups[key] = {spec = m.task_spec, times = {}} order[#order + 1] = key end
    for _, t in ipairs(m.times) do table.insert(groups[key].times, t) end
  end
  local out = {}
  for _, key in ipairs(order) do
    out[#out + 1] = Measurement.new({number_per_run = 1, raw_times = groups[key].times, task_spec = groups[key].spec})
  end
  return out
end

-- The process's CPU time per run, one per block (all threads: on a machine
-- other work loads, the wall time counts the wait for a core too), or nil
-- when the blocks were not timed by the Timer's own clock.
function Measurement:cpu_times()
  local cpu = (self.metadata or {}).cpu_block_seconds
  if not cpu or #cpu ~= #self.raw_times then return nil end
  local out = {}
  for i, c in ipairs(cpu) do out[i] = c / self.number_per_run end
  return out
end

-- the median of a list of numbers (numpy's)
function bench.median(xs)
  xs = args.plain(xs) -- a torch.Size is its list
  if type(xs) ~= "table" then raise("median: expected a list of numbers, got %s", type(xs)) end
  for i, x in ipairs(xs) do check_number("median", ("xs[%d]"):format(i), x) end
  local sorted = table.move(xs, 1, #xs, 1, {})
  table.sort(sorted)
  return percentile(sorted, 50)
end

-- One record for JSON lines: statistics in seconds, every block's time,
-- and what the number depends on (bench.Measurement.to_table).
function Measurement:to_table()
  local md = self.metadata or {}
  local cpu = self:cpu_times()
  local spec = {}
  for _, k in ipairs(TASK_FIELDS) do
    local v = self[k]
    spec[k] = type(v) == "function" and describe_code(v) or v
  end
  return {
    label = spec.label, sub_label = spec.sub_label, description = spec.description, stmt = spec.stmt,
    num_threads = self.num_threads, median = self.median, mean = self.mean, iqr = self.iqr, p25 = self.p25,
    p75 = self.p75, number_per_run = self.number_per_run, block_seconds = json.array(table.move(self.raw_times, 1,
      #self.raw_times, 1, {})), warmup = md.warmup, env = md.env, peak_cpu_bytes = md.peak_cpu_bytes,
    peak_device_bytes = md.peak_device_bytes, cpu_median = cpu and bench.median(cpu),
    cpu_times = cpu and json.array(cpu),
  }
end

function Measurement:json() return json.encode(self:to_table()) end

-- ---- Timer ---------------------------------------------------------------------------

local Timer = {}
Timer.__index = Timer
Timer.__name = "bench.Timer"
bench.Timer = Timer

local TIMER_OPTS = {stmt = true, setup = true, label = true, sub_label = true, description = true,
  num_threads = true, device = true, env = true, globals = true, timer = true}

-- The environment string statements run in: one for setup and stmt, as
-- PyTorch runs both in one namespace, so stmt sees what setup defined. It
-- starts as a copy of `globals` (PyTorch copies the dict too: the caller's
-- table is neither written nor given a metatable) and reads _G for the rest.
local function statement_env(globals)
  if globals ~= nil and not args.is_plain_table(globals) then
    raise("Timer: option 'globals': table expected, got %s", args.typename(globals))
  end
  local env = {}
  for k, v in pairs(globals or {}) do env[k] = v end
  return setmetatable(env, {__index = _G})
end

local function as_function(fn, what, code, env)
  if code == nil then return function() end end
  if type(code) == "function" then return code end
  if type(code) ~= "string" then raise("%s: option '%s': function or string expected, got %s", fn, what, type(code)) end
  local f, err = load(code, "=" .. what, "t", env)
  if not f then raise("%s: option '%s' does not compile: %s", fn, what, err) end
  return f
end

-- the device whose clock times the blocks: nil for the host, else a CUDA ordinal
local function timing_device(dev)
  if dev == nil then
    if not (cuda and cuda.is_available()) then return nil, "cpu" end
    dev = "cuda"
  end
  local d = torch.device(dev)
  if d.type == "cpu" then return nil, "cpu" end
  if not (cuda and cuda.is_available()) then raise("Timer: option 'device': %s, but CUDA is not available", tostring(d)) end
  local idx = d.index or cuda.current_device()
  return idx, ("cuda:%d"):format(idx)
end

-- bench.Timer({stmt =, setup =, label =, sub_label =, description =,
-- num_threads = 1, device = "cpu" | "cuda[:N]" (default: CUDA when available,
-- as PyTorch synchronises it), env =, globals = (for string statements)})
function Timer.new(opts)
  if type(opts) ~= "table" then raise("Timer: expected an options table, got %s", type(opts)) end
  args.check_opts("Timer", opts, TIMER_OPTS)
  local nt = opts.num_threads or 1
  if math.type(nt) ~= "integer" or nt < 1 then raise("Timer: option 'num_threads': a positive integer expected, got %s", tostring(nt)) end
  for _, k in ipairs({"label", "sub_label", "description", "env"}) do
    if opts[k] ~= nil and type(opts[k]) ~= "string" then raise("Timer: option '%s': string expected, got %s", k, type(opts[k])) end
  end
  if opts.stmt == nil then raise("Timer: option 'stmt' is required (a function or a string of Lua)") end
  local self = setmetatable({}, Timer)
  local env = statement_env(opts.globals)
  self._stmt = as_function("Timer", "stmt", opts.stmt, env)
  self._setup = as_function("Timer", "setup", opts.setup, env)
  self._device, self._device_str = timing_device(opts.device)
  self._time_block = opts.timer -- tests: function(number) -> seconds instead of the clock
  self.task_spec = {stmt = opts.stmt, setup = opts.setup, label = opts.label, sub_label = opts.sub_label,
    description = opts.description, env = opts.env, num_threads = nt}
  self._setup_done = false
  self._warmup = {runs = 0, seconds = 0}
  self._peak_cpu, self._peak_dev = 0, 0
  return self
end
setmetatable(Timer, {__call = function(_, opts) return Timer.new(opts) end})

-- The timer's steps below are local (timeit and the autoranges call them with
-- checked arguments), not methods a user could reach with anything.

-- number calls of stmt, timed; the peaks of the block are kept
local function timer_timeit(self, number)
  if not self._setup_done then
    self._setup()
    self._setup_done = true
  end
  if self._time_block then return self._time_block(number) end
  local c0 = os.clock()
  local s, host, pc, pd = torch._bench_block(self._stmt, number, self._device)
  self._cpu_last = os.clock() - c0
  if pc > self._peak_cpu then self._peak_cpu = pc end
  if pd > self._peak_dev then self._peak_dev = pd end
  return s, host
end

-- untimed calls before measuring: counted in the Measurement's metadata
local function timer_warm(self, number)
  local s, host = timer_timeit(self, number)
  self._warmup.runs = self._warmup.runs + number
  self._warmup.seconds = self._warmup.seconds + s
  return s, host
end

local function with_threads(n, fn)
  local prior = torch.get_num_threads()
  torch.set_num_threads(n)
  local ok, a, b = pcall(fn)
  torch.set_num_threads(prior)
  if not ok then error(a, 0) end
  return a, b
end

local function timer_env(self)
  local e, blas = torch._bench_env(), torch._blas_info()
  local env = {threads = self.task_spec.num_threads, build = e.build, blas_core = blas.core, blas_threads = blas.threads,
    openblas_coretype = e.openblas_coretype, device = self._device_str, commit = commit()}
  env.device_name = self._device and cuda.get_device_name(self._device) or cpu_name()
  return env
end

local function timer_measurement(self, number, times)
  local m = Measurement.new({number_per_run = number, raw_times = times, task_spec = self.task_spec,
    metadata = {warmup = {runs = self._warmup.runs, seconds = self._warmup.seconds}, env = timer_env(self),
      peak_cpu_bytes = self._peak_cpu, peak_device_bytes = self._peak_dev, cpu_block_seconds = self._cpu_blocks}})
  return m
end

local function check_count(fn, name, v, min)
  if math.type(v) ~= "integer" or v < min then raise("%s: %s must be an integer >= %d, got %s", fn, name, min, tostring(v)) end
end

-- t:timeit(number = 1000000): a warm-up of max(number // 100, 2) calls, then
-- one block of number calls
function Timer:timeit(number)
  number = number or 1000000
  check_count("Timer.timeit", "number", number, 1)
  if number > 2147483647 then raise("Timer.timeit: number must be at most 2^31 - 1, got %d", number) end
  return with_threads(self.task_spec.num_threads, function()
    self._warmup = {runs = 0, seconds = 0}
    timer_warm(self, math.max(number // 100, 2))
    collectgarbage()
    self._cpu_blocks = {}
    local s = timer_timeit(self, number)
    self._cpu_blocks[1] = self._cpu_last
    return timer_measurement(self, number, {s})
  end)
end

-- The block size: the smallest power of ten whose block takes at least
-- min_run_time / 1000 with the timing overhead (an empty block's time) at
-- most 1e-4 of it, or more than min_run_time. Counts as warm-up.
local function timer_estimate_block_size(self, min_run_time)
  local overheads = {}
  for i = 1, 5 do overheads[i] = timer_warm(self, 0) end
  table.sort(overheads)
  local overhead = overheads[3]
  local number = 1
  while true do
    local t, host = timer_warm(self, number)
    if overhead / t <= 1e-4 and t >= min_run_time / 1000 then break end
    -- the host clock bounds it too: CUDA events around host-only work (on the
    -- simulated device, which runs queued work at synchronisation) read ~0
    if t > min_run_time or (host or 0) > min_run_time then break end
    if number * 10 > 2147483647 then break end
    number = number * 10
  end
  return number
end

local function timer_loop(self, number, stop, min_run_time, max_run_time, callback)
  local total, host_total, times, can_stop = 0, 0, {}, false
  self._cpu_blocks = {}
  while (total < min_run_time and host_total < min_run_time) or not can_stop do
    local t, host = timer_timeit(self, number)
    times[#times + 1] = t
    self._cpu_blocks[#times] = self._cpu_last
    total = total + t
    host_total = host_total + (host or t)
    if callback then callback(number, t) end
    can_stop = stop(times)
    if max_run_time and (total > max_run_time or host_total > max_run_time) then break end
  end
  return times
end

-- the autorange options: their keys, then seconds or a ratio, and a callback
local function check_autorange_opts(fn, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then raise("%s: expected an options table, got %s", fn, type(opts)) end
  args.check_opts(fn, opts, allowed)
  for k, v in pairs(opts) do
    if k ~= "callback" and type(v) ~= "number" then raise("%s: option '%s': number expected, got %s", fn, k, type(v)) end
    if k ~= "callback" and not (v > 0 and v <= 86400) then
      raise("%s: option '%s': seconds (or a ratio) in (0, 86400] expected, got %s", fn, k, tostring(v))
    end
    if k == "callback" and type(v) ~= "function" then raise("%s: option 'callback': function expected, got %s", fn, type(v)) end
  end
  return opts
end

-- t:blocked_autorange({min_run_time = 0.2, callback =}): blocks of the
-- estimated size until min_run_time seconds of blocks have run
function Timer:blocked_autorange(opts)
  opts = check_autorange_opts("Timer.blocked_autorange", opts, {min_run_time = true, callback = true})
  local min_run_time = opts.min_run_time or 0.2
  return with_threads(self.task_spec.num_threads, function()
    self._warmup = {runs = 0, seconds = 0}
    local number = timer_estimate_block_size(self, min_run_time)
    collectgarbage()
    local times = timer_loop(self, number, function() return true end, min_run_time, nil, opts.callback)
    return timer_measurement(self, number, times)
  end)
end

-- t:adaptive_autorange({threshold = 0.1, min_run_time = 0.01, max_run_time = 10}):
-- blocks (sized for 0.05 s) until more than 3 of them have an IQR below
-- threshold times the median, and min_run_time has passed, or max_run_time has
function Timer:adaptive_autorange(opts)
  opts = check_autorange_opts("Timer.adaptive_autorange", opts,
    {threshold = true, min_run_time = true, max_run_time = true, callback = true})
  local threshold, min_run_time, max_run_time = opts.threshold or 0.1, opts.min_run_time or 0.01, opts.max_run_time or 10
  return with_threads(self.task_spec.num_threads, function()
    self._warmup = {runs = 0, seconds = 0}
    local number = timer_estimate_block_size(self, 0.05)
    local function stop(times)
      if #times <= 3 then return false end
      return Measurement.new({number_per_run = number, raw_times = times, task_spec = self.task_spec})
        :meets_confidence(threshold)
    end
    collectgarbage()
    local times = timer_loop(self, number, stop, min_run_time, max_run_time, opts.callback)
    return timer_measurement(self, number, times)
  end)
end

-- ---- Compare and benchmark cases -------------------------------------------------------

bench.Compare = require("tensh.bench_compare")(bench)

-- bench.case(name, fn, {setup =, params = {n = {1, 1000}, dtype = {...}}, min_run_time =}):
-- registers a case for `tensh bench`; with params, one case per point of
-- the grid (fn and setup get the point's table). Cases registered outside
-- the runner are kept for bench.cases().
local registered = {}
function bench.case(name, fn, opts)
  if type(name) ~= "string" or name == "" then raise("bench.case: name must be a non-empty string, got %s", type(name)) end
  if type(fn) ~= "function" then raise("bench.case: fn must be a function, got %s", type(fn)) end
  opts = opts or {}
  if type(opts) ~= "table" then raise("bench.case: options must be a table, got %s", type(opts)) end
  args.check_opts("bench.case", opts, {setup = true, params = true, min_run_time = true, device = true, num_threads = true})
  if opts.setup ~= nil and type(opts.setup) ~= "function" then raise("bench.case: option 'setup': function expected, got %s", type(opts.setup)) end
  local params = opts.params or {}
  if type(params) ~= "table" then raise("bench.case: option 'params': table expected, got %s", type(params)) end
  local keys = {}
  for k, vs in pairs(params) do
    if type(k) ~= "string" then raise("bench.case: params keys must be strings") end
    if type(vs) ~= "table" or #vs == 0 then raise("bench.case: params.%s must be a non-empty list", k) end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  local points = {{}}
  for _, k in ipairs(keys) do
    local next_points = {}
    for _, p in ipairs(points) do
      for _, v in ipairs(params[k]) do
        local q = table.move(p, 1, #p, 1, {})
        for kk, vv in pairs(p) do q[kk] = vv end
        q[k] = v
        next_points[#next_points + 1] = q
      end
    end
    points = next_points
  end
  for _, p in ipairs(points) do
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = ("%s=%s"):format(k, tostring(p[k])) end
    local full = #parts > 0 and ("%s[%s]"):format(name, table.concat(parts, ",")) or name
    registered[#registered + 1] = {name = full, base = name, fn = fn, setup = opts.setup, params = #keys > 0 and p or nil,
      min_run_time = opts.min_run_time, device = opts.device, num_threads = opts.num_threads}
  end
end

-- the cases registered so far; with clear, forgets them
function bench.cases(clear)
  local out = registered
  if clear then registered = {} end
  return out
end

bench._json = json
-- methods check they got their object (timer.timeit() for timer:timeit() says so)
require("tensh.classes").setup(Measurement, {var = "m", static = {merge = true}})
require("tensh.classes").setup(Timer, {var = "timer"})
-- ported code says torch.utils.benchmark
torch.utils = torch.utils or {}
torch.utils.benchmark = bench
return bench
