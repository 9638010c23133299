-- Runs once when tensh loads: the parts of the torch namespace that are
-- plain Lua (torch.Size, torch.device, dtype constants). `torch`, the
-- metatables and the dtypes (the names the C enum owns, and which of them
-- are floating point) come from the C side as arguments.
local torch, size_mt, device_mt, dtype_names, dtype_floating = ...

-- dtypes are the strings torch prints: torch.float32 == "torch.float32"
local floating = {}
for _, name in ipairs(dtype_names) do
  torch[name] = "torch." .. name
  floating[torch[name]] = dtype_floating[name]
end
torch._floating_dtypes = floating -- "torch.float32" -> true, for tensh.args.is_floating_dtype
torch.float, torch.double, torch.half = torch.float32, torch.float64, torch.float16
torch.long, torch.int, torch.short = torch.int64, torch.int32, torch.int16

-- torch.Size: dims count from 0 (s[0]), #s is the rank, == compares.
local size_methods = {}
function size_methods.totable(s)
  local t = {}
  for i, v in ipairs(rawget(s, "_dims")) do t[i] = v end
  return t
end
function size_methods.numel(s)
  local n = 1
  for _, v in ipairs(rawget(s, "_dims")) do n = n * v end
  return n
end
-- A metamethod called by hand (getmetatable(x).__len(5)) names what it expected.
local function check_self(mt, what, v)
  if getmetatable(v) ~= mt then
    error(("%s: expected a %s, got %s"):format(what, mt.__name, torch.is_tensor(v) and "Tensor" or type(v)), 3)
  end
end
size_mt.__index = function(s, k)
  check_self(size_mt, "torch.Size.__index", s)
  if math.type(k) == "integer" then
    local dims = rawget(s, "_dims")
    local n = #dims
    if k < -n or k >= n then
      error(("torch.Size index %d out of range for rank %d"):format(k, n), 2)
    end
    return dims[(k < 0 and k + n or k) + 1]
  end
  return size_methods[k]
end
size_mt.__newindex = function() error("torch.Size is immutable", 2) end
size_mt.__len = function(s)
  check_self(size_mt, "torch.Size.__len", s)
  return #rawget(s, "_dims")
