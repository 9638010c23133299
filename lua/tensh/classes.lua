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
-- arrive. Private methods (_x whose first parameter is self) are checked
-- too; metamethods (__x), other private functions and the class-level
-- functions (extend, new, init, and those a class lists as static) are
-- left alone: they take a class, or are called only by the library. A class
-- whose init takes the new instance (nn's modules: spec.instance_init) has
-- it checked too, so nn.Linear.init(5) says what it expected.
local printable = require "tensh.printable"
local M = {}

local CLASS_LEVEL = {extend = true, new = true, init = true}

local typename = require("tensh.args").typename

-- The wrappers made here, so that a method copied from class to class
-- (Module.register_module = Module.add_module) is wrapped once. A set, not a
-- look at the function's source: debug.getinfo for each of the library's
-- ~700 methods was a fifth of the shell's start-up.
local wrappers = setmetatable({}, {__mode = "k"})
local function is_wrapper(f) return wrappers[f] ~= nil end

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

-- The name the failed wrapper (the function at `level`) has in the table t
-- or in the __index chain of its metatables; for the message only.
local function name_in(t, level)
  local w = debug.getinfo(level, "f").func
  for _ = 1, 32 do
    if type(t) ~= "table" then break end
    for k, v in next, t do
      if v == w and type(k) == "string" then return k end
    end
    local mt = getmetatable(t)
    t = type(mt) == "table" and rawget(mt, "__index") or nil
  end
  return "?"
end

local function missing_self(spec, nargs, self)
  local raise = require("tensh.errors").raise
  local method = name_in(spec.cls, 3) -- 1 name_in, 2 this, 3 the wrapper
  if is_class(self) then -- nn.GRU:forward(x): the class where an instance belongs
    local name = rawget(self, "__name")
    raise("%s: expected %s, got the class %s (create one with %s(...))", method, spec.a, name, name)
  end
  local got = nargs == 0 and "no value" or typename(self)
  if type(self) == "table" and is_class(getmetatable(self)) then -- an object of another class (nn.BatchNorm1d.forward(linear, x))
    raise("bad argument #1 to '%s' (%s expected, got %s)", method, spec.what, got)
  end
  raise("bad argument #1 to '%s' (%s expected, got %s; a method is called with ':', as %s:%s())",
    method, spec.what, got, spec.var, method)
end

-- Each class's spec (what, a, var, static, cls, check, seen) is one table,
-- and the functions below are shared by every class: the Lua heap paces the
-- collector (src/lua/ltensor.c), so a hundred classes' closures would cost
-- the training loops (test_cpu_memory's flat run).
local specs = setmetatable({}, {__mode = "k"}) -- class -> spec
local WEAK_KEYS = {__mode = "k"}

-- v is an instance for spec: after the first call for a metatable, one
-- getmetatable and one lookup (a class's own metatable is never an instance's)
local function is_instance(spec, v)
  local mt = getmetatable(v)
  local seen = spec.seen
  if mt ~= nil and seen and seen[mt] then return true end
  if spec.check then
    if not spec.check(v) then return false end
  elseif not M.instance_of(v, spec.cls) then
    return false
  end
  if mt ~= nil then
    if not seen then seen = setmetatable({}, WEAK_KEYS) spec.seen = seen end
    seen[mt] = true
  end
  return true
end

-- The self of a metamethod, which Lua always passes but a user may call by
-- hand on anything (getmetatable(loader).__len(5)): an instance of cls, or
-- an error in the C binding's words ("bad argument #1 to '__len'
-- (DataLoader expected, got number)") instead of Lua's from inside the method.
function M.check_meta(cls, mm, v)
  local spec = specs[cls]
  if spec then
    if is_instance(spec, v) then return end
  elseif M.instance_of(v, cls) then
    return
  end
  local what = spec and spec.what or tostring(rawget(cls, "__name") or "object")
  require("tensh.errors").raise("bad argument #1 to '%s' (%s expected, got %s)", mm, what,
    is_class(v) and "the class " .. rawget(v, "__name") or typename(v))
end

-- wrapped init -> the init it wraps, whose parameter names nn reads
-- (keyword arguments: nn.Linear({in_features = 2, ...}))
local wrapped_inits = setmetatable({}, {__mode = "k"})

local function wrap(spec, f, k)
  local w = function(self, ...) -- named self, as the method's own first parameter
    if not is_instance(spec, self) then missing_self(spec, (self == nil and select("#", ...) == 0) and 0 or 1, self) end
    return f(self, ...)
  end
  if k == "init" then wrapped_inits[w] = f end
  wrappers[w] = true
  return w
end

-- f itself, or the init a wrapper checks self for
function M.unwrap_init(f) return wrapped_inits[f] or f end

-- A private method (_x, first parameter self: Module:_get_name, an
-- optimizer's _update) is reachable too (PyTorch users call
-- m:_get_name(), mha:_reset_parameters()), so it checks its object as the
-- public ones do; a private function taking no object (an optimizer's
-- _validate(name, group)) checks its own arguments.
local function private_method(k, v)
  return k:sub(1, 1) == "_" and k:sub(2, 2) ~= "_" and debug.getlocal(v, 1) == "self"
end

local function wraps(spec, k, v)
  return type(k) == "string" and type(v) == "function" and (k:sub(1, 1) ~= "_" or private_method(k, v))
    and (not CLASS_LEVEL[k] or (k == "init" and spec.instance_init))
    and not (spec.static and spec.static[k]) and not is_wrapper(v)
end

-- a method defined on a class after setup (function Linear:forward ...) is wrapped as it arrives
local function class_newindex(c, k, v)
  if type(c) ~= "table" or k == nil or k ~= k then -- called by hand (Lua's own c.k = v has a class and a key)
    require("tensh.errors").raise("bad argument #%d to '__newindex' (%s)", type(c) ~= "table" and 1 or 2,
      type(c) ~= "table" and "a class expected, got " .. typename(c) or "a key can't be " .. (k == nil and "nil" or "NaN"))
  end
  local spec = specs[c]
  if rawget(c, k) ~= nil then
    -- Lua calls __newindex only for a key the class lacks: this is a call by
    -- hand, which would replace (or with nil remove) a method unchecked, as
    -- nn.Module.init, and every later module call would fail inside the library
    require("tensh.errors").raise("bad argument #2 to '__newindex' (%s already has '%s': __newindex only adds "
      .. "keys; assign %s.%s = f to replace it)", tostring(rawget(c, "__name") or "the class"), tostring(k),
      tostring(rawget(c, "__name") or "class"), tostring(k))
  end
  if spec and wraps(spec, k, v) then v = wrap(spec, v, k) end
  rawset(c, k, v)
  if k == "__tostring" then printable.give(c) end
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
  local s = {what = what, a = spec.a or "a " .. what, var = spec.var or "obj", static = spec.static, cls = cls,
    check = spec.is_instance, instance_init = spec.instance_init}
  specs[cls] = s
  for k, v in next, cls do
    if wraps(s, k, v) then rawset(cls, k, wrap(s, v, k)) end
  end
  printable.give(cls)
  local mt = getmetatable(cls)
  if mt == nil then mt = {} setmetatable(cls, mt) end
  if rawget(mt, "__newindex") == nil then rawset(mt, "__newindex", class_newindex) end
  return cls
end

-- The tensor methods written in Lua (lua/tensh/tensor_extra.lua): each
-- checks its tensor, in the C methods' words (src/lua/ltensor.c): x.flip(0)
-- for x:flip(0) gets "bad argument #1 to 'flip' (tensor expected, got
-- number; a method is called with ':', as t:flip())". A freed tensor
-- passes on, for the method's own message.
function M.tensor_methods(methods)
  local tensor_mt = debug.getmetatable(torch.empty(0))
  local function bad_self(nargs, t)
    local name = name_in(methods, 3) -- 1 name_in, 2 this, 3 the wrapper
    require("tensh.errors").raise("bad argument #1 to '%s' (tensor expected, got %s; a method is called with ':', "
      .. "as t:%s())", name, nargs == 0 and "no value" or typename(t), name)
  end
  local function wrap(f)
    local w = function(t, ...)
      if debug.getmetatable(t) ~= tensor_mt then bad_self((t == nil and select("#", ...) == 0) and 0 or 1, t) end
      return f(t, ...)
    end
    wrappers[w] = true
    return w
  end
  for name, f in pairs(methods) do
    if type(name) == "string" and type(f) == "function" and not is_wrapper(f) and not torch._is_cfunction(f) then
      methods[name] = wrap(f)
    end
  end
end

return M
