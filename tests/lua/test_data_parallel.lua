-- nn.DataParallel (lua/tensh/nn/data_parallel.lua). The cases that need two
-- CUDA devices run on the simulated ones (tests/run.sh runs this file under
-- build-sim with TENSH_SIM_DEVICES=2) or a machine with two GPUs, and skip
-- elsewhere saying so. Each compares with the same module run on the CPU on
-- the same pieces of the batch: the replicas see chunk() pieces, so a
-- module whose output depends on the whole batch (batch norm in training)
-- is compared piece by piece, as PyTorch's DataParallel computes it.
local T = require "harness"
local test, eq, ok, close, raises = T.test, T.eq, T.ok, T.close, T.raises

local function ndev() return (cuda and cuda.is_available()) and cuda.device_count() or 0 end
local function need_two()
  if ndev() < 2 then
    T.skip(("needs 2 CUDA devices, this build has %d (tests/run.sh runs it on two simulated ones: "
      .. "TENSH_SIM_DEVICES=2 under build-sim)"):format(ndev()))
  end
end

local function cpu_randn(a, b) return torch.randn(a, b, {device = "cpu"}) end

-- a CPU copy of net, with the same weights and buffers
local function cpu_twin(cls, net, ...)
  local twin = cls(...):cpu()
  twin:load_state_dict(net:state_dict())
  return twin
end

-- Records where each call ran: the input's device and size and the first
-- parameter's device.
local MLP = nn.Module:extend("MLP")
function MLP:init(calls)
  self.fc1 = nn.Linear(4, 8)
  self.act = nn.Tanh()
  self.fc2 = nn.Linear(8, 3)
  self.calls = calls
