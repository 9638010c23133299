-- One training step (forward, cross-entropy, backward, Adam) of CNNs on
-- 28x28 images, batch 100 (no PyTorch twin of its own: the Fashion-MNIST
-- epoch of bench_fashion_mnist.lua is the compared one).
--   cnn_step: Conv2d(1,32,3,p1) BN ReLU MaxPool2 Conv2d(32,64,3,p1) BN ReLU
--     MaxPool2 Flatten Linear(3136,128) ReLU Linear(128,10)
--   cnn_step_nobn: the same without batch norm, the Fashion-MNIST CNN
-- On cuda (BENCH_DEVICE=cuda, the simulated device too) each line's
-- device_activity has the step's kernel launches and host synchronisations.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()

local function cnn(bn)
  local function norm(c) return bn and nn.BatchNorm2d(c) or nn.Identity() end
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, {padding = 1}), norm(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, {padding = 1}), norm(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
end

for _, c in ipairs({{"cnn_step", true}, {"cnn_step_nobn", false}}) do
  local name, bn = c[1], c[2]
  bench.case(name, function(step) step() end, {device = dev, setup = function()
    torch.manual_seed(0)
    local model = cnn(bn):to(dev)
    local x, y = torch.randn(100, 1, 28, 28, {device = dev}), torch.randint(0, 10, {100}, {device = dev})
    return common.train_step(model, optim.Adam(model:parameters()), nn.CrossEntropyLoss(), x, y)
  end})
end
