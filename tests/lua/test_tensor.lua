-- Creation, dtypes, views, indexing, conversion, queries and the binding's
-- memory pacing, each against values computed here.
local T = require "harness"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok

test("torch.tensor infers shape and dtype from nested tables", function()
  local x = torch.tensor({{1, 2, 3}, {4, 5, 6}})
  eq(tostring(x.shape), "torch.Size([2, 3])", "shape")
  eq(x.dtype, torch.int64, "integers give int64")
  eq(torch.tensor({1, 2.5}).dtype, torch.float32, "a float gives float32")
  eq(torch.tensor({true, false}).dtype, torch.bool, "booleans give bool")
  eq(torch.tensor(3).dim(torch.tensor(3)), 0, "a number gives 0-dim")
  eq(torch.tensor({}).numel(torch.tensor({})), 0, "empty list")
  local d = torch.tensor({1, 2}, {dtype = "float64"})
  eq(d.dtype, "torch.float64", "dtype option")
  close(d, {1, 2})
  raises(function() torch.tensor({{1, 2}, {3}}) end, "ragged")
  raises(function() torch.tensor({1, "a"}) end, "expected numbers or booleans, got string")
  raises(function() torch.tensor({1}, {dtype = "float128"}) end, "unknown dtype 'float128'")
  raises(function() torch.tensor({1}, {device = "tpu"}) end, "unknown device 'tpu'")
end)

test("every dtype round-trips its values", function()
  local cases = {float32 = {1.5, -2.25}, float64 = {1e-300, -3.5}, float16 = {0.5, -1024}, bfloat16 = {1.5, -256},
                 int64 = {9007199254740993, -5}, int32 = {2147483647, -2147483648}, uint8 = {0, 255}, bool = {true, false}}
  for dt, vals in pairs(cases) do
    local x = torch.tensor(vals, {dtype = dt})
    eq(x.dtype, "torch." .. dt, dt)
    local back = x:tolist()
    for i = 1, #vals do eq(back[i], vals[i], dt .. " element " .. i) end
  end
  eq(torch.tensor({9007199254740993}):item(), 9007199254740993, "int64 beyond 2^53 stays exact")
  eq(torch.tensor({300}):to("uint8"):item(), 44, "int to uint8 wraps as C")
  eq(torch.tensor({0.0, 2.0}):bool():tolist()[2], true, "float to bool")
  eq(torch.tensor({-1.7}):long():item(), -1, "float to int truncates")
  close(torch.tensor({1, 2}):to("float16"):double(), {1, 2})
end)

