-- nn layers, one family a file: attention. F.scaled_dot_product_attention (one
-- fused op per backend, torch._sdpa: src/ops/op_attention.c; no (L, S) matrix is
-- kept, the backward recomputes it from the saved log-sum-exp),
-- F.multi_head_attention_forward and nn.MultiheadAttention, with PyTorch's
-- arguments, parameter names, initialisation and errors. nn.lua copies the
-- classes this returns into nn; the functions go into nn.functional here.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local A = require "tensh.args"
local Module, Parameter, F, init = nn.Module, nn.Parameter, nn.functional, nn.init
local raise, args, pyval, shape_str = C.raise, C.args, C.pyval, C.shape_str
local check_int, factory = C.check_int, C.factory
local is_tensor = torch.is_tensor

local M = {}

local BOOL, UINT8 = "torch.bool", "torch.uint8"
local function is_float(t) return A.is_floating_dtype(t.dtype) end

-- ---- scaled dot-product attention ------------------------------------------------------

-- a boolean mask (true: takes part) as an additive one of dtype: 0 or -inf
local function additive(mask, dtype)
  local zero = torch.zeros({}, {dtype = dtype, device = mask.device})
  return torch.where(mask, zero, torch.full({}, -math.huge, {dtype = dtype, device = mask.device}))
end

