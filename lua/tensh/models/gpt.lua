-- models.gpt: a GPT-2 style decoder as nanoGPT writes it (Karpathy's
-- model.py, the model people train on characters and on OpenWebText): token
-- and position embeddings, n_layer blocks of pre-LayerNorm causal
-- self-attention (the fused F.scaled_dot_product_attention, as nanoGPT's
-- "flash" path) and a GELU MLP, a final LayerNorm, and an output layer tied to
-- the token embedding. Module names and state_dict keys are nanoGPT's
-- (transformer.wte.weight, transformer.h.0.attn.c_attn.weight, lm_head.weight),
-- so its checkpoints' tensors load by name.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local A = require "tensh.args"
local Module, F, init = nn.Module, nn.functional, nn.init
local raise, args, check_int, shape_str = C.raise, C.args, C.check_int, C.shape_str

local M = {}

-- ---- configuration ---------------------------------------------------------------------

-- nanoGPT's GPTConfig defaults: GPT-2 small with the vocabulary padded to a multiple of 64
local DEFAULTS = {block_size = 1024, vocab_size = 50304, n_layer = 12, n_head = 12, n_embd = 768, dropout = 0.0,
  bias = true}
local KEYS = {block_size = true, vocab_size = true, n_layer = true, n_head = true, n_embd = true, dropout = true,
  bias = true}

-- GPTConfig({vocab_size =, block_size =, n_layer =, n_head =, n_embd =, dropout =, bias =}): a checked plain
-- table with nanoGPT's defaults for what is not given
function M.GPTConfig(opts)
  local fn = "GPTConfig"
  if opts ~= nil and not A.is_plain_table(opts) then
    raise("%s: expected a table of options (vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias), got %s",
      fn, A.typename(opts))
  end
  opts = A.check_opts(fn, opts, KEYS)
  local c = {}
  for k, v in pairs(DEFAULTS) do c[k] = v end
  for k, v in pairs(opts) do c[k] = v end
  for _, k in ipairs({"block_size", "vocab_size", "n_layer", "n_head", "n_embd"}) do c[k] = check_int(fn, k, c[k], 1) end
  F._check_dropout_p(fn, c.dropout)
  A.check_boolean(fn, "bias", c.bias)
  if c.n_embd % c.n_head ~= 0 then
    raise("%s: n_embd (%d) must be divisible by n_head (%d): each head gets n_embd / n_head features", fn, c.n_embd,
      c.n_head)
  end
  return c
end

-- ---- the blocks --------------------------------------------------------------------------

local CausalSelfAttention = Module:extend("CausalSelfAttention")
M.CausalSelfAttention = CausalSelfAttention
-- CausalSelfAttention(config): the three projections q, k, v as one Linear (c_attn), heads through the fused
-- causal attention, the output projection c_proj
function CausalSelfAttention:init(config)
  local c = M.GPTConfig(config)
  self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, {bias = c.bias})
  self.c_proj = nn.Linear(c.n_embd, c.n_embd, {bias = c.bias})
  -- attn_dropout is nanoGPT's too: its non-flash path drops attention weights; here the fused op does it
  self.attn_dropout = nn.Dropout(c.dropout)
  self.resid_dropout = nn.Dropout(c.dropout)
  self.n_head, self.n_embd, self.dropout = c.n_head, c.n_embd, c.dropout
end
-- x (B, T, n_embd) -> the same shape, or an error naming the layer
local function check_sequence(name, x, n_embd)
  C.check_input(name, x)
  if x:dim() ~= 3 or x.shape[2] ~= n_embd then
    raise("%s: expected an input of shape (B, T, %d), got %s", name, n_embd, shape_str(x))
  end
end

function CausalSelfAttention:forward(x)
  check_sequence("CausalSelfAttention", x, self.n_embd)
  local B, T, Cd = x.shape[0], x.shape[1], x.shape[2]
  local nh = self.n_head
  local q, k, v = table.unpack(self.c_attn(x):split(self.n_embd, 2))
  -- (B, T, C) -> (B, nh, T, hs)
  q = q:view(B, T, nh, Cd // nh):transpose(1, 2)
  k = k:view(B, T, nh, Cd // nh):transpose(1, 2)
  v = v:view(B, T, nh, Cd // nh):transpose(1, 2)
  local y = F.scaled_dot_product_attention(q, k, v,
    {dropout_p = self.training and self.dropout or 0.0, is_causal = true})
  y = y:transpose(1, 2):contiguous():view(B, T, Cd)
  return self.resid_dropout(self.c_proj(y))
end

local MLP = Module:extend("MLP")
M.MLP = MLP
-- MLP(config): n_embd -> 4 n_embd, exact GELU, -> n_embd
function MLP:init(config)
  local c = M.GPTConfig(config)
  self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, {bias = c.bias})
  self.gelu = nn.GELU()
  self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, {bias = c.bias})
  self.dropout = nn.Dropout(c.dropout)
  self.n_embd = c.n_embd
end
function MLP:forward(x)
  check_sequence("MLP", x, self.n_embd)
  return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))
