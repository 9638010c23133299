-- Seed 003's training step counted rather than timed (issue 23): on a CUDA
-- device (BENCH_DEVICE=cuda; the simulated one too) each JSON line's
-- device_activity records the kernels launched and the host synchronisations
-- of one step (tensh bench adds it to every case run on cuda; this case is
-- the step as the seed's tutorial writes it, with clip_grad_norm_ as a
-- training loop adds it). Goal: <= 30 launches, 0 synchronisations.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()

bench.case("mlp_seed003_clipped", function(step) step() end, {device = dev, setup = function()
  torch.manual_seed(0)
  local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
    nn.Linear(512, 10)):to(dev)
  local data = torch.randn(128, 1024, {device = dev})
  local target = torch.randint(0, 10, {128}, {device = dev})
  local opt, crit = optim.Adam(model:parameters()), nn.CrossEntropyLoss()
  return function()
    opt:zero_grad()
    crit(model(data), target):backward()
    nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    opt:step()
  end
end})
