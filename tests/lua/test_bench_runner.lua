-- `tensh bench`: its verdicts on a fixture baseline (a regression, an
-- improvement, noise, a change within the threshold, a new case), the exit
-- codes, the JSON schema of its lines, the grid expansion of bench.case,
-- the Markdown summary and the command line's errors. The verdict cases
-- stub the measurement (the Timer has its own tests); one run measures for
-- real, through the tensh executable, as CI calls it.
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises
local json = require "tensh.json"
local runner = require "tensh.bench_runner"

local build = os.getenv("TENSH_BUILD") or "../../build"

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'"))
  return d
end
local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end
local function read(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end
local function sink()
  local out = {}
  return {write = function(self, ...) for _, s in ipairs({...}) do out[#out + 1] = s end end, text = function() return table.concat(out) end}
end

test("verdicts: threshold and the noise of both runs", function()
  local th = 0.05
  eq(runner.verdict({median = 1.0, iqr = 0.01}, {median = 1.2, iqr = 0.01}, th), "regression", "20% slower, tight")
  eq(runner.verdict({median = 1.0, iqr = 0.01}, {median = 0.8, iqr = 0.01}, th), "improvement", "20% faster, tight")
  eq(runner.verdict({median = 1.0, iqr = 0.01}, {median = 1.04, iqr = 0.01}, th), "unchanged", "4% < 5%")
  eq(runner.verdict({median = 1.0, iqr = 0.15}, {median = 1.2, iqr = 0.1}, th), "noise", "20% slower, IQRs sum to 25%")
  eq(runner.verdict({median = 1.0, iqr = 0.1}, {median = 1.2, iqr = 0.09}, th), "regression", "IQRs sum to 19% < 20%")
  eq(runner.verdict(nil, {median = 1.0, iqr = 0}, th), "new", "no baseline")
  local _, change = runner.verdict({median = 2.0, iqr = 0}, {median = 3.0, iqr = 0}, th)
  T.close({change}, {0.5}, 1e-12, 0, "relative change")
end)

test("bench.case expands its params as a grid", function()
  bench.cases(true)
  bench.case("add", function() end, {params = {n = {1, 10}, dtype = {"float32", "float64"}}})
  bench.case("plain", function() end)
  local names = {}
  for i, c in ipairs(bench.cases(true)) do names[i] = c.name end
  eq(T.fmt(names), T.fmt({"add[dtype=float32,n=1]", "add[dtype=float32,n=10]", "add[dtype=float64,n=1]",
    "add[dtype=float64,n=10]", "plain"}), "one case per point, keys sorted")
  raises(function() bench.case("x", function() end, {params = {n = {}}}) end, "params.n must be a non-empty list")
  raises(function() bench.case("x", 5) end, "bench.case: fn must be a function, got number")
  raises(function() bench.case("x", function() end, {warmup = 1}) end, "bench.case: unknown option 'warmup'")
  bench.cases(true)
end)

-- a fixture baseline and stubbed measurements: each case's record is given
local BASE = {
  {case = "slower", median = 1e-3, iqr = 1e-5}, {case = "faster", median = 1e-3, iqr = 1e-5},
  {case = "noisy", median = 1e-3, iqr = 4e-4}, {case = "same", median = 1e-3, iqr = 1e-5},
}
local NOW = {slower = {1.5e-3, 1e-5}, faster = {0.5e-3, 1e-5}, noisy = {1.3e-3, 2e-4}, same = {1.02e-3, 1e-5},
  fresh = {1e-3, 1e-5}}

local function run_stubbed(dir, only)
  local lines = {}
  for _, r in ipairs(BASE) do lines[#lines + 1] = json.encode(r) end
  write(dir .. "/base.jsonl", table.concat(lines, "\n") .. "\n")
  local cases = {}
  for name in pairs(NOW) do if not only or only[name] then cases[#cases + 1] = ("bench.case(%q, function() end)"):format(name) end end
  table.sort(cases)
  write(dir .. "/bench_fixture.lua", table.concat(cases, "\n") .. "\n")
  local real = runner.measure
  runner.measure = function(case) return {case = case.name, median = NOW[case.name][1], iqr = NOW[case.name][2], schema = 1} end
  local out = sink()
  local okr, status = pcall(runner.run, {paths = {dir}, baseline = dir .. "/base.jsonl", json = dir .. "/out.jsonl",
    threshold = 0.05, ["repeat"] = 1, min_run_time = 0.01, summary = dir .. "/summary.md"}, out)
  runner.measure = real
  assert(okr, status)
  return status, out:text()
end

test("the runner's verdicts on a fixture baseline, its exit status and summary", function()
  local dir = tmpdir()
  local status, text = run_stubbed(dir)
  eq(status, 1, "a regression: exit 1")
  local verdicts = {}
  for line in read(dir .. "/out.jsonl"):gmatch("[^\n]+") do
    local r = json.decode(line)
    verdicts[r.case] = r.verdict
  end
  eq(verdicts.slower, "regression", "50% slower")
  eq(verdicts.faster, "improvement", "50% faster")
  eq(verdicts.noisy, "noise", "30% slower, but the IQRs sum to 60%")
  eq(verdicts.same, "unchanged", "2% is within 5%")
  eq(verdicts.fresh, "new", "not in the baseline")
  ok(text:find("| case | baseline | median | IQR | change | verdict |", 1, true), "a Markdown table")
  ok(text:find("| slower | 1 ms | 1.5 ms | 10 us | +50.0% | ❌ regression |", 1, true), "the regression's row")
  ok(text:find("5 cases: 1 regression, 1 improvement, 1 noise, 1 unchanged, 1 new", 1, true), "the count line")
  eq(read(dir .. "/summary.md"), text:match("\n(## tensh bench.*)$"), "--summary gets the same Markdown")
  local status2 = run_stubbed(dir, {faster = true, same = true, noisy = true})
  eq(status2, 0, "no regression: exit 0")
  os.execute("rm -rf '" .. dir .. "'")
end)

test("tensh bench measures for real: JSON lines, schema, filter, exit codes", function()
  local dir = tmpdir()
  write(dir .. "/bench_spin.lua", [[
bench.case("spin", function(p) torch._busy_wait(p.s) end, {params = {s = {0.0005}}})
bench.case("alloc", function(ctx) local y = ctx.a + ctx.a end, {setup = function() return {a = torch.ones(1000)} end})
]])
  local exe = build .. "/tensh"
  local function sh(args)
    local p = io.popen(("cd '%s' && '%s' bench %s 2>&1; echo \"exit=$?\""):format(dir, exe, args))
    local s = p:read("a")
    p:close()
    return s, tonumber(s:match("exit=(%d+)%s*$"))
  end
  local text, code = sh(". --json out.jsonl --min-run-time 0.02")
  eq(code, 0, "exit 0 without a baseline: " .. text)
  local recs = {}
  for line in read(dir .. "/out.jsonl"):gmatch("[^\n]+") do
    local r = json.decode(line)
    recs[r.case] = r
  end
  local spin = recs["spin[s=0.0005]"]
  ok(spin and recs.alloc, "one line per case")
  for _, k in ipairs({"schema", "case", "file", "median", "mean", "iqr", "p25", "p75", "times", "numbers_per_run",
                      "warmup", "env", "peak_cpu_bytes", "peak_device_bytes", "num_threads", "verdict", "repeat"}) do
    ok(spin[k] ~= nil, "the line has " .. k)
  end
  eq(spin.schema, 1, "schema version")
  if spin.env.device == "cpu" then -- the process's CPU time per run, one per block, beside the wall time
    eq(#spin.cpu_times, #spin.times, "a CPU time per block")
    ok(spin.cpu_median > 0 and spin.cpu_median < 1, "the spin's CPU time per run: " .. spin.cpu_median)
  end
  eq(spin.params.s, 0.0005, "the grid point")
  -- (on the simulated device CUDA events time only queued device work, not a host spin)
  if not (spin.env.build == "simulated" and spin.env.device:find("^cuda")) then
    ok(spin.median >= 0.0005, "the spin's median is at least its length: " .. spin.median)
  end
  ok(spin.warmup.runs >= 1, "warm-up reported")
  for _, k in ipairs({"threads", "build", "blas_core", "device", "device_name"}) do ok(spin.env[k] ~= nil, "env." .. k) end
  -- a baseline that makes the spin a regression (1 ns before) and alloc an improvement
  write(dir .. "/base.jsonl", json.encode({case = "spin[s=0.0005]", median = 1e-9, iqr = 0}) .. "\n" ..
    json.encode({case = "alloc", median = 10, iqr = 0}) .. "\n")
  local text2, code2 = sh(". --baseline base.jsonl --threshold 5% --min-run-time 0.02")
  eq(code2, 1, "a regression exits 1: " .. text2)
  ok(text2:find("regression", 1, true) and text2:find("improvement", 1, true), "both verdicts shown")
  local text3, code3 = sh(". --filter alloc --baseline base.jsonl --min-run-time 0.02 --repeat 2")
  eq(code3, 0, "filtered to the improvement: exit 0: " .. text3)
  ok(not text3:find("spin", 1, true), "the filter leaves spin out")
  local _, c4 = sh("--threshold x .")
  eq(c4, 2, "a bad option exits 2")
  local _, c5 = sh("--bogus .")
  eq(c5, 2, "an unknown option exits 2")
  local _, c6 = sh("missing_dir")
  eq(c6, 2, "a missing path exits 2")
  write(dir .. "/broken_bench.lua", "error('broken file')\n")
  local t7, c7 = sh("broken_bench.lua")
  eq(c7, 2, "a failing benchmark file exits 2")
  ok(t7:find("broken file", 1, true), "and says why")
  local _, c8 = sh("")
  eq(c8, 2, "no paths: usage, exit 2")
  -- a script named bench in the current folder still runs as a script
  write(dir .. "/bench", "print('the script ran') os.exit(0)\n")
  local t9 = sh("")
  ok(t9:find("the script ran", 1, true), "./bench is a script: " .. t9)
  os.execute("rm -rf '" .. dir .. "'")
end)

test("a setup that stores tensors in its params, a failing case: each in its row, the run goes on", function()
  local dir = tmpdir()
  -- cases run in registration order: the failing ones first, a good one last
  write(dir .. "/bench_params.lua", [[
bench.case("stores", function(p) local _ = p.a + p.a end,
  {params = {n = {4}}, setup = function(p) p.a = torch.randn(p.n, p.n); return p end})
bench.case("no_return", function(p) local _ = p.a + 1 end, {setup = function(p) p.a = torch.ones(3) end})
bench.case("fails", function() error("the case broke") end)
bench.case("declared", function(p) local _ = p.t + 1 end, {params = {t = {torch.ones(2, 3, {dtype = torch.float64})}}})
bench.case("last", function() local _ = 1 + 1 end)
]])
  local p = io.popen(("cd '%s' && '%s' bench . --json out.jsonl --min-run-time 0.01 2>&1; echo \"exit=$?\"")
    :format(dir, build .. "/tensh"))
  local text = p:read("a")
  p:close()
  eq(tonumber(text:match("exit=(%d+)%s*$")), 2, "a failing case exits 2: " .. text)
  ok(not text:find("cannot encode", 1, true), "no JSON error: " .. text)
  ok(text:find("| fails |", 1, true) and text:find("error: [^|]*the case broke"), "the failure in its row: " .. text)
  local recs = {}
  for line in (read(dir .. "/out.jsonl") or ""):gmatch("[^\n]+") do
    local r = json.decode(line)
    recs[r.case] = r
  end
  local stores = recs["stores[n=4]"]
  ok(stores and recs.no_return and recs.last, "the other cases were measured: " .. text)
  ok(not recs.fails, "no line for the failed case")
  for k in pairs(stores.params) do eq(k, "n", "the grid point's only key: setup's tensor stays out") end
  eq(stores.params.n, 4, "its value")
  local declared
  for name, r in pairs(recs) do if name:find("^declared") then declared = r end end
  ok(declared, "a tensor in the grid: " .. text)
  eq(T.fmt(declared.params.t.shape), T.fmt({2, 3}), "described by its shape")
  eq(declared.params.t.dtype, "torch.float64", "and dtype")
  local jp = runner.json_params({n = 1, s = "x", f = false, fn = print, l = {1}})
  for k in pairs(jp) do ok(k == "n" or k == "s" or k == "f", "functions and tables left out, not " .. k) end
  ok(jp.n == 1 and jp.s == "x" and jp.f == false, "numbers, strings, booleans kept")
  os.execute("rm -rf '" .. dir .. "'")
end)

test("make bench's files load and register their cases (tensh bench --list scripts/bench)", function()
  local exe, dir = build .. "/tensh", "../../scripts/bench"
  local function list(args)
    local p = io.popen(("BENCH_FASHION=0 '%s' bench --list %s 2>&1; echo \"exit=$?\""):format(exe, args))
    local s = p:read("a")
    p:close()
    local names = {}
    for name, file in s:gmatch("([^\t\n]+)\t([^\n]+)") do names[name] = file end
    return s, names, tonumber(s:match("exit=(%d+)%s*$"))
  end
  local text, names, code = list(dir)
  eq(code, 0, "every file loads: " .. text)
  ok(not text:find("tensh bench:", 1, true), "no file failed: " .. text)
  -- the cases make bench pairs with the PyTorch twins (peers.py names them alike), and tensh's own
  for _, case in ipairs({"op_overhead_add1", "add_bandwidth", "matmul[dtype=float32]", "softmax_rows", "log_softmax_rows",
                         "mlp_seed003", "lstm_lm_train", "startup", "cnn_step", "amp_step[mode=amp]", "amp_step[mode=float32]"}) do
    ok(names[case], "registers " .. case .. ": " .. text)
  end
  eq(names.mlp_seed003, dir .. "/bench_mlp_seed003.lua", "with the file it came from")
  ok(not names.fashion_mnist_cnn, "BENCH_FASHION=0 leaves the epochs out")
  local text2, names2, code2 = list(dir .. " --filter amp_step")
  eq(code2, 0, "--list --filter: " .. text2)
  ok(names2["amp_step[mode=amp]"] and not names2.mlp_seed003, "the filter applies to the list")
end)

T.run()
