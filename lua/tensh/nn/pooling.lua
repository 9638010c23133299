-- nn layers, one family a file: pooling (MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d).
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module, F = nn.Module, nn.functional
local raise, args, pyval = C.raise, C.args, C.pyval
local ntuple, check_input = C.ntuple, C.check_input

local M = {}

-- MaxPool1d and MaxPool2d(kernel_size, {stride, padding, dilation, return_indices, ceil_mode})
local function maxpool_class(name, f)
  local cls = Module:extend(name)
  M[name] = cls
  function cls:init(kernel_size, ...)
    local a = args(name, {"stride", "padding", "dilation", "return_indices", "ceil_mode"}, ...)
    if kernel_size == nil then raise("%s: kernel_size is required", name) end
    self.kernel_size = kernel_size
    self.stride = a.stride or kernel_size
    self.padding, self.dilation = a.padding or 0, a.dilation or 1
    self.return_indices, self.ceil_mode = a.return_indices or false, a.ceil_mode or false
  end
  function cls:extra_repr()
    return ("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s"):format(pyval(self.kernel_size),
      pyval(self.stride), pyval(self.padding), pyval(self.dilation), pyval(self.ceil_mode))
  end
  function cls:forward(x)
    check_input(name, x)
    return f(x, self.kernel_size, {stride = self.stride, padding = self.padding, dilation = self.dilation,
      ceil_mode = self.ceil_mode, return_indices = self.return_indices})
  end
end
maxpool_class("MaxPool1d", F.max_pool1d)
maxpool_class("MaxPool2d", F.max_pool2d)

local AvgPool2d = Module:extend("AvgPool2d")
M.AvgPool2d = AvgPool2d
function AvgPool2d:init(kernel_size, ...)
  local a = args("AvgPool2d", {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"}, ...)
  if kernel_size == nil then raise("AvgPool2d: kernel_size is required") end
  if a.divisor_override ~= nil then raise("AvgPool2d: divisor_override is not supported") end
  self.kernel_size = kernel_size
  self.stride = a.stride or kernel_size
  self.padding, self.ceil_mode = a.padding or 0, a.ceil_mode or false
  self.count_include_pad = a.count_include_pad == nil and true or a.count_include_pad
end
function AvgPool2d:extra_repr()
  return ("kernel_size=%s, stride=%s, padding=%s"):format(pyval(self.kernel_size), pyval(self.stride), pyval(self.padding))
end
function AvgPool2d:forward(x)
  check_input("AvgPool2d", x)
  return F.avg_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
    count_include_pad = self.count_include_pad})
end

local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
M.AdaptiveAvgPool2d = AdaptiveAvgPool2d
function AdaptiveAvgPool2d:init(output_size)
  if output_size == nil then raise("AdaptiveAvgPool2d: output_size is required") end
  ntuple("AdaptiveAvgPool2d", "output_size", output_size, 2, 0)
  self.output_size = output_size
end
function AdaptiveAvgPool2d:extra_repr() return "output_size=" .. pyval(self.output_size) end
function AdaptiveAvgPool2d:forward(x)
  check_input("AdaptiveAvgPool2d", x)
  return F.adaptive_avg_pool2d(x, self.output_size)
end

-- AvgPool1d(kernel_size, {stride, padding, ceil_mode, count_include_pad}): its sizes kept
-- as 1-tuples, as PyTorch's (kernel_size=(3,) in its repr)
local AvgPool1d = Module:extend("AvgPool1d")
M.AvgPool1d = AvgPool1d
function AvgPool1d:init(kernel_size, ...)
  local a = args("AvgPool1d", {"stride", "padding", "ceil_mode", "count_include_pad"}, ...)
  if kernel_size == nil then raise("AvgPool1d: kernel_size is required") end
  local function one(v) return type(v) == "table" and v or {v} end
  self.kernel_size = one(kernel_size)
  self.stride = one(a.stride or kernel_size)
  self.padding, self.ceil_mode = one(a.padding or 0), a.ceil_mode or false
  self.count_include_pad = a.count_include_pad == nil and true or a.count_include_pad
end
function AvgPool1d:extra_repr()
  return ("kernel_size=%s, stride=%s, padding=%s"):format(pyval(self.kernel_size), pyval(self.stride), pyval(self.padding))
end
function AvgPool1d:forward(x)
  check_input("AvgPool1d", x)
  return F.avg_pool1d(x, self.kernel_size, {stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
    count_include_pad = self.count_include_pad})
end

-- AdaptiveMaxPool2d(output_size, {return_indices = false})
local AdaptiveMaxPool2d = Module:extend("AdaptiveMaxPool2d")
M.AdaptiveMaxPool2d = AdaptiveMaxPool2d
function AdaptiveMaxPool2d:init(output_size, ...)
  local a = args("AdaptiveMaxPool2d", {"return_indices"}, ...)
  if output_size == nil then raise("AdaptiveMaxPool2d: output_size is required") end
  ntuple("AdaptiveMaxPool2d", "output_size", output_size, 2, 0)
  self.output_size, self.return_indices = output_size, a.return_indices or false
end
function AdaptiveMaxPool2d:extra_repr() return "output_size=" .. pyval(self.output_size) end
function AdaptiveMaxPool2d:forward(x)
  check_input("AdaptiveMaxPool2d", x)
  return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)
end

return M
