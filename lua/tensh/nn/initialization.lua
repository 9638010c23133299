-- nn.init: PyTorch's torch.nn.init, filling tensors in place under no_grad
-- (so parameters that require grad can be initialised). Arguments
-- positionally or as options: kaiming_uniform_(w, {a = math.sqrt(5)}).
local torch = torch
local C = require "tensh.nn.common"
local A = require "tensh.args"
local raise, args = C.raise, C.args

local init = {}

local function check(fn, t)
  return A.check_tensor(fn, 1, t)
end

-- the recommended gain for a nonlinearity (PyTorch's calculate_gain)
function init.calculate_gain(nonlinearity, param)
  local linear = {linear = 1, conv1d = 1, conv2d = 1, conv3d = 1, conv_transpose1d = 1, conv_transpose2d = 1,
    conv_transpose3d = 1, sigmoid = 1}
  if linear[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "leaky_relu" then
    local slope = param
    if slope == nil then slope = 0.01 end
    if type(slope) ~= "number" then raise("calculate_gain: negative_slope %s is not a valid number", tostring(slope)) end
    return math.sqrt(2 / (1 + slope * slope))
  end
  if nonlinearity == "selu" then return 3 / 4 end
  raise("calculate_gain: unsupported nonlinearity %s", tostring(nonlinearity))
end

-- (fan_in, fan_out): size(1) and size(0) times the receptive field
function init._calculate_fan_in_and_fan_out(t)
  check("fan_in_and_fan_out", t)
  if t:dim() < 2 then
    raise("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (got shape %s)",
      C.shape_str(t))
  end
  local rf = 1
  for d = 2, t:dim() - 1 do rf = rf * t.shape[d] end
  return t.shape[1] * rf, t.shape[0] * rf
end

local function fan(fn, t, mode)
  local fan_in, fan_out = init._calculate_fan_in_and_fan_out(t)
  if mode == nil or mode == "fan_in" then return fan_in end
  if mode == "fan_out" then return fan_out end
  raise("%s: mode %s not supported, please use one of fan_in, fan_out", fn, tostring(mode))
end

local function fill(t, f)
  local _ <close> = torch.no_grad()
  f(t)
  return t
end

function init.uniform_(t, ...)
  check("uniform_", t)
  local a = args("uniform_", {"a", "b"}, ...)
  local lo, hi = A.check_number("uniform_", "a", a.a or 0), A.check_number("uniform_", "b", a.b or 1)
  return fill(t, function(x) x:uniform_(lo, hi) end)
end

function init.normal_(t, ...)
  check("normal_", t)
  local a = args("normal_", {"mean", "std"}, ...)
  local mean, std = A.check_number("normal_", "mean", a.mean or 0), A.check_number("normal_", "std", a.std or 1)
  return fill(t, function(x) x:normal_(mean, std) end)
end

function init.constant_(t, val)
  check("constant_", t)
  if type(val) ~= "number" and type(val) ~= "boolean" then raise("constant_: val must be a number, got %s", type(val)) end
  return fill(t, function(x) x:fill_(val) end)
end
function init.zeros_(t) check("zeros_", t) return fill(t, function(x) x:zero_() end) end
function init.ones_(t) check("ones_", t) return fill(t, function(x) x:fill_(1) end) end

-- gain: argument 2, a number
local function check_gain(fn, gain)
  if gain ~= nil and type(gain) ~= "number" then A.type_error(fn, 2, "number (gain)", gain) end
end

-- Glorot's std for t, gain * sqrt(2 / (fan_in + fan_out)), with the
-- arguments of either xavier_ function checked in its name
local function xavier_std(fn, t, ...)
  check(fn, t)
  local a = args(fn, {"gain"}, ...)
  check_gain(fn, a.gain)
  local fan_in, fan_out = init._calculate_fan_in_and_fan_out(t)
  return (a.gain or 1) * math.sqrt(2 / (fan_in + fan_out))
end

function init.xavier_uniform_(t, ...)
  local bound = math.sqrt(3) * xavier_std("xavier_uniform_", t, ...)
  return fill(t, function(x) x:uniform_(-bound, bound) end)
end

function init.xavier_normal_(t, ...)
  local std = xavier_std("xavier_normal_", t, ...)
  return fill(t, function(x) x:normal_(0, std) end)
end

-- std = gain / sqrt(fan); a is the negative slope of the leaky_relu that follows
local function kaiming_std(fn, t, a)
  local f = fan(fn, t, a.mode)
  local gain = init.calculate_gain(a.nonlinearity or "leaky_relu", a.a or 0)
  if f == 0 then return nil end
  return gain / math.sqrt(f)
end

function init.kaiming_uniform_(t, ...)
  check("kaiming_uniform_", t)
  local a = args("kaiming_uniform_", {"a", "mode", "nonlinearity"}, ...)
  local std = kaiming_std("kaiming_uniform_", t, a)
  if not std then return t end -- an empty tensor: nothing to fill (PyTorch warns)
  local bound = math.sqrt(3) * std
  return fill(t, function(x) x:uniform_(-bound, bound) end)
end

function init.kaiming_normal_(t, ...)
  check("kaiming_normal_", t)
  local a = args("kaiming_normal_", {"a", "mode", "nonlinearity"}, ...)
  local std = kaiming_std("kaiming_normal_", t, a)
  if not std then return t end
  return fill(t, function(x) x:normal_(0, std) end)
end

return init
