-- What every tensh class does the same way, set up by one call where the
-- class is made (M.setup: nn.Module and Module.extend, the optimizers and
-- schedulers, data's classes, GradScaler, autocast, ...):
--
-- * A method read with '.' for ':' (m.parameters(), opt.step(),
--   m.to("cuda")), the commonest slip when porting, gets no object or the
--   wrong one, and would fail deep inside the library ("table index is
--   nil"). Every public method checks its first argument and says, in the
--   C binding's words for tensors: "bad argument #1 to 'parameters' (Module
--   expected, got no value; a method is called with ':', as
--   model:parameters())".
-- * A printable instance joins with `..` (tensh.printable).
--
-- Methods defined after setup (function Linear:forward ...) are covered
-- too: the class's metatable gets a __newindex that wraps them as they
-- arrive. Private names (_x), metamethods (__x) and the class-level
-- functions (extend, new, init, and those a class lists as static) are
-- left alone: they take a class, or are called only by the library.
local printable = require "tensh.printable"
local M = {}

local CLASS_LEVEL = {extend = true, new = true, init = true}

-- the wrappers made here, so a method copied from class to class
-- (Module.register_module = Module.add_module) is wrapped once
local wrappers = setmetatable({}, {__mode = "k"})

local typename = require("tensh.args").typename

-- v is an instance of cls: its metatable is cls or a class whose
-- metatable's __index chain reaches cls (the classes' extend make them so)
function M.instance_of(v, cls)
  local mt = getmetatable(v)
  for _ = 1, 32 do
    if rawequal(mt, cls) then return true end
    if type(mt) ~= "table" then return false end
    local up = getmetatable(mt)
    mt = type(up) == "table" and rawget(up, "__index") or nil
  end
  return false
end

-- a class table (it holds its instances' __index and a name), not an instance
local function is_class(v)
  return type(v) == "table" and type(rawget(v, "__name")) == "string" and rawget(v, "__index") ~= nil
end

local function missing_self(spec, method, nargs, self)
  local raise = require("tensh.errors").raise
  if is_class(self) then -- nn.GRU:forward(x): the class where an instance belongs
    local name = rawget(self, "__name")
    raise("%s: expected %s, got the class %s (create one with %s(...))", method, spec.a, name, name)
  end
  local got = nargs == 0 and "no value" or typename(self)
  raise("bad argument #1 to '%s' (%s expected, got %s; a method is called with ':', as %s:%s())",
    method, spec.what, got, spec.var, method)
end

local function wrap(spec, name, f)
  local is_instance = spec.is_instance
  local w = function(self, ...) -- named self, as the method's own first parameter
    if not is_instance(self) then missing_self(spec, name, (self == nil and select("#", ...) == 0) and 0 or 1, self) end
    return f(self, ...)
  end
  wrappers[w] = true
  return w
end

local function wraps(spec, k, v)
  return type(k) == "string" and type(v) == "function" and not wrappers[v] and k:sub(1, 1) ~= "_"
    and not CLASS_LEVEL[k] and not (spec.static and spec.static[k])
end

-- cls: the class table (its instances' metatable). spec:
--   what   the name the message expects ("Module", "Optimizer"; default cls.__name)
--   a      the same with an article, for a class given for an instance ("a module")
--   var    the variable the hint calls with ("model" in model:parameters())
--   is_instance(v)  default: M.instance_of(v, cls)
--   static {name = true}: public functions that take no instance
-- Returns cls.
function M.setup(cls, spec)
  spec = spec or {}
  local what = spec.what or rawget(cls, "__name") or "object"
  local s = {what = what, a = spec.a or "a " .. what, var = spec.var or "obj", static = spec.static}
  -- the metatables of instances seen (weak keys): after the first call, one
  -- getmetatable and one lookup (a class's own metatable is never an instance's)
  local seen = setmetatable({}, {__mode = "k"})
  local check = spec.is_instance or function(v) return M.instance_of(v, cls) end
  s.is_instance = function(v)
    local mt = getmetatable(v)
    if mt ~= nil and seen[mt] then return true end
    if not check(v) then return false end
    if mt ~= nil then seen[mt] = true end
    return true
  end
  for k, v in next, cls do
    if wraps(s, k, v) then rawset(cls, k, wrap(s, k, v)) end
  end
  printable.give(cls)
  local mt = getmetatable(cls)
  if mt == nil then mt = {} setmetatable(cls, mt) end
  if rawget(mt, "__newindex") == nil then
    rawset(mt, "__newindex", function(c, k, v)
      if wraps(s, k, v) then v = wrap(s, k, v) end
      rawset(c, k, v)
      if k == "__tostring" then printable.give(c) end
    end)
  end
  return cls
end

-- The tensor methods written in Lua (lua/tensh/tensor_extra.lua): each
-- checks its tensor, in the C methods' words (src/lua/ltensor.c): x.flip(0)
-- for x:flip(0) gets "bad argument #1 to 'flip' (tensor expected, got
-- number; a method is called with ':', as t:flip())". A freed tensor
-- passes on, for the method's own message.
function M.tensor_methods(methods)
  local tensor_mt = debug.getmetatable(torch.empty(0))
  for name, f in pairs(methods) do
    if type(name) == "string" and type(f) == "function" and not wrappers[f] and debug.getinfo(f, "S").what == "Lua" then
      local w = function(t, ...)
        if debug.getmetatable(t) ~= tensor_mt then
          require("tensh.errors").raise(
            "bad argument #1 to '%s' (tensor expected, got %s; a method is called with ':', as t:%s())", name,
            (t == nil and select("#", ...) == 0) and "no value" or typename(t), name)
        end
        return f(t, ...)
      end
      wrappers[w] = true
      methods[name] = w
    end
  end
end

return M
