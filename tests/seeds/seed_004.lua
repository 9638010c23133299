-- Seed 004, "Utilizing GPUs for Accelerated Training",
-- ported line for line. GPU lines run when cuda.is_available(); without a GPU
-- each must raise a Lua error naming the call.
package.path = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local check = require "seed_check"
local eq, ok, close, no_cuda = check.eq, check.ok, check.close, check.no_cuda
torch.manual_seed(0)

-- ---- 1. Check for GPU Availability ---------------------------------------------------------------
-- import torch
local device
if torch.cuda.is_available() then
  device = torch.device("cuda")                  -- Use GPU
else
  device = torch.device("cpu")                   -- Use CPU
end

print(("Using device: %s"):format(device))
eq(tostring(device), torch.cuda.is_available() and "cuda" or "cpu", "device")

-- ---- 2. Move Tensors to GPU ------------------------------------------------------------------------
local x = torch.tensor({1, 2, 3})
x = x:to(device)
eq(x.device.type, device.type, "x:to(device)")
eq(x.dtype, torch.int64, "x keeps its dtype")
close(x, {1, 2, 3}, 0, 0, "x keeps its values")
if not torch.cuda.is_available() then
  no_cuda(function() return torch.tensor({1, 2, 3}):to(torch.device("cuda")) end, "to")
end

-- ---- 3. Define Models on the GPU ---------------------------------------------------------------------
-- import torch.nn as nn
local model = nn.Sequential(
  nn.Linear(100, 64),
  nn.Linear(64, 10))

model = model:to(device)
for _, p in ipairs(model:parameters()) do eq(p.device.type, device.type, "model:to(device)") end
if not torch.cuda.is_available() then
  no_cuda(function() return nn.Sequential(nn.Linear(100, 64), nn.Linear(64, 10)):to(torch.device("cuda")) end, "to")
end

-- ---- 4. Performing Training on the GPU -----------------------------------------------------------------
-- (the article's inputs, labels and criterion come from elsewhere: a batch of 32 and cross entropy)
local inputs, labels = torch.randn(32, 100), torch.randint(0, 10, {32})
local criterion = nn.CrossEntropyLoss()

local optimizer = torch.optim.SGD(model:parameters(), {lr = 0.01})

-- Move model and input data to the GPU
model = model:to(device)
inputs = inputs:to(device)
labels = labels:to(device)

local before = {}
for k, p in ipairs(model:parameters()) do before[k] = p:detach():clone() end

-- Forward pass
local outputs = model(inputs)
eq(outputs.shape, torch.Size({32, 10}), "outputs.shape")

-- Compute loss and backward pass
local loss = criterion(outputs, labels)
optimizer:zero_grad()
loss:backward()

-- Update model parameters
optimizer:step()

-- plain SGD: each parameter moved by -lr * its gradient
for k, p in ipairs(model:parameters()) do
  close(p, before[k] - 0.01 * p.grad, 1e-6, 1e-7, "SGD step on parameter " .. k)
end
-- the loss is cross entropy: the mean of -log softmax at each label
local logp = nn.functional.log_softmax(outputs:detach(), 1)
local picked = logp:gather(1, labels:view(-1, 1))
close(loss, -picked:mean(), 1e-5, 1e-6, "criterion(outputs, labels)")

-- ---- 5. Data Parallelism ---------------------------------------------------------------------------------
local plain = model
model = nn.DataParallel(model)
ok(rawequal(model.module, plain), "model.module is the wrapped model")
-- the batch is cut over the GPUs (run as it is without one); the output and
-- the gradients (each replica's summed into the model's) are the whole batch's
local dp_outputs = model(inputs)
eq(dp_outputs.device.type, device.type, "DataParallel's output on the first GPU")
close(dp_outputs, plain(inputs), 1e-5, 1e-6, "DataParallel's output is the model's")
optimizer:zero_grad()
criterion(plain(inputs), labels):backward()
local whole = {}
for k, p in ipairs(plain:parameters()) do whole[k] = p.grad:clone() end
optimizer:zero_grad()
criterion(model(inputs), labels):backward()
for k, p in ipairs(model:parameters()) do close(p.grad, whole[k], 1e-5, 1e-6, "gradient of parameter " .. k) end
optimizer:step()
print("seed 004: ok")
