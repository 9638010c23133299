-- Seed 002, "How to use GPUs with PyTorch",
-- ported line for line, with the article's printed output asserted. GPU lines
-- run when cuda.is_available(); without a GPU each must raise a Lua error
-- naming the call.
package.path = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local check = require "seed_check"
local eq, ok, close, raises, no_cuda = check.eq, check.ok, check.close, check.raises, check.no_cuda

-- ---- Verifying GPU Availability -------------------------------------------------------------
-- import torch
-- torch.cuda.is_available()
local available = torch.cuda.is_available()
eq(type(available), "boolean", "torch.cuda.is_available()")

-- torch.cuda.device_count()
-- torch.cuda.current_device()
local count = torch.cuda.device_count()
eq(count > 0, available, "device_count() > 0 when available")
if torch.cuda.is_available() then
  eq(torch.cuda.current_device(), 0, "the device in use is number 0")
else
  eq(count, 0, "device_count() without a GPU")
  no_cuda(function() return torch.cuda.current_device() end, "cuda.current_device")
end

-- ---- Initialize the Device -------------------------------------------------------------------
-- >>> device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
local device = torch.device(torch.cuda.is_available() and "cuda" or "cpu")
-- >>> device
print(device)
eq(tostring(device), available and "cuda" or "cpu", "device")
eq(device.type, available and "cuda" or "cpu", "device.type")

-- ---- 1. Creating Tensors Directly on the GPU ------------------------------------------------
local x = torch.tensor({1, 2, 3})
print(x)
print("Device: ", x.device)
eq(tostring(x), "tensor([1, 2, 3])", "print(x)")
eq(tostring(x.device), "cpu", "x.device")

local y = torch.tensor({4, 5, 6}, {device = device})
print(y)
print("Device: ", y.device)
if available then
  eq(tostring(y), "tensor([4, 5, 6], device='cuda:0')", "print(y)")
  eq(tostring(y.device), "cuda:0", "y.device")
else
  eq(tostring(y), "tensor([4, 5, 6])", "print(y) on the CPU")
  no_cuda(function() return torch.tensor({4, 5, 6}, {device = "cuda"}) end, "tensor")
end

-- x.get_device(); y.get_device(): -1 represents the CPU, 0 represents GPU number 0
eq(x:get_device(), -1, "x:get_device()")
eq(y:get_device(), available and 0 or -1, "y:get_device()")

-- ---- 2. Transferring Tensors Using the to() Method ------------------------------------------
x = torch.tensor({1, 2, 3})
x = x:to(device)
print("Device: ", x.device)
eq(tostring(x.device), available and "cuda:0" or "cpu", "x:to(device).device")
close(x, {1, 2, 3}, 0, 0, "values after to(device)")

-- Transfer to the first GPU
x = torch.tensor({8, 9, 10})
if available then
  x = x:to("cuda:0")
  eq(tostring(x.device), "cuda:0", "x:to('cuda:0')")
  eq(x.dtype, torch.int64, "to keeps the dtype")
else
  no_cuda(function() return x:to("cuda:0") end, "to")
end
-- "Attempting to transfer to a GPU that is not available or to an incorrect GPU
-- number will result in a CUDA error": a Lua error that says which devices exist
if available then
  local err = raises(function() return x:to("cuda:" .. count) end, "invalid device ordinal cuda:" .. count,
    "to a GPU number that does not exist")
  ok(err:find(("cuda:0 to cuda:%d"):format(count - 1), 1, true) ~= nil, "the error names the valid range: " .. err)
else
  no_cuda(function() return x:to("cuda:1") end, "to")
end
-- the session goes on after such an error
close(x, {8, 9, 10}, 0, 0, "x after the failed move")

-- ---- 3. Transferring Tensors Using the cuda() Method ----------------------------------------
-- Create a random tensor of shape (100, 30)
local tensor = torch.rand({100, 30})
eq(tensor.shape, torch.Size({100, 30}), "torch.rand({100, 30}).shape")
ok(tensor:min():item() >= 0 and tensor:max():item() < 1, "rand values in [0, 1)")
if available then
  tensor = tensor:cuda()
  -- tensor.device: device(type='cuda', index=0)
  eq(tensor.device.type, "cuda", "tensor.device.type")
  eq(tensor.device.index, 0, "tensor.device.index")
