-- Metamethods called by hand (getmetatable(x).__add(1, 2), loader.__len(5))
-- and methods given an object of another class (issue 26): each says what it
-- expected, at the caller's line, never Lua's own words from inside the
-- library ("attempt to index a number value (local 'self')"). The last case
-- calls every metamethod the API fuzzer finds (tests/fuzz/catalog.lua) with
-- wrong values, so a new one that forgets its check fails here too.
local T = require "harness"
local test, eq, raises, ok = T.test, T.eq, T.raises, T.ok

-- raises(fn, text) and the message is raised at this file's line, not inside lua/tensh
local function raises_here(fn, text, what)
  local err = raises(fn, text, what)
  ok(not err:find("lua/tensh/", 1, true), (what or text) .. ": raised inside the library: " .. err)
  return err
end

test("a tensor's operator metamethods by hand with no tensor raise as PyTorch's Tensor.__add__(1, 2)", function()
  local mt = getmetatable(torch.zeros(1))
  for _, mm in ipairs({"__add", "__sub", "__mul", "__div", "__mod", "__pow", "__idiv", "__band", "__bor", "__bxor"}) do
    raises_here(function() return mt[mm](1, 2) end,
      ("bad argument #1 to '%s' (a tensor expected on one side, got number and number)"):format(mm), mm)
  end
  raises_here(function() return mt.__lt(1, 2) end, "'__lt' (a tensor expected on one side, got number and number)")
  raises_here(function() return mt.__le("a", {}) end, "'__le' (a tensor expected on one side, got string and table)")
  raises_here(function() return mt.__eq(nil, torch.Size({1})) end,
    "'__eq' (a tensor expected on one side, got nil and torch.Size)")
  -- with a tensor on either side they are the operators
  local x = torch.tensor({1.0, 2.0})
  T.close(mt.__add(1, x):tolist(), {2.0, 3.0}, 0, 0, "__add(1, x)")
  T.close(mt.__sub(x, 1):tolist(), {0.0, 1.0}, 0, 0, "__sub(x, 1)")
  eq(mt.__lt(torch.tensor(1.0), 2), true, "__lt(t, 2)")
  raises_here(function() return torch.tensor(1.0) < nil end, "attempt to compare a tensor with a nil value")
  local freed = torch.ones(1)
  mt.__close(freed)
  raises_here(function() return freed < 2 end, "tensor was already freed")
  raises_here(function() return mt.__index(5, "shape") end, "tensor expected, got number")
  raises_here(function() return mt.__len("x") end, "tensor expected, got string")
  raises_here(function() return mt.__tostring({}) end, "tensor expected, got table")
end)

