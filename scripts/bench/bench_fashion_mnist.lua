-- Twin of scripts/bench/twins/fashion_mnist.py: one training epoch of its MLP
-- and of its CNN on Fashion-MNIST, the same models, batch 128, Adam, data
-- handling (the whole dataset as tensors, a random permutation per epoch).
-- One run = one epoch; the runner's first (block-size) epoch is the warm-up,
-- as run.sh drops the twin's first epoch. Registered only where the dataset
-- is (Debian's dataset-fashion-mnist; $FASHION_MNIST_ROOT elsewhere), and
-- skipped when $BENCH_FASHION is 0 (each epoch takes seconds).
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()
local root = os.getenv("FASHION_MNIST_ROOT") or "/usr/share/datasets/fashion-mnist"
local f = io.open(root .. "/train-images-idx3-ubyte.gz") or io.open(root .. "/train-images-idx3-ubyte")
if os.getenv("BENCH_FASHION") == "0" then
  if f then f:close() end
  return
end
if not f then
  io.stderr:write("bench_fashion_mnist: no Fashion-MNIST at ", root, ": cases skipped\n")
  return
end
f:close()

local function models(kind)
  if kind == "mlp" then
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2),
      nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 10))
  end
  return nn.Sequential(nn.Conv2d(1, 32, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
end

for _, kind in ipairs({"mlp", "cnn"}) do
  bench.case("fashion_mnist_" .. kind, function(epoch) epoch() end, {device = dev, min_run_time = 0.01,
    setup = function()
      torch.manual_seed(0)
      local ds = data.FashionMNIST(root, {train = true, raw = true})
      local x = (((ds.data:float() / 255) - 0.2860) / 0.3530):unsqueeze(1):to(dev)
      local y = ds.targets:to(dev)
      local model = models(kind):to(dev)
      local opt, crit = optim.Adam(model:parameters(), {lr = 1e-3}), nn.CrossEntropyLoss()
      local n, batch = x:size(0), 128
      return function()
        model:train()
        local perm = torch.randperm(n, {device = dev})
        for i = 0, n - 1, batch do
          local idx = perm:narrow(0, i, math.min(batch, n - i))
          opt:zero_grad()
          crit(model(x:index_select(0, idx)), y:index_select(0, idx)):backward()
          opt:step()
        end
      end
    end})
end