end

local Block = Module:extend("Block")
M.Block = Block
-- Block(config): x + attn(ln_1(x)), then x + mlp(ln_2(x)) (pre-LayerNorm, as GPT-2)
function Block:init(config)
  local c = M.GPTConfig(config)
  self.ln_1 = nn.LayerNorm(c.n_embd, {bias = c.bias})
  self.attn = CausalSelfAttention(c)
  self.ln_2 = nn.LayerNorm(c.n_embd, {bias = c.bias})
  self.mlp = MLP(c)
  self.n_embd = c.n_embd
end
function Block:forward(x)
  check_sequence("Block", x, self.n_embd)
  x = x + self.attn(self.ln_1(x))
  return x + self.mlp(self.ln_2(x))
end

-- ---- the model -----------------------------------------------------------------------------

local GPT = Module:extend("GPT")
M.GPT = GPT
-- GPT(config): config as GPTConfig takes it (a table of options)
function GPT:init(config)
  local c = M.GPTConfig(config)
  self.config = c
  local h = nn.ModuleList()
  for _ = 1, c.n_layer do h:append(Block(c)) end
  self.transformer = nn.ModuleDict({
    {"wte", nn.Embedding(c.vocab_size, c.n_embd)},
    {"wpe", nn.Embedding(c.block_size, c.n_embd)},
    {"drop", nn.Dropout(c.dropout)},
    {"h", h},
    {"ln_f", nn.LayerNorm(c.n_embd, {bias = c.bias})},
  })
  self.lm_head = nn.Linear(c.n_embd, c.vocab_size, {bias = false})
  -- weight tying (https://paperswithcode.com/method/weight-tying): one parameter, listed once by parameters()
  self.transformer.wte.weight = self.lm_head.weight
  -- nanoGPT's initialisation: N(0, 0.02) for linear and embedding weights, zero biases, and the residual
  -- projections (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 n_layer)), GPT-2's scaling of the residual path
  self:apply(function(m) self:_init_weights(m) end)
  local residual_std = 0.02 / math.sqrt(2 * c.n_layer)
  for name, p in self:named_parameters() do
    if name:sub(-#"c_proj.weight") == "c_proj.weight" then init.normal_(p, 0.0, residual_std) end
  end
end

function GPT:_init_weights(m)
  local cls = getmetatable(m)
  if cls == nn.Linear then
    init.normal_(m.weight, 0.0, 0.02)
    if m.bias ~= nil then init.zeros_(m.bias) end
  elseif cls == nn.Embedding then
    init.normal_(m.weight, 0.0, 0.02)
  end
end

-- get_num_params(non_embedding = true): parameters counted once (the tied weight once); the position
-- embedding left out by default, as nanoGPT counts
function GPT:get_num_params(non_embedding)
  if non_embedding ~= nil then A.check_boolean("get_num_params", "non_embedding", non_embedding) end
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  if non_embedding ~= false then n = n - self.transformer.wpe.weight:numel() end
  return n
end

-- forward(idx (B, T) int64 [, targets (B, T) int64]) -> logits, loss. With targets: logits (B, T, vocab) and the
-- mean cross-entropy (targets of -1 ignored); without: the last position's logits (B, 1, vocab) and nil, which
-- is all that sampling needs (nanoGPT's inference shortcut)
function GPT:forward(idx, targets)
  local fn = "GPT"
  C.check_input(fn, idx)
  if idx:dim() ~= 2 then raise("%s: expected token indices of shape (B, T), got shape %s", fn, shape_str(idx)) end
  if idx.dtype ~= torch.int64 and idx.dtype ~= torch.int32 then
    raise("%s: expected integer token indices (int64), got %s", fn, idx.dtype)
  end
  local t = idx.shape[1]
  if t == 0 then raise("%s: expected at least one token a row, got idx of shape %s", fn, shape_str(idx)) end
  local bs = self.config.block_size
  if t > bs then raise("%s: Cannot forward sequence of length %d, block size is only %d", fn, t, bs) end
  local tr = self.transformer
  local pos = torch.arange(0, t, {dtype = torch.int64, device = idx.device})
  local x = tr.drop(tr.wte(idx) + tr.wpe(pos))
  for _, block in ipairs(tr.h:children()) do x = block(x) end
  x = tr.ln_f(x)
  if targets ~= nil then
    C.check_input(fn .. " targets", targets)
    if targets.shape ~= idx.shape then
      raise("%s: targets must have the shape of idx %s, got %s", fn, shape_str(idx), shape_str(targets))
    end
    local logits = self.lm_head(x)
    local loss = F.cross_entropy(logits:view(-1, logits.shape[-1]), targets:reshape(-1), {ignore_index = -1})
    return logits, loss
  end
  return self.lm_head(x:narrow(1, t - 1, 1)), nil
end

-- crop_block_size(block_size): a smaller context (a model loaded with a larger one), the position embedding cut
function GPT:crop_block_size(block_size)
  local fn = "crop_block_size"
  block_size = check_int(fn, "block_size", block_size, 1)
  if block_size > self.config.block_size then
    raise("%s: block_size %d is larger than the model's %d", fn, block_size, self.config.block_size)
  end
  self.config.block_size = block_size
  local wpe = self.transformer.wpe
  local w = torch.no_grad(function() return wpe.weight:narrow(0, 0, block_size):clone() end)
  wpe.weight = nn.Parameter(w)
  wpe.num_embeddings = block_size
  return self
end

-- configure_optimizers(weight_decay, learning_rate, betas, device_type): AdamW with two parameter groups, the
-- matrices (dim >= 2: linear weights, embeddings) decayed and the rest (biases, LayerNorm gains) not.
-- device_type is nanoGPT's (it asks for PyTorch's fused AdamW on cuda); tensh's AdamW steps each group in one
-- fused call on every device, so it is accepted and checked only.
function GPT:configure_optimizers(...)
  local fn = "configure_optimizers"
  local a = args(fn, {"weight_decay", "learning_rate", "betas", "device_type"}, ...)
  local wd = A.check_number(fn, "weight_decay", a.weight_decay == nil and 0.1 or a.weight_decay)
  local lr = A.check_number(fn, "learning_rate", a.learning_rate == nil and 6e-4 or a.learning_rate)
  local betas = a.betas == nil and {0.9, 0.95} or a.betas
  if a.device_type ~= nil and a.device_type ~= "cpu" and a.device_type ~= "cuda" then
    raise("%s: device_type must be 'cpu' or 'cuda', got %s", fn, A.show(a.device_type))
  end
  local decay, no_decay = {}, {}
  for _, p in ipairs(self:parameters()) do
    if p.requires_grad then
      if p:dim() >= 2 then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
    end
  end
  return require("tensh.optim").AdamW({{params = decay, weight_decay = wd}, {params = no_decay, weight_decay = 0.0}},
    {lr = lr, betas = betas})
end

-- generate(idx (B, T), max_new_tokens, {temperature = 1.0, top_k}): idx with max_new_tokens sampled tokens
-- appended, each from the softmax of the last position's logits / temperature, only the top_k most likely
-- kept when top_k is given; the context is cropped to block_size. Runs without grad; call model:eval() first
-- for no dropout (as nanoGPT's sample.py does).
function GPT:generate(idx, max_new_tokens, ...)
  local fn = "generate"
  local a = args(fn, {"temperature", "top_k"}, ...)
  C.check_input(fn, idx)
  if idx:dim() ~= 2 then raise("%s: expected token indices of shape (B, T), got shape %s", fn, shape_str(idx)) end
  if idx.shape[1] == 0 then raise("%s: idx must hold at least one token to continue, got shape %s", fn, shape_str(idx)) end
  max_new_tokens = check_int(fn, "max_new_tokens", max_new_tokens, 0)
  local temperature = A.check_number(fn, "temperature", a.temperature == nil and 1.0 or a.temperature)
  if not (temperature > 0) then raise("%s: temperature must be positive, got %s", fn, C.pyfloat(temperature)) end
  local top_k = a.top_k
  if top_k ~= nil then top_k = check_int(fn, "top_k", top_k, 1) end
  local bs = self.config.block_size
  return torch.no_grad(function()
    for _ = 1, max_new_tokens do
      local t = idx.shape[1]
      local cond = t <= bs and idx or idx:narrow(1, t - bs, bs)
      local logits = self(cond)
      logits = logits:select(1, -1) / temperature
      if top_k ~= nil then
        local v = logits:topk(math.min(top_k, logits.shape[-1]))
        logits = logits:masked_fill(logits:lt(v:narrow(-1, v.shape[-1] - 1, 1)), -math.huge)
      end
      local probs = F.softmax(logits, -1)
      idx = torch.cat({idx, torch.multinomial(probs, 1)}, 1)
    end
    return idx
  end)
end

return M
