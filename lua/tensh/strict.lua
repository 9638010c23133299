-- Strict library tables: reading a name that does not exist from torch, nn,
-- optim, cuda, data, ... raises "torch has no field 'flaot32' (did you mean
-- 'float32'?)" instead of giving a silent nil (a typo in {dtype =
-- torch.flaot32} would otherwise give the default dtype). Names starting with
-- "_" are private and may be probed (torch._sgd_step ~= nil); code that
-- probes a public name uses rawget. Tensors (through the hook the C __index
-- calls on a miss) and modules (for names close to a method) suggest the
-- nearest name too. luaopen_tensh loads this file last.
local A = require "tensh.args"
local M = {}

-- the distance and the nearest-name rule are args.lua's, shared with the
-- options checks (Lua's and C's)
M.distance = A.distance
M.nearest = A.nearest

local function keys_of(...)
  local names, seen = {}, {}
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    if type(t) == "table" then
      for k in pairs(t) do
        if type(k) == "string" and not seen[k] then seen[k] = true names[#names + 1] = k end
      end
    end
  end
  return names
end

local function no_field(what, k, names)
  local near = M.nearest(k, names)
  if near then A.raise("%s has no field '%s' (did you mean '%s'?)", what, k, near) end
  A.raise("%s has no field '%s'", what, k)
end
M.no_field = no_field

-- t raises on a missing public string key; other keys read as nil, and so
-- do the names in `optional` (fields a build may lack: cuda.version)
function M.protect(t, what, optional)
  local mt = getmetatable(t)
  if mt ~= nil and mt.__index ~= nil then return t end -- it resolves names itself (torch.backends)
  mt = mt or {}
  mt.__index = function(tbl, k)
    if type(k) ~= "string" or k:sub(1, 1) == "_" or (optional and optional[k]) then return nil end
    no_field(what, k, keys_of(tbl))
  end
  return setmetatable(t, mt)
end

-- The tensor __index's miss (ltensor.c calls the registry's tensh.tensor_no_field):
-- methods and properties are the candidates. `t.item` read and called with no
-- tensor (a '.' for ':') is the C binding's "got no value" error, with a hint.
local function tensor_no_field(k, methods, properties)
  if type(k) ~= "string" or k:sub(1, 1) == "_" then return nil end
  no_field("Tensor", k, keys_of(methods, properties))
end

-- A module attribute that is missing and within an edit or two of one of the
-- class's methods is a typo (m:foward(x)); other missing attributes read as
-- nil, as user code probes its own (if self.hidden == nil then ...).
function M.module_miss(self, cls, k)
  if type(k) ~= "string" or k:sub(1, 1) == "_" or #k < 4 then return nil end
  local names, c = {}, cls
  while type(c) == "table" do
    for name, v in pairs(c) do
      if type(name) == "string" and type(v) == "function" and not name:find("^__") then names[#names + 1] = name end
    end
    local mt = getmetatable(c)
    c = mt and rawget(mt, "__index")
  end
  local near = M.nearest(k, names)
  if near and near ~= k then
    A.raise("%s has no field '%s' (did you mean '%s'?)", rawget(cls, "__name") or "Module", k, near)
  end
  return nil
end

-- The namespaces not named in install's list, found by a walk: plain tables
-- (no metatable) of string keys below the globals, named by their first
-- path (torch.autograd, torch.cpu, cuda.amp, nn.parallel, dist.ReduceOp, ...);
-- a table under a name already given keeps that name. Tables of data the
-- library probes (torch.version, the profiler's name map) are left alone.
local DATA = {["torch.version"] = true, ["profiler.aten_names"] = true}

local function is_namespace(t)
  if type(t) ~= "table" or getmetatable(t) ~= nil then return false end
  for k in next, t do
    if type(k) ~= "string" then return false end
  end
  return true
end

local function walk(t, path, named, found, depth)
  if depth > 6 then return end
  for k, v in next, t do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and type(v) == "table" and not named[v] then
      local name = path .. "." .. k
      if is_namespace(v) and not DATA[name] then
        named[v] = name
        found[#found + 1] = {v, name}
        walk(v, name, named, found, depth + 1)
      end
    end
  end
end

-- the namespaces below a library table that are protected by name
local SUBS = {nn = {"functional", "init", "utils"}, optim = {"lr_scheduler"}, data = {"transforms"}}

local function add(tables, t, name, optional)
  tables[#tables + 1] = {t, name, optional}
  if type(t) ~= "table" then return end
  for _, sub in ipairs(SUBS[name] or {}) do tables[#tables + 1] = {rawget(t, sub), name .. "." .. sub} end
end

-- protects the tables ({table, name, optional}) and every namespace below them,
-- as "did you mean" works the same everywhere
local function protect_all(tables)
  local named, found = {}, {}
  for _, e in ipairs(tables) do if type(e[1]) == "table" then named[e[1]] = e[2] end end
  for _, e in ipairs(tables) do if type(e[1]) == "table" then walk(e[1], e[2], named, found, 1) end end
  for _, e in ipairs(found) do tables[#tables + 1] = e end
  for _, e in ipairs(tables) do
    if type(e[1]) == "table" then M.protect(e[1], e[2], e[3]) end
  end
end

-- a namespace loaded after install (tensh.lazy: nn, optim, ...)
function M.protect_namespace(t, name)
  local tables = {}
  add(tables, t, name)
  protect_all(tables)
end

function M.install()
  local reg = debug.getregistry()
  reg["tensh.tensor_no_field"] = tensor_no_field
  local tables = {}
  add(tables, torch, "torch")
  -- the lazily loaded ones (a stub with its loader for a metatable) are protected as they load
  for _, name in ipairs({"nn", "optim", "data", "cuda", "tb", "amp", "models", "dist", "bench", "profiler"}) do
    local t, mt = rawget(_G, name), getmetatable(rawget(_G, name))
    if not (type(mt) == "table" and rawget(mt, "__tensh_lazy")) then add(tables, t, name, name == "cuda" and {version = true} or nil) end
  end
  local utils = rawget(torch, "utils")
  if type(utils) == "table" then tables[#tables + 1] = {utils, "torch.utils"} end
  protect_all(tables)
end

return M
