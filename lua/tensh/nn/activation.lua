-- nn layers, one family a file: the activations (ReLU, GELU, ELU, Softplus, Softmax, ...), parameterless layers over nn.functional.
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module, F = nn.Module, nn.functional
local raise, args, pyval = C.raise, C.args, C.pyval
local check_int, check_input = C.check_int, C.check_input
local A = require "tensh.args"

local M = {}

local function inplace_repr(self) return self.inplace and "inplace=True" or "" end

-- an activation whose only option is inplace; `repr` says whether PyTorch prints it
local function inplace_activation(name, fn, repr)
  local cls = Module:extend(name)
  M[name] = cls
  function cls:init(...)
    local a = args(name, {"inplace"}, ...)
    self.inplace = a.inplace or false
  end
  if repr then cls.extra_repr = inplace_repr end
  function cls:forward(x)
    check_input(name, x)
    return fn(x, self.inplace)
  end
end
inplace_activation("ReLU", F.relu, true)
inplace_activation("ReLU6", F.relu6, true)
inplace_activation("SiLU", F.silu, true)
inplace_activation("Hardswish", F.hardswish, false)
inplace_activation("Hardsigmoid", F.hardsigmoid, false)
inplace_activation("Mish", F.mish, true)

local function plain_activation(name, fn)
  local cls = Module:extend(name)
  M[name] = cls
  function cls:forward(x)
    check_input(name, x)
    return fn(x)
  end
end
plain_activation("Sigmoid", F.sigmoid)
plain_activation("Tanh", F.tanh)
plain_activation("LogSigmoid", F.logsigmoid)

local LeakyReLU = Module:extend("LeakyReLU")
M.LeakyReLU = LeakyReLU
function LeakyReLU:init(...)
  local a = args("LeakyReLU", {"negative_slope", "inplace"}, ...)
  self.negative_slope = a.negative_slope == nil and 0.01 or a.negative_slope
  if type(self.negative_slope) ~= "number" then
    raise("LeakyReLU: negative_slope must be a number, got %s", type(self.negative_slope))
  end
  self.inplace = a.inplace or false
end
function LeakyReLU:extra_repr()
  return ("negative_slope=%s%s"):format(pyval(self.negative_slope), self.inplace and ", inplace=True" or "")
end
function LeakyReLU:forward(x)
  check_input("LeakyReLU", x)
  return F.leaky_relu(x, self.negative_slope, self.inplace)
end

local GELU = Module:extend("GELU")
M.GELU = GELU
function GELU:init(...)
  local a = args("GELU", {"approximate"}, ...)
  local ap = a.approximate or "none"
  if ap ~= "none" and ap ~= "tanh" then raise("GELU: approximate must be 'none' or 'tanh', got '%s'", tostring(ap)) end
  self.approximate = ap
end
function GELU:extra_repr() return ("approximate='%s'"):format(self.approximate) end
function GELU:forward(x)
  check_input("GELU", x)
  return F.gelu(x, self.approximate)
end

local function softmax_class(name, fn)
  local cls = Module:extend(name)
  M[name] = cls
  function cls:init(...)
    local a = args(name, {"dim"}, ...)
    if a.dim ~= nil then check_int(name, "dim", a.dim) end
    self.dim = a.dim
  end
  function cls:extra_repr() return "dim=" .. pyval(self.dim) end
  function cls:forward(x)
    check_input(name, x)
    return fn(x, self.dim)
  end
end
softmax_class("Softmax", F.softmax)
softmax_class("LogSoftmax", F.log_softmax)
softmax_class("Softmin", F.softmin)

-- Softplus(beta = 1, threshold = 20)
local Softplus = Module:extend("Softplus")
M.Softplus = Softplus
function Softplus:init(...)
  local a = args("Softplus", {"beta", "threshold"}, ...)
  self.beta = A.check_number("Softplus", "beta", a.beta == nil and 1 or a.beta)
  self.threshold = A.check_number("Softplus", "threshold", a.threshold == nil and 20 or a.threshold)
  if self.beta == 0 then raise("Softplus: beta must not be 0 (it divides)") end
end
function Softplus:extra_repr() return ("beta=%s, threshold=%s"):format(pyval(self.beta), pyval(self.threshold)) end
function Softplus:forward(x)
  check_input("Softplus", x)
  return F.softplus(x, self.beta, self.threshold)
end

-- ELU(alpha = 1.0, inplace = false)
local ELU = Module:extend("ELU")
M.ELU = ELU
function ELU:init(...)
  local a = args("ELU", {"alpha", "inplace"}, ...)
  self.alpha = A.check_number("ELU", "alpha", a.alpha == nil and 1.0 or a.alpha)
  self.inplace = a.inplace or false
end
function ELU:extra_repr() return ("alpha=%s%s"):format(pyval(self.alpha), self.inplace and ", inplace=True" or "") end
function ELU:forward(x)
  check_input("ELU", x)
  return F.elu(x, self.alpha, self.inplace)
end

-- Hardtanh(min_val = -1.0, max_val = 1.0, inplace = false); max_val must exceed min_val
local Hardtanh = Module:extend("Hardtanh")
M.Hardtanh = Hardtanh
function Hardtanh:init(...)
  local a = args("Hardtanh", {"min_val", "max_val", "inplace"}, ...)
  self.min_val = A.check_number("Hardtanh", "min_val", a.min_val == nil and -1.0 or a.min_val)
  self.max_val = A.check_number("Hardtanh", "max_val", a.max_val == nil and 1.0 or a.max_val)
  if not (self.max_val > self.min_val) then
    raise("Hardtanh: max_val (%s) must be greater than min_val (%s)", pyval(self.max_val), pyval(self.min_val))
  end
  self.inplace = a.inplace or false
end
function Hardtanh:extra_repr()
  return ("min_val=%s, max_val=%s%s"):format(pyval(self.min_val), pyval(self.max_val),
    self.inplace and ", inplace=True" or "")
end
function Hardtanh:forward(x)
  check_input("Hardtanh", x)
  return F.hardtanh(x, self.min_val, self.max_val, self.inplace)
end

return M
