-- The names PyTorch code reaches for beyond the tensor ops: torch.nn,
-- torch.optim, torch.utils.data, torch.version, os.setenv (Python's
-- os.environ[...] = ...), and the tensh.time module (Python's time).
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises

test("torch.nn, torch.optim, torch.utils.data are the nn, optim and data globals", function()
  ok(rawequal(torch.nn, nn), "torch.nn")
  ok(rawequal(torch.nn.functional, nn.functional), "torch.nn.functional")
  ok(rawequal(torch.optim, optim), "torch.optim")
  ok(rawequal(torch.utils.data, data), "torch.utils.data")
  ok(rawequal(torch.utils.data.DataLoader, data.DataLoader), "torch.utils.data.DataLoader")
  ok(rawequal(torch.cuda, cuda), "torch.cuda")
  local m = torch.nn.Linear(2, 3)
  local opt = torch.optim.SGD(m:parameters(), {lr = 0.1})
  ok(opt ~= nil, "torch.optim.SGD builds")
end)

test("torch.version.cuda is the CUDA runtime tensh was built with, nil without CUDA", function()
  eq(type(torch.version), "table", "torch.version")
  eq(torch.version.cuda, cuda.version, "torch.version.cuda == cuda.version")
  if torch.version.cuda ~= nil then
    ok(torch.version.cuda:match("^%d+%.%d+$") ~= nil, "major.minor: " .. torch.version.cuda)
  end
  eq(torch.version.__version__, torch.__version__, "torch.version.__version__")
end)

test("os.setenv sets and unsets a variable for this process and its children", function()
  local name = "TENSH_TEST_SETENV"
  os.setenv(name, "1,2,3")
  eq(os.getenv(name), "1,2,3", "getenv after setenv")
  local p = assert(io.popen("printf '%s' \"$" .. name .. "\""))
  eq(p:read("a"), "1,2,3", "a child process sees it")
  p:close()
  os.setenv(name, 7)
  eq(os.getenv(name), "7", "a number is written as text")
  os.setenv(name, nil)
  eq(os.getenv(name), nil, "nil unsets")
  os.setenv(name) -- unsetting twice is fine
  raises(function() os.setenv("A=B", "x") end, "os.setenv: invalid variable name 'A=B'")
  raises(function() os.setenv("", "x") end, "os.setenv: invalid variable name ''")
  raises(function() os.setenv(name, {}) end, "string or nil expected")
end)

test("tensh.time: time() is the epoch clock to sub-second resolution, perf_counter() is monotonic", function()
  local time = require "tensh.time"
  local t = time.time()
  eq(math.type(t), "float", "time.time() is a float")
  -- os.time() truncates a coarse clock that may lag the precise one by a tick (<= 10 ms)
  ok(math.abs(t - os.time()) <= 1.02, ("time.time() %.3f agrees with os.time() %d"):format(t, os.time()))
  local a = time.perf_counter()
  local x = torch.randn(256, 256)
  for _ = 1, 5 do x = x:matmul(x) / 256 end
  local b = time.perf_counter()
  ok(b >= a, "perf_counter() never goes back")
  ok(b - a < 60, "perf_counter() counts seconds")
  -- sub-second resolution: two readings a few milliseconds apart differ
  local t0 = time.time()
  local t1 = t0
  for _ = 1, 1e7 do t1 = time.time() if t1 > t0 then break end end
  ok(t1 > t0 and t1 - t0 < 0.5, "time.time() advances in less than a second")
  ok(rawequal(require "tensh.time", time), "one module")
end)

T.run()
