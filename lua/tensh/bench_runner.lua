-- `tensh bench`: runs benchmark files for CI.
--
--   tensh bench [files or folders] [--filter S] [--json out.jsonl]
--               [--baseline base.jsonl] [--threshold 5%] [--repeat N]
--               [--min-run-time 0.2] [--summary summary.md]
--
-- A benchmark file registers cases with bench.case(name, fn, {setup =,
-- params = {...}}); a folder means its bench_*.lua and *_bench.lua files.
-- Each case is measured with bench.Timer's blocked_autorange (--repeat
-- times, merged) and written as one JSON line. With a baseline, medians are
-- compared case by case: a change is a regression (or an improvement) only
-- when it exceeds the threshold and the noise of both runs (the sum of their
-- interquartile ranges). A Markdown summary is printed (and appended to
-- $GITHUB_STEP_SUMMARY or --summary). Exit status: 0, 1 on any regression,
-- 2 when the command or a benchmark file is wrong.
local torch = torch
local bench = require "tensh.bench"
local json = require "tensh.json"

local runner = {}
runner.SCHEMA = 1

local USAGE = [[
usage: tensh bench [files or folders] [options]
  --filter S          only cases whose name contains S
  --json FILE         write one JSON line per case to FILE
  --baseline FILE     compare with the JSON lines of an earlier run
  --threshold P       a change below P percent is no change (default 5%)
  --repeat N          measure each case N times and merge (default 1)
  --min-run-time S    seconds of timed blocks per measurement (default 0.2)
  --summary FILE      also write the Markdown summary to FILE
  --list              load the files and print their cases' names, measure nothing
  -h, --help          show this help]]

local function usage_error(msg)
  io.stderr:write("tensh bench: ", msg, "\n", USAGE, "\n")
  return nil, 2
end

