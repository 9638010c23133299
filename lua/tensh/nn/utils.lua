-- Gradient clipping, as torch.nn.utils: clip_grad_norm_ and clip_grad_value_
-- (nn.lua exposes this table as nn.utils). Both change .grad in place and
-- skip parameters whose .grad is nil.
local M = {}

local A = require "tensh.args"
local fail, check_opts = A.raise, A.check_opts

-- params: a tensor or a list of tensors -> the list of their non-nil grads
local function grads_of(fn, params)
  if torch.is_tensor(params) then params = {params} end
  if type(params) ~= "table" then fail("%s: parameters must be a tensor or a list of tensors, got %s", fn, type(params)) end
  local grads = {}
  for i, p in ipairs(params) do
    if not torch.is_tensor(p) then
      fail("%s: parameters[%d] must be a tensor, got %s", fn, i, type(p))
    end
    local g = p.grad
    if g ~= nil then grads[#grads + 1] = g end
  end
  return grads
end

-- Whether the fused clip (torch._clip_grad_norm_: three launches for every
-- gradient, nothing read back) takes these: one floating dtype (float32 or
-- float64), contiguous, one device, the 2-norm or the max.
local function fusable(grads, norm_type)
  if norm_type ~= 2 and norm_type ~= math.huge then return false end
  local g1 = grads[1]
  if g1.dtype ~= torch.float32 and g1.dtype ~= torch.float64 then return false end
  for _, g in ipairs(grads) do
    if g.dtype ~= g1.dtype or g.device ~= g1.device or not g:is_contiguous() then return false end
  end
  return true
end

-- clip_grad_norm_(params, max_norm, {norm_type = 2, error_if_nonfinite = false}) -> total norm (0-dim)
-- The total norm is the norm of the per-parameter norms; every grad is scaled
-- by min(1, max_norm / (total + 1e-6)), as PyTorch does. The result is a
-- tensor on the grads' device: nothing waits for the device unless
-- error_if_nonfinite asks to look at it.
function M.clip_grad_norm_(params, max_norm, opts)
  local fn = "clip_grad_norm_"
  local grads = grads_of(fn, params)
  if type(max_norm) ~= "number" then fail("%s: max_norm must be a number, got %s", fn, type(max_norm)) end
  opts = check_opts(fn, opts, {norm_type = true, error_if_nonfinite = true})
  local norm_type = opts.norm_type or 2
  if norm_type == "inf" then norm_type = math.huge end
  if type(norm_type) ~= "number" then fail("%s: norm_type must be a number (or \"inf\"), got %s", fn, type(norm_type)) end
  if #grads == 0 then return torch.tensor(0.0) end
  if not opts.error_if_nonfinite and fusable(grads, norm_type) then
    return torch.no_grad(function() return torch._clip_grad_norm_(grads, max_norm, norm_type) end)
  end
  return torch.no_grad(function()
    local device = grads[1].device
    local norms = {}
    for i, g in ipairs(grads) do
      local n = norm_type == math.huge and g:abs():max() or g:norm(norm_type)
      norms[i] = n:to(device)
    end
    local total
    if norm_type == math.huge then
      total = #norms == 1 and norms[1] or torch.stack(norms):max()
    else
      total = torch.stack(norms):norm(norm_type)
    end
    if opts.error_if_nonfinite then
      local v = total:item()
      if v ~= v or v == math.huge or v == -math.huge then
        fail("%s: the total norm of order %s for gradients from `parameters` is non-finite, so it cannot be clipped; to scale the gradients by the non-finite norm anyway, set error_if_nonfinite = false",
          fn, tostring(norm_type))
      end
    end
    local coef = (max_norm / (total + 1e-6)):clamp({max = 1.0})
    for _, g in ipairs(grads) do g:mul_(coef:to(g.device)) end
    return total
  end)
end

-- clip_grad_value_(params, clip_value): clamps every grad to [-clip_value, clip_value]
function M.clip_grad_value_(params, clip_value)
  local fn = "clip_grad_value_"
  local grads = grads_of(fn, params)
  if type(clip_value) ~= "number" then fail("%s: clip_value must be a number, got %s", fn, type(clip_value)) end
  torch.no_grad(function()
    for _, g in ipairs(grads) do g:clamp_(-clip_value, clip_value) end
  end)
end

return M
