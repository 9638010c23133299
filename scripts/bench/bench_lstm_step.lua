-- The twin of scripts/bench/twins/lstm_step.py: one training step (zero_grad,
-- forward, cross-entropy, backward, Adam) of a 2-layer LSTM language model,
-- vocab 1000, embedding 256, hidden 256, sequence 64, batch 32, batch_first.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()
local B, L, V, E, H = 32, 64, 1000, 256, 256

bench.case("lstm_lm_train", function(step) step() end, {device = dev, setup = function()
  torch.manual_seed(0)
  local LM = nn.Module:extend("LM")
  function LM:init()
    self.emb = nn.Embedding(V, E)
    self.lstm = nn.LSTM(E, H, {num_layers = 2, batch_first = true})
    self.out = nn.Linear(H, V)
  end
  function LM:forward(x)
    local h = self.lstm(self.emb(x))
    return self.out(h):reshape(-1, V)
  end
  local model = LM():to(dev)
  local x = torch.randint(0, V, {B, L}, {device = dev})
  local y = torch.randint(0, V, {B, L}, {device = dev})
  return common.train_step(model, optim.Adam(model:parameters(), {lr = 1e-3}), nn.CrossEntropyLoss(), x, y:reshape(-1))
end})
