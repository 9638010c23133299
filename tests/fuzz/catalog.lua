-- The functions the fuzzer calls, found rather than listed: everything
-- reachable from tensh's globals (torch, nn, optim, data, tb, cuda), from the
-- metatables of the userdata
-- classes in the registry and of the objects given, walking tables, their
-- metatables and __index tables. Callable tables (classes with __call) count
-- as functions. Lua's own standard library is left out: it is not ours, and
-- os.exit or io.open would turn the fuzzer on the machine; so are the
-- library's internal modules, reachable only through package.loaded.
local M = {}

local ROOTS = {"nn", "optim", "data", "tb", "cuda", "torch"}
local STD = {"_G", "string", "table", "math", "io", "os", "coroutine", "debug", "utf8", "package"}

local function sorted_keys(t)
  local keys = {}
  for k in next, t do
    if type(k) == "string" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  return keys
end

-- The standard library's functions, for telling Lua's frames from tensh's.
function M.std_functions()
  local set = {}
  for _, name in ipairs(STD) do
    local t = _G[name]
    if type(t) == "table" then
      for _, v in next, t do
        if type(v) == "function" then set[v] = true end
      end
    end
  end
  return set
end

-- What a message from a call says about the library: "api" for functions a
-- user calls, "method" for a Lua method (first parameter self) called on
-- something else, "meta" for metamethods called by hand, "internal" for the
-- library's helpers (fields named _x).
local function kind(path, key, fn)
  if key and key:find("^__") then return "meta" end
  if key and key:find("^_") then return "internal" end
  if type(fn) == "function" and debug.getlocal(fn, 1) == "self" then return "method" end
  return "api"
end

-- Returns the list of {path, fn, key, kind, owner}: owner is the table whose
-- metatable holds a metamethod found there (a class for its constructor's
-- __call), for calling it by hand on the value Lua would pass.
-- `objects` is a list of values whose metatables are walked too.
function M.build(objects)
  require("tensh.lazy").load_all() -- nn, optim, ... load on first use; walked raw below
  local entries, seen, seen_fn = {}, {}, {}
  for _, name in ipairs(STD) do
    if _G[name] then seen[_G[name]] = true end
  end
  seen[getmetatable("")] = true
  local walk
  local function add(path, fn, key, owner)
    if seen_fn[fn] then return end
    seen_fn[fn] = true
    entries[#entries + 1] = {path = path, fn = fn, key = key, kind = kind(path, key, fn), owner = owner}
  end
  function walk(path, t, owner)
    if seen[t] then return end
    seen[t] = true
    local mt = debug.getmetatable(t)
    if type(mt) == "table" and rawget(mt, "__call") then add(path, t, path:match("[^.:]*$")) end
    for _, k in ipairs(sorted_keys(t)) do
      local v = rawget(t, k)
      local p = path .. "." .. k
      if type(v) == "function" then add(p, v, k, owner)
      elseif type(v) == "table" then walk(p, v) end
    end
    if type(mt) == "table" then walk(path .. ":mt", mt, t) end
  end
  for _, name in ipairs(ROOTS) do
    if type(_G[name]) == "table" then walk(name, _G[name]) end
  end
  local reg = debug.getregistry()
  for _, name in ipairs(sorted_keys(reg)) do
    if (name:find("^tensh%.") or name:find("^torch%.")) and type(reg[name]) == "table" then
      walk("<" .. name .. ">", reg[name])
    end
  end
  for _, v in ipairs(objects or {}) do
    local mt = debug.getmetatable(v)
    if type(mt) == "table" then
      walk("<" .. tostring(rawget(mt, "__name") or type(v)) .. ">", mt)
    end
  end
  return entries
end

return M
