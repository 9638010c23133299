-- Train an MLP or a small CNN on Fashion-MNIST on the best device available:
-- progress on the terminal, TensorBoard logs under runs/, a checkpoint each
-- epoch, and --resume to continue exactly where a run stopped.
--   tensh scripts/train_fashion_mnist.lua --model cnn --epochs 5
local cli = require "tensh.cli"
local progress = require "tensh.progress"

local args = cli.parse(arg, "Train a classifier on Fashion-MNIST (Debian's dataset-fashion-mnist).", {
  {"model", "mlp", "the network", {"mlp", "cnn"}},
  {"epochs", 5, "number of epochs"},
  {"device", "auto", "auto, cpu, cuda or cuda:N"},
  {"batch-size", 64, "samples per step"},
  {"lr", 1e-3, "Adam's learning rate"},
  {"workers", 2, "DataLoader worker threads"},
  {"root", "/usr/share/datasets/fashion-mnist", "where the IDX files are"},
  {"out", "checkpoints", "directory for checkpoints"},
  {"logdir", "runs", "TensorBoard log directory (one sub-directory per model)"},
  {"limit", 0, "use only this many training samples (0: all), for quick runs"},
  {"seed", 42, "random seed"},
  {"resume", false, "continue from the last checkpoint in --out"},
  {"stop-after", 0, "stop after this epoch (0: run them all); --resume continues the same run"},
})

local device = cli.device(args.device)
torch.manual_seed(args.seed)

-- data: normalised with the training set's mean and std, as the usual tutorials do
local norm = data.transforms.Normalize({0.2860}, {0.3530})
local train_set = data.FashionMNIST(args.root, {train = true, transform = norm})
local test_set = data.FashionMNIST(args.root, {train = false, transform = norm})
if args.limit > 0 then
  local idx = {}
  for i = 0, math.min(args.limit, #train_set) - 1 do idx[#idx + 1] = i end
  train_set = data.Subset(train_set, idx)
end
local test_loader = data.DataLoader(test_set, {batch_size = 1000, num_workers = args.workers})

local function make_model(kind)
  if kind == "mlp" then
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 256), nn.ReLU(),
      nn.Linear(256, 10))
  end
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, {padding = 1}), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),  -- 32 x 14 x 14
    nn.Conv2d(32, 64, 3, {padding = 1}), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2), -- 64 x 7 x 7
    nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
end

local model = make_model(args.model):to(device)
local opt = optim.Adam(model:parameters(), {lr = args.lr})
-- the learning rate decays along a cosine over the whole run, step by step
local steps_per_epoch = (#train_set + args.batch_size - 1) // args.batch_size
local sched = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = args.epochs * steps_per_epoch})
local criterion = nn.CrossEntropyLoss()
local ckpt_path = ("%s/fashion_mnist_%s.safetensors"):format(args.out, args.model)

local start_epoch, step = 1, 0
if args.resume then
  local ok, ck = pcall(torch.load, ckpt_path)
  if not ok then error(("--resume: no checkpoint to resume from (%s)"):format(ck), 0) end
  model:load_state_dict(ck.model)
  opt:load_state_dict(ck.optim)
  sched:load_state_dict(ck.sched)
  torch.set_rng_state(ck.rng)
  start_epoch, step = ck.epoch + 1, ck.step
  if ck.epoch >= args.epochs then -- nothing left: say so, and write no empty event file
    print(("%s: that run already finished its %d epochs (test accuracy %.2f %%); nothing to resume. "
      .. "Raise --epochs to train further, or drop --resume to start afresh."):format(ckpt_path, ck.epoch, 100 * ck.accuracy))
    return
  end
  print(("resuming after epoch %d of %d (step %d) from %s"):format(ck.epoch, args.epochs, step, ckpt_path))
end

local writer = tb.SummaryWriter(("%s/fashion_mnist_%s"):format(args.logdir, args.model))

local function evaluate()
  model:eval()
  local correct, total = 0, 0
  torch.no_grad(function()
    for x, y in test_loader:iter() do
      x, y = x:to(device), y:to(device)
      correct = correct + model(x):argmax(1):eq(y):sum():item()
      total = total + y:size(0)
    end
  end)
  return correct / total
end

print(("tensh: training %s on %s, %d training samples, %d epochs"):format(args.model, device, #train_set, args.epochs))
local acc = nil
for epoch = start_epoch, args.epochs do
  -- one seed per epoch: the order of every epoch is the same after a resume
  local loader = data.DataLoader(train_set, {batch_size = args.batch_size, shuffle = true,
    num_workers = args.workers, seed = args.seed * 1000 + epoch})
  model:train()
  local bar <close> = progress.new({total = #loader, desc = ("epoch %d/%d"):format(epoch, args.epochs)})
  local t0, running = torch._clock(), 0
  for x, y in loader:iter() do
    x, y = x:to(device), y:to(device)
    opt:zero_grad()
    local loss = criterion(model(x), y)
    loss:backward()
    opt:step()
    sched:step()
    step = step + 1
    local l = loss:item()
    running = running + l
    if step % 50 == 0 then writer:add_scalar("train/loss", l, step) end
    bar:update(1, {loss = ("%.4f"):format(l)})
  end
  bar:close()
  acc = evaluate()
  local secs = torch._clock() - t0
  writer:add_scalar("test/accuracy", acc, epoch)
  writer:add_scalar("train/epoch_seconds", secs, epoch)
  writer:flush()
  print(("epoch %d: mean loss %.4f, test accuracy %.2f %%, %.1f s"):format(epoch, running / #loader, 100 * acc, secs))
  os.execute(("mkdir -p '%s'"):format(args.out))
  torch.save({model = model:state_dict(), optim = opt:state_dict(), sched = sched:state_dict(), epoch = epoch, step = step,
    rng = torch.get_rng_state(), accuracy = acc}, ckpt_path)
  if epoch == args.stop_after then
    print(("stopping after epoch %d as asked; continue with --resume"):format(epoch))
    break
  end
end
writer:close()
if acc then print(("final test accuracy: %.2f %% (checkpoint %s)"):format(100 * acc, ckpt_path)) end
