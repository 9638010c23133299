-- nn layers, one family a file: the containers (Sequential, ModuleList, ModuleDict).
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module = nn.Module
local raise = C.raise
local check_int = C.check_int

local as_list = require("tensh.args").list

local M = {}

-- indexing from 0, negative from the end, for the list-like containers
local function position(self, k)
  local keys = rawget(self, "_modules").keys
  local n = #keys
  if math.type(k) ~= "integer" then raise("%s: index must be an integer, got %s", self:_get_name(), tostring(k)) end
  if k < -n or k >= n then
    raise("%s: index %d is out of range for %d modules (indices count from 0; iterate with pairs())",
      self:_get_name(), k, n)
  end
  if k < 0 then k = k + n end
  return keys[k + 1]
end
-- the containers' metamethods, which a user may call by hand on anything
local check_module = C.check_module
local function getitem(self, k)
  check_module("container __getitem", self)
  return rawget(self, "_modules").vals[position(self, k)]
end
local function setitem(self, k, v)
  check_module("container __setitem", self)
  if not nn.is_module(v) then raise("%s: only modules can be stored, got %s", self:_get_name(), type(v)) end
  self:_check_no_cycle(tostring(k), v, self:_get_name() .. "[" .. tostring(k) .. "]")
  rawget(self, "_modules").vals[position(self, k)] = v
end
local function len(self)
  check_module("container __len", self)
  return #rawget(self, "_modules").keys
end
-- for i, m in pairs(seq): 0-based positions in order
local function list_pairs(self)
  check_module("container __pairs", self)
  local od = rawget(self, "_modules")
  return function(_, i)
    i = i + 1
    local k = od.keys[i + 1]
    if k ~= nil then return i, od.vals[k] end
  end, self, -1
end
local function append(self, m)
  if not nn.is_module(m) then raise("%s:append: expected a module, got %s", self:_get_name(), type(m)) end
  self:add_module(tostring(len(self)), m)
  return self
