-- nn layers, one family a file: the Transformer (TransformerEncoderLayer,
-- TransformerDecoderLayer, TransformerEncoder, TransformerDecoder,
-- Transformer) as PyTorch 1.13 builds them: the same submodules in the same
-- order (so state_dict keys match), the same defaults, post- or pre-norm
-- (norm_first). Attention runs through nn.MultiheadAttention, whose
-- need_weights = false path is the fused attention op.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local A = require "tensh.args"
local Module, F, init = nn.Module, nn.functional, nn.init
local raise, args, shape_str = C.raise, C.args, C.shape_str
local check_int = C.check_int
local is_tensor = torch.is_tensor

local M = {}

-- a deep copy of module m: new parameters and buffers with the same values,
-- the same classes and attributes (PyTorch's copy.deepcopy in _get_clones);
-- tensors shared inside m stay shared inside the copy
local function clone_module(m, memo)
  if memo[m] then return memo[m] end
  local function tensor_copy(t, param)
    if memo[t] then return memo[t] end
    local c = t:detach():clone()
    if param then c = nn.Parameter(c, t.requires_grad) end
    memo[t] = c
    return c
  end
  local function od_copy(od, f)
    local n = {keys = {}, vals = {}, pos = {}}
    for i, k in ipairs(od.keys) do
      n.keys[i], n.pos[k] = k, i
      local v = od.vals[k]
      if v ~= nil then n.vals[k] = f(v) end
    end
    return n
  end
  local c = {}
  memo[m] = c
  for k, v in pairs(m) do c[k] = v end -- raw fields; the registries are replaced below
  c._parameters = od_copy(rawget(m, "_parameters"), function(p) return tensor_copy(p, true) end)
  c._buffers = od_copy(rawget(m, "_buffers"), function(b) return tensor_copy(b, false) end)
  c._modules = od_copy(rawget(m, "_modules"), function(s) return clone_module(s, memo) end)
  local attrs = {}
  for k, v in pairs(rawget(m, "_attrs")) do attrs[k] = v end
  c._attrs = attrs
  local np = {}
  for k, v in pairs(rawget(m, "_non_persistent") or {}) do np[k] = v end
  c._non_persistent = np
  return setmetatable(c, getmetatable(m))
end

local function clones(fn, layer, n)
  if not nn.is_module(layer) then raise("%s: expected a layer module to copy, got %s", fn, A.typename(layer)) end
  n = check_int(fn, "num_layers", n, 0)
  local list = {}
  for i = 1, n do list[i] = clone_module(layer, {}) end
  return nn.ModuleList(list)
end

-- "relu", "gelu", or a function / module applied as it is
local function activation_of(fn, act)
  if act == nil or act == "relu" then return F.relu end
  if act == "gelu" then return F.gelu end
  if type(act) == "string" then raise("%s: activation should be relu/gelu, not %s", fn, act) end
  if type(act) ~= "function" and not nn.is_module(act) then
    raise("%s: activation must be \"relu\", \"gelu\", a function or a module, got %s", fn, A.typename(act))
  end
  return act
end

local LAYER_KEYS = {"dim_feedforward", "dropout", "activation", "layer_norm_eps", "batch_first", "norm_first",
  "bias", "device", "dtype"}

-- a layer's modules in PyTorch's registration order (its state_dict order): the
-- attention blocks, linear1, dropout, linear2, norm_first, the norms, their
-- dropouts, activation
local function layer_init(self, fn, attns, n_norms, d_model, nhead, ...)
  local a = args(fn, LAYER_KEYS, ...)
  d_model = check_int(fn, "d_model", d_model, 1)
  nhead = check_int(fn, "nhead", nhead, 1)
  local fo = C.factory(a)
  local p = a.dropout == nil and 0.1 or a.dropout
  F._check_dropout_p(fn, p)
  local bias = a.bias ~= false
  local o = {dropout = p, bias = bias, batch_first = a.batch_first == true, device = fo.device, dtype = fo.dtype}
  for _, name in ipairs(attns) do self[name] = nn.MultiheadAttention(d_model, nhead, o) end
  local ff = a.dim_feedforward == nil and 2048 or check_int(fn, "dim_feedforward", a.dim_feedforward, 1)
  local eps = a.layer_norm_eps == nil and 1e-5 or a.layer_norm_eps
  local lin = {bias = bias, device = fo.device, dtype = fo.dtype}
  self.linear1 = nn.Linear(d_model, ff, lin)
  self.dropout = nn.Dropout(p)
  self.linear2 = nn.Linear(ff, d_model, lin)
  self.norm_first = a.norm_first == true
  for i = 1, n_norms do
    self["norm" .. i] = nn.LayerNorm(d_model, {eps = eps, bias = bias, device = fo.device, dtype = fo.dtype})
  end
  for i = 1, n_norms do self["dropout" .. i] = nn.Dropout(p) end
  self.activation = activation_of(fn, a.activation)
end

local function ff_block(self, x, last_dropout)
  return last_dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

local function check_input(fn, x, what)
  if not is_tensor(x) then raise("%s: expected %s to be a tensor, got %s", fn, what, A.typename(x)) end
end

local TransformerEncoderLayer = Module:extend("TransformerEncoderLayer")
M.TransformerEncoderLayer = TransformerEncoderLayer

-- TransformerEncoderLayer(d_model, nhead, {dim_feedforward = 2048, dropout = 0.1, activation = "relu",
-- layer_norm_eps = 1e-5, batch_first = false, norm_first = false, bias = true, device =, dtype =})
function TransformerEncoderLayer:init(d_model, nhead, ...)
  layer_init(self, "TransformerEncoderLayer", {"self_attn"}, 2, d_model, nhead, ...)
end

local function sa_block(attn, x, mask, kpm, drop, is_causal)
  local y = attn(x, x, x, {attn_mask = mask, key_padding_mask = kpm, need_weights = false, is_causal = is_causal})
  return drop(y)
end

-- forward(src, src_mask, src_key_padding_mask, {is_causal =}) (positional or as options)
function TransformerEncoderLayer:forward(src, ...)
  local fn = "TransformerEncoderLayer"
  local a = args(fn, {"src_mask", "src_key_padding_mask", "is_causal"}, ...)
  check_input(fn, src, "src")
  local x = src
  local mask, kpm, causal = a.src_mask, a.src_key_padding_mask, a.is_causal == true and a.src_mask == nil
  if self.norm_first then
    x = x + sa_block(self.self_attn, self.norm1(x), mask, kpm, self.dropout1, causal)
    x = x + ff_block(self, self.norm2(x), self.dropout2)
  else
    x = self.norm1(x + sa_block(self.self_attn, x, mask, kpm, self.dropout1, causal))
    x = self.norm2(x + ff_block(self, x, self.dropout2))
  end
  return x
end

local TransformerDecoderLayer = Module:extend("TransformerDecoderLayer")
M.TransformerDecoderLayer = TransformerDecoderLayer

-- TransformerDecoderLayer(d_model, nhead, {dim_feedforward = 2048, dropout = 0.1, activation = "relu",
-- layer_norm_eps = 1e-5, batch_first = false, norm_first = false, bias = true, device =, dtype =})
function TransformerDecoderLayer:init(d_model, nhead, ...)
  layer_init(self, "TransformerDecoderLayer", {"self_attn", "multihead_attn"}, 3, d_model, nhead, ...)
end

local DECODER_KEYS = {"memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
  "tgt_is_causal", "memory_is_causal"}

-- forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
function TransformerDecoderLayer:forward(tgt, ...)
  local fn = "TransformerDecoderLayer"
  local a = args(fn, DECODER_KEYS, ...)
  check_input(fn, tgt, "tgt")
  check_input(fn, a.memory, "memory")
  local x, mem = tgt, a.memory
  local function mha_block(y)
    local out = self.multihead_attn(y, mem, mem, {attn_mask = a.memory_mask,
      key_padding_mask = a.memory_key_padding_mask, need_weights = false,
      is_causal = a.memory_is_causal == true and a.memory_mask == nil})
    return self.dropout2(out)
  end
  local causal = a.tgt_is_causal == true and a.tgt_mask == nil
  if self.norm_first then
    x = x + sa_block(self.self_attn, self.norm1(x), a.tgt_mask, a.tgt_key_padding_mask, self.dropout1, causal)
    x = x + mha_block(self.norm2(x))
    x = x + ff_block(self, self.norm3(x), self.dropout3)
  else
    x = self.norm1(x + sa_block(self.self_attn, x, a.tgt_mask, a.tgt_key_padding_mask, self.dropout1, causal))
    x = self.norm2(x + mha_block(x))
    x = self.norm3(x + ff_block(self, x, self.dropout3))
  end
  return x
end

local TransformerEncoder = Module:extend("TransformerEncoder")
M.TransformerEncoder = TransformerEncoder

-- TransformerEncoder(encoder_layer, num_layers, {norm =}): num_layers copies of the layer
function TransformerEncoder:init(encoder_layer, num_layers, ...)
  local a = args("TransformerEncoder", {"norm", "enable_nested_tensor", "mask_check"}, ...)
  self.layers = clones("TransformerEncoder", encoder_layer, num_layers)
  self.num_layers = #self.layers
  if a.norm ~= nil then self.norm = a.norm end
end

-- forward(src, mask, src_key_padding_mask, {is_causal =})
function TransformerEncoder:forward(src, ...)
  local a = args("TransformerEncoder", {"mask", "src_key_padding_mask", "is_causal"}, ...)
  check_input("TransformerEncoder", src, "src")
  local x = src
  for _, layer in ipairs(self.layers:children()) do
    x = layer(x, {src_mask = a.mask, src_key_padding_mask = a.src_key_padding_mask, is_causal = a.is_causal})
  end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

local TransformerDecoder = Module:extend("TransformerDecoder")
M.TransformerDecoder = TransformerDecoder

-- TransformerDecoder(decoder_layer, num_layers, {norm =})
function TransformerDecoder:init(decoder_layer, num_layers, ...)
  local a = args("TransformerDecoder", {"norm"}, ...)
  self.layers = clones("TransformerDecoder", decoder_layer, num_layers)
  self.num_layers = #self.layers
  if a.norm ~= nil then self.norm = a.norm end
end

-- forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
function TransformerDecoder:forward(tgt, ...)
  local a = args("TransformerDecoder", DECODER_KEYS, ...)
  check_input("TransformerDecoder", tgt, "tgt")
  local x = tgt
  for _, layer in ipairs(self.layers:children()) do
    x = layer(x, a.memory, {tgt_mask = a.tgt_mask, memory_mask = a.memory_mask,
      tgt_key_padding_mask = a.tgt_key_padding_mask, memory_key_padding_mask = a.memory_key_padding_mask,
      tgt_is_causal = a.tgt_is_causal, memory_is_causal = a.memory_is_causal})
  end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

local Transformer = Module:extend("Transformer")
M.Transformer = Transformer

-- Transformer({d_model = 512, nhead = 8, num_encoder_layers = 6, num_decoder_layers = 6,
-- dim_feedforward = 2048, dropout = 0.1, activation = "relu", custom_encoder =, custom_decoder =,
-- layer_norm_eps = 1e-5, batch_first = false, norm_first = false, bias = true, device =, dtype =})
function Transformer:init(...)
  local fn = "Transformer"
  local a = args(fn, {"d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout",
    "activation", "custom_encoder", "custom_decoder", "layer_norm_eps", "batch_first", "norm_first", "bias", "device",
    "dtype"}, ...)
  local d = a.d_model == nil and 512 or check_int(fn, "d_model", a.d_model, 1)
  local h = a.nhead == nil and 8 or check_int(fn, "nhead", a.nhead, 1)
  local fo = C.factory(a)
  local lo = {dim_feedforward = a.dim_feedforward, dropout = a.dropout, activation = a.activation,
    layer_norm_eps = a.layer_norm_eps, batch_first = a.batch_first, norm_first = a.norm_first, bias = a.bias,
    device = fo.device, dtype = fo.dtype}
  local eps = a.layer_norm_eps == nil and 1e-5 or a.layer_norm_eps
  local no = {eps = eps, bias = a.bias ~= false, device = fo.device, dtype = fo.dtype}
  if a.custom_encoder ~= nil then self.encoder = a.custom_encoder
  else
    local n = a.num_encoder_layers == nil and 6 or a.num_encoder_layers
    self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, h, lo), n, {norm = nn.LayerNorm(d, no)})
  end
  if a.custom_decoder ~= nil then self.decoder = a.custom_decoder
  else
    local n = a.num_decoder_layers == nil and 6 or a.num_decoder_layers
    self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, h, lo), n, {norm = nn.LayerNorm(d, no)})
  end
  self.d_model, self.nhead, self.batch_first = d, h, a.batch_first == true
  self:_reset_parameters()
