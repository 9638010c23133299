-- Attention and Transformer layers: F.scaled_dot_product_attention (the fused
-- op, src/ops/op_attention.c), nn.MultiheadAttention and the Transformer layers
-- against PyTorch's outputs and gradients on fixed weights
-- (tests/fixtures/attention/attention_torch.lua, made by
-- gen_attention_fixture.py next to it), the op against the composed math and
-- finite differences in float64 (masks, causal, dropout, several blocks),
-- cuda against the CPU, non-contiguous and empty inputs, names, init, repr and
-- the error messages. On the cuda pass (TENSH_TEST_DEVICE) the same cases run
-- on the GPU against the same values.
local T = require "harness"
local G = require "gradcheck"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local F = nn.functional
local F64 = {dtype = "float64"}
local sdpa = F.scaled_dot_product_attention

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local fixture = dofile(here .. "../fixtures/attention/attention_torch.lua")

local function shape(t) return table.concat(t.shape:totable(), "x") end
local function tensor(f)
  if f == nil then return nil end
  if f.bool then return torch.tensor(f.bool):view(table.unpack(f.shape)) end
  return torch.tensor(f.data, F64):view(table.unpack(f.shape))
end

-- softmax(q k^T * scale + mask) v composed of ops: the reference for the fused op
local function math_sdpa(q, k, v, mask, causal, scale)
  local L, S = q.shape[-2], k.shape[-2]
  local s = q:matmul(k:transpose(-2, -1)) * (scale or 1 / math.sqrt(q.shape[-1]))
  if causal then
    local i, j = torch.arange(L):unsqueeze(1), torch.arange(S):unsqueeze(0)
    s = s + torch.where(j:le(i), 0.0, -math.huge):to(q.dtype)
  end
  if mask ~= nil then
    if mask.dtype == "torch.bool" then mask = torch.where(mask, 0.0, -math.huge):to(q.dtype) end
    s = s + mask
  end
  return s:softmax(-1):matmul(v)
end

-- ---- against PyTorch -------------------------------------------------------------------

-- each module case of the fixture: its constructor and its call, as gen_attention_fixture.py has them
local MODULES = {
  mha_self_weights = {function() return nn.MultiheadAttention(8, 2, F64) end,
    function(m, i) return m(i.x, i.x, i.x) end},
  mha_batch_first_masks = {function() return nn.MultiheadAttention(8, 4, {batch_first = true, dtype = "float64"}) end,
    function(m, i)
      return (m(i.q, i.kv, i.kv, {key_padding_mask = i.key_padding_mask, attn_mask = i.attn_mask, need_weights = false}))
    end},
  mha_kdim_vdim = {function() return nn.MultiheadAttention(8, 2, {kdim = 5, vdim = 3, dtype = "float64"}) end,
    function(m, i) return m(i.q, i.k, i.v, {attn_mask = i.attn_mask, average_attn_weights = false}) end},
  mha_bias_kv_zero_attn = {function()
      return nn.MultiheadAttention(6, 3, {bias = false, add_bias_kv = true, add_zero_attn = true, dtype = "float64"})
    end, function(m, i) return m(i.q, i.kv, i.kv) end},
  mha_unbatched = {function() return nn.MultiheadAttention(8, 2, F64) end, function(m, i) return m(i.x, i.x, i.x) end},
  encoder_layer_relu_post = {function()
      return nn.TransformerEncoderLayer(8, 2, {dim_feedforward = 16, dropout = 0.0, batch_first = true, dtype = "float64"})
    end, function(m, i) return m(i.src, i.src_mask, i.src_key_padding_mask) end},
  encoder_layer_gelu_pre = {function()
      return nn.TransformerEncoderLayer(8, 4, {dim_feedforward = 12, dropout = 0.0, activation = "gelu",
        norm_first = true, layer_norm_eps = 1e-3, dtype = "float64"})
    end, function(m, i) return m(i.src) end},
  decoder_layer_post = {function()
      return nn.TransformerDecoderLayer(8, 2, {dim_feedforward = 16, dropout = 0.0, dtype = "float64"})
    end, function(m, i)
      return m(i.tgt, i.memory, {tgt_mask = i.tgt_mask, memory_key_padding_mask = i.memory_key_padding_mask})
    end},
  decoder_layer_pre = {function()
      return nn.TransformerDecoderLayer(8, 2, {dim_feedforward = 16, dropout = 0.0, norm_first = true,
        batch_first = true, activation = "gelu", dtype = "float64"})
    end, function(m, i) return m(i.tgt, i.memory) end},
  encoder_stack = {function()
      local layer = nn.TransformerEncoderLayer(8, 2, {dim_feedforward = 16, dropout = 0.0, dtype = "float64"})
      return nn.TransformerEncoder(layer, 2, {norm = nn.LayerNorm(8, F64)})
    end, function(m, i) return m(i.src) end},
  decoder_stack = {function()
      local layer = nn.TransformerDecoderLayer(8, 2, {dim_feedforward = 16, dropout = 0.0, dtype = "float64"})
      return nn.TransformerDecoder(layer, 2)
    end, function(m, i) return m(i.tgt, i.memory) end},
  transformer = {function()
      return nn.Transformer({d_model = 8, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 2,
        dim_feedforward = 16, dropout = 0.0, batch_first = true, dtype = "float64"})
    end, function(m, i) return m(i.src, i.tgt, {tgt_mask = i.tgt_mask}) end},
}

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return table.concat(ks, " ")
end

