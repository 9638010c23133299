-- torch.profiler: PyTorch's profiler over tensh's recorder (src/core/profiler.c).
--
--   do
--     local prof <close> = torch.profiler.profile({activities = {"cpu", "cuda"}, record_shapes = true})
--     local _ <close> = torch.profiler.record_function("forward")
--     ...
--   end                                  -- recording stops when prof goes out of scope
--   print(prof:key_averages():table({sort_by = "self_cpu_time_total", row_limit = 10}))
--   prof:export_chrome_trace("trace.json")
--   prof = torch.profiler.profile(opts, function() ... end)   -- the function form
--
-- Every dispatched kernel (named as the op registry names it: "mul",
-- "matmul"), every autograd backward node ("MulBackward0") and every
-- record_function scope is an event with its CPU time, its input shapes
-- (record_shapes), the bytes it left allocated (profile_memory), where Lua
-- called it (with_stack) and, with the "cuda" activity, its device time from
-- CUDA events on its stream. The "cuda" activity also records the device
-- activity, as PyTorch's traces show it: every kernel launch ("kernel", with
-- its grid and block), copy ("gpu_memcpy") and fill ("gpu_memset"), each
-- beside the runtime call that queued it ("cudaLaunchKernel",
-- "cudaMemcpyAsync": "cuda_runtime"), and every host synchronisation
-- ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize").
-- key_averages' rows count the launches and synchronisations under each op
-- (launches, syncs). A kernel is placed at its launch: the device's own
-- timeline is not traced. Where a kernel corresponds to an ATen op, its
-- rows and trace events also carry the name PyTorch's profiler shows
-- ("aten::relu": key_averages rows' aten_name, the trace's args.aten, and
-- table({names = "aten"}) prints it in the Name column).
local torch = torch
local raise = require("tensh.errors").raise
local A = require "tensh.args"
local json = require "tensh.json"

-- kernel name -> "aten::...": the ATen column of the op registry (src/ops/ops*.def)
local ATEN = {}
for name, op in pairs(torch._ops()) do ATEN[name] = op.aten end

local profiler = require("tensh.lazy").claim("profiler") -- the table the global profiler holds from start-up
profiler.aten_names = ATEN
profiler.ProfilerActivity = {CPU = "cpu", CUDA = "cuda"}

local Profile = {}
Profile.__index = Profile
Profile.__name = "torch.profiler.profile"

local PROFILE_OPTS = {activities = true, record_shapes = true, profile_memory = true, with_stack = true}

local function check_profile_opts(opts)
  opts = opts or {}
  if type(opts) ~= "table" then raise("profiler.profile: expected an options table, got %s", type(opts)) end
  A.check_opts("profiler.profile", opts, PROFILE_OPTS)
  for k, v in pairs(opts) do
    if k ~= "activities" and type(v) ~= "boolean" then raise("profiler.profile: option '%s': boolean expected, got %s", k, type(v)) end
  end
  local acts = opts.activities or {"cpu"}
  if type(acts) ~= "table" then raise("profiler.profile: option 'activities': a list expected, got %s", type(acts)) end
  local cuda_on = false
  for _, a in ipairs(acts) do
    if a ~= "cpu" and a ~= "cuda" then
      raise("profiler.profile: option 'activities': unknown activity '%s' (expected \"cpu\" or \"cuda\")", tostring(a))
    end
    cuda_on = cuda_on or a == "cuda"
  end
  return {record_shapes = opts.record_shapes or false, profile_memory = opts.profile_memory or false,
    with_stack = opts.with_stack or false, cuda = cuda_on}
end

-- profile() starts recording (Lua has no `with`: `local prof <close> = profile()` is
-- the usual form); a PyTorch script's `prof = profile(); prof:start()` then restarts it,
-- so the events are those after start(), as in PyTorch
function Profile:start()
  if self._running then torch._profiler_stop() end
  torch._profiler_start(self._opts)
  self._running = true
  self._events = nil
  return self
end

