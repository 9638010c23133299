-- What start-up does and does not do (issue 12: start-up under 20 ms): the
-- embedded tensh.* modules are served before any file-system search, from
-- bytecode that keeps their lines, and oneDNN is opened by the first
-- convolution, not at start.
local T = require "harness"
local test, eq, ok = T.test, T.eq, T.ok
local build = os.getenv("TENSH_BUILD") or "../../build"

local function run(code)
  local p = assert(io.popen(("%s/tensh -e %q 2>&1"):format(build, code)))
  local out = p:read("a")
  p:close()
  return out
end

-- the output's non-empty lines, as a list
local function lines_of(out)
  local lines = {}
  for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
  return lines
end

test("an embedded module is found before LUA_PATH is searched", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir .. "/tensh"))
  local f = assert(io.open(dir .. "/tensh/cli.lua", "w"))
  f:write('error("the file system was searched for tensh.cli")')
  f:close()
  local saved_path, saved = package.path, package.loaded["tensh.cli"]
  package.path = dir .. "/?.lua;" .. package.path
  package.loaded["tensh.cli"] = nil
  local okr, mod = pcall(require, "tensh.cli")
  package.path, package.loaded["tensh.cli"] = saved_path, saved
  os.execute("rm -rf " .. dir)
  ok(okr, "require: " .. tostring(mod))
  eq(type(mod.parse), "function", "the embedded tensh.cli")
  -- a module that is not embedded still comes from the path
  local okm, err = pcall(require, "tensh.no_such_module")
  ok(not okm and tostring(err):find("no embedded module 'tensh.no_such_module'", 1, true), tostring(err))
end)

test("embedded modules (bytecode since tools/embed.c compiles them) keep their file names and lines", function()
  -- forward and init are checked by wrappers (classes.lua): the init they wrap
  local info = debug.getinfo(require("tensh.classes").unwrap_init(nn.Linear.init), "S")
  eq(info.source, "@lua/tensh/nn/linear.lua", "the chunk name tracebacks print")
  ok(info.linedefined > 1, "line numbers kept (the dump is not stripped): " .. info.linedefined)
  -- the library's frames show in a full traceback (a script's leaves them out)
  local out = run('os.setenv("TENSH_TRACEBACK", "full") local m = nn.Linear(1, 2) m:forward("x")')
  ok(out:find("lua/tensh/nn/linear.lua:%d+: in "), "a traceback names file and line:\n" .. out)
  ok(out:find("expected a tensor input, got string", 1, true), "and the message")
end)

test("libdnnl is opened by the first convolution, not at start", function()
  local probe = 'local n = 0 for l in io.lines("/proc/self/maps") do if l:find("libdnnl", 1, true) then n = n + 1 end end '
  eq(run(probe .. 'print("mapped", n)'):match("mapped%s+(%d+)"), "0", "libdnnl mapped after start-up")
  local out = run('local y = nn.Conv2d(2, 4, 3)(torch.randn(1, 2, 8, 8)) ' .. probe ..
    'print("mapped", n, torch.backends._library_runs("cpu"))')
  local n, runs = out:match("mapped%s+(%d+)%s+(%d+)")
  if torch.backends.mkldnn.is_available() then
    ok(tonumber(n) and tonumber(n) > 0, "libdnnl mapped after a convolution: " .. out)
    eq(runs, "1", "the convolution ran on oneDNN")
  else
    eq(runs, "0", "without oneDNN the op layer's convolution ran")
  end
end)

test("OpenBLAS is opened by the first matrix product, not at start (issue 27)", function()
  local probe = 'local n = 0 for l in io.lines("/proc/self/maps") do if l:find("libopenblas", 1, true) then n = n + 1 end end '
  eq(run(probe .. 'print("mapped", n)'):match("mapped%s+(%d+)"), "0", "libopenblas mapped after start-up")
  local out = run('local y = torch.ones(2, 3):matmul(torch.ones(3, 4)) ' .. probe .. 'print("mapped", n, y:sum():item())')
  local n, s = out:match("mapped%s+(%d+)%s+(%S+)")
  ok(tonumber(n) and tonumber(n) > 0, "libopenblas mapped after a matmul: " .. out)
  eq(tonumber(s), 24, "and the product is right")
  -- its kernels are the ones OPENBLAS_CORETYPE names: set before it loads, as it was linked
  local core = io.popen(("OPENBLAS_CORETYPE=Prescott %s/tensh -e 'print(torch._blas_info().core)' 2>&1"):format(build))
  eq(core:read("a"):match("%S+"), "Prescott", "OPENBLAS_CORETYPE read when OpenBLAS loads")
  core:close()
end)

