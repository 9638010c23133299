-- PyTorch's habits in Lua, round two (issue 29): loops over loaders and
-- datasets, scopes left unclosed, memory after x = nil, map_location,
-- positional hyperparameters, `..` on printable values, '.' for ':' on every
-- class, "did you mean" in every namespace, tracebacks without the
-- library's frames, warnings once per call site, `local` at the prompt.
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises

local exe = (os.getenv("TENSH_BUILD") or "../../build") .. "/tensh"
local has_cuda = cuda.is_available()

-- runs a script in a child tensh; returns its stdout and stderr together, and its exit status
local function run_child(src)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(src)
  f:close()
  local p = io.popen(("%q %q 2>&1"):format(exe, script))
  local out = p:read("a")
  local _, _, code = p:close()
  os.remove(script)
  return out, code, script
end

local function count(s, plain)
  local n, from = 0, 1
  while true do
    local i = s:find(plain, from, true)
    if not i then return n end
    n, from = n + 1, i + #plain
  end
end

-- ---- loops: ipairs, indexing a loader, enumerate ---------------------------------------

test("ipairs(loader), loader[i] and ipairs(ds) raise and say how to iterate", function()
  local ds = data.TensorDataset(torch.arange(5):float(), torch.arange(5))
  local loader = data.DataLoader(ds, {batch_size = 2})
  local msg = raises(function() for _ in ipairs(loader) do end end, "DataLoader: ipairs(loader) would run no batch")
  ok(msg:find("for x, y in loader do", 1, true) and msg:find("enumerate(loader)", 1, true), msg)
  ok(msg:find("test_habits2.lua", 1, true), "at the caller's line: " .. msg)
  raises(function() return loader[0] end, "DataLoader: loader[0]: a DataLoader is not indexed")
  raises(function() for _ in ipairs(ds) do end end, "TensorDataset: ipairs(ds) starts at 1 and would skip sample 0")
  raises(function() for _ in ipairs(data.SequentialSampler(ds)) do end end, "SequentialSampler: ipairs(sampler)")
  -- what still works: 0-based indexing, #, the loops
  eq(ds[0][2]:item(), 0, "ds[0]")
  eq(#ds, 5, "#ds")
  local n = 0
  for _ in loader do n = n + 1 end
  eq(n, 3, "for x, y in loader")
end)

test("enumerate counts from 0 over loaders, datasets, tensors, lists and iterators", function()
  local ds = data.TensorDataset(torch.arange(5):float(), torch.arange(5) * 10)
  local loader = data.DataLoader(ds, {batch_size = 2})
  local seen = {}
  for i, x, y in enumerate(loader) do seen[#seen + 1] = ("%d:%d:%d"):format(i, x:numel(), y[0]:item()) end
  eq(table.concat(seen, " "), "0:2:0 1:2:20 2:1:40", "loader: i, x, y")
  seen = {}
  for i, s in enumerate(ds, 1) do seen[#seen + 1] = i .. "=" .. s[2]:item() end
  eq(table.concat(seen, " "), "1=0 2=10 3=20 4=30 5=40", "dataset from start = 1")
  seen = {}
  for i, row in enumerate(torch.eye(2)) do seen[#seen + 1] = i .. "=" .. row[i]:item() end
  eq(table.concat(seen, " "), "0=1.0 1=1.0", "tensor rows")
  seen = {}
  for i, v in enumerate({"a", "b"}) do seen[#seen + 1] = i .. v end
  eq(table.concat(seen, " "), "0a 1b", "a list")
  seen = {}
  for i, x in enumerate(loader:iter()) do seen[#seen + 1] = i .. ":" .. x:numel() end
  eq(table.concat(seen, " "), "0:2 1:2 2:1", "an iterator with its state")
  -- break leaves no epoch open: the next loop starts at batch 0
  for _ in enumerate(loader) do break end
  local first
  for i, x in enumerate(loader) do if i == 0 then first = x[0]:item() end end
  eq(first, 0.0, "a new epoch after break")
  ok(rawequal(enumerate, data.enumerate), "the global is data.enumerate")
  raises(function() enumerate(5) end, "enumerate: expected a DataLoader, a dataset, a sampler, a tensor, a list")
  raises(function() enumerate({}, 0.5) end, "enumerate: start must be an integer, got 0.5")
end)

-- ---- scopes left unclosed ----------------------------------------------------------------

test("an unclosed no_grad/enable_grad scope restores grad mode when collected", function()
  ok(torch.is_grad_enabled(), "on at the start")
  local function leak(fn) local ctx = fn() return ctx ~= nil end
  leak(torch.no_grad)
  eq(torch.is_grad_enabled(), false, "the unclosed scope is in force until collected")
  collectgarbage()
  collectgarbage()
  eq(torch.is_grad_enabled(), true, "restored when collected")
  -- collected while a newer scope is open: that one restores what the old one found
  leak(torch.no_grad)
  do
    local _ <close> = torch.enable_grad()
    collectgarbage()
    collectgarbage()
    eq(torch.is_grad_enabled(), true, "the newer scope's mode stays")
  end
  eq(torch.is_grad_enabled(), true, "after the newer one closes: the mode before both")
  -- set_grad_enabled is also PyTorch's plain setter: unclosed, it stays
  torch.set_grad_enabled(false)
  collectgarbage()
  collectgarbage()
  eq(torch.is_grad_enabled(), false, "set_grad_enabled(false) stays set")
  torch.set_grad_enabled(true)
  -- function forms and <close> as before
  eq(torch.no_grad(function(a) return torch.is_grad_enabled(), a end, 7), false, "function form")
  do
    local _ <close> = torch.no_grad()
    eq(torch.is_grad_enabled(), false, "<close>")
  end
  eq(torch.is_grad_enabled(), true, "closed")
  raises(function() torch.no_grad(5) end, "bad argument #1 to 'no_grad' (function or nothing expected, got number)")
end)

test("an unclosed autocast region ends when collected; the warning says so once", function()
  local out = run_child([[
local function step()
  local ac = torch.autocast("cpu")            -- the Python habit: no `with`
  local a = torch.ones(2, 2)
  return (a:matmul(a)).dtype
end
print("in region", step())
collectgarbage() collectgarbage()
print("after collection", torch.is_autocast_enabled("cpu"))
for _ = 1, 3 do step() collectgarbage() end
local g = function() local s = torch.no_grad() end
g() collectgarbage() collectgarbage()
print("grad", torch.is_grad_enabled())
]])
  ok(out:find("in region\ttorch.bfloat16", 1, true), "the region was on while the object lived:\n" .. out)
  ok(out:find("after collection\tfalse", 1, true), "off once collected:\n" .. out)
  eq(count(out, 'torch.autocast("cpu") was collected without being closed'), 1, "one warning for four regions:\n" .. out)
  ok(out:find('local _ <close> = torch.autocast("cpu")', 1, true) and out:find('torch.autocast("cpu", function() ... end)',
    1, true), "says both forms:\n" .. out)
  eq(count(out, "torch.no_grad() was collected without being closed"), 1, "no_grad's warning:\n" .. out)
  ok(out:find("grad\ttrue", 1, true), out)
end)

test("autocast takes the function directly, and PyTorch's positional dtype", function()
  local low = T.device == "cuda" and torch.float16 or torch.bfloat16
  local a = torch.ones(2, 2)
  eq(torch.autocast(T.device, function(x) return x:matmul(x).dtype end, a), T.device == "cuda" and torch.float16 or
    torch.bfloat16, "autocast(device_type, fn, args)")
  eq(torch.autocast(T.device, low, function() return torch.get_autocast_dtype(T.device) end), low, "positional dtype")
  eq(torch.autocast(T.device, low, false, function() return torch.is_autocast_enabled(T.device) end), false,
    "positional enabled")
  eq(torch.is_autocast_enabled(T.device), false, "closed after the function")
  raises(function() torch.autocast("cpu", {}, 5) end, "bad argument #3 to 'autocast' (function expected, got number)")
end)

test("a warning shows once per call site, as Python's", function()
  local out = run_child([[
for _ = 1, 3 do torch.autocast("cpu", {dtype = torch.float16}, function() end) end
torch.autocast("cpu", {dtype = torch.float16}, function() end)
]])
  eq(count(out, "In CPU autocast, but the target dtype is not supported"), 2, "one per line, not per iteration:\n" .. out)
  ok(out:find(":1: UserWarning: In CPU autocast", 1, true) and out:find(":2: UserWarning: In CPU autocast", 1, true),
    "each names its line:\n" .. out)
end)

-- ---- memory after x = nil ---------------------------------------------------------------

T.cpu_test("torch.cpu's memory queries count only what the program still holds", function()
  local cpu = torch.cpu
  local base = cpu.memory_allocated()
  local x = torch.empty(1000, 1000)
  ok(cpu.memory_allocated() - base >= 4000000, "the tensor counts")
  x = nil -- luacheck: ignore
  eq(cpu.memory_allocated(), base, "dropped: no longer counted, without a collectgarbage()")
  local y = torch.empty(500, 1000)
  y = nil -- luacheck: ignore
  cpu.empty_cache()
  ok(cpu.memory_reserved() < 2000000 + cpu.memory_allocated() + 4096, "empty_cache returned the dropped buffer")
end)

test("cuda's memory queries and empty_cache collect what Lua dropped", function()
  if not has_cuda then T.skip("no CUDA device") end
  cuda.empty_cache()
  local base = cuda.memory_allocated()
  local x = torch.empty(1024, 1024, {device = "cuda"})
  eq(cuda.memory_allocated() - base, 4 * 1024 * 1024, "the tensor counts")
  x = nil -- luacheck: ignore
  eq(cuda.memory_allocated(), base, "dropped: no longer counted")
  local y = torch.empty(1024, 1024, {device = "cuda"})
  y = nil -- luacheck: ignore
  cuda.empty_cache()
  eq(cuda.memory_allocated(), base, "after empty_cache")
  local z = torch.empty(1024, 1024, {device = "cuda"})
  z = nil -- luacheck: ignore
  ok(not cuda.memory_summary():find("|      4.00 MiB |", 1, true) or cuda.memory_allocated() == base,
    "memory_summary counts the dropped tensor out")
end)

test("every memory query takes its device one way, and refuses unknown options", function()
  eq(cuda.memory_allocated({device = 0}), cuda.memory_allocated(0), "{device = 0} as memory_allocated(0)")
  eq(cuda.max_memory_reserved({device = "cuda:0"}), cuda.max_memory_reserved("cuda:0"), "max_memory_reserved")
  raises(function() cuda.memory_allocated({devcie = 0}) end,
    "cuda.memory_allocated: unknown option 'devcie' (expected one of: device; did you mean 'device'?)")
  raises(function() cuda.memory_stats(0, {device = 0}) end, "cuda.memory_stats: 'device' given both as an argument and as an option")
  raises(function() cuda.memory_reserved(0, 1) end, "cuda.memory_reserved: expected at most 1 positional argument (device), got 2")
  raises(function() cuda.reset_peak_memory_stats({abbreviated = true}) end, "cuda.reset_peak_memory_stats: unknown option 'abbreviated'")
  raises(function() cuda.empty_cache(0) end, "cuda.empty_cache: takes no arguments, got 1")
  if not has_cuda then return end
  raises(function() cuda.memory_summary(0, {abbreviate = true}) end, "did you mean 'abbreviated'?")
  raises(function() cuda.memory_summary(0, {abbreviated = 1}) end, "cuda.memory_summary: abbreviated must be a boolean, got number")
  local full, short = cuda.memory_summary(0), cuda.memory_summary(0, {abbreviated = true})
  ok(full:find("from large pool", 1, true), "the full summary splits by pool")
  ok(not short:find("from large pool", 1, true) and not short:find("from small pool", 1, true), "abbreviated does not")
  ok(short:find("Allocated memory", 1, true) and short:find("Non-releasable allocs", 1, true), "every metric stays")
  eq(cuda.memory_summary({device = 0, abbreviated = true}), short, "both as options")
  eq(cuda.memory_summary(0, true), short, "abbreviated positionally")
end)

-- ---- torch.load's map_location -------------------------------------------------------------

test("torch.load takes map_location as PyTorch does: a device, a table of devices, a function, positionally too", function()
  local path = os.tmpname() .. ".safetensors"
  local w = torch.randn(3)
  torch.save({w = w, b = {c = torch.ones(2)}}, path)
  local function dev(r) return tostring(r.w.device) .. " " .. tostring(r.b.c.device) end
  eq(dev(torch.load(path)), "cpu cpu", "default: the CPU")
  eq(dev(torch.load(path, {map_location = {["cuda:1"] = "cuda:0"}})), "cpu cpu", "a table: other devices' tensors stay")
  eq(dev(torch.load(path, {["cuda:1"] = "cuda:0"})), "cpu cpu", "a table positionally")
  eq(dev(torch.load(path, "cpu")), "cpu cpu", "a device string positionally")
  eq(dev(torch.load(path, torch.device("cpu"), {flat = false})), "cpu cpu", "torch.device, then options")
  local locations = {}
  local r = torch.load(path, function(t, location) locations[#locations + 1] = location return t * 2 end)
  table.sort(locations)
  local saved = {tostring(w.device), tostring(torch.ones(2).device)} -- the suite's device on its cuda pass
  table.sort(saved)
  eq(table.concat(locations, " "), table.concat(saved, " "), "the function gets each tensor and where it was saved from")
  T.close(r.w, w * 2, 1e-6, 1e-6, "its result is kept")
  eq(dev(torch.load(path, {map_location = function() end})), "cpu cpu", "nil keeps the tensor as read")
  raises(function() torch.load(path, {map_location = 5}) end,
    "torch.load: map_location: expected a device (\"cpu\", \"cuda:0\", torch.device), a table of devices")
  raises(function() torch.load(path, {map_location = {x = "cpu"}}) end, "torch.load: map_location: the key 'x' is not a device")
  raises(function() torch.load(path, function() return 5 end) end,
    "torch.load: the map_location function returned a number; expected a tensor, or nil")
  raises(function() torch.load(path, "cpu", {map_location = "cpu"}) end,
    "torch.load: 'map_location' given both as an argument and as an option")
  if has_cuda and cuda.device_count() >= 2 then
    torch.save({w = torch.ones(2, {device = "cuda:1"}), b = {c = torch.ones(2, {device = "cpu"})}}, path)
    eq(dev(torch.load(path, {map_location = {["cuda:1"] = "cuda:0"}})), "cuda:0 cpu", "cuda:1 -> cuda:0, the rest as read")
    eq(dev(torch.load(path, {cuda = "cuda:0", cpu = "cuda:1"})), "cuda:0 cuda:1", "'cuda' matches any CUDA device")
    locations = {}
    eq(dev(torch.load(path, function(t, loc) locations[#locations + 1] = loc return t:to(loc) end)), "cuda:1 cpu",
      "a function restoring each tensor where it was")
    table.sort(locations)
    eq(table.concat(locations, " "), "cpu cuda:1", "the saved locations")
  end
  os.remove(path)
end)

-- ---- positional hyperparameters -------------------------------------------------------------

test("optimizers, GradScaler and DataLoader take PyTorch's positional arguments", function()
  local function params() return {torch.ones(2, {requires_grad = true})} end
  local function lr_of(o) return o.param_groups[1].lr end
  eq(lr_of(optim.SGD(params(), 0.01)), 0.01, "SGD(params, lr)")
  local sgd = optim.SGD(params(), 0.01, 0.9, {nesterov = true})
  eq(sgd.param_groups[1].momentum, 0.9, "momentum positionally")
  eq(sgd.param_groups[1].nesterov, true, "then options")
  local adam = optim.Adam(params(), 1e-2, {0.5, 0.6}, 1e-6)
  eq(adam.param_groups[1].betas[2], 0.6, "Adam's betas")
  eq(adam.param_groups[1].eps, 1e-6, "Adam's eps")
  eq(optim.AdamW(params(), 0.5).param_groups[1].weight_decay, 1e-2, "AdamW keeps its default decay")
  eq(optim.RMSprop(params(), 0.1, 0.5).param_groups[1].alpha, 0.5, "RMSprop's alpha")
  eq(optim.Adam(params(), {lr = 0.2, maximize = true}).param_groups[1].maximize, true, "keyword-only options")
  raises(function() optim.SGD(params(), 0.1, {lr = 0.2}) end, "SGD: 'lr' given both as an argument and as an option")
  raises(function() optim.SGD(params(), 0.1, 0, 0, 0, false, true) end, "SGD: expected at most 5 positional arguments, got 6")
  raises(function() optim.SGD(params(), "fast") end, "SGD: options must be a table, got string")
  -- the same steps either way
  local a, b = params(), params()
  local oa, ob = optim.Adam(a, 0.1), optim.Adam(b, {lr = 0.1})
  for _, pair in ipairs({{a, oa}, {b, ob}}) do
    pair[1][1].grad = torch.tensor({1.0, -2.0})
    pair[2]:step()
  end
  T.close(a[1], b[1], 0, 0, "positional lr steps as the option")
  -- GradScaler: torch.amp's (device first) and torch.cuda.amp's (init_scale first)
  eq(amp.GradScaler("cpu", 1024.0):get_scale(), 1024.0, "GradScaler(device, init_scale)")
  eq(torch.cpu.amp.GradScaler(512.0, 3.0):get_growth_factor(), 3.0, "torch.cpu.amp.GradScaler(init_scale, growth_factor)")
  raises(function() amp.GradScaler("cpu", 1.0, {init_scale = 2.0}) end, "GradScaler: 'init_scale' given both")
  -- DataLoader(dataset, batch_size, shuffle, sampler, ...)
  local ds = data.TensorDataset(torch.arange(6):float())
  local sizes = {}
  for x in data.DataLoader(ds, 4) do sizes[#sizes + 1] = x:numel() end
  eq(table.concat(sizes, " "), "4 2", "DataLoader(ds, 4)")
  sizes = {}
  for x in data.DataLoader(ds, 4, false, nil, nil, 0, nil, false, true) do sizes[#sizes + 1] = x:numel() end
  eq(table.concat(sizes, " "), "4", "drop_last positionally")
  raises(function() data.DataLoader(ds, 2, {batch_size = 3}) end, "DataLoader: 'batch_size' given both")
  raises(function() data.DataLoader(ds, 2, false, nil, nil, 0, nil, false, false, 0, print) end,
    "DataLoader: argument 'worker_init_fn' is not supported")
end)

-- ---- `..` on printable values -------------------------------------------------------------

test("every printable tensh value joins with .. as it prints", function()
  local x = torch.ones(2, 3)
  eq("shape: " .. x.shape, "shape: torch.Size([2, 3])", "torch.Size")
  eq("Device: " .. x.device, "Device: " .. tostring(x.device), "torch.device")
  eq("dtype " .. x.dtype, "dtype torch.float32", "dtype")
  eq(x.shape .. "!", "torch.Size([2, 3])!", "on the left")
  eq(1 .. x.shape, "1torch.Size([2, 3])", "beside a number")
  eq("t = " .. torch.tensor({1, 2}), "t = " .. tostring(torch.tensor({1, 2})), "a tensor")
  local m = nn.Linear(2, 2)
  eq("model: " .. m, "model: " .. tostring(m), "a module")
  local Net = nn.Module:extend("Net")
  eq("" .. Net(), "Net()", "a user's module class")
  local opt = optim.SGD(m:parameters(), 0.1)
  eq("opt: " .. opt, "opt: " .. tostring(opt), "an optimizer")
  local sched = optim.lr_scheduler.StepLR(opt, 2)
  eq("s: " .. sched, "s: " .. tostring(sched), "a scheduler")
  local loader = data.DataLoader(data.TensorDataset(torch.zeros(4, 2)), 2)
  eq("l: " .. loader, "l: " .. tostring(loader), "a DataLoader")
  eq("g: " .. amp.GradScaler("cpu"), "g: " .. tostring(amp.GradScaler("cpu")), "a GradScaler")
  eq("a: " .. torch.autocast("cpu", {enabled = false}), 'a: torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=false)',
    "an autocast region")
  local msg = raises(function() return "x" .. {} end, "attempt to concatenate a table value")
  ok(msg:find("test_habits2.lua", 1, true), msg)
  raises(function() return x.shape .. {} end, "attempt to concatenate a table value")
  if has_cuda then
    local s = cuda.current_stream()
    eq("s " .. s, "s " .. tostring(s), "a stream")
    eq("e " .. cuda.Event(), "e <torch.cuda.Event uninitialized>", "an event")
    eq("p " .. cuda.get_device_properties(0), "p " .. tostring(cuda.get_device_properties(0)), "device properties")
  end
end)

-- ---- '.' for ':' ---------------------------------------------------------------------------

test("every method of every tensh class says to call it with ':'", function()
  local m = nn.Linear(2, 2)
  raises(function() return m.parameters() end,
    "bad argument #1 to 'parameters' (Module expected, got no value; a method is called with ':', as model:parameters())")
  raises(function() return m.to("cuda") end, "bad argument #1 to 'to' (Module expected, got string; a method is called with ':'")
  raises(function() return m.cuda() end, "bad argument #1 to 'cuda' (Module expected, got no value")
  raises(function() return m.forward(torch.ones(2)) end, "bad argument #1 to 'forward' (Linear expected, got Tensor")
  raises(function() return m.load_state_dict({}) end, "bad argument #1 to 'load_state_dict' (Module expected, got table")
  local Net = nn.Module:extend("Net")
  function Net:init() self.fc = nn.Linear(2, 2) end
  function Net:forward(v) return self.fc(v) end
  local net = Net()
  raises(function() return net.forward(torch.ones(2)) end, "bad argument #1 to 'forward' (Net expected, got Tensor")
  eq(net(torch.ones(1, 2)).shape, torch.Size({1, 2}), "a user's class still works with ':'")
  local opt = optim.SGD(m:parameters(), 0.1)
  raises(function() opt.step() end, "bad argument #1 to 'step' (Optimizer expected, got no value; a method is called with ':', as optimizer:step())")
  raises(function() opt.zero_grad() end, "bad argument #1 to 'zero_grad' (Optimizer expected")
  local sched = optim.lr_scheduler.StepLR(opt, 1)
  raises(function() sched.step() end, "bad argument #1 to 'step' (LRScheduler expected, got no value; a method is called with ':', as scheduler:step())")
  local loader = data.DataLoader(data.TensorDataset(torch.zeros(4, 2)), 2)
  raises(function() loader.iter() end, "bad argument #1 to 'iter' (DataLoader expected, got no value; a method is called with ':', as loader:iter())")
  raises(function() amp.GradScaler("cpu").update() end, "bad argument #1 to 'update' (GradScaler expected")
  -- tensors: C methods and the ones written in Lua
  local x = torch.ones(12)
  raises(function() return x.view(2, 6) end, "bad argument #1 to 'view' (tensor expected, got number; a method is called with ':', as t:view())")
  raises(function() return x.to("cpu") end, "bad argument #1 to 'to' (tensor expected, got string; a method is called with ':'")
  raises(function() return x.sum() end, "bad argument #1 to 'sum' (tensor expected, got no value; a method is called with ':'")
  raises(function() return x.flip(0) end, "bad argument #1 to 'flip' (tensor expected, got number; a method is called with ':', as t:flip())")
  raises(function() return x.square() end, "bad argument #1 to 'square' (tensor expected, got no value; a method is called with ':'")
  -- the functions keep their own words: no ':' hint for torch.flip(0)
  local msg = raises(function() return torch.flip(0) end, "bad argument #1 to 'torch.flip' (tensor expected, got number)")
  ok(not msg:find("':'", 1, true), msg)
  raises(function() return torch.zeros_like() end, "bad argument #1 to 'zeros_like' (tensor expected, got no value)")
  -- a class where an instance belongs
  raises(function() return nn.Linear:parameters() end, "parameters: expected a module, got the class Linear (create one with Linear(...))")
  -- C classes
  local w = tb.SummaryWriter(os.tmpname() .. "_tb")
  raises(function() w.add_scalar("a", 1, 0) end, "bad argument #1 to 'add_scalar' (SummaryWriter expected, got string; a method is called with ':', as writer:add_scalar())")
  w:close()
  if has_cuda then
    local s = cuda.Stream()
    raises(function() s.synchronize() end, "bad argument #1 to 'synchronize' (cuda.Stream expected, got no value; a method is called with ':', as stream:synchronize())")
    raises(function() cuda.Event().record() end, "bad argument #1 to 'record' (cuda.Event expected")
  end
end)

test("optim.Adam(model) says to pass model:parameters()", function()
  local m = nn.Linear(2, 2)
  raises(function() optim.Adam(m) end, "Adam: params is a module (Linear); pass its parameters: Adam(model:parameters(), ...)")
  raises(function() optim.SGD(m:named_parameters()) end, "SGD: params should be a list of tensors or a list of parameter "
    .. "groups, but got a function (an iterator?); pass model:parameters()")
end)

-- ---- "did you mean" everywhere --------------------------------------------------------------

test("every namespace raises on a missing name and suggests the nearest", function()
  raises(function() return dist.all_reduc end, "dist has no field 'all_reduc' (did you mean 'all_reduce'?)")
  raises(function() return torch.autograd.gard end, "torch.autograd has no field 'gard' (did you mean 'grad'?)")
  raises(function() return nn.parallel.DistributedDataParallelCPU end, "nn.parallel has no field 'DistributedDataParallelCPU'")
  raises(function() return torch.cuda.amp.autocst end, "cuda.amp has no field 'autocst' (did you mean 'autocast'?)")
  raises(function() return torch.profiler.profil end, "profiler has no field 'profil' (did you mean 'profile'?)")
  raises(function() return torch.cpu.memory_alocated end, "torch.cpu has no field 'memory_alocated' (did you mean 'memory_allocated'?)")
  raises(function() return dist.ReduceOp.SUMM end, "dist.ReduceOp has no field 'SUMM' (did you mean 'SUM'?)")
  raises(function() return nn.utils.rnn.pad_sequenc end, "did you mean 'pad_sequence'?")
  raises(function() return bench.Timr end, "bench has no field 'Timr' (did you mean 'Timer'?)")
  raises(function() return torch.backends.cudnn.benchmrk end, "torch.backends.cudnn has no setting 'benchmrk'")
  eq(torch.backends.cudnn._private_probe, nil, "private names probe as nil")
  -- every namespace table below the globals (a plain table of names) is strict
  local lax, seen = {}, {}
  local function walk(t, path, depth)
    if seen[t] or depth > 5 then return end
    seen[t] = true
    for k, v in next, t do
      if type(k) == "string" and k:sub(1, 1) ~= "_" and type(v) == "table" then
        local mt = getmetatable(v)
        local strict = mt and type(rawget(mt, "__index")) == "function"
        local named = true
        for kk in next, v do if type(kk) ~= "string" then named = false end end
        if named and (mt == nil or strict) and path .. "." .. k ~= "torch.version" and k ~= "aten_names" then
          local raised = not pcall(function() return v.no_such_name_at_all end)
          if not raised then lax[#lax + 1] = path .. "." .. k end
          walk(v, path .. "." .. k, depth + 1)
        end
      end
    end
  end
  require("tensh.lazy").load_all() -- nn, optim, ... load on first use; walked raw below
  for _, g in ipairs({"torch", "nn", "optim", "data", "cuda", "dist", "amp", "tb", "models", "bench", "profiler"}) do
    if rawget(_G, g) then walk(rawget(_G, g), g, 1) end
  end
  eq(table.concat(lax, ", "), "", "namespaces that give nil for a missing name")
end)

-- ---- messages -------------------------------------------------------------------------------

test("DataParallel names the missing device, not its place in device_ids", function()
  if not has_cuda then T.skip("no CUDA device (DataParallel is the module itself)") end
  local n = cuda.device_count()
  local msg = raises(function() nn.DataParallel(nn.Linear(2, 2), {device_ids = {0, n + 5}}) end,
    ("DataParallel: device_ids names cuda:%d, but there"):format(n + 5))
  ok(not msg:find("device_ids[", 1, true), msg)
  raises(function() nn.DataParallel(nn.Linear(2, 2), {device_ids = {0, -1}}) end,
    "DataParallel: each of device_ids must be a CUDA device index (0, 1, ...), got -1")
end)

test("a loss given tensors on two devices names itself, not an op inside it", function()
  local logits = torch.randn(3, 4)
  local target_dev = T.device == "cuda" and "cpu" or (has_cuda and "cuda" or nil)
  if not target_dev then
    -- no second device here: the check still runs on what it is given (the weight's device)
    T.skip("needs a CUDA device beside the CPU")
  end
  local target = torch.tensor({0, 1, 2}, {device = target_dev})
  local msg = raises(function() return nn.CrossEntropyLoss()(logits, target) end,
    ("cross_entropy: input is on %s but target is on %s; move it to the input's device: target:to(\"%s\")"):format(
      tostring(logits.device), tostring(target.device), tostring(logits.device)))
  ok(not msg:find("gather", 1, true), msg)
  raises(function() return nn.F.nll_loss(logits:log_softmax(1), target) end, "nll_loss: input is on")
  raises(function() return nn.F.mse_loss(logits, torch.zeros(3, 4, {device = target_dev})) end, "mse_loss: input is on")
end)

test("a script's traceback shows the user's frames, not the library's", function()
  local out, _, script = run_child([[
local function train(model)
  local opt = optim.SGD(model:parameters(), 0.1)
  opt.step()
  return opt
end
local m = nn.Linear(2, 2)
train(m)
]])
  ok(out:find(":3: bad argument #1 to 'step' (Optimizer expected", 1, true), "the message at the user's line:\n" .. out)
  ok(out:find("stack traceback:", 1, true), out)
  ok(out:find(":3: in local 'train'", 1, true) and out:find(":7: in main chunk", 1, true), "the user's frames:\n" .. out)
  ok(not out:find("lua/tensh/", 1, true), "no library frame:\n" .. out)
  ok(not out:find("[C]", 1, true), "no C frame:\n" .. out)
  local _ = script
  -- a message raised inside the library is placed at the user's line
  out = run_child("local t = setmetatable({}, {__index = function() return nn.Linear(2, 2).weight + {} end})\nlocal _ = t.x\n")
  ok(out:find(":%d+: [^\n]*tensor or number expected"), out)
  ok(not out:find("lua/tensh/", 1, true), out)
  -- TENSH_TRACEBACK=full shows everything
  out = run_child('os.setenv("TENSH_TRACEBACK", "full")\nnn.Linear(2, 2).parameters()\n')
  ok(out:find("lua/tensh/classes.lua", 1, true) and out:find("[C]: in", 1, true), "the whole traceback:\n" .. out)
end)

-- ---- printing -------------------------------------------------------------------------------

test("printing: tables say requires_grad=True as tensors do; streams print 0x0; the uuid's last group has 12 digits", function()
  local shell = require "tensh.shell"
  local text = shell.format({w = torch.randn(10, 10, {requires_grad = true}), flag = true})
  ok(text:find("requires_grad=True", 1, true) and not text:find("requires_grad=true", 1, true), text)
  if not has_cuda then return end
  eq(tostring(cuda.default_stream(0)), "<torch.cuda.Stream device=cuda:0 cuda_stream=0x0>", "the default stream")
  ok(tostring(cuda.Stream()):match("cuda_stream=0x%x+>$"), "a stream's handle in hex")
  local uuid = cuda.get_device_properties(0).uuid
  ok(uuid:match("^GPU%-%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$"), "uuid " .. uuid)
end)

test("a cross-entropy loss's grad_fn is PyTorch's NllLossBackward0", function()
  local loss = nn.CrossEntropyLoss()(torch.randn(3, 4, {requires_grad = true}), torch.tensor({0, 1, 2}))
  eq(tostring(loss.grad_fn), "<NllLossBackward0>", "grad_fn of the fused cross_entropy")
  local nll = nn.functional.nll_loss(torch.randn(3, 4, {requires_grad = true}):log_softmax(1), torch.tensor({0, 1, 2}))
  eq(tostring(nll.grad_fn), "<NllLossBackward0>", "grad_fn of nll_loss")
end)

-- ---- `local` at the prompt ------------------------------------------------------------------

test("`local` at the prompt becomes a global for the session; blocks and <close> keep theirs", function()
  local rewrite = require("tensh.prompt_locals").rewrite
  eq(rewrite("local x = torch.ones(2)"), "x = torch.ones(2)", "a local")
  eq(rewrite("local a, b = 1, 2; a + b"), "a, b = 1, 2; a + b", "a list, then an expression")
  eq(rewrite("local n"), "n = nil", "no value")
  eq(rewrite("local function f(v) local w = v return w end"), "function f(v) local w = v return w end", "a function")
  eq(rewrite("local c <const> = 3"), "c  = 3", "an attribute")
  eq(rewrite("local _ <close> = torch.no_grad()"), nil, "a to-be-closed variable stays")
  eq(rewrite("for i = 1, 2 do local q = i end local w = 5"), "for i = 1, 2 do local q = i end w = 5", "inside a loop: stays")
  eq(rewrite("if x then local y = 1 else local z = 2 end"), nil, "inside if")
  eq(rewrite("while false do local k = 1 end local m"), "while false do local k = 1 end m = nil", "after a while")
  eq(rewrite('s = "local y = 2" -- local u'), nil, "strings and comments")
  eq(rewrite("local s = [==[local t]==] --[[ local u ]] local v = 1"), "s = [==[local t]==] --[[ local u ]] v = 1",
    "long strings and comments")
  eq(rewrite("print(1)"), nil, "nothing to change")
  -- and the rewritten chunk keeps the value across chunks
  load(rewrite("local habits2_prompt_value = 41"))()
  eq(load("return habits2_prompt_value + 1")(), 42, "the next chunk sees it")
  habits2_prompt_value = nil -- luacheck: ignore
end)

-- ---- docs/porting.md says what stays different ----------------------------------------------

test("docs/porting.md covers the differences that stay", function()
  local f = io.open("../../docs/porting.md")
  if not f then T.skip("docs/porting.md is not beside the tests") end
  local text = f:read("a")
  f:close()
  for _, phrase in ipairs({"ipairs", "enumerate", "`a @ b`", "x ** 2", "time.time()", "global named `data`",
      "`local` at the prompt", "map_location", "with:", "x = nil", "memory_allocated", "SGD(params, 0.01)",
      "TENSH_TRACEBACK", "0-based"}) do
    ok(text:find(phrase, 1, true), "docs/porting.md says nothing of " .. phrase)
  end
end)

T.run()
