-- interpolate's checks that F.interpolate and nn.Upsample share (the layer runs
-- them when it is built): an internal module, not reachable from nn.
local C = require "tensh.nn.common"
local A = require "tensh.args"
local raise, plain = C.raise, A.plain

local M = {}

local INTERP_LATER = {area = true, bicubic = true, trilinear = true, ["nearest-exact"] = true}

-- a number, a list of n numbers or a torch.Size as a list of n (integers when `int`)
function M.spatial(fn, what, v, n, int)
  v = plain(v)
  local list = {}
  if type(v) == "table" then
    if #v ~= n then
      raise("%s: %s must be a number or a list of %d (the input has %d spatial dims), got a list of %d", fn, what, n, n, #v)
    end
    for i = 1, n do list[i] = v[i] end
  else
    for i = 1, n do list[i] = v end
  end
  for i = 1, n do
    if int then list[i] = C.check_int(fn, what, list[i])
    else
      A.check_number(fn, what, list[i])
      if list[i] ~= list[i] or math.abs(list[i]) == math.huge then
        raise("%s: %s must be finite, got %s", fn, what, A.show(list[i]))
      end
    end
  end
  return list
end

-- the options that do not depend on the input, checked: returns the mode, align_corners
-- and recompute_scale_factor
function M.options(fn, a)
  local mode = a.mode == nil and "nearest" or a.mode
  if INTERP_LATER[mode] then raise("%s: mode '%s' is not supported yet (nearest, linear, bilinear are)", fn, mode) end
  if mode ~= "nearest" and mode ~= "linear" and mode ~= "bilinear" then
    raise("%s: mode must be 'nearest', 'linear' or 'bilinear', got %s", fn, A.show(mode))
  end
  local align = a.align_corners
  if mode == "nearest" then
    if align ~= nil then
      raise("%s: align_corners option can only be set with the interpolating modes: linear | bilinear", fn)
    end
  else
    align = align ~= nil and A.check_boolean(fn, "align_corners", align)
  end
  if a.antialias ~= nil and A.check_boolean(fn, "antialias", a.antialias) then
    raise("%s: antialias is not supported", fn)
  end
  local recompute = a.recompute_scale_factor
  if recompute ~= nil then A.check_boolean(fn, "recompute_scale_factor", recompute) end
  local size, factor = a.size, a.scale_factor
  if size ~= nil and factor ~= nil then raise("%s: only one of size or scale_factor should be defined", fn) end
  if size == nil and factor == nil then raise("%s: either size or scale_factor should be defined", fn) end
  if size ~= nil and recompute then raise("%s: recompute_scale_factor is not meaningful with an explicit size", fn) end
  -- each entry's type (the count is checked against the input's dims later)
  local v = plain(size ~= nil and size or factor)
  if type(v) == "table" and #v == 0 then
    raise("%s: %s must be a number or a non-empty list of numbers, got %s", fn, size ~= nil and "size" or "scale_factor",
      A.show(v))
  end
  local list = M.spatial(fn, size ~= nil and "size" or "scale_factor", v, type(v) == "table" and #v or 1, size ~= nil)
  -- an output size below 1 fails with any input (PyTorch says so at the forward)
  for _, e in ipairs(list) do
    if e <= 0 then
      local shown = type(v) == "table" and "(" .. table.concat(list, ", ") .. ")" or tostring(e)
      raise("%s: input and output sizes should be greater than 0, but got %s %s", fn, size ~= nil and "size" or
        "scale_factor", shown)
    end
  end
  return mode, align, recompute
end

return M
