-- Twin of ../shared/peers/fashion_mnist.py: the same models, batch, optimizer
-- and data handling (whole dataset as tensors, a random permutation per
-- epoch), seconds per epoch (median) and test accuracy, as one JSON line.
--   tensh scripts/bench/fashion_mnist.lua --model mlp --epochs 2
local cli = require "tensh.cli"
local bench = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local args = cli.parse(arg, "Fashion-MNIST epoch time and accuracy (twin of peers/fashion_mnist.py).", {
  {"model", "mlp", "the network", {"mlp", "cnn"}},
  {"epochs", 5, "number of epochs"},
  {"batch", 128, "samples per step"},
  {"device", "auto", "auto, cpu, cuda or cuda:N"},
  {"root", "/usr/share/datasets/fashion-mnist", "where the IDX files are"},
})
local device = cli.device(args.device)
torch.manual_seed(0)

local function load(train)
  local ds = data.FashionMNIST(args.root, {train = train, raw = true})
  local x = ((ds.data:float() / 255) - 0.2860) / 0.3530
  return x:unsqueeze(1):to(device), ds.targets:to(device)
end
local xtr, ytr = load(true)
local xte, yte = load(false)

local model
if args.model == "mlp" then
  model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2),
    nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 10))
else
  model = nn.Sequential(nn.Conv2d(1, 32, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
end
model = model:to(device)
local opt = optim.Adam(model:parameters(), {lr = 1e-3})
local crit = nn.CrossEntropyLoss()
local n = xtr:size(0)
local epoch_s, epoch_cpu_s = {}, {}
for _ = 1, args.epochs do
  model:train()
  if device ~= "cpu" then cuda.synchronize() end
  local t, c0 = torch._clock(), os.clock()
  local perm = torch.randperm(n, {device = device})
  for i = 0, n - 1, args.batch do
    local idx = perm:narrow(0, i, math.min(args.batch, n - i))
    opt:zero_grad()
    local loss = crit(model(xtr:index_select(0, idx)), ytr:index_select(0, idx))
    loss:backward()
    opt:step()
  end
  if device ~= "cpu" then cuda.synchronize() end
  epoch_s[#epoch_s + 1] = torch._clock() - t
  epoch_cpu_s[#epoch_cpu_s + 1] = os.clock() - c0 -- CPU time of all threads: robust to a loaded machine
end
model:eval()
local correct = 0
torch.no_grad(function()
  for i = 0, xte:size(0) - 1, 1000 do
    correct = correct + model(xte:narrow(0, i, 1000)):argmax(1):eq(yte:narrow(0, i, 1000)):sum():item()
  end
end)
table.sort(epoch_s)
table.sort(epoch_cpu_s)
print(('{"bench": "fashion_mnist_%s", "impl": "tensh", "device": "%s", "epochs": %d, "s_per_epoch": %.3f, '
  .. '"cpu_s_per_epoch": %.3f, "test_acc": %.4f, %s}'):format(args.model, device, args.epochs,
  epoch_s[#epoch_s // 2 + 1], epoch_cpu_s[#epoch_cpu_s // 2 + 1], correct / xte:size(0), bench.run_fields()))
