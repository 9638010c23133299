-- Seed 000, "Deep Learning Guide: How to Accelerate Training using PyTorch
-- with CUDA", ported line for line.
-- GPU lines run when cuda.is_available(); without a GPU each must raise a Lua
-- error naming the call, which is asserted instead.
package.path = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local check = require "seed_check"
local eq, ok, close, raises, no_cuda = check.eq, check.ok, check.close, check.raises, check.no_cuda

-- ---- Check availability of CUDA ------------------------------------------------------
-- torch.cuda.is_available()
local available = torch.cuda.is_available()
eq(type(available), "boolean", "torch.cuda.is_available()")
eq(available, torch.cuda.device_count() > 0, "is_available agrees with device_count")
print("CUDA available:", available)

-- ---- Additional information about CUDA device -----------------------------------------
-- torch.cuda.current_device() #returns you the ID of your current device
-- torch.cuda.get_device_name(ID of the device) #returns you the name of the device
if torch.cuda.is_available() then
  local id = torch.cuda.current_device()
  eq(math.type(id), "integer", "current_device()")
  local name = torch.cuda.get_device_name(id)
  ok(type(name) == "string" and #name > 0, "get_device_name(id) is a non-empty string")
  print("device", id, name)
else
  no_cuda(function() return torch.cuda.current_device() end, "cuda.current_device")
  no_cuda(function() return torch.cuda.get_device_name(0) end, "cuda.get_device_name")
end

-- torch.cuda.memory_allocated(ID of the device) #current GPU memory usage by tensors in bytes
-- torch.cuda.memory_reserved(ID of the device)  #memory managed by the caching allocator
-- (torch.cuda.memory_cached, its name in previous versions)
if torch.cuda.is_available() then
  local id = torch.cuda.current_device()
  local before = torch.cuda.memory_allocated(id)
  local t = torch.zeros(1024, 1024, {device = "cuda"}) -- 4 MiB held by a live tensor
  local allocated, reserved = torch.cuda.memory_allocated(id), torch.cuda.memory_reserved(id)
  ok(allocated - before >= 4 * 1024 * 1024, "memory_allocated counts a live 4 MiB tensor")
  ok(reserved >= allocated, "memory_reserved >= memory_allocated")
  eq(torch.cuda.memory_cached(id), reserved, "memory_cached is memory_reserved")
  t = nil
  collectgarbage()
  ok(torch.cuda.memory_allocated(id) <= before, "memory_allocated after the tensor is collected")
  -- torch.cuda.empty_cache(): cached blocks go back to the driver, live ones stay
  torch.cuda.empty_cache()
  ok(torch.cuda.memory_reserved(id) <= reserved, "empty_cache does not grow the reserve")
  ok(torch.cuda.memory_reserved(id) >= torch.cuda.memory_allocated(id), "empty_cache keeps live blocks")
else
  -- without a GPU the memory statistics are PyTorch's: 0 bytes (issue 10)
  eq(torch.cuda.memory_allocated(0), 0, "cuda.memory_allocated")
  eq(torch.cuda.memory_reserved(0), 0, "cuda.memory_reserved")
  eq(torch.cuda.memory_cached(0), 0, "cuda.memory_cached")
  -- torch.cuda.empty_cache(): nothing is cached without a GPU, and it is no error (as in PyTorch)
  torch.cuda.empty_cache()
end

-- ---- Working with multiple CUDA devices ------------------------------------------------
local cuda1 = torch.device('cuda:1') --where 1 is the ID of specific device
eq(cuda1.type, "cuda", "torch.device('cuda:1').type")
eq(cuda1.index, 1, "torch.device('cuda:1').index")
eq(tostring(cuda1), "cuda:1", "tostring(torch.device('cuda:1'))")

-- torch.Tensor (the legacy constructor) makes float32 from a list, on the CPU by default
local cpu_tensor = torch.Tensor({0., 0.})
eq(cpu_tensor.dtype, torch.float32, "torch.Tensor({0., 0.}).dtype")
eq(tostring(cpu_tensor.device), "cpu", "torch.Tensor({0., 0.}).device")
close(cpu_tensor, {0, 0}, 0, 0, "torch.Tensor({0., 0.})")

local tensor
if torch.cuda.device_count() > 1 then
  tensor = torch.Tensor({0., 0.}, {device = cuda1})
  eq(tostring(tensor.device), "cuda:1", "torch.Tensor(..., {device = cuda1}).device")
  tensor = torch.Tensor({0., 0.}):to(cuda1)
  eq(tostring(tensor.device), "cuda:1", "torch.Tensor(...):to(cuda1).device")
  tensor = torch.Tensor({0., 0.}):cuda(cuda1)
  eq(tostring(tensor.device), "cuda:1", "torch.Tensor(...):cuda(cuda1).device")
  eq(tensor:get_device(), 1, "get_device() on cuda:1")
  close(tensor, {0, 0}, 0, 0, "the values on cuda:1")
elseif torch.cuda.is_available() then
  -- one GPU: cuda:1 does not exist, and the error says which devices do
  raises(function() return torch.Tensor({0., 0.}, {device = cuda1}) end, "cuda:1", "torch.Tensor on a missing GPU")
  raises(function() return torch.Tensor({0., 0.}):to(cuda1) end, "cuda:1", "to(cuda1) on a missing GPU")
  raises(function() return torch.Tensor({0., 0.}):cuda(cuda1) end, "cuda:1", "cuda(cuda1) on a missing GPU")
else
  no_cuda(function() return torch.Tensor({0., 0.}, {device = cuda1}) end, "Tensor")
  no_cuda(function() return torch.Tensor({0., 0.}):to(cuda1) end, "to")
  no_cuda(function() return torch.Tensor({0., 0.}):cuda(cuda1) end, "cuda")
end

-- torch.cuda.set_device(1) #where 1 is the ID of device
if torch.cuda.device_count() > 1 then
  local before = torch.cuda.current_device()
  torch.cuda.set_device(1)
  eq(torch.cuda.current_device(), 1, "current_device() after set_device(1)")
  eq(tostring(torch.zeros(2):cuda().device), "cuda:1", "cuda() lands on the new current device")
  torch.cuda.set_device(before)
elseif torch.cuda.is_available() then
  raises(function() torch.cuda.set_device(1) end, "cuda.set_device", "set_device(1) with one GPU")
else
  no_cuda(function() torch.cuda.set_device(1) end, "cuda.set_device")
end

-- import os
-- os.environ["CUDA_VISIBLE_DEVICES"] = "1,2,3"   (before CUDA is first used, as in PyTorch)
-- In a script, before its first CUDA call; a child process started from it sees the variable.
os.setenv("CUDA_VISIBLE_DEVICES", "1,2,3")
eq(os.getenv("CUDA_VISIBLE_DEVICES"), "1,2,3", "os.getenv after os.setenv")
local function child(code) -- runs code in a new tensh, which inherits this environment
  local p = assert(io.popen("'" .. arg[-1] .. "' -e '" .. code .. "' 2>&1"))
  local out = p:read("a")
  p:close()
  return (out:gsub("%s+$", ""))
end
eq(child('print(os.getenv("CUDA_VISIBLE_DEVICES"))'), "1,2,3", "a child process sees CUDA_VISIBLE_DEVICES")
if torch.cuda.is_available() then
  -- this process started CUDA above; a new one sees only devices 1, 2 and 3 of this machine
  local n = torch.cuda.device_count()
  eq(tonumber(child("print(cuda.device_count())")), math.min(math.max(n - 1, 0), 3),
    "device_count() with CUDA_VISIBLE_DEVICES=1,2,3 (device 0 hidden)")
end
os.setenv("CUDA_VISIBLE_DEVICES", nil)
eq(os.getenv("CUDA_VISIBLE_DEVICES"), nil, "os.setenv(name, nil) removes the variable")

-- ---- Training a PyTorch model on a GPU -------------------------------------------------
-- the notebook's MobileNetV3 (small) for CIFAR10's ten classes: torchvision's, from models
local function MobileNetV3() return models.mobilenet_v3_small({num_classes = 10}) end
local net = MobileNetV3() --net is a variable containing our model
if torch.cuda.is_available() then
  net = net:cuda() --we allocate our model to GPU
  -- next(net.parameters()).is_cuda #returns a bool value, True - your model is truly on GPU
  eq(net:parameters()[1].is_cuda, true, "next(net.parameters()).is_cuda after net:cuda()")
  eq(tostring(net:parameters()[1].device), "cuda:0", "net:cuda() moves to the current device")
  -- net:cuda(device) takes an ordinal or a torch.device as PyTorch's
  eq(net:cuda(torch.device("cuda:0")):parameters()[1].is_cuda, true, "net:cuda(torch.device('cuda:0'))")
  eq(net:cuda(0):parameters()[1].is_cuda, true, "net:cuda(0)")
  net = net:cpu()
else
  no_cuda(function() return net:cuda() end, "to")
  no_cuda(function() return net:cuda(torch.device("cuda:0")) end, "to")
end
eq(net:parameters()[1].is_cuda, false, "next(net.parameters()).is_cuda on the CPU")
-- the data has to be on the model's device as well, or the error says both devices
if torch.cuda.is_available() then
  local gpu_net = MobileNetV3():cuda()
  raises(function() return gpu_net(torch.randn(1, 3, 32, 32)) end, "cpu", "CPU input into a GPU model")
end

-- ---- Parallelizing the training process ------------------------------------------------
-- The article's snippet (its isinstance test is garbled in the article; what it
-- means: several ids in GPU -> gpu_list "0,1" and multi_gpus):
--   GPU = 0, 1
--   os.environ['CUDA_VISIBLE_DEVICES'] = gpu_list
--   net = net.cuda()
--   if multi_gpus:
--      net = DataParallel(net, device_ids = gpu_list)
-- CUDA_VISIBLE_DEVICES only reaches a process started afterwards (see above), so
-- here the ids are kept to the devices this machine has; without a GPU,
-- DataParallel runs the net as it is.
do
  local GPU = {0, 1}
  local gpu_list = table.concat(GPU, ",")
  local multi_gpus = #GPU > 1
  eq(gpu_list, "0,1", "gpu_list")
  local device_ids = {}
  for _, id in ipairs(GPU) do
    if id < torch.cuda.device_count() then device_ids[#device_ids + 1] = id end
  end
  local pnet = MobileNetV3()
  pnet:eval()
  local batch = torch.randn(6, 3, 32, 32)
  local whole = pnet(batch)
  if torch.cuda.is_available() then pnet = pnet:cuda() end
  if multi_gpus then pnet = nn.DataParallel(pnet, {device_ids = device_ids}) end
  ok(tostring(pnet):find("^DataParallel%(\n  %(module%): MobileNetV3%(") ~= nil, "print(net) after DataParallel")
  local out = pnet(batch) -- cut over the devices, gathered on the first
  eq(tostring(out.device), torch.cuda.is_available() and "cuda:0" or "cpu", "the output's device")
  close(out, whole, 1e-4, 1e-5, "DataParallel's output is the net's on the whole batch")
end

-- ---- Running a PyTorch model on GPU ----------------------------------------------------
-- a checkpoint to load: the trained net's state_dict, saved as safetensors
local dir = check.tmpdir()
local path = dir .. "/checkpoint.safetensors"
local trained = MobileNetV3()
trained:eval() -- inference: batch norm's running statistics (one image has no batch statistics)
torch.save(trained:state_dict(), path)
local image = torch.randn(1, 3, 32, 32)
local expected = trained(image)

do
  local cuda = torch.cuda.is_available()
  local net = MobileNetV3()
  local checkpoint = torch.load(path)
  net:load_state_dict(checkpoint) -- (the article loads the checkpoint but never applies it)
  net:eval()
  if cuda then
    net = net:cuda()
    image = image:cuda() --remember that image must be allocated to GPU as well
  end
  local result = net(image)
  eq(result.shape, torch.Size({1, 10}), "result.shape")
  eq(result.is_cuda, cuda, "result.is_cuda")
  close(result, expected, 1e-4, 1e-5, "the loaded net gives the trained net's output")
  -- torch.load(path, {map_location = "cpu"}) brings a GPU checkpoint back to the CPU
  local on_cpu = torch.load(path, {map_location = "cpu"})
  for k, v in pairs(on_cpu) do eq(v.is_cuda, false, "map_location = 'cpu': " .. k) end
end
check.rmdir(dir)
print("seed 000: ok")
