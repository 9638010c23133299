-- Runs once when tensh loads: the parts of the torch namespace that are
-- plain Lua (torch.Size, torch.device, dtype constants). `torch` and the
-- metatable names come from the C side as arguments.
local torch, size_mt, device_mt = ...

-- dtypes are the strings torch prints: torch.float32 == "torch.float32"
for _, name in ipairs({"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"}) do
  torch[name] = "torch." .. name
end
torch.float, torch.double, torch.half = torch.float32, torch.float64, torch.float16
torch.long, torch.int = torch.int64, torch.int32

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
size_mt.__index = function(s, k)
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
size_mt.__len = function(s) return #rawget(s, "_dims") end
size_mt.__eq = function(a, b)
  local x, y = rawget(a, "_dims"), rawget(b, "_dims")
  if #x ~= #y then return false end
  for i = 1, #x do if x[i] ~= y[i] then return false end end
  return true
end
size_mt.__tostring = function(s)
  return "torch.Size([" .. table.concat(rawget(s, "_dims"), ", ") .. "])"
end
size_mt.__name = "torch.Size"
torch.Size = function(t)
  local dims = {}
  for i, v in ipairs(t) do
    if math.type(v) ~= "integer" then error(("torch.Size: dim %d must be an integer, got %s"):format(i - 1, type(v)), 2) end
    dims[i] = v
  end
  return setmetatable({_dims = dims}, size_mt)
end

-- torch.device("cuda:1"): fields type and index; prints as "cuda:1"
device_mt.__tostring = function(d) return d._str end
device_mt.__eq = function(a, b) return a._str == b._str end
device_mt.__index = function(_, k) return nil end
device_mt.__name = "torch.device"
torch.device = function(s, index)
  if getmetatable(s) == device_mt then return s end
  if type(s) ~= "string" then error("torch.device: expected a string such as \"cpu\" or \"cuda:0\", got " .. type(s), 2) end
  if index ~= nil then s = s .. ":" .. tostring(index) end
  local typ, idx = s:match("^(%a+):?(%d*)$")
  if typ ~= "cpu" and typ ~= "cuda" then
    error(("torch.device: unknown device '%s' (expected \"cpu\", \"cuda\" or \"cuda:N\")"):format(s), 2)
  end
  if typ == "cpu" and idx ~= "" then error("torch.device: the CPU takes no index", 2) end
  return setmetatable({type = typ, index = idx ~= "" and tonumber(idx) or nil, _str = s}, device_mt)
end