for _, case in ipairs(fixture) do
  test("torch fixture: " .. case.name, function()
    if case.kind == "sdpa" then
      local q, k, v = tensor(case.q):requires_grad_(), tensor(case.k):requires_grad_(), tensor(case.v):requires_grad_()
      local out = sdpa(q, k, v, {attn_mask = tensor(case.mask), is_causal = case.is_causal, scale = case.scale})
      eq(shape(out), table.concat(case.out.shape, "x"), case.name .. ": shape")
      close(out, tensor(case.out), 1e-10, 1e-12, case.name .. ": output")
      local loss = (out * tensor(case.r)):sum()
      loss:backward()
      for name, t in pairs({q = q, k = k, v = v}) do
        close(t.grad, tensor(case.grads[name]), 1e-9, 1e-11, case.name .. ": grad " .. name)
      end
      return
    end
    local spec = MODULES[case.name]
    local m = spec[1]()
    eq(sorted_keys(m:state_dict()), sorted_keys(case.params), case.name .. ": state_dict keys")
    local sd = {}
    for name, f in pairs(case.params) do sd[name] = tensor(f) end
    m:load_state_dict(sd)
    local inputs = {}
    for name, f in pairs(case.inputs) do
      inputs[name] = tensor(f)
      if case.input_grads[name] then inputs[name]:requires_grad_() end
    end
    local out, w = spec[2](m, inputs)
    eq(shape(out), table.concat(case.out.shape, "x"), case.name .. ": shape")
    close(out, tensor(case.out), 1e-10, 1e-12, case.name .. ": output")
    local loss = (out * tensor(case.r)):sum()
    if case.weights then
      close(w, tensor(case.weights), 1e-10, 1e-12, case.name .. ": attention weights")
      loss = loss + (w * tensor(case.r_w)):sum()
    else
      ok(w == nil, case.name .. ": no weights unless asked for")
    end
    loss:backward()
    for name, g in pairs(case.input_grads) do
      close(inputs[name].grad, tensor(g), 1e-9, 1e-11, case.name .. ": grad " .. name)
    end
    local params = {}
    for name, p in m:named_parameters() do params[name] = p end
    for name, g in pairs(case.grads) do
      close(params[name].grad, tensor(g), 1e-9, 1e-11, case.name .. ": grad " .. name)
    end
  end)
end

-- ---- the fused op against the composed math and finite differences -------------------------

local function rand_list(...)
  local dims = {...}
  local function build(d)
    local out = {}
    for i = 1, dims[d] do out[i] = d == #dims and torch.randn(1):item() or build(d + 1) end
    return out
  end
  return build(1)
end

test("gradcheck float64: plain, float mask, bool mask, causal, scale", function()
  torch.manual_seed(3)
  local q, k, v = rand_list(2, 3, 2), rand_list(2, 4, 2), rand_list(2, 4, 3)
  G.check("sdpa", function(a, b, c) return sdpa(a, b, c) end, {q, k, v})
  local fm = torch.randn(3, 4, F64)
  G.check("sdpa float mask", function(a, b, c) return sdpa(a, b, c, {attn_mask = fm}) end, {q, k, v})
  local bm = torch.tensor({{true, false, true, true}, {false, true, false, false}, {true, true, true, false}})
  G.check("sdpa bool mask", function(a, b, c) return sdpa(a, b, c, {attn_mask = bm, scale = 0.7}) end, {q, k, v})
  G.check("sdpa causal", function(a, b, c) return sdpa(a, b, c, {is_causal = true}) end, {q, k, v})
end)

test("gradcheck float64: dropout (the same draws in the forward and the backward)", function()
  torch.manual_seed(4)
  local q, k, v = rand_list(2, 3, 2), rand_list(2, 5, 2), rand_list(2, 5, 3)
  G.check("sdpa dropout", function(a, b, c)
    torch.manual_seed(11)
    return sdpa(a, b, c, {dropout_p = 0.4})
  end, {q, k, v})
  G.check("sdpa dropout causal", function(a, b, c)
    torch.manual_seed(12)
    return sdpa(a, b, c, {dropout_p = 0.3, is_causal = true})
  end, {q, k, v})
end)

