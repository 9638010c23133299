-- Seed 000's CIFAR-10 classifier: torchvision's MobileNetV3-small
-- (models.mobilenet_v3_small) trained with AdamW. Without the CIFAR-10 binary
-- files it says where it looked and trains on synthetic images instead.
local cli = require "tensh.cli"
local progress = require "tensh.progress"
local args = cli.parse(arg, "Train MobileNetV3-small on CIFAR-10.", {
  {"root", "data/cifar-10-batches-bin", "directory with data_batch_1.bin ... test_batch.bin"},
  {"epochs", 2, "number of epochs"},
  {"batch-size", 128, "samples per step"},
  {"lr", 1e-3, "AdamW's learning rate"},
  {"device", "auto", "auto, cpu, cuda or cuda:N"},
  {"workers", 2, "DataLoader worker threads"},
  {"synthetic", 0, "use this many synthetic images instead of CIFAR-10 (0: CIFAR-10 if present)"},
})
local device = cli.device(args.device)
torch.manual_seed(0)

local mean, std = {0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}
local train_tf = data.transforms.Compose({data.transforms.RandomCrop(32, {padding = 4}),
  data.transforms.RandomHorizontalFlip(0.5), data.transforms.Normalize(mean, std)})
local test_tf = data.transforms.Normalize(mean, std)

local train_set, test_set
local ok, err = pcall(function()
  if args.synthetic > 0 then error("synthetic data requested", 0) end
  train_set = data.CIFAR10(args.root, {train = true, transform = train_tf})
  test_set = data.CIFAR10(args.root, {train = false, transform = test_tf})
end)
if not ok then
  local n = args.synthetic > 0 and args.synthetic or 2048
  -- the whole message: where the dataset was looked for is on its next lines
  print(("CIFAR-10 not used: %s\nTraining on %d synthetic 3x32x32 images instead."):format(
    (tostring(err):gsub("^[^\n]-%.lua:%d+: ", ""):gsub("\n", "\n  ")), n))
  -- images whose class is written into their colour balance, so there is something to learn
  local y = torch.randint(0, 10, {n})
  local x = torch.randn(n, 3, 32, 32) * 0.5 + y:float():view(n, 1, 1, 1) / 10
  train_set = data.TensorDataset(x, y)
  local m = math.max(n // 4, 1)
  test_set = data.TensorDataset(x:narrow(0, 0, m), y:narrow(0, 0, m))
end

local model = models.mobilenet_v3_small({num_classes = 10})
local n_params = 0
for _, p in ipairs(model:parameters()) do n_params = n_params + p:numel() end
print(("model: MobileNetV3-small, %d parameters"):format(n_params))
model = model:to(device)
local opt = optim.AdamW(model:parameters(), {lr = args.lr})
local criterion = nn.CrossEntropyLoss({label_smoothing = 0.1})
local loader = data.DataLoader(train_set, {batch_size = args.batch_size, shuffle = true, num_workers = args.workers,
  drop_last = true, seed = 0})
local test_loader = data.DataLoader(test_set, {batch_size = 500, num_workers = args.workers})

for epoch = 1, args.epochs do
  model:train()
  local bar <close> = progress.new({total = #loader, desc = ("epoch %d/%d"):format(epoch, args.epochs)})
  local t0, seen = torch._clock(), 0
  for x, y in loader:iter() do
    x, y = x:to(device), y:to(device)
    opt:zero_grad()
    local loss = criterion(model(x), y)
    loss:backward()
    opt:step()
    seen = seen + x:size(0)
    bar:update(1, {loss = ("%.3f"):format(loss:item())})
  end
  bar:close()
  local secs = torch._clock() - t0
  model:eval()
  local correct, total = 0, 0
  torch.no_grad(function()
    for x, y in test_loader:iter() do
      correct = correct + model(x:to(device)):argmax(1):eq(y:to(device)):sum():item()
      total = total + y:size(0)
    end
  end)
  print(("epoch %d: test accuracy %.2f %%, %.0f images/s"):format(epoch, 100 * correct / total, seen / secs))
end
