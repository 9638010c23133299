-- nn layers, one family a file: the loss modules, thin wrappers over the functional losses (tensh.nn.losses).
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module, F = nn.Module, nn.functional
local raise = C.raise
local is_tensor = torch.is_tensor

local A = require "tensh.args"

local M = {}

local OPTIONS = require("tensh.nn.losses").OPTIONS

local function loss_class(name, fname)
  local cls = Module:extend(name)
  M[name] = cls
  local allowed = OPTIONS[fname]
  -- Loss({reduction = "mean", weight =, ...}) or Loss(weight, {...}); tensor options are buffers.
  -- The keys are checked here, with the class's name, so a misspelt one fails at the user's line
  -- rather than at the first forward (or never, had the functional ignored it).
  function cls:init(first, opts)
    if opts ~= nil and not A.is_plain_table(opts) then A.type_error(name, 2, "options table", opts) end
    if is_tensor(first) then
      if not allowed.weight then A.type_error(name, 1, "options table", first) end
      local o = {weight = first}
      for k, v in pairs(A.check_opts(name, opts, allowed)) do
        if k == "weight" then raise("%s: 'weight' given both as an argument and as an option", name) end
        o[k] = v
      end
      opts = o
    elseif first ~= nil then
      if type(first) ~= "table" then raise("%s: expected an options table, got %s", name, type(first)) end
      if opts ~= nil then raise("%s: expected one options table, got two", name) end
      opts = A.check_opts(name, first, allowed)
    else -- Loss(nil, {...}): PyTorch's weight=None
      opts = A.check_opts(name, opts, allowed)
    end
    local o = {}
    for k, v in pairs(opts or {}) do
      if is_tensor(v) then self:register_buffer(k, v) else o[k] = v end
    end
    self.reduction = o.reduction or "mean"
    self._options = o
  end
  function cls:forward(input, target)
    local f = rawget(F, fname)
    if f == nil then
      raise("%s: nn.functional.%s is not available (tensh.nn.losses is not in this build)", name, fname)
    end
    local o = {}
    for k, v in pairs(self._options) do o[k] = v end
    for k, v in self:named_buffers({recurse = false}) do o[k] = v end
    return f(input, target, o)
  end
end
loss_class("CrossEntropyLoss", "cross_entropy")
loss_class("NLLLoss", "nll_loss")
loss_class("MSELoss", "mse_loss")
loss_class("L1Loss", "l1_loss")
loss_class("SmoothL1Loss", "smooth_l1_loss")
loss_class("BCELoss", "binary_cross_entropy")
loss_class("BCEWithLogitsLoss", "binary_cross_entropy_with_logits")
loss_class("HuberLoss", "huber_loss")
loss_class("KLDivLoss", "kl_div")

return M
