-- The values the fuzzer passes: hostile ones (wrong types, nil, NaN and
-- infinities, huge and negative integers, strings with NUL bytes, deep and
-- cyclic tables, option tables with bad keys, callbacks that fail or collect
-- garbage, empty, 0-dim, non-contiguous, stride-0 and huge-shape tensors of
-- every dtype) and plausible ones, so calls get past their first check. Every
-- value has a name for the report; objects a call returns join the pool.
local V = {}

local names = setmetatable({}, {__mode = "k"})
local function named(v, name)
  if v ~= nil and type(v) ~= "number" and type(v) ~= "boolean" and type(v) ~= "string" then names[v] = name end
  return v
end

function V.describe(v)
  local t = type(v)
  if t == "number" then
    if math.type(v) == "integer" then
      if v == math.maxinteger then return "math.maxinteger" end
      if v == math.mininteger then return "math.mininteger" end
      return tostring(v)
    end
    if v ~= v then return "0/0" end
    if v == math.huge then return "math.huge" end
    if v == -math.huge then return "-math.huge" end
    return ("%.17g"):format(v)
  end
  if t == "string" then
    if #v > 40 then return ("(%q):rep(%d)"):format(v:sub(1, 1), #v) end
    return (("%q"):format(v):gsub("\n", "n"))
  end
  if t == "nil" or t == "boolean" then return tostring(v) end
  local name = names[v] or ("<" .. t .. ">")
  if name:find("^<result") and torch.is_tensor(v) then -- its shape, as it is now (in-place calls change it)
    local ok, s = pcall(function() return ("%s %s"):format(v.dtype, table.concat(v.shape:totable(), "x")) end)
    if ok then name = name:sub(1, -2) .. ": " .. s .. ">" end
  end
  return name
end

local HOSTILE_NUMBERS = {
  0, 1, -1, 2, 3, 7, -7, 0.5, -2.5, -0.0, 1e-300, 1e300, 0 / 0, math.huge, -math.huge,
  math.maxinteger, math.mininteger, math.maxinteger - 1, 1 << 31, (1 << 31) - 1, -(1 << 31), 1 << 32,
  1 << 40, 1 << 53, 1 << 62, -(1 << 62), 2.0 ^ 63, 2.0 ^ 64, -2.0 ^ 63, 1.5, 100000,
}
local STRINGS = {
  "", "a", "a\0b", "float32\0", "cpu\0x", "float32", "float64", "int64", "int32", "bool", "half",
  "bfloat16", "uint8", "float16", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:-1", "cuda:99999999999999999999",
  "cpu:0", "mean", "sum", "none", "max", "relu", "tanh", "same", "valid", "zeros", "reflect", "fan_in",
  "fan_out", "nonexistent.safetensors", "fuzz.safetensors", "fuzz_dir", "%s%s%n%d", "\xff\xfe\xfd",
  ("a"):rep(100000), "1e309", "0x10", "  3  ", "nan", "inf", "weight", "bias", "0", "-1", "_modules",
  "__index", "__gc", "a.b", "\n",
}
local OPTION_KEYS = {
  "dtype", "device", "requires_grad", "dim", "keepdim", "lr", "momentum", "weight_decay", "betas", "eps",
  "reduction", "bias", "padding", "stride", "dilation", "groups", "kernel_size", "batch_size", "shuffle",
  "num_workers", "drop_last", "collate_fn", "transform", "out", "generator", "pin_memory", "p", "inplace",
  "alpha", "beta", "value", "size", "min", "max", "descending", "largest", "sorted", "unbiased", "correction",
  "non_blocking", "copy", "mode", "nesterov", "amsgrad", "maximize", "step_size", "gamma", "T_max",
  "milestones", "ignore_index", "label_smoothing", "weight", "pos_weight", "num_classes", "dims", "start",
  "end", "step", "low", "high", "prefetch_factor", "persistent_workers", "sampler", "batch_sampler",
  "threshold", "precision", "linewidth", "sci_mode", "edgeitems", "affine", "track_running_stats",
  "elementwise_affine", "normalized_shape", "num_embeddings", "embedding_dim", "padding_idx", "max_norm",
  "negative_slope", "approximate", "beta1", "tag", "global_step", "walltime", "bogus",
}

-- Deep enough for Lua's own recursion limits in the long run; the short run
-- keeps it where the library's O(depth^2) printing of nested tables (pyval)
-- ends in well under the watchdog's minute.
local DEEP = os.getenv("FUZZ_HUGE") == "1" and 200000 or 10000

