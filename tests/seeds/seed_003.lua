-- Seed 003, "How to Use GPU Training in PyTorch",
-- ported line for line. GPU lines run when cuda.is_available(); without a GPU
-- each must raise a Lua error naming the call. Python's `import time` is
-- tensh.time; enumerate(loader) is a counter beside loader:iter().
-- The article times 100 steps of a 1024-2048-512-10 MLP on each device (about
-- 25 s on a 2-core CPU, PyTorch too); the test runs 3 unless TENSH_SEED_FULL=1.
package.path = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local check = require "seed_check"
local eq, ok, close, raises, no_cuda = check.eq, check.ok, check.close, check.raises, check.no_cuda
local full = os.getenv("TENSH_SEED_FULL") == "1"
torch.manual_seed(0)

-- ---- Introduction: a concrete comparison ------------------------------------------------------
do
  -- import torch; import torch.nn as nn; import time
  local time = require "tensh.time"

  -- Simple neural network
  local model = nn.Sequential(
    nn.Linear(1024, 2048),
    nn.ReLU(),
    nn.Linear(2048, 512),
    nn.ReLU(),
    nn.Linear(512, 10)
  )

  -- Generate random data
  local data = torch.randn(128, 1024)
  local target = torch.randint(0, 10, {128})

  -- CPU training
  local model_cpu = model
  local criterion = nn.CrossEntropyLoss()
  local optimizer = torch.optim.Adam(model_cpu:parameters())
  eq(optimizer.defaults.lr, 1e-3, "Adam's default lr")

  local steps = full and 100 or 3
  local losses = {}
  local start = time.time()
  for _ = 1, steps do
    optimizer:zero_grad()
    local output = model_cpu(data)
    local loss = criterion(output, target)
    loss:backward()
    optimizer:step()
    losses[#losses + 1] = loss:item()
  end
  local cpu_time = time.time() - start
  ok(cpu_time > 0, "cpu_time is positive")
  ok(losses[#losses] < losses[1], ("the CPU steps lower the loss: %.4f -> %.4f"):format(losses[1], losses[#losses]))

  -- GPU training
  if torch.cuda.is_available() then
    local model_gpu = model:cuda()
    local data_gpu = data:cuda()
    local target_gpu = target:cuda()
    optimizer = torch.optim.Adam(model_gpu:parameters())

    start = time.time()
    local loss
    for _ = 1, steps do
      optimizer:zero_grad()
      local output = model_gpu(data_gpu)
      loss = criterion(output, target_gpu)
      loss:backward()
      optimizer:step()
    end
    torch.cuda.synchronize() -- (the article reads the clock while the GPU may still be working)
    local gpu_time = time.time() - start

    print(("CPU time: %.2fs"):format(cpu_time))
    print(("GPU time: %.2fs"):format(gpu_time))
    print(("Speedup: %.2fx"):format(cpu_time / gpu_time))
    ok(loss:item() < losses[1], "the GPU steps go on lowering the loss")
  else
    no_cuda(function() return model:cuda() end, "to")
    no_cuda(function() return data:cuda() end, "cuda")
  end
end

-- ---- Checking GPU Availability and Setup ---------------------------------------------------------
do
  -- Check if CUDA is available
  print(("CUDA available: %s"):format(torch.cuda.is_available()))
  print(("CUDA version: %s"):format(torch.version.cuda))
  eq(torch.version.cuda, cuda.version, "torch.version.cuda")

  -- Number of GPUs
  print(("Number of GPUs: %d"):format(torch.cuda.device_count()))

  -- Current GPU
  if torch.cuda.is_available() then
    print(("Current device: %d"):format(torch.cuda.current_device()))
    print(("Device name: %s"):format(torch.cuda.get_device_name(0)))

    -- Detailed GPU properties
    local props = torch.cuda.get_device_properties(0)
    print(("Total memory: %.2f GB"):format(props.total_memory / 1e9))
    print(("Compute capability: %d.%d"):format(props.major, props.minor))
    print(("Multi-processor count: %d"):format(props.multi_processor_count))
    ok(props.total_memory > 0 and props.major >= 1 and props.multi_processor_count > 0, "device properties")
    eq(props.name, torch.cuda.get_device_name(0), "props.name")
  else
    no_cuda(function() return torch.cuda.get_device_properties(0) end, "cuda.get_device_properties")
  end
end

-- ---- Moving Models and Data to GPU ----------------------------------------------------------------
local device = torch.device(torch.cuda.is_available() and 'cuda' or 'cpu')
local SimpleNet
do
  -- Define device (works whether GPU is available or not)
  print(("Using device: %s"):format(device))

  -- Create a model
  SimpleNet = nn.Module:extend("SimpleNet")
  function SimpleNet:init()
    self.fc1 = nn.Linear(784, 256)
    self.fc2 = nn.Linear(256, 10)
    self.relu = nn.ReLU()
  end
  function SimpleNet:forward(x)
    x = self.relu(self.fc1(x))
    return self.fc2(x)
  end

  local model = SimpleNet():to(device) -- Move model to GPU

  -- Create tensors on GPU
  local x = torch.randn(32, 784):to(device)
  local y = torch.randint(0, 10, {32}):to(device)

  -- Alternative: create directly on GPU
  local x_gpu = torch.randn(32, 784, {device = device})
  eq(x.device, device.type == "cuda" and torch.device("cuda:0") or device, "x:to(device)")
  eq(x_gpu.device, x.device, "torch.randn(..., {device = device})")
  eq(model(x).shape, torch.Size({32, 10}), "model(x)")
  eq(y.device, x.device, "y:to(device)")

  -- For multi-GPU systems, specify GPU index
  if torch.cuda.device_count() > 1 then
    local model_gpu1 = SimpleNet():to('cuda:1') -- Use second GPU
    eq(tostring(model_gpu1.fc1.weight.device), "cuda:1", "SimpleNet():to('cuda:1')")
  end

  -- The critical rule: all tensors in an operation must be on the same device.
  if torch.cuda.is_available() then
    local cpu_t = torch.randn(32, 784)
    local err = raises(function() return cpu_t * x_gpu end, "cpu", "a CPU tensor times a GPU tensor")
    ok(err:find("cuda:0", 1, true) ~= nil, "the error names both devices: " .. err)
    raises(function() return model(cpu_t) end, "input is on cpu but the layer's parameters are on cuda:0",
      "a CPU batch into a GPU model")
  else
    no_cuda(function() return SimpleNet():to('cuda') end, "to")
    no_cuda(function() return torch.randn(32, 784, {device = 'cuda'}) end, "randn")
  end
end

-- ---- Complete GPU Training Example ----------------------------------------------------------------
local MLP, train_dataset
do
  -- import torch.optim as optim; from torch.utils.data import DataLoader, TensorDataset
  local DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

  -- Create synthetic dataset
  local X_train = torch.randn(1000, 784)
  local y_train = torch.randint(0, 10, {1000})
  train_dataset = TensorDataset(X_train, y_train)
  local train_loader = DataLoader(train_dataset, {batch_size = 64, shuffle = true})
  eq(#train_dataset, 1000, "len(train_dataset)")

  -- Define model
  MLP = nn.Module:extend("MLP")
  function MLP:init()
    self.layers = nn.Sequential(
      nn.Linear(784, 512),
      nn.ReLU(),
      nn.Dropout(0.2),
      nn.Linear(512, 256),
      nn.ReLU(),
      nn.Dropout(0.2),
      nn.Linear(256, 10)
    )
  end
  function MLP:forward(x)
    return self.layers(x)
  end

  local model = MLP():to(device)
  local criterion = nn.CrossEntropyLoss()
  local optimizer = optim.Adam(model:parameters(), {lr = 0.001})

  -- Training loop
  local num_epochs = 10
  local epoch_losses = {}
  for epoch = 0, num_epochs - 1 do
    model:train()
    local total_loss = 0

    local batch_idx = -1
    for data, target in train_loader:iter() do
      batch_idx = batch_idx + 1
      -- Move batch to GPU
      data, target = data:to(device), target:to(device)

      -- Forward pass
      optimizer:zero_grad()
      local output = model(data)
      local loss = criterion(output, target)

      -- Backward pass
      loss:backward()
      optimizer:step()

      total_loss = total_loss + loss:item()
    end
    eq(batch_idx, 15, "enumerate(train_loader): 16 batches, counted from 0")

    local avg_loss = total_loss / #train_loader
    print(("Epoch %d/%d, Loss: %.4f"):format(epoch + 1, num_epochs, avg_loss))
    epoch_losses[#epoch_losses + 1] = avg_loss
  end
  eq(#train_loader, 16, "len(train_loader)")
  ok(math.abs(epoch_losses[1] - math.log(10)) < 0.3, ("the first epoch starts near ln 10: %.4f"):format(epoch_losses[1]))
  ok(epoch_losses[num_epochs] < 0.5 * epoch_losses[1],
    ("the MLP learns the 1000 random labels: %.4f -> %.4f"):format(epoch_losses[1], epoch_losses[num_epochs]))
end

-- ---- Multi-GPU Training with DataParallel and DistributedDataParallel ----------------------------
do
  local model = MLP()
  if torch.cuda.device_count() > 1 then
    print(("Using %d GPUs"):format(torch.cuda.device_count()))
    model = nn.DataParallel(model)
  end
  model:to(device)
  eq(model:parameters()[1].device.type, device.type, "model.to(device)")
  -- a batch through it: the same output as the MLP alone (eval: no dropout)
  local parallel = torch.cuda.device_count() > 1
  local mlp = parallel and model.module or model
  ok(not parallel or tostring(model):find("^DataParallel%(\n  %(module%): MLP%(") ~= nil, "print(model)")
  model:eval()
  local xb = torch.randn(64, 784):to(device)
  close(model(xb), mlp(xb), 1e-4, 1e-5, "the wrapped model's output is the MLP's")
  -- DistributedDataParallel over NCCL, one process per GPU (`tensh --nproc N`); where there is no
  -- GPU with NCCL (the CPU, the simulated device) the same lines run over "mpi" and say so.
  local function setup_ddp(rank, world_size)
    if dist.is_nccl_available() then
      dist.init_process_group("nccl", {rank = rank, world_size = world_size})
      torch.cuda.set_device(rank)
    else
      print("seed 003: nccl skipped: needs a GPU and NCCL; DDP runs over the mpi backend")
      dist.init_process_group("mpi", {rank = rank, world_size = world_size})
    end
  end
  local function train_ddp(rank, world_size)
    setup_ddp(rank, world_size)
    local ddp_device = dist.get_backend() == "nccl" and torch.device("cuda", rank) or device
    local mlp = MLP():to(ddp_device)
    local ddp_model = nn.parallel.DistributedDataParallel(mlp,
      {device_ids = ddp_device.type == "cuda" and {ddp_device.index} or nil})
    -- one step on a random batch: every rank's weights stay equal
    local x, y = torch.randn(32, 784):to(ddp_device), torch.randint(0, 10, {32}):to(ddp_device)
    local sgd = optim.SGD(ddp_model:parameters(), {lr = 0.1})
    nn.CrossEntropyLoss()(ddp_model(x), y):backward()
    sgd:step()
    local w = mlp:parameters()[1]:detach():reshape(-1):narrow(0, 0, 8):clone()
    local mean = w:clone()
    dist.all_reduce(mean, {op = dist.ReduceOp.AVG})
    close(w, mean, 1e-6, 1e-6, "DDP keeps the replicas equal")
    dist.destroy_process_group()
  end
  train_ddp(tonumber(os.getenv("RANK") or "0"), tonumber(os.getenv("WORLD_SIZE") or "1"))
end

-- ---- Common Pitfalls and Best Practices -------------------------------------------------------------
do
  -- Mixed CPU/GPU Tensors: Always verify tensors are on the correct device.
  local model = MLP():to(device)
  local data = torch.randn(8, 784):to(device)
  assert(data.device == model:parameters()[1].device, "Device mismatch!")
  if torch.cuda.is_available() then
    local cpu_data = torch.randn(8, 784)
    local good, err = pcall(function() assert(cpu_data.device == model:parameters()[1].device, "Device mismatch!") end)
    ok(not good and tostring(err):find("Device mismatch!", 1, true), "the assertion catches a CPU batch")
  end

  -- Memory Management: Clear unused cached memory
  torch.cuda.empty_cache()
  -- Monitor memory usage
  if torch.cuda.is_available() then
    print(("Allocated: %.2f GB"):format(torch.cuda.memory_allocated() / 1e9))
    print(("Cached: %.2f GB"):format(torch.cuda.memory_reserved() / 1e9))
    ok(torch.cuda.memory_allocated() > 0, "the model on the GPU is allocated")
    ok(torch.cuda.memory_reserved() >= torch.cuda.memory_allocated(), "reserved >= allocated")
  else
    -- without a GPU the memory statistics are PyTorch's: 0 bytes (issue 10)
    eq(torch.cuda.memory_allocated(), 0, "cuda.memory_allocated")
    eq(torch.cuda.memory_reserved(), 0, "cuda.memory_reserved")
  end
end

-- Faster Data Loading: Use pinned memory for faster CPU-to-GPU transfers
local train_loader = torch.utils.data.DataLoader(
  train_dataset,
  {batch_size = 64,
   shuffle = true,
   pin_memory = true, -- Faster GPU transfer
   num_workers = 4}   -- Parallel data loading
)
do
  local n, seen = 0, 0
  for data, target in train_loader:iter() do
    n, seen = n + 1, seen + data.shape[0]
    eq(data:is_pinned(), torch.cuda.is_available(), "pinned batches when there is a GPU to copy to")
    eq(target.dtype, torch.int64, "targets stay int64")
  end
  eq(n, 16, "batches from 4 workers")
  eq(seen, 1000, "every sample once")
end

-- Debugging CUDA OOM Errors: Gradient accumulation (effective batch size = batch_size * accumulation_steps)
do
  local model = MLP():to(device)
  local criterion = nn.CrossEntropyLoss()
  local optimizer = optim.Adam(model:parameters(), {lr = 0.001})
  model:eval() -- (dropout off, so the accumulated gradient can be checked against one pass over the batches)
  local group, steps = {}, 0

  local accumulation_steps = 4
  local i = -1
  for data, target in train_loader:iter() do
    i = i + 1
    data, target = data:to(device), target:to(device)
    local output = model(data)
    local loss = criterion(output, target) / accumulation_steps
    loss:backward()
    group[#group + 1] = {data, target}

    if (i + 1) % accumulation_steps == 0 then
      -- the gradient now is the sum of the four scaled batch gradients: one backward
      -- through a copy of the model over the same four batches gives it again
      local ref = MLP():to(device)
      ref:load_state_dict(model:state_dict())
      ref:eval()
      local total
      for _, b in ipairs(group) do
        local l = criterion(ref(b[1]), b[2]) / accumulation_steps
        total = total and total + l or l
      end
      total:backward()
      local mine, theirs = model:parameters(), ref:parameters()
      for k = 1, #mine do close(mine[k].grad, theirs[k].grad, 1e-4, 1e-6, "accumulated gradient " .. k) end
      group = {}

      optimizer:step()
      optimizer:zero_grad()
      steps = steps + 1
    end
  end
  eq(steps, 4, "16 batches, 4 accumulation steps each")
end

-- ---- Performance Optimization Tips -----------------------------------------------------------------
-- Automatic Mixed Precision. Without a GPU, torch.cuda.amp does what PyTorch's does: it
-- warns and turns itself off. The CPU's own mixed precision is bfloat16
-- (torch.autocast("cpu"), amp.GradScaler("cpu")), so there the loop runs with those.
do
  -- from torch.cuda.amp import autocast, GradScaler
  local autocast, GradScaler = torch.cuda.amp.autocast, torch.cuda.amp.GradScaler
  if not torch.cuda.is_available() then
    eq(torch.cuda.amp.GradScaler():is_enabled(), false, "torch.cuda.amp.GradScaler() without CUDA is disabled")
    autocast = function(opts) return torch.autocast("cpu", opts) end
    GradScaler = function(opts) return amp.GradScaler("cpu", opts) end
  end
  local low = torch.cuda.is_available() and torch.float16 or torch.bfloat16
  local DataLoader = torch.utils.data.DataLoader
  local train_loader = DataLoader(train_dataset, {batch_size = 64, shuffle = true})
  local model = MLP():to(device)
  local criterion = nn.CrossEntropyLoss()
  local optimizer = optim.Adam(model:parameters(), {lr = 0.001})
  local num_epochs = full and 10 or 3

  -- scaler = GradScaler()
  local scaler = GradScaler()
  local epoch_losses = {}
  for _ = 1, num_epochs do
    local total = 0
    for data, target in train_loader:iter() do
      data, target = data:to(device), target:to(device)

      optimizer:zero_grad()

      -- Forward pass with autocast
      local loss
      do
        local _ <close> = autocast()
        local output = model(data)
        loss = criterion(output, target)
        eq(output.dtype, low, "the Linear layers run in " .. low)
        eq(loss.dtype, torch.float32, "the loss is computed in float32")
      end

      -- Backward pass with gradient scaling
      scaler:scale(loss):backward()
      scaler:step(optimizer)
      scaler:update()
      total = total + loss:item()
    end
    epoch_losses[#epoch_losses + 1] = total / #train_loader
  end
  eq(model:parameters()[1].dtype, torch.float32, "the weights stay float32")
  eq(scaler:get_scale(), 2.0 ^ 16, "no inf/NaN in these steps: the scale stays at init_scale (growth_interval 2000)")
  ok(epoch_losses[num_epochs] < 0.8 * epoch_losses[1],
    ("mixed precision learns too: %.4f -> %.4f"):format(epoch_losses[1], epoch_losses[num_epochs]))
end
print("seed 003: ok")