-- several blocks of queries and keys (the CPU's are 64 x 128; CUDA's tiles 32 keys):
-- the online softmax's rescaling and the causal skipping of whole blocks
test("matches the composed math over many blocks (float64, masks, causal)", function()
  torch.manual_seed(5)
  for _, c in ipairs({{2, 150, 300, 24, 16, false}, {3, 130, 130, 8, 40, true}, {1, 200, 70, 16, 16, true}}) do
    local B, L, S, E, Ev, causal = table.unpack(c)
    local q = torch.randn(B, L, E, F64):requires_grad_()
    local k = torch.randn(B, S, E, F64):requires_grad_()
    local v = torch.randn(B, S, Ev, F64):requires_grad_()
    local mask = not causal and (torch.randn(L, S, F64) * 3):masked_fill(torch.rand(L, S):lt(0.2), -math.huge) or nil
    if mask then mask:select(1, 0):fill_(0) end -- every query keeps a key
    local o = sdpa(q, k, v, {attn_mask = mask, is_causal = causal})
    local r = math_sdpa(q, k, v, mask, causal)
    local name = ("B %d L %d S %d causal %s"):format(B, L, S, tostring(causal))
    close(o, r, 1e-11, 1e-12, name .. ": output")
    local g = torch.randn(B, L, Ev, F64)
    local go = torch.autograd.grad({o}, {q, k, v}, {grad_outputs = {g}})
    local gr = torch.autograd.grad({r}, {q, k, v}, {grad_outputs = {g}})
    for i, n in ipairs({"q", "k", "v"}) do close(go[i], gr[i], 1e-10, 1e-11, name .. ": grad " .. n) end
  end
end)

-- the backward's query blocks (the CPU's: as many queries as keep 2 x S probabilities
-- in 512 KiB, at least 16, at most 64 when causal) against the composed math, with the
-- dropout mask read back through v = I (the forward's factors; the backward draws
-- them again, 128 keys at a time): keys past one draw, S long enough for the smallest
-- block, S not a multiple of 4, causal with L > S
test("backward over query blocks and long key rows matches the composed math (dropout, causal)", function()
  torch.manual_seed(15)
  for _, c in ipairs({{2, 37, 301, 8, 5, 0.3, false}, {1, 40, 2101, 4, 3, 0.2, false}, {2, 150, 90, 8, 6, 0.25, true},
    {1, 70, 3000, 6, 4, 0, false}}) do
    local B, L, S, E, Ev, p, causal = table.unpack(c)
    local q = torch.randn(B, L, E, F64):requires_grad_()
    local k = torch.randn(B, S, E, F64):requires_grad_()
    local v = torch.randn(B, S, Ev, F64):requires_grad_()
    local factors = 1
    if p > 0 then
      torch.manual_seed(21)
      local dropped = sdpa(q:detach(), k:detach(), torch.eye(S, F64):expand(B, S, S), {dropout_p = p, is_causal = causal})
      local probs = math_sdpa(q:detach(), k:detach(), torch.eye(S, F64):expand(B, S, S), nil, causal)
      factors = torch.where(probs:gt(0), dropped / probs, 0.0)
      ok(factors:gt(0):any():item() and factors:eq(0):logical_and(probs:gt(0)):any():item(), "some dropped, some kept")
    end
    torch.manual_seed(21)
    local o = sdpa(q, k, v, {dropout_p = p, is_causal = causal})
    local s = q:matmul(k:transpose(-2, -1)) / math.sqrt(E)
    if causal then
      local i, j = torch.arange(L):unsqueeze(1), torch.arange(S):unsqueeze(0)
      s = s + torch.where(j:le(i), 0.0, -math.huge):to("float64")
    end
    local r = (s:softmax(-1) * factors):matmul(v)
    local name = ("B %d L %d S %d p %g causal %s"):format(B, L, S, p, tostring(causal))
    close(o, r, 1e-11, 1e-12, name .. ": output")
    local g = torch.randn(B, L, Ev, F64)
    local go = torch.autograd.grad({o}, {q, k, v}, {grad_outputs = {g}})
    local gr = torch.autograd.grad({r}, {q, k, v}, {grad_outputs = {g}})
    for i, n in ipairs({"q", "k", "v"}) do close(go[i], gr[i], 1e-10, 1e-11, name .. ": grad " .. n) end
  end
end)

