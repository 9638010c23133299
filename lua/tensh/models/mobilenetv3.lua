-- MobileNetV3 (Howard et al., "Searching for MobileNetV3", https://arxiv.org/abs/1905.02244)
-- as torchvision.models.mobilenetv3 builds it: the same blocks, children,
-- module names and initialisation, so state_dict keys and shapes equal
-- torchvision's and its checkpoints (converted to safetensors) load as they are.
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local ops = require "tensh.models.ops"
local A = require "tensh.args"
local Module, init = nn.Module, nn.init
local raise, args, check_int, shape_str = C.raise, C.args, C.check_int, C.shape_str
local Conv2dNormActivation, SqueezeExcitation = ops.Conv2dNormActivation, ops.SqueezeExcitation

local M = {}

-- torchvision's _make_divisible (from the TensorFlow original): v rounded to the
-- nearest multiple of divisor, at least min_value, never more than 10% below v
local function make_divisible(v, divisor, min_value)
  min_value = min_value or divisor
  local new_v = math.max(min_value, math.floor(v + divisor / 2) // divisor * divisor)
  if new_v < 0.9 * v then new_v = new_v + divisor end
  return math.tointeger(new_v) or new_v
end
-- torchvision's name, for the tests; its arguments checked (the builders pass numbers)
function M._make_divisible(v, divisor, min_value)
  if type(v) ~= "number" then A.type_error("_make_divisible", 1, "number", v) end
  if type(divisor) ~= "number" or not (divisor > 0) then
    A.bad_argument("_make_divisible", 2, "a positive number expected, got %s", A.show(divisor))
  end
  if min_value ~= nil and type(min_value) ~= "number" then A.type_error("_make_divisible", 3, "number or nil", min_value) end
  return make_divisible(v, divisor, min_value)
end

local function check_width(fn, w)
  if type(w) ~= "number" or not (w > 0) or w == math.huge then
    raise("%s: width_mult must be a positive number, got %s", fn, tostring(w))
  end
  return w
end

-- InvertedResidualConfig(input_channels, kernel, expanded_channels, out_channels, use_se,
-- activation ("RE" or "HS"), stride, dilation, width_mult): one row of the paper's
-- Tables 1 and 2, its channel counts scaled by width_mult
local InvertedResidualConfig = {}
InvertedResidualConfig.__index = InvertedResidualConfig
M.InvertedResidualConfig = setmetatable(InvertedResidualConfig, {__call = function(_, ...)
  local fn = "InvertedResidualConfig"
  local a = args(fn, {"input_channels", "kernel", "expanded_channels", "out_channels", "use_se", "activation",
    "stride", "dilation", "width_mult"}, ...)
  local w = check_width(fn, a.width_mult == nil and 1.0 or a.width_mult)
  if a.activation ~= "RE" and a.activation ~= "HS" then
    raise("%s: activation must be \"RE\" (ReLU) or \"HS\" (Hardswish), got %s", fn, tostring(a.activation))
  end
  local function adjust(what) return make_divisible(check_int(fn, what, a[what], 1) * w, 8) end
  return setmetatable({
    input_channels = adjust("input_channels"),
    kernel = check_int(fn, "kernel", a.kernel, 1),
    expanded_channels = adjust("expanded_channels"),
    out_channels = adjust("out_channels"),
    use_se = a.use_se == true,
    use_hs = a.activation == "HS",
    stride = check_int(fn, "stride", a.stride, 1),
    dilation = check_int(fn, "dilation", a.dilation or 1, 1),
  }, InvertedResidualConfig)
end})
function InvertedResidualConfig.adjust_channels(channels, width_mult)
  local fn = "InvertedResidualConfig.adjust_channels"
  return make_divisible(check_int(fn, "channels", channels, 0) * check_width(fn, width_mult), 8)
end

local function is_config(c) return getmetatable(c) == InvertedResidualConfig end

-- InvertedResidual(cnf, norm_layer, {se_layer}): 1x1 expansion (when the width grows),
-- depthwise kxk, optional squeeze-excitation (hardsigmoid scale), 1x1 projection with no
-- activation; the input is added back when the shape allows (stride 1, same width)
local InvertedResidual = Module:extend("InvertedResidual")
M.InvertedResidual = InvertedResidual
local function default_se(cin, squeeze) return SqueezeExcitation(cin, squeeze, {scale_activation = nn.Hardsigmoid}) end
function InvertedResidual:init(cnf, norm_layer, opts)
  local fn = "InvertedResidual"
  if not is_config(cnf) then raise("%s: cnf must be a models.InvertedResidualConfig, got %s", fn, type(cnf)) end
  opts = require("tensh.args").check_opts(fn, opts, {se_layer = true})
  if cnf.stride < 1 or cnf.stride > 2 then raise("%s: illegal stride value %d (expected 1 or 2)", fn, cnf.stride) end
  local se_layer = opts.se_layer or default_se
  self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
  local act = cnf.use_hs and nn.Hardswish or nn.ReLU
  local block = nn.Sequential()
  if cnf.expanded_channels ~= cnf.input_channels then
    block:append(Conv2dNormActivation(cnf.input_channels, cnf.expanded_channels,
      {kernel_size = 1, norm_layer = norm_layer, activation_layer = act}))
  end
  block:append(Conv2dNormActivation(cnf.expanded_channels, cnf.expanded_channels,
    {kernel_size = cnf.kernel, stride = cnf.dilation > 1 and 1 or cnf.stride, dilation = cnf.dilation,
     groups = cnf.expanded_channels, norm_layer = norm_layer, activation_layer = act}))
  if cnf.use_se then block:append(se_layer(cnf.expanded_channels, make_divisible(cnf.expanded_channels // 4, 8))) end
  block:append(Conv2dNormActivation(cnf.expanded_channels, cnf.out_channels,
    {kernel_size = 1, norm_layer = norm_layer, activation_layer = false}))
  self.block = block
  self.out_channels = cnf.out_channels
  self._is_cn = cnf.stride > 1
end
function InvertedResidual:forward(x)
  local y = self.block(x)
  if self.use_res_connect then y = y + x end
  return y
end

-- torchvision's norm layer for MobileNetV3: BatchNorm2d(eps = 0.001, momentum = 0.01)
local function default_norm(c) return nn.BatchNorm2d(c, {eps = 0.001, momentum = 0.01}) end

-- MobileNetV3(inverted_residual_setting, last_channel, {num_classes = 1000, block =
-- InvertedResidual, norm_layer, dropout = 0.2}): features (a stem, the blocks, a 1x1 to six
-- times the last width), avgpool, classifier (Linear, Hardswish, Dropout, Linear)
local MobileNetV3 = Module:extend("MobileNetV3")
M.MobileNetV3 = MobileNetV3
function MobileNetV3:init(setting, last_channel, opts)
  local fn = "MobileNetV3"
  opts = require("tensh.args").check_opts(fn, opts, {num_classes = true, block = true, norm_layer = true, dropout = true})
  if type(setting) ~= "table" or #setting == 0 then raise("%s: the inverted_residual_setting should not be empty", fn) end
  for i, c in ipairs(setting) do
    if not is_config(c) then
      raise("%s: the inverted_residual_setting should be a list of models.InvertedResidualConfig (entry %d is a %s)",
        fn, i, type(c))
    end
  end
  last_channel = check_int(fn, "last_channel", last_channel, 1)
  local num_classes = check_int(fn, "num_classes", opts.num_classes or 1000, 1)
  local dropout = opts.dropout == nil and 0.2 or opts.dropout
  if type(dropout) ~= "number" or dropout < 0 or dropout > 1 then
    raise("%s: dropout must be a probability between 0 and 1, got %s", fn, tostring(dropout))
  end
  local block = opts.block or InvertedResidual
  local norm_layer = opts.norm_layer or default_norm

  local features = nn.Sequential()
  self.in_channels = 3
  features:append(Conv2dNormActivation(3, setting[1].input_channels,
    {kernel_size = 3, stride = 2, norm_layer = norm_layer, activation_layer = nn.Hardswish}))
  for _, cnf in ipairs(setting) do features:append(block(cnf, norm_layer)) end
  local last_in = setting[#setting].out_channels
  local last_out = 6 * last_in
  features:append(Conv2dNormActivation(last_in, last_out,
    {kernel_size = 1, norm_layer = norm_layer, activation_layer = nn.Hardswish}))
  self.features = features
  self.avgpool = nn.AdaptiveAvgPool2d(1)
  self.classifier = nn.Sequential(nn.Linear(last_out, last_channel), nn.Hardswish({inplace = true}),
    nn.Dropout({p = dropout, inplace = true}), nn.Linear(last_channel, num_classes))

  -- torchvision's initialisation
  for _, m in ipairs(self:modules()) do
    local cls = getmetatable(m)
    if cls == nn.Conv2d then
      init.kaiming_normal_(m.weight, {mode = "fan_out"})
      if m.bias ~= nil then init.zeros_(m.bias) end
    elseif cls == nn.BatchNorm2d then
      init.ones_(m.weight)
      init.zeros_(m.bias)
    elseif cls == nn.Linear then
      init.normal_(m.weight, 0, 0.01)
      init.zeros_(m.bias)
    end
  end
end
function MobileNetV3:forward(x)
  C.check_input("MobileNetV3", x)
  if x:dim() ~= 4 or x:size(1) ~= self.in_channels then
    raise("MobileNetV3: expected images of shape (N, %d, H, W), got input of shape %s", self.in_channels,
      shape_str(x))
  end
  x = self.avgpool(self.features(x))
  return self.classifier(x:flatten(1))
end

-- torchvision's _mobilenet_v3_conf: the blocks of each architecture and the classifier's width
local function conf(arch, width_mult, reduced_tail, dilated)
  local rd = reduced_tail and 2 or 1
  local dil = dilated and 2 or 1
  local function b(...)
    local t = {...}
    t[9] = width_mult
    return M.InvertedResidualConfig(table.unpack(t, 1, 9))
  end
  local setting, last
  if arch == "mobilenet_v3_large" then
    setting = {
      b(16, 3, 16, 16, false, "RE", 1, 1),
      b(16, 3, 64, 24, false, "RE", 2, 1), -- C1
      b(24, 3, 72, 24, false, "RE", 1, 1),
      b(24, 5, 72, 40, true, "RE", 2, 1), -- C2
      b(40, 5, 120, 40, true, "RE", 1, 1),
      b(40, 5, 120, 40, true, "RE", 1, 1),
      b(40, 3, 240, 80, false, "HS", 2, 1), -- C3
      b(80, 3, 200, 80, false, "HS", 1, 1),
      b(80, 3, 184, 80, false, "HS", 1, 1),
      b(80, 3, 184, 80, false, "HS", 1, 1),
      b(80, 3, 480, 112, true, "HS", 1, 1),
      b(112, 3, 672, 112, true, "HS", 1, 1),
      b(112, 5, 672, 160 // rd, true, "HS", 2, dil), -- C4
      b(160 // rd, 5, 960 // rd, 160 // rd, true, "HS", 1, dil),
      b(160 // rd, 5, 960 // rd, 160 // rd, true, "HS", 1, dil),
    }
    last = make_divisible(1280 // rd * width_mult, 8) -- C5
  else
    setting = {
      b(16, 3, 16, 16, true, "RE", 2, 1), -- C1
      b(16, 3, 72, 24, false, "RE", 2, 1), -- C2
      b(24, 3, 88, 24, false, "RE", 1, 1),
      b(24, 5, 96, 40, true, "HS", 2, 1), -- C3
      b(40, 5, 240, 40, true, "HS", 1, 1),
      b(40, 5, 240, 40, true, "HS", 1, 1),
      b(40, 5, 120, 48, true, "HS", 1, 1),
      b(48, 5, 144, 48, true, "HS", 1, 1),
      b(48, 5, 288, 96 // rd, true, "HS", 2, dil), -- C4
      b(96 // rd, 5, 576 // rd, 96 // rd, true, "HS", 1, dil),
      b(96 // rd, 5, 576 // rd, 96 // rd, true, "HS", 1, dil),
    }
    last = make_divisible(1024 // rd * width_mult, 8) -- C5
  end
  return setting, last
end

-- models.mobilenet_v3_small({num_classes = 1000, width_mult = 1.0, dropout = 0.2,
-- reduced_tail = false, dilated = false, norm_layer, block}) and mobilenet_v3_large(...)
local function builder(arch)
  return function(...)
    local a = args(arch, {"weights", "progress", "num_classes", "width_mult", "dropout", "reduced_tail", "dilated",
      "norm_layer", "block"}, ...)
    if a.weights ~= nil then
      raise("%s: pretrained weights are not downloaded; build the model, then load a checkpoint converted to " ..
        "safetensors: model:load_state_dict(torch.load(path))", arch)
    end
    local width = check_width(arch, a.width_mult == nil and 1.0 or a.width_mult)
    local setting, last = conf(arch, width, a.reduced_tail, a.dilated)
    return MobileNetV3(setting, last, {num_classes = a.num_classes, dropout = a.dropout, norm_layer = a.norm_layer,
      block = a.block})
  end
end
M.mobilenet_v3_small = builder("mobilenet_v3_small")
M.mobilenet_v3_large = builder("mobilenet_v3_large")

return M
