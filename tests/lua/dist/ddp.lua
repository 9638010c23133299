-- Run by test_dist.lua under `tensh --nproc 2`: DistributedDataParallel
-- against one process training on the whole batch (the reference model
-- lives in every rank and sees all ranks' data), on T.device.
local T = require "harness"
dist.init_process_group("mpi")
local rank, world = dist.get_rank(), dist.get_world_size()
local dev = T.device

local function make_model(seed)
  torch.manual_seed(seed)
  return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3)):to(dev)
end

-- the same full batch on every rank; this rank's rows
local function batch(step, n)
  torch.manual_seed(500 + step)
  local x, y = torch.randn(n, 6):to(dev), torch.randn(n, 3):to(dev)
  local per = n // world
  return x, y, x:narrow(0, rank * per, per), y:narrow(0, rank * per, per)
end

local function params_close(a, b, tol, what)
  local pa, pb = a:parameters(), b:parameters()
  T.eq(#pa, #pb, "parameter count")
  for i = 1, #pa do T.close(pa[i]:cpu(), pb[i]:cpu(), tol, tol, ("%s: parameter %d"):format(what, i)) end
end

local function grads_close(a, b, tol, what)
  local pa, pb = a:parameters(), b:parameters()
  for i = 1, #pa do T.close(pa[i].grad:cpu(), pb[i].grad:cpu(), tol, tol, ("%s: grad %d"):format(what, i)) end
end

for _, cap in ipairs {25, 0.0005} do
  T.test(("weights after SGD steps equal one process on the full batch (bucket_cap_mb = %g)"):format(cap), function()
    local model = make_model(1 + rank) -- different on each rank: the wrap broadcasts rank 0's
    local ddp = nn.parallel.DistributedDataParallel(model, {bucket_cap_mb = cap})
    local ref = make_model(1)
    params_close(model, ref, 0, "after the wrap")
    if cap < 1 then T.ok(#rawget(ddp, "_attrs")._ddp.buckets >= 3, "several buckets") end
    local opt = optim.SGD(ddp:parameters(), {lr = 0.1, momentum = 0.9})
    local ropt = optim.SGD(ref:parameters(), {lr = 0.1, momentum = 0.9})
    local crit = nn.MSELoss()
    for step = 1, 5 do
      local x, y, xr, yr = batch(step, 8)
      opt:zero_grad()
      crit(ddp(xr), yr):backward()
      ropt:zero_grad()
      crit(ref(x), y):backward()
      grads_close(model, ref, 1e-5, "step " .. step)
      opt:step()
      ropt:step()
    end
    params_close(model, ref, 1e-5, "after 5 steps")
  end)
end

T.test("no_sync accumulates locally; the next backward averages the sum", function()
  local model = make_model(7)
  local ddp = nn.parallel.DistributedDataParallel(model)
  local ref = make_model(7)
  local crit = nn.MSELoss()
  local xa, ya, xar, yar = batch(11, 8)
  local xb, yb, xbr, ybr = batch(12, 8)
  do
    local _ <close> = ddp:no_sync()
    crit(ddp(xar), yar):backward()
  end
  -- not averaged yet: the ranks' gradients differ
  local g = model:parameters()[1].grad:reshape(-1)
  local both = torch.zeros(world * g:numel()):to(dev)
  dist.all_gather_into_tensor(both, g)
  T.ok(not torch.allclose(both:narrow(0, 0, g:numel()), both:narrow(0, g:numel(), g:numel())),
    "gradients inside no_sync are local")
  crit(ddp(xbr), ybr):backward()
  crit(ref(xa), ya):backward()
  crit(ref(xb), yb):backward()
  grads_close(model, ref, 1e-5, "accumulated")
  -- the function form
  for _, p in ipairs(model:parameters()) do p.grad = nil end
  ref:zero_grad()
  ddp:no_sync(function() crit(ddp(xar), yar):backward() end)
  crit(ddp(xbr), ybr):backward()
  crit(ref(xa), ya):backward()
  crit(ref(xb), yb):backward()
  grads_close(model, ref, 1e-5, "function form")
end)

T.test("unused parameters: an error naming them, or find_unused_parameters", function()
  local Net = nn.Module:extend("TwoHeads")
  function Net:init()
    self.a = nn.Linear(4, 2)
    self.b = nn.Linear(4, 2)
  end
  function Net:forward(x, which) return which == "a" and self.a(x) or self.b(x) end
  torch.manual_seed(3)
  local ddp = nn.parallel.DistributedDataParallel(Net():to(dev))
  T.raises(function() ddp(torch.ones(2, 4):to(dev), "a"):sum():backward() end,
    "2 parameter(s) received no gradient in this backward (b.weight, b.bias)")
  torch.manual_seed(3)
  local net = Net():to(dev)
  local ddp2 = nn.parallel.DistributedDataParallel(net, {find_unused_parameters = true})
  -- rank 0 uses head a, rank 1 head b: each head's gradient is its user's / world
  local x = torch.ones(2, 4):to(dev)
  ddp2(x, rank == 0 and "a" or "b"):sum():backward()
  T.close(net.a.weight.grad:cpu(), torch.full({2, 4}, 2.0 / world), 1e-6, 1e-6, "a's gradient")
  T.close(net.b.weight.grad:cpu(), torch.full({2, 4}, 2.0 / world), 1e-6, 1e-6, "b's gradient")
end)

T.test("module, state_dict keys, printing, buffers from rank 0", function()
  torch.manual_seed(rank)
  local inner = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)):to(dev)
  inner[1].running_mean:fill_(rank + 1)
  local ddp = nn.parallel.DistributedDataParallel(inner)
  T.eq(ddp.module, inner, "ddp.module")
  T.close(inner[1].running_mean:cpu(), {1, 1}, 0, 0, "rank 0's buffer after the wrap")
  local keys = {}
  for k in pairs(ddp:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  T.eq(table.concat(keys, " "), "module.0.bias module.0.weight module.1.bias module.1.num_batches_tracked "
    .. "module.1.running_mean module.1.running_var module.1.weight", "state_dict keys")
  T.eq(tostring(ddp), "DistributedDataParallel(\n  (module): Sequential(\n    (0): Linear(in_features=3, "
    .. "out_features=2, bias=True)\n    (1): BatchNorm1d(2, eps=1e-05, momentum=0.1, affine=True, "
    .. "track_running_stats=True)\n  )\n)", "printed")
  T.eq(#ddp:parameters(), 4, "parameters")
end)

T.test("bad arguments", function()
  T.raises(function() nn.parallel.DistributedDataParallel(42) end, "expected a module to wrap, got number")
  T.raises(function() nn.parallel.DistributedDataParallel(nn.Linear(2, 2), {bucket_cap = 1}) end,
    "unknown option 'bucket_cap'")
  T.raises(function() nn.parallel.DistributedDataParallel(nn.Linear(2, 2), {bucket_cap_mb = 0}) end,
    "bucket_cap_mb must be a positive number")
  local m = rank == 0 and nn.Linear(2, 2) or nn.Linear(2, 3)
  T.raises(function() nn.parallel.DistributedDataParallel(m) end, "every rank must wrap the same model")
end)

T.run()
