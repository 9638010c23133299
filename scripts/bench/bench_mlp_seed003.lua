-- Seed 003's training step, the twin of ../shared/peers/mlp_seed003.py: an
-- MLP 1024-2048-512-10 with ReLU, batch 128, Adam (default options),
-- cross-entropy; one run = zero_grad, forward, loss, backward, step.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()

bench.case("mlp_seed003", function(step) step() end, {device = dev, setup = function()
  torch.manual_seed(0)
  local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
    nn.Linear(512, 10)):to(dev)
  local data = torch.randn(128, 1024, {device = dev})
  local target = torch.randint(0, 10, {128}, {device = dev})
  return common.train_step(model, optim.Adam(model:parameters()), nn.CrossEntropyLoss(), data, target)
end})
