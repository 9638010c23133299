-- torch.rand on float32 has a loop of its own (src/cpu/random.c, dropout's
-- masks): element j still draws Philox counter offset + j, so the values do
-- not depend on the length asked for or the thread count.
local T = require "harness"
local test, eq, ok = T.cpu_test, T.eq, T.ok

test("float32 rand: the same draws at any length and thread count", function()
  local threads = torch.get_num_threads()
  torch.manual_seed(11)
  local long = torch.rand(100003)
  torch.manual_seed(11)
  local short = torch.rand(37)
  eq(short:eq(long:narrow(0, 0, 37)):all():item(), true, "a prefix draws the same values")
  for _, nt in ipairs({1, 2, 3}) do
    torch.set_num_threads(nt)
    torch.manual_seed(11)
    local again = torch.rand(100003)
    eq(again:eq(long):all():item(), true, nt .. " threads")
  end
  torch.set_num_threads(threads)
  ok(long:min():item() >= 0 and long:max():item() < 1, "in [0, 1)")
  T.close(long:mean(), 0.5, 0, 0.005, "mean")
  -- uniform_ on a float32 tensor and rand with a range go through the op's bounds
  torch.manual_seed(11)
  local u = torch.empty(100003):uniform_(-2, 3)
  T.close(u, long * 5 - 2, 1e-6, 1e-6, "uniform_(-2, 3) is -2 + 5 u of the same draws")
end)

T.run()
