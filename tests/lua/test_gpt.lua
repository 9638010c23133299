-- models.gpt (nanoGPT's GPT) against PyTorch: the fixture
-- tests/fixtures/gpt/gpt_torch.lua (made by gen_gpt_fixture.py next to it,
-- PyTorch 1.13) holds two small models' weights, and a training step's logits,
-- loss, every parameter's gradient, clip_grad_norm_'s total and the parameters
-- after one AdamW step with configure_optimizers' groups; all in float64, so
-- the comparisons are tight. Then what the fixture cannot hold: nanoGPT's
-- initialisation (statistics), the tied weight, a tiny model learning, generate's
-- shapes, top_k and temperature, and the errors. On the cuda pass
-- (TENSH_TEST_DEVICE) the same cases run on the GPU.
local T = require "harness"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local G = models.gpt
local F64 = {dtype = "float64"}

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local fixture = dofile(here .. "../fixtures/gpt/gpt_torch.lua")

local function tensor(f, opts)
  local t = torch.tensor(f.data, opts)
  if #f.shape == 0 then return t:view({}) end
  return t:view(table.unpack(f.shape))
end

-- the case's model in float64 with the fixture's weights, checking the parameters' names and order
local function build(case)
  local m = G.GPT(case.config):double()
  local i = 0
  torch.no_grad(function()
    for name, p in m:named_parameters() do
      i = i + 1
      local want = case.params[i]
      ok(want ~= nil, "a parameter PyTorch does not have: " .. name)
      eq(name, want[1], "parameter " .. i .. "'s name")
      eq(tostring(p.shape), tostring(torch.Size(want[2].shape)), name .. "'s shape")
      p:copy_(tensor(want[2], F64))
    end
  end)
  eq(i, #case.params, "number of parameters (the tied weight counted once)")
  return m
end

local function by_name(list)
  local t = {}
  for _, e in ipairs(list) do t[e[1]] = e[2] end
  return t
end

for _, case in ipairs(fixture) do
  test("a training step equals PyTorch's (logits, loss, every gradient, clipping, AdamW): " .. case.name, function()
    local m = build(case)
    local idx, targets = tensor(case.idx), tensor(case.targets)
    local logits, loss = m(idx, targets)
    eq(tostring(logits.shape), tostring(torch.Size(case.logits.shape)), "logits' shape")
    close(logits, tensor(case.logits, F64), 1e-10, 1e-12, "logits")
    close(loss, tensor(case.loss, F64), 1e-10, 1e-12, "loss")
    loss:backward()
    local grads = by_name(case.grads)
    for name, p in m:named_parameters() do
      ok(p.grad ~= nil, name .. " has a gradient")
      close(p.grad, tensor(grads[name], F64), 1e-8, 1e-12, "gradient of " .. name)
    end
    local total = nn.utils.clip_grad_norm_(m:parameters(), 1.0)
    close(total, tensor(case.total_norm, F64), 1e-10, 1e-12, "clip_grad_norm_'s total norm")
    local st = case.step
    local opt = m:configure_optimizers(st.weight_decay, st.learning_rate, st.betas, idx.device.type)
    opt:step()
    -- atol: the key bias's gradient is zero but for rounding (a constant added to a row's scores), and AdamW's
    -- first step turns that noise into lr * g / eps, ~1e-11 here, where a real step moves a weight by ~lr
    local after = by_name(case.after)
    for name, p in m:named_parameters() do
      close(p, tensor(after[name], F64), 1e-9, 1e-9, "after AdamW: " .. name)
    end
    -- without targets: the last position's logits only, as nanoGPT's inference path
    local last, none = m(idx)
    eq(none, nil, "no loss without targets")
    eq(tostring(last.shape), tostring(torch.Size({idx.shape[0], 1, case.config.vocab_size})), "last logits' shape")
    local full = m(idx, targets)
    close(last, full:narrow(1, idx.shape[1] - 1, 1), 1e-12, 1e-12, "the last position's logits")
  end)
end

test("state_dict keys are nanoGPT's, the tied weight under both names", function()
  local case = fixture[1]
  local m = G.GPT(case.config)
  local sd = m:state_dict()
  for _, e in ipairs(case.params) do ok(sd[e[1]] ~= nil, "state_dict has " .. e[1]) end
  ok(sd["lm_head.weight"] ~= nil, "and lm_head.weight")
  ok(rawequal(m.lm_head.weight, m.transformer.wte.weight), "one parameter")
  eq(#m:parameters(), #case.params, "parameters() lists it once")
  -- a state_dict round trip through a fresh model keeps them tied
  local m2 = G.GPT(case.config)
  m2:load_state_dict(sd)
  ok(rawequal(m2.lm_head.weight, m2.transformer.wte.weight), "still tied after load_state_dict")
  close(m2.lm_head.weight, m.transformer.wte.weight, 0, 0, "loaded")
end)

test("nanoGPT's initialisation: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)), zero biases", function()
  torch.manual_seed(7)
  local L = 4
  local m = G.GPT({vocab_size = 300, block_size = 128, n_layer = L, n_head = 4, n_embd = 64})
  local function std_near(t, want, what)
    local s = t:double():std():item()
    ok(math.abs(s - want) < 0.06 * want, ("%s: std %.5f, expected %.5f"):format(what, s, want))
    ok(math.abs(t:double():mean():item()) < 0.1 * want, what .. ": mean near 0")
  end
  std_near(m.transformer.wte.weight, 0.02, "wte (= lm_head)")
  std_near(m.transformer.wpe.weight, 0.02, "wpe")
  local blk = m.transformer.h[2]
  std_near(blk.attn.c_attn.weight, 0.02, "c_attn")
  std_near(blk.mlp.c_fc.weight, 0.02, "c_fc")
  std_near(blk.attn.c_proj.weight, 0.02 / math.sqrt(2 * L), "attn.c_proj")
  std_near(blk.mlp.c_proj.weight, 0.02 / math.sqrt(2 * L), "mlp.c_proj")
  eq(blk.attn.c_attn.bias:abs():sum():item(), 0.0, "biases zero")
  eq(blk.ln_1.weight:sum():item(), 64.0, "LayerNorm gains one")
  eq(m:get_num_params(false) - m:get_num_params(), 128 * 64, "get_num_params leaves the position embedding out")
  local n = 0
  for _, p in ipairs(m:parameters()) do n = n + p:numel() end
  eq(m:get_num_params(false), n, "each parameter once")
end)

test("configure_optimizers: matrices decayed, biases and LayerNorm gains not", function()
  local m = G.GPT({vocab_size = 10, block_size = 4, n_layer = 2, n_head = 2, n_embd = 8})
  local opt = m:configure_optimizers(0.1, 1e-3, {0.9, 0.95}, "cpu")
  local g = opt.param_groups
  eq(#g, 2, "two groups")
  eq(g[1].weight_decay, 0.1, "decayed group")
  eq(g[2].weight_decay, 0.0, "not decayed")
  eq(g[1].lr, 1e-3, "lr")
  eq(g[1].betas[2], 0.95, "betas")
  for _, p in ipairs(g[1].params) do ok(p:dim() >= 2, "a matrix in the decayed group") end
  for _, p in ipairs(g[2].params) do eq(p:dim(), 1, "a vector in the other group") end
  -- wte/lm_head, wpe, and per block c_attn, c_proj, c_fc, c_proj
  eq(#g[1].params, 2 + 2 * 4, "decayed tensors")
  eq(#g[2].params, 2 * 8 + 2, "non-decayed tensors")
  m.transformer.wpe.weight:requires_grad_(false)
  eq(#m:configure_optimizers({weight_decay = 0.1}).param_groups[1].params, 9, "frozen parameters left out")
  raises(function() m:configure_optimizers(0.1, 1e-3, {0.9, 0.95}, "tpu") end,
    "configure_optimizers: device_type must be 'cpu' or 'cuda'")
end)

-- a repeating sequence of 5 tokens: its next token is a function of the last one
local function periodic_batch(B, T)
  local rows = {}
  for b = 1, B do
    local r = {}
    for t = 1, T + 1 do r[t] = (b + t) % 5 end
    rows[b] = r
  end
  local all = torch.tensor(rows)
  return all:narrow(1, 0, T), all:narrow(1, 1, T)
end

test("a tiny GPT learns: the loss falls over 30 AdamW steps", function()
  torch.manual_seed(1)
  local m = G.GPT({vocab_size = 5, block_size = 8, n_layer = 2, n_head = 2, n_embd = 16})
  local x, y = periodic_batch(4, 8)
  local opt = m:configure_optimizers(0.1, 1e-2, {0.9, 0.95}, x.device.type)
  local first, last
  for i = 1, 30 do
    opt:zero_grad({set_to_none = true})
    local _, loss = m(x, y)
    loss:backward()
    nn.utils.clip_grad_norm_(m:parameters(), 1.0)
    opt:step()
    if i == 1 then first = loss:item() end
    last = loss:item()
  end
  ok(math.abs(first - math.log(5)) < 0.2, ("the first loss %.4f is near ln 5 = %.4f (a fresh model guesses)"):format(
    first, math.log(5)))
  ok(last < 0.3 * first, ("the loss fell from %.4f to %.4f"):format(first, last))
  -- what it learnt: greedy generation continues the cycle
  m:eval()
  local out = m:generate(torch.tensor({{1, 2, 3}}), 6, {top_k = 1})
  eq(table.concat(T.flat(out), " "), "1 2 3 4 0 1 2 3 4", "greedy continuation")
end)

test("generate: shape, the prompt kept, context cropped to block_size, top_k and temperature", function()
  torch.manual_seed(3)
  local V, bs = 9, 4
  local m = G.GPT({vocab_size = V, block_size = bs, n_layer = 1, n_head = 2, n_embd = 8})
  -- spread the logits so that sampling from all of them and from the top 2 differ
  torch.no_grad(function() m.lm_head.weight:mul_(100) end)
  m:eval()
  local idx = torch.tensor({{1, 2}, {3, 4}, {5, 6}})
  local out = m:generate(idx, 7)
  eq(tostring(out.shape), tostring(torch.Size({3, 9})), "(B, T + max_new_tokens), past block_size")
  eq(out.dtype, torch.int64, "int64")
  close(out:narrow(1, 0, 2), idx, 0, 0, "the prompt is kept")
  ok(out:min():item() >= 0 and out:max():item() < V, "tokens in the vocabulary")
  eq(tostring(m:generate(idx, 0).shape), tostring(idx.shape), "no new tokens")
  -- top_k: every sampled token is among the k most likely of its step (the context cropped as generate does)
  for _, k in ipairs({1, 2}) do
    local g = m:generate(idx, 6, {top_k = k, temperature = 0.8})
    for t = 2, g.shape[1] - 1 do
      local lo = math.max(0, t - bs)
      local logits = m(g:narrow(1, lo, t - lo)):select(1, 0)
      local topk = logits:topk(k)
      local tok = g:narrow(1, t, 1)
      local kth = topk:narrow(1, k - 1, 1)
      local chosen = logits:gather(1, tok)
      ok(chosen:ge(kth):all(), ("top_k = %d: token %d is outside the top %d"):format(k, t, k))
    end
  end
  -- top_k = 1 is greedy: the argmax, whatever the temperature
  local g1 = m:generate(idx, 3, {top_k = 1, temperature = 5.0})
  local g2 = m:generate(idx, 3, {top_k = 1})
  close(g1, g2, 0, 0, "greedy at any temperature")
  local greedy = idx
  for _ = 1, 3 do greedy = torch.cat({greedy, m(greedy):select(1, 0):argmax(-1, {keepdim = true})}, 1) end
  close(g1, greedy, 0, 0, "top_k = 1 is the argmax")
  -- without top_k, tokens outside the top 2 appear; a top_k above the vocabulary is the whole vocabulary
  local wide = m:generate(torch.zeros(64, 1, {dtype = torch.int64}), 1, {temperature = 10.0})
  local logits = m(torch.zeros(64, 1, {dtype = torch.int64})):select(1, 0)
  local outside = logits:gather(1, wide:narrow(1, 1, 1)):lt(logits:topk(2):narrow(1, 1, 1)):sum():item()
  ok(outside > 0, "sampling without top_k reaches beyond the top 2")
  eq(tostring(m:generate(idx, 2, {top_k = 100}).shape), tostring(torch.Size({3, 4})), "top_k > vocab_size")
  ok(torch.is_grad_enabled(), "grad mode restored after generate")
end)

test("dropout: training draws masks, eval is deterministic", function()
  local m = G.GPT({vocab_size = 6, block_size = 4, n_layer = 1, n_head = 2, n_embd = 8, dropout = 0.5})
  local idx = torch.tensor({{0, 1, 2, 3}})
  local a, b = m(idx, idx), m(idx, idx)
  ok(not torch.equal(a, b), "two training forwards differ")
  m:eval()
  ok(torch.equal(m(idx, idx), m(idx, idx)), "eval forwards agree")
end)

test("crop_block_size keeps the first positions", function()
  local m = G.GPT({vocab_size = 6, block_size = 8, n_layer = 1, n_head = 2, n_embd = 8})
  local w = m.transformer.wpe.weight:narrow(0, 0, 3):clone()
  m:crop_block_size(3)
  eq(m.config.block_size, 3, "config")
  close(m.transformer.wpe.weight, w, 0, 0, "the first 3 positions")
  raises(function() m(torch.zeros(1, 4, {dtype = torch.int64})) end,
    "GPT: Cannot forward sequence of length 4, block size is only 3")
  raises(function() m:crop_block_size(5) end, "crop_block_size: block_size 5 is larger than the model's 3")
end)

test("bad configurations and inputs are errors that say what is wrong", function()
  raises(function() G.GPT({n_embd = 10, n_head = 3}) end, "GPTConfig: n_embd (10) must be divisible by n_head (3)")
  raises(function() G.GPT({n_layers = 2}) end, "GPTConfig: unknown option 'n_layers'")
  raises(function() G.GPT({vocab_size = 0}) end, "GPTConfig: vocab_size must be at least 1, got 0")
  raises(function() G.GPT({dropout = 1.5}) end, "dropout probability has to be between 0 and 1")
  raises(function() G.GPT({bias = 1}) end, "bias")
  raises(function() G.GPTConfig(3) end, "GPTConfig: expected a table of options")
  local m = G.GPT({vocab_size = 6, block_size = 4, n_layer = 1, n_head = 2, n_embd = 8})
  raises(function() m(torch.zeros(1, 5, {dtype = torch.int64})) end,
    "GPT: Cannot forward sequence of length 5, block size is only 4")
  raises(function() m(torch.zeros(1, 3)) end, "GPT: expected integer token indices (int64), got torch.float32")
  raises(function() m(torch.zeros(3, {dtype = torch.int64})) end, "GPT: expected token indices of shape (B, T), got shape (3,)")
  raises(function() m(torch.zeros(2, 3, {dtype = torch.int64}), torch.zeros(2, 2, {dtype = torch.int64})) end,
    "GPT: targets must have the shape of idx (2, 3), got (2, 2)")
  raises(function() m(torch.zeros(2, 0, {dtype = torch.int64})) end,
    "GPT: expected at least one token a row, got idx of shape (2, 0)")
  raises(function() G.CausalSelfAttention({n_embd = 8, n_head = 2})(nil) end,
    "CausalSelfAttention: expected a tensor input, got nil")
  raises(function() G.Block({n_embd = 8, n_head = 2})(torch.zeros(2, 8)) end,
    "Block: expected an input of shape (B, T, 8), got (2, 8)")
  raises(function() G.MLP({n_embd = 8, n_head = 2})(torch.zeros(1, 2, 4)) end,
    "MLP: expected an input of shape (B, T, 8), got (1, 2, 4)")
  raises(function() m("tokens") end, "GPT: expected a tensor input, got string")
  local idx = torch.zeros(1, 2, {dtype = torch.int64})
  raises(function() m:generate(idx, 2, {temperature = 0}) end, "generate: temperature must be positive, got 0")
  raises(function() m:generate(idx, 2, {top_k = 0}) end, "generate: top_k must be at least 1, got 0")
  raises(function() m:generate(idx, -1) end, "generate: max_new_tokens must be at least 0, got -1")
  raises(function() m:generate(idx, 2, {top_p = 0.9}) end, "generate: unknown option 'top_p'")
  raises(function() m:generate(torch.zeros(1, 0, {dtype = torch.int64}), 2) end,
    "generate: idx must hold at least one token to continue")
end)

T.run()