test("data's metamethods by hand on something else name the class they expected", function()
  local ds = data.TensorDataset(torch.arange(6):view(3, 2))
  local loader = data.DataLoader(ds, {batch_size = 2})
  local sampler = data.DistributedSampler(ds, {num_replicas = 2, rank = 0})
  raises_here(function() return getmetatable(ds).__len(5) end, "bad argument #1 to '__len' (TensorDataset expected, got number)")
  raises_here(function() return getmetatable(loader).__len(ds) end,
    "bad argument #1 to '__len' (DataLoader expected, got TensorDataset)")
  raises_here(function() return getmetatable(loader).__tostring(true) end,
    "bad argument #1 to '__tostring' (DataLoader expected, got boolean)")
  raises_here(function() return getmetatable(loader).__call(5) end,
    "bad argument #1 to '__call' (DataLoader expected, got number)")
  raises_here(function() return getmetatable(sampler).__tostring("s") end,
    "bad argument #1 to '__tostring' (DistributedSampler expected, got string)")
  raises_here(function() return getmetatable(data.CIFAR10).__index.__tostring(loader) end,
    "bad argument #1 to '__tostring' (ImageDataset expected, got DataLoader)")
  -- the right values still work
  eq(#ds, 3, "#dataset")
  eq(#loader, 2, "#loader")
  local batches = 0
  for _ in loader do batches = batches + 1 end
  eq(batches, 2, "for x in loader")
  ok(tostring(loader):find("^DataLoader%(2 batches"), tostring(loader))
end)

test("a Measurement's, a module's and a class's metamethods by hand name what they expected", function()
  local m = torch.bench.Timer({stmt = function() end}):timeit(3)
  raises_here(function() return getmetatable(m).__tostring(5) end,
    "bad argument #1 to '__tostring' (bench.Measurement expected, got number)")
  ok(tostring(m):find("Measurement object"), "the real one prints")
  -- (the 30-minute fuzz's find: a threshold that is no number compared inside)
  raises_here(function() return m:meets_confidence({}) end, "meets_confidence: threshold must be a number, got table")
  eq(m:meets_confidence(1e9), true, "a number threshold")
  local props_mt = debug.getregistry()["tensh.cuda.Properties"] -- (made where cuda is: the simulated pass)
  if props_mt then
    raises_here(function() return props_mt.__tostring(5) end, "(tensh.cuda.Properties expected, got number)")
    raises_here(function() return props_mt.__tostring({name = "x"}) end, "(tensh.cuda.Properties expected, got table)")
  end
  local lin = nn.Linear(2, 2)
  local mt = getmetatable(lin)
  raises_here(function() return mt.__index(5, "weight") end, "Module.__index: expected a module")
  raises_here(function() return mt.__newindex(lin, nil, 1) end, "Module.__newindex: an attribute name can't be nil")
  raises_here(function() return mt.__newindex(lin, 0 / 0, 1) end, "Module.__newindex: an attribute name can't be NaN")
  raises_here(function() lin[nil] = 1 end, "Module.__newindex: an attribute name can't be nil") -- (Lua passes it on)
  -- (the fuzz of 2026-11-28 12:11: a child under a table key, then printing the module failed inside it)
  raises_here(function() lin[{}] = nn.ReLU() end, "Module.__newindex: a child module's name must be a string, got table")
  raises_here(function() lin[true] = nn.Parameter(torch.ones(1)) end,
    "Module.__newindex: a parameter's name must be a string, got boolean")
  eq(tostring(lin), "Linear(in_features=2, out_features=2, bias=True)", "nothing was registered")
  lin[{}] = torch.ones(1) -- a plain attribute: no name needed
  lin[1] = nn.ReLU() -- a number names it, as before
  eq(#lin:state_dict() == 0 and lin:state_dict()["weight"] ~= nil, true, "state_dict still names everything")
  raises_here(function() return mt.__concat(nil, {}) end,
    "bad argument #1 to '__concat' (a printable tensh value expected on one side, got nil and table)")
  eq("m: " .. nn.ReLU(), "m: ReLU()", "the operator still joins")
  raises_here(function() return "m: " .. nn.ReLU() .. {} end, "attempt to concatenate a table value")
  local class_newindex = getmetatable(nn.Linear).__newindex
  raises_here(function() return class_newindex(5, "f", print) end, "bad argument #1 to '__newindex' (a class expected, got number)")
  raises_here(function() return class_newindex(nn.Linear, nil, print) end, "bad argument #2 to '__newindex' (a key can't be nil)")
end)

test("a module's method given a module of another class says so; subclasses still pass", function()
  local x = torch.randn(4, 3)
  local lin = nn.Linear(3, 3)
  raises_here(function() return nn.BatchNorm1d.forward(lin, x) end,
    "bad argument #1 to 'forward' (BatchNorm1d expected, got Linear)")
  raises_here(function() return nn.Conv2d.extra_repr(lin) end, "bad argument #1 to 'extra_repr' (Conv2d expected, got Linear)")
  raises_here(function() return nn.Transformer.init(lin) end, "(Transformer expected, got Linear)")
  raises_here(function() return nn.BatchNorm1d.forward(x) end, "a method is called with ':', as model:forward()")
  -- a subclass's module passes its parent's methods, and Module's methods take any module
  local Mine = nn.Linear:extend("Mine")
  local mine = Mine(3, 3)
  T.close(nn.Linear.forward(mine, x):tolist(), x:mm(mine.weight:t()):add(mine.bias):tolist(), 1e-6, 1e-6, "Linear.forward(mine)")
  eq(#nn.Module.parameters(lin), 2, "Module.parameters(linear)")
end)

-- every metamethod the fuzzer's catalog finds, with wrong selves and wrong
-- values: the message says what was wrong, in words that are not Lua's own
-- from inside the library
local LUA_WORDS = {"attempt to ", "table index is ", "bad argument #%-", "lua/tensh/[%w_/]+%.lua:%d+:",
  "bad argument #%d+ to '[a-z]+' %(", "number has no integer", "stack overflow"}
-- (an operator's metamethod given an operand the operator refuses says what Lua says for it)
local OPERATOR_WORDS = {"^attempt to concatenate an? [%w%.%*]+ value$", "^attempt to compare a tensor with an? [%w%.%*]+ value$"}

-- the fuzzer's catalog of what it calls (tests/fuzz/catalog.lua)
local function fuzz_catalog()
  local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
  local saved = package.path
  package.path = here .. "../fuzz/?.lua;" .. package.path
  local catalog = require("catalog")
  package.path = saved
  return catalog
end

test("every metamethod the fuzzer finds, called by hand with wrong values, says what was wrong", function()
  local catalog = fuzz_catalog()
  local objects = {torch.randn(2), nn.Linear(2, 2), data.TensorDataset(torch.randn(4, 2)),
    data.DataLoader(data.TensorDataset(torch.randn(4, 2)), {batch_size = 2}), torch.Size({2}), torch.device("cpu"),
    torch.bench.Timer({stmt = function() end}):timeit(1), optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})}
  local wrong = {1, 2.5, "a", true, {}, {1, 2}, torch.Size({2, 2}), print, io.stdout, torch.randn(2), nn.ReLU()}
  local bad, calls = {}, 0
  for _, e in ipairs(catalog.build(objects)) do
    if e.kind == "meta" and e.key ~= "__gc" and e.key ~= "__close" then -- (those two free their object)
      for i, w in ipairs(wrong) do
        for _, args in ipairs({{w}, {w, wrong[i % #wrong + 1]}}) do
          calls = calls + 1
          local done, err = pcall(e.fn, table.unpack(args, 1, 2))
          err = not done and tostring(err)
          if err and not err:find(OPERATOR_WORDS[1]) and not err:find(OPERATOR_WORDS[2]) then
            for _, p in ipairs(LUA_WORDS) do
              if err:find(p) then bad[#bad + 1] = e.path .. ": " .. err break end
            end
          end
        end
      end
    end
  end
  ok(calls > 1000, "calls made: " .. calls)
  ok(#bad == 0, #bad .. " messages from inside the library:\n" .. table.concat(bad, "\n", 1, math.min(#bad, 20)))
end)

-- The library's private helpers (_x) a user can reach (issue 26): a method
-- checks its object as the public ones do, a function its arguments, and
-- the steps only the library calls are local, out of reach.
test("private methods and helpers name what they expected; the library's own steps are out of reach", function()
  local m = nn.Linear(2, 2)
  local opt = optim.Adam(m:parameters(), 0.1)
  local sched = optim.lr_scheduler.LinearLR(opt)
  raises_here(function() return nn.Module._get_name(5) end, "bad argument #1 to '_get_name' (Module expected, got number")
  raises_here(function() return nn.MultiheadAttention._reset_parameters() end,
    "bad argument #1 to '_reset_parameters' (MultiheadAttention expected, got no value")
  raises_here(function() return nn.Transformer._reset_parameters(m) end,
    "bad argument #1 to '_reset_parameters' (Transformer expected, got Linear)")
  raises_here(function() return torch.models.SqueezeExcitation._scale({}) end,
    "bad argument #1 to '_scale' (SqueezeExcitation expected, got table")
  raises_here(function() return optim.SGD._update(opt, opt.param_groups[1]) end,
    "bad argument #1 to '_update' (SGD expected, got Adam)")
  raises_here(function() return opt:_update({lr = 1}) end,
    "bad argument #2 to '_update' (one of the optimizer's param_groups expected, got table)")
  raises_here(function() return optim.Adam._validate(3, {}) end, "bad argument #1 to '_validate' (string expected, got number)")
  raises_here(function() return optim.Adam._validate("Adam", true) end, "bad argument #2 to '_validate' (table (a param group) expected")
  raises_here(function() return optim.lr_scheduler.StepLR._get_closed_form_lr(sched) end,
    "bad argument #1 to '_get_closed_form_lr' (StepLR expected, got LinearLR)")
  raises_here(function() return sched:_init(5, -1) end, "bad argument #2 to '_init' (table (the options) expected, got number)")
  raises_here(function() return sched:_init({}, "x") end, "bad argument #3 to '_init' (integer (last_epoch) expected")
  raises_here(function() return m:_check_no_cycle("a", 5, "x") end,
    "bad argument #3 to '_check_no_cycle' (Module or nil expected, got number)")
  raises_here(function() return torch.bench._percentile(nil, 50) end, "bad argument #1 to '_percentile' (table")
  raises_here(function() return torch.bench._percentile({1, "2"}, 50) end, "sorted[2] is string, not a number")
  raises_here(function() return torch.bench._percentile({1, 2}, torch.Size({1})) end,
    "bad argument #2 to '_percentile' (a percentage in [0, 100] expected, got torch.Size)")
  raises_here(function() return torch.models._make_divisible(70, nil) end,
    "bad argument #2 to '_make_divisible' (a positive number expected, got nil)")
  raises_here(function() return torch.models._make_divisible(coroutine.create(print), 8) end,
    "bad argument #1 to '_make_divisible' (number expected, got thread)")
  raises_here(function() return torch.dist._nccl_sum(torch.ones(1)) end, "_nccl_sum: the default process group has not been")
  -- a path with a NUL byte and a graph's sample_args are refused at the caller's line too
  raises_here(function() return data.read_image("a\0b.png") end, "read_image: the path holds a NUL byte (at byte 1)")
  raises_here(function() return data.save_image(torch.zeros(1, 2, 2), "a\0.png") end, "save_image: the path holds a NUL byte")
  raises_here(function() return cuda.make_graphed_callables(function() end, nil) end,
    "cuda.make_graphed_callables: sample_args must be a tensor or a list of tensors, got nil")
  raises_here(function() return torch.amp._autocast("cpu", 5) end,
    "bad argument #2 to '_autocast' (list of option names expected, got number)")
  raises_here(function() return torch.amp._autocast("cpu", {"enabled", 3}) end, "names[2] is number, not a string")
  -- the steps only the library calls are not reachable
  eq(rawget(torch.bench.Timer, "_loop"), nil, "Timer._loop")
  eq(rawget(torch.bench.Timer, "_timeit"), nil, "Timer._timeit")
  eq(rawget(nn.Module, "_apply_move"), nil, "Module._apply_move")
  eq(rawget(data.DataLoader, "_plan"), nil, "DataLoader._plan")
  eq(rawget(nn.parallel.DistributedDataParallel, "_grad_ready"), nil, "DDP._grad_ready")
  -- the right values still work
  eq(m:_get_name(), "Linear", "m:_get_name()")
  eq(torch.bench._percentile({1, 2, 3}, 50), 2, "_percentile")
  eq(torch.models._make_divisible(70, 8), 72, "_make_divisible")
  opt:_update(opt.param_groups[1])
  local ok_init = pcall(sched._init, sched, {}, -1)
  ok(ok_init, "sched:_init({}, -1)")
  eq(m:double().weight.dtype, torch.float64, "m:double() (through the local move)")
end)

-- Lua's words, a lua/tensh position, or a standard function's bad argument
-- (the fuzzer's test, tests/fuzz/child.lua: "bad argument #1 to 'autocast'" names the library's function)
local STD = {}
for _, lib in ipairs({"_G", "string", "table", "math", "utf8", "coroutine"}) do
  for k, v in pairs(_G[lib]) do if type(v) == "function" then STD[k] = true end end
end
STD["for iterator"] = true
local function from_inside(err)
  for i, p in ipairs(LUA_WORDS) do
    if i ~= 5 and err:find(p) then return true end -- (5: any lower-case name, for the metamethods' sweep)
  end
  return STD[err:match("bad argument #%d+ to '([^']*)'") or ""] == true
end

test("every private Lua helper the fuzzer finds, given wrong values, says what was wrong", function()
  local catalog = fuzz_catalog()
  local objects = {torch.randn(2), nn.Linear(2, 2), data.TensorDataset(torch.randn(4, 2)),
    data.DataLoader(data.TensorDataset(torch.randn(4, 2)), {batch_size = 2}), torch.Size({2}),
    optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1}), nn.MultiheadAttention(4, 2)}
  objects[#objects + 1] = optim.lr_scheduler.StepLR(objects[6], 2)
  local wrong = {1, 2.5, "a", true, {}, {1, 2}, torch.Size({2, 2}), print, coroutine.create(print), torch.randn(2), nn.ReLU()}
  local bad, calls, helpers = {}, 0, 0
  for _, e in ipairs(catalog.build(objects)) do
    if e.kind == "internal" and type(e.fn) == "function" and debug.getinfo(e.fn, "S").what == "Lua" then
      helpers = helpers + 1
      local firsts = {table.unpack(wrong)}
      for _, o in ipairs(objects) do firsts[#firsts + 1] = o end -- an object of the helper's class, then wrong values
      for i, first in ipairs(firsts) do
        local w = wrong[i % #wrong + 1]
        for _, args in ipairs({{first}, {first, w}, {first, w, w}}) do
          calls = calls + 1
          local done, err = pcall(e.fn, table.unpack(args, 1, 3))
          err = not done and tostring(err)
          if err and from_inside(err) then bad[#bad + 1] = e.path .. ": " .. err end
        end
      end
    end
  end
  ok(helpers > 20 and calls > 1000, ("helpers %d, calls made: %d"):format(helpers, calls))
  ok(#bad == 0, #bad .. " messages from inside the library:\n" .. table.concat(bad, "\n", 1, math.min(#bad, 20)))
end)

-- the 30-minute fuzz of 2026-11-28: a class's __newindex by hand removed
-- nn.Module.init, and every later module call failed inside the library. Lua
-- calls __newindex only for keys a class lacks, so by hand on a key it has
-- it refuses; plain assignment still replaces or removes.
test("a class's __newindex by hand refuses a key the class has; plain assignment and new keys still work", function()
  local newindex = getmetatable(nn.Module).__newindex
  raises_here(function() newindex(nn.Module, "init", nil) end,
    "bad argument #2 to '__newindex' (Module already has 'init': __newindex only adds keys; assign Module.init = f")
  raises_here(function() getmetatable(nn.Linear).__newindex(nn.Linear, "extra_repr", nil) end, "Linear already has 'extra_repr'")
  raises_here(function() getmetatable(optim.Optimizer).__newindex(optim.Optimizer, "zero_grad", print) end,
    "Optimizer already has 'zero_grad'")
  eq(tostring(nn.Linear(2, 3)), "Linear(in_features=2, out_features=3, bias=True)", "nn still works")
  local Net = nn.Module:extend("Net")
  getmetatable(Net).__newindex(Net, "forward", function(self, x) return x + 1 end) -- a new key: added, and checked
  eq(Net()(torch.tensor(1.0)):item(), 2.0, "a method added by hand")
  raises_here(function() Net.forward(5) end, "bad argument #1 to 'forward' (Net expected, got number")
  Net.forward = nil -- plain Lua: the class's own to change
  eq(rawget(Net, "forward"), nil, "a user class's method removed")
  local Lin = nn.Linear:extend("Lin")
  Lin.extra_repr = function() return "mine" end
  eq(tostring(Lin(2, 3)), "Lin(mine)", "a subclass overrides")
end)

test("the fuzz's other finds: embedding's weight, layer_norm's table, samplers' lengths, a Size as indices", function()
  raises_here(function() nn.functional.embedding(torch.tensor({1}), torch.ones(3)) end,
    "embedding: 'weight' must be 2-D (num_embeddings, embedding_dim), got 1-d")
  raises_here(function() nn.functional.embedding(torch.tensor({1}), torch.tensor(1.0)) end, "got 0-d")
  raises_here(function() nn.functional.layer_norm(torch.ones(2, 3), {a = 1}) end,
    "normalized_shape must be a list of integers, got a table with the key \"a\"")
  raises_here(function() nn.functional.layer_norm(torch.ones(2, 3), {3, n = 1}) end, "with the key \"n\"")
  local lengthless = setmetatable({}, {__len = function() return nil end})
  raises_here(function() return #data.BatchSampler(lengthless, 2) end, "BatchSampler: the sampler has no length")
  raises_here(function() return optim.SGD(data.BatchSampler(lengthless, 2), {lr = 0.1}) end, "the sampler has no length")
  eq(table.concat(data.SubsetRandomSampler(torch.Size({3, 1, 2})).list, " "), "3 1 2", "a torch.Size is a list of indices")
  -- the third fuzz: a 0-d tensor as a sampler, an integer dtype for a disabled autocast
  raises_here(function() for _ in data.BatchSampler(torch.tensor(5), 2):iter() do end end,
    "BatchSampler: a sampler tensor must be 1-d (a list of indices), got 0-d")
  eq(#data.BatchSampler(torch.tensor({3, 1, 2}), 2), 2, "a 1-d tensor still is one")
  raises_here(function() local _ <close> = cuda.amp.autocast({enabled = false, dtype = torch.int64}) end,
    "autocast: option 'dtype': torch.float16 or torch.bfloat16 expected, got torch.int64")
end)

T.run()