end

-- Xavier-uniform for every parameter of more than one dim (PyTorch's _reset_parameters)
function Transformer:_reset_parameters()
  for _, p in ipairs(self:parameters()) do
    if p:dim() > 1 then init.xavier_uniform_(p) end
  end
end

-- forward(src, tgt, src_mask, tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask,
-- memory_key_padding_mask, {src_is_causal =, tgt_is_causal =, memory_is_causal =})
function Transformer:forward(src, tgt, ...)
  local fn = "Transformer"
  local a = args(fn, {"src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
    "memory_key_padding_mask", "src_is_causal", "tgt_is_causal", "memory_is_causal"}, ...)
  check_input(fn, src, "src")
  check_input(fn, tgt, "tgt")
  local batched = src:dim() == 3
  local bd = self.batch_first and 0 or 1
  if batched and (tgt:dim() ~= 3 or src.shape[bd] ~= tgt.shape[bd]) then
    raise("%s: the batch number of src and tgt must be equal (src %s, tgt %s)", fn, shape_str(src), shape_str(tgt))
  end
  if src:dim() == 0 or tgt:dim() == 0 or src.shape[-1] ~= self.d_model or tgt.shape[-1] ~= self.d_model then
    raise("%s: the feature number of src and tgt must be equal to d_model (%d), got src %s, tgt %s", fn, self.d_model,
      shape_str(src), shape_str(tgt))
  end
  local memory = self.encoder(src, {mask = a.src_mask, src_key_padding_mask = a.src_key_padding_mask,
    is_causal = a.src_is_causal})
  return self.decoder(tgt, memory, {tgt_mask = a.tgt_mask, memory_mask = a.memory_mask,
    tgt_key_padding_mask = a.tgt_key_padding_mask, memory_key_padding_mask = a.memory_key_padding_mask,
    tgt_is_causal = a.tgt_is_causal, memory_is_causal = a.memory_is_causal})
end

-- Transformer.generate_square_subsequent_mask(sz, {device =, dtype =}): (sz, sz), -inf above
-- the diagonal, 0 elsewhere (also callable on an instance: model:generate_square_subsequent_mask(sz))
function Transformer.generate_square_subsequent_mask(...)
  local first = ...
  local n = select("#", ...)
  local argv = {...}
  if nn.is_module(first) then table.remove(argv, 1); n = n - 1 end
  local a = args("generate_square_subsequent_mask", {"sz", "device", "dtype"}, table.unpack(argv, 1, n))
  local sz = check_int("generate_square_subsequent_mask", "sz", a.sz, 0)
  local o = {device = a.device ~= nil and tostring(a.device) or nil}
  local i = torch.arange(sz, o):unsqueeze(1)
  local j = torch.arange(sz, o):unsqueeze(0)
  local zero = torch.zeros({}, {dtype = a.dtype, device = o.device})
  return torch.where(j:gt(i), torch.full({}, -math.huge, {dtype = zero.dtype, device = o.device}), zero)
end

return M