test("zeros, ones, full, empty, *_like, eye", function()
  close(torch.zeros(2, 3), {{0, 0, 0}, {0, 0, 0}})
  close(torch.ones({2}), {1, 1})
  eq(torch.zeros(2, 3).dtype, torch.float32, "default dtype")
  close(torch.full({2, 2}, 7), {{7, 7}, {7, 7}})
  eq(torch.full({1}, 7).dtype, torch.int64, "full with an integer gives int64, as torch")
  eq(torch.full({1}, 7.5).dtype, torch.float32, "full with a float")
  eq(torch.empty(3, 4):numel(), 12, "empty")
  local x = torch.ones(2, 3, {dtype = "float64"})
  eq(torch.zeros_like(x).dtype, torch.float64, "zeros_like keeps dtype")
  close(torch.ones_like(x), {{1, 1, 1}, {1, 1, 1}})
  close(torch.full_like(x, 3), {{3, 3, 3}, {3, 3, 3}})
  eq(tostring(torch.empty_like(x).shape), "torch.Size([2, 3])", "empty_like")
  close(torch.eye(3), {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
  close(torch.eye(2, 3), {{1, 0, 0}, {0, 1, 0}})
  eq(torch.zeros(x.shape):numel(), 6, "a torch.Size as shape")
  eq(torch.zeros({}):dim(), 0, "an empty shape is 0-dim")
  raises(function() torch.zeros(-1) end, "negative size")
  raises(function() torch.zeros(1 << 40, 1 << 40) end, "more elements than")
  raises(function() torch.zeros("a") end, "sizes")
  raises(function() torch.ones(2, {requires_grad = true, dtype = "int64"}) end, "floating point")
end)

test("arange and linspace", function()
  close(torch.arange(5), {0, 1, 2, 3, 4})
  eq(torch.arange(5).dtype, torch.int64, "integer arange")
  close(torch.arange(1, 2, 0.25), {1, 1.25, 1.5, 1.75})
  eq(torch.arange(1, 2, 0.25).dtype, torch.float32, "float arange")
  close(torch.arange(10, 0, -3), {10, 7, 4, 1})
  eq(torch.arange(0):numel(), 0, "empty arange")
  close(torch.linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1})
  close(torch.linspace(-1, 1, 1), {-1})
  raises(function() torch.arange(0, 1, 0) end, "step must be nonzero")
  raises(function() torch.arange(0, 10, -1) end, "inconsistent with step sign")
  raises(function() torch.linspace(0, 1, -2) end, "non-negative")
end)

test("random: seeded, reproducible, right distribution", function()
  torch.manual_seed(42)
  local a = torch.rand(1000):tolist()
  torch.manual_seed(42)
  local b = torch.rand(1000):tolist()
  for i = 1, 1000 do eq(a[i], b[i], "same seed same values") end
  local sum, lo, hi = 0, 1, 0
  for i = 1, 1000 do sum = sum + a[i]; lo = math.min(lo, a[i]); hi = math.max(hi, a[i]) end
  ok(lo >= 0 and hi < 1, "rand in [0, 1)")
  ok(math.abs(sum / 1000 - 0.5) < 0.05, "rand mean near 0.5")
  local n = torch.randn(20000, {dtype = "float64"}):tolist()
  local m, v = 0, 0
  for i = 1, #n do m = m + n[i] end
  m = m / #n
  for i = 1, #n do v = v + (n[i] - m) ^ 2 end
  v = v / (#n - 1)
  ok(math.abs(m) < 0.03 and math.abs(v - 1) < 0.05, ("randn mean %g var %g"):format(m, v))
  local r = torch.randint(3, 7, {500}):tolist()
  local seen = {}
  for i = 1, #r do ok(r[i] >= 3 and r[i] < 7, "randint range"); seen[r[i]] = true end
  ok(seen[3] and seen[6], "randint covers its range")
  eq(torch.randint(5, {2, 3}).dtype, torch.int64, "randint dtype")
  local p = torch.randperm(50):tolist()
  table.sort(p)
  for i = 1, 50 do eq(p[i], i - 1, "randperm is a permutation") end
  local x = torch.empty(100):uniform_(-2, -1)
  for _, v in ipairs(x:tolist()) do ok(v >= -2 and v < -1, "uniform_ range") end
  local state = torch.get_rng_state()
  local r1 = torch.randn(5):tolist()
  torch.set_rng_state(state)
  local r2 = torch.randn(5):tolist()
  for i = 1, 5 do eq(r2[i], r1[i], "set_rng_state replays the stream") end
  raises(function() torch.set_rng_state({seed = 1}) end, "expected {seed = integer")
  raises(function() torch.rand(3, {dtype = "int64"}) end, "floating point")
  raises(function() torch.randint(5, 5, {3}) end, "low < high")
end)

test("views share storage; reshape copies only when it must", function()
  local x = torch.arange(12):reshape(3, 4)
  local v = x:view(4, 3)
  v[0] = 100
  eq(x[0][0]:item(), 100, "view writes through")
  eq(x:view(-1, 6).shape[1], 6, "view with -1")
  local t = x:t()
  ok(not t:is_contiguous(), "transposed is not contiguous")
  raises(function() t:view(12) end, "reshape")
  local r = t:reshape(12)
  close(r, {100, 4, 8, 100, 5, 9, 100, 6, 10, 3, 7, 11})
  local c = t:contiguous()
  ok(c:is_contiguous(), "contiguous()")
  eq(x:stride()[1], 4, "stride")
  eq(t:stride(0), 1, "stride(d)")
  raises(function() x:view(5, 3) end, "invalid for input of size 12")
  raises(function() x:view(-1, -1) end, "only one dimension can be inferred")
end)

test("transpose, permute, squeeze, unsqueeze, expand, narrow, select, flatten, unflatten", function()
  local vals = T.rand_list({2, 3, 4})
  local x = torch.tensor(vals, {dtype = "float64"})
  local p = x:permute(2, 0, 1)
  eq(tostring(p.shape), "torch.Size([4, 2, 3])", "permute shape")
  eq(p[3][1][2]:item(), vals[2][3][4], "permute element")
  eq(x:transpose(0, 2)[1][2][0]:item(), vals[1][3][2], "transpose element")
  eq(tostring(x:unsqueeze(1).shape), "torch.Size([2, 1, 3, 4])", "unsqueeze")
  eq(tostring(x:unsqueeze(-1).shape), "torch.Size([2, 3, 4, 1])", "unsqueeze -1")
  eq(tostring(x:unsqueeze(1):squeeze().shape), "torch.Size([2, 3, 4])", "squeeze")
  eq(tostring(torch.zeros(1, 2, 1):squeeze(0).shape), "torch.Size([2, 1])", "squeeze(dim)")
  eq(tostring(torch.zeros(1, 2, 1):squeeze(1).shape), "torch.Size([1, 2, 1])", "squeeze of a non-1 dim is a no-op")
  local e = torch.tensor({{1}, {2}}):expand(2, 3)
  close(e, {{1, 1, 1}, {2, 2, 2}})
  eq(e:stride(1), 0, "expanded stride is 0")
  close(torch.tensor({1, 2}):expand(2, -1), {{1, 2}, {1, 2}})
  local n = x:narrow(2, 1, 2)
  eq(n[1][2][1]:item(), vals[2][3][3], "narrow")
  eq(x:select(1, -1)[0][3]:item(), vals[1][3][4], "select negative")
  eq(tostring(x:flatten().shape), "torch.Size([24])", "flatten")
  eq(tostring(x:flatten(1).shape), "torch.Size([2, 12])", "flatten(1)")
  eq(tostring(x:flatten(1):unflatten(1, {3, -1}).shape), "torch.Size([2, 3, 4])", "unflatten")
  raises(function() x:transpose(0, 3) end, "dimension out of range (expected to be in range of [-3, 2], but got 3)")
  raises(function() x:permute(0, 1) end, "number of dims don't match")
  raises(function() x:permute(0, 0, 1) end, "more than once")
  raises(function() x:expand(3, 3, 4) end, "must match the existing size")
  raises(function() x:narrow(0, 1, 5) end, "exceeds dimension size")
  raises(function() x:select(0, 2) end, "index 2 is out of bounds for dimension 0 with size 2")
end)

test("indexing with integers and {start, stop, step} slices, counting from 0", function()
  local x = torch.arange(20):reshape(4, 5)
  eq(x[1][2]:item(), 7, "x[1][2]")
  eq(x[-1][-1]:item(), 19, "negative indices")
  close(x[{1, {1, 4}}], {6, 7, 8})
  close(x[{ {0, 4, 2}, 0 }], {0, 10})
  close(x[{ {}, -1 }], {4, 9, 14, 19})
  close(x[{ {-2}, {3} }], {{13, 14}, {18, 19}})
  close(x[{ {2, 100} }][0], {10, 11, 12, 13, 14})
  eq(x[{ {3, 1} }]:numel(), 0, "empty slice")
  eq(#x, 4, "#x is the first dim")
  raises(function() return x[4] end, "index 4 is out of bounds for dimension 0 with size 4")
  raises(function() return x[{0, 1, 2}] end, "too many indices")
  raises(function() return x[{ {0, 1, 2, 3} }] end, "expected {start, stop[, step]}")
  raises(function() return x[{ {0, 2, 0} }] end, "step must be positive")
  raises(function() return x[true] end, "expected an integer")
  raises(function() return #torch.tensor(1) end, "0-d")
end)

test("assignment through indices: numbers and tensors, broadcast", function()
  local x = torch.zeros(3, 4)
  x[0] = 1
  x[{ {1, 3}, 2 }] = torch.tensor({5.0, 6.0})
  x[{2, {0, 2}}] = 9
  close(x, {{1, 1, 1, 1}, {0, 0, 5, 0}, {9, 9, 6, 0}})
  x[1] = torch.tensor({1, 2, 3, 4})
  close(x[1], {1, 2, 3, 4})
  raises(function() x[0] = torch.ones(3) end, "cannot be broadcast")
  raises(function() x.foo = 1 end, "cannot set field 'foo'")
end)

T.cpu_test("queries: shape, size, dim, numel, dtype, device, get_device, item, tolist", function()
  local x = torch.zeros(2, 3, 4)
  local s = x.shape
  eq(s[0], 2, "shape[0]")
  eq(s[-1], 4, "shape[-1]")
  eq(#s, 3, "#shape")
  ok(s == torch.Size({2, 3, 4}), "Size ==")
  ok(s ~= torch.Size({2, 3}), "Size ~=")
  eq(T.fmt(s:totable()), "{2, 3, 4}", "totable")
  eq(x:size(1), 3, "size(d)")
  eq(x:size(-1), 4, "size(-1)")
  eq(x:dim(), 3, "dim")
  eq(x:numel(), 24, "numel")
  eq(tostring(x.device), "cpu", "device")
  eq(x.device.type, "cpu", "device.type")
  ok(x.device == torch.device("cpu"), "device ==")
  eq(x:get_device(), -1, "get_device on the CPU")
  eq(x.is_cuda, false, "is_cuda")
  eq(torch.tensor({{1, 2}, {3, 4}}):tolist()[2][1], 3, "tolist")
  eq(torch.tensor({2.5}):item(), 2.5, "item")
  eq(torch.tensor({true}):item(), true, "bool item")
  raises(function() x:item() end, "only one-element tensors")
  raises(function() return s[3] end, "out of range")
  raises(function() x:size(3) end, "dimension out of range")
  eq(tostring(torch.device("cuda:1")), "cuda:1", "device string")
  eq(torch.device("cuda:1").index, 1, "device index")
  raises(function() torch.device("gpu") end, "unknown device")
end)

test("to / casts / copy_ / clone", function()
  local x = torch.tensor({1.5, -2.5})
  eq(x:to("float64").dtype, torch.float64, "to(dtype string)")
  eq(x:to(torch.int32).dtype, torch.int32, "to(torch.int32)")
  eq(x:to({dtype = "float16"}).dtype, torch.float16, "to({dtype=})")
  eq(x:to("cpu").dtype, torch.float32, "to(cpu)")
  ok(rawequal(x:to("float32"), x) or x:to("float32"):data_ptr() == x:data_ptr(), "to same dtype shares storage")
  eq(x:double().dtype, torch.float64, "double")
  eq(x:half().dtype, torch.float16, "half")
  eq(x:bfloat16().dtype, torch.bfloat16, "bfloat16")
  eq(x:long().dtype, torch.int64, "long")
  eq(x:int().dtype, torch.int32, "int")
  eq(x:bool().dtype, torch.bool, "bool")
  local c = x:clone()
  c[0] = 9
  eq(x[0]:item(), 1.5, "clone is a copy")
  local d = torch.zeros(2, 2)
  d:copy_(torch.tensor({1, 2}))
  close(d, {{1, 2}, {1, 2}})
  if not cuda.is_available() then
    raises(function() x:to("cuda") end, "CUDA is not available")
  end
  raises(function() x:to(42.5) end, "device")
  raises(function() x:to("float99") end, "unknown device 'float99'")
end)

test("to / cuda take a torch.device: it is a device, never an options table", function()
  local x = torch.tensor({1.5, -2.5})
  local y = x:to(torch.device("cpu"), "float64")
  eq(y.dtype, torch.float64, "to(torch.device('cpu'), dtype)")
  eq(tostring(y.device), "cpu", "to(torch.device('cpu')) device")
  close(y, {1.5, -2.5}, 0, 0, "values")
  eq(tostring(x:to(torch.device("cpu")).device), "cpu", "to(torch.device('cpu'))")
  -- torch.device(n) is CUDA ordinal n, as PyTorch's
  eq(tostring(torch.device(0)), "cuda:0", "torch.device(0)")
  eq(torch.device(2).type, "cuda", "torch.device(2).type")
  eq(torch.device(2).index, 2, "torch.device(2).index")
  raises(function() torch.device(-1) end, "torch.device: a device ordinal must be non-negative, got -1")
  raises(function() torch.device(1.5) end, "torch.device: expected a string such as \"cpu\" or \"cuda:0\", or a CUDA ordinal")
  -- a device that is not there is an error, not a silent stay on the CPU (the
  -- device table was once read as an options table without a device field)
  local n = cuda.device_count()
  for _, d in ipairs({torch.device("cuda"), torch.device("cuda:1"), torch.device("cuda", 1)}) do
    if (d.index or 0) >= n then
      local msg = n == 0 and "to: CUDA is not available" or "invalid device ordinal cuda:1"
      raises(function() return x:to(d) end, msg, "x:to(" .. tostring(d) .. ")")
      raises(function() return x:to(d, {non_blocking = true}) end, msg, "x:to(" .. tostring(d) .. ", opts)")
      raises(function() return x:cuda(d) end, n == 0 and "cuda: CUDA is not available" or msg, "x:cuda(" .. tostring(d) .. ")")
    else
      eq(tostring(x:to(d).device), "cuda:" .. (d.index or 0), "x:to(" .. tostring(d) .. ")")
    end
  end
end)

test("creation on a device that is not there: the error names the function", function()
  local n = cuda.device_count()
  local dev = n == 0 and "cuda" or ("cuda:" .. n)
  local msg = n == 0 and "CUDA is not available" or ("invalid device ordinal cuda:" .. n)
  local cases = {
    {"zeros", function(o) return torch.zeros(2, o) end}, {"ones", function(o) return torch.ones(2, o) end},
    {"empty", function(o) return torch.empty(2, 3, o) end}, {"full", function(o) return torch.full({2}, 1.5, o) end},
    {"rand", function(o) return torch.rand(2, o) end}, {"randn", function(o) return torch.randn(32, 784, o) end},
    {"randint", function(o) return torch.randint(0, 10, {4}, o) end}, {"randperm", function(o) return torch.randperm(4, o) end},
    {"arange", function(o) return torch.arange(3, o) end}, {"linspace", function(o) return torch.linspace(0, 1, 3, o) end},
    {"eye", function(o) return torch.eye(2, o) end}, {"tensor", function(o) return torch.tensor({4, 5, 6}, o) end},
    {"zeros_like", function(o) return torch.zeros_like(torch.ones(2), o) end},
    {"randn_like", function(o) return torch.randn_like(torch.ones(2), o) end},
  }
  for _, c in ipairs(cases) do
    raises(function() return c[2]({device = dev}) end, c[1] .. ": " .. msg, c[1])
    raises(function() return c[2]({device = torch.device(dev)}) end, c[1] .. ": " .. msg, c[1] .. " with a torch.device")
    eq(tostring(c[2]({device = torch.device("cpu")}).device), "cpu", c[1] .. " on torch.device('cpu')")
  end
end)

test("torch.Tensor: the legacy constructor, float32 from values or sizes", function()
  local t = torch.Tensor({0., 0.})
  eq(t.dtype, torch.float32, "from floats")
  close(t, {0, 0}, 0, 0, "values")
  local i = torch.Tensor({{1, 2}, {3, 4}})
  eq(i.dtype, torch.float32, "integers still give float32")
  close(i, {{1, 2}, {3, 4}}, 0, 0, "integer values")
  eq(tostring(torch.Tensor(2, 3).shape), "torch.Size([2, 3])", "sizes")
  eq(torch.Tensor(2, 3).dtype, torch.float32, "sizes: float32")
  eq(tostring(torch.Tensor(torch.Size({4})).shape), "torch.Size([4])", "a torch.Size")
  eq(tostring(torch.Tensor().shape), "torch.Size([0])", "no arguments: (0,)")
  eq(tostring(torch.Tensor({}).shape), "torch.Size([0])", "an empty list")
  eq(tostring(torch.Tensor({1.5}, {device = "cpu"}).device), "cpu", "device option")
  eq(tostring(torch.Tensor(2, {device = torch.device("cpu")}).device), "cpu", "sizes and a torch.device")
  local f = torch.ones(2)
  ok(rawequal(torch.Tensor(f), f), "a float32 tensor is returned as is")
  raises(function() torch.Tensor(torch.ones(2, {dtype = "int64"})) end, "torch.Tensor: expected a float32 tensor, got torch.int64")
  raises(function() torch.Tensor({1, 2}, {dtype = "float64"}) end, "torch.Tensor: unknown option 'dtype'")
  raises(function() torch.Tensor(2.5) end, "torch.Tensor: expected a list of values, sizes or a tensor, got 2.5")
  raises(function() torch.Tensor(-1) end, "torch.Tensor: negative size -1")
  raises(function() torch.Tensor({{1, 2}, {3}}) end, "torch.Tensor: ragged nested table")
  raises(function() torch.Tensor({1, 2}, 3) end, "torch.Tensor: expected one list of values, got 2 arguments")
  if not cuda.is_available() then
    raises(function() torch.Tensor({0., 0.}, {device = torch.device("cuda:1")}) end, "torch.Tensor: CUDA is not available")
  end
  -- errors point at the caller's line, not at the library
  local err = raises(function() torch.Tensor(2.5) end, "torch.Tensor")
  ok(not err:find("lua/tensh/", 1, true), "error position is the caller's: " .. err)
end)

test("a loop that drops 4 MB tensors runs at flat memory", function()
  local x = torch.zeros(1 << 20) -- 4 MB
  collectgarbage()
  local function rss_kb()
    local f = io.open("/proc/self/status")
    if not f then return nil end
    local s = f:read("a")
    f:close()
    return tonumber(s:match("VmRSS:%s*(%d+)"))
  end
  if not rss_kb() then T.skip("no /proc/self/status") end
  for _, mode in ipairs({"incremental", "generational"}) do
    collectgarbage(mode)
    for i = 1, 200 do local y = x * 2 end
    local before = rss_kb()
    for i = 1, 3000 do local y = x * 2 end -- 12 GB allocated in total
    local after = rss_kb()
    ok(after - before < 200 * 1024, ("%s: RSS grew by %d KB over 3000 iterations"):format(mode, after - before))
  end
  collectgarbage("incremental")
end)

test("a loop of 1-element ops keeps the number of live tensors bounded", function()
  local a = torch.ones(1)
  collectgarbage()
  local before = collectgarbage("count")
  for i = 1, 200000 do local c = a + a end
  ok(collectgarbage("count") - before < 20 * 1024, "Lua heap grew by more than 20 MB of dead tensors")
end)

test("bad arguments name the function and the argument", function()
  raises(function() torch.zeros(2):view("a") end, "view")
  raises(function() torch.zeros(2):transpose("a", 1) end, "bad argument #1 to 'transpose' (integer expected, got string)")
  raises(function() torch.zeros(2):narrow(0, 0.5, 1) end, "number has no integer representation")
  raises(function() return torch.zeros(2) + {} end, "tensor or number expected, got table")
  raises(function() torch.zeros(2).exp(nil) end,
    "bad argument #1 to 'exp' (tensor expected, got nil; a method is called with ':', as t:exp())")
  close(torch.ones(2), {1, 1}) -- the session goes on
end)

test("set_num_threads / get_num_threads", function()
  local n = torch.get_num_threads()
  ok(n >= 1, "at least one thread")
  torch.set_num_threads(1)
  eq(torch.get_num_threads(), 1, "set to 1")
  T.close(torch.ones(100000):sum(), 100000) -- kernels still work on one thread
  torch.set_num_threads(n)
  eq(torch.get_num_threads(), n, "restored")
  raises(function() torch.set_num_threads(0) end, "expected a number of threads >= 1")
end)

-- (the fuzzer's find, issue 26: OpenBLAS maps ~129 MiB a thread and retries a
-- failed mapping for ever, so 16 threads under ulimit -v hung)
test("set_num_threads refuses what an address-space limit has no room for, and the session goes on", function()
  if os.getenv("ASAN_OPTIONS") then T.skip("under AddressSanitizer (its shadow takes terabytes of address space)") end
  local tensh = (os.getenv("TENSH_BUILD") or "../../build") .. "/tensh"
  local p = assert(io.popen(tensh .. [[ -e 'print(io.open("/proc/self/status"):read("a"):match("VmSize:%s*(%d+)"))']]))
  local held = tonumber(p:read("a"))
  p:close()
  ok(held, "the size of a fresh process")
  local script = [[print(pcall(torch.set_num_threads, 64)); torch.set_num_threads(1)
    print("SUM", torch.ones(200, 200):matmul(torch.ones(200, 200)):sum():item())]]
  p = assert(io.popen(("ulimit -v %d && %s -e '%s' 2>&1; echo EXIT=$?"):format(held + (1200 << 10), tensh, script)))
  local out = p:read("a")
  p:close()
  local function has(text, what) ok(out:find(text, 1, true), what .. ": no '" .. text .. "' in:\n" .. out) end
  has("set_num_threads: 64 threads need ~265 MiB of address space each", "refused, saying why")
  has("ask for at most", "and what fits")
  has("SUM\t8000000", "the session goes on")
  has("EXIT=0", "and ends normally")
end)


test("comparison operators compare one-element values and raise on larger tensors", function()
  local r = T.rand_list({2}, -5, 5)
  local a, b = torch.tensor(r[1]), torch.tensor({r[2]})
  eq(a < b, r[1] < r[2], "<")
  eq(a <= b, r[1] <= r[2], "<=")
  eq(a > b, r[1] > r[2], ">")
  eq(a >= b, r[1] >= r[2], ">=")
  eq(a == torch.tensor(r[1]), true, "== on equal values")
  eq(a == b, r[1] == r[2], "== on different values")
  eq(a < r[2], r[1] < r[2], "tensor < number")
  eq(r[2] < a, r[2] < r[1], "number < tensor")
  eq(torch.tensor({{7}}, {dtype = torch.int64}) >= 7, true, "int64 against an integer")
  eq(torch.tensor(2 ^ 53, {dtype = torch.int64}) + 1 > 2 ^ 53, true, "int64 beyond doubles compares exactly")
  eq(torch.tensor(0 / 0) == torch.tensor(0 / 0), false, "NaN equals nothing")
  eq(torch.tensor(true) == torch.tensor(true), true, "bool ==")
  eq(a == 1.5, false, "Lua calls == only between two tensors: a number is never equal")
  local t = torch.ones(3)
  eq(t == t, true, "the same tensor (Lua answers without asking)")
  raises(function() return torch.ones(3) == torch.ones(3) end,
    "Boolean value of Tensor with more than one value is ambiguous", "== on 3 elements")
  raises(function() return torch.ones(2, 2) < 1 end, "use a:lt(b), a:gt(b) for the elementwise result", "<")
  raises(function() return torch.ones(0) <= torch.ones(1) end, "Boolean value of Tensor with no values", "empty")
  raises(function() return torch.ones(1) < "1" end, "attempt to compare a tensor with a string value")
  raises(function() return torch.tensor(true) < torch.tensor(false) end, "bool tensors have no order")
end)

test("x:any() and x:all() over everything answer with Lua booleans, usable in if", function()
  local x = torch.tensor({1.0, 0 / 0, 3.0})
  local nan = x:ne(x)
  eq(nan:any(), true, "any NaN")
  eq(nan:all(), false, "all NaN")
  local branch
  if torch.zeros(4):any() then branch = "taken" else branch = "not taken" end
  eq(branch, "not taken", "if over a false answer")
  eq(nan:any():item(), true, ":item() on the answer, as in PyTorch")
  eq(torch.any(nan, 0).dtype, torch.bool, "with a dim: a tensor")
  eq(tostring(nan:all({keepdim = true}).shape), "torch.Size([1])", "keepdim: a tensor")
  raises(function() return nan:any().dtype end, "a boolean has only :item()")
end)

T.run()
