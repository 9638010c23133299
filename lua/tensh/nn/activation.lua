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

-- An activation with number parameters {name, default} (and, when `inplace`, the inplace
-- flag after them), as PyTorch's: repr "p=v, q=w[, inplace=True]", forward
-- fn(x, p, q[, inplace]); check(self) runs after the constructor reads them.
local function param_activation(name, fn, params, inplace, check)
  local cls = Module:extend(name)
  M[name] = cls
  local keys = {}
  for i, p in ipairs(params) do keys[i] = p[1] end
  if inplace then keys[#keys + 1] = "inplace" end
  function cls:init(...)
    local a = args(name, keys, ...)
    for _, p in ipairs(params) do
      local v = a[p[1]]
      self[p[1]] = A.check_number(name, p[1], v == nil and p[2] or v)
    end
    if inplace then self.inplace = a.inplace or false end
    if check then check(self) end
  end
  function cls:extra_repr()
    local parts = {}
    for i, p in ipairs(params) do parts[i] = p[1] .. "=" .. pyval(self[p[1]]) end
    return table.concat(parts, ", ") .. (self.inplace and ", inplace=True" or "")
  end
  function cls:forward(x)
    check_input(name, x)
    local v = {}
    for i, p in ipairs(params) do v[i] = self[p[1]] end
    if inplace then v[#v + 1] = self.inplace end
    return fn(x, table.unpack(v, 1, #keys))
  end
end
param_activation("Softplus", F.softplus, {{"beta", 1}, {"threshold", 20}}, false, function(self)
  if self.beta == 0 then raise("Softplus: beta must not be 0 (it divides)") end
end)
param_activation("ELU", F.elu, {{"alpha", 1.0}}, true)
param_activation("Hardtanh", F.hardtanh, {{"min_val", -1.0}, {"max_val", 1.0}}, true, function(self)
  if not (self.max_val > self.min_val) then
    raise("Hardtanh: max_val (%s) must be greater than min_val (%s)", pyval(self.max_val), pyval(self.min_val))
  end
end)

return M
