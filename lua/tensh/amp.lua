-- Mixed precision, as torch.amp: autocast regions and GradScaler.
--
--   local _ <close> = torch.autocast("cuda")                 -- float16 matmuls/convs
--   local _ <close> = torch.autocast("cpu", {dtype = torch.bfloat16})
--   torch.autocast("cpu", function() ... end)               -- function form
--   local scaler = amp.GradScaler()                         -- torch.cuda.amp.GradScaler()
--   scaler:scale(loss):backward(); scaler:step(opt); scaler:update()
--
-- Which ops cast to what is PyTorch's lists: src/autograd/autocast.def, and the
-- AUTOCAST column of the elementwise ops' registry lines (src/ops/ops.def); the state is
-- per thread and per device type in C, so this file only checks arguments,
-- opens and closes regions, and keeps the scaler's bookkeeping. The scaler's
-- inf/NaN check and unscale is one fused op per device
-- (torch._amp_foreach_non_finite_check_and_unscale_); its result is read
-- once per step, where step() must decide whether to skip.
local M = {}

local args = require "tensh.args"
local raise, typename, check_opts = args.raise, args.typename, args.check_opts

local function opt_bool(fn, opts, key, default)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "boolean" then args.option_type_error(fn, key, "boolean", v) end
  return v
end

local function opt_number(fn, opts, key, default)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "number" then args.option_type_error(fn, key, "number", v) end
  return v
end

-- once per call site, as Python's warnings (a loop that opens a region warns once)
local warn = require("tensh.warnings").warn
local scopes = require "tensh.scopes"

local function cuda_available() return torch.cuda ~= nil and torch.cuda.is_available() end

-- ---- autocast --------------------------------------------------------------

local Autocast = {__name = "torch.autocast"}
Autocast.__index = Autocast

local low_dtypes = {cuda = {["torch.float16"] = true, ["torch.bfloat16"] = true}, cpu = {["torch.bfloat16"] = true}}

-- Leaves the region (at most once; <close> and the function form call it).
function Autocast:__close() scopes.exit(self._rec) end

-- an object never closed (local ac = torch.autocast("cuda")): the region ends
-- when the collector takes it, with a warning (lua/tensh/scopes.lua)
function Autocast:__gc()
  local dt = ("%q"):format(self.device_type)
  scopes.collected(self._rec, ("torch.autocast(%s)"):format(dt), ("torch.autocast(%s, function() ... end)"):format(dt))
end

-- the regions open per device type (scopes restore them in order): closing
-- restores the state the region found; one closed under a newer region
-- leaves the state and only ends its nesting level
local kinds = {}
local function region_kind(device_type)
  kinds[device_type] = kinds[device_type] or scopes.kind(
    function(prev) torch._autocast_exit(device_type, prev[1], prev[2], prev[3]) end,
    function() torch._autocast_exit(device_type, torch._autocast_state(device_type)) end)
  return kinds[device_type]
end

function Autocast:__tostring()
  return ("torch.autocast(device_type=%q, dtype=%s, enabled=%s)"):format(self.device_type, self.fast_dtype,
    tostring(self.enabled))
end

-- autocast(device_type [, dtype [, enabled [, cache_enabled]]] [, {dtype =, enabled = true,
-- cache_enabled = true}] [, fn, ...]), PyTorch's arguments positionally or as options:
-- opens a region on device_type ("cpu" or "cuda") for the current thread.
-- Without fn it returns the region for a <close> variable; with fn it runs
-- fn(...) inside the region and returns its results (the region closes
-- even when fn raises), as torch.no_grad(fn) and cuda.device(i, fn) do.
-- the device types autocast knows, checked the same way by every function
-- that takes one (the C state query would otherwise name itself)
local function check_device_type(name, device_type)
  if type(device_type) ~= "string" then
    args.type_error(name, 1, "device_type string \"cpu\" or \"cuda\"", device_type)
  end
  if device_type ~= "cpu" and device_type ~= "cuda" then
    raise("%s: unsupported device_type '%s' (expected \"cpu\" or \"cuda\")", name, device_type)
  end
end

-- torch.autocast's positional arguments after device_type; torch.cuda.amp.autocast's
-- (which has no device_type) come in another order
local AUTOCAST_ARGS = {"dtype", "enabled", "cache_enabled"}
M._DEVICE_AUTOCAST_ARGS = {"enabled", "dtype", "cache_enabled"}

