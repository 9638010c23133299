-- The current device is the user's: ops, copies and library calls on another
-- device run under a device guard and leave cuda.current_device() where
-- cuda.set_device or a cuda.device scope put it, as PyTorch's do. Needs two
-- devices (the simulated device has two in make test); skips otherwise.
local T = require "harness"
local test, eq, close = T.test, T.eq, T.close

local function need_two()
  if not (cuda and cuda.is_available() and cuda.device_count() >= 2) then T.skip("needs two CUDA devices") end
end

-- Each piece of work on cuda:1, named; run with cuda:0 current.
local work = {
  {"creation", function() return torch.ones(3, {device = "cuda:1"}) end},
  {"add", function(a) return a + a end},
  {"in-place mul", function(a) return a:clone():mul_(2) end},
  {"sum", function(a) return a:sum() end},
  {"matmul (the library)", function(a) return a:view(3, 1):matmul(a:view(1, 3)) end},
  {"copy to the CPU", function(a) return a:cpu() end},
  {"item", function(a) return a:sum():item() end},
  {"copy from the CPU", function() return torch.arange(3):to("cuda:1") end},
  {"copy between devices", function(a) return a:to("cuda:0"):to("cuda:1") end},
  {"backward", function()
    local w = torch.ones(2, 2, {device = "cuda:1", requires_grad = true})
    w:matmul(w):sum():backward()
    return w.grad
  end},
  {"indexing", function(a) return a:index_select(0, torch.tensor({2, 0}, {device = "cuda:1"})) end},
  {"sort", function(a) return (a * torch.tensor({3.0, 1.0, 2.0}, {device = "cuda:1"})):sort() end},
  {"synchronize", function() return cuda.synchronize(1) end},
  {"memory stats", function() return cuda.memory_allocated(1) end},
}

test("every op on cuda:1 leaves cuda:0 current, and new tensors land there", function()
  need_two()
  cuda.set_device(0)
  local a = torch.ones(3, {device = "cuda:1"})
  for _, w in ipairs(work) do
    w[2](a)
    eq(cuda.current_device(), 0, w[1] .. ": the current device afterwards")
    eq(torch.zeros(3):cuda().device.index, 0, w[1] .. ": zeros(3):cuda() lands on the current device")
  end
  close(a:sum(), 3, 0, 0, "the ops ran on cuda:1")
end)

test("with cuda:1 current, work on cuda:0 leaves cuda:1 current", function()
  need_two()
  cuda.set_device(1)
  local a = torch.ones(3, {device = "cuda:0"})
  local b = (a + 1):sum()
  eq(cuda.current_device(), 1, "after ops on cuda:0")
  eq(b.device.index, 0, "the result stays on cuda:0")
  eq(torch.zeros(1, {device = "cuda"}).device.index, 1, "'cuda' means the current device")
  cuda.set_device(0)
end)

test("a failing op on another device restores the current device too", function()
  need_two()
  cuda.set_device(0)
  local a = torch.ones(3, {device = "cuda:1"})
  T.raises(function() return a:view(2, 2) end, "invalid")
  T.raises(function() return a:matmul(torch.ones(4, {device = "cuda:1"})) end, "")
  eq(cuda.current_device(), 0, "after the errors")
end)

test("cuda.device(i) as a scope: <close> and the function form, nested, restored on error", function()
  need_two()
  cuda.set_device(0)
  do
    local _ <close> = cuda.device(1)
    eq(cuda.current_device(), 1, "inside")
    local x = torch.ones(2):cuda()
    eq(x.device.index, 1, ":cuda() inside the scope")
    local y = (torch.ones(2, {device = "cuda:0"}) * 2):sum()
    eq(y.device.index, 0, "an op on cuda:0 inside")
    eq(cuda.current_device(), 1, "still inside after an op on cuda:0")
    do
      local _ <close> = cuda.device(0)
      eq(cuda.current_device(), 0, "nested")
    end
    eq(cuda.current_device(), 1, "back from the nested scope")
  end
  eq(cuda.current_device(), 0, "after the scope")
  local r = cuda.device(1, function(k) return torch.full({2}, k, {device = "cuda"}) end, 5)
  eq(r.device.index, 1, "the function form runs on the device")
  eq(cuda.current_device(), 0, "after the function form")
  T.raises(function() cuda.device(1, function() error("inside") end) end, "inside")
  eq(cuda.current_device(), 0, "after an error in the function form")
end)

T.run()
