-- The twin of scripts/bench/twins/gpt_step.py: one training step of issue 23's small GPT
-- (models.gpt: 4 layers, 4 heads, width 256, context 128, character vocabulary
-- 65, tied embeddings, causal attention, exact GELU), batch 16, AdamW with
-- weight decay 0.1 on matrices only (configure_optimizers), gradient clipping
-- at 1.0, as nanoGPT's train.py steps.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()
local B, T, V = 16, 128, 65

bench.case("gpt_char_train", function(step) step() end, {device = dev, setup = function()
  torch.manual_seed(0)
  local model = models.gpt.GPT({vocab_size = V, block_size = T, n_layer = 4, n_head = 4, n_embd = 256}):to(dev)
  local opt = model:configure_optimizers(0.1, 3e-4, {0.9, 0.95}, dev:match("^cuda") and "cuda" or "cpu")
  local x = torch.randint(0, V, {B, T}, {device = dev})
  local y = torch.randint(0, V, {B, T}, {device = dev})
  return function()
    opt:zero_grad({set_to_none = true})
    local _, loss = model(x, y)
    loss:backward()
    nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    opt:step()
  end
end})