-- Splits autocast's arguments after device_type (argument 1): the ones
-- before the first function, bound by `names` (then an options table), and
-- the position of the function (nil: none), whose arguments follow it.
local function split_at_function(name, names, list, n)
  local at
  for i = 1, n do if type(list[i]) == "function" then at = i break end end
  local head = at and at - 1 or n
  for i = 1, head - 1 do -- after the options table only the function comes
    if args.is_opts(list[i]) then args.type_error(name, i + 2, "function", list[i + 1]) end
  end
  return args.bind(name, names, table.unpack(list, 1, head)), at
end

function M.autocast(device_type, ...) return M._autocast(device_type, AUTOCAST_ARGS, ...) end

function M._autocast(device_type, names, ...)
  local name = "autocast"
  check_device_type(name, device_type)
  if not args.is_plain_table(names) then args.type_error("_autocast", 2, "list of option names", names) end
  for i, k in ipairs(names) do
    if type(k) ~= "string" then args.bad_argument("_autocast", 2, "names[%d] is %s, not a string", i, args.typename(k)) end
  end
  local list, n = {...}, select("#", ...)
  local opts, at = split_at_function(name, names, list, n)
  local enabled = opt_bool(name, opts, "enabled", true)
  local cache_enabled = opt_bool(name, opts, "cache_enabled", torch.is_autocast_cache_enabled())
  local dtype = select(2, torch._autocast_state(device_type))
  if opts.dtype ~= nil then
    local ok, d = pcall(function() return torch.empty(0, {dtype = opts.dtype}).dtype end)
    if not ok then raise("%s: option 'dtype': a dtype such as torch.bfloat16 expected, got %s", name, tostring(opts.dtype)) end
    if not (d == torch.float16 or d == torch.bfloat16 or d == torch.float32) then -- (disabled, it was not checked below)
      raise("%s: option 'dtype': torch.float16 or torch.bfloat16 expected, got %s", name, d)
    end
    dtype = d
  end
  if enabled and device_type == "cuda" and not cuda_available() then
    warn("User provided device_type of 'cuda', but CUDA is not available. Disabling")
    enabled = false
  end
  if enabled and not low_dtypes[device_type][dtype] then
    if device_type == "cpu" then
      warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n" ..
        "CPU Autocast only supports dtype of torch.bfloat16 currently.")
      enabled = false
    else
      raise("%s: dtype %s is not supported on cuda (expected torch.float16 or torch.bfloat16)", name, dtype)
    end
  end
  local kind = region_kind(device_type)
  local prev = table.pack(torch._autocast_enter(device_type, enabled, dtype, cache_enabled))
  if at then return scopes.run(kind, prev, table.unpack(list, at, n)) end
  return setmetatable({device_type = device_type, fast_dtype = dtype, enabled = enabled,
    _cache_enabled = cache_enabled, _rec = scopes.enter(kind, prev)}, Autocast)
end

-- ---- GradScaler ------------------------------------------------------------

local READY, UNSCALED, STEPPED = "ready", "unscaled", "stepped"

local GradScaler = {__name = "GradScaler"}
GradScaler.__index = GradScaler

-- GradScaler([device,] [init_scale = 2^16 [, growth_factor = 2 [, backoff_factor = 0.5
-- [, growth_interval = 2000 [, enabled = true]]]]] [, {same names}]), as torch.amp.GradScaler
-- (and torch.cuda.amp.GradScaler without the device); device "cuda" (default) or "cpu".
local SCALER_ARGS = {"init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"}
function M.GradScaler(...)
  local name = "GradScaler"
  local device = ...
  local opts
  if type(device) == "number" or args.is_opts(device) then -- torch.cuda.amp.GradScaler(init_scale, ...): no device
    device, opts = nil, args.bind(name, SCALER_ARGS, ...)
  else
    opts = args.bind(name, SCALER_ARGS, select(2, ...))
  end
  if device == nil then device = "cuda" end
  if getmetatable(device) == getmetatable(torch.device("cpu")) then device = tostring(device) end
  if device ~= "cpu" and device ~= "cuda" then
    raise("%s: unsupported device %s (expected \"cpu\" or \"cuda\")", name,
      type(device) == "string" and "'" .. device .. "'" or args.typename(device))
  end
  local self = setmetatable({_device = device}, GradScaler)
  self._enabled = opt_bool(name, opts, "enabled", true)
  self._init_scale = opt_number(name, opts, "init_scale", 2.0 ^ 16)
  self._growth_factor = opt_number(name, opts, "growth_factor", 2.0)
  self._backoff_factor = opt_number(name, opts, "backoff_factor", 0.5)
  self._growth_interval = opt_number(name, opts, "growth_interval", 2000)
  if not (self._init_scale > 0) then raise("%s: init_scale must be > 0, got %s", name, tostring(self._init_scale)) end
  if not (self._growth_factor > 1) then raise("%s: The growth factor must be > 1.0.", name) end
  if not (self._backoff_factor < 1 and self._backoff_factor > 0) then
    raise("%s: The backoff factor must be < 1.0 (and > 0).", name)
  end
  if math.type(self._growth_interval) ~= "integer" and not (self._growth_interval == math.floor(self._growth_interval)) or
      self._growth_interval <= 0 then
    raise("%s: growth_interval must be a positive integer, got %s", name, tostring(self._growth_interval))
  end
  self._growth_interval = math.tointeger(self._growth_interval)
  if self._enabled and device == "cuda" and not cuda_available() then
    warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")
    self._enabled = false
  end
  self._scale_value = self._init_scale -- the scale as a number: no device read to know it
  self._growth_tracker = 0
  self._scale = nil -- {[device string] = 0-dim float32 tensor}, made on first use
  self._per_optimizer = setmetatable({}, {__mode = "k"})
  return self