local function deep_table(depth)
  local root = {}
  local t = root
  for _ = 1, depth do
    local inner = {}
    t[1] = inner
    t = inner
  end
  return root
end

-- The seeded tensors, made on each device the run uses: in each recipe D
-- stands for an options table and d for a field of one, naming the device
-- (left out on the CPU), so the report's names are code that remakes them.
local TENSORS = {
  "torch.zeros(2, 3, D)", "torch.randn(3, 4, D)", "torch.randn(4, D)", "torch.tensor(3.5, D)", "torch.tensor(2, D)",
  "torch.zeros(0, D)", "torch.zeros(0, 3, D)", "torch.zeros(3, 0, 2, D)", "torch.randn(4, 5, D):t()",
  "torch.randn(3, 6, D):narrow(1, 1, 3)", "torch.zeros(1, D):expand(5)", "torch.zeros(0, 1, D):expand(0, 1 << 62)",
  "torch.arange(6, D):view(2, 3)", "torch.tensor({0, 1, 1}, D)", "torch.tensor({-1, 100}, D)",
  "torch.tensor({true, false, true}, D)", "torch.tensor({0/0, 1/0, -1/0}, D)", "torch.randn(3, {requires_grad = true, d})",
  "torch.randn(3, {requires_grad = true, d}) * 2", "torch.randn(1, 2, 1, 3, 1, D)", "torch.randn(2, 3, 8, 8, D)",
  "torch.randn(2, 3, 8, D)", "torch.zeros(1, 1, 1, 1, 1, 1, 1, 1, D)",
}
for _, dt in ipairs({"float64", "float16", "bfloat16", "int32", "uint8", "int64", "bool"}) do
  TENSORS[#TENSORS + 1] = ("torch.ones(2, 3, {dtype = %q, d})"):format(dt)
end
-- past int32 indexing: a reduction over it takes seconds to a minute on a
-- busy machine, so only the long run (make fuzz) has it, and only on the CPU
-- (the simulated device would take hours); views of 2^60 elements are
-- legitimately endless work and stay out for the watchdog
local HUGE = os.getenv("FUZZ_HUGE") == "1" and "torch.zeros(1):expand((1 << 31) + 1)" or nil

-- A recipe's code on a device (nil: the CPU's, which names none).
local function on_device(recipe, device)
  if not device then return (recipe:gsub(", D%)", ")"):gsub(", d}", "}")) end
  return (recipe:gsub("D%)", ("{device = %q})"):format(device)):gsub("d}", ("device = %q}"):format(device)))
end

