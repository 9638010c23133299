-- Functional losses with PyTorch's semantics (torch.nn.functional.*_loss),
-- built only from differentiable tensor ops so autograd gives the gradients.
-- nn.lua exposes them as nn.functional.* and wraps them in the loss modules.
-- Class indices count from 0; reduction is "mean" | "sum" | "none".
local M = {}

local A = require "tensh.args"
local fail, check_opts, check_tensor = A.raise, A.check_opts, A.check_tensor

local function check_floating(fn, name, v)
  if not A.is_floating_dtype(v.dtype) then
    fail("%s: expected a floating point %s, got %s; convert it with :float()", fn, name, v.dtype)
  end
end

local function check_reduction(fn, r)
  r = r == nil and "mean" or r
  if r ~= "mean" and r ~= "sum" and r ~= "none" then
    fail("%s: %s is not a valid value for reduction (expected \"mean\", \"sum\" or \"none\")", fn, tostring(r))
  end
  return r
end

local function check_optional_tensor(fn, name, v)
  if v ~= nil and not torch.is_tensor(v) then A.option_type_error(fn, name, "tensor", v) end
end

-- The prelude every loss shares: input and target are tensors (cast to
-- float32 under autocast: src/autograd/autocast.def), opts holds only the keys in
-- `allowed`, its tensor options (weight, pos_weight) are tensors.
-- Returns input, target, opts (a table) and the reduction.
local TENSOR_OPTS = {"weight", "pos_weight"}
local DEVICE_CHECKED = {"target", "weight", "pos_weight"}
local function loss_args(fn, input, target, opts, allowed)
  check_tensor(fn, 1, input)
  check_tensor(fn, 2, target)
  input, target = torch._autocast_to_float32(input, target)
  opts = check_opts(fn, opts, allowed)
  local reduction = check_reduction(fn, opts.reduction)
  for _, k in ipairs(TENSOR_OPTS) do
    if allowed[k] then check_optional_tensor(fn, k, opts[k]) end
  end
  -- one device, said here in the loss's name (the ops inside would name themselves: gather);
  -- get_device() is a number: no device object per call
  local dev = input:get_device()
  for _, name in ipairs(DEVICE_CHECKED) do
    local t = name == "target" and target or opts[name]
    if t ~= nil and t:get_device() ~= dev then
      local want = tostring(input.device)
      fail("%s: input is on %s but %s is on %s; move it to the input's device: %s:to(\"%s\")", fn, want, name,
        tostring(t.device), name, want)
    end
  end
  return input, target, opts, reduction
end

local function reduce(loss, reduction)
  if reduction == "mean" then return loss:mean() end
  if reduction == "sum" then return loss:sum() end
  return loss
end

local function same_shape(a, b) return a.shape == b.shape end

-- ---- negative log-likelihood over class indices ----------------------------
-- One fused op each way (torch._nll_loss: src/ops/op_loss.h). The class indices'
-- range is checked where the loss runs: at once on the CPU, on a device at
-- its next synchronisation (a device-side assert), so a training step never
-- waits for the host to read the targets.

