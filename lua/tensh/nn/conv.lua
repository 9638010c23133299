-- nn layers, one family a file: the convolutions (Conv1d, Conv2d).
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module, Parameter, F, init = nn.Module, nn.Parameter, nn.functional, nn.init
local raise, args, pyval, tuple, shape_str = C.raise, C.args, C.pyval, C.tuple, C.shape_str
local check_int, ntuple, check_input, check_device = C.check_int, C.ntuple, C.check_input, C.check_device
local factory, uniform_bias = C.factory, C.uniform_bias

local M = {}

local function conv_class(name, nd)
  local cls = Module:extend(name)
  M[name] = cls
  local fconv = nd == 1 and F.conv1d or F.conv2d
  -- Conv2d(in, out, kernel_size, {stride, padding, dilation, groups, bias, padding_mode, device, dtype})
  function cls:init(in_channels, out_channels, kernel_size, ...)
    local a = args(name, {"stride", "padding", "dilation", "groups", "bias", "padding_mode", "device", "dtype"}, ...)
    self.in_channels = check_int(name, "in_channels", in_channels, 1)
    self.out_channels = check_int(name, "out_channels", out_channels, 1)
    if kernel_size == nil then raise("%s: kernel_size is required", name) end
    self.kernel_size = ntuple(name, "kernel_size", kernel_size, nd, 1)
    self.stride = ntuple(name, "stride", a.stride or 1, nd, 1)
    self.dilation = ntuple(name, "dilation", a.dilation or 1, nd, 1)
    local padding = a.padding or 0
    if type(padding) == "string" then
      if padding ~= "same" and padding ~= "valid" then
        raise("%s: invalid padding string '%s', should be one of {'valid', 'same'}", name, padding)
      end
      if padding == "same" then
        for d = 1, nd do
          if self.stride[d] ~= 1 then raise("%s: padding='same' is not supported for strided convolutions", name) end
        end
      end
      self.padding = padding
    else
      self.padding = ntuple(name, "padding", padding, nd, 0)
    end
    self.groups = check_int(name, "groups", a.groups or 1, 1)
    if self.in_channels % self.groups ~= 0 then raise("%s: in_channels must be divisible by groups", name) end
    if self.out_channels % self.groups ~= 0 then raise("%s: out_channels must be divisible by groups", name) end
    self.padding_mode = a.padding_mode or "zeros"
    if self.padding_mode ~= "zeros" then
      raise("%s: padding_mode '%s' is not supported (only 'zeros')", name, tostring(self.padding_mode))
    end
    local zeros = {}
    for d = 1, nd do zeros[d] = 0 end
    self.output_padding = zeros
    local fo = factory(a)
    local wshape = {self.out_channels, self.in_channels // self.groups}
    for d = 1, nd do wshape[#wshape + 1] = self.kernel_size[d] end
    self.weight = Parameter(torch.empty(wshape, fo))
    if a.bias == false then self:register_parameter("bias", nil)
    else self.bias = Parameter(torch.empty(self.out_channels, fo)) end
    self:reset_parameters()
  end
  function cls:reset_parameters()
    init.kaiming_uniform_(self.weight, {a = math.sqrt(5)})
    if self.bias ~= nil then
      local fan_in = init._calculate_fan_in_and_fan_out(self.weight)
      uniform_bias(self.bias, fan_in)
    end
  end
  local function all_eq(list, v)
    if type(list) ~= "table" then return false end
    for _, x in ipairs(list) do if x ~= v then return false end end
    return true
  end
  function cls:extra_repr()
    local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels,
      tuple(self.kernel_size), tuple(self.stride))
    if not all_eq(self.padding, 0) then s = s .. ", padding=" .. pyval(self.padding) end
    if not all_eq(self.dilation, 1) then s = s .. ", dilation=" .. tuple(self.dilation) end
    if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
    if self.bias == nil then s = s .. ", bias=False" end
    return s
  end
  function cls:forward(x)
    local short = ("%s(%d -> %d, kernel_size=%s)"):format(name, self.in_channels, self.out_channels, tuple(self.kernel_size))
    check_input(short, x)
    if x:dim() ~= nd + 1 and x:dim() ~= nd + 2 then
      local dims = nd == 1 and "(N, C, L) or (C, L)" or "(N, C, H, W) or (C, H, W)"
      raise("%s: expected a %d-D or %d-D input %s, got shape %s", short, nd + 2, nd + 1, dims, shape_str(x))
    end
    local c = x.shape[-(nd + 1)]
    if c ~= self.in_channels then
      raise("%s: input has %d channels (shape %s), expected %d", short, c, shape_str(x), self.in_channels)
    end
    check_device(short, x, self.weight)
    return fconv(x, self.weight, self.bias,
      {stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups})
  end
end
conv_class("Conv1d", 1)
conv_class("Conv2d", 2)

return M
