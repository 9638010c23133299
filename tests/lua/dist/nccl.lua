-- Run by test_dist.lua under `tensh --nproc 2` on a machine with GPUs and
-- NCCL: the "nccl" backend's collectives against their definitions, and
-- DistributedDataParallel's buckets on the device.
dist.init_process_group("nccl")
local rank, world = dist.get_rank(), dist.get_world_size()
local dev = "cuda:" .. cuda.current_device()
local function check(what, got, want)
  if not torch.allclose(got:cpu():double(), want:double(), 1e-3, 1e-3) then
    error(("%s: rank %d got %s, expected %s"):format(what, rank, tostring(got), tostring(want)))
  end
end
local s = world * (world + 1) / 2
for _, dt in ipairs {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32} do
  local t = torch.full({5}, rank + 1, {dtype = dt, device = dev})
  dist.all_reduce(t)
  check("all_reduce SUM " .. dt, t, torch.full({5}, s))
  t = torch.full({5}, rank + 1, {dtype = dt, device = dev})
  dist.all_reduce(t, {op = dist.ReduceOp.MAX})
  check("all_reduce MAX " .. dt, t, torch.full({5}, world))
end
local t = torch.full({3}, rank + 1.0, {device = dev})
dist.all_reduce(t, {op = dist.ReduceOp.AVG})
check("all_reduce AVG", t, torch.full({3}, s / world))
local b = torch.full({4}, rank * 1.0, {device = dev})
dist.broadcast(b, world - 1)
check("broadcast", b, torch.full({4}, world - 1.0))
local out = torch.zeros(world, 2, {device = dev})
dist.all_gather_into_tensor(out, torch.full({2}, rank * 1.0, {device = dev}))
check("all_gather", out, torch.arange(world):double():unsqueeze(1):expand(world, 2))
local rs = torch.zeros(2, {device = dev})
dist.reduce_scatter_tensor(rs, torch.ones(world * 2, {device = dev}))
check("reduce_scatter", rs, torch.full({2}, world))
torch.manual_seed(rank)
local model = nn.Linear(4, 3):to(dev)
local ddp = nn.parallel.DistributedDataParallel(model, {device_ids = {cuda.current_device()}})
ddp(torch.full({2, 4}, rank + 1.0, {device = dev})):sum():backward()
check("DDP bias grad", model.bias.grad, torch.full({3}, 2.0))
cuda.synchronize()
print("nccl ok")
