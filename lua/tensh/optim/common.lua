-- Table helpers shared by the optimizers (optim.lua) and the schedulers
-- (optim/lr_scheduler.lua).
local M = {}
local A = require "tensh.args"

function M.is_plain_table(v) return type(v) == "table" and not torch.is_tensor(v) end

-- a plain table's copy (betas = {0.9, 0.999}); any other value as it is, so that an
-- object given by mistake is still itself in the message that refuses it
function M.shallow_copy(v)
  if type(v) ~= "table" or debug.getmetatable(v) ~= nil then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = x end
  return t
end

function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- A value for a message or a repr: lists (and a torch.Size) as {a, b}, cut
-- short past 16 items and 8 levels (a hostile value may be nested thousands
-- deep, or be huge); any other object by its type's name (a module is "ReLU",
-- not the "{}" its array part would give).
function M.show(v, depth)
  depth = depth or 0
  v = A.plain(v)
  if type(v) == "table" and not A.is_plain_table(v) then return A.typename(v) end
  if type(v) == "table" then
    if depth >= 8 then return "{...}" end
    local parts = {}
    for i, x in ipairs(v) do
      if i > 16 then
        parts[i] = "..."
        break
      end
      parts[i] = M.show(x, depth + 1)
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

-- Whether v is `base` or a class made from it by extend: a class is its own
-- __index (an instance is not), and its metatables' __index chain reaches
-- base (bounded, as a chain may loop).
local function derives(v, base)
  if type(v) ~= "table" or rawget(v, "__index") ~= v then return false end
  for _ = 1, 100 do
    if rawequal(v, base) then return true end
    if type(v) ~= "table" then return false end
    local mt = getmetatable(v)
    v = type(mt) == "table" and rawget(mt, "__index") or nil
  end
  return false
end

-- The class argument of Base.new(cls, ...) and Base.extend(base, ...):
-- `root` itself (abstract: for extend only) or a class made from it.
-- `kind` says which, for the message ("an optimizer class (optim.SGD, ...)").
function M.check_class(fn, what, v, root, kind, concrete)
  if not derives(v, root) or (concrete and rawequal(v, root)) then
    A.raise("%s: %s must be %s, got %s", fn, what, kind, A.show(v))
  end
  return v
end

-- The __call of a class made by root.extend: Class(...) is Class.new(Class, ...),
-- with the class checked first (the metamethod may be called by hand).
function M.class_call(fn, root, kind)
  return function(cls, ...)
    M.check_class(fn, "cls", cls, root, kind, true)
    return cls.new(cls, ...)
  end
end

-- `self` of a method or metamethod that may be called by hand: an instance
-- of a class made from root.
function M.check_instance(fn, v, root, kind)
  local mt = type(v) == "table" and getmetatable(v)
  if not (mt and derives(mt, root) and not rawequal(mt, root)) then A.raise("%s: expected %s, got %s", fn, kind, A.show(v)) end
  return v
end

-- A copy of a plain table and the tables in it; shared tables stay shared
-- and cycles are kept (as Python's deepcopy) rather than followed forever;
-- nesting deeper than `max_depth` is refused in fn's name.
function M.deep_copy(fn, v, max_depth)
  local copies = {}
  local function copy(x, depth)
    if not M.is_plain_table(x) then return x end
    if copies[x] then return copies[x] end
    if depth > max_depth then A.raise("%s: tables nested deeper than %d levels", fn, max_depth) end
    local t = {}
    copies[x] = t
    for k, y in pairs(x) do t[k] = copy(y, depth + 1) end
    return t
  end
  return copy(v, 0)
end

return M