local function tensors(device)
  local list = {}
  for _, recipe in ipairs(TENSORS) do
    local src = on_device(recipe, device)
    local ok, v = pcall(assert(load("return " .. src, "=seed")))
    if ok and v ~= nil then list[#list + 1] = named(v, src) end
  end
  if HUGE and not device then list[#list + 1] = named(assert(load("return " .. HUGE))(), HUGE) end
  return list
end

-- Objects of the library's classes, built with pcall: a class that changes
-- its constructor only drops out of this seed list, and calls that return
-- objects add more as the run goes.
local OBJECTS = {
  "torch.Size({2, 3})", "torch.device('cpu')", "nn.Linear(3, 4)", "nn.Sequential(nn.Linear(3, 4), nn.ReLU())",
  "nn.Conv2d(3, 4, 3)", "nn.Conv1d(3, 4, 3)", "nn.BatchNorm2d(3)", "nn.LayerNorm(4)", "nn.Embedding(10, 3)",
  "nn.CrossEntropyLoss()", "nn.MSELoss()", "nn.ModuleList({nn.ReLU()})", "nn.ModuleDict({a = nn.ReLU()})",
  "nn.Dropout(0.5)", "nn.MaxPool2d(2)", "nn.Flatten()", "nn.Parameter(torch.randn(3))",
  "optim.SGD(nn.Linear(3, 4):parameters(), {lr = 0.1, momentum = 0.9})",
  "optim.Adam(nn.Linear(3, 4):parameters())", "optim.AdamW(nn.Linear(3, 4):parameters())",
  "optim.RMSprop(nn.Linear(3, 4):parameters())",
  "optim.lr_scheduler.StepLR(optim.SGD(nn.Linear(3, 4):parameters(), {lr = 0.1}), 2)",
  "data.TensorDataset(torch.randn(8, 3), torch.arange(8))",
  "data.DataLoader(data.TensorDataset(torch.randn(8, 3), torch.arange(8)), {batch_size = 4})",
  "data.DataLoader(data.TensorDataset(torch.randn(8, 3), torch.arange(8)), {batch_size = 3, num_workers = 2})",
  "data.RandomSampler(data.TensorDataset(torch.randn(8, 3)))", "data.transforms",
  "tb.SummaryWriter('fuzz_runs')", "(torch.randn(2, {requires_grad = true}) * 2).grad_fn",
  "torch.no_grad()", "cuda.Stream()", "cuda.Event()",
  "torch.bench.Timer({stmt = function() end})", "torch.bench.Timer({stmt = function() end}):timeit(2)",
  "data.DistributedSampler(data.TensorDataset(torch.randn(8, 3)), {num_replicas = 2, rank = 0})",
  "data.BatchSampler(data.SequentialSampler(data.TensorDataset(torch.randn(8, 3))), 3, false)",
}
-- and those that hold cuda tensors, when the run uses the device
local CUDA_OBJECTS = {
  "torch.device('cuda')", "torch.device('cuda:1')", "nn.Linear(3, 4):cuda()", "nn.Conv2d(3, 4, 3):cuda()",
  "nn.Conv1d(3, 4, 3):cuda()", "nn.BatchNorm2d(3):cuda()", "nn.LayerNorm(4):cuda()", "nn.Embedding(10, 3):cuda()",
  "nn.Sequential(nn.Linear(3, 4), nn.ReLU()):cuda()", "nn.Parameter(torch.randn(3, {device = 'cuda'}))",
  "optim.SGD(nn.Linear(3, 4):cuda():parameters(), {lr = 0.1, momentum = 0.9})",
  "optim.Adam(nn.Linear(3, 4):cuda():parameters())", "optim.AdamW(nn.Linear(3, 4):cuda():parameters())",
  "data.TensorDataset(torch.randn(8, 3, {device = 'cuda'}), torch.arange(8, {device = 'cuda'}))",
  "data.DataLoader(data.TensorDataset(torch.randn(8, 3), torch.arange(8)), {batch_size = 4, pin_memory = true})",
  "(torch.randn(2, {requires_grad = true, device = 'cuda'}) * 2).grad_fn",
}

-- FUZZ_DEVICE: "cpu" (no cuda tensors), "cuda" (three in four tensors
-- passed are on cuda, the rest on the CPU: calls mix the devices) or "both"
-- (half and half); "both" where cuda is available, else "cpu".
local function device_mode()
  local has_cuda = cuda and cuda.is_available and cuda.is_available()
  local mode = os.getenv("FUZZ_DEVICE") or ""
  if mode == "" then mode = has_cuda and "both" or "cpu" end
  if mode ~= "cpu" and mode ~= "cuda" and mode ~= "both" then error("FUZZ_DEVICE: cpu, cuda or both, got " .. mode) end
  if mode ~= "cpu" and not has_cuda then error("FUZZ_DEVICE=" .. mode .. ": this build has no cuda device") end
  return mode, ({cpu = 0, cuda = 75, both = 50})[mode]
end

local on_cuda = setmetatable({}, {__mode = "k"}) -- the seeded objects that hold cuda tensors

function V.new()
  local mode, cuda_share = device_mode()
  local self = {tensors = tensors(), cuda_tensors = mode == "cpu" and {} or tensors("cuda"), objects = {},
                max_objects = 300, mode = mode, cuda_share = cuda_share}
  local function add_objects(list, cuda_held)
    for _, src in ipairs(list) do
      local ok, v = pcall(assert(load("return " .. src, "=seed")))
      if ok and v ~= nil then
        self.objects[#self.objects + 1] = named(v, src)
        if cuda_held then on_cuda[v] = true end
      end
    end
  end
  add_objects(OBJECTS, false)
  if mode ~= "cpu" then add_objects(CUDA_OBJECTS, true) end
  for _, t in ipairs(self.tensors) do self.objects[#self.objects + 1] = t end
  for _, t in ipairs(self.cuda_tensors) do self.objects[#self.objects + 1] = t end
  local cyclic = {}
  cyclic[1] = cyclic
  local throwing = setmetatable({}, {__index = function() error("fuzz: __index raised") end,
                                     __len = function() return -1 end})
  self.tables = {
    named({}, "{}"), named({1}, "{1}"), named({0}, "{0}"), named({-1}, "{-1}"), named({2, 3}, "{2, 3}"),
    named({1, 2, 3, 4, 5, 6, 7, 8, 9}, "{1, ..., 9}"), named({0, 0}, "{0, 0}"),
    named({math.maxinteger, 2}, "{math.maxinteger, 2}"), named({1 << 40, 1 << 40}, "{1 << 40, 1 << 40}"),
    named({1.5}, "{1.5}"), named({0 / 0}, "{0/0}"), named({"a"}, "{'a'}"), named({true}, "{true}"),
    named({{1, 2}, {3}}, "{{1, 2}, {3}}"), named({{1, 2}, {3, 4}}, "{{1, 2}, {3, 4}}"), named({{}}, "{{}}"),
    named({[1] = 1, [3] = 3}, "{[1] = 1, [3] = 3}"), named({[0] = 5}, "{[0] = 5}"), named({1, x = 2}, "{1, x = 2}"),
    named(deep_table(DEEP), "<table nested " .. DEEP .. " deep>"), named(cyclic, "<table containing itself>"),
    named(throwing, "<table whose __index raises and __len is -1>"),
    -- (not a table whose every field is itself: ipairs over it never ends,
    -- in Lua as in Python, and the watchdog would call it a hang)
    named(setmetatable({}, {__index = function(_, k) if type(k) == "string" then return 1 end end}),
      "<table whose every named field is 1>"),
  }
  local big = {}
  for i = 1, 100000 do big[i] = i % 7 end
  self.tables[#self.tables + 1] = named(big, "<list of 100000 integers>")
  self.functions = {
    named(function() end, "function() end"),
    named(function(...) return ... end, "function(...) return ... end"),
    named(function() error("fuzz: callback raised") end, "function() error('...') end"),
    named(function() error({}) end, "function() error({}) end"),
    named(function() collectgarbage() collectgarbage() end, "function() collectgarbage() end"),
    named(function() return 0 / 0 end, "function() return 0/0 end"),
    named(function() return torch.zeros(2) end, "function() return torch.zeros(2) end"),
    named(function() coroutine.yield() end, "function() coroutine.yield() end"),
  }
  self.misc = {named(io.stdout, "io.stdout"), named(coroutine.create(function() end), "<coroutine>")}
  self.seeded = {[self.tensors] = #self.tensors, [self.cuda_tensors] = #self.cuda_tensors,
                 [self.objects] = #self.objects}
  return setmetatable(self, {__index = V})
end

-- An options table: a few known keys, with plausible or hostile values, and
-- now and then a key no function takes.
function V:options()
  local o = {}
  for _ = 1, math.random(1, 3) do o[OPTION_KEYS[math.random(#OPTION_KEYS)]] = self:any() end
  local r = math.random(10)
  if r == 1 then o[1.5] = 1 elseif r == 2 then o[true] = 1 elseif r == 3 then o[""] = 1 end
  return named(o, "{options}")
end

local function pick(list) return list[math.random(#list)] end

-- A tensor from the pool: on cuda as often as the device mode says.
function V:tensor()
  if #self.cuda_tensors > 0 and math.random(100) <= self.cuda_share then return pick(self.cuda_tensors) end
  return pick(self.tensors)
end

-- A value likely to get past the first type check.
function V:plausible()
  local r = math.random(7)
  if r == 7 then return self:size() end
  if r == 1 then return math.random(0, 4) end
  if r == 2 then return math.random() * 2 end
  if r == 3 then return pick(STRINGS) end
  if r == 4 then return pick(self.objects) end
  return self:tensor()
end

-- torch.Size values, where shapes and lists of dims go (x.shape passed on,
-- as PyTorch code does); child.lua also repeats a call that took a list of
-- integers with that list as a Size
local SIZES = {"torch.Size({2, 3})", "torch.Size({})", "torch.Size({0})", "torch.Size({2, 2})", "torch.Size({3})",
  "torch.Size({1, 2, 1, 3})", "torch.Size({-1})", "torch.Size({1 << 40})"}
local sizes = {}
for i, src in ipairs(SIZES) do sizes[i] = named(assert(load("return " .. src))(), src) end
function V:size() return sizes[math.random(#sizes)] end

-- Anything at all, hostile ones included.
function V:any()
  local r = math.random(12)
  if r == 1 then return nil end
  if r == 2 then return math.random(2) == 1 end
  if r <= 4 then return pick(HOSTILE_NUMBERS) end
  if r == 5 then return pick(STRINGS) end
  if r == 7 and math.random(3) == 1 then return self:size() end
  if r <= 7 then return pick(self.tables) end
  if r == 8 then return math.random(3) == 1 and pick(self.misc) or pick(self.functions) end
  if r == 9 then return self:options() end
  if r == 10 then return pick(self.objects) end
  return self:tensor()
end

-- A pool object the function is a method of (obj[key] is fn), if one turns up;
-- for a metamethod, the value Lua would pass it (one whose metatable holds it,
-- or the class whose constructor it is), so that calls by hand
-- (getmetatable(loader).__len(loader, ...)) get past the first check.
function V:self_for(entry)
  if not entry.key then return nil end
  local meta = entry.kind == "meta"
  if meta and entry.owner ~= nil and math.random(2) == 1 then
    if not names[entry.owner] then named(entry.owner, (entry.path:gsub(":mt%.[^.:]*$", ""))) end
    return entry.owner
  end
  for _ = 1, 8 do
    local o = meta and math.random(3) == 1 and self:tensor() or pick(self.objects)
    if meta then
      local mt = debug.getmetatable(o)
      if type(mt) == "table" and rawequal(rawget(mt, entry.key), entry.fn) then return o end
    else
      local ok, m = pcall(function() return o[entry.key] end)
      if ok and rawequal(m, entry.fn) then return o end
    end
  end
  return nil
end

-- The argument list for one call: (args, n, true when args[1] is an object
-- the function is a method of).
function V:args_for(entry)
  local args, n = {}, math.random(0, 4)
  local first, has_self = 1, false
  if math.random(10) <= 8 then
    local s = self:self_for(entry)
    if s ~= nil then args[1], first, has_self = s, 2, true n = math.max(n, 1) end
  end
  for i = first, n do
    args[i] = math.random(10) <= 4 and self:plausible() or self:any()
  end
  if math.random(10) <= 2 then
    n = n + 1
    args[n] = self:options()
  end
  return args, n, has_self
end

-- Objects a successful call returned join the pool (tables and userdata).
function V:keep(entry, ...)
  for i = 1, math.min(select("#", ...), 2) do
    local v = select(i, ...)
    local t = type(v)
    -- big results make every later call on them slow (tolist of 2^28 elements
    -- runs for minutes): the hostile sizes are in the seeded tensors already
    local huge = torch.is_tensor(v) and v:numel() > (1 << 20)
    if (t == "table" or t == "userdata") and not names[v] and not huge then
      named(v, "<result of " .. entry.path .. ">")
      local list = self.objects
      if torch.is_tensor(v) then list = v.is_cuda and self.cuda_tensors or self.tensors end
      if #list < self.max_objects then list[#list + 1] = v
      else list[math.random(self.seeded[list] + 1, #list)] = v end
    end
  end
end

-- The devices a call's arguments are on: "cpu" (tensors on the CPU only),
-- "cuda" (on cuda only: tensors, objects holding them, device names, option
-- tables naming the device), "mixed" (both) or "none" (no tensor, no device).
local function device_of_value(v, seen)
  if torch.is_tensor(v) then
    local ok, c = pcall(function() return v.is_cuda end)
    return ok and c and "cuda" or "cpu"
  end
  if type(v) == "string" then return v:find("^cuda") and "cuda" or nil end
  if on_cuda[v] then return "cuda" end
  if type(v) == "table" and not seen[v] and getmetatable(v) == nil then -- option tables and lists, one level
    seen[v] = true
    local found, looked = nil, 0
    for _, x in next, v do
      looked = looked + 1
      if looked > 32 then break end -- (the long lists hold numbers)
      local d = (torch.is_tensor(x) or type(x) == "string") and device_of_value(x, seen)
      if d == "cpu" and torch.is_tensor(x) or d == "cuda" then
        if found and found ~= d then return "mixed" end
        found = d
      end
    end
    return found
  end
  return nil
end

function V.devices_of(args, n)
  local cpu, gpu, seen = false, false, {}
  for i = 1, n do
    local d = device_of_value(args[i], seen)
    if d == "mixed" then return "mixed" end
    cpu = cpu or (d == "cpu")
    gpu = gpu or (d == "cuda")
  end
  if cpu and gpu then return "mixed" end
  return gpu and "cuda" or cpu and "cpu" or "none"
end

return V