end

function GradScaler:is_enabled() return self._enabled end

-- The scale as a 0-dim float32 tensor on dev (one per device, refilled by update).
function GradScaler:_scale_on(dev)
  self._scale = self._scale or {}
  local key = tostring(dev)
  local t = self._scale[key]
  if not t then
    t = torch.full({}, self._scale_value, {dtype = torch.float32, device = key})
    self._scale[key] = t
  end
  return t
end

-- scale(outputs): outputs (a tensor, or a table of them, nested) times the scale.
function GradScaler:scale(outputs)
  if not self._enabled then return outputs end
  if torch.is_tensor(outputs) then return outputs * self:_scale_on(outputs.device) end
  if type(outputs) ~= "table" then
    raise("GradScaler:scale: outputs must be a tensor or a table of tensors, got %s", typename(outputs))
  end
  local r = {}
  for k, v in pairs(outputs) do r[k] = self:scale(v) end
  return r
end

function GradScaler:_state(optimizer)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    raise("GradScaler: an optimizer expected (a table with param_groups), got %s", typename(optimizer))
  end
  local s = self._per_optimizer[optimizer]
  if not s then
    s = {stage = READY, found_inf = {}}
    self._per_optimizer[optimizer] = s
  end
  return s
end

-- unscale_(optimizer): divides the optimizer's gradients by the scale in place
-- and records, per device, whether any was inf or NaN. Once per optimizer per
-- step: clip gradients between unscale_ and step.
function GradScaler:unscale_(optimizer)
  if not self._enabled then return end
  local state = self:_state(optimizer)
  if state.stage == UNSCALED then
    raise("unscale_() has already been called on this optimizer since the last update().")
  elseif state.stage == STEPPED then
    raise("unscale_() is being called after step().")
  end
  local per_device, order = {}, {}
  for _, g in ipairs(optimizer.param_groups) do
    for _, p in ipairs(g.params) do
      local grad = p.grad
      if grad ~= nil then
        if grad.dtype == torch.float16 then raise("Attempting to unscale FP16 gradients.") end
        local key = tostring(grad.device)
        if not per_device[key] then per_device[key] = {}; order[#order + 1] = key end
        local list = per_device[key]
        list[#list + 1] = grad
      end
    end
  end
  local inv = 1.0 / self._scale_value
  for _, key in ipairs(order) do
    local found = torch.zeros({}, {dtype = torch.float32, device = key})
    torch._amp_foreach_non_finite_check_and_unscale_(per_device[key], found,
      torch.full({}, inv, {dtype = torch.float32, device = key}))
    state.found_inf[key] = found
  end
  state.stage = UNSCALED
end

-- Whether any gradient of this optimizer was inf or NaN: the one read of the
-- devices' flags per step.
local function found_any(state)
  if state.found_any == nil then
    local any = false
    for _, f in pairs(state.found_inf) do
      if f:item() ~= 0 then any = true end
    end
    state.found_any = any
  end
  return state.found_any
end

-- step(optimizer, ...): unscales if unscale_ was not called, then runs
-- optimizer:step(...) unless a gradient was inf or NaN (the step is skipped).
function GradScaler:step(optimizer, ...)
  if not self._enabled then return optimizer:step(...) end
  if select("#", ...) > 0 then raise("Closure use is not currently supported if GradScaler is enabled.") end
  local state = self:_state(optimizer)
  if state.stage == STEPPED then raise("step() has already been called since the last update().") end
  if state.stage == READY then self:unscale_(optimizer) end
  local ret
  if not found_any(state) then ret = optimizer:step() end
  state.stage = STEPPED
  return ret
end

-- update([new_scale]): backs the scale off after a step that found inf/NaN,
-- grows it after growth_interval steps without; or sets it to new_scale.
function GradScaler:update(new_scale)
  if not self._enabled then return end
  if new_scale ~= nil then
    if torch.is_tensor(new_scale) then
      if new_scale:numel() ~= 1 or new_scale.dtype ~= torch.float32 then
        raise("GradScaler:update: new_scale should be a float32 tensor with one element")
      end
      new_scale = new_scale:item()
    elseif type(new_scale) ~= "number" then
      raise("GradScaler:update: new_scale must be a number or a one-element tensor, got %s", typename(new_scale))
    end
    self._scale_value = new_scale
  else
    local any, recorded = false, false
    for _, s in pairs(self._per_optimizer) do
      if next(s.found_inf) ~= nil then
        recorded = true
        if found_any(s) then any = true end
      end
    end
    if not recorded then raise("No inf checks were recorded prior to update.") end
    if any then
      self._scale_value = self._scale_value * self._backoff_factor
      self._growth_tracker = 0
    else
      self._growth_tracker = self._growth_tracker + 1
      if self._growth_tracker == self._growth_interval then
        local grown = self._scale_value * self._growth_factor
        if grown < math.huge then self._scale_value = grown end
        self._growth_tracker = 0
      end
    end
  end
  for _, t in pairs(self._scale or {}) do t:fill_(self._scale_value) end
  self._per_optimizer = setmetatable({}, {__mode = "k"})
end

function GradScaler:get_scale() return self._enabled and self._scale_value or 1.0 end
function GradScaler:get_growth_factor() return self._growth_factor end
function GradScaler:set_growth_factor(v) self._growth_factor = v end
function GradScaler:get_backoff_factor() return self._backoff_factor end
function GradScaler:set_backoff_factor(v) self._backoff_factor = v end
function GradScaler:get_growth_interval() return self._growth_interval end
function GradScaler:set_growth_interval(v) self._growth_interval = v end

-- state_dict(): PyTorch's keys; {} when disabled.
function GradScaler:state_dict()
  if not self._enabled then return {} end
  return {scale = self._scale_value, growth_factor = self._growth_factor, backoff_factor = self._backoff_factor,
    growth_interval = self._growth_interval, _growth_tracker = self._growth_tracker}
end

function GradScaler:load_state_dict(sd)
  if not self._enabled then return end
  if type(sd) ~= "table" then raise("GradScaler:load_state_dict: a table from state_dict() expected, got %s", typename(sd)) end
  if next(sd) == nil then
    raise("The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.")
  end
  for _, k in ipairs({"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}) do
    if type(sd[k]) ~= "number" then
      raise("GradScaler:load_state_dict: entry '%s' must be a number, got %s", k, typename(sd[k]))
    end
  end
  self._scale_value = sd.scale
  self._growth_factor, self._backoff_factor = sd.growth_factor, sd.backoff_factor
  self._growth_interval, self._growth_tracker = math.tointeger(sd.growth_interval) or sd.growth_interval,
    math.tointeger(sd._growth_tracker) or sd._growth_tracker
  for _, t in pairs(self._scale or {}) do t:fill_(self._scale_value) end
end

function GradScaler:__tostring()
  return ("GradScaler(scale=%g, enabled=%s)"):format(self:get_scale(), tostring(self._enabled))
end

-- methods check they got their object (scaler.step(opt) for scaler:step(opt)); both join with ..
local classes = require "tensh.classes"
classes.setup(GradScaler, {var = "scaler"})
classes.setup(Autocast, {what = "torch.autocast", var = "ctx"})

-- ---- the torch namespace's spellings ----------------------------------------

torch.autocast = M.autocast
torch.is_autocast_enabled = function(device_type)
  device_type = device_type or "cuda"
  check_device_type("is_autocast_enabled", device_type)
  return (torch._autocast_state(device_type))
end
torch.get_autocast_dtype = function(device_type)
  check_device_type("get_autocast_dtype", device_type)
  return (select(2, torch._autocast_state(device_type)))
end
torch.is_autocast_cache_enabled = function() return (select(3, torch._autocast_state("cpu"))) end
torch.is_autocast_cpu_enabled = function() return (torch._autocast_state("cpu")) end

local function device_amp(device_type)
  return {
    autocast = function(...) return M._autocast(device_type, M._DEVICE_AUTOCAST_ARGS, ...) end,
    GradScaler = function(...) return M.GradScaler(device_type, ...) end,
  }
end
if torch.cuda then torch.cuda.amp = device_amp("cuda") end
torch.cpu = torch.cpu or {}
torch.cpu.amp = device_amp("cpu")

return M