end
function MLP:forward(x)
  if self.calls then
    self.calls[#self.calls + 1] = {device = tostring(x.device), rows = x.shape[0], weight = tostring(self.fc1.weight.device)}
  end
  return self.fc2(self.act(self.fc1(x)))
end

-- an MLP on cuda:0 that records its calls, and its CPU twin
local function recorded_mlp()
  local calls = {}
  local m = MLP(calls):to("cuda:0")
  return m, cpu_twin(MLP, m), calls
end

local function grads(net)
  local out = {}
  for name, p in net:named_parameters() do out[name] = p.grad end
  return out
end

test("prints as PyTorch, reaches the module, state_dict keys carry module.", function()
  local m = MLP()
  local dp = nn.DataParallel(m)
  eq(tostring(dp), table.concat({
    "DataParallel(",
    "  (module): MLP(",
    "    (fc1): Linear(in_features=4, out_features=8, bias=True)",
    "    (act): Tanh()",
    "    (fc2): Linear(in_features=8, out_features=3, bias=True)",
    "  )",
    ")"}, "\n"), "print")
  ok(rawequal(dp.module, m), "model.module is the wrapped module")
  local keys = {}
  for k in pairs(dp:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  eq(table.concat(keys, " "), "module.fc1.bias module.fc1.weight module.fc2.bias module.fc2.weight", "state_dict keys")
  eq(#dp:parameters(), 4, "the wrapped module's parameters are the wrapper's")
  local fresh = nn.DataParallel(MLP())
  fresh:load_state_dict(dp:state_dict())
  close(fresh.module.fc1.weight, m.fc1.weight, 0, 0, "a state_dict loads back into a DataParallel")
end)

test("without CUDA devices it is the module itself", function()
  if ndev() > 0 then T.skip("this build has CUDA devices (the one-device case below covers the direct call)") end
  local m = MLP()
  local dp = nn.DataParallel(m, {device_ids = {0, 1}})
  eq(#dp.device_ids, 0, "no devices used")
  local x = cpu_randn(5, 4)
  close(dp(x), m(x), 0, 0, "same output as the module")
  eq(tostring(dp(x).device), "cpu", "on the CPU")
end)

test("one device: the module moves there and sees the whole batch", function()
  if ndev() < 1 then T.skip("needs a CUDA device") end
  local calls = {}
  local m = MLP(calls):cpu()
  local twin = cpu_twin(MLP, m)
  local dp = nn.DataParallel(m, {device_ids = {0}})
  eq(tostring(m.fc1.weight.device), "cuda:0", "moved to device_ids[0] as PyTorch does")
  local x = cpu_randn(5, 4)
  local y = dp(x)
  eq(tostring(y.device), "cuda:0", "output on the device")
  close(y, twin(x), 1e-5, 1e-6, "output")
  eq(#calls, 1, "one call")
  eq(calls[1].rows, 5, "the whole batch")
end)

test("two devices: outputs and summed gradients equal the CPU's, replicas on their devices", function()
  need_two()
  local m, twin, calls = recorded_mlp()
  local dp = nn.DataParallel(m, {device_ids = {0, 1}})
  local x, target = cpu_randn(6, 4), cpu_randn(6, 3)
  local y = dp(x)
  eq(tostring(y.device), "cuda:0", "gathered on device_ids[0]")
  eq(tostring(y.shape), "torch.Size([6, 3])", "gathered shape")
  eq(#calls, 2, "one call per replica")
  eq(calls[1].device .. " " .. calls[1].weight .. " " .. calls[1].rows, "cuda:0 cuda:0 3", "replica 0")
  eq(calls[2].device .. " " .. calls[2].weight .. " " .. calls[2].rows, "cuda:1 cuda:1 3", "replica 1")
  local yr = twin(x)
  close(y, yr, 1e-5, 1e-5, "output")
  nn.functional.mse_loss(y, target:to("cuda:0")):backward()
  nn.functional.mse_loss(yr, target):backward()
  local g, gr = grads(m), grads(twin)
  for name, t in pairs(gr) do
    ok(g[name] ~= nil, name .. " has a gradient")
    eq(tostring(g[name].device), "cuda:0", name .. ".grad on the original's device")
    close(g[name], t, 1e-4, 1e-5, name .. ".grad (the replicas' gradients summed)")
  end
  ok(m.fc1.weight.is_leaf and m.fc1.weight.requires_grad, "the originals stay leaves")
end)

test("training: several SGD steps through DataParallel equal the CPU's", function()
  need_two()
  local m = MLP():to("cuda:0")
  local twin = cpu_twin(MLP, m)
  local dp = nn.DataParallel(m)
  local opt, opt_r = optim.SGD(dp:parameters(), {lr = 0.1, momentum = 0.9}), optim.SGD(twin:parameters(), {lr = 0.1, momentum = 0.9})
  for _ = 1, 4 do
    local x, target = cpu_randn(7, 4), cpu_randn(7, 3)
    opt:zero_grad()
    nn.functional.mse_loss(dp(x), target:to("cuda:0")):backward()
    opt:step()
    opt_r:zero_grad()
    nn.functional.mse_loss(twin(x), target):backward()
    opt_r:step()
  end
  local mine = {}
  for name, p in m:named_parameters() do mine[name] = p end
  for name, p in twin:named_parameters() do close(mine[name], p, 1e-4, 1e-5, name .. " after 4 steps") end
end)

test("uneven splits follow chunk(): 5 rows as 3 + 2, 7 along dim 1 as 4 + 3", function()
  need_two()
  local m, twin, calls = recorded_mlp()
  local x = cpu_randn(5, 4)
  local y = nn.DataParallel(m)(x)
  eq(calls[1].rows .. "+" .. calls[2].rows, "3+2", "chunk sizes")
  close(y, twin(x), 1e-5, 1e-5, "output")
  -- dim = 1: a module that scales each column; output gathered along dim 1
  local Scale = nn.Module:extend("Scale")
  function Scale:init() self.w = nn.Parameter(torch.full({1}, 3.0)) end
  local cols = {}
  function Scale:forward(v)
    cols[#cols + 1] = v.shape[1]
    return v * self.w
  end
  local s = Scale():to("cuda:0")
  local v = cpu_randn(2, 7)
  local out = nn.DataParallel(s, {dim = 1})(v)
  eq(T.fmt(cols), "{4, 3}", "columns per replica")
  eq(tostring(out.shape), "torch.Size([2, 7])", "gathered along dim 1")
  close(out, v * 3, 1e-6, 1e-6, "values in place")
  out:sum():backward()
  close(s.w.grad, {v:sum():item()}, 1e-5, 1e-5, "the two replicas' gradients summed")
end)

test("a batch smaller than the device count uses fewer devices", function()
  need_two()
  local m, twin, calls = recorded_mlp()
  local x = cpu_randn(1, 4)
  local y = nn.DataParallel(m, {device_ids = {0, 1}})(x)
  eq(#calls, 1, "one replica ran")
  eq(calls[1].device, "cuda:0", "on the first device")
  close(y, twin(x), 1e-5, 1e-5, "output")
  y:sum():backward()
  local yr = twin(x)
  yr:sum():backward()
  close(m.fc2.weight.grad, twin.fc2.weight.grad, 1e-5, 1e-5, "gradient")
end)

local BNNet = nn.Module:extend("BNNet")
function BNNet:init()
  self.fc = nn.Linear(4, 6)
  self.bn = nn.BatchNorm1d(6)
end
function BNNet:forward(x) return self.bn(self.fc(x)):relu() end

test("batch norm: statistics per replica, replica 0's running statistics kept", function()
  need_two()
  local m = BNNet():to("cuda:0")
  local twin = cpu_twin(BNNet, m)
  local x = cpu_randn(10, 4)
  local y = nn.DataParallel(m)(x)
  local y0, y1 = twin(x:narrow(0, 0, 5)), nil
  local rm0, rv0 = twin.bn.running_mean:clone(), twin.bn.running_var:clone()
  y1 = twin(x:narrow(0, 5, 5))
  local yr = torch.cat({y0, y1}, 0)
  close(y, yr, 1e-4, 1e-5, "each replica normalises its own piece")
  close(m.bn.running_mean, rm0, 1e-5, 1e-6, "running_mean: replica 0's update")
  close(m.bn.running_var, rv0, 1e-5, 1e-6, "running_var: replica 0's update")
  eq(m.bn.num_batches_tracked:item(), 1, "num_batches_tracked counts once")
  local w = cpu_randn(10, 6)
  local loss, loss_r = (y * w:to("cuda:0")):sum(), (yr * w):sum()
  loss:backward()
  loss_r:backward()
  close(m.fc.weight.grad, twin.fc.weight.grad, 1e-4, 1e-4, "fc.weight.grad")
  close(m.bn.weight.grad, twin.bn.weight.grad, 1e-4, 1e-4, "bn.weight.grad")
  twin:load_state_dict(m:state_dict()) -- the twin saw the second piece too
  m:eval()
  twin:eval()
  close(nn.DataParallel(m)(x), twin(x), 1e-4, 1e-5, "eval mode uses the running statistics")
end)

test("outputs: nested tables, several return values, output_device, no_grad", function()
  need_two()
  local Multi = nn.Module:extend("Multi")
  function Multi:init() self.fc = nn.Linear(3, 2) end
  function Multi:forward(x, opts)
    local h = self.fc(x)
    return {logits = h, extra = {h * opts.k, x:sum(1)}, loss = h:sum()}, h:relu()
  end
  local m = Multi():to("cuda:0")
  local twin = cpu_twin(Multi, m)
  local x = cpu_randn(4, 3)
  local dp = nn.DataParallel(m, {device_ids = {1, 0}, output_device = "cpu"})
  raises(function() dp(x, {k = 2}) end,
    "module must have its parameters and buffers on device cuda:1 (device_ids[0]) but found one of them on device: cuda:0",
    "module on the wrong device")
  m:to("cuda:1")
  local out, r = dp(x, {k = 2})
  local ref, rr = twin(x, {k = 2})
  eq(tostring(out.logits.device) .. " " .. tostring(r.device), "cpu cpu", "gathered on the CPU")
  close(out.logits, ref.logits, 1e-5, 1e-6, "logits")
  close(out.extra[1], ref.extra[1], 1e-5, 1e-6, "extra[1] (a non-tensor argument reached both replicas)")
  close(out.extra[2], ref.extra[2], 1e-5, 1e-6, "extra[2]")
  close(r, rr, 1e-5, 1e-6, "second return value")
  eq(tostring(out.loss.shape), "torch.Size([2])", "0-dim outputs become a vector, one per replica")
  close(out.loss:sum(), ref.loss, 1e-4, 1e-5, "their sum")
  out.logits:sum():backward()
  ref.logits:sum():backward()
  close(m.fc.weight.grad, twin.fc.weight.grad, 1e-5, 1e-5, "gradient through the CPU gather")
  local y = torch.no_grad(function() return dp(x, {k = 1}) end)
  ok(not y.logits.requires_grad, "no graph under no_grad")
end)

test("bad arguments, with or without devices: clear errors naming DataParallel", function()
  raises(function() nn.DataParallel("net") end, "DataParallel: expected an nn.Module to wrap, got string")
  raises(function() nn.DataParallel(MLP(), {device_idz = {0}}) end, "DataParallel: unknown option 'device_idz'")
  raises(function() nn.DataParallel(MLP(), {dim = 0.5}) end, "DataParallel: dim must be an integer, got 0.5")
  raises(function() nn.DataParallel(MLP(), nil, nil, 0, {foo = 1}) end, "DataParallel: unknown option 'foo'")
end)

test("bad input on devices: clear errors naming DataParallel", function()
  if ndev() < 1 then T.skip("needs a CUDA device (without one DataParallel is the module itself)") end
  local n = ndev()
  raises(function() nn.DataParallel(MLP(), {device_ids = {0, n}}) end,
    ("DataParallel: device_ids names cuda:%d, but there"):format(n), "a missing device")
  raises(function() nn.DataParallel(MLP(), {device_ids = {"cpu"}}) end, "DataParallel: each of device_ids must be a CUDA device, got cpu")
  raises(function() nn.DataParallel(MLP(), {device_ids = {}}) end, "DataParallel: device_ids is empty")
  local m = MLP():to("cuda:0")
  raises(function() nn.DataParallel(m, {dim = 2})(cpu_randn(4, 4)) end,
    "DataParallel: dim 2 is out of range for an input of 2 dimensions (shape (4, 4); expected a dim in [-2, 1])")
  raises(function() nn.DataParallel(m)(torch.tensor(1.0)) end, "DataParallel: can't scatter a 0-dim tensor")
  if n >= 2 then
    raises(function() nn.DataParallel(MLP():cpu())(cpu_randn(4, 4)) end,
      "DataParallel: module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cpu")
    local err = raises(function() nn.DataParallel(m)(cpu_randn(4, 5)) end, "DataParallel: caught an error in replica 0 on device 0:")
    ok(err:find("Linear", 1, true), "the replica's own message follows: " .. err)
    local Str = nn.Module:extend("Str")
    function Str:forward() return "text" end
    raises(function() nn.DataParallel(Str():to("cuda:0"))(cpu_randn(4, 1)) end,
      "DataParallel: can't gather a string from the replicas' outputs")
  end
end)

T.run()