-- the shape of the leading dims of q, k, v broadcast together, or an error
local function batch_shape(fn, q, k, v)
  local function lead(t) local s = t.shape:totable(); s[#s], s[#s - 1] = nil, nil; return s end
  local ok, shape = pcall(torch.broadcast_shapes, lead(q), lead(k), lead(v))
  if not ok then
    raise("%s: the batch dims of query %s, key %s and value %s do not broadcast", fn, shape_str(q), shape_str(k),
      shape_str(v))
  end
  return shape:totable()
end

-- softmax(q k^T * scale + mask) v composed of ops: float16 and bfloat16, which the fused op does not take
local function sdpa_math(q, k, v, mask, p, scale)
  local w = q:matmul(k:transpose(-2, -1)) * scale
  if mask ~= nil then w = w + mask end
  w = w:softmax(-1)
  if p > 0 then w = F.dropout(w, p, true) end
  return w:matmul(v)
end

-- a causal mask (L, S) on device: 0 where key j <= query i, -inf above
local function causal_mask(L, S, dtype, device)
  local i = torch.arange(L, {device = device}):unsqueeze(1)
  local j = torch.arange(S, {device = device}):unsqueeze(0)
  return additive(j:le(i), dtype)
end

function F.scaled_dot_product_attention(query, key, value, ...)
  local fn = "scaled_dot_product_attention"
  A.check_tensor(fn, 1, query)
  A.check_tensor(fn, 2, key)
  A.check_tensor(fn, 3, value)
  local a = args(fn, {"attn_mask", "dropout_p", "is_causal", "scale"}, ...)
  local q, k, v, mask = query, key, value, a.attn_mask
  for _, t in ipairs({{"query", q}, {"key", k}, {"value", v}}) do
    if t[2]:dim() < 2 then
      raise("%s: expected %s to have at least 2 dims (..., length, features), got shape %s", fn, t[1], shape_str(t[2]))
    end
  end
  if not is_float(q) then raise("%s: expected a floating-point query, got %s", fn, q.dtype) end
  if k.dtype ~= q.dtype or v.dtype ~= q.dtype then
    raise("%s: Expected query, key, and value to have the same dtype, but got query.dtype: %s key.dtype: %s and "
      .. "value.dtype: %s instead.", fn, q.dtype, k.dtype, v.dtype)
  end
  local qd = tostring(q.device)
  if tostring(k.device) ~= qd or tostring(v.device) ~= qd then
    raise("%s: Expected query, key, and value to have the same device type, but got query.device: %s key.device: %s "
      .. "and value.device: %s instead.", fn, qd, tostring(k.device), tostring(v.device))
  end
  local L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
  if k.shape[-1] ~= E then
    raise("%s: query %s and key %s must have the same embedding size (last dim)", fn, shape_str(q), shape_str(k))
  end
  if v.shape[-2] ~= S then
    raise("%s: key %s and value %s must have the same length (dim -2)", fn, shape_str(k), shape_str(v))
  end
  local p = a.dropout_p == nil and 0.0 or a.dropout_p
  F._check_dropout_p(fn, p)
  local scale = a.scale
  if scale == nil then scale = 1 / math.sqrt(E)
  elseif type(scale) ~= "number" then raise("%s: scale must be a number, got %s", fn, A.typename(scale)) end
  local causal = a.is_causal == true
  if a.is_causal ~= nil and type(a.is_causal) ~= "boolean" then
    raise("%s: is_causal must be a boolean, got %s", fn, A.typename(a.is_causal))
  end
  local batch = batch_shape(fn, q, k, v)
  local full = {table.unpack(batch)}
  full[#full + 1], full[#full + 2] = L, S
  if mask ~= nil then
    if causal then raise("%s: Explicit attn_mask should not be set when is_causal=True", fn) end
    if not is_tensor(mask) then raise("%s: attn_mask must be a tensor, got %s", fn, A.typename(mask)) end
    if tostring(mask.device) ~= qd then
      raise("%s: attn_mask is on %s but query is on %s", fn, tostring(mask.device), qd)
    end
    if mask.dtype == BOOL then mask = additive(mask, q.dtype)
    elseif mask.dtype ~= q.dtype then
      raise("%s: Expected attn_mask dtype to be bool or to match query dtype, but got attn_mask.dtype: %s and "
        .. "query.dtype: %s instead.", fn, mask.dtype, q.dtype)
    end
    local ok = pcall(torch.broadcast_shapes, mask.shape:totable(), full)
    if not ok or mask:dim() > #full then
      raise("%s: attn_mask of shape %s does not broadcast to the attention's shape %s", fn, shape_str(mask),
        C.tuple(full))
    end
  end
  if q.dtype ~= "torch.float32" and q.dtype ~= "torch.float64" then
    if causal then mask = causal_mask(L, S, q.dtype, q.device) end
    return sdpa_math(q, k, v, mask, p, scale)
  end
  -- the leading dims as two, (B, H), by views where they can be: the op reads strided operands in place (the
  -- heads of a projection, transposed, copy nothing) and returns o in the layout q's heads have
  local nb = #batch
  local B, H = 1, nb >= 1 and batch[nb] or 1
  for d = 1, nb - 1 do B = B * batch[d] end
  local function four(t, n, f)
    local s = {table.unpack(batch)}
    s[#s + 1], s[#s + 2] = n, f
    t = t:expand(s)
    return nb == 2 and t or t:reshape(B, H, n, f)
  end
  local m4
  if mask ~= nil then
    if mask:dim() <= 2 or nb <= 2 then m4 = mask -- broadcast by the op, without a copy
    else m4 = mask:expand(full):reshape(B, H, L, S) end
  end
  local o = torch._sdpa(four(q, L, E), four(k, S, E), four(v, S, Ev),
    {mask = m4, dropout_p = p, is_causal = causal, scale = scale})
  if nb == 2 then return o end
  local out = {table.unpack(batch)}
  out[#out + 1], out[#out + 2] = L, Ev
  return o:reshape(out)
end

-- ---- multi-head attention ----------------------------------------------------------------

-- a mask as additive float of dtype: bool (and, deprecated, uint8) true means "may not attend"
local function mask_to_float(fn, what, mask, dtype)
  if mask.dtype == UINT8 then mask = mask:to(BOOL) end
  if mask.dtype == BOOL then return additive(mask:logical_not(), dtype) end
  if not is_float(mask) then
    raise("%s: only bool and floating types of %s are supported, got %s", fn, what, mask.dtype)
  end
  return mask:to(dtype)
end

-- PyTorch's _mha_shape_check: whether the input is batched, or an error
local function batched_input(fn, query, key, value, kpm, attn_mask, num_heads)
  local qd = query:dim()
  local function want(t, what, nd)
    if t:dim() ~= nd then
      raise("%s: For %s query, expected %s to be a %d-D tensor but received a %d-D tensor", fn,
        nd == 3 and "batched (3-D)" or "unbatched (2-D)", what, nd, t:dim())
    end
  end
  if qd == 3 or qd == 2 then
    want(key, "`key` and `value`", qd)
    want(value, "`key` and `value`", qd)
    if kpm ~= nil then want(kpm, "`key_padding_mask`", qd - 1) end
    if attn_mask ~= nil then
      if attn_mask:dim() ~= 2 and attn_mask:dim() ~= 3 then
        raise("%s: For %s query, expected `attn_mask` to be `None`, 2-D or 3-D but found %d-D tensor instead", fn,
          qd == 3 and "batched (3-D)" or "unbatched (2-D)", attn_mask:dim())
      end
      if qd == 2 and attn_mask:dim() == 3 then
        local want_shape = C.tuple({num_heads, query.shape[1], key.shape[1]})
        if shape_str(attn_mask) ~= want_shape then
          raise("%s: Expected `attn_mask` shape to be %s but got %s", fn, want_shape, shape_str(attn_mask))
        end
      end
    end
    return qd == 3
  end
  raise("%s: query should be unbatched 2D or batched 3D tensor but received %d-D query tensor", fn, qd)
end

local MHA_KEYS = {"embed_dim_to_check", "num_heads", "in_proj_weight", "in_proj_bias", "bias_k", "bias_v",
  "add_zero_attn", "dropout_p", "out_proj_weight", "out_proj_bias", "training", "key_padding_mask", "need_weights",
  "attn_mask", "use_separate_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight", "static_k", "static_v",
  "average_attn_weights", "is_causal"}

-- the body of F.multi_head_attention_forward over the options a; bf: batched
-- inputs are (N, L, E) (MultiheadAttention's batch_first, run without transposing)
local function mha_forward(fn, query, key, value, a, bf)
  local H = check_int(fn, "num_heads", a.num_heads, 1)
  check_int(fn, "embed_dim_to_check", a.embed_dim_to_check, 1)
  local kpm, attn_mask = a.key_padding_mask, a.attn_mask
  if kpm ~= nil and not is_tensor(kpm) then raise("%s: key_padding_mask must be a tensor, got %s", fn, A.typename(kpm)) end
  if attn_mask ~= nil and not is_tensor(attn_mask) then
    raise("%s: attn_mask must be a tensor, got %s", fn, A.typename(attn_mask))
  end
  local batched = batched_input(fn, query, key, value, kpm, attn_mask, H)
  if not batched then
    query, key, value = query:unsqueeze(1), key:unsqueeze(1), value:unsqueeze(1)
    if kpm ~= nil then kpm = kpm:unsqueeze(0) end
    bf = false
  end
  local bd, ld = bf and 0 or 1, bf and 1 or 0 -- the batch dim, the length dim
  local tgt, bsz, E = query.shape[ld], query.shape[bd], query.shape[2]
  if E ~= a.embed_dim_to_check then
    raise("%s: was expecting embedding dimension of %d, but got %d", fn, a.embed_dim_to_check, E)
  end
  local hd = E // H
  if hd * H ~= E then raise("%s: embed_dim %d not divisible by num_heads %d", fn, E, H) end
  if key.shape[0] ~= value.shape[0] or key.shape[1] ~= value.shape[1] then
    raise("%s: key shape %s does not match value shape %s", fn, shape_str(key), shape_str(value))
  end
  if key.shape[bd] ~= bsz then
    raise("%s: query has batch size %d but key has %d", fn, bsz, key.shape[bd])
  end
  local dtype = query.dtype
  -- the input projection: one GEMM for self-attention, else one per input
  local q, k, v
  local b = a.in_proj_bias
  local function bias_part(i) return b ~= nil and b:narrow(0, i * E, E) or nil end
  if a.use_separate_proj_weight then
    q = F.linear(query, a.q_proj_weight, bias_part(0))
    k = F.linear(key, a.k_proj_weight, bias_part(1))
    v = F.linear(value, a.v_proj_weight, bias_part(2))
  else
    local w = a.in_proj_weight
    if key:dim() > 0 and key.shape[2] ~= E then
      raise("%s: key has %d features, expected embed_dim %d (give kdim/vdim to MultiheadAttention)", fn, key.shape[2], E)
    end
    if rawequal(query, key) and rawequal(key, value) then
      -- one split, not three narrows: its backward writes one cat where each narrow's filled a
      -- zero tensor the size of qkv and the three were added
      q, k, v = table.unpack(F.linear(query, w, b):chunk(3, -1))
    elseif rawequal(key, value) then
      q = F.linear(query, w:narrow(0, 0, E), bias_part(0))
      local kv = F.linear(key, w:narrow(0, E, 2 * E), b ~= nil and b:narrow(0, E, 2 * E) or nil)
      k, v = table.unpack(kv:chunk(2, -1))
    else
      q = F.linear(query, w:narrow(0, 0, E), bias_part(0))
      k = F.linear(key, w:narrow(0, E, E), bias_part(1))
      v = F.linear(value, w:narrow(0, 2 * E, E), bias_part(2))
    end
  end
  local src = k.shape[ld]
  -- masks: one additive float mask (N, H | 1, L, S), or nil
  local mask
  if attn_mask ~= nil then
    if attn_mask.dtype ~= BOOL and attn_mask.dtype ~= UINT8 and not is_float(attn_mask) then
      raise("%s: Only float, byte, and bool types are supported for attn_mask, not %s", fn, attn_mask.dtype)
    end
    local m = mask_to_float(fn, "attn_mask", attn_mask, dtype)
    if m:dim() == 2 then
      if m.shape[0] ~= tgt or m.shape[1] ~= src then
        raise("%s: The shape of the 2D attn_mask is %s, but should be %s.", fn, shape_str(m), C.tuple({tgt, src}))
      end
      mask = m:view(1, 1, tgt, src)
    else
      if m.shape[0] ~= bsz * H or m.shape[1] ~= tgt or m.shape[2] ~= src then
        raise("%s: The shape of the 3D attn_mask is %s, but should be %s.", fn, shape_str(m),
          C.tuple({bsz * H, tgt, src}))
      end
      mask = m:view(bsz, H, tgt, src)
    end
  end
  if a.bias_k ~= nil and a.bias_v ~= nil then
    if a.static_k ~= nil or a.static_v ~= nil then raise("%s: bias cannot be added to static key/value.", fn) end
    local s3 = bf and {bsz, 1, E} or {1, bsz, E}
    k = torch.cat({k, a.bias_k:expand(s3)}, ld)
    v = torch.cat({v, a.bias_v:expand(s3)}, ld)
    if mask ~= nil then mask = F.pad(mask, {0, 1}) end
    if kpm ~= nil then kpm = F.pad(kpm, {0, 1}) end
    src = src + 1
  elseif a.bias_k ~= nil or a.bias_v ~= nil then
    raise("%s: bias_k and bias_v must both be given or both be nil", fn)
  end
  -- (L, N, E) (or (N, L, E)) -> (N, H, L, hd)
  local function heads(t, n)
    if bf then return t:reshape(bsz, n, H, hd):permute(0, 2, 1, 3) end
    return t:reshape(n, bsz, H, hd):permute(1, 2, 0, 3)
  end
  q = heads(q, tgt)
  k = a.static_k ~= nil and a.static_k:view(bsz, H, -1, hd) or heads(k, src)
  v = a.static_v ~= nil and a.static_v:view(bsz, H, -1, hd) or heads(v, src)
  if a.static_k ~= nil then src = k.shape[2] end
  if a.add_zero_attn then
    k = torch.cat({k, torch.zeros(bsz, H, 1, hd, {dtype = dtype, device = k.device})}, 2)
    v = torch.cat({v, torch.zeros(bsz, H, 1, hd, {dtype = dtype, device = v.device})}, 2)
    if mask ~= nil then mask = F.pad(mask, {0, 1}) end
    if kpm ~= nil then kpm = F.pad(kpm, {0, 1}) end
    src = src + 1
  end
  if kpm ~= nil then
    if kpm.shape[0] ~= bsz or kpm.shape[1] ~= src then
      raise("%s: expecting key_padding_mask shape of %s, but got %s", fn, C.tuple({bsz, src}), shape_str(kpm))
    end
    local km = mask_to_float(fn, "key_padding_mask", kpm, dtype):view(bsz, 1, 1, src)
    mask = mask == nil and km or mask + km
  end
  local p = a.training == false and 0.0 or (a.dropout_p or 0.0)
  local out, weights
  if a.need_weights ~= false then -- the weights are asked for: the (L, S) matrix exists anyway
    local w = q:matmul(k:transpose(-2, -1)) * (1 / math.sqrt(hd))
    if mask ~= nil then w = w + mask end
    if a.is_causal and attn_mask == nil then w = w + causal_mask(tgt, src, dtype, q.device) end
    w = w:softmax(-1)
    if p > 0 then w = F.dropout(w, p, true) end
    out = w:matmul(v)
    weights = a.average_attn_weights == false and w or w:mean(1)
    if not batched then weights = weights:squeeze(0) end
  else
    out = F.scaled_dot_product_attention(q, k, v, {attn_mask = mask, dropout_p = p,
      is_causal = a.is_causal == true and mask == nil})
  end
  -- (N, H, L, hd) -> (L, N, E) (or (N, L, E)), then the output projection
  if bf then out = out:permute(0, 2, 1, 3):reshape(bsz, tgt, E)
  else out = out:permute(2, 0, 1, 3):reshape(tgt, bsz, E) end
  out = F.linear(out, a.out_proj_weight, a.out_proj_bias)
  if not batched then out = out:squeeze(1) end
  return out, weights
end

-- PyTorch's F.multi_head_attention_forward: inputs (L, N, E) time-major (or unbatched (L, E)).
-- Returns the output and, when need_weights, the attention weights (averaged over heads
-- when average_attn_weights), else nil.
function F.multi_head_attention_forward(query, key, value, ...)
  local fn = "multi_head_attention_forward"
  A.check_tensor(fn, 1, query)
  A.check_tensor(fn, 2, key)
  A.check_tensor(fn, 3, value)
  return mha_forward(fn, query, key, value, args(fn, MHA_KEYS, ...), false)
end

-- the output projection's class, named as PyTorch names it (its repr says so)
local NonDynamicallyQuantizableLinear = nn.Linear:extend("NonDynamicallyQuantizableLinear")
M.NonDynamicallyQuantizableLinear = NonDynamicallyQuantizableLinear

local MultiheadAttention = Module:extend("MultiheadAttention")
M.MultiheadAttention = MultiheadAttention

-- MultiheadAttention(embed_dim, num_heads, {dropout = 0, bias = true, add_bias_kv = false,
-- add_zero_attn = false, kdim =, vdim =, batch_first = false, device =, dtype =})
function MultiheadAttention:init(embed_dim, num_heads, ...)
  local name = "MultiheadAttention"
  local a = args(name, {"dropout", "bias", "add_bias_kv", "add_zero_attn", "kdim", "vdim", "batch_first", "device",
    "dtype"}, ...)
  local E = check_int(name, "embed_dim", embed_dim, 1)
  local H = check_int(name, "num_heads", num_heads, 1)
  if E % H ~= 0 then raise("%s: embed_dim must be divisible by num_heads (embed_dim %d, num_heads %d)", name, E, H) end
  self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
  self.kdim = a.kdim == nil and E or check_int(name, "kdim", a.kdim, 1)
  self.vdim = a.vdim == nil and E or check_int(name, "vdim", a.vdim, 1)
  self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
  local dropout = a.dropout == nil and 0.0 or a.dropout
  F._check_dropout_p(name, dropout)
  self.dropout = dropout + 0.0
  self.batch_first = a.batch_first == true
  local fo = factory(a)
  if self._qkv_same_embed_dim then
    self.in_proj_weight = Parameter(torch.empty(3 * E, E, fo))
  else
    self.q_proj_weight = Parameter(torch.empty(E, E, fo))
    self.k_proj_weight = Parameter(torch.empty(E, self.kdim, fo))
    self.v_proj_weight = Parameter(torch.empty(E, self.vdim, fo))
  end
  if a.bias ~= false then self.in_proj_bias = Parameter(torch.empty(3 * E, fo)) end
  self.out_proj = NonDynamicallyQuantizableLinear(E, E, {bias = a.bias ~= false, device = fo.device, dtype = fo.dtype})
  if a.add_bias_kv then
    self.bias_k = Parameter(torch.empty(1, 1, E, fo))
    self.bias_v = Parameter(torch.empty(1, 1, E, fo))
  end
  self.add_zero_attn = a.add_zero_attn == true
  self:_reset_parameters()
end

function MultiheadAttention:_reset_parameters()
  if self._qkv_same_embed_dim then init.xavier_uniform_(self.in_proj_weight)
  else
    init.xavier_uniform_(self.q_proj_weight)
    init.xavier_uniform_(self.k_proj_weight)
    init.xavier_uniform_(self.v_proj_weight)
  end
  if self.in_proj_bias ~= nil then
    init.constant_(self.in_proj_bias, 0)
    init.constant_(self.out_proj.bias, 0)
  end
  if self.bias_k ~= nil then init.xavier_normal_(self.bias_k) end
  if self.bias_v ~= nil then init.xavier_normal_(self.bias_v) end
end

function MultiheadAttention:extra_repr() return "" end

-- forward(query, key, value, {key_padding_mask =, need_weights = true, attn_mask =,
-- average_attn_weights = true, is_causal = false}) -> output, weights (nil unless need_weights)
function MultiheadAttention:forward(query, key, value, ...)
  local name = "MultiheadAttention"
  local a = args(name, {"key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal"}, ...)
  for i, t in ipairs({query, key, value}) do
    if not is_tensor(t) then
      raise("%s: expected %s to be a tensor, got %s", name, ({"query", "key", "value"})[i], A.typename(t))
    end
  end
  local w = self.in_proj_weight or self.q_proj_weight
  C.check_device(name, query, w)
  local opts = {embed_dim_to_check = self.embed_dim, num_heads = self.num_heads, in_proj_weight = self.in_proj_weight,
    in_proj_bias = self.in_proj_bias, bias_k = self.bias_k, bias_v = self.bias_v, add_zero_attn = self.add_zero_attn,
    dropout_p = self.dropout, out_proj_weight = self.out_proj.weight, out_proj_bias = self.out_proj.bias,
    training = self.training, key_padding_mask = a.key_padding_mask, need_weights = a.need_weights ~= false,
    attn_mask = a.attn_mask, average_attn_weights = a.average_attn_weights ~= false, is_causal = a.is_causal == true}
  if not self._qkv_same_embed_dim then
    opts.use_separate_proj_weight = true
    opts.q_proj_weight, opts.k_proj_weight, opts.v_proj_weight = self.q_proj_weight, self.k_proj_weight,
      self.v_proj_weight
    if key:dim() > 0 and key.shape[-1] ~= self.kdim then
      raise("%s: key has %d features, expected kdim %d", name, key.shape[-1], self.kdim)
    end
    if value:dim() > 0 and value.shape[-1] ~= self.vdim then
      raise("%s: value has %d features, expected vdim %d", name, value.shape[-1], self.vdim)
    end
  end
  return mha_forward(name, query, key, value, opts, self.batch_first)
end

return M
