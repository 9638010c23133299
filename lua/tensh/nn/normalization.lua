-- nn layers, one family a file: normalisation (BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm).
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module, Parameter, F, init = nn.Module, nn.Parameter, nn.functional, nn.init
local raise, args, pyval, tuple, shape_str = C.raise, C.args, C.pyval, C.tuple, C.shape_str
local check_int, check_input, check_device = C.check_int, C.check_input, C.check_device
local factory = C.factory

local M = {}

-- BatchNorm1d/2d(num_features, {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true});
-- momentum = false is PyTorch's momentum=None (a cumulative average)
local function batchnorm_class(name, dims_ok, dims_text)
  local cls = Module:extend(name)
  M[name] = cls
  function cls:init(num_features, ...)
    local a = args(name, {"eps", "momentum", "affine", "track_running_stats", "device", "dtype"}, ...)
    self.num_features = check_int(name, "num_features", num_features, 1)
    self.eps = a.eps == nil and 1e-5 or a.eps
    if a.momentum == false then self.momentum = nil else self.momentum = a.momentum == nil and 0.1 or a.momentum end
    self.affine = a.affine == nil and true or a.affine
    self.track_running_stats = a.track_running_stats == nil and true or a.track_running_stats
    local fo = factory(a)
    local n = self.num_features
    if self.affine then
      self.weight = Parameter(torch.ones(n, fo))
      self.bias = Parameter(torch.zeros(n, fo))
    else
      self:register_parameter("weight", nil)
      self:register_parameter("bias", nil)
    end
    if self.track_running_stats then
      self:register_buffer("running_mean", torch.zeros(n, fo))
      self:register_buffer("running_var", torch.ones(n, fo))
      self:register_buffer("num_batches_tracked",
        torch.tensor(0, {dtype = "int64", device = fo.device}))
    else
      self:register_buffer("running_mean", nil)
      self:register_buffer("running_var", nil)
      self:register_buffer("num_batches_tracked", nil)
    end
  end
  function cls:reset_running_stats()
    if not self.track_running_stats then return end
    local _ <close> = torch.no_grad()
    self.running_mean:zero_()
    self.running_var:fill_(1)
    self.num_batches_tracked:zero_()
  end
  function cls:reset_parameters()
    self:reset_running_stats()
    if self.affine then
      init.ones_(self.weight)
      init.zeros_(self.bias)
    end
  end
  function cls:extra_repr()
    return ("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s"):format(self.num_features, pyval(self.eps),
      pyval(self.momentum), pyval(self.affine), pyval(self.track_running_stats))
  end
  function cls:forward(x)
    local short = ("%s(%d)"):format(name, self.num_features)
    check_input(short, x)
    if not dims_ok[x:dim()] then raise("%s: expected %s input (got %dD input)", short, dims_text, x:dim()) end
    if x.shape[1] ~= self.num_features then
      raise("%s: input has %d channels (shape %s), expected %d", short, x.shape[1], shape_str(x), self.num_features)
    end
    check_device(short, x, self.weight or self.running_mean)
    local factor = self.momentum or 0
    if self.training and self.track_running_stats then
      local nbt = self.num_batches_tracked
      if nbt ~= nil then
        do
          local _ <close> = torch.no_grad()
          nbt:add_(1)
        end
        if self.momentum == nil then factor = 1 / nbt:item() end
      end
    end
    local rm, rv = self.running_mean, self.running_var
    local bn_training = self.training or (rm == nil and rv == nil)
    if self.training and not self.track_running_stats then rm, rv = nil, nil end
    return F.batch_norm(x, rm, rv, self.weight, self.bias, bn_training, factor, self.eps)
  end
end
batchnorm_class("BatchNorm1d", {[2] = true, [3] = true}, "2D or 3D")
batchnorm_class("BatchNorm2d", {[4] = true}, "4D")