end
-- a Size equals a Size or a plain list of the same dims (s == {2, 3}, as
-- PyTorch's Size equals a tuple); anything else is unequal
local function dims_of(v)
  if getmetatable(v) == size_mt then return rawget(v, "_dims") end
  if type(v) == "table" and getmetatable(v) == nil then return v end
end
size_mt.__eq = function(a, b)
  local x, y = dims_of(a), dims_of(b)
  if not x or not y or #x ~= #y then return false end
  for i = 1, #x do if x[i] ~= y[i] then return false end end
  return true
end
size_mt.__tostring = function(s)
  check_self(size_mt, "torch.Size.__tostring", s)
  return "torch.Size([" .. table.concat(rawget(s, "_dims"), ", ") .. "])"
end
size_mt.__name = "torch.Size"
torch.Size = function(t)
  if t == nil then t = {} end -- torch.Size(): the size of a 0-dim tensor, as PyTorch's
  if getmetatable(t) == size_mt then t = t:totable() end
  if type(t) ~= "table" or getmetatable(t) ~= nil then
    error(("bad argument #1 to 'torch.Size' (list of integers expected, got %s)"):format(
      torch.is_tensor(t) and "Tensor" or type(t)), 2)
  end
  local dims = {}
  for i, v in ipairs(t) do
    if math.type(v) ~= "integer" then error(("torch.Size: dim %d must be an integer, got %s"):format(i - 1, type(v)), 2) end
    dims[i] = v
  end
  return setmetatable({_dims = dims}, size_mt)
end

-- torch.device("cuda:1"): fields type and index; prints as "cuda:1"
device_mt.__tostring = function(d)
  check_self(device_mt, "torch.device.__tostring", d)
  return d._str
end
device_mt.__eq = function(a, b)
  return getmetatable(a) == device_mt and getmetatable(b) == device_mt and a._str == b._str
end
device_mt.__index = function(_, k) return nil end
device_mt.__name = "torch.device"
torch.device = function(s, index)
  if getmetatable(s) == device_mt then return s end
  if math.type(s) == "integer" and index == nil then -- torch.device(1): a CUDA ordinal, as PyTorch's
    if s < 0 then error(("torch.device: a device ordinal must be non-negative, got %d"):format(s), 2) end
    s = "cuda:" .. s
  end
  if type(s) ~= "string" then
    error("torch.device: expected a string such as \"cpu\" or \"cuda:0\", or a CUDA ordinal, got " .. type(s), 2)
  end
  if index ~= nil then s = s .. ":" .. tostring(index) end
  local typ, idx = s:match("^(%a+):?(%d*)$")
  if typ ~= "cpu" and typ ~= "cuda" then
    error(("torch.device: unknown device '%s' (expected \"cpu\", \"cuda\" or \"cuda:N\")"):format(s), 2)
  end
  if typ == "cpu" and idx ~= "" then error("torch.device: the CPU takes no index", 2) end
  return setmetatable({type = typ, index = idx ~= "" and tonumber(idx) or nil, _str = s}, device_mt)
end

-- torch.no_grad, enable_grad, set_grad_enabled: scopes for <close> or a function
require("tensh.scopes").install(torch)

-- torch.version.cuda: the CUDA runtime tensh was built with ("13.0"), nil
-- in a CPU-only build, as PyTorch's None; the same string as cuda.version.
torch.version = {cuda = torch.cuda and torch.cuda.version or nil, __version__ = torch.__version__}

-- torch.Tensor: PyTorch's legacy constructor, always float32.
--   torch.Tensor({0., 0.}[, {device =}])   from values (integers too: still float32)
--   torch.Tensor(2, 3[, {device =}]), torch.Tensor(size)   uninitialised, of that shape
--   torch.Tensor()                         an empty (0,) tensor
-- Errors name torch.Tensor and point at the caller's line.
local raise = require("tensh.errors").raise
local function is_opts(v)
  return type(v) == "table" and getmetatable(v) == nil and rawget(v, 1) == nil and next(v) ~= nil
    and type(next(v)) == "string"
end
torch.Tensor = function(...)
  local n = select("#", ...)
  local args = {...}
  local opts = {}
  if n > 0 and is_opts(args[n]) then
    for k, v in pairs(args[n]) do
      if k ~= "device" then
        raise("torch.Tensor: unknown option '%s' (the legacy constructor takes only device; for a dtype use torch.tensor(data, {dtype = ...}))",
          tostring(k))
      end
    end
    opts.device = args[n].device
    n = n - 1
  end
  opts.dtype = torch.float32
  local first = args[1]
  local ok, t
  if n == 0 then
    ok, t = pcall(torch.empty, 0, opts)
  elseif torch.is_tensor(first) then
    if n > 1 then raise("torch.Tensor: expected one tensor, got %d arguments", n) end
    if first.dtype ~= torch.float32 then
      raise("torch.Tensor: expected a float32 tensor, got %s (use t:float() to convert)", first.dtype)
    end
    return first
  elseif type(first) == "table" and getmetatable(first) == nil then
    if n > 1 then raise("torch.Tensor: expected one list of values, got %d arguments", n) end
    ok, t = pcall(torch.tensor, first, opts)
  else -- sizes: integers or one torch.Size
    local sizes = {}
    for i = 1, n do
      local v = args[i]
      if getmetatable(v) == size_mt and n == 1 then sizes = v:totable()
      elseif math.type(v) == "integer" then sizes[#sizes + 1] = v
      else
        raise("torch.Tensor: expected a list of values, sizes or a tensor, got %s as argument %d",
          type(v) == "number" and tostring(v) or type(v), i)
      end
    end
    ok, t = pcall(torch.empty, sizes, opts)
  end
  if not ok then raise("torch.Tensor: %s", (tostring(t):gsub("^[^:]*:%d+: ", ""):gsub("^%a+: ", ""))) end
  return t
end

-- x:any() and x:all() over every element give Lua booleans (Lua has no
-- truthiness hook: a tensor in `if` is always true). Code written the PyTorch
-- way calls :item() on the result, so booleans answer :item() with themselves;
-- indexing a boolean any other way is the error it always was.
local function boolean_item(self) return self end
debug.setmetatable(false, {
  __index = function(b, key)
    if key == "item" then return boolean_item end
    raise("attempt to index a boolean value (key '%s'); a boolean has only :item() (x:any() and x:all() without a dim give Lua booleans)", tostring(key))
  end,
})