else
  no_cuda(function() return tensor:cuda() end, "cuda")
end

-- ---- DataParallel ------------------------------------------------------------------------------
local LinearRegression = nn.Module:extend("LinearRegression")
function LinearRegression:init(input_size, output_size)
  self.linear = nn.Linear(input_size, output_size)
end
function LinearRegression:forward(x)
  return self.linear(x)
end

-- Initialize the model
local model = LinearRegression(2, 5)
print(model)
eq(tostring(model), [[
LinearRegression(
  (linear): Linear(in_features=2, out_features=5, bias=True)
)]], "print(model)")

model = nn.DataParallel(model, {device_ids = {0}})
print(model)
eq(tostring(model), [[
DataParallel(
  (module): LinearRegression(
    (linear): Linear(in_features=2, out_features=5, bias=True)
  )
)]], "print(model) after nn.DataParallel")

-- Move the model and inputs to GPU
model = model:to(device)
local input_data = torch.randn(16, 2)
input_data = input_data:to(device)
eq(model.module.linear.weight.device, input_data.device, "model and inputs on one device")
-- Continue with Training Loop: a few steps of least squares on y = x A^T + b
local A, b = torch.tensor({{1., -2.}, {0.5, 3.}, {2., 0.}, {-1., 1.}, {0., 0.25}}), torch.tensor({0.1, -0.2, 0.3, 0., 1.})
local target = (input_data:cpu():matmul(A:t()) + b):to(device)
local opt = optim.SGD(model:parameters(), {lr = 0.5})
local first, last
for step = 1, 300 do
  opt:zero_grad()
  local loss = nn.functional.mse_loss(model(input_data), target)
  loss:backward()
  opt:step()
  if step == 1 then first = loss:item() end
  last = loss:item()
end
ok(last < 1e-3 * first, ("the linear regression converges: loss %.3g -> %.3g"):format(first, last))
close(model.module.linear.weight, A, 1e-2, 1e-2, "the learnt weight")
close(model.module.linear.bias, b, 1e-2, 1e-2, "the learnt bias")

-- ---- DistributedDataParallel (DDP) ---------------------------------------------------------------
-- The article's nn.parallel.DistributedDataParallelCPU is today's DistributedDataParallel on CPU
-- tensors (PyTorch's "gloo" backend; "mpi" here). Run alone, this process is a world of one;
-- `tensh --nproc 2 tests/seeds/seed_002.lua` runs the same lines in two processes.
do
  -- Initialize the model
  torch.manual_seed(0)
  local ddp_net = LinearRegression(2, 5)
  -- Initialize the distributed environment.
  dist.init_process_group("mpi")
  -- Wrap the model with DDP
  local ddp_model = nn.parallel.DistributedDataParallel(ddp_net)
  print(ddp_model)
  eq(tostring(ddp_model), [[
DistributedDataParallel(
  (module): LinearRegression(
    (linear): Linear(in_features=2, out_features=5, bias=True)
  )
)]], "print(ddp_model)")
  -- the same least squares, each rank on its share of the batch: the gradients are averaged
  local rank, world = dist.get_rank(), dist.get_world_size()
  local x = torch.randn(16 * world, 2)
  local y = x:matmul(A:t()) + b
  local mine, mine_y = x:chunk(world)[rank + 1], y:chunk(world)[rank + 1]
  local ddp_opt = optim.SGD(ddp_model:parameters(), {lr = 0.5})
  for _ = 1, 300 do
    ddp_opt:zero_grad()
    nn.functional.mse_loss(ddp_model(mine), mine_y):backward()
    ddp_opt:step()
  end
  close(ddp_model.module.linear.weight, A, 1e-2, 1e-2, "DDP learns the weight")
  eq(ddp_model:state_dict()["module.linear.bias"] ~= nil, true, "state_dict keys start with module.")
  dist.destroy_process_group()
end
print("seed 002: ok")
