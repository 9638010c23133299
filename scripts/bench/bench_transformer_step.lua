-- The twin of scripts/bench/twins/transformer_step.py: one training step (zero_grad,
-- forward, cross-entropy, backward, AdamW) of a 4-layer Transformer encoder
-- (d_model 256, 4 heads, feed-forward 1024, dropout 0.1, batch_first),
-- mean-pooled into 10 classes, sequence 256, batch 16.
-- On cuda (BENCH_DEVICE=cuda, the simulated device too) each line's
-- device_activity has the step's kernel launches and host synchronisations.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()
local B, L, D = 16, 256, 256

bench.case("transformer_encoder_train", function(step) step() end, {device = dev, setup = function()
  torch.manual_seed(0)
  local Net = nn.Module:extend("EncoderClassifier")
  function Net:init()
    local layer = nn.TransformerEncoderLayer(D, 4, {dim_feedforward = 1024, dropout = 0.1, batch_first = true})
    self.enc = nn.TransformerEncoder(layer, 4)
    self.head = nn.Linear(D, 10)
  end
  function Net:forward(x) return self.head(self.enc(x):mean(1)) end
  local model = Net():to(dev)
  local x = torch.randn(B, L, D, {device = dev})
  local y = torch.randint(0, 10, {B}, {device = dev})
  return common.train_step(model, optim.AdamW(model:parameters(), {lr = 1e-4}), nn.CrossEntropyLoss(), x, y)
end})
