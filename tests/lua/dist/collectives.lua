-- Run by test_dist.lua under `tensh --nproc 2`: each collective against its
-- definition, every rank computing every rank's inputs itself (seeded by
-- rank) and the expected result in float64 on the CPU. Each rank prints its
-- harness line; TENSH_TEST_DEVICE=cuda (the simulated device) puts the
-- tensors on cuda, which the "mpi" backend stages through pinned memory.
local T = require "harness"
dist.init_process_group("mpi")
local rank, world = dist.get_rank(), dist.get_world_size()
local dev = T.device

local float_dtypes = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
local int_dtypes = {torch.int64, torch.int32, torch.uint8}
local tol = {[torch.float32] = 1e-5, [torch.float64] = 1e-12, [torch.float16] = 2e-3, [torch.bfloat16] = 1e-2}

-- rank r's input for a case: the same on every rank that computes it
local function input_of(r, shape, dtype, case)
  torch.manual_seed(1000 * case + r)
  if dtype == torch.uint8 then return torch.randint(0, 4, shape, {dtype = dtype}) end
  if not T.is_float(dtype) then return torch.randint(-9, 10, shape, {dtype = dtype}) end
  return (torch.rand(shape, {dtype = torch.float64}) * 4 - 2):to(dtype)
end
function T.is_float(dt) return dt == torch.float32 or dt == torch.float64 or dt == torch.float16 or dt == torch.bfloat16 end

local function reference(op, inputs)
  local acc = inputs[1]:to(torch.float64)
  for i = 2, #inputs do
    local x = inputs[i]:to(torch.float64)
    if op == "SUM" or op == "AVG" then acc = acc + x
    elseif op == "PRODUCT" then acc = acc * x
    elseif op == "MIN" then acc = torch.minimum(acc, x)
    else acc = torch.maximum(acc, x) end
  end
  if op == "AVG" then acc = acc / #inputs end
  return acc
end

local case = 0
for _, dtype in ipairs(float_dtypes) do
  for _, op in ipairs {"SUM", "AVG", "PRODUCT", "MIN", "MAX"} do
    T.test(("all_reduce %s %s"):format(dtype, op), function()
      case = case + 1
      local inputs = {}
      for r = 0, world - 1 do inputs[r + 1] = input_of(r, {3, 5}, dtype, case) end
      -- the reduction of already-rounded inputs, rounded once to dtype
      local expected = reference(op, inputs):to(dtype):to(torch.float64)
      local t = inputs[rank + 1]:to(dev)
      dist.all_reduce(t, {op = dist.ReduceOp[op]})
      T.eq(t.dtype, dtype, "dtype")
      T.eq(t.device.type, dev, "device")
      T.close(t:to(torch.float64), expected, tol[dtype], tol[dtype])
    end)
  end
end

for _, dtype in ipairs(int_dtypes) do
  for _, op in ipairs {"SUM", "PRODUCT", "MIN", "MAX"} do
    T.test(("all_reduce %s %s"):format(dtype, op), function()
      case = case + 1
      local inputs = {}
      for r = 0, world - 1 do inputs[r + 1] = input_of(r, {7}, dtype, case) end
      local expected = reference(op, inputs):to(dtype)
      local t = inputs[rank + 1]:to(dev)
      dist.all_reduce(t, op)
      T.eq(t.dtype, dtype, "dtype")
      T.close(t, expected, 0, 0)
    end)
  end
end

T.test("all_reduce bool: SUM/MAX are or, PRODUCT/MIN are and", function()
  local mine = torch.tensor({rank == 0, false, true, rank == 1}):to(dev)
  -- in a fixed order: pairs' order differs between processes (string hashes are seeded per process)
  for _, c in ipairs {{"SUM", {true, false, true, true}}, {"MAX", {true, false, true, true}},
                      {"PRODUCT", {false, false, true, false}}, {"MIN", {false, false, true, false}}} do
    local op, want = c[1], c[2]
    local t = mine:clone()
    dist.all_reduce(t, op)
    T.eq(t.dtype, torch.bool, "dtype")
    T.close(t, want, 0, 0, op)
  end
end)

T.test("all_reduce AVG of an integer tensor is refused on every rank", function()
  T.raises(function() dist.all_reduce(torch.ones(2, {dtype = torch.int64}), {op = dist.ReduceOp.AVG}) end,
    "ReduceOp.AVG needs a floating-point tensor")
end)

T.test("all_reduce of a non-contiguous view writes through", function()
  local base = torch.arange(12, {dtype = torch.float32}):view(3, 4) * (rank + 1)
  local view = base:t()
  dist.all_reduce(view)
  local want = torch.arange(12, {dtype = torch.float64}):view(3, 4) * (world * (world + 1) / 2)
  T.close(base, want, 0, 0)
end)

T.test("all_reduce async_op returns a Work to wait for", function()
  local t = torch.full({1000}, rank + 1.0)
  local w = dist.all_reduce(t, {async_op = true})
  T.eq(w:wait(), true, "wait")
  T.eq(w:is_completed(), true, "is_completed")
  T.close(t:sum(), 1000 * world * (world + 1) / 2, 0, 0)
end)

T.test("all_reduce of an empty tensor", function()
  local t = torch.zeros(0)
  dist.all_reduce(t)
  T.eq(t:numel(), 0, "numel")
end)

