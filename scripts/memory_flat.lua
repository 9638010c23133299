-- Issue 12's check that a long training loop runs at flat memory: 20,000
-- steps of a small MLP (Adam, cross-entropy, batch 32), recording every 1,000
-- steps the process's RSS, the CPU allocator's counters and Lua's heap.
-- Run: build/tensh scripts/memory_flat.lua [steps] [every]. Prints one row per
-- record and exits 1 if the last record's RSS or reserved bytes exceed those
-- after the first 2,000 steps (the warm-up) by more than 1 MiB.
-- (tests/lua/test_cpu_memory.lua asserts the allocator's side of this in the suite.)
if arg and (arg[1] == "--help" or arg[1] == "-h") then
  print([[usage: tensh scripts/memory_flat.lua [steps] [every]

Train a small MLP for `steps` steps (default 20000), printing RSS, the CPU
allocator's counters and Lua's heap every `every` steps (default 1000); exit 1
if RSS or reserved memory grew by more than 1 MiB after the first 2 * every steps.]])
  os.exit(0)
end
local steps, every = tonumber(arg and arg[1]) or 20000, tonumber(arg and arg[2]) or 1000
local function rss_kb()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmRSS:%s+(%d+)")
    if kb then return tonumber(kb) end
  end
end
torch.manual_seed(0)
local model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))
local opt, crit = optim.Adam(model:parameters(), {lr = 1e-3}), nn.CrossEntropyLoss()
local x, y = torch.randn(32, 64), torch.randint(0, 10, {32})
local cpu = torch.cpu
print(("%6s %9s %12s %12s %10s %9s %8s"):format("step", "rss_kb", "allocated", "reserved", "segments", "lua_kb", "loss"))
local base
for i = 1, steps do
  opt:zero_grad()
  local loss = crit(model(x), y)
  loss:backward()
  opt:step()
  if i % every == 0 then
    local row = {i, rss_kb(), cpu.memory_allocated(), cpu.memory_reserved(), cpu.memory_stats()["num_device_alloc"],
                 math.floor(collectgarbage("count")), loss:item()}
    print(("%6d %9d %12d %12d %10d %9d %8.4f"):format(table.unpack(row)))
    if i == 2 * every then base = row end
    if i == steps and base then
      local grew_rss, grew_res = (row[2] - base[2]) * 1024, row[4] - base[4]
      print(("after step %d: RSS %+d bytes, reserved %+d bytes since step %d"):format(i, grew_rss, grew_res, base[1]))
      if grew_rss > (1 << 20) or grew_res > (1 << 20) then os.exit(1) end
    end
  end
end
