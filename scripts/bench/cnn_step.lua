-- Benchmark: one training step (forward, cross-entropy, backward, Adam) of the
-- Fashion-MNIST CNN on the CPU, batch 100: Conv2d(1,32,3,p1) BN ReLU MaxPool2
-- Conv2d(32,64,3,p1) BN ReLU MaxPool2 Flatten Linear(3136,128) ReLU Linear(128,10).
-- The median of 10 steps after 3 warm-up steps. One JSON line on stdout.
torch.manual_seed(0)
local clock = torch._clock
local model = nn.Sequential(
  nn.Conv2d(1, 32, 3, {padding = 1}), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 3, {padding = 1}), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
local opt = optim.Adam(model:parameters())
local crit = nn.CrossEntropyLoss()
local x, y = torch.randn(100, 1, 28, 28), torch.randint(0, 10, {100})
local function step()
  opt:zero_grad()
  local loss = crit(model(x), y)
  loss:backward()
  opt:step()
end
for _ = 1, 3 do step() end
local ts = {}
for i = 1, 10 do
  local t0 = clock()
  step()
  ts[i] = (clock() - t0) * 1000
end
table.sort(ts)
print(('{"bench": "cnn_step", "impl": "tensh", "device": "cpu", "ms_per_step": %.2f}'):format((ts[5] + ts[6]) / 2))