test("float32 agrees with float64", function()
  torch.manual_seed(6)
  local q, k, v = torch.randn(4, 70, 32, F64), torch.randn(4, 90, 32, F64), torch.randn(4, 90, 16, F64)
  local r = sdpa(q, k, v, {is_causal = true})
  close(sdpa(q:float(), k:float(), v:float(), {is_causal = true}):double(), r, 1e-5, 1e-5, "float32")
end)

test("dropout keeps each probability or zeroes it, at rate p, from the generator", function()
  torch.manual_seed(7)
  local S, p = 64, 0.25
  local q, k = torch.randn(8, 48, 16), torch.randn(8, S, 16)
  local eye = torch.eye(S):expand(8, S, S) -- v = I: the output is the (dropped) probability matrix
  local probs = sdpa(q, k, eye)
  torch.manual_seed(99)
  local a = sdpa(q, k, eye, {dropout_p = p})
  torch.manual_seed(99)
  local b = sdpa(q, k, eye, {dropout_p = p})
  close(a, b, 0, 0, "the same seed draws the same mask")
  local ratio = a / probs
  local kept = ratio:gt(0.5)
  close(ratio:masked_select(kept), torch.full({kept:sum():item()}, 1 / (1 - p)), 1e-5, 1e-6, "kept ones scaled")
  close(a:masked_select(kept:logical_not()), torch.zeros(kept:numel() - kept:sum():item()), 0, 0, "others zero")
  local rate = 1 - kept:float():mean():item()
  ok(math.abs(rate - p) < 0.02, ("dropped fraction %.4f, expected %.2f"):format(rate, p))
  local c = sdpa(q, k, eye, {dropout_p = p})
  ok((c - a):abs():max():item() > 0, "the next call draws a new mask")
end)

test("non-contiguous and broadcast inputs give the contiguous answer", function()
  torch.manual_seed(8)
  local qb = torch.randn(5, 2, 3, 8, F64) -- (L, N, H, E) permuted to (N, H, L, E)
  local q = qb:permute(1, 2, 0, 3)
  local k = torch.randn(2, 3, 8, 7, F64):transpose(-2, -1) -- (N, H, S, E), strided
  local v = torch.randn(1, 3, 7, 4, F64) -- broadcast over N
  local mask = torch.randn(7, F64):expand(5, 7) -- stride 0 rows
  ok(not q:is_contiguous() and not k:is_contiguous() and not mask:is_contiguous(), "strided inputs")
  local o = sdpa(q, k, v, {attn_mask = mask})
  close(o, math_sdpa(q:contiguous(), k:contiguous(), v:expand(2, 3, 7, 4):contiguous(), mask:contiguous()), 1e-12,
    1e-12, "strided")
  eq(shape(o), "2x3x5x4", "broadcast batch")
end)

-- q, k, v as nanoGPT's CausalSelfAttention makes them: one (B, T, 3C) projection split and viewed as heads
-- (B, H, T, D), every one a strided view of the projection (no copy)
-- (qkv: the projection to view, else a new one)
local function projected_heads(B, Tn, H, D, opts, qkv)
  qkv = qkv or torch.randn(B, Tn, 3 * H * D, opts)
  local q, k, v = table.unpack(qkv:split(H * D, 2))
  local function heads(t) return t:view(B, Tn, H, D):transpose(1, 2) end
  return heads(q), heads(k), heads(v)
end

-- the same views of the projection under q on another device
local function heads_on(dev, q)
  local B, H, Tn, D = table.unpack(q.shape:totable())
  local qkv = torch.as_strided(q, {B, Tn, 3 * H * D}, {Tn * 3 * H * D, 3 * H * D, 1}, 0)
  return projected_heads(B, Tn, H, D, nil, qkv:to(dev))
end