function Profile:stop()
  if not self._running then return self end
  torch._profiler_stop() -- with the cuda activity, waits for the device's work (not counted as a sync)
  self._running = false
  self._events, self.dropped = torch._profiler_events()
  if self.dropped > 0 then
    io.stderr:write(("profiler: %d events past the first %d were dropped\n"):format(self.dropped, #self._events))
  end
  return self
end
Profile.__close = function(self) self:stop() end

-- the raw events: {name, kind, device, ts, dur, self, parent, cpu_mem, ...} (see lprofiler.c)
function Profile:events()
  if self._running then raise("profiler.profile: stop the profiler before reading its events") end
  return self._events or {}
end

function profiler.profile(opts, fn)
  local self = setmetatable({_opts = check_profile_opts(opts), _running = false}, Profile)
  self:start()
  if fn ~= nil then
    if type(fn) ~= "function" then raise("profiler.profile: argument 2 must be a function, got %s", type(fn)) end
    local ok, err = pcall(fn, self)
    self:stop()
    if not ok then error(err, 0) end
  end
  return self
end

-- record_function(name): a scope, closed by <close> (or by :close());
-- record_function(name, fn) runs fn inside it and returns fn's results
local Scope = {}
Scope.__index = Scope
Scope.__name = "torch.profiler.record_function"
function Scope:close()
  if self._id then torch._profiler_pop(self._id) self._id = nil end
end
Scope.__close = Scope.close
Scope.__exit = Scope.close

function profiler.record_function(name, fn)
  if type(name) ~= "string" then raise("profiler.record_function: name must be a string, got %s", type(name)) end
  local scope = setmetatable({_id = torch._profiler_push(name)}, Scope)
  if fn == nil then return scope end
  if type(fn) ~= "function" then raise("profiler.record_function: argument 2 must be a function, got %s", type(fn)) end
  local res = table.pack(pcall(fn))
  scope:close()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- ---- key_averages and its table -----------------------------------------------------------

local function format_time(us)
  if us >= 1e6 then return ("%.3fs"):format(us / 1e6) end
  if us >= 1e3 then return ("%.3fms"):format(us / 1e3) end
  return ("%.3fus"):format(us)
end
local function format_share(us, total)
  if total == 0 then return "NaN" end
  return ("%.2f%%"):format(us * 100 / total)
end
local function format_memory(n)
  local KB, MB, GB = 1024, 1024 * 1024, 1024 * 1024 * 1024
  if math.abs(n) >= GB then return ("%.2f Gb"):format(n / GB) end
  if math.abs(n) >= MB then return ("%.2f Mb"):format(n / MB) end
  if math.abs(n) >= KB then return ("%.2f Kb"):format(n / KB) end
  return ("%d b"):format(n)
end

local EventList = {}
EventList.__index = EventList
-- event kinds that are work queued on a device, not host time
local DEVICE_WORK = {kernel = true, memcpy = true, memset = true}
EventList.__name = "torch.profiler.EventList"

function Profile:key_averages(opts)
  opts = opts or {}
  if type(opts) ~= "table" then raise("key_averages: expected an options table, got %s", type(opts)) end
  A.check_opts("key_averages", opts, {group_by_input_shape = true})
  local by_shape = opts.group_by_input_shape
  if by_shape and not self._opts.record_shapes then
    raise("key_averages: group_by_input_shape needs the profile recorded with record_shapes = true")
  end
  local rows, index = {}, {}
  local evs = self:events()
  -- launches and synchronisations under each event (itself included)
  local launches, syncs = {}, {}
  for i, e in ipairs(evs) do
    local l, s = e.kind == "kernel" and 1 or 0, e.sync and 1 or 0
    if l + s > 0 then
      local j = i
      while j do
        launches[j], syncs[j] = (launches[j] or 0) + l, (syncs[j] or 0) + s
        j = evs[j].parent
      end
    end
  end
  for i, e in ipairs(evs) do
    local key = by_shape and (e.name .. "\0" .. (e.shapes or "")) or e.name
    local r = index[key]
    if not r then
      r = {key = e.name, input_shapes = by_shape and (e.shapes or "[]") or "", count = 0, cpu_time_total = 0,
        self_cpu_time_total = 0, cuda_time_total = 0, self_cuda_time_total = 0, cpu_memory_usage = 0,
        self_cpu_memory_usage = 0, cuda_memory_usage = 0, self_cuda_memory_usage = 0, kind = e.kind,
        aten_name = e.kind == "op" and ATEN[e.name] or nil, launches = 0, syncs = 0}
      index[key] = r
      rows[#rows + 1] = r
    end
    r.count = r.count + 1
    r.launches, r.syncs = r.launches + (launches[i] or 0), r.syncs + (syncs[i] or 0)
    if not DEVICE_WORK[e.kind] then -- a kernel, copy or fill is the device's time, which is not traced
      r.cpu_time_total = r.cpu_time_total + e.dur
      r.self_cpu_time_total = r.self_cpu_time_total + e.self
    end
    if e.device_us then
      r.cuda_time_total = r.cuda_time_total + e.device_us
      r.self_cuda_time_total = r.self_cuda_time_total + e.device_us
    end
    r.cpu_memory_usage = r.cpu_memory_usage + e.cpu_mem
    r.self_cpu_memory_usage = r.self_cpu_memory_usage + e.self_cpu_mem
    r.cuda_memory_usage = r.cuda_memory_usage + e.dev_mem
    r.self_cuda_memory_usage = r.self_cuda_memory_usage + e.self_dev_mem
  end
  for _, r in ipairs(rows) do r.cpu_time = r.cpu_time_total / r.count r.cuda_time = r.cuda_time_total / r.count end
  return setmetatable({rows = rows, _opts = self._opts, _by_shape = by_shape}, EventList)
end

local SORT_KEYS = {cpu_time_total = true, self_cpu_time_total = true, cuda_time_total = true,
  self_cuda_time_total = true, cpu_memory_usage = true, self_cpu_memory_usage = true, cuda_memory_usage = true,
  self_cuda_memory_usage = true, count = true, cpu_time = true, cuda_time = true, launches = true, syncs = true}

-- the table PyTorch prints: sort_by (descending), row_limit, max_name_column_width = 55;
-- names = "aten" shows a kernel's ATen name where it has one (two kernels
-- with the same ATen name stay two rows)
function EventList:table(opts)
  opts = opts or {}
  if type(opts) ~= "table" then raise("table: expected an options table, got %s", type(opts)) end
  A.check_opts("table", opts, {sort_by = true, row_limit = true, max_name_column_width = true, names = true})
  if opts.names ~= nil and opts.names ~= "aten" and opts.names ~= "tensh" then
    raise("table: option 'names': \"aten\" or \"tensh\" expected, got %s", tostring(opts.names))
  end
  local function row_name(r) return opts.names == "aten" and r.aten_name or r.key end
  local rows = table.move(self.rows, 1, #self.rows, 1, {})
  if opts.sort_by then
    if not SORT_KEYS[opts.sort_by] then raise("table: option 'sort_by': unknown key '%s'", tostring(opts.sort_by)) end
    table.sort(rows, function(a, b) return a[opts.sort_by] > b[opts.sort_by] end)
  end
  local limit = opts.row_limit or 100
  if limit >= 0 and #rows > limit then rows = table.move(rows, 1, limit, 1, {}) end
  local has_cuda = self._opts.cuda
  local mem = self._opts.profile_memory
  local max_name = opts.max_name_column_width or 55
  local name_w = 0
  for _, r in ipairs(self.rows) do name_w = math.max(name_w, #row_name(r) + 4) end
  name_w = math.min(math.max(name_w, 8), max_name)
  local headers = {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"}
  if has_cuda then for _, h in ipairs({"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"}) do headers[#headers + 1] = h end end
  if mem then
    headers[#headers + 1] = "CPU Mem"
    headers[#headers + 1] = "Self CPU Mem"
    if has_cuda then headers[#headers + 1] = "CUDA Mem" headers[#headers + 1] = "Self CUDA Mem" end
  end
  headers[#headers + 1] = "# of Calls"
  if has_cuda then headers[#headers + 1] = "# Launches" headers[#headers + 1] = "# Syncs" end
  local widths = {name_w}
  for i = 2, #headers do widths[i] = 12 end
  if self._by_shape then
    local w = 0
    for _, r in ipairs(self.rows) do w = math.max(w, #r.input_shapes + 4) end
    headers[#headers + 1] = "Input Shapes"
    widths[#widths + 1] = math.min(w, 80)
  end
  local function line(values)
    local parts = {}
    for i, v in ipairs(values) do parts[i] = ("%" .. widths[i] .. "s"):format(v) .. "  " end
    return table.concat(parts)
  end
  local sep = {}
  for i, w in ipairs(widths) do sep[i] = ("-"):rep(w) .. "  " end
  sep = table.concat(sep)
  local total_self, total_cuda = 0, 0
  for _, r in ipairs(self.rows) do total_self = total_self + r.self_cpu_time_total total_cuda = total_cuda + r.self_cuda_time_total end
  local out = {sep, line(headers), sep}
  for _, r in ipairs(rows) do
    local name = row_name(r)
    if #name >= max_name - 3 then name = name:sub(1, max_name - 3) .. "..." end
    local v = {name, format_share(r.self_cpu_time_total, total_self), format_time(r.self_cpu_time_total),
      format_share(r.cpu_time_total, total_self), format_time(r.cpu_time_total), format_time(r.cpu_time)}
    if has_cuda then
      for _, x in ipairs({format_time(r.self_cuda_time_total), format_share(r.self_cuda_time_total, total_cuda),
        format_time(r.cuda_time_total), format_time(r.cuda_time)}) do v[#v + 1] = x end
    end
    if mem then
      v[#v + 1] = format_memory(r.cpu_memory_usage)
      v[#v + 1] = format_memory(r.self_cpu_memory_usage)
      if has_cuda then v[#v + 1] = format_memory(r.cuda_memory_usage) v[#v + 1] = format_memory(r.self_cuda_memory_usage) end
    end
    v[#v + 1] = tostring(r.count)
    if has_cuda then v[#v + 1] = tostring(r.launches) v[#v + 1] = tostring(r.syncs) end
    if self._by_shape then v[#v + 1] = r.input_shapes:sub(1, widths[#widths]) end
    out[#out + 1] = line(v)
  end
  out[#out + 1] = sep
  out[#out + 1] = "Self CPU time total: " .. format_time(total_self)
  if has_cuda then out[#out + 1] = "Self CUDA time total: " .. format_time(total_cuda) end
  return table.concat(out, "\n") .. "\n"
end
EventList.__tostring = function(self) return self:table() end
EventList.__len = function(self) return #self.rows end
EventList.__index = function(self, k)
  if math.type(k) == "integer" then return rawget(self, "rows")[k] end
  return EventList[k]
end

-- ---- Chrome trace ----------------------------------------------------------------------

local CATEGORY = {op = "cpu_op", backward = "backward", user = "user_annotation", runtime = "cuda_runtime",
  kernel = "kernel", memcpy = "gpu_memcpy", memset = "gpu_memset"}

-- prof:export_chrome_trace(path): the Trace Event Format (complete "X"
-- events, microseconds) that chrome://tracing and Perfetto open. Host events
-- are on the "host" track; kernels, copies and fills on a track per stream
-- (PyTorch numbers the default stream 7), each linked to its runtime call by
-- args.correlation; device times from CUDA events go on the "cuda ops" track
-- ("gpu_user_annotation"), placed at their op's start.
function Profile:export_chrome_trace(path)
  if type(path) ~= "string" then raise("export_chrome_trace: path must be a string, got %s", type(path)) end
  local pid = 0
  local f = io.open("/proc/self/stat")
  if f then pid = tonumber((f:read("l") or ""):match("^(%d+)")) or 0 f:close() end
  local evs = json.array()
  evs[1] = {ph = "M", name = "process_name", pid = pid, tid = 0, args = {name = "tensh"}}
  evs[2] = {ph = "M", name = "thread_name", pid = pid, tid = 1, args = {name = "host"}}
  local device_track = false
  local stream_tids, nstreams = {}, 0
  local function stream_tid(s)
    if not stream_tids[s] then
      nstreams = nstreams + 1
      stream_tids[s] = 100 + nstreams
      local label = s == 0 and "stream 7 (default)" or ("stream %d"):format(7 + nstreams)
      evs[#evs + 1] = {ph = "M", name = "thread_name", pid = pid, tid = stream_tids[s], args = {name = label}}
    end
    return stream_tids[s]
  end
  for i, e in ipairs(self:events()) do
    local args = {device = e.device, aten = e.kind == "op" and ATEN[e.name] or nil}
    if e.shapes then args["Input Dims"] = e.shapes end
    if e.stack then args["Call stack"] = e.stack end
    if self._opts.profile_memory then args["CPU Mem"] = e.cpu_mem args["Device Mem"] = e.dev_mem end
    local tid = 1
    if e.kind == "runtime" then
      args.correlation, args.stream, args.sync = i, e.stream, e.sync
    elseif DEVICE_WORK[e.kind] then
      tid = stream_tid(e.stream)
      args.correlation, args.stream, args.grid, args.block, args.bytes = e.correlation, e.stream, e.grid, e.block, e.bytes
    end
    evs[#evs + 1] = {ph = "X", cat = CATEGORY[e.kind], name = e.name, pid = pid, tid = tid, ts = e.ts, dur = e.dur, args = args}
    if e.device_us then
      device_track = true
      evs[#evs + 1] = {ph = "X", cat = "gpu_user_annotation", name = e.name, pid = pid, tid = 2, ts = e.ts,
        dur = e.device_us, args = {device = e.device}}
    end
  end
  if device_track then evs[#evs + 1] = {ph = "M", name = "thread_name", pid = pid, tid = 2, args = {name = "cuda ops"}} end
  local out, err = io.open(path, "w")
  if not out then raise("export_chrome_trace: cannot open '%s': %s", path, tostring(err)) end
  out:write(json.encode({traceEvents = evs, displayTimeUnit = "ms"}), "\n")
  out:close()
end

-- methods check they got their object (prof.key_averages() for prof:key_averages() says so)
local classes = require "tensh.classes"
classes.setup(Profile, {what = "torch.profiler.profile", var = "prof"})
classes.setup(Scope, {what = "torch.profiler.record_function", var = "scope"})
classes.setup(EventList, {var = "events"})

return profiler
