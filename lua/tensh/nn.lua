-- nn: PyTorch's torch.nn in Lua. This file holds the Module class (attribute
-- registration, traversal, device/dtype moves, train/eval, state_dict,
-- printing) and nn.Parameter; the layers (one family a file), nn.functional,
-- nn.init and the functional losses live in lua/tensh/nn/. All math goes
-- through torch ops: nothing here loops over elements.
local torch = torch
local util = require "tensh.nn.common"
local module_miss = require("tensh.strict").module_miss
local classes = require "tensh.classes"
local A = require "tensh.args"
local raise, shape_str = util.raise, util.shape_str

local nn = require("tensh.lazy").claim("nn") -- the table the global nn holds from start-up
local is_tensor = torch.is_tensor

-- Tensors made by nn.Parameter (or registered as parameters), weakly held:
-- a parameter frozen with requires_grad = false stays a parameter.
local param_set = setmetatable({}, {__mode = "k"})

-- nn.Parameter(t[, requires_grad = true]): a leaf sharing t's storage.
function nn.Parameter(t, requires_grad)
  if t == nil then t = torch.empty(0) end
  if not is_tensor(t) then raise("nn.Parameter: expected a tensor, got %s", type(t)) end
  if requires_grad == nil then requires_grad = true end
  local p = t:detach()
  p.requires_grad = requires_grad and true or false
  param_set[p] = true
  return p
end

function nn.is_parameter(t) return is_tensor(t) and param_set[t] == true end

-- A tensor assigned to a module attribute becomes a parameter when it was
-- made by nn.Parameter, or is a leaf that requires grad.
local function as_parameter(v)
  if not is_tensor(v) then return false end
  if param_set[v] then return true end
  if v.requires_grad and v.is_leaf then
    param_set[v] = true
    return true
  end
  return false
end

-- ---- ordered dicts: registration order is PyTorch's iteration order ----------

