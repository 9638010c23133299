-- The global `optim`: SGD, Adam, AdamW, RMSprop with PyTorch's update rules
-- (torch/optim/*.py, the single-tensor foreach=False path), parameter groups,
-- state_dict/load_state_dict in PyTorch's layout; optim.lr_scheduler comes
-- from lua/tensh/optim/lr_scheduler.lua.
-- Updates run under torch.no_grad(), so in-place ops on leaves are allowed.
local optim = require("tensh.lazy").claim("optim") -- the table the global optim holds from start-up

local A = require "tensh.args"
local fail, typename, check_opts = A.raise, A.typename, A.check_opts

local U = require "tensh.optim.common"
local is_plain_table, shallow_copy, sorted_keys, show = U.is_plain_table, U.shallow_copy, U.sorted_keys, U.show

-- ---- Optimizer: the base class ---------------------------------------------

local Optimizer = {__name = "Optimizer"}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer
-- methods check they got an optimizer (opt.step() for opt:step()); print and join with ..
local classes = require "tensh.classes"
classes.setup(Optimizer, {what = "Optimizer", var = "optimizer"})

-- Defines an optimizer class. defaults: hyperparameters and their default
-- values (a key with default `false` is a flag); validate(name, group) checks
-- one group's hyperparameters; update(self, group) does one step over a group;
-- positional: the hyperparameters the constructor takes after params, in
-- PyTorch's order (default: lr, when there is one); the rest are options only.
local OPTIMIZER_CLASS = "an optimizer class (optim.SGD, optim.Adam, ...)"

function Optimizer.extend(base, name, defaults, validate, update, positional)
  local fn = "optim.Optimizer.extend"
  U.check_class(fn, "base", base, Optimizer, "optim.Optimizer or " .. OPTIMIZER_CLASS)
  A.check_type(fn, "name", name, "string")
  A.check_type(fn, "defaults", defaults, "table")
  A.check_type(fn, "validate", validate, "function")
  A.check_type(fn, "update", update, "function")
  if positional == nil then positional = defaults.lr ~= nil and {"lr"} or {} end
  A.check_type(fn, "positional", positional, "table")
  for i, k in ipairs(positional) do
    if defaults[k] == nil then A.raise("%s: positional[%d] '%s' is not in defaults", fn, i, tostring(k)) end
  end
  -- the hooks a user can reach as opt:_update(g) and cls._validate(name, g)
  -- check what they are given (the object itself is checked by classes.setup)
  local function checked_validate(cls_name, g)
    if type(cls_name) ~= "string" then A.type_error("_validate", 1, "string", cls_name) end
    if type(g) ~= "table" then A.type_error("_validate", 2, "table (a param group)", g) end
    return validate(cls_name, g)
  end
  local function checked_update(self, g)
    local groups = rawget(self, "param_groups")
    for _, own in ipairs(type(groups) == "table" and groups or {}) do
      if rawequal(own, g) then return update(self, g) end
    end
    A.type_error("_update", 2, "one of the optimizer's param_groups", g)
  end
  local cls = setmetatable({__name = name, defaults = defaults, _validate = checked_validate, _update = checked_update,
    _positional = positional},
    {__index = base, __call = U.class_call("optim.Optimizer.new", Optimizer, OPTIMIZER_CLASS)})
  cls.__index = cls
  cls.__tostring = base.__tostring
  return classes.setup(cls, {what = name, var = "optimizer"})
end

-- Optimizer(params [, lr [, ...]] [, {options}]): the hyperparameters after
-- params positionally in PyTorch's order (SGD(params, 0.01)) or as options
function Optimizer.new(cls, params, ...)
  U.check_class("optim.Optimizer.new", "cls", cls, Optimizer, OPTIMIZER_CLASS, true)
  local name = cls.__name
  local n = select("#", ...)
  local last = n > 0 and select(n, ...) or nil
  if n == 1 and last ~= nil and type(last) ~= "number" and type(last) ~= "table" then -- Adam(params, "x"): say options
    fail("%s: options must be a table, got %s", name, typename(last))
  end
  local opts = A.bind_keywords(name, cls._positional, cls.defaults, ...)
  local defaults = {}
  for k, v in pairs(cls.defaults) do defaults[k] = shallow_copy(v) end
  for k, v in pairs(opts) do defaults[k] = shallow_copy(v) end
  cls._validate(name, defaults)
  local self = setmetatable({defaults = defaults, param_groups = A.list({}, "param_groups"), state = {}}, cls)
  local mt = type(params) == "table" and getmetatable(params)
  if type(mt) == "table" and rawget(mt, "__tensh_module") and rawget(params, "_modules") then -- Adam(model)
    fail("%s: params is a module (%s); pass its parameters: %s(model:parameters(), ...)", name, typename(params), name)
  end
  if type(params) == "function" then -- Adam(model:named_parameters()), an iterator
    fail("%s: params should be a list of tensors or a list of parameter groups, but got a function (an iterator?); "
      .. "pass model:parameters()", name)
  end
  if torch.is_tensor(params) or type(params) ~= "table" or typename(params) == "torch.Size" then
    fail("%s: params should be a list of tensors or a list of parameter groups, but got %s", name, typename(params))
  end
  if #params == 0 then fail("%s: optimizer got an empty parameter list", name) end
  if is_plain_table(params[1]) then
    for _, g in ipairs(params) do self:add_param_group(g) end
  else
    self:add_param_group({params = params})
  end
  return self
end

-- add_param_group({params = {...}, lr = ..., ...}): missing hyperparameters
-- come from the optimizer's defaults
function Optimizer:add_param_group(group)
  local name = self.__name
  if not is_plain_table(group) then fail("%s: a parameter group must be a table, got %s", name, typename(group)) end
  local g = {}
  -- every key is kept: schedulers add their own (initial_lr, max_lr, ...)
  for k, v in pairs(group) do g[k] = shallow_copy(v) end
  local params = group.params
  if torch.is_tensor(params) then params = {params} end
  if type(params) ~= "table" then fail("%s: a parameter group needs 'params', a list of tensors, got %s", name, typename(params)) end
  g.params = A.list({}, "params")
  local seen = {}
  for i, p in ipairs(params) do
    if not torch.is_tensor(p) then
      fail("%s: optimizer can only optimize tensors, but parameter %d is a %s", name, i, typename(p))
    end
    if not p.requires_grad then
      fail("%s: optimizer can only optimize tensors that require grad (parameter %d does not; create it with {requires_grad = true} or call :requires_grad_())", name, i)
    end
    if not p.is_leaf then
      fail("%s: can't optimize a non-leaf tensor (parameter %d); optimize the leaf it was computed from, or :detach():requires_grad_() it", name, i)
    end
    if seen[p] then fail("%s: parameter %d appears twice in one parameter group", name, i) end
    seen[p] = true
    g.params[i] = p
  end
  for _, other in ipairs(self.param_groups) do
    for _, p in ipairs(other.params) do
      if seen[p] then fail("%s: some parameters appear in more than one parameter group", name) end
    end
  end
  for k, v in pairs(self.defaults) do
    if g[k] == nil then g[k] = shallow_copy(v) end
  end
  self._validate(name, g)
  self.param_groups[#self.param_groups + 1] = g
end

-- Whether the fused steps (torch._sgd_step, torch._rmsprop_step: one C call
-- for the whole group) can take parameter p with the tensors ts[1..n] (nil
-- entries are absent state): float32/float64, one dtype, one shape,
-- contiguous, on `device` (the group's fused parameters share one).
local function fusable_with(p, device, ts, n)
  local dt = p.dtype
  if (dt ~= torch.float32 and dt ~= torch.float64) or not p:is_contiguous() then return false end
  if device ~= nil and p.device ~= device then return false end
  for i = 1, n do
    local t = ts[i]
    if t ~= nil and (t.dtype ~= dt or not t:is_contiguous() or t.device ~= p.device or t.shape ~= p.shape) then
      return false
    end
  end
  return true
end

-- zero_grad({set_to_none = true}): drops the grads, or zeroes them in place:
-- those of one device, float32 or float64 and contiguous in one call
-- (torch._foreach_zero_: one launch on CUDA), the rest one by one
function Optimizer:zero_grad(opts)
  opts = check_opts(self.__name .. ":zero_grad", opts, {set_to_none = true})
  local to_none = opts.set_to_none ~= false
  local fused, device = {}, nil
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      local grad = p.grad
      if grad ~= nil then
        if to_none then
          p.grad = nil
        elseif fusable_with(grad, device, {}, 0) then
          device = grad.device
          fused[#fused + 1] = grad
        else
          torch.no_grad(function() grad:zero_() end)
        end
      end
    end
  end
  if #fused > 0 then torch._foreach_zero_(fused) end
end

-- step([closure]): the closure recomputes the loss (with grad enabled) and
-- its value is returned
function Optimizer:step(closure)
  local loss
  if closure ~= nil then
    if type(closure) ~= "function" then fail("%s:step: closure must be a function, got %s", self.__name, typename(closure)) end
    loss = torch.enable_grad(closure)
  end
  torch.no_grad(function()
    for _, g in ipairs(self.param_groups) do self:_update(g) end
  end)
  return loss
end

-- state_dict(): {state = {[i] = {...}}, param_groups = {{params = {i...}, lr = ...}}}
-- with parameters numbered from 0 across the groups, as PyTorch. The state's
-- tensors are the optimizer's own (not copies), as PyTorch.
function Optimizer:state_dict()
  local index, n = {}, 0
  local groups = {}
  for gi, g in ipairs(self.param_groups) do
    local packed = {}
    for k, v in pairs(g) do
      if k ~= "params" then packed[k] = shallow_copy(v) end
    end
    packed.params = {}
    for i, p in ipairs(g.params) do
      if index[p] == nil then index[p] = n; n = n + 1 end
      packed.params[i] = index[p]
    end
    groups[gi] = packed
  end
  local state = {}
  for p, st in pairs(self.state) do
    local i = index[p]
    if i ~= nil then
      local s = {}
      for k, v in pairs(st) do
        -- PyTorch keeps step as a float32 tensor (a capturable group's already is, on the device)
        if k == "step" and not torch.is_tensor(v) then s[k] = torch.tensor(v, {dtype = "float32"}) else s[k] = v end
      end
      state[i] = s
    end
  end
  return {state = state, param_groups = groups}
end

-- load_state_dict(sd): the groups must match in number and sizes; the state's
-- tensors are copied, cast to each parameter's dtype and device
function Optimizer:load_state_dict(sd)
  local name = self.__name
  if not is_plain_table(sd) or not is_plain_table(sd.param_groups) or not is_plain_table(sd.state) then
    fail("%s:load_state_dict: expected a table with 'state' and 'param_groups' (from state_dict()), got %s", name, typename(sd))
  end
  local saved = sd.param_groups
  if #saved ~= #self.param_groups then
    fail("%s:load_state_dict: loaded state dict has a different number of parameter groups (%d) than the optimizer (%d)",
      name, #saved, #self.param_groups)
  end
  local by_index = {}
  for gi, g in ipairs(self.param_groups) do
    local sg = saved[gi]
    if not is_plain_table(sg) or not is_plain_table(sg.params) then
      fail("%s:load_state_dict: parameter group %d has no 'params' list", name, gi - 1)
    end
    if #sg.params ~= #g.params then
      fail("%s:load_state_dict: loaded state dict contains a parameter group that doesn't match the size of optimizer's group (group %d: %d parameters saved, %d in the optimizer)",
        name, gi - 1, #sg.params, #g.params)
    end
    for i, idx in ipairs(sg.params) do
      if math.type(idx) ~= "integer" then
        fail("%s:load_state_dict: param_groups[%d].params[%d] must be an integer (a parameter's number), got %s",
          name, gi - 1, i, show(idx))
      end
      by_index[idx] = g.params[i]
    end
  end
  local state = {}
  for idx, st in pairs(sd.state) do
    local p = by_index[idx]
    if p == nil then fail("%s:load_state_dict: state for parameter %s, which no group lists", name, tostring(idx)) end
    if not is_plain_table(st) then
      fail("%s:load_state_dict: the state of parameter %s must be a table, got %s", name, tostring(idx), typename(st))
    end
    local s = {}
    for _, k in ipairs(sorted_keys(st)) do
      local v = st[k]
      if k == "step" then
        s[k] = torch.is_tensor(v) and v:item() or v
      elseif torch.is_tensor(v) then
        if v.shape ~= p.shape then
          fail("%s:load_state_dict: state '%s' of parameter %s has size %s but the parameter has size %s",
            name, k, tostring(idx), tostring(v.shape), tostring(p.shape))
        end
        s[k] = v:detach():to(p.device):to(p.dtype):clone()
      else
        s[k] = shallow_copy(v)
      end
    end
    state[p] = s
  end
  local groups = {}
  for gi, g in ipairs(self.param_groups) do
    local ng = {}
    for k, v in pairs(saved[gi]) do
      if k ~= "params" then ng[k] = shallow_copy(v) end
    end
    ng.params = g.params
    self._validate(name, ng)
    groups[gi] = ng
  end
  self.state = state
  self.param_groups = A.list(groups, "param_groups")
end

function Optimizer:__tostring()
  U.check_instance("optim.Optimizer.__tostring", self, Optimizer, "an optimizer (optim.SGD(...), ...)")
  local lines = {self.__name .. " ("}
  for gi, g in ipairs(self.param_groups) do
    lines[#lines + 1] = "Parameter Group " .. (gi - 1)
    for _, k in ipairs(sorted_keys(g)) do
      if k ~= "params" then lines[#lines + 1] = "    " .. k .. ": " .. show(g[k]) end
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- ---- validation of hyperparameters -----------------------------------------

local function check_number(name, group, key, ok, what)
  local v = group[key]
  if type(v) ~= "number" or not ok(v) then
    fail("%s: invalid %s value: %s (expected %s)", name, key, show(v), what)
  end
end

local function check_flag(name, group, key)
  if type(group[key]) ~= "boolean" then fail("%s: %s must be true or false, got %s", name, key, show(group[key])) end
end

local function nonneg(v) return v >= 0 end

local function check_lr(name, g) check_number(name, g, "lr", nonneg, "lr >= 0") end

local function check_betas(name, g)
  local b = g.betas
  if not is_plain_table(b) or #b ~= 2 then fail("%s: betas must be a list of two numbers, got %s", name, show(b)) end
  for i = 1, 2 do
    if type(b[i]) ~= "number" or b[i] < 0 or b[i] >= 1 then
      fail("%s: invalid beta parameter at index %d: %s (expected 0 <= beta < 1)", name, i - 1, show(b[i]))
    end
  end
end

-- ---- SGD ---------------------------------------------------------------------

local function sgd_validate(name, g)
  check_lr(name, g)
  check_number(name, g, "momentum", nonneg, "momentum >= 0")
  check_number(name, g, "dampening", function() return true end, "a number")
  check_number(name, g, "weight_decay", nonneg, "weight_decay >= 0")
  check_flag(name, g, "nesterov")
  check_flag(name, g, "maximize")
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    fail("%s: Nesterov momentum requires a momentum and zero dampening (got momentum %s, dampening %s)",
      name, show(g.momentum), show(g.dampening))
  end
end


-- The fused path takes every parameter it can; the rest (float16, strided,
-- another device) go op by op, with the same rule.
local function sgd_update(self, g)
  local lr, wd, momentum, dampening = g.lr, g.weight_decay, g.momentum, g.dampening
  local ps, gs, bufs, fresh, device = {}, {}, {}, {}, nil
  local new_bufs = {} -- fresh buffers enter the state once the fused step has filled them
  for _, p in ipairs(g.params) do
    local grad = p.grad
    if grad ~= nil then
      local st = self.state[p]
      local buf = momentum ~= 0 and st ~= nil and st.momentum_buffer or nil
      if torch._sgd_step ~= nil and fusable_with(p, device, {grad, buf}, 2) then
        device = p.device
        local i = #ps + 1
        ps[i], gs[i], fresh[i] = p, grad, false
        if momentum ~= 0 then
          if buf == nil then -- PyTorch's first step clones the grad: the kernel does
            buf = torch.empty_like(p)
            fresh[i] = true
            new_bufs[p] = buf
          end
          bufs[i] = buf
        end
      else
        if g.maximize then grad = -grad end
        if wd ~= 0 then grad = grad:add(p, {alpha = wd}) end
        if momentum ~= 0 then
          if st == nil then st = {}; self.state[p] = st end
          if buf == nil then
            buf = grad:clone()
            st.momentum_buffer = buf
          else
            buf:mul_(momentum):add_(grad, {alpha = 1 - dampening})
          end
          if g.nesterov then grad = grad:add(buf, {alpha = momentum}) else grad = buf end
        end
        p:add_(grad, {alpha = -lr})
      end
    end
  end
  if #ps == 0 then return end
  torch._sgd_step(ps, gs, momentum ~= 0 and bufs or nil, momentum ~= 0 and fresh or nil, {lr = lr, momentum = momentum,
    dampening = dampening, weight_decay = wd, nesterov = g.nesterov, maximize = g.maximize})
  for p, buf in pairs(new_bufs) do
    local st = self.state[p]
    if st == nil then st = {}; self.state[p] = st end
    st.momentum_buffer = buf
  end
end

optim.SGD = Optimizer:extend("SGD",
  {lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false},
  sgd_validate, sgd_update, {"lr", "momentum", "dampening", "weight_decay", "nesterov"})

-- ---- Adam and AdamW ------------------------------------------------------------

local function adam_validate(name, g)
  check_lr(name, g)
  check_number(name, g, "eps", nonneg, "eps >= 0")
  check_betas(name, g)
  check_number(name, g, "weight_decay", nonneg, "weight_decay >= 0")
  check_flag(name, g, "amsgrad")
  check_flag(name, g, "maximize")
  check_flag(name, g, "capturable")
end

-- Whether the current CUDA stream is capturing a graph: asked only when the
-- group's parameters are on CUDA (so a CPU session never starts the backend).
local function capturing(g)
  local p = g.params[1]
  return p ~= nil and p.device.type == "cuda" and cuda.is_current_stream_capturing()
end

-- capturable = true (PyTorch's): each parameter's step count is a float32
-- tensor on its device, incremented and read there, so the step holds no
-- host value a CUDA graph would freeze. Counts made the other way (a loaded
-- state, the flag switched) are converted, outside a capture.
local function step_state(name, g, p, st, i)
  if g.capturable then
    if p.device.type ~= "cuda" then
      fail("%s: capturable=True needs the parameters on CUDA, but parameter %d is on %s", name, i - 1, tostring(p.device))
    end
    if not torch.is_tensor(st.step) then st.step = torch.tensor(st.step, {dtype = "float32", device = p.device}) end
  elseif torch.is_tensor(st.step) then
    st.step = st.step:item()
  end
end

-- Whether the fused step (torch._adam_step, one C call for the whole group)
-- can take these tensors: float32/float64, one dtype, contiguous.
local function fusable(p, st)
  local dt = p.dtype
  if dt ~= torch.float32 and dt ~= torch.float64 then return false end
  for _, t in ipairs({p, p.grad, st.exp_avg, st.exp_avg_sq, st.max_exp_avg_sq}) do
    if t.dtype ~= dt or not t:is_contiguous() or t.device ~= p.device then return false end
  end
  return true
end

-- decoupled: AdamW's weight decay (p *= 1 - lr wd) instead of Adam's (g += wd p)
local function adam_update(self, g, decoupled)
  local name = self.__name
  local lr, wd, eps = g.lr, g.weight_decay, g.eps
  local beta1, beta2 = g.betas[1], g.betas[2]
  local capture = capturing(g)
  if capture and not g.capturable then -- the host's step count would be frozen into the graph
    fail("%s:step: attempting CUDA graph capture of step() but param_groups' capturable is False; construct the "
      .. "optimizer with {capturable = true} (its step count then lives on the device)", name)
  end
  local active, fuse, step, device = {}, torch._adam_step ~= nil, nil, nil
  for i, p in ipairs(g.params) do
    if p.grad ~= nil then
      local st = self.state[p]
      if capture and (st == nil or (g.amsgrad and st.max_exp_avg_sq == nil) or not torch.is_tensor(st.step)) then
        -- made inside the capture, the zeros would be made again by every replay
        fail("%s:step: the optimizer's state is made on its first step: run a step before capturing it "
          .. "(warm-up, as in PyTorch)", name)
      end
      if st == nil then
        st = {step = 0, exp_avg = torch.zeros_like(p), exp_avg_sq = torch.zeros_like(p)}
        self.state[p] = st
      end
      if g.amsgrad and st.max_exp_avg_sq == nil then st.max_exp_avg_sq = torch.zeros_like(p) end
      step_state(name, g, p, st, i)
      if not g.capturable then
        st.step = st.step + 1
        if step == nil then step = st.step elseif step ~= st.step then fuse = false end
      end
      active[#active + 1] = p
      fuse = fuse and fusable(p, st)
      if device == nil then device = p.device elseif device ~= p.device then fuse = false end -- one launch, one device
    end
  end
  if #active == 0 then return end
  if fuse then -- one C call for the group (the same update, element by element)
    local ps, gs, ms, vs, vms, steps = {}, {}, {}, {}, {}, {}
    for i, p in ipairs(active) do
      local st = self.state[p]
      ps[i], gs[i], ms[i], vs[i], vms[i], steps[i] = p, p.grad, st.exp_avg, st.exp_avg_sq, st.max_exp_avg_sq, st.step
    end
    torch._adam_step(ps, gs, ms, vs, g.amsgrad and vms or nil, {step = step, lr = lr, beta1 = beta1, beta2 = beta2,
      eps = eps, weight_decay = wd, amsgrad = g.amsgrad, maximize = g.maximize, decoupled = decoupled,
      steps = g.capturable and steps or nil})
    return
  end
  for _, p in ipairs(active) do
    local grad = p.grad
    if g.maximize then grad = -grad end
    local st = self.state[p]
    if wd ~= 0 then
      if decoupled then p:mul_(1 - lr * wd) else grad = grad:add(p, {alpha = wd}) end
    end
    st.exp_avg:mul_(beta1):add_(grad, {alpha = 1 - beta1})
    st.exp_avg_sq:mul_(beta2):add_(grad * grad, {alpha = 1 - beta2})
    local step_size, bc2_sqrt
    if g.capturable then -- the corrections as tensors on the device (in p's dtype): 1 - beta^t = -expm1(t ln beta)
      st.step:add_(1)
      local t = st.step:to(p.dtype)
      step_size = (t * math.log(beta1)):expm1():neg():reciprocal():mul(lr)
      bc2_sqrt = (t * math.log(beta2)):expm1():neg():sqrt()
    else
      step_size = lr / (1 - beta1 ^ st.step)
      bc2_sqrt = math.sqrt(1 - beta2 ^ st.step)
    end
    local denom
    if g.amsgrad then
      st.max_exp_avg_sq:maximum_(st.exp_avg_sq)
      denom = st.max_exp_avg_sq:sqrt()
    else
      denom = st.exp_avg_sq:sqrt()
    end
    denom:div_(bc2_sqrt):add_(eps)
    if g.capturable then p:sub_(st.exp_avg / denom * step_size)
    else p:add_(st.exp_avg / denom, {alpha = -step_size}) end
  end
end

local adam_defaults = {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false, maximize = false,
  capturable = false}
local adam_positional = {"lr", "betas", "eps", "weight_decay", "amsgrad"}
optim.Adam = Optimizer:extend("Adam", adam_defaults, adam_validate,
  function(self, g) return adam_update(self, g, false) end, adam_positional)

local adamw_defaults = shallow_copy(adam_defaults)
adamw_defaults.betas = {0.9, 0.999}
adamw_defaults.weight_decay = 1e-2
optim.AdamW = Optimizer:extend("AdamW", adamw_defaults, adam_validate,
  function(self, g) return adam_update(self, g, true) end, adam_positional)

-- ---- RMSprop -------------------------------------------------------------------

local function rmsprop_validate(name, g)
  check_lr(name, g)
  check_number(name, g, "alpha", nonneg, "alpha >= 0")
  check_number(name, g, "eps", nonneg, "eps >= 0")
  check_number(name, g, "weight_decay", nonneg, "weight_decay >= 0")
  check_number(name, g, "momentum", nonneg, "momentum >= 0")
  check_flag(name, g, "centered")
  check_flag(name, g, "maximize")
end

local function rmsprop_update(self, g)
  local lr, alpha, eps, wd, momentum = g.lr, g.alpha, g.eps, g.weight_decay, g.momentum
  local ps, gs, sqs, bufs, gas, device = {}, {}, {}, {}, {}, nil
  for _, p in ipairs(g.params) do
    local grad = p.grad
    if grad ~= nil then
      local st = self.state[p]
      if st == nil then
        st = {step = 0, square_avg = torch.zeros_like(p)}
        self.state[p] = st
      end
      if momentum > 0 and st.momentum_buffer == nil then st.momentum_buffer = torch.zeros_like(p) end
      if g.centered and st.grad_avg == nil then st.grad_avg = torch.zeros_like(p) end
      st.step = st.step + 1
      local buf = momentum > 0 and st.momentum_buffer or nil
      local ga = g.centered and st.grad_avg or nil
      if torch._rmsprop_step ~= nil and fusable_with(p, device, {grad, st.square_avg, buf, ga}, 4) then
        device = p.device
        local i = #ps + 1
        ps[i], gs[i], sqs[i], bufs[i], gas[i] = p, grad, st.square_avg, buf, ga
      else
        if g.maximize then grad = -grad end
        if wd ~= 0 then grad = grad:add(p, {alpha = wd}) end
        st.square_avg:mul_(alpha):add_(grad * grad, {alpha = 1 - alpha})
        local avg
        if g.centered then
          st.grad_avg:copy_(st.grad_avg:lerp(grad, 1 - alpha)) -- PyTorch's grad_avg.lerp_(grad, 1 - alpha)
          avg = (st.square_avg - st.grad_avg * st.grad_avg):sqrt_()
        else
          avg = st.square_avg:sqrt()
        end
        avg:add_(eps)
        if momentum > 0 then
          st.momentum_buffer:mul_(momentum):add_(grad / avg)
          p:add_(st.momentum_buffer, {alpha = -lr})
        else
          p:add_(grad / avg, {alpha = -lr})
        end
      end
    end
  end
  if #ps == 0 then return end
  torch._rmsprop_step(ps, gs, sqs, momentum > 0 and bufs or nil, g.centered and gas or nil, {lr = lr, alpha = alpha,
    eps = eps, weight_decay = wd, momentum = momentum, centered = g.centered, maximize = g.maximize})
end

optim.RMSprop = Optimizer:extend("RMSprop",
  {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false, maximize = false},
  rmsprop_validate, rmsprop_update, {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"})

optim.lr_scheduler = require "tensh.optim.lr_scheduler"

return optim