local LayerNorm = Module:extend("LayerNorm")
M.LayerNorm = LayerNorm
-- LayerNorm(normalized_shape, {eps = 1e-5, elementwise_affine = true, bias = true})
function LayerNorm:init(normalized_shape, ...)
  local a = args("LayerNorm", {"eps", "elementwise_affine", "bias", "device", "dtype"}, ...)
  local shape = type(normalized_shape) == "number" and {normalized_shape} or require("tensh.args").plain(normalized_shape)
  if type(shape) ~= "table" or #shape == 0 then
    raise("LayerNorm: normalized_shape must be an integer or a non-empty list of integers")
  end
  -- the weight has normalized_shape's dims, and tensors have at most 8 (TS_MAX_DIMS)
  if #shape > 8 then
    raise("LayerNorm: normalized_shape has %d dims; tensors have at most 8", #shape)
  end
  local s = {}
  for i, v in ipairs(shape) do s[i] = check_int("LayerNorm", "normalized_shape", v, 0) end
  self.normalized_shape = s
  self.eps = a.eps == nil and 1e-5 or a.eps
  self.elementwise_affine = a.elementwise_affine == nil and true or a.elementwise_affine
  local fo = factory(a)
  if self.elementwise_affine then
    self.weight = Parameter(torch.ones(s, fo))
    if a.bias == false then self:register_parameter("bias", nil)
    else self.bias = Parameter(torch.zeros(s, fo)) end
  else
    self:register_parameter("weight", nil)
    self:register_parameter("bias", nil)
  end
end
function LayerNorm:reset_parameters()
  if self.weight ~= nil then init.ones_(self.weight) end
  if self.bias ~= nil then init.zeros_(self.bias) end
end
function LayerNorm:extra_repr()
  return ("%s, eps=%s, elementwise_affine=%s"):format(tuple(self.normalized_shape), pyval(self.eps),
    pyval(self.elementwise_affine))
end
function LayerNorm:forward(x)
  local s = self.normalized_shape
  local short = ("LayerNorm(%s)"):format(tuple(s))
  check_input(short, x)
  local ok = x:dim() >= #s
  for i = 1, #s do
    if not ok then break end
    ok = x.shape[x:dim() - #s + i - 1] == s[i]
  end
  if not ok then
    local star = {"*"}
    for i, v in ipairs(s) do star[i + 1] = v end
    raise("%s: expected input with shape (%s), but got input of shape %s", short, table.concat(star, ", "), shape_str(x))
  end
  check_device(short, x, self.weight)
  return F.layer_norm(x, s, self.weight, self.bias, self.eps)
end

-- GroupNorm(num_groups, num_channels, {eps = 1e-5, affine = true}): per sample, the
-- channels in num_groups groups normalised together, then a per-channel affine
local GroupNorm = Module:extend("GroupNorm")
M.GroupNorm = GroupNorm
function GroupNorm:init(num_groups, num_channels, ...)
  local a = args("GroupNorm", {"eps", "affine", "device", "dtype"}, ...)
  self.num_groups = check_int("GroupNorm", "num_groups", num_groups, 1)
  self.num_channels = check_int("GroupNorm", "num_channels", num_channels, 0)
  if self.num_channels % self.num_groups ~= 0 then
    raise("GroupNorm: num_channels (%d) must be divisible by num_groups (%d)", self.num_channels, self.num_groups)
  end
  self.eps = a.eps == nil and 1e-5 or a.eps
  self.affine = a.affine == nil and true or a.affine
  local fo = factory(a)
  if self.affine then
    self.weight = Parameter(torch.ones(self.num_channels, fo))
    self.bias = Parameter(torch.zeros(self.num_channels, fo))
  else
    self:register_parameter("weight", nil)
    self:register_parameter("bias", nil)
  end
end
function GroupNorm:reset_parameters()
  if self.affine then
    init.ones_(self.weight)
    init.zeros_(self.bias)
  end
end
function GroupNorm:extra_repr()
  return ("%d, %d, eps=%s, affine=%s"):format(self.num_groups, self.num_channels, pyval(self.eps), pyval(self.affine))
end
function GroupNorm:forward(x)
  local short = ("GroupNorm(%d, %d)"):format(self.num_groups, self.num_channels)
  check_input(short, x)
  if x:dim() < 2 or x.shape[1] ~= self.num_channels then
    raise("%s: expected an input (N, %d, *), got shape %s", short, self.num_channels, shape_str(x))
  end
  check_device(short, x, self.weight)
  return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end

return M