test("the heads of a projection are read in place; the output is laid out for the next projection", function()
  torch.manual_seed(13)
  for _, c in ipairs({{2, 37, 3, 5, {is_causal = true}}, {3, 70, 2, 8, {}}, {1, 130, 4, 4, {attn_mask = true}}}) do
    local B, Tn, H, D, o = table.unpack(c)
    local q, k, v = projected_heads(B, Tn, H, D, F64)
    ok(not q:is_contiguous() and q:stride(1) < q:stride(2), "q is a strided view of the projection")
    local opts = {is_causal = o.is_causal}
    if o.attn_mask then opts.attn_mask = torch.randn(B, 1, Tn, Tn, F64) end
    local leaves = {}
    for i, t in ipairs({q, k, v}) do leaves[i] = t:detach():requires_grad_() end
    local y = sdpa(leaves[1], leaves[2], leaves[3], opts)
    local name = ("B %d T %d H %d D %d"):format(B, Tn, H, D)
    ok(y:transpose(1, 2):is_contiguous(), name .. ": o:transpose(1, 2) is contiguous (no copy before c_proj)")
    local ref = {}
    for i, t in ipairs({q, k, v}) do ref[i] = t:contiguous():requires_grad_() end
    local r = math_sdpa(ref[1], ref[2], ref[3], opts.attn_mask, opts.is_causal)
    close(y, r, 1e-11, 1e-12, name .. ": output")
    -- the gradient as nanoGPT's backward brings it: through transpose(1, 2):contiguous():view(B, T, C)
    local g = torch.randn(B, Tn, H * D, F64)
    y:transpose(1, 2):contiguous():view(B, Tn, H * D):backward(g)
    r:backward(g:view(B, Tn, H, D):transpose(1, 2))
    for i, n in ipairs({"q", "k", "v"}) do close(leaves[i].grad, ref[i].grad, 1e-10, 1e-11, name .. ": grad " .. n) end
  end
  -- dropout draws by (batch, head, row): the strided call draws what the contiguous one does
  local q, k, v = projected_heads(2, 20, 3, 4, F64)
  torch.manual_seed(5)
  local a = sdpa(q, k, v, {dropout_p = 0.3})
  torch.manual_seed(5)
  close(a, sdpa(q:contiguous(), k:contiguous(), v:contiguous(), {dropout_p = 0.3}), 1e-12, 1e-12, "dropout")
  local leaves = {}
  for i, t in ipairs({projected_heads(1, 4, 2, 2, F64)}) do leaves[i] = t:detach():requires_grad_() end
  ok(not leaves[1]:is_contiguous(), "strided leaves")
  G.check("sdpa on projected heads", function(x, y, z) return sdpa(x, y, z, {is_causal = true}) end, leaves)
end)

test("empty batch, no queries, no keys", function()
  local q = torch.randn(0, 3, 4):requires_grad_()
  local o = sdpa(q, torch.randn(0, 5, 4), torch.randn(0, 5, 2))
  eq(shape(o), "0x3x2", "empty batch")
  o:sum():backward()
  eq(shape(q.grad), "0x3x4", "empty batch grad")
  eq(shape(sdpa(torch.randn(2, 0, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 2))), "2x0x2", "no queries")
  local k = torch.randn(2, 0, 4):requires_grad_()
  local q2 = torch.randn(2, 3, 4):requires_grad_()
  local o2 = sdpa(q2, k, torch.randn(2, 0, 2))
  close(o2, torch.zeros(2, 3, 2), 0, 0, "no keys: zeros, as the math gives")
  o2:sum():backward()
  close(q2.grad, torch.zeros(2, 3, 4), 0, 0, "no keys: zero grad")
end)

test("a query with every key masked gives NaN, as the math does", function()
  local q, k, v = torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 2)
  local mask = torch.tensor({{true, true, false}, {false, false, false}})
  local o = sdpa(q, k, v, {attn_mask = mask})
  ok(o[0][1]:ne(o[0][1]):all():item(), "masked row is NaN")
  close(o[0][0], math_sdpa(q, k, v, mask)[0][0], 1e-6, 1e-6, "other rows")
end)

test("float16 and bfloat16 compose the math (the fused op is float32/float64)", function()
  torch.manual_seed(9)
  local q, k, v = torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)
  local r = sdpa(q, k, v, {is_causal = true})
  for _, dt in ipairs({"bfloat16", "float16"}) do
    local o = sdpa(q:to(dt), k:to(dt), v:to(dt), {is_causal = true})
    eq(o.dtype, "torch." .. dt, dt)
    close(o:float(), r, 0.05, 0.05, dt)
  end
end)

