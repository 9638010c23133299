-- optim.lr_scheduler, as torch.optim.lr_scheduler: each scheduler sets group.lr on construction
-- (step 0) and on every step(); get_lr() is PyTorch's recursive (chainable)
-- form, computed from the groups' current lr exactly as PyTorch's step() does,
-- and step(epoch) uses the closed form where PyTorch has one.
local A = require "tensh.args"
local U = require "tensh.optim.common"
local fail, typename = A.raise, A.typename
local is_plain_table, shallow_copy, show = U.is_plain_table, U.shallow_copy, U.show

local classes = require "tensh.classes"
local lr_scheduler = {}

local LRScheduler = {__name = "LRScheduler"}
LRScheduler.__index = LRScheduler
-- methods check they got a scheduler (sched.step() for sched:step()); print and join with ..
classes.setup(LRScheduler, {what = "LRScheduler", var = "scheduler"})
lr_scheduler.LRScheduler = LRScheduler

local function is_optimizer(v)
  return is_plain_table(v) and is_plain_table(v.param_groups)
end

local function positive_int(name, key, v)
  local n = type(v) == "number" and math.tointeger(v) or nil
  if n == nil or n <= 0 then fail("%s: %s must be a positive integer, got %s", name, key, show(v)) end
  return n
end

-- Defines a scheduler class: `params` names its arguments after the
-- optimizer in PyTorch's order (last_epoch follows), given positionally or
-- in an options table: StepLR(opt, 3, 0.5) or StepLR(opt, {step_size = 3,
-- gamma = 0.5}); init(self, opts) reads them before the first step;
-- get_lr(self) -> list of lrs; closed(self) -> list, optional.
local SCHEDULER_CLASS = "a scheduler class (StepLR, ...)"

