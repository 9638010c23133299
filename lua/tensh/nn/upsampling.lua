-- nn layers, one family a file: upsampling (Upsample, UpsamplingNearest2d, UpsamplingBilinear2d) over F.interpolate.
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local interp = require "tensh.nn.interpolation"
local Module, F = nn.Module, nn.functional
local args, pyval, check_input = C.args, C.pyval, C.check_input

local M = {}

-- a scale factor (or a list of them) as floats, as PyTorch keeps it (scale_factor=2.0 in its repr)
local function as_float(v)
  if type(v) == "number" then return v + 0.0 end
  v = require("tensh.args").plain(v) -- (a torch.Size counts from 0)
  if type(v) ~= "table" then return v end
  local out = {}
  for i, x in ipairs(v) do out[i] = type(x) == "number" and x + 0.0 or x end
  return out
end

-- Upsample({size, scale_factor, mode = "nearest", align_corners, recompute_scale_factor})
local Upsample = Module:extend("Upsample")
M.Upsample = Upsample
function Upsample:init(...)
  local name = self.name or "Upsample" -- (UpsamplingNearest2d's init names itself first)
  local a = args(name, {"size", "scale_factor", "mode", "align_corners", "recompute_scale_factor"}, ...)
  interp.options(name, a) -- wrong options fail here, not at the first forward
  self.name = name
  self.size = a.size
  self.scale_factor = a.scale_factor and as_float(a.scale_factor) or nil
  self.mode = a.mode == nil and "nearest" or a.mode
  self.align_corners, self.recompute_scale_factor = a.align_corners, a.recompute_scale_factor
end
function Upsample:extra_repr()
  local info = self.scale_factor ~= nil and "scale_factor=" .. pyval(self.scale_factor) or "size=" .. pyval(self.size)
  return info .. ", mode=" .. ("'%s'"):format(tostring(self.mode))
end
function Upsample:forward(x)
  check_input(self.name, x)
  return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
    {recompute_scale_factor = self.recompute_scale_factor})
end

-- UpsamplingNearest2d({size, scale_factor}) and UpsamplingBilinear2d({size, scale_factor}):
-- Upsample with mode "nearest", and "bilinear" with align_corners = true
local function fixed_mode(name, mode, align)
  local cls = Upsample:extend(name)
  M[name] = cls
  function cls:init(...)
    local a = args(name, {"size", "scale_factor"}, ...)
    self.name = name
    Upsample.init(self, {size = a.size, scale_factor = a.scale_factor, mode = mode, align_corners = align})
  end
end
fixed_mode("UpsamplingNearest2d", "nearest", nil)
fixed_mode("UpsamplingBilinear2d", "bilinear", true)

return M
