-- Seed 003's training step, the twin of scripts/bench/twins/mlp_seed003.py: an
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

-- mlp_sgd_eager / mlp_sgd_graphed (CUDA only): the same MLP trained with SGD
-- (momentum) and MSE, eagerly, and captured once as a CUDA graph
-- (cuda.graph) so that a run copies the batch into the static input and
-- replays: device_activity compares the kernels the host launches per step
-- (a replay is one cudaGraphLaunch, 0 kernel launches) with eager's.
local function sgd_setup(graphed)
  torch.manual_seed(0)
  local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
    nn.Linear(512, 10)):to(dev)
  local x, y = torch.randn(128, 1024, {device = dev}), torch.randn(128, 10, {device = dev})
  local opt = optim.SGD(model:parameters(), 0.01, {momentum = 0.9})
  local function step()
    opt:zero_grad({set_to_none = true})
    nn.F.mse_loss(model(x), y):backward()
    opt:step()
  end
  if not graphed then return step end
  local s = cuda.Stream() -- warm-up on a side stream, then one capture
  s:wait_stream(cuda.current_stream())
  cuda.stream(s, function() for _ = 1, 3 do step() end end)
  cuda.current_stream():wait_stream(s)
  opt:zero_grad({set_to_none = true})
  local g = cuda.CUDAGraph()
  cuda.graph(g, function()
    nn.F.mse_loss(model(x), y):backward()
    opt:step()
  end)
  local batch = torch.randn(128, 1024, {device = dev})
  return function()
    x:copy_(batch)
    g:replay()
  end
end

if tostring(dev):find("^cuda") then
  bench.case("mlp_sgd_eager", function(step) step() end, {device = dev, setup = function() return sgd_setup(false) end})
  bench.case("mlp_sgd_graphed", function(step) step() end, {device = dev, setup = function() return sgd_setup(true) end})
end