function LRScheduler.extend(base, name, params, init, get_lr, closed)
  local fn = "optim.lr_scheduler.LRScheduler.extend"
  U.check_class(fn, "base", base, LRScheduler, "optim.lr_scheduler.LRScheduler or " .. SCHEDULER_CLASS)
  A.check_type(fn, "name", name, "string")
  A.check_type(fn, "params", params, "table")
  for i, k in ipairs(params) do A.check_type(fn, ("params[%d]"):format(i), k, "string") end
  A.check_type(fn, "init", init, "function")
  A.check_type(fn, "get_lr", get_lr, "function")
  if closed ~= nil then A.check_type(fn, "closed", closed, "function") end
  local names = {table.unpack(params)}
  names[#names + 1] = "last_epoch"
  local allowed = {}
  for _, k in ipairs(names) do allowed[k] = true end
  -- reachable as scheduler:_init(o, last_epoch): checks what new gives it (the object is checked by classes.setup)
  local function checked_init(self, o, last_epoch)
    if type(o) ~= "table" then A.type_error("_init", 2, "table (the options)", o) end
    if math.type(last_epoch) ~= "integer" then A.type_error("_init", 3, "integer (last_epoch)", last_epoch) end
    return init(self, o, last_epoch)
  end
  local cls = setmetatable({__name = name, _allowed = allowed, _params = names, _init = checked_init, get_lr = get_lr,
    _get_closed_form_lr = closed},
    {__index = base, __call = U.class_call("optim.lr_scheduler.LRScheduler.new", LRScheduler, SCHEDULER_CLASS)})
  cls.__index = cls
  cls.__tostring = base.__tostring
  return classes.setup(cls, {what = name, var = "scheduler"})
end

function LRScheduler.new(cls, optimizer, ...)
  U.check_class("optim.lr_scheduler.LRScheduler.new", "cls", cls, LRScheduler, SCHEDULER_CLASS, true)
  local name = cls.__name
  if not is_optimizer(optimizer) then
    fail("%s: expected an optimizer (with param_groups) as argument 1, got %s", name, typename(optimizer))
  end
  local opts = A.bind(name, cls._params, ...)
  local self = setmetatable({optimizer = optimizer}, cls)
  local last_epoch = opts.last_epoch or -1
  if math.type(last_epoch) ~= "integer" then fail("%s: last_epoch must be an integer, got %s", name, show(last_epoch)) end
  cls._init(self, opts, last_epoch)
  local groups = optimizer.param_groups
  if last_epoch == -1 then
    for _, g in ipairs(groups) do
      if g.initial_lr == nil then g.initial_lr = g.lr end
    end
  else
    for i, g in ipairs(groups) do
      if g.initial_lr == nil then
        fail("%s: param 'initial_lr' is not specified in param_groups[%d] when resuming an optimizer", name, i - 1)
      end
    end
  end
  self.base_lrs = {}
  for i, g in ipairs(groups) do self.base_lrs[i] = g.initial_lr end
  self.last_epoch = last_epoch
  self._step_count = 0
  self:step()
  return self
end

-- step([epoch]): one more epoch (or iteration); an explicit epoch uses the closed form
function LRScheduler:step(epoch)
  self._step_count = self._step_count + 1
  local values
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    values = self:get_lr()
  else
    if math.type(epoch) ~= "integer" then fail("%s:step: epoch must be an integer, got %s", self.__name, show(epoch)) end
    self.last_epoch = epoch
    values = self._get_closed_form_lr and self:_get_closed_form_lr() or self:get_lr()
  end
  local groups = self.optimizer.param_groups
  self._last_lr = {}
  for i, g in ipairs(groups) do
    g.lr = values[i]
    self._last_lr[i] = g.lr
  end
end

function LRScheduler:get_last_lr()
  return A.list(shallow_copy(self._last_lr), "get_last_lr()")
end

-- state_dict(): every field but the optimizer (as PyTorch's __dict__ minus optimizer)
local unsaved = {optimizer = true, _lambdas = true}

-- a scheduler's fields are flat lists and numbers: deeper is not a state
local MAX_DEPTH = 100

function LRScheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if not unsaved[k] then sd[k] = v end
  end
  return U.deep_copy(self.__name .. ":state_dict", sd, MAX_DEPTH)
end

function LRScheduler:load_state_dict(sd)
  if not is_plain_table(sd) then
    fail("%s:load_state_dict: expected a table from state_dict(), got %s", self.__name, typename(sd))
  end
  sd = U.deep_copy(self.__name .. ":load_state_dict", sd, MAX_DEPTH)
  for k, v in pairs(sd) do
    if not unsaved[k] then self[k] = v end
  end
end

function LRScheduler:__tostring()
  U.check_instance("optim.lr_scheduler.LRScheduler.__tostring", self, LRScheduler, "a scheduler (StepLR(opt, ...), ...)")
  return ("%s(last_epoch=%d, last_lr=%s)"):format(self.__name, self.last_epoch, show(self._last_lr))
end

local function current_lrs(self)
  local t = {}
  for i, g in ipairs(self.optimizer.param_groups) do t[i] = g.lr end
  return t
end

local function check_gamma(name, v)
  if type(v) ~= "number" then fail("%s: gamma must be a number, got %s", name, show(v)) end
  return v
end

-- StepLR(opt, {step_size, gamma = 0.1}): lr *= gamma every step_size epochs
lr_scheduler.StepLR = LRScheduler:extend("StepLR", {"step_size", "gamma"},
  function(self, o)
    self.step_size = positive_int("StepLR", "step_size", o.step_size)
    self.gamma = check_gamma("StepLR", o.gamma or 0.1)
  end,
  function(self)
    if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return current_lrs(self) end
    local t = current_lrs(self)
    for i = 1, #t do t[i] = t[i] * self.gamma end
    return t
  end,
  function(self)
    local t = {}
    for i, b in ipairs(self.base_lrs) do t[i] = b * self.gamma ^ (self.last_epoch // self.step_size) end
    return t
  end)

-- MultiStepLR(opt, {milestones, gamma = 0.1}): lr *= gamma at each milestone
-- (a milestone listed k times multiplies by gamma^k, as PyTorch's Counter)
lr_scheduler.MultiStepLR = LRScheduler:extend("MultiStepLR", {"milestones", "gamma"},
  function(self, o)
    local ms = A.plain(o.milestones) -- a torch.Size is a list here too
    if not A.is_plain_table(ms) then fail("MultiStepLR: milestones must be a list of integers, got %s", show(ms)) end
    self.milestones = {}
    for i, m in ipairs(ms) do
      if math.type(m) ~= "integer" then fail("MultiStepLR: milestones[%d] must be an integer, got %s", i, show(m)) end
      self.milestones[m] = (self.milestones[m] or 0) + 1
    end
    self.gamma = check_gamma("MultiStepLR", o.gamma or 0.1)
  end,
  function(self)
    local k = self.milestones[self.last_epoch]
    local t = current_lrs(self)
    if k == nil then return t end
    for i = 1, #t do t[i] = t[i] * self.gamma ^ k end
    return t
  end,
  function(self)
    local passed = 0 -- bisect_right over the sorted milestones
    for m, k in pairs(self.milestones) do
      if m <= self.last_epoch then passed = passed + k end
    end
    local t = {}
    for i, b in ipairs(self.base_lrs) do t[i] = b * self.gamma ^ passed end
    return t
  end)

-- ExponentialLR(opt, {gamma}): lr *= gamma every epoch
lr_scheduler.ExponentialLR = LRScheduler:extend("ExponentialLR", {"gamma"},
  function(self, o) self.gamma = check_gamma("ExponentialLR", o.gamma) end,
  function(self)
    local t = current_lrs(self)
    if self.last_epoch == 0 then return t end
    for i = 1, #t do t[i] = t[i] * self.gamma end
    return t
  end,
  function(self)
    local t = {}
    for i, b in ipairs(self.base_lrs) do t[i] = b * self.gamma ^ self.last_epoch end
    return t
  end)

-- LambdaLR(opt, {lr_lambda = f or {f per group}}): lr = base_lr * f(epoch)
lr_scheduler.LambdaLR = LRScheduler:extend("LambdaLR", {"lr_lambda"},
  function(self, o)
    local f, n = o.lr_lambda, #self.optimizer.param_groups
    local fs = {}
    if type(f) == "function" then
      for i = 1, n do fs[i] = f end
    elseif is_plain_table(f) and #f == n then
      for i = 1, n do
        if type(f[i]) ~= "function" then fail("LambdaLR: lr_lambda[%d] must be a function, got %s", i, typename(f[i])) end
        fs[i] = f[i]
      end
    else
      fail("LambdaLR: lr_lambda must be a function or a list of %d functions (one per group), got %s", n, show(f))
    end
    self._lambdas = fs -- left out of state_dict, as PyTorch leaves out plain functions
  end,
  function(self)
    local t = {}
    for i, b in ipairs(self.base_lrs) do t[i] = b * self._lambdas[i](self.last_epoch) end
    return t
  end)

-- CosineAnnealingLR(opt, {T_max, eta_min = 0}): PyTorch's recursive form in
-- step(), which follows the cosine from whatever lr the groups hold
lr_scheduler.CosineAnnealingLR = LRScheduler:extend("CosineAnnealingLR", {"T_max", "eta_min"},
  function(self, o)
    self.T_max = positive_int("CosineAnnealingLR", "T_max", o.T_max)
    self.eta_min = o.eta_min or 0
    if type(self.eta_min) ~= "number" then fail("CosineAnnealingLR: eta_min must be a number, got %s", show(self.eta_min)) end
  end,
  function(self)
    local e, T, eta = self.last_epoch, self.T_max, self.eta_min
    local t = current_lrs(self)
    if e == 0 then return t end
    if self._step_count == 1 and e > 0 then
      for i, b in ipairs(self.base_lrs) do t[i] = eta + (b - eta) * (1 + math.cos(e * math.pi / T)) / 2 end
    elseif (e - 1 - T) % (2 * T) == 0 then
      for i, b in ipairs(self.base_lrs) do t[i] = t[i] + (b - eta) * (1 - math.cos(math.pi / T)) / 2 end
    else
      for i = 1, #t do
        t[i] = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (t[i] - eta) + eta
      end
    end
    return t
  end,
  function(self)
    local t = {}
    for i, b in ipairs(self.base_lrs) do
      t[i] = self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
    end
    return t
  end)

-- LinearLR(opt, {start_factor = 1/3, end_factor = 1, total_iters = 5})
lr_scheduler.LinearLR = LRScheduler:extend("LinearLR", {"start_factor", "end_factor", "total_iters"},
  function(self, o)
    local s, e = o.start_factor or 1 / 3, o.end_factor or 1.0
    if type(s) ~= "number" or s > 1 or s <= 0 then
      fail("LinearLR: start_factor must be in (0, 1], got %s", show(s))
    end
    if type(e) ~= "number" or e > 1 or e < 0 then
      fail("LinearLR: end_factor must be in [0, 1], got %s", show(e))
    end
    self.start_factor, self.end_factor = s, e
    self.total_iters = positive_int("LinearLR", "total_iters", o.total_iters or 5)
  end,
  function(self)
    local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
    local t = current_lrs(self)
    if e == 0 then
      for i = 1, #t do t[i] = t[i] * s end
    elseif e <= n then
      for i = 1, #t do t[i] = t[i] * (1.0 + (f - s) / (n * s + (e - 1) * (f - s))) end
    end
    return t
  end,
  function(self)
    local t = {}
    local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
    for i, b in ipairs(self.base_lrs) do t[i] = b * (s + (f - s) * math.min(n, e) / n) end
    return t
  end)

-- OneCycleLR(opt, {max_lr, total_steps or (epochs, steps_per_epoch), pct_start = 0.3,
-- anneal_strategy = "cos", cycle_momentum = true, base_momentum = 0.85,
-- max_momentum = 0.95, div_factor = 25, final_div_factor = 1e4, three_phase = false})
local function per_group(name, key, v, n)
  if type(v) == "number" then
    local t = {}
    for i = 1, n do t[i] = v end
    return t
  end
  if is_plain_table(v) and #v == n then
    for i = 1, n do
      if type(v[i]) ~= "number" then fail("%s: %s[%d] must be a number, got %s", name, key, i, show(v[i])) end
    end
    return shallow_copy(v)
  end
  fail("%s: %s must be a number or a list of %d numbers (one per group), got %s", name, key, n, show(v))
end

local function anneal(strategy, start, stop, pct)
  if strategy == "cos" then return stop + (start - stop) / 2.0 * (math.cos(math.pi * pct) + 1) end
  return (stop - start) * pct + start
end

lr_scheduler.OneCycleLR = LRScheduler:extend("OneCycleLR",
  {"max_lr", "total_steps", "epochs", "steps_per_epoch", "pct_start", "anneal_strategy", "cycle_momentum",
   "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase"},
  function(self, o, last_epoch)
    local name = "OneCycleLR"
    local groups = self.optimizer.param_groups
    if o.total_steps ~= nil then
      self.total_steps = positive_int(name, "total_steps", o.total_steps)
    elseif o.epochs ~= nil and o.steps_per_epoch ~= nil then
      self.total_steps = positive_int(name, "epochs", o.epochs) * positive_int(name, "steps_per_epoch", o.steps_per_epoch)
    else
      fail("%s: you must define either total_steps OR (epochs AND steps_per_epoch)", name)
    end
    local pct = o.pct_start or 0.3
    if type(pct) ~= "number" or pct < 0 or pct > 1 then fail("%s: expected a number between 0 and 1 for pct_start, got %s", name, show(pct)) end
    local strategy = o.anneal_strategy or "cos"
    if strategy ~= "cos" and strategy ~= "linear" then
      fail("%s: anneal_strategy must be one of 'cos' or 'linear', got %s", name, show(strategy))
    end
    self.anneal_strategy = strategy
    local N = self.total_steps
    if o.three_phase then
      self._schedule_phases = {
        {end_step = pct * N - 1, start_lr = "initial_lr", end_lr = "max_lr", start_momentum = "max_momentum", end_momentum = "base_momentum"},
        {end_step = 2 * pct * N - 2, start_lr = "max_lr", end_lr = "initial_lr", start_momentum = "base_momentum", end_momentum = "max_momentum"},
        {end_step = N - 1, start_lr = "initial_lr", end_lr = "min_lr", start_momentum = "max_momentum", end_momentum = "max_momentum"},
      }
    else
      self._schedule_phases = {
        {end_step = pct * N - 1, start_lr = "initial_lr", end_lr = "max_lr", start_momentum = "max_momentum", end_momentum = "base_momentum"},
        {end_step = N - 1, start_lr = "max_lr", end_lr = "min_lr", start_momentum = "base_momentum", end_momentum = "max_momentum"},
      }
    end
    if o.max_lr == nil then fail("%s: max_lr is required", name) end
    local max_lrs = per_group(name, "max_lr", o.max_lr, #groups)
    local div, final_div = o.div_factor or 25.0, o.final_div_factor or 1e4
    for what, v in pairs({div_factor = div, final_div_factor = final_div}) do
      if type(v) ~= "number" then fail("%s: %s must be a number, got %s", name, what, show(v)) end
    end
    if last_epoch == -1 then
      for i, g in ipairs(groups) do
        g.initial_lr = max_lrs[i] / div
        g.max_lr = max_lrs[i]
        g.min_lr = g.initial_lr / final_div
      end
    end
    self.cycle_momentum = o.cycle_momentum ~= false
    if self.cycle_momentum then
      local defaults = self.optimizer.defaults or {}
      if defaults.momentum == nil and defaults.betas == nil then
        fail("%s: optimizer must support momentum or beta1 with the cycle_momentum option enabled", name)
      end
      self.use_beta1 = defaults.betas ~= nil
      local maxm = per_group(name, "max_momentum", o.max_momentum or 0.95, #groups)
      local basem = per_group(name, "base_momentum", o.base_momentum or 0.85, #groups)
      if last_epoch == -1 then
        for i, g in ipairs(groups) do
          if self.use_beta1 then g.betas = {maxm[i], g.betas[2]} else g.momentum = maxm[i] end
          g.max_momentum = maxm[i]
          g.base_momentum = basem[i]
        end
      end
    end
  end,
  function(self)
    local step = self.last_epoch
    if step > self.total_steps then
      fail("OneCycleLR: tried to step %d times; the specified number of total steps is %d", step, self.total_steps)
    end
    local lrs = {}
    local phases = self._schedule_phases
    for gi, g in ipairs(self.optimizer.param_groups) do
      local start_step, lr, mom = 0, nil, nil
      for i, ph in ipairs(phases) do
        if step <= ph.end_step or i == #phases then
          local pct = (step - start_step) / (ph.end_step - start_step)
          lr = anneal(self.anneal_strategy, g[ph.start_lr], g[ph.end_lr], pct)
          if self.cycle_momentum then mom = anneal(self.anneal_strategy, g[ph.start_momentum], g[ph.end_momentum], pct) end
          break
        end
        start_step = ph.end_step
      end
      lrs[gi] = lr
      if self.cycle_momentum then
        if self.use_beta1 then g.betas = {mom, g.betas[2]} else g.momentum = mom end
      end
    end
    return lrs
  end)

-- ---- ReduceLROnPlateau ---------------------------------------------------------------

-- ReduceLROnPlateau(opt, mode = "min", factor = 0.1, patience = 10, threshold = 1e-4,
--   threshold_mode = "rel", cooldown = 0, min_lr = 0, eps = 1e-8), positionally or as
-- options; step(metric) after each validation, as PyTorch's: once the metric has not
-- improved (by the threshold) for more than `patience` steps, every group's lr becomes
-- max(lr * factor, min_lr) (unless that changes it by eps or less), then `cooldown`
-- steps pass before bad steps count again.
local Plateau = setmetatable({__name = "ReduceLROnPlateau"}, {__index = LRScheduler})
Plateau.__index = Plateau
Plateau.__tostring = LRScheduler.__tostring
lr_scheduler.ReduceLROnPlateau = Plateau

local plateau_params = {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"}

-- the worst value for the mode, where `best` starts (and load_state_dict's check)
local function plateau_check(self)
  local name = "ReduceLROnPlateau"
  if self.mode ~= "min" and self.mode ~= "max" then fail("%s: mode %s is unknown (expected \"min\" or \"max\")", name, A.show(self.mode)) end
  if self.threshold_mode ~= "rel" and self.threshold_mode ~= "abs" then
    fail("%s: threshold mode %s is unknown (expected \"rel\" or \"abs\")", name, A.show(self.threshold_mode))
  end
  self.mode_worse = self.mode == "min" and math.huge or -math.huge
end

setmetatable(Plateau, {__index = LRScheduler, __call = function(cls, optimizer, ...)
  local name = "ReduceLROnPlateau"
  U.check_class(name, "cls", cls, Plateau, "ReduceLROnPlateau or a class made from it") -- (the metamethod by hand)
  if not is_optimizer(optimizer) then
    fail("%s: expected an optimizer (with param_groups) as argument 1, got %s", name, typename(optimizer))
  end
  local o = A.bind(name, plateau_params, ...)
  local self = setmetatable({optimizer = optimizer}, cls)
  local function number(key, default, ok, what)
    local v = o[key]
    if v == nil then v = default end
    if type(v) ~= "number" or not ok(v) then fail("%s: %s must be %s, got %s", name, key, what, show(v)) end
    return v
  end
  self.mode, self.threshold_mode = o.mode or "min", o.threshold_mode or "rel"
  self.factor = number("factor", 0.1, function(v) return v < 1 end, "a number < 1.0")
  self.patience = number("patience", 10, function(v) return math.tointeger(v) and v >= 0 end, "a non-negative integer")
  self.threshold = number("threshold", 1e-4, function(v) return v >= 0 end, "a non-negative number")
  self.cooldown = number("cooldown", 0, function(v) return math.tointeger(v) and v >= 0 end, "a non-negative integer")
  self.eps = number("eps", 1e-8, function(v) return v >= 0 end, "a non-negative number")
  local groups = optimizer.param_groups
  local min_lr = o.min_lr == nil and 0 or o.min_lr
  self.min_lrs = {}
  if type(min_lr) == "table" then
    if #min_lr ~= #groups then fail("%s: expected %d min_lrs (one per group), got %d", name, #groups, #min_lr) end
    for i, v in ipairs(min_lr) do
      if type(v) ~= "number" then fail("%s: min_lr[%d] must be a number, got %s", name, i, show(v)) end
      self.min_lrs[i] = v
    end
  elseif type(min_lr) == "number" then
    for i = 1, #groups do self.min_lrs[i] = min_lr end
  else
    fail("%s: min_lr must be a number or a list of %d numbers (one per group), got %s", name, #groups, show(min_lr))
  end
  plateau_check(self)
  self.best, self.num_bad_epochs, self.cooldown_counter = self.mode_worse, 0, 0
  self.last_epoch = 0
  self._last_lr = current_lrs(self)
  return self
end})

function Plateau:is_better(a, best)
  local t = self.threshold
  if self.mode == "min" then
    if self.threshold_mode == "rel" then return a < best * (1 - t) end
    return a < best - t
  end
  if self.threshold_mode == "rel" then return a > best * (1 + t) end
  return a > best + t
end

-- step(metric[, epoch]): metric a number or a one-element tensor (a loss)
function Plateau:step(metric, epoch)
  local current = metric
  if torch.is_tensor(metric) then
    if metric:numel() ~= 1 then
      fail("ReduceLROnPlateau:step: the metric must be a number or a one-element tensor, got a tensor of %d elements",
        metric:numel())
    end
    current = metric:item()
  end
  if type(current) ~= "number" then
    fail("ReduceLROnPlateau:step: the metric must be a number or a one-element tensor, got %s", typename(metric))
  end
  if epoch == nil then epoch = self.last_epoch + 1
  elseif math.type(epoch) ~= "integer" then fail("ReduceLROnPlateau:step: epoch must be an integer, got %s", show(epoch)) end
  self.last_epoch = epoch
  if self:is_better(current, self.best) then
    self.best, self.num_bad_epochs = current, 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0 -- bad epochs in cooldown don't count
  end
  if self.num_bad_epochs > self.patience then
    for i, g in ipairs(self.optimizer.param_groups) do
      local new_lr = math.max(g.lr * self.factor, self.min_lrs[i])
      if g.lr - new_lr > self.eps then g.lr = new_lr end
    end
    self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
  end
  self._last_lr = current_lrs(self)
end

function Plateau:load_state_dict(sd)
  LRScheduler.load_state_dict(self, sd)
  plateau_check(self)
end
classes.setup(Plateau, {what = "ReduceLROnPlateau", var = "scheduler"})

return lr_scheduler
