-- Run by test_cuda_sim.lua under an address-space limit a little past what
-- the process holds once it has used cuda: host memory is used up, then a
-- reduction (its threads wait at barriers, so each keeps a fiber stack) needs
-- more fibers than the host can give. The launch must fail with a clear
-- error rather than end the process (std::bad_alloc in a simulator worker).
local x = torch.randn(4096, {device = "cuda"})
local keep = {}
while true do -- the address space left, 16 M floats at a time
  local ok, t = pcall(torch.empty, 16 << 20)
  if not ok then break end
  keep[#keep + 1] = t
end
local ok, err = pcall(function() return x:sum():item() end)
print("RESULT", ok, err)
