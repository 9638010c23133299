-- Seed 003's training step, the twin of ../shared/peers/mlp_seed003.py: an
-- MLP 1024-2048-512-10 with ReLU, batch 128, Adam (default options),
-- cross-entropy; one run = zero_grad, forward, loss, backward, step.
-- mlp_seed003_clipped adds clip_grad_norm_ at 1.0 before the step, as
-- training loops do. On cuda (BENCH_DEVICE=cuda, the simulated device too)
-- each line's device_activity has the step's kernel launches and host
-- synchronisations (issue 23's goal: <= 30 launches, 0 synchronisations).
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()

local function setup(clip)
  torch.manual_seed(0)
  local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
    nn.Linear(512, 10)):to(dev)
  local data = torch.randn(128, 1024, {device = dev})
  local target = torch.randint(0, 10, {128}, {device = dev})
  local opt, crit = optim.Adam(model:parameters()), nn.CrossEntropyLoss()
  if not clip then return common.train_step(model, opt, crit, data, target) end
  return function()
    opt:zero_grad()
    crit(model(data), target):backward()
    nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    opt:step()
  end
end

bench.case("mlp_seed003", function(step) step() end, {device = dev, setup = function() return setup(false) end})
bench.case("mlp_seed003_clipped", function(step) step() end, {device = dev, setup = function() return setup(true) end})
