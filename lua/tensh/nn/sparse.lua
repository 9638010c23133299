-- nn layers, one family a file: lookup tables (Embedding).
-- Constructors, parameter names, shapes, initialisation and extra_repr as
-- PyTorch's; forward through nn.functional. nn.lua loads this file after
-- defining Module and Parameter, and copies the classes it returns into nn.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local A = require "tensh.args"
local Module, Parameter, F, init = nn.Module, nn.Parameter, nn.functional, nn.init
local raise, args = C.raise, C.args
local check_int, check_input, check_device = C.check_int, C.check_input, C.check_device
local factory = C.factory
local is_tensor = torch.is_tensor

local M = {}

local Embedding = Module:extend("Embedding")
M.Embedding = Embedding
-- Embedding(num_embeddings, embedding_dim, {padding_idx =, _weight =, _freeze =}): weight (num, dim) ~ N(0, 1)
function Embedding:init(num_embeddings, embedding_dim, ...)
  local a = args("Embedding", {"padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse", "_weight",
    "_freeze", "device", "dtype"}, ...)
  self.num_embeddings = check_int("Embedding", "num_embeddings", num_embeddings, 0)
  self.embedding_dim = check_int("Embedding", "embedding_dim", embedding_dim, 0)
  if a.max_norm ~= nil then raise("Embedding: max_norm is not supported") end
  if a.scale_grad_by_freq then raise("Embedding: scale_grad_by_freq is not supported") end
  if a.sparse then raise("Embedding: sparse gradients are not supported") end
  local pad = a.padding_idx
  if pad ~= nil then
    pad = check_int("Embedding", "padding_idx", pad)
    if pad >= self.num_embeddings or pad < -self.num_embeddings then
      raise("Embedding: padding_idx must be within num_embeddings (got %d for %d)", pad, self.num_embeddings)
    end
    if pad < 0 then pad = pad + self.num_embeddings end
  end
  self.padding_idx = pad
  self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = nil, 2.0, false, false
  if a._weight ~= nil then
    local w = a._weight
    if not is_tensor(w) or w:dim() ~= 2 or w.shape[0] ~= self.num_embeddings or w.shape[1] ~= self.embedding_dim then
      raise("Embedding: _weight must be a tensor of shape (%d, %d)", self.num_embeddings, self.embedding_dim)
    end
    self.weight = Parameter(w, not a._freeze)
  else
    self.weight = Parameter(torch.empty(self.num_embeddings, self.embedding_dim, factory(a)))
    self:reset_parameters()
  end
end
function Embedding:reset_parameters()
  init.normal_(self.weight)
  if self.padding_idx ~= nil then
    local _ <close> = torch.no_grad()
    self.weight:select(0, self.padding_idx):zero_()
  end
end
function Embedding:extra_repr()
  local s = ("%d, %d"):format(self.num_embeddings, self.embedding_dim)
  if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
  return s
end
function Embedding:forward(idx)
  local short = ("Embedding(%d, %d)"):format(self.num_embeddings, self.embedding_dim)
  check_input(short, idx)
  if idx.dtype ~= torch.int64 and idx.dtype ~= torch.int32 then
    raise("%s: expected an integer index tensor (int64 or int32), got %s; convert with idx:long()", short, idx.dtype)
  end
  check_device(short, idx, self.weight)
  return F.embedding(idx, self.weight, self.padding_idx)
end
-- nn.Embedding.from_pretrained(weight, {freeze = true, padding_idx =})
function Embedding.from_pretrained(embeddings, opts)
  if not is_tensor(embeddings) or embeddings:dim() ~= 2 then
    raise("Embedding.from_pretrained: embeddings must be a 2-D tensor")
  end
  local fn = "Embedding.from_pretrained"
  opts = A.check_opts(fn, opts, {freeze = true, padding_idx = true})
  local freeze = opts.freeze
  if freeze == nil then freeze = true end
  A.check_boolean(fn, "freeze", freeze)
  return Embedding(embeddings.shape[0], embeddings.shape[1],
    {_weight = embeddings, _freeze = freeze, padding_idx = opts.padding_idx})
end

return M