end
local function extend(self, list) -- not checked by tensh.classes: "extend" is also Module.extend's name
  check_module("ModuleList:extend", self)
  if type(list) ~= "table" then raise("%s:extend: expected a list of modules, got %s", self:_get_name(), type(list)) end
  local items = {}
  if nn.is_module(list) then for _, m in pairs(list) do items[#items + 1] = m end
  else for i, m in ipairs(list) do items[i] = m end end
  for _, m in ipairs(items) do append(self, m) end
  return self
end
-- inserts before position index, renumbering the names that follow ("0", "1", ...)
local function insert(self, index, m)
  if not nn.is_module(m) then raise("%s:insert: expected a module, got %s", self:_get_name(), type(m)) end
  self:_check_no_cycle(tostring(index), m, self:_get_name() .. ":insert")
  local od = rawget(self, "_modules")
  local n = #od.keys
  index = check_int(self:_get_name() .. ":insert", "index", index)
  if index < -n or index > n then raise("%s:insert: index %d is out of range for %d modules", self:_get_name(), index, n) end
  if index < 0 then index = index + n end
  local mods = {}
  for i, k in ipairs(od.keys) do
    if tostring(i - 1) ~= k then raise("%s:insert: needs modules named 0, 1, ... (found '%s')", self:_get_name(), k) end
    mods[i] = od.vals[k]
  end
  table.insert(mods, index + 1, m)
  for i, mm in ipairs(mods) do C.od_set(od, tostring(i - 1), mm) end
  return self
end

local function add_from_table(self, name, t)
  if #t > 0 then
    for i, e in ipairs(t) do
      if nn.is_module(e) then
        self:add_module(tostring(i - 1), e)
      elseif type(e) == "table" and type(e[1]) == "string" and nn.is_module(e[2]) then
        self:add_module(e[1], e[2])
      else
        raise("%s: element %d must be a module or a {name, module} pair, got %s", name, i, type(e))
      end
    end
  else
    -- a keyed table has no order: names sorted, so the order is at least stable
    local keys = {}
    for k, v in pairs(t) do
      if type(k) ~= "string" then raise("%s: keys must be strings, got %s", name, type(k)) end
      if not nn.is_module(v) then raise("%s: '%s' must be a module, got %s", name, k, type(v)) end
      keys[#keys + 1] = k
    end
    table.sort(keys)
    for _, k in ipairs(keys) do self:add_module(k, t[k]) end
  end
end

local function list_like(name)
  local cls = Module:extend(name)
  M[name] = cls
  cls.__getitem, cls.__setitem, cls.__len, cls.__pairs = getitem, setitem, len, list_pairs
  cls.append, cls.extend, cls.insert = append, extend, insert
  return cls
end

-- Sequential(m1, m2, ...), Sequential({m1, m2}), Sequential({{"fc", m1}, {"act", m2}}), Sequential({fc = m1})
local Sequential = list_like("Sequential")
function Sequential:init(...)
  local n = select("#", ...)
  local first = ...
  if n == 1 and type(first) == "table" and not nn.is_module(first) then
    add_from_table(self, "Sequential", first)
    return
  end
  for i = 1, n do
    local m = select(i, ...)
    if not nn.is_module(m) then raise("Sequential: argument %d must be a module, got %s", i, type(m)) end
    self:add_module(tostring(i - 1), m)
  end
end
function Sequential:forward(x, ...)
  local od = rawget(self, "_modules")
  local keys, vals = od.keys, od.vals
  if #keys == 0 then return x, ... end
  x = vals[keys[1]](x, ...)
  for i = 2, #keys do x = vals[keys[i]](x) end
  return x
end

local ModuleList = list_like("ModuleList")
function ModuleList:init(modules)
  if modules == nil then return end
  if type(modules) ~= "table" then
    raise("ModuleList: expected a list of modules, got %s", type(modules))
  end
  extend(self, modules)
end
function ModuleList:forward()
  raise("ModuleList has no forward(); iterate over it: for i, m in pairs(list) do x = m(x) end")
end
-- repeated blocks printed once, as (0-2): 3 x Linear(...) (PyTorch 2's compact form)
function ModuleList:__tostring()
  check_module("ModuleList.__tostring", self)
  local od = rawget(self, "_modules")
  if #od.keys == 0 then return self:_get_name() .. "()" end
  local blocks = {}
  for i, k in ipairs(od.keys) do
    local r = C.module_repr(od.vals[k]) -- not tostring(): see nn.lua's printing
    local last = blocks[#blocks]
    if last and last.repr == r then last.stop = i - 1
    else blocks[#blocks + 1] = {start = i - 1, stop = i - 1, repr = r} end
  end
  local lines = {}
  for _, b in ipairs(blocks) do
    local s
    if b.start == b.stop then s = ("(%d): %s"):format(b.start, b.repr)
    else s = ("(%d-%d): %d x %s"):format(b.start, b.stop, b.stop - b.start + 1, b.repr) end
    lines[#lines + 1] = C.addindent(s, 2)
  end
  return self:_get_name() .. "(\n  " .. table.concat(lines, "\n  ") .. "\n)"
end

local ModuleDict = Module:extend("ModuleDict")
M.ModuleDict = ModuleDict
-- ModuleDict({a = m1, b = m2}) (keys sorted) or ModuleDict({{"a", m1}, {"b", m2}}) (in order)
function ModuleDict:init(modules)
  if modules == nil then return end
  if type(modules) ~= "table" or nn.is_module(modules) then
    raise("ModuleDict: expected a table of name -> module, got %s", type(modules))
  end
  add_from_table(self, "ModuleDict", modules)
end
function ModuleDict:update(modules)
  if type(modules) ~= "table" then
    require("tensh.args").type_error("ModuleDict:update", 1, "table of name -> module", modules)
  end
  add_from_table(self, "ModuleDict:update", modules) return self end
function ModuleDict:keys()
  local out = {}
  for i, k in ipairs(rawget(self, "_modules").keys) do out[i] = k end
  return as_list(out, "ModuleDict:keys()")
end
function ModuleDict:values()
  local od, out = rawget(self, "_modules"), {}
  for i, k in ipairs(od.keys) do out[i] = od.vals[k] end
  return as_list(out, "ModuleDict:values()")
end
function ModuleDict:items() return pairs(self) end
function ModuleDict:contains(k) return rawget(self, "_modules").pos[k] ~= nil end
function ModuleDict:pop(k)
  local od = rawget(self, "_modules")
  if od.pos[k] == nil then raise("ModuleDict:pop: no module named '%s'", tostring(k)) end
  local m = od.vals[k]
  C.od_del(od, k)
  return m
end
ModuleDict.__len = len
ModuleDict.__pairs = function(self)
  check_module("ModuleDict.__pairs", self)
  local od, i = rawget(self, "_modules"), 0
  return function()
    i = i + 1
    local k = od.keys[i]
    if k ~= nil then return k, od.vals[k] end
  end, self, nil
end
function ModuleDict:forward() raise("ModuleDict has no forward(); call its modules: d.name(x) or d[\"name\"](x)") end

return M