test("cuda gives the CPU's answers (float32 and float64, masks, causal, dropout, backward)", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  torch.manual_seed(10)
  local cases = {
    {2, 70, 100, 40, 24, {}},
    {3, 33, 65, 16, 16, {is_causal = true}},
    {2, 40, 50, 8, 12, {dropout_p = 0.3}},
    {2, 40, 50, 8, 12, {attn_mask = "float"}},
    {1, 5, 6, 1500, 700, {}}, -- rows wider than the shared-memory tile: read from global memory
    {2, 37, 37, 5, 5, {is_causal = true, heads = 3}}, -- the heads of a projection, strided, odd sizes
    {3, 70, 70, 8, 8, {dropout_p = 0.2, heads = 2}},
    {1, 33, 33, 1100, 1100, {heads = 2}}, -- strided and wider than the tile
  }
  for _, dt in ipairs({"float32", "float64"}) do
    for n, c in ipairs(cases) do
      local B, L, S, E, Ev, o = table.unpack(c)
      local opts = {}
      for key, val in pairs(o) do opts[key] = val end
      local cpu = {device = "cpu", dtype = dt}
      local q, k, v, g
      if opts.heads then -- (B, H, L, E) views of one (B, L, 3 H E) projection, and the gradient as a view
        q, k, v = projected_heads(B, L, opts.heads, E, cpu)
        g = torch.randn(B, L, opts.heads, Ev, cpu):transpose(1, 2)
        opts.heads = nil
      else
        q, k, v = torch.randn(B, L, E, cpu), torch.randn(B, S, E, cpu), torch.randn(B, S, Ev, cpu)
        g = torch.randn(B, L, Ev, cpu)
      end
      if opts.attn_mask then opts.attn_mask = torch.randn(L, S, cpu) end
      local function run(dev)
        local function leaf(t) return t:to(dev):detach():requires_grad_() end
        local qd, kd, vd = leaf(q), leaf(k), leaf(v)
        if not q:is_contiguous() then -- strided on the device as on the CPU: the projection moved whole
          qd, kd, vd = heads_on(dev, q)
          qd, kd, vd = qd:detach():requires_grad_(), kd:detach():requires_grad_(), vd:detach():requires_grad_()
        end
        local od = {}
        for key, val in pairs(opts) do od[key] = torch.is_tensor(val) and val:to(dev) or val end
        torch.manual_seed(77)
        local out = sdpa(qd, kd, vd, od)
        out:backward(g:to(dev))
        return out:cpu(), qd.grad:cpu(), kd.grad:cpu(), vd.grad:cpu()
      end
      local rc, rg = {run("cpu")}, {run("cuda")}
      local tol = dt == "float32" and 1e-4 or 1e-10
      for i, what in ipairs({"output", "grad q", "grad k", "grad v"}) do
        close(rg[i], rc[i], tol, tol, ("%s case %d: %s"):format(dt, n, what))
      end
    end
  end
end)

-- ---- MultiheadAttention -----------------------------------------------------------------------

