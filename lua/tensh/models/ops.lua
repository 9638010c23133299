-- The reusable blocks of torchvision.ops.misc that its models are built from:
-- Conv2dNormActivation (convolution, batch norm, activation) and
-- SqueezeExcitation. Module names, children and state_dict keys as
-- torchvision's, so its checkpoints load into the models built from them.
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module = nn.Module
local raise, args, check_int = C.raise, C.args, C.check_int

local M = {}

-- a constructor argument that names a layer class (nn.ReLU, nn.BatchNorm2d, a
-- function returning a module); false means "no layer", as torchvision's None
local function check_layer(fn, what, v)
  if v == false then return v end
  local ok = type(v) == "function" or (type(v) == "table" and getmetatable(v) and getmetatable(v).__call)
  if not ok then raise("%s: %s must be a layer class (such as nn.ReLU) or false for none, got %s", fn, what, type(v)) end
  return v
end

-- Conv2dNormActivation(in_channels, out_channels, {kernel_size = 3, stride = 1,
-- padding = (kernel_size - 1) // 2 * dilation, groups = 1, norm_layer = nn.BatchNorm2d,
-- activation_layer = nn.ReLU, dilation = 1, inplace = true, bias = (no norm layer)}):
-- a Sequential of children 0 (Conv2d), 1 (the norm layer), 2 (the activation)
-- (Module.extend: a Sequential's own :extend appends modules, as PyTorch's)
local Conv2dNormActivation = Module.extend(nn.Sequential, "Conv2dNormActivation")
M.Conv2dNormActivation = Conv2dNormActivation
local cna_names = {"in_channels", "out_channels", "kernel_size", "stride", "padding", "groups", "norm_layer",
  "activation_layer", "dilation", "inplace", "bias"}
function Conv2dNormActivation:init(...)
  local fn = "Conv2dNormActivation"
  local a = args(fn, cna_names, ...)
  local cin = check_int(fn, "in_channels", a.in_channels, 1)
  local cout = check_int(fn, "out_channels", a.out_channels, 1)
  local k = check_int(fn, "kernel_size", a.kernel_size or 3, 1)
  local dilation = check_int(fn, "dilation", a.dilation or 1, 1)
  local norm = a.norm_layer
  if norm == nil then norm = nn.BatchNorm2d end
  local act = a.activation_layer
  if act == nil then act = nn.ReLU end
  check_layer(fn, "norm_layer", norm)
  check_layer(fn, "activation_layer", act)
  local bias = a.bias
  if bias == nil then bias = norm == false end
  nn.Sequential.init(self)
  self:append(nn.Conv2d(cin, cout, k, {stride = a.stride or 1, padding = a.padding or (k - 1) // 2 * dilation,
    dilation = dilation, groups = a.groups or 1, bias = bias}))
  if norm then self:append(norm(cout)) end
  if act then
    if a.inplace == false then self:append(act()) else self:append(act({inplace = true})) end
  end
  self.out_channels = cout
end

-- SqueezeExcitation(input_channels, squeeze_channels, {activation = nn.ReLU,
-- scale_activation = nn.Sigmoid}): x * scale_activation(fc2(activation(fc1(avgpool(x)))))
-- with 1x1 convolutions fc1, fc2 (https://arxiv.org/abs/1709.01507)
local SqueezeExcitation = Module:extend("SqueezeExcitation")
M.SqueezeExcitation = SqueezeExcitation
function SqueezeExcitation:init(...)
  local fn = "SqueezeExcitation"
  local a = args(fn, {"input_channels", "squeeze_channels", "activation", "scale_activation"}, ...)
  local cin = check_int(fn, "input_channels", a.input_channels, 1)
  local sq = check_int(fn, "squeeze_channels", a.squeeze_channels, 1)
  local act = a.activation == nil and nn.ReLU or a.activation
  local scale_act = a.scale_activation == nil and nn.Sigmoid or a.scale_activation
  if act == false or scale_act == false then raise("%s: activation and scale_activation must be layer classes", fn) end
  check_layer(fn, "activation", act)
  check_layer(fn, "scale_activation", scale_act)
  self.avgpool = nn.AdaptiveAvgPool2d(1)
  self.fc1 = nn.Conv2d(cin, sq, 1)
  self.fc2 = nn.Conv2d(sq, cin, 1)
  self.activation = act()
  self.scale_activation = scale_act()
end
function SqueezeExcitation:_scale(x)
  return self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
end
function SqueezeExcitation:forward(x)
  C.check_input("SqueezeExcitation", x)
  return self:_scale(x) * x
end

return M