-- argv: a list of strings -> options, or nil and an exit code
function runner.parse(argv)
  local o = {paths = {}, threshold = 0.05, ["repeat"] = 1, min_run_time = 0.2}
  local i = 1
  local function value(name)
    local v = argv[i + 1]
    if v == nil then return nil end
    i = i + 1
    return v
  end
  while argv[i] do
    local a = argv[i]
    local name, inline = a:match("^%-%-([%w%-]+)=(.*)$")
    name = name or a:match("^%-%-([%w%-]+)$")
    if a == "-h" or a == "--help" then
      print(USAGE)
      return nil, 0
    elseif a == "--list" then
      o.list = true
    elseif name then
      local known = {filter = 1, json = 1, baseline = 1, summary = 1, threshold = 1, ["repeat"] = 1, ["min-run-time"] = 1}
      if not known[name] then return usage_error(("unknown option '%s'"):format(a)) end
      local v = inline
      if v == nil then v = value(name) end
      if v == nil then return usage_error(("option --%s needs a value"):format(name)) end
      if name == "filter" then o.filter = v
      elseif name == "json" then o.json = v
      elseif name == "baseline" then o.baseline = v
      elseif name == "summary" then o.summary = v
      elseif name == "threshold" then
        local num = tonumber((v:gsub("%%$", "")))
        if not num or num < 0 then return usage_error(("--threshold expects a percentage such as 5%%, got '%s'"):format(v)) end
        o.threshold = num / 100
      elseif name == "repeat" then
        local n = math.tointeger(tonumber(v))
        if not n or n < 1 then return usage_error(("--repeat expects a positive integer, got '%s'"):format(v)) end
        o["repeat"] = n
      elseif name == "min-run-time" then
        local s = tonumber(v)
        if not s or s <= 0 then return usage_error(("--min-run-time expects seconds > 0, got '%s'"):format(v)) end
        o.min_run_time = s
      end
    elseif a:sub(1, 1) == "-" then
      return usage_error(("unknown option '%s'"):format(a))
    else
      o.paths[#o.paths + 1] = a
    end
    i = i + 1
  end
  if #o.paths == 0 then return usage_error("no benchmark files or folders given") end
  return o
end

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- the benchmark files of a path: itself, or a folder's bench_*.lua and *_bench.lua, sorted
function runner.files(path)
  local f = io.open(path)
  if not f then return nil, ("cannot open '%s'"):format(path) end
  local _, err = f:read(1) -- reading a folder fails with "Is a directory"
  local is_dir = err ~= nil
  f:close()
  if not is_dir then return {path} end
  local p = io.popen(("find %s -type f \\( -name 'bench_*.lua' -o -name '*_bench.lua' \\) | LC_ALL=C sort")
    :format(shell_quote(path)))
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

-- reads a JSON-lines baseline: case name -> record
function runner.read_baseline(path)
  local f, err = io.open(path)
  if not f then return nil, ("cannot read baseline '%s': %s"):format(path, tostring(err)) end
  local by_case, n = {}, 0
  for line in f:lines() do
    n = n + 1
    if line:match("%S") then
      local ok, rec = pcall(json.decode, line)
      if not ok then f:close() return nil, ("%s:%d: %s"):format(path, n, rec) end
      if type(rec) ~= "table" or type(rec.case) ~= "string" or type(rec.median) ~= "number" then
        f:close()
        return nil, ("%s:%d: expected an object with case and median"):format(path, n)
      end
      by_case[rec.case] = rec
    end
  end
  f:close()
  return by_case
end

-- old, new: records with median and iqr (seconds) -> verdict, relative change
function runner.verdict(old, new, threshold)
  if not old then return "new", nil end
  local delta = new.median - old.median
  local change = delta / old.median
  if math.abs(change) <= threshold then return "unchanged", change end
  if math.abs(delta) <= (old.iqr or 0) + (new.iqr or 0) then return "noise", change end
  return delta > 0 and "regression" or "improvement", change
end

local function fmt_time(s)
  if not s then return "" end
  local unit, scale = bench.select_unit(s)
  return ("%.3g %s"):format(s / scale, unit)
end

local ICON = {regression = "❌ regression", improvement = "✅ improvement", unchanged = "unchanged",
  noise = "within noise", new = "new"}

function runner.summary(results, opts)
  local lines = {"## tensh bench", ""}
  local counts = {}
  for _, r in ipairs(results) do counts[r.verdict] = (counts[r.verdict] or 0) + 1 end
  local parts = {}
  for _, v in ipairs({"regression", "improvement", "noise", "unchanged", "new", "error"}) do
    if counts[v] then parts[#parts + 1] = ("%d %s"):format(counts[v], v) end
  end
  lines[#lines + 1] = ("%d cases: %s (threshold %.4g%%)"):format(#results, table.concat(parts, ", "), opts.threshold * 100)
  lines[#lines + 1] = ""
  lines[#lines + 1] = "| case | baseline | median | IQR | change | verdict |"
  lines[#lines + 1] = "|---|---:|---:|---:|---:|---|"
  for _, r in ipairs(results) do
    local rec = r.record or {}
    lines[#lines + 1] = ("| %s | %s | %s | %s | %s | %s |"):format(r.case:gsub("|", "\\|"), fmt_time(r.old and r.old.median),
      fmt_time(rec.median), fmt_time(rec.iqr), r.change and ("%+.1f%%"):format(r.change * 100) or "",
      r.verdict == "error" and ("error: " .. tostring(r.error):gsub("[|\n]", " ")) or ICON[r.verdict])
  end
  local env = results[1] and results[1].record and results[1].record.env
  if env then
    lines[#lines + 1] = ""
    lines[#lines + 1] = ("%s build, %s (%s), BLAS %s, commit %s"):format(env.build, env.device, env.device_name,
      env.blas_core, env.commit or "unknown")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- A case's params as its JSON line records them: numbers, strings and
-- booleans as they are, a tensor by its shape and dtype, anything else (a
-- table, a function, a module) left out: JSON has no userdata.
local function json_params(params)
  if params == nil then return nil end
  local out = {}
  for k, v in pairs(params) do
    local tv = type(v)
    if type(k) ~= "string" then -- bench.case allows only string keys; a setup's own are left out
    elseif tv == "number" or tv == "string" or tv == "boolean" then out[k] = v
    elseif torch.is_tensor(v) then
      local ok, shape = pcall(function() return v.shape:totable() end) -- a freed tensor has none
      if ok then out[k] = {shape = json.array(shape), dtype = v.dtype} end
    end
  end
  return out
end
runner.json_params = json_params

-- measures one registered case -> its JSON record. setup gets a copy of the
-- grid point, so what it stores there (the tensors fn uses) stays out of
-- the record's params; its result is fn's argument (the point if it returns nothing).
function runner.measure(case, opts, file)
  local ctx = {}
  for k, v in pairs(case.params or {}) do ctx[k] = v end
  if case.setup then
    local made = case.setup(ctx)
    if made ~= nil then ctx = made end
  end
  local fn = case.fn
  local stmt = function() fn(ctx) end
  local ms = {}
  local warm = {runs = 0, seconds = 0}
  local last
  for i = 1, opts["repeat"] do
    local t = bench.Timer({stmt = stmt, label = case.base, sub_label = case.name, device = case.device,
      num_threads = case.num_threads or torch.get_num_threads()})
    last = t:blocked_autorange({min_run_time = case.min_run_time or opts.min_run_time})
    ms[i] = last
    warm.runs = warm.runs + last.metadata.warmup.runs
    warm.seconds = warm.seconds + last.metadata.warmup.seconds
  end
  local m = #ms == 1 and ms[1] or bench.Measurement.merge(ms)[1]
  local rec = last:to_table()
  rec.stmt = nil
  rec.median, rec.mean, rec.iqr, rec.p25, rec.p75 = m.median, m.mean, m.iqr, m.p25, m.p75
  local per_run = json.array()
  for i, t in ipairs(m.times) do per_run[i] = t end
  local cpu = json.array()
  for _, x in ipairs(ms) do
    for _, c in ipairs(x:cpu_times() or {}) do cpu[#cpu + 1] = c end
  end
  if #cpu == #per_run then rec.cpu_times, rec.cpu_median = cpu, bench.median(cpu)
  else rec.cpu_times, rec.cpu_median = nil, nil end
  rec.block_seconds = nil
  rec.times = per_run -- seconds per run, one per block, over all repeats
  rec.number_per_run = nil
  rec.numbers_per_run = json.array()
  for i, x in ipairs(ms) do rec.numbers_per_run[i] = x.number_per_run end
  rec.schema, rec.case, rec.file, rec.params, rec["repeat"] = runner.SCHEMA, case.name, file, json_params(case.params),
    opts["repeat"]
  rec.warmup = warm
  rec.time = os.time()
  rec.device_activity = runner.device_activity(case, stmt)
  return rec
end

-- On a CUDA device, what one more (untimed) run asks of it: kernels launched,
-- host synchronisations, copies and fills (cuda.activity_counts); nil elsewhere.
function runner.device_activity(case, stmt)
  if not (cuda and cuda.is_available() and tostring(case.device or ""):find("^cuda")) then return nil end
  cuda.synchronize() -- the timed runs' work is done: only this run is counted
  local a = cuda.activity_counts()
  stmt()
  local b = cuda.activity_counts()
  cuda.synchronize()
  return {launches = b.launches - a.launches, syncs = b.syncs - a.syncs, memcpys = b.memcpys - a.memcpys,
    memsets = b.memsets - a.memsets}
end

-- one case measured, given its verdict and encoded -> its record and JSON line
local function run_case(case, opts, file, old)
  local rec = runner.measure(case, opts, file)
  rec.verdict, rec.change = runner.verdict(old, rec, opts.threshold)
  if old then rec.baseline_median = old.median end
  return rec, json.encode(rec)
end

-- runs everything; returns the exit status
function runner.run(opts, out)
  out = out or io.stdout
  local baseline = {}
  if opts.baseline then
    local b, err = runner.read_baseline(opts.baseline)
    if not b then io.stderr:write("tensh bench: ", err, "\n") return 2 end
    baseline = b
  end
  local jf
  if opts.json and not opts.list then
    local err
    jf, err = io.open(opts.json, "w")
    if not jf then io.stderr:write("tensh bench: cannot write '", opts.json, "': ", tostring(err), "\n") return 2 end
  end
  local results, status = {}, 0
  for _, path in ipairs(opts.paths) do
    local files, err = runner.files(path)
    if not files then io.stderr:write("tensh bench: ", err, "\n") status = 2 files = {} end
    for _, file in ipairs(files) do
      bench.cases(true)
      local ok, ferr = pcall(dofile, file)
      local cases = bench.cases(true)
      if not ok then
        io.stderr:write("tensh bench: ", file, ": ", tostring(ferr), "\n")
        results[#results + 1] = {case = file, verdict = "error", error = ferr}
        status = 2
      end
      for _, case in ipairs(ok and cases or {}) do
        if opts.list and (not opts.filter or case.name:find(opts.filter, 1, true)) then
          out:write(case.name, "\t", file, "\n")
        elseif not opts.filter or case.name:find(opts.filter, 1, true) then
          -- a case that fails (its setup, its fn, its record) is reported in its row; the run goes on
          local old = baseline[case.name]
          local mok, rec, line = pcall(run_case, case, opts, file, old)
          if not mok then
            io.stderr:write("tensh bench: ", case.name, ": ", tostring(rec), "\n")
            results[#results + 1] = {case = case.name, verdict = "error", error = rec}
            status = 2
          else
            local verdict, change = rec.verdict, rec.change
            if jf then jf:write(line, "\n") jf:flush() end
            out:write(("%-50s %10s  IQR %10s  %s%s\n"):format(case.name, fmt_time(rec.median), fmt_time(rec.iqr),
              ICON[verdict], change and (" (%+.1f%%)"):format(change * 100) or ""))
            results[#results + 1] = {case = case.name, record = rec, old = old, verdict = verdict, change = change}
            if verdict == "regression" and status == 0 then status = 1 end
          end
        end
      end
    end
  end
  if jf then jf:close() end
  if opts.list then return status end
  local md = runner.summary(results, opts)
  out:write("\n", md)
  for _, path in ipairs({opts.summary, os.getenv("GITHUB_STEP_SUMMARY")}) do
    if path and path ~= "" then
      local f = io.open(path, "a")
      if f then f:write(md) f:close() end
    end
  end
  return status
end

-- the `tensh bench` entry: argv as the shell's arg table (arg[1] on)
function runner.main(argv)
  local list = {}
  for i = 1, #argv do list[i] = argv[i] end
  local opts, code = runner.parse(list)
  if not opts then return code end
  return runner.run(opts)
end

return runner