test("MultiheadAttention: PyTorch's parameter names, shapes, init and repr", function()
  local m = nn.MultiheadAttention(16, 4)
  local names = {}
  for name, p in m:named_parameters() do names[#names + 1] = name .. shape(p) end
  eq(table.concat(names, " "), "in_proj_weight48x16 in_proj_bias48 out_proj.weight16x16 out_proj.bias16", "names")
  close(m.in_proj_bias, torch.zeros(48), 0, 0, "in_proj_bias zero")
  close(m.out_proj.bias, torch.zeros(16), 0, 0, "out_proj.bias zero")
  local bound = math.sqrt(6 / (16 + 48)) -- xavier_uniform on (48, 16)
  ok(m.in_proj_weight:abs():max():item() <= bound, "xavier bound")
  ok(m.in_proj_weight:abs():max():item() > bound * 0.8, "xavier spread")
  local kv = nn.MultiheadAttention(16, 4, {kdim = 6, vdim = 5, bias = false, add_bias_kv = true})
  names = {}
  for name, p in kv:named_parameters() do names[#names + 1] = name .. shape(p) end
  eq(table.concat(names, " "), "q_proj_weight16x16 k_proj_weight16x6 v_proj_weight16x5 bias_k1x1x16 bias_v1x1x16 "
    .. "out_proj.weight16x16", "kdim/vdim names")
  eq(tostring(m), "MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, "
    .. "bias=True)\n)", "repr")
end)

test("MultiheadAttention: the fused path equals the weights path; batch_first equals time-major", function()
  torch.manual_seed(12)
  local m = nn.MultiheadAttention(12, 3, F64)
  local x = torch.randn(6, 2, 12, F64)
  local kpm = torch.tensor({{false, false, false, true, true, false}, {false, true, false, false, false, false}})
  local am = torch.randn(6, 6, F64)
  local a, w = m(x, x, x, {key_padding_mask = kpm, attn_mask = am})
  local b, nw = m(x, x, x, {key_padding_mask = kpm, attn_mask = am, need_weights = false})
  ok(nw == nil, "no weights")
  close(b, a, 1e-12, 1e-12, "fused == weights path")
  eq(shape(w), "2x6x6", "averaged weights")
  close(w:sum(-1), torch.ones(2, 6, F64), 1e-12, 1e-12, "weights rows sum to 1")
  for _, bk in ipairs({{0, 3}, {0, 4}, {1, 1}}) do -- (sample, padded key)
    close(w[bk[1]]:select(1, bk[2]), torch.zeros(6, F64), 0, 0, "padded key gets no weight")
  end
  local mb = nn.MultiheadAttention(12, 3, {batch_first = true, dtype = "float64"})
  mb:load_state_dict(m:state_dict())
  local c = mb(x:transpose(0, 1), x:transpose(0, 1), x:transpose(0, 1), {need_weights = false})
  close(c:transpose(0, 1), m(x, x, x, {need_weights = false}), 1e-12, 1e-12, "batch_first")
  local _, hw = m(x, x, x, {average_attn_weights = false})
  eq(shape(hw), "2x3x6x6", "per-head weights")
end)

test("MultiheadAttention: dropout in training, none in eval", function()
  torch.manual_seed(13)
  local m = nn.MultiheadAttention(8, 2, {dropout = 0.5})
  local x = torch.randn(5, 3, 8)
  local a = m(x, x, x, {need_weights = false})
  local b = m(x, x, x, {need_weights = false})
  ok((a - b):abs():max():item() > 1e-4, "training draws new masks")
  m:eval()
  close(m(x, x, x, {need_weights = false}), m(x, x, x, {need_weights = false}), 0, 0, "eval is deterministic")
end)

test("MultiheadAttention: errors", function()
  raises(function() nn.MultiheadAttention(10, 3) end, "embed_dim must be divisible by num_heads", "divisible")
  local m = nn.MultiheadAttention(8, 2)
  local x = torch.randn(4, 2, 8)
  raises(function() m(torch.randn(1, 4, 2, 8), x, x) end,
    "query should be unbatched 2D or batched 3D tensor but received 4-D query tensor", "rank")
  raises(function() m(x, torch.randn(4, 8), torch.randn(4, 8)) end, "expected `key` and `value` to be a 3-D tensor",
    "key rank")
  raises(function() m(x, x, x, {attn_mask = torch.zeros(3, 3)}) end,
    "The shape of the 2D attn_mask is (3, 3), but should be (4, 4).", "mask shape")
  raises(function() m(x, x, x, {attn_mask = torch.zeros(5, 4, 4)}) end,
    "The shape of the 3D attn_mask is (5, 4, 4), but should be (4, 4, 4).", "3D mask shape")
  raises(function() m(x, x, x, {attn_mask = torch.zeros(4, 4, {dtype = "int64"})}) end,
    "Only float, byte, and bool types are supported for attn_mask, not torch.int64", "mask dtype")
  raises(function() m(x, x, x, {key_padding_mask = torch.zeros(2, 5, {dtype = "bool"})}) end,
    "expecting key_padding_mask shape of (2, 4), but got (2, 5)", "kpm shape")
  raises(function() m(x, x, x, {key_padding_mask = torch.zeros(2, 4, {dtype = "int32"})}) end,
    "only bool and floating types of key_padding_mask are supported", "kpm dtype")
  raises(function() m(torch.randn(4, 2, 6), torch.randn(4, 2, 6), torch.randn(4, 2, 6)) end,
    "was expecting embedding dimension of 8, but got 6", "embed dim")
  raises(function() m(x, x, "v") end, "expected value to be a tensor, got string", "value type")
  raises(function() m(x, x, x, {need_weight = false}) end, "need_weight", "unknown option")
end)

test("scaled_dot_product_attention: errors", function()
  local q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
  raises(function() sdpa(q, torch.randn(2, 5, 3), v) end, "must have the same embedding size", "E")
  raises(function() sdpa(q, k, torch.randn(2, 4, 6)) end, "must have the same length", "S")
  raises(function() sdpa(q, k:double(), v) end, "Expected query, key, and value to have the same dtype", "dtype")
  raises(function() sdpa(q, k, v, {attn_mask = torch.zeros(3, 4)}) end,
    "attn_mask of shape (3, 4) does not broadcast to the attention's shape (2, 3, 5)", "mask shape")
  raises(function() sdpa(q, k, v, {attn_mask = torch.zeros(3, 5, {dtype = "int64"})}) end,
    "Expected attn_mask dtype to be bool or to match query dtype", "mask dtype")
  raises(function() sdpa(q, k, v, {attn_mask = torch.zeros(3, 5), is_causal = true}) end,
    "Explicit attn_mask should not be set when is_causal=True", "mask and causal")
  raises(function() sdpa(torch.randn(4), k, v) end, "expected query to have at least 2 dims", "rank")
  raises(function() sdpa(q, torch.randn(3, 5, 4), torch.randn(3, 5, 6)) end, "do not broadcast", "batch")
  raises(function() sdpa(q, k, v, {dropout_p = 1.5}) end, "dropout probability has to be between 0 and 1", "p")
  raises(function() sdpa(torch.randint(0, 3, {2, 3, 4}), k, v) end, "expected a floating-point query", "int")
  -- the op checks again: no call from Lua crashes
  raises(function() torch._sdpa(q, k, torch.randn(2, 4, 6)) end, "same length", "op S")
  raises(function() torch._sdpa(torch.randn(3, 4), k, v) end, "expected query to be 3-D", "op rank")
  raises(function() torch._sdpa(q, k, v, {mask = torch.zeros(2, 2)}) end, "is not broadcastable to (2, 3, 5)",
    "op mask")
  raises(function() torch._sdpa(q:double(), k, v) end, "like query", "op dtype")
end)

-- ---- Transformer layers -----------------------------------------------------------------

test("Transformer: PyTorch's state_dict keys, independent layer copies, square subsequent mask", function()
  local layer = nn.TransformerEncoderLayer(8, 2, {dim_feedforward = 16})
  local enc = nn.TransformerEncoder(layer, 2)
  eq(sorted_keys(enc:state_dict()):gsub("layers%.1%.[%w_.]+ ?", ""):gsub(" $", ""),
    sorted_keys(layer:state_dict()):gsub("([%w_.]+)", "layers.0.%1"), "encoder keys")
  ok(enc.layers[0].linear1.weight:data_ptr() ~= enc.layers[1].linear1.weight:data_ptr(), "copies own their weights")
  close(enc.layers[1].linear1.weight, layer.linear1.weight, 0, 0, "copies start equal")
  torch.no_grad(function() enc.layers[0].linear1.weight:fill_(0) end)
  ok(layer.linear1.weight:abs():sum():item() > 0, "the original is untouched")
  close(nn.Transformer.generate_square_subsequent_mask(3),
    torch.tensor({{0, -math.huge, -math.huge}, {0, 0, -math.huge}, {0, 0, 0}}), 0, 0, "mask")
  local t = nn.Transformer({d_model = 8, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1,
    dim_feedforward = 4})
  local keys = sorted_keys(t:state_dict())
  ok(keys:find("decoder.layers.0.multihead_attn.in_proj_weight", 1, true) and keys:find("encoder.norm.weight", 1, true)
    and keys:find("decoder.layers.0.norm3.bias", 1, true), "transformer keys")
  close(t:generate_square_subsequent_mask(2), torch.tensor({{0, -math.huge}, {0, 0}}), 0, 0, "as a method")
end)

test("Transformer: causal self-attention ignores the future", function()
  torch.manual_seed(14)
  local layer = nn.TransformerEncoderLayer(8, 2, {dim_feedforward = 16, dropout = 0.0, batch_first = true})
  local x = torch.randn(2, 6, 8)
  local mask = nn.Transformer.generate_square_subsequent_mask(6)
  local a = layer(x, mask)
  local y = x:clone()
  y:narrow(1, 4, 2):fill_(3)
  local b = layer(y, mask)
  close(b:narrow(1, 0, 4), a:narrow(1, 0, 4), 1e-5, 1e-6, "the past does not see the future")
  close(layer(x, {is_causal = true}), a, 1e-5, 1e-6, "is_causal == the square subsequent mask")
end)

test("Transformer: errors", function()
  local t = nn.Transformer({d_model = 8, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1,
    dim_feedforward = 4})
  raises(function() t(torch.randn(5, 2, 8), torch.randn(4, 3, 8)) end, "the batch number of src and tgt must be equal",
    "batch")
  raises(function() t(torch.randn(5, 2, 6), torch.randn(4, 2, 6)) end,
    "the feature number of src and tgt must be equal to d_model", "features")
  raises(function() nn.TransformerEncoderLayer(8, 3) end, "embed_dim must be divisible by num_heads", "heads")
  raises(function() nn.TransformerEncoderLayer(8, 2, {activation = "tanh"}) end, "activation should be relu/gelu, not tanh",
    "activation")
  raises(function() nn.TransformerEncoder("layer", 2) end, "expected a layer module to copy", "layer type")
  local layer = nn.TransformerDecoderLayer(8, 2)
  raises(function() layer(torch.randn(3, 2, 8)) end, "expected memory to be a tensor, got nil", "memory")
end)

test("Transformer: trains (loss goes down on a copy task)", function()
  torch.manual_seed(15)
  local layer = nn.TransformerEncoderLayer(16, 2, {dim_feedforward = 32, dropout = 0.0, batch_first = true})
  local enc = nn.TransformerEncoder(layer, 2)
  local head = nn.Linear(16, 4)
  local params = enc:parameters()
  for _, p in ipairs(head:parameters()) do params[#params + 1] = p end
  local opt = optim.Adam(params, {lr = 1e-2})
  local x = torch.randn(8, 5, 16)
  local y = torch.randint(0, 4, {8, 5})
  local first, last
  for i = 1, 30 do
    opt:zero_grad()
    local loss = nn.functional.cross_entropy(head(enc(x)):reshape(-1, 4), y:reshape(-1))
    loss:backward()
    opt:step()
    if i == 1 then first = loss:item() end
    last = loss:item()
  end
  ok(last < first * 0.5, ("loss %.4f -> %.4f"):format(first, last))
end)

T.run()