local function od_new() return {keys = {}, vals = {}, pos = {}} end
local function od_has(od, k) return od.pos[k] ~= nil end
local function od_set(od, k, v)
  if not od.pos[k] then
    od.keys[#od.keys + 1] = k
    od.pos[k] = #od.keys
  end
  od.vals[k] = v
end
local function od_del(od, k)
  local i = od.pos[k]
  if not i then return end
  table.remove(od.keys, i)
  od.pos[k], od.vals[k] = nil, nil
  for j = i, #od.keys do od.pos[od.keys[j]] = j end
end
local function od_insert(od, i, k, v) -- before position i (1-based)
  table.insert(od.keys, i, k)
  od.vals[k] = v
  for j = i, #od.keys do od.pos[od.keys[j]] = j end
end
util.od_new, util.od_set, util.od_del, util.od_insert = od_new, od_set, od_del, od_insert

-- ---- classes ------------------------------------------------------------------

local Module = {}
nn.Module = Module

local function is_module(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__tensh_module") == true and rawget(v, "_modules") ~= nil
end
nn.is_module = is_module
util.is_module = is_module

-- self of a module metamethod, which a user may call by hand on anything
-- (getmetatable(m).__call(5)); the hot __index is left unchecked
local function check_module(what, v)
  if is_module(v) then return end
  if type(v) == "table" and rawget(v, "__tensh_module") == true then
    raise("%s: expected a module, got the class %s (create one with %s(...))", what, tostring(rawget(v, "__name")),
      tostring(rawget(v, "__name")))
  end
  raise("%s: expected a module (such as nn.Linear(2, 2)), got %s", what, A.show(v))
end
util.check_module = check_module

-- Attribute lookup: parameters, buffers, submodules, plain attributes, then
-- the class (so a user's self.forward = f overrides the method).
local function instance_index(self, k)
  local params = type(self) == "table" and rawget(self, "_parameters")
  if not params then -- called by hand on something else (getmetatable(m).__index(5, "weight"))
    check_module("Module.__index", self)
    raise("Module.__index: the module has no parameter table (it was not made by its class)")
  end
  local cls = getmetatable(self)
  if type(k) == "number" then
    local gi = cls.__getitem
    if gi then return gi(self, k) end
  end
  local v = params.vals[k]
  if v ~= nil then return v end
  v = rawget(self, "_buffers").vals[k]
  if v ~= nil then return v end
  v = rawget(self, "_modules").vals[k]
  if v ~= nil then return v end
  v = rawget(self, "_attrs")[k]
  if v ~= nil then return v end
  v = cls[k]
  if v == nil and type(k) == "string" and not (rawget(self, "_parameters").pos[k] or rawget(self, "_buffers").pos[k]
      or rawget(self, "_modules").pos[k]) then
    return module_miss(self, cls, k) -- m:foward(x): a typo of a method raises, naming it
  end
  return v
end

local type_name = require("tensh.args").typename

-- A module may not contain itself (PyTorch's rule): m becoming a child of
-- self must not reach self, or every walk of the tree (state_dict, print,
-- forward) would never end.
--
-- Checking means walking m's subtree, and m = nn.Sequential(m) in a loop
-- would walk the whole chain at each step (quadratic: 20000 levels took
-- over a minute). A module that was never made a child of another has no
-- parent, so nothing can reach it: modules made by a constructor start in
-- `parentless` and leave it when the check below lets them in as a child.
-- Every way a child is added (__newindex, add_module, the containers'
-- append, insert and [k] = m) comes through here; a module made any other
-- way (a clone, a replica) is never in the set and is always walked.
local parentless = setmetatable({}, {__mode = "k"})

local function reaches(m, target)
  local stack, memo = {m}, {}
  while #stack > 0 do
    local cur = stack[#stack]
    stack[#stack] = nil
    if cur == target then return true end
    if not memo[cur] then
      memo[cur] = true
      local mods = rawget(cur, "_modules")
      for _, k in ipairs(mods.keys) do
        local c = mods.vals[k]
        if c ~= nil then stack[#stack + 1] = c end
      end
    end
  end
  return false
end

local function check_no_cycle(self, name, m, what)
  if m == nil then return end
  if not is_module(m) then -- reachable as model:_check_no_cycle(name, m, what)
    raise("bad argument #3 to '_check_no_cycle' (Module or nil expected, got %s)", type_name(m))
  end
  if m == self or (not parentless[self] and reaches(m, self)) then
    raise("%s: module '%s' would contain itself (%s); a module tree can't have cycles", what, name,
      m == self and "it is the module itself" or "the new child already holds this module")
  end
  parentless[m] = nil -- m has a parent from now on
end

Module._check_no_cycle = check_no_cycle -- for the containers' own ways in (nn_layers.lua)

-- Attribute assignment: modules and parameters are registered (in order),
-- buffers keep their slot, anything else is a plain attribute.
local function instance_newindex(self, k, v)
  check_module("Module.__newindex", self)
  if k == nil or k ~= k then -- m[nil] = v (Lua leaves the key to this metamethod), or a call by hand
    raise("Module.__newindex: an attribute name can't be %s", k == nil and "nil" or "NaN")
  end
  local cls = getmetatable(self)
  if type(k) == "number" and cls.__setitem then return cls.__setitem(self, k, v) end
  local params, bufs, mods, attrs = rawget(self, "_parameters"), rawget(self, "_buffers"),
    rawget(self, "_modules"), rawget(self, "_attrs")
  -- a child or a parameter is named by its key (state_dict, printing): a table key has no name
  if type(k) ~= "string" and type(k) ~= "number" and
      (is_module(v) or (is_tensor(v) and (param_set[v] or (v.requires_grad and v.is_leaf)))) then
    raise("Module.__newindex: a %s's name must be a string, got %s (model.name = v, or model:%s(name, v))",
      is_module(v) and "child module" or "parameter", type_name(k), is_module(v) and "add_module" or "register_parameter")
  end
  if is_module(v) then
    check_no_cycle(self, k, v, "module assignment")
    od_del(params, k); od_del(bufs, k); attrs[k] = nil
    od_set(mods, k, v)
  elseif as_parameter(v) then
    od_del(mods, k); od_del(bufs, k); attrs[k] = nil
    od_set(params, k, v)
  elseif od_has(params, k) then
    if v ~= nil then
      raise("cannot assign '%s' as parameter '%s' (nn.Parameter(t), a tensor that requires grad, or nil expected)",
        type_name(v), tostring(k))
    end
    params.vals[k] = nil
  elseif od_has(bufs, k) then
    if v ~= nil and not is_tensor(v) then
      raise("cannot assign '%s' as buffer '%s' (tensor or nil expected)", type_name(v), tostring(k))
    end
    bufs.vals[k] = v
  elseif od_has(mods, k) then
    if v ~= nil then
      raise("cannot assign '%s' as child module '%s' (nn.Module or nil expected)", type_name(v), tostring(k))
    end
    mods.vals[k] = nil
  else
    attrs[k] = v
  end
end

local function instance_call(self, ...)
  check_module("Module.__call", self)
  return self:forward(...)
end

-- metamethods are looked up raw, so each class carries its own copies
local METAMETHODS = {"__index", "__newindex", "__call", "__tostring", "__len", "__pairs", "__getitem", "__setitem",
  "__close", "__concat"}

-- Python's keyword arguments for a class's positional parameters:
-- nn.Linear({in_features = 64, out_features = 32}) and
-- nn.Conv2d({in_channels = 3, out_channels = 16, kernel_size = 3, stride = 1})
-- as PyTorch's nn.Linear(in_features=64, ...). Keys of a trailing options
-- table that name a parameter of the class's init (read with debug.getlocal,
-- so a user's Net:init(input_size, output_size) takes them too) move to that
-- position; the other keys stay a trailing options table.
-- Returns the new argument count.
local function bind_keywords(cls, init, args, n)
  local opts = args[n]
  if n == 0 or not util.is_opts(opts) or next(opts) == nil or type(init) ~= "function" then return n end
  init = classes.unwrap_init(init) -- its own parameters, not the wrapper's (self, ...)
  local info = debug.getinfo(init, "u")
  local names = {}
  for i = 2, info.nparams do names[#names + 1] = debug.getlocal(init, i) end -- 1 is self
  local hit = false
  for _, name in ipairs(names) do if opts[name] ~= nil then hit = true break end end
  if not hit then return n end
  local npos, last = n - 1, n - 1
  local rest = {}
  for k, v in pairs(opts) do rest[k] = v end
  args[n] = nil
  for i, name in ipairs(names) do
    local v = rest[name]
    if v ~= nil then
      if i <= npos then raise("%s: '%s' given both as an argument and as an option", rawget(cls, "__name"), name) end
      args[i], rest[name] = v, nil
      if i > last then last = i end
    end
  end
  if next(rest) ~= nil then
    last = last + 1
    args[last] = rest
  end
  return last
end

local function construct(cls, ...)
  if type(cls) ~= "table" or rawget(cls, "__tensh_module") ~= true then
    raise("nn.Module constructor: expected a module class (nn.Linear, a class made by nn.Module:extend), got %s",
      A.show(cls))
  end
  local self = setmetatable({
    _parameters = od_new(), _buffers = od_new(), _modules = od_new(),
    _attrs = {training = true}, _non_persistent = {},
  }, cls)
  parentless[self] = true
  local n = select("#", ...)
  if n > 0 and util.is_opts((select(n, ...))) then
    local args = {...}
    n = bind_keywords(cls, self.init, args, n)
    self:init(table.unpack(args, 1, n))
  else
    self:init(...)
  end
  return self
end

local function class_tostring(cls)
  if type(cls) ~= "table" or rawget(cls, "__tensh_module") ~= true then
    raise("nn.Module class __tostring: expected a module class, got %s", A.show(cls))
  end
  return "<class " .. rawget(cls, "__name") .. ">"
end

-- PyTorch's static methods of module classes: called on the class, with no module
local STATIC = {from_pretrained = true, generate_square_subsequent_mask = true}

-- Module:extend("Net"): a subclass; Net(...) constructs and calls Net:init(...).
function Module.extend(parent, name)
  if type(parent) ~= "table" or rawget(parent, "__tensh_module") ~= true then
    raise("extend: call it on a class, as nn.Module:extend(\"Net\")")
  end
  if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") then
    raise("extend: expected a class name such as \"Net\", got %s", type(name) == "string" and ("%q"):format(name) or type(name))
  end
  local cls = {__name = name, __tensh_module = true}
  for _, mm in ipairs(METAMETHODS) do cls[mm] = rawget(parent, mm) end
  setmetatable(cls, {__index = parent, __call = construct, __tostring = class_tostring})
  -- its methods take its own modules and its subclasses' (nn.BatchNorm1d.forward(linear, x)
  -- would fail inside, reading fields a Linear lacks)
  local function is_own(v) return is_module(v) and classes.instance_of(v, cls) end
  return classes.setup(cls, {what = name, a = "a module", var = "model", is_instance = is_own, static = STATIC,
    instance_init = true})
end

Module.__name, Module.__tensh_module = "Module", true
Module.__index, Module.__newindex, Module.__call = instance_index, instance_newindex, instance_call
Module.__concat = require("tensh.printable").concat -- "model: " .. model; extend copies it
setmetatable(Module, {__call = construct, __tostring = class_tostring})
-- every method after this line checks it got a module (m.parameters() for m:parameters())
classes.setup(Module, {what = "Module", a = "a module", var = "model", is_instance = is_module, static = STATIC,
  instance_init = true})

function Module:init() end

function Module:forward()
  local name = self:_get_name()
  raise("%s: forward() is not implemented (define function %s:forward(...))", name, name)
end

function Module:_get_name() return getmetatable(self).__name end

-- ---- registration -------------------------------------------------------------

local function check_name(self, what, name)
  if type(name) ~= "string" then raise("%s: name must be a string, got %s", what, type(name)) end
  if name == "" then raise("%s: name can't be empty", what) end
  if name:find(".", 1, true) then raise("%s: name can't contain \".\", got %q", what, name) end
  local _ = self
end

-- A method's trailing argument that is a flag or an options table (PyTorch's
-- keyword arguments): m:zero_grad(false) or m:zero_grad({set_to_none = false}).
-- The table's keys are checked, so a misspelt one is not a silent default.
-- Returns nil, the flag, or the checked table.
local function flag_or_opts(fn, v, allowed)
  if v == nil or type(v) == "boolean" then return v end
  return A.check_opts(fn, v, allowed)
end

-- the flag's value: v itself, v[key] from a table, or the default
local function flag(v, key, default)
  if type(v) == "table" then v = v[key] end
  if v == nil then return default end
  return v
end

function Module:register_buffer(name, t, opts)
  opts = flag_or_opts("register_buffer", opts, {persistent = true})
  check_name(self, "register_buffer", name)
  if t ~= nil and not is_tensor(t) then
    raise("register_buffer: cannot assign '%s' as buffer '%s' (tensor or nil expected)", type_name(t), name)
  end
  local params, mods, attrs = rawget(self, "_parameters"), rawget(self, "_modules"), rawget(self, "_attrs")
  if od_has(params, name) or od_has(mods, name) or attrs[name] ~= nil then
    raise("register_buffer: attribute '%s' already exists", name)
  end
  local persistent = flag(opts, "persistent", true)
  od_set(rawget(self, "_buffers"), name, t)
  rawget(self, "_non_persistent")[name] = (not persistent) or nil
end

function Module:register_parameter(name, p)
  check_name(self, "register_parameter", name)
  if p ~= nil and not is_tensor(p) then
    raise("register_parameter: cannot assign '%s' as parameter '%s' (nn.Parameter(t) or nil expected)", type_name(p), name)
  end
  local bufs, mods, attrs = rawget(self, "_buffers"), rawget(self, "_modules"), rawget(self, "_attrs")
  if od_has(bufs, name) or od_has(mods, name) or attrs[name] ~= nil then
    raise("register_parameter: attribute '%s' already exists", name)
  end
  if p ~= nil then param_set[p] = true end
  od_set(rawget(self, "_parameters"), name, p)
end

function Module:add_module(name, m)
  if type(name) ~= "string" then raise("add_module: name must be a string, got %s", type(name)) end
  if name:find(".", 1, true) then raise("add_module: module name can't contain \".\", got %q", name) end
  if name == "" then raise("add_module: module name can't be empty") end
  if m ~= nil and not is_module(m) then raise("add_module: %s is not a Module subclass", type_name(m)) end
  local params, bufs, attrs = rawget(self, "_parameters"), rawget(self, "_buffers"), rawget(self, "_attrs")
  if od_has(params, name) or od_has(bufs, name) or attrs[name] ~= nil then
    raise("add_module: attribute '%s' already exists", name)
  end
  check_no_cycle(self, name, m, "add_module")
  od_set(rawget(self, "_modules"), name, m)
end
Module.register_module = Module.add_module

-- ---- traversal ------------------------------------------------------------------

local function join(prefix, name) return prefix == "" and name or prefix .. "." .. name end

-- How deep a named walk (named_modules, named_parameters, state_dict,
-- load_state_dict, printing) follows the module tree: every name and printed
-- line below this depth holds one part per level, so a chain 20000 deep
-- (m = nn.Sequential(m) in a loop) would spell out hundreds of megabytes.
-- Past it they raise at once, as PyTorch's recursion raises RecursionError;
-- the walks without names (parameters, modules, to, apply, train) and the
-- forward pass take any depth, in time linear in the tree.
local MAX_NAMED_DEPTH = 1000 -- docs/api.md and test_deep_modules.lua say 1000

local function too_deep(what)
  raise("%s: the module tree is nested more than %d levels deep, too deep for names or printing (PyTorch raises "
    .. "RecursionError here; parameters(), modules(), to() and apply() walk any depth)", what, MAX_NAMED_DEPTH)
end
util.too_deep = too_deep

-- {name, module} pairs, depth first, self first, each module once. Names
-- only when `what` (the method, for the depth error) is given; without them
-- the walk takes any depth. Iterative, so a deep tree does not grow the Lua
-- stack: an explicit stack, children pushed last to first and each module
-- taken when popped, visits in the recursive walk's order.
local function collect_modules(self, prefix, what)
  local out, memo = {}, {}
  local stack, names, depths = {self}, {prefix}, {0}
  while #stack > 0 do
    local n = #stack
    local m, name, depth = stack[n], names[n], depths[n]
    stack[n], names[n], depths[n] = nil, nil, nil
    if not memo[m] then
      memo[m] = true
      out[#out + 1] = {name, m}
      local keys, vals = rawget(m, "_modules").keys, rawget(m, "_modules").vals
      if what and #keys > 0 and depth >= MAX_NAMED_DEPTH then too_deep(what) end
      for i = #keys, 1, -1 do
        local c = vals[keys[i]]
        if c ~= nil then
          n = #stack + 1
          stack[n], depths[n] = c, depth + 1
          if what then names[n] = join(name, keys[i]) end
        end
      end
    end
  end
  return out
end

local function list_iter(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

local function recurse_opt(opts) return flag(opts, "recurse", true) end

-- {name, tensor} pairs from each module's `field` (_parameters or _buffers),
-- no duplicates; names only when what (the method) is given
local function collect_members(self, field, opts, what)
  local prefix = type(opts) == "table" and opts.prefix or ""
  local mods = recurse_opt(opts) and collect_modules(self, prefix, what) or {{prefix, self}}
  local seen, out = {}, {}
  for _, e in ipairs(mods) do
    local od = rawget(e[2], field)
    for _, k in ipairs(od.keys) do
      local v = od.vals[k]
      if v ~= nil and not seen[v] then
        seen[v] = true
        out[#out + 1] = {what and join(e[1], k), v}
      end
    end
  end
  return out
end

local as_list = require("tensh.args").list

-- the second of each pair, as a list that refuses index 0 (what: the method, for the message)
local function values(pairs_list, what)
  local out = {}
  for i, e in ipairs(pairs_list) do out[i] = e[2] end
  return as_list(out, what)
end

-- PyTorch's keywords: parameters(recurse), named_parameters(prefix, recurse)
local RECURSE, PREFIX_RECURSE = {recurse = true}, {prefix = true, recurse = true}

-- m:parameters() -> list in registration order (own first, then children)
function Module:parameters(opts)
  opts = flag_or_opts("parameters", opts, RECURSE)
  return values(collect_members(self, "_parameters", opts), "parameters()")
end
-- for name, p in m:named_parameters() do ... end
function Module:named_parameters(opts)
  return list_iter(collect_members(self, "_parameters", flag_or_opts("named_parameters", opts, PREFIX_RECURSE),
    "named_parameters"))
end
function Module:buffers(opts)
  opts = flag_or_opts("buffers", opts, RECURSE)
  return values(collect_members(self, "_buffers", opts), "buffers()")
end
function Module:named_buffers(opts)
  return list_iter(collect_members(self, "_buffers", flag_or_opts("named_buffers", opts, PREFIX_RECURSE),
    "named_buffers"))
end

local function collect_children(self)
  local mods, seen, out = rawget(self, "_modules"), {}, {}
  for _, k in ipairs(mods.keys) do
    local m = mods.vals[k]
    if m ~= nil and not seen[m] then
      seen[m] = true
      out[#out + 1] = {k, m}
    end
  end
  return out
end
function Module:children() return values(collect_children(self), "children()") end
function Module:named_children() return list_iter(collect_children(self)) end
function Module:modules() return values(collect_modules(self, ""), "modules()") end
function Module:named_modules(opts)
  opts = A.check_opts("named_modules", opts, {prefix = true})
  return list_iter(collect_modules(self, opts.prefix or "", "named_modules"))
end

function Module:get_submodule(target)
  if target == "" then return self end
  local m = self
  for atom in tostring(target):gmatch("[^.]+") do
    local sub = is_module(m) and rawget(m, "_modules").vals[atom]
    if not sub then raise("get_submodule: %s has no submodule `%s`", m:_get_name(), atom) end
    m = sub
  end
  return m
end

-- ---- modes, gradients, apply ----------------------------------------------------

function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then raise("train: training mode is expected to be boolean, got %s", type(mode)) end
  for _, m in ipairs(self:modules()) do rawget(m, "_attrs").training = mode end
  return self
end
function Module:eval() return self:train(false) end

function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  A.check_boolean("requires_grad_", "requires_grad", flag)
  for _, p in ipairs(self:parameters()) do p.requires_grad = flag end
  return self
end

-- set_to_none (default true, as PyTorch 2) drops .grad; else zeroes it in place
function Module:zero_grad(opts)
  local to_none = flag(flag_or_opts("zero_grad", opts, {set_to_none = true}), "set_to_none", true)
  for _, p in ipairs(self:parameters()) do
    local g = p.grad
    if g ~= nil then
      if to_none then
        p.grad = nil
      else
        local _ <close> = torch.no_grad()
        g:zero_()
      end
    end
  end
end

-- fn on every submodule (children first), then on self; a module that is
-- the child of two gets it twice, as PyTorch's recursion does. Iterative
-- (each frame: a module and its children, taken when it is first reached),
-- so a deep tree does not grow the Lua stack.
function Module:apply(fn)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    raise("apply: expected a function, got %s", type(fn))
  end
  local stack = {{self, collect_children(self), 0}}
  while #stack > 0 do
    local frame = stack[#stack]
    local i = frame[3] + 1
    local child = frame[2][i]
    if child then
      frame[3] = i
      stack[#stack + 1] = {child[2], collect_children(child[2]), 0}
    else
      stack[#stack] = nil
      fn(frame[1])
    end
  end
  return self
end

-- ---- device and dtype moves ------------------------------------------------------

local is_floating_dtype = require("tensh.args").is_floating_dtype

-- (device string or nil, dtype string or nil) from Module:to's arguments
local function parse_to(...)
  local dev, dtype
  local function take(a)
    if a == nil then return end
    if is_tensor(a) then dev, dtype = tostring(a.device), a.dtype return end
    if type(a) == "table" and getmetatable(a) == nil then -- options
      A.check_opts("to", a, {device = true, dtype = true})
      if a.device ~= nil then
        if not pcall(torch.device, a.device) then
          raise("to: option 'device': expected a device (\"cpu\", \"cuda:0\", torch.device), got %s", A.show(a.device))
        end
        take(torch.device(a.device))
      end
      if a.dtype ~= nil then take(a.dtype) end
      return
    end
    local okd, d = pcall(torch.device, a)
    if okd then
      -- canonical form ("cuda" -> "cuda:0"), and an error now if it does not exist
      local ok, t = pcall(torch.empty, 0, {device = tostring(d)})
      if not ok then raise("to: %s", (tostring(t):gsub("^[^:]*:%d+: ", ""):gsub("^empty: ", ""))) end
      dev = tostring(t.device)
      return
    end
    local okt, t = pcall(torch.empty, 0, {dtype = a})
    if not okt then
      raise("to: expected a device (\"cpu\", \"cuda:0\"), a dtype (\"float16\", torch.float64) or a tensor, got %s",
        type(a) == "string" and ("%q"):format(a) or type(a))
    end
    dtype = t.dtype
  end
  for i = 1, select("#", ...) do take((select(i, ...))) end
  if dtype and not is_floating_dtype(dtype) then
    raise("to: nn.Module.to only accepts floating point dtypes, but got desired dtype=%s", dtype)
  end
  return dev, dtype
end

-- t moved to dev and, if it is floating point, cast to dtype; t itself when nothing changes
local function move(t, dev, dtype)
  local out = t
  if dev and tostring(out.device) ~= dev then out = out:to(dev) end
  if dtype and is_floating_dtype(out.dtype) and out.dtype ~= dtype then out = out:to(dtype) end
  return out
end

-- Moves every parameter and buffer; a parameter that changes is replaced by a
-- new one (same requires_grad, grad moved along); tied parameters stay tied.
local function apply_move(self, dev, dtype) -- (local: only to, half, ... call it, with checked arguments)
  local done = {}
  local _ <close> = torch.no_grad()
  for _, m in ipairs(self:modules()) do
    local params, bufs = rawget(m, "_parameters"), rawget(m, "_buffers")
    for _, k in ipairs(params.keys) do
      local p = params.vals[k]
      if p ~= nil then
        local np = done[p]
        if np == nil then
          local moved = move(p, dev, dtype)
          if rawequal(moved, p) then
            np = p
          else
            np = nn.Parameter(moved, p.requires_grad)
            local g = p.grad
            if g ~= nil then np.grad = move(g, dev, dtype) end
          end
          done[p] = np
        end
        params.vals[k] = np
      end
    end
    for _, k in ipairs(bufs.keys) do
      local b = bufs.vals[k]
      if b ~= nil then
        local nb = done[b]
        if nb == nil then nb = move(b, dev, dtype); done[b] = nb end
        bufs.vals[k] = nb
      end
    end
  end
  return self
end

-- m:to("cuda"), m:to(0) (a CUDA ordinal), m:to("float16"), m:to(dev, dtype), m:to({device =, dtype =}), m:to(tensor)
function Module:to(...)
  local dev, dtype = parse_to(...)
  return apply_move(self, dev, dtype)
end
-- m:cuda(), m:cuda(1), m:cuda("cuda:1"), m:cuda(torch.device("cuda:1")), as PyTorch's
function Module:cuda(device)
  if device == nil then return self:to("cuda") end
  if math.type(device) == "integer" then return self:to("cuda:" .. device) end
  local ok, d = pcall(torch.device, device)
  if not ok or d.type ~= "cuda" then
    raise("cuda: expected a CUDA device (an ordinal, \"cuda:N\" or torch.device), got %s",
      ok and tostring(d) or type(device))
  end
  return self:to(d)
end
function Module:cpu() return self:to("cpu") end
function Module:half() return apply_move(self, nil, "torch.float16") end
function Module:float() return apply_move(self, nil, "torch.float32") end
function Module:double() return apply_move(self, nil, "torch.float64") end
function Module:bfloat16() return apply_move(self, nil, "torch.bfloat16") end
function Module:type(dst_type) return self:to(A.check_dtype("type", "dst_type", dst_type)) end

-- ---- state_dict ----------------------------------------------------------------------

-- name -> live tensor for every parameter and persistent buffer, in order
-- (a shared module under each of its names, as PyTorch's); what: the method
local function state_entries(self, prefix, out, what, depth)
  local params, bufs = rawget(self, "_parameters"), rawget(self, "_buffers")
  local np = rawget(self, "_non_persistent")
  for _, k in ipairs(params.keys) do
    local p = params.vals[k]
    if p ~= nil then out[#out + 1] = {prefix .. k, p} end
  end
  for _, k in ipairs(bufs.keys) do
    local b = bufs.vals[k]
    if b ~= nil and not np[k] then out[#out + 1] = {prefix .. k, b} end
  end
  local mods = rawget(self, "_modules")
  for _, k in ipairs(mods.keys) do
    local m = mods.vals[k]
    if m ~= nil then
      if depth >= MAX_NAMED_DEPTH then too_deep(what) end
      state_entries(m, prefix .. k .. ".", out, what, depth + 1)
    end
  end
  return out
end

-- A flat table name -> detached tensor (sharing storage), buffers included.
function Module:state_dict(opts)
  local prefix = A.check_opts("state_dict", opts, {prefix = true}).prefix or ""
  local sd = {}
  for _, e in ipairs(state_entries(self, prefix, {}, "state_dict", 0)) do sd[e[1]] = e[2]:detach() end
  return sd
end

-- Copies sd's tensors into the parameters and buffers in place (no_grad).
-- Checks everything first: on any error nothing is changed. Returns
-- {missing_keys = {...}, unexpected_keys = {...}} (non-empty only with strict = false).
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then raise("load_state_dict: expected a table of name -> tensor, got %s", type(sd)) end
  local strict = flag(flag_or_opts("load_state_dict", opts, {strict = true}), "strict", true)
  local entries = state_entries(self, "", {}, "load_state_dict", 0)
  local expected, missing, unexpected, errors = {}, {}, {}, {}
  for _, e in ipairs(entries) do
    local name, dst = e[1], e[2]
    expected[name] = true
    local src = sd[name]
    if src == nil then
      missing[#missing + 1] = name
    elseif not is_tensor(src) then
      errors[#errors + 1] = ('While copying the parameter named "%s", expected a tensor from checkpoint but received %s')
        :format(name, type_name(src))
    elseif src.shape ~= dst.shape then
      errors[#errors + 1] = ("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in current model is %s.")
        :format(name, shape_str(src), shape_str(dst))
    end
  end
  for k in pairs(sd) do
    if not expected[k] then unexpected[#unexpected + 1] = tostring(k) end
  end
  table.sort(unexpected)
  local msgs = {}
  local function quoted(list)
    local q = {}
    for i, k in ipairs(list) do q[i] = '"' .. k .. '"' end
    return table.concat(q, ", ")
  end
  if strict and #missing > 0 then msgs[#msgs + 1] = "Missing key(s) in state_dict: " .. quoted(missing) .. ". " end
  if strict and #unexpected > 0 then msgs[#msgs + 1] = "Unexpected key(s) in state_dict: " .. quoted(unexpected) .. ". " end
  for _, m in ipairs(errors) do msgs[#msgs + 1] = m end
  if #msgs > 0 then
    raise("Error(s) in loading state_dict for %s:\n\t%s", self:_get_name(), table.concat(msgs, "\n\t"))
  end
  do
    local _ <close> = torch.no_grad()
    for _, e in ipairs(entries) do
      local src = sd[e[1]]
      if src ~= nil then e[2]:copy_(src) end
    end
  end
  return {missing_keys = missing, unexpected_keys = unexpected}
end

-- ---- printing -----------------------------------------------------------------------

function Module:extra_repr() return "" end

-- every line after the first indented by n spaces (PyTorch's _addindent)
local function addindent(s, n)
  local pad = string.rep(" ", n)
  return (s:gsub("\n", "\n" .. pad))
end
util.addindent = addindent

-- Printing. Each line is built once with its final indentation: PyTorch's
-- way (each module's text re-indented by every level above it, _addindent)
-- costs the depth times the text. A child is rendered by a direct Lua call,
-- not tostring(), whose metamethod call would count against Lua's limit of
-- about 200 nested C calls ("C stack overflow" for a tree 200 deep).
-- repr_depth counts the levels being printed, across a class's own
-- __tostring (ModuleList's) too; the to-be-closed variable gives the level
-- back when printing raises.
local repr_depth = 0
local leave_level = setmetatable({}, {__close = function() repr_depth = repr_depth - 1 end})
local default_tostring -- Module.__tostring, set below

-- appends m's lines to out: the first as pad .. head .. text, the rest after
-- pad; own: print m as Module does even if its class has its own __tostring
local function render(m, pad, head, out, own)
  if repr_depth > MAX_NAMED_DEPTH then too_deep("tostring") end
  repr_depth = repr_depth + 1
  local _ <close> = leave_level
  local f = rawget(getmetatable(m), "__tostring")
  if not own and f ~= default_tostring then -- a class's own text (ModuleList's, a user's), indented
    local text = f(m)
    if math.type(text) then text = tostring(text) end -- as tostring() takes a number
    if type(text) ~= "string" then
      raise("tostring: %s's __tostring returned %s, not a string", m:_get_name(), type_name(text))
    end
    local first = true
    for line in (text .. "\n"):gmatch("(.-)\n") do
      out[#out + 1] = first and pad .. head .. line or pad .. line
      first = false
    end
    return
  end
  local extra = m:extra_repr()
  local extra_lines = {}
  if extra ~= nil and extra ~= "" then
    for line in (extra .. "\n"):gmatch("(.-)\n") do extra_lines[#extra_lines + 1] = line end
  end
  local mods = rawget(m, "_modules")
  local name = m:_get_name()
  if #mods.keys == 0 and #extra_lines <= 1 then
    out[#out + 1] = pad .. head .. name .. "(" .. (extra_lines[1] or "") .. ")"
    return
  end
  out[#out + 1] = pad .. head .. name .. "("
  local inner = pad .. "  "
  for _, l in ipairs(extra_lines) do out[#out + 1] = inner .. l end
  for _, k in ipairs(mods.keys) do
    local c = mods.vals[k]
    if c == nil then out[#out + 1] = inner .. "(" .. k .. "): None"
    else render(c, inner, "(" .. k .. "): ", out) end
  end
  out[#out + 1] = pad .. ")"
end

-- m's text as tostring(m) gives it (for the containers' own __tostring)
function util.module_repr(m)
  local out = {}
  render(m, "", "", out)
  return table.concat(out, "\n")
end

function Module:__tostring()
  check_module("Module.__tostring", self)
  local out = {}
  render(self, "", "", out, true)
  return table.concat(out, "\n")
end
default_tostring = rawget(Module, "__tostring")

-- ---- the rest of the namespace --------------------------------------------------------

-- the files loaded below require "tensh.nn" themselves: they get this
-- table (with Module and Parameter) rather than a second load
package.loaded["tensh.nn"] = nn

nn.functional = require "tensh.nn.functional"
nn.F = nn.functional
nn.init = require "tensh.nn.initialization"
for k, v in pairs(require "tensh.nn.losses") do
  if type(v) == "function" and rawget(nn.functional, k) == nil then nn.functional[k] = v end
end
nn.utils = require "tensh.nn.utils"

-- the layers, one family a file (lua/tensh/nn/<family>.lua)
for _, family in ipairs({"linear", "activation", "conv", "pooling", "normalization", "sparse", "container", "loss",
    "rnn", "attention", "transformer", "upsampling"}) do
  for name, cls in pairs(require("tensh.nn." .. family)) do nn[name] = cls end
end
-- nn.parallel (torch.nn.parallel): DistributedDataParallel, one process per device
nn.parallel = {DistributedDataParallel = require("tensh.nn.distributed").DistributedDataParallel}
nn.DataParallel = require("tensh.nn.data_parallel").DataParallel
nn.parallel.DataParallel = nn.DataParallel -- torch.nn.parallel.DataParallel, as PyTorch

return nn
