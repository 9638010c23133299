-- nn layers, one family a file: the simple layers (Identity, Linear, Flatten, Unflatten, Dropout).
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module, Parameter, F, init = nn.Module, nn.Parameter, nn.functional, nn.init
local raise, args, pyval, tuple, shape_str = C.raise, C.args, C.pyval, C.tuple, C.shape_str
local check_int, check_input, check_device = C.check_int, C.check_input, C.check_device
local factory, uniform_bias = C.factory, C.uniform_bias

local M = {}

local Identity = Module:extend("Identity")
M.Identity = Identity
function Identity:init() end -- takes and ignores any arguments, as PyTorch's
function Identity:forward(x) return x end

local Linear = Module:extend("Linear")
M.Linear = Linear
-- Linear(in_features, out_features, {bias = true, device =, dtype =}): weight (out, in), bias (out)
function Linear:init(in_features, out_features, ...)
  local a = args("Linear", {"bias", "device", "dtype"}, ...)
  self.in_features = check_int("Linear", "in_features", in_features, 0)
  self.out_features = check_int("Linear", "out_features", out_features, 0)
  local fo = factory(a)
  self.weight = Parameter(torch.empty(self.out_features, self.in_features, fo))
  if a.bias == false then self:register_parameter("bias", nil)
  else self.bias = Parameter(torch.empty(self.out_features, fo)) end
  self:reset_parameters()
end
function Linear:reset_parameters()
  init.kaiming_uniform_(self.weight, {a = math.sqrt(5)})
  uniform_bias(self.bias, self.in_features)
end
function Linear:extra_repr()
  return ("in_features=%d, out_features=%d, bias=%s"):format(self.in_features, self.out_features, pyval(self.bias ~= nil))
end
function Linear:forward(x)
  local name = ("Linear(%d -> %d)"):format(self.in_features, self.out_features)
  check_input(name, x)
  local w = self.weight
  check_device(name, x, w)
  local n = x:dim() > 0 and x.shape[-1] or nil
  if n ~= self.in_features then
    raise("%s: input has %s features (shape %s), expected %d in its last dim", name, n and tostring(n) or "no",
      shape_str(x), self.in_features)
  end
  return F.linear(x, w, self.bias)
end

local Flatten = Module:extend("Flatten")
M.Flatten = Flatten
function Flatten:init(...)
  local a = args("Flatten", {"start_dim", "end_dim"}, ...)
  self.start_dim = check_int("Flatten", "start_dim", a.start_dim or 1)
  self.end_dim = check_int("Flatten", "end_dim", a.end_dim or -1)
end
function Flatten:extra_repr() return ("start_dim=%d, end_dim=%d"):format(self.start_dim, self.end_dim) end
function Flatten:forward(x)
  check_input("Flatten", x)
  return x:flatten(self.start_dim, self.end_dim)
end

local Unflatten = Module:extend("Unflatten")
M.Unflatten = Unflatten
function Unflatten:init(dim, unflattened_size)
  self.dim = check_int("Unflatten", "dim", dim)
  unflattened_size = require("tensh.args").plain(unflattened_size)
  if type(unflattened_size) ~= "table" then
    raise("Unflatten: unflattened_size must be a list of integers, got %s", type(unflattened_size))
  end
  local s = {}
  for i, v in ipairs(unflattened_size) do s[i] = check_int("Unflatten", "unflattened_size", v) end
  self.unflattened_size = s
end
function Unflatten:extra_repr() return ("dim=%d, unflattened_size=%s"):format(self.dim, tuple(self.unflattened_size)) end
function Unflatten:forward(x)
  check_input("Unflatten", x)
  return x:unflatten(self.dim, self.unflattened_size)
end

local Dropout = Module:extend("Dropout")
M.Dropout = Dropout
function Dropout:init(...)
  local a = args("Dropout", {"p", "inplace"}, ...)
  local p = a.p == nil and 0.5 or a.p
  F._check_dropout_p("Dropout", p)
  self.p, self.inplace = p, a.inplace or false
end
function Dropout:extra_repr() return ("p=%s, inplace=%s"):format(pyval(self.p), pyval(self.inplace)) end
function Dropout:forward(x)
  check_input("Dropout", x)
  return F.dropout(x, self.p, self.training, self.inplace)
end

return M