for _, dtype in ipairs {torch.float32, torch.int64, torch.bfloat16, torch.bool} do
  T.test("broadcast " .. dtype, function()
    for src = 0, world - 1 do
      case = case + 1
      local want = input_of(src, {2, 3}, dtype == torch.bool and torch.uint8 or dtype, case)
      if dtype == torch.bool then want = want:gt(1) end
      local t = rank == src and want:clone():to(dev) or torch.zeros({2, 3}, {dtype = dtype}):to(dev)
      dist.broadcast(t, src)
      T.close(t:cpu(), want, 0, 0, "from " .. src)
    end
  end)
end

for _, dtype in ipairs {torch.float32, torch.float16, torch.int32, torch.uint8} do
  T.test("all_gather " .. dtype, function()
    case = case + 1
    local list = {}
    for r = 1, world do list[r] = torch.zeros({4}, {dtype = dtype}):to(dev) end
    dist.all_gather(list, input_of(rank, {4}, dtype, case):to(dev))
    for r = 0, world - 1 do T.close(list[r + 1]:cpu(), input_of(r, {4}, dtype, case), 0, 0, "rank " .. r) end
    local out = torch.zeros({world, 4}, {dtype = dtype}):to(dev)
    dist.all_gather_into_tensor(out, input_of(rank, {4}, dtype, case):to(dev))
    for r = 0, world - 1 do T.close(out[r]:cpu(), input_of(r, {4}, dtype, case), 0, 0, "into tensor " .. r) end
  end)
end

for _, dtype in ipairs {torch.float32, torch.float64, torch.int64} do
  for _, op in ipairs {"SUM", "MAX", "MIN", "PRODUCT"} do
    T.test(("reduce_scatter %s %s"):format(dtype, op), function()
      case = case + 1
      local inputs = {}
      for r = 0, world - 1 do inputs[r + 1] = input_of(r, {world, 3}, dtype, case) end
      local expected = reference(op, inputs)[rank]:to(dtype)
      local out = torch.zeros({3}, {dtype = dtype}):to(dev)
      dist.reduce_scatter_tensor(out, inputs[rank + 1]:to(dev), {op = op})
      T.close(out:cpu(), expected, tol[dtype] or 0, tol[dtype] or 0)
      local list = {}
      for r = 0, world - 1 do list[r + 1] = inputs[rank + 1][r]:to(dev) end
      local out2 = torch.zeros({3}, {dtype = dtype}):to(dev)
      dist.reduce_scatter(out2, list, {op = op})
      T.close(out2:cpu(), expected, tol[dtype] or 0, tol[dtype] or 0, "list form")
    end)
  end
end

T.test("send and recv around the ring", function()
  local to, from = (rank + 1) % world, (rank - 1) % world
  for _, dtype in ipairs {torch.float32, torch.int64, torch.float16} do
    case = case + 1
    local got = torch.zeros({2, 2}, {dtype = dtype}):to(dev)
    if rank % 2 == 0 then
      dist.send(input_of(rank, {2, 2}, dtype, case):to(dev), to)
      T.eq(dist.recv(got, from), from, "recv's sender")
    else
      T.eq(dist.recv(got, from), from, "recv's sender")
      dist.send(input_of(rank, {2, 2}, dtype, case):to(dev), to)
    end
    T.close(got:cpu(), input_of(from, {2, 2}, dtype, case), 0, 0, tostring(dtype))
  end
end)

T.test("a shape that differs across ranks is an error on every rank", function()
  local t = torch.zeros(rank + 2):to(dev)
  T.raises(function() dist.all_reduce(t) end, "every rank must pass the same shape, dtype and device")
end)

T.test("a dtype that differs across ranks is an error on every rank", function()
  local t = torch.zeros(3, {dtype = rank == 0 and torch.float32 or torch.float64}):to(dev)
  local err = T.raises(function() dist.broadcast(t, 0) end, "every rank must pass the same shape")
  T.ok(err:find("float64", 1, true) and err:find("float32", 1, true), "the message names both dtypes: " .. err)
end)

T.test("bad arguments", function()
  T.raises(function() dist.all_reduce(torch.ones(2), {op = "MEAN"}) end, "op must be one of dist.ReduceOp")
  T.raises(function() dist.broadcast(torch.ones(2), world) end, "broadcast: src must be a rank in [0, " .. world)
  T.raises(function() dist.send(torch.ones(2), rank) end, "send: dst must be another rank")
  T.raises(function() dist.all_reduce("x") end, "bad argument #1 to 'all_reduce' (tensor expected, got string)")
  T.raises(function() dist.init_process_group("mpi") end, "initialize the default process group twice")
  T.raises(function() dist.all_gather({torch.ones(2)}, torch.ones(2)) end, "expected one per rank (" .. world)
end)

T.test("barrier, get_rank, get_world_size and the torchrun variables", function()
  dist.barrier()
  T.eq(world, 2, "world size")
  T.eq(tonumber(os.getenv("RANK")), rank, "RANK")
  T.eq(tonumber(os.getenv("WORLD_SIZE")), world, "WORLD_SIZE")
  T.eq(tonumber(os.getenv("LOCAL_RANK")), rank, "LOCAL_RANK")
  T.eq(dist.get_backend(), "mpi", "backend")
  T.eq(torch.distributed, dist, "torch.distributed")
end)

T.run()