test("nn, models, optim and profiler load on first use into the tables their globals hold (issue 27)", function()
  local out = run('local l = {} for _, n in ipairs({"nn", "models", "optim", "profiler"}) do ' ..
    'l[#l + 1] = tostring(package.loaded["tensh." .. n] ~= nil) end print(table.concat(l, " ")) ' ..
    'local nn0, o0 = nn, torch.optim local m = nn.Linear(2, 3) ' ..
    'print(nn == nn0, torch.nn == nn, require("tensh.nn") == nn, m.weight.shape[1], o0 == optim, optim.SGD ~= nil) ' ..
    'print(pcall(function() return nn.Linaer end))')
  local lines = lines_of(out)
  eq(lines[1], "false false false false", "none loaded at start: " .. out)
  eq(lines[2], "true\ttrue\ttrue\t2\ttrue\ttrue", "one table before and after loading: " .. out)
  ok(lines[3] and lines[3]:find("nn has no field 'Linaer' (did you mean 'Linear'?)", 1, true),
    "the loaded namespace is strict: " .. out)
  -- pairs() loads too; a raw next() before any read finds the stub empty, lazy.load_all() fills them all
  eq(run('local n = 0 for _ in pairs(optim) do n = n + 1 end print(n > 3)'):match("%a+"), "true", "pairs(optim)")
  eq(run('local e = next(models) == nil require("tensh.lazy").load_all() print(e, next(models) ~= nil, ' ..
    'package.loaded["tensh.profiler"] ~= nil)'), "true\ttrue\ttrue\n", "load_all")
  -- models requires tensh.nn itself: the global nn is the table it filled, and strict
  local o = run('local m = models.mobilenet_v3_small print(rawget(nn, "Linear") ~= nil, pcall(function() return nn.Linaer end))')
  ok(o:find("^true\tfalse\t.-did you mean 'Linear'"), "nn loaded by models' require, and strict: " .. o)
end)

test("data, dist and bench load on first use, under every name PyTorch gives them (issue 27)", function()
  local out = run('local l = {} for _, n in ipairs({"data", "dist", "bench"}) do ' ..
    'l[#l + 1] = tostring(package.loaded["tensh." .. n] ~= nil) end print(table.concat(l, " ")) ' ..
    'local d0, b0 = data, bench ' ..
    'print(torch.utils.data == data, torch.distributed == dist, torch.dist == dist, torch.bench == bench, ' ..
    'torch.utils.benchmark == bench, torch.utils.tensorboard ~= nil) ' ..
    'local ds = data.TensorDataset(torch.arange(4)) ' ..
    'print(data == d0, require("tensh.data") == data, ds:len(), package.loaded["tensh.bench"] ~= nil, bench.Timer ~= nil, bench == b0) ' ..
    'print(pcall(function() return data.DataLoder end))')
  local lines = lines_of(out)
  eq(lines[1], "false false false", "none loaded at start: " .. out)
  eq(lines[2], "true\ttrue\ttrue\ttrue\ttrue\ttrue", "one stub under each name: " .. out)
  eq(lines[3], "true\ttrue\t4\tfalse\ttrue\ttrue", "data loaded into its stub, bench only when read: " .. out)
  ok(lines[4] and lines[4]:find("data has no field 'DataLoder' (did you mean 'DataLoader'?)", 1, true),
    "the loaded namespace is strict: " .. out)
  eq(run('print(next(dist) == nil) require("tensh.lazy").load_all() print(next(dist) ~= nil, next(bench) ~= nil)'),
    "true\ntrue\ttrue\n", "load_all fills them")
end)

test("the library's start-up asks no function's source of debug.getinfo (issue 27)", function()
  -- classes.tensor_methods tells C methods from Lua ones with torch._is_cfunction
  local out = run('print(torch._is_cfunction(torch.ones), torch._is_cfunction(torch.flip), torch._is_cfunction(1))')
  eq(out, "true\tfalse\tfalse\n", "torch._is_cfunction")
  local e = run('local t = torch.ones(2) print(pcall(t.flip, 5, 0))')
  ok(e:find("bad argument #1 to 'flip' (tensor expected, got number; a method is called with ':'", 1, true),
    "a method written in Lua is still wrapped to check its tensor: " .. e)
end)

T.run()
