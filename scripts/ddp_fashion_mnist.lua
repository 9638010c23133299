-- Train the Fashion-MNIST CNN of train_fashion_mnist.lua in several
-- processes with DistributedDataParallel: each rank reads its share of the
-- data (DistributedSampler) with batch-size / world samples a step, so the
-- global batch, learning rate and schedule are the single process's and the
-- accuracy should be too.
--   tensh --nproc 2 scripts/ddp_fashion_mnist.lua --epochs 2
--   mpirun -np 8 tensh scripts/ddp_fashion_mnist.lua     (one GPU per process: "nccl")
local cli = require "tensh.cli"

local args = cli.parse(arg, "Train the Fashion-MNIST CNN with DistributedDataParallel (start with tensh --nproc N).", {
  {"epochs", 2, "number of epochs"},
  {"batch-size", 64, "samples per step over all ranks (each rank takes its share)"},
  {"lr", 1e-3, "Adam's learning rate"},
  {"workers", 1, "DataLoader worker threads per rank"},
  {"root", "/usr/share/datasets/fashion-mnist", "where the IDX files are"},
  {"limit", 0, "use only this many training samples (0: all), for quick runs"},
  {"backend", "auto", "mpi, nccl, or auto (nccl with GPUs and NCCL, else mpi)"},
  {"out", "", "save rank 0's model here at the end (a .safetensors path; empty: don't)"},
  {"seed", 42, "random seed (the same on every rank)"},
})

local backend = args.backend
if backend == "auto" then backend = dist.is_nccl_available() and "nccl" or "mpi" end
dist.init_process_group(backend)
local rank, world = dist.get_rank(), dist.get_world_size()
local local_rank = tonumber(os.getenv("LOCAL_RANK") or "0")
local device = torch.device("cpu")
if torch.cuda.is_available() then
  device = torch.device("cuda", local_rank % torch.cuda.device_count())
  torch.cuda.set_device(device.index)
end
if args.batch_size % world ~= 0 then
  error(("--batch-size %d does not split over %d processes"):format(args.batch_size, world), 0)
end
local function say(...) if rank == 0 then print(...) end end

torch.manual_seed(args.seed)
local norm = data.transforms.Normalize({0.2860}, {0.3530})
local train_set = data.FashionMNIST(args.root, {train = true, transform = norm})
local test_set = data.FashionMNIST(args.root, {train = false, transform = norm})
if args.limit > 0 then
  local idx = {}
  for i = 0, math.min(args.limit, #train_set) - 1 do idx[#idx + 1] = i end
  train_set = data.Subset(train_set, idx)
end

local model = nn.Sequential(
  nn.Conv2d(1, 32, 3, {padding = 1}), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),  -- 32 x 14 x 14
  nn.Conv2d(32, 64, 3, {padding = 1}), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2), -- 64 x 7 x 7
  nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)):to(device)
local ddp = nn.parallel.DistributedDataParallel(model, {device_ids = device.type == "cuda" and {device.index} or nil})
local opt = optim.Adam(ddp:parameters(), {lr = args.lr})
local sampler = data.DistributedSampler(train_set, {shuffle = true, seed = args.seed})
local per_rank = args.batch_size // world
local loader = data.DataLoader(train_set, {batch_size = per_rank, sampler = sampler, num_workers = args.workers})
local sched = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = args.epochs * #loader})
local criterion = nn.CrossEntropyLoss()
-- each rank scores its share of the test set; the counts are summed
local test_loader = data.DataLoader(test_set, {batch_size = 1000, num_workers = args.workers,
  sampler = data.DistributedSampler(test_set, {shuffle = false})})

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
  local counts = torch.tensor({correct, total}, {dtype = torch.int64})
  if backend == "nccl" then counts = counts:to(device) end -- nccl reduces CUDA tensors only
  dist.all_reduce(counts)
  return counts[0]:item() / counts[1]:item()
end

say(("tensh: DistributedDataParallel over %d processes (%s, %s), %d training samples, %d a step (%d a rank), "
  .. "%d epochs"):format(world, backend, device, #train_set, args.batch_size, per_rank, args.epochs))
local acc
for epoch = 1, args.epochs do
  sampler:set_epoch(epoch)
  model:train()
  local t0, running, steps = torch._clock(), 0, 0
  for x, y in loader:iter() do
    x, y = x:to(device), y:to(device)
    opt:zero_grad()
    local loss = criterion(ddp(x), y)
    loss:backward()
    opt:step()
    sched:step()
    running, steps = running + loss:item(), steps + 1
  end
  acc = evaluate()
  say(("epoch %d: mean loss %.4f (rank 0's share), test accuracy %.2f %%, %.1f s"):format(epoch, running / steps,
    100 * acc, torch._clock() - t0))
end
if rank == 0 and args.out ~= "" then torch.save(ddp.module:state_dict(), args.out) end
say(("final test accuracy: %.2f %%"):format(100 * acc))
dist.destroy_process_group()