-- Checks the class-index target's dtype and shape against input (N, C, d1...).
local function check_class_target(fn, lp, target)
  if target.dtype ~= "torch.int64" then
    fail("%s: expected target dtype torch.int64 for class indices, got %s; convert it with :long()", fn, target.dtype)
  end
  local want = {lp.shape[0]}
  for d = 2, lp:dim() - 1 do want[#want + 1] = lp.shape[d] end
  want = torch.Size(want)
  if target.shape ~= want then
    fail("%s: expected target of size %s (class indices) for input of size %s, got target of size %s",
      fn, tostring(want), tostring(lp.shape), tostring(target.shape))
  end
end

local function check_weight(fn, weight, C, dtype)
  if weight == nil then return end
  if weight:dim() ~= 1 or weight.shape[0] ~= C then
    fail("%s: weight should be defined for all %d classes (a tensor of size torch.Size([%d])), got size %s",
      fn, C, C, tostring(weight.shape))
  end
  if weight.dtype ~= dtype then
    fail("%s: weight dtype %s does not match input dtype %s", fn, weight.dtype, dtype)
  end
end

-- weight (C) viewed as (1, C, 1, ...) to broadcast against lp (N, C, d1...)
local function weight_view(weight, ndim)
  local shape = {}
  for d = 1, ndim do shape[d] = 1 end
  shape[2] = weight.shape[0]
  return weight:view(table.unpack(shape))
end

-- 1-D input (C) with a 0-dim target is a batch of one: add the batch dim
local function batch_of_one(input, target)
  if input:dim() == 1 then
    return input:unsqueeze(0), torch.is_tensor(target) and target:dim() == 0 and target:unsqueeze(0) or target, true
  end
  return input, target, false
end

local nll_opts = {weight = true, ignore_index = true, reduction = true}

-- nll_loss(input (N, C, d1...) log-probabilities, target (N, d1...) int64,
--          {weight = (C), ignore_index = -100, reduction = "mean"})
function M.nll_loss(input, target, opts)
  local fn = "nll_loss"
  local reduction
  input, target, opts, reduction = loss_args(fn, input, target, opts, nll_opts)
  local ignore_index = opts.ignore_index or -100
  check_floating(fn, "input", input)
  if input:dim() < 1 then fail("%s: expected input with 1 or more dimensions (got 0)", fn) end
  local one
  input, target, one = batch_of_one(input, target)
  check_weight(fn, opts.weight, input.shape[1], input.dtype)
  check_class_target(fn, input, target)
  local out = torch._nll_loss(input, target, {weight = opts.weight, ignore_index = ignore_index, reduction = reduction})
  if one and reduction == "none" then out = out:squeeze(0) end
  return out
end

local ce_opts = {weight = true, ignore_index = true, reduction = true, label_smoothing = true}

-- cross_entropy(input (N, C, d1...) logits, target (N, d1...) int64 class
-- indices or (N, C, d1...) class probabilities,
-- {weight = (C), ignore_index = -100, reduction = "mean", label_smoothing = 0})
function M.cross_entropy(input, target, opts)
  local fn = "cross_entropy"
  local reduction
  input, target, opts, reduction = loss_args(fn, input, target, opts, ce_opts)
  local ignore_index = opts.ignore_index or -100
  local eps = opts.label_smoothing or 0
  local weight = opts.weight
  if type(eps) ~= "number" or eps < 0 or eps > 1 then
    fail("%s: label_smoothing must be between 0.0 and 1.0, got %s", fn, tostring(eps))
  end
  check_floating(fn, "input", input)
  if input:dim() < 1 then fail("%s: expected input with 1 or more dimensions (got 0)", fn) end
  local probs = same_shape(input, target)
  local one
  input, target, one = batch_of_one(input, target)
  local C = input.shape[1]
  check_weight(fn, weight, C, input.dtype)
  local out
  if probs then
    local lp = input:log_softmax(1)
    if not A.is_floating_dtype(target.dtype) then
      fail("%s: a target of the input's size %s holds class probabilities and must be floating point, got %s",
        fn, tostring(input.shape), target.dtype)
    end
    if ignore_index >= 0 then fail("%s: ignore_index is not supported for class-probability targets", fn) end
    if eps > 0 then target = target * (1 - eps) + eps / C end
    local prod = lp * target
    if weight then prod = prod * weight_view(weight, lp:dim()) end
    if reduction == "none" then
      out = -prod:sum(1)
    elseif reduction == "sum" then
      out = -prod:sum()
    elseif input:numel() == 0 then
      out = prod:sum() * (0 / 0)
    else
      out = -prod:sum() / (input:numel() // C)
    end
  else -- log-softmax and the smoothed negative log-likelihood, fused
    check_class_target(fn, input, target)
    out = torch._nll_loss(input, target, {weight = weight, ignore_index = ignore_index, reduction = reduction,
      label_smoothing = eps, logits = true})
  end
  if one and reduction == "none" then out = out:squeeze(0) end
  return out
end

-- ---- regression losses -----------------------------------------------------

-- Same-size operands: PyTorch broadcasts here with a warning, which is almost
-- always a bug (a (N, 1) output against an (N) target), so we refuse it.
local function check_pair(fn, input, target)
  if not same_shape(input, target) then
    fail("%s: target size %s is different from input size %s; reshape one of them so the sizes match",
      fn, tostring(target.shape), tostring(input.shape))
  end
  check_floating(fn, "input", input)
  check_floating(fn, "target", target)
end

local red_opts = {reduction = true}

function M.mse_loss(input, target, opts)
  local fn = "mse_loss"
  local reduction
  input, target, opts, reduction = loss_args(fn, input, target, opts, red_opts)
  check_pair(fn, input, target)
  local d = input - target
  return reduce(d * d, reduction)
end

function M.l1_loss(input, target, opts)
  local fn = "l1_loss"
  local reduction
  input, target, opts, reduction = loss_args(fn, input, target, opts, red_opts)
  check_pair(fn, input, target)
  return reduce((input - target):abs(), reduction)
end

local smooth_l1_opts = {reduction = true, beta = true}

-- 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta = 0 is l1_loss
function M.smooth_l1_loss(input, target, opts)
  local fn = "smooth_l1_loss"
  local reduction
  input, target, opts, reduction = loss_args(fn, input, target, opts, smooth_l1_opts)
  local beta = opts.beta or 1.0
  if type(beta) ~= "number" or beta < 0 then
    fail("%s: beta must be a non-negative number, got %s", fn, tostring(beta))
  end
  check_pair(fn, input, target)
  local d = (input - target):abs()
  if beta == 0 then return reduce(d, reduction) end
  return reduce(torch.where(d:lt(beta), d * d * (0.5 / beta), d - 0.5 * beta), reduction)
end

-- ---- binary losses ---------------------------------------------------------

local function check_broadcast_weight(fn, name, w, shape)
  if w == nil then return end
  local ok = pcall(torch.broadcast_shapes, w.shape, shape)
  if not ok then
    fail("%s: %s of size %s cannot be broadcast to the input size %s", fn, name, tostring(w.shape), tostring(shape))
  end
end

local bin_opts = {weight = true, reduction = true}

-- binary_cross_entropy(input probabilities, target, {weight, reduction}):
-- each log clamped to >= -100 as PyTorch, so 0 and 1 give finite losses. The
-- input's range is checked where it lives: at once on the CPU, at the next
-- synchronisation on a device (nothing waits for the host).
function M.binary_cross_entropy(input, target, opts)
  local fn = "binary_cross_entropy"
  local reduction
  input, target, opts, reduction = loss_args(fn, input, target, opts, bin_opts)
  check_pair(fn, input, target)
  check_broadcast_weight(fn, "weight", opts.weight, input.shape)
  torch._check_range(input:detach(), 0, 1, fn)
  local log_p = input:log():clamp({min = -100})
  local log_q = (-input):log1p():clamp({min = -100})
  local loss = (target - 1) * log_q - target * log_p
  if opts.weight then loss = loss * opts.weight end
  return reduce(loss, reduction)
end

-- binary_cross_entropy_with_logits(input logits, target, {weight, pos_weight (C), reduction}):
-- (1 - t) x + lw (m + log(e^-m + e^(-x-m))), m = max(-x, 0), lw = 1 + (pos_weight - 1) t,
-- which never exponentiates a positive number
local bce_logits_opts = {weight = true, pos_weight = true, reduction = true}
function M.binary_cross_entropy_with_logits(input, target, opts)
  local fn = "binary_cross_entropy_with_logits"
  local reduction
  input, target, opts, reduction = loss_args(fn, input, target, opts, bce_logits_opts)
  check_pair(fn, input, target)
  check_broadcast_weight(fn, "weight", opts.weight, input.shape)
  check_broadcast_weight(fn, "pos_weight", opts.pos_weight, input.shape)
  local m = (-input):clamp({min = 0})
  local softplus_neg = ((-m):exp() + (-input - m):exp()):log() + m -- log(1 + e^-x)
  local loss
  if opts.pos_weight then
    loss = (1 - target) * input + ((opts.pos_weight - 1) * target + 1) * softplus_neg
  else
    loss = (1 - target) * input + softplus_neg
  end
  if opts.weight then loss = loss * opts.weight end
  return reduce(loss, reduction)
end

-- huber_loss(input, target, {reduction = "mean", delta = 1.0}): 0.5 d^2 where |d| < delta,
-- else delta (|d| - 0.5 delta); composed of elementwise ops (its gradient d, or delta
-- times d's sign, is PyTorch's)
local huber_opts = {reduction = true, delta = true}
function M.huber_loss(input, target, opts)
  local fn = "huber_loss"
  local reduction
  input, target, opts, reduction = loss_args(fn, input, target, opts, huber_opts)
  local delta = opts.delta == nil and 1.0 or opts.delta
  if type(delta) ~= "number" or not (delta > 0) then
    fail("%s: delta must be a positive number, got %s", fn, A.show(delta))
  end
  check_pair(fn, input, target)
  local d = (input - target):abs()
  return reduce(torch.where(d:lt(delta), d * d * 0.5, (d - 0.5 * delta) * delta), reduction)
end

-- kl_div(input log-probabilities, target probabilities (log-probabilities with log_target),
-- {reduction = "mean" | "batchmean" | "sum" | "none", log_target = false}): the pointwise
-- target * (log(target) - input), where xlogy makes a 0 target add 0 (as PyTorch); batchmean
-- divides the sum by the batch size (input.shape[0]), mean by the element count
local kl_opts = {reduction = true, log_target = true}
function M.kl_div(input, target, opts)
  local fn = "kl_div"
  check_tensor(fn, 1, input)
  check_tensor(fn, 2, target)
  input, target = torch._autocast_to_float32(input, target)
  opts = check_opts(fn, opts, kl_opts)
  local reduction = opts.reduction == nil and "mean" or opts.reduction
  if reduction ~= "batchmean" and reduction ~= "mean" and reduction ~= "sum" and reduction ~= "none" then
    fail("%s: %s is not a valid value for reduction (expected \"mean\", \"batchmean\", \"sum\" or \"none\")", fn,
      A.show(reduction))
  end
  local log_target = opts.log_target
  if log_target ~= nil and type(log_target) ~= "boolean" then
    fail("%s: log_target must be a boolean, got %s", fn, A.show(log_target))
  end
  check_pair(fn, input, target)
  local loss
  if log_target then loss = target:exp() * (target - input)
  else loss = torch.xlogy(target, target) - target * input end
  if reduction ~= "batchmean" then return reduce(loss, reduction) end
  local total = loss:sum()
  if input:dim() == 0 then return total end
  return total / input.shape[0]
end

-- The keys each loss takes, for the loss modules (tensh.nn.loss) to check
-- their constructor's options against: a misspelt key is refused where it was
-- written, not at the first forward. Not a function, so nn.lua leaves it out
-- of nn.functional.
M.OPTIONS = {nll_loss = nll_opts, cross_entropy = ce_opts, mse_loss = red_opts, l1_loss = red_opts,
  smooth_l1_loss = smooth_l1_opts, binary_cross_entropy = bin_opts,
  binary_cross_entropy_with_logits = bce_logits_opts}
M.OPTIONS.huber_loss, M.OPTIONS.kl_div = huber_opts, kl_opts

return M
