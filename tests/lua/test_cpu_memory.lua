-- The CPU caching allocator (src/cpu/cache.c) through torch.cpu: its
-- statistics against sizes computed here, reuse of freed buffers, empty_cache,
-- the out-of-memory path, and memory that stays flat over a long training
-- loop and over a DataLoader whose workers allocate what the main thread frees.
-- Every check reads the allocator's counters (collectgarbage() first: a
-- tensor Lua dropped holds its buffer until collected).
local T = require "harness"
local test, eq, ok, raises = T.cpu_test, T.eq, T.ok, T.raises
local cpu = torch.cpu

local function settle() collectgarbage() collectgarbage() end
local function stat(k) return cpu.memory_stats()[k] end
local function round512(n) return (n + 511) // 512 * 512 end
local build = os.getenv("TENSH_BUILD") or "../../build"
-- resident memory in kB, as source: the DataLoader case's child process runs it too
local RSS_KB = [[return function()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmRSS:%s+(%d+)")
    if kb then return tonumber(kb) end
  end
end]]
local rss_kb = load(RSS_KB)()

test("memory_allocated counts each buffer above 512 bytes, rounded to 512", function()
  settle()
  local base, base_peak = cpu.memory_allocated(), cpu.max_memory_allocated()
  local x = torch.empty(1000, 1000) -- 4,000,000 bytes
  eq(cpu.memory_allocated() - base, round512(4000000), "one 1000x1000 float32")
  ok(cpu.memory_reserved() >= cpu.memory_allocated(), "reserved covers allocated")
  ok(cpu.max_memory_allocated() >= base + round512(4000000), "peak")
  local y = torch.empty(129) -- 516 bytes: counted as 1024
  eq(cpu.memory_allocated() - base, round512(4000000) + 1024, "a 516-byte buffer")
  local z = torch.empty(128) -- 512 bytes: malloc's, not counted
  eq(cpu.memory_allocated() - base, round512(4000000) + 1024, "a 512-byte buffer is not the cache's")
  local v = x:view(500, 2000) -- a view shares the buffer
  eq(cpu.memory_allocated() - base, round512(4000000) + 1024, "views add nothing")
  x, y, z, v = nil, nil, nil, nil
  settle()
  eq(cpu.memory_allocated(), base, "freed")
  eq(stat("allocated_bytes.all.current"), base, "memory_stats agrees")
  cpu.reset_peak_memory_stats()
  eq(cpu.max_memory_allocated(), base, "peak reset to now")
  ok(base_peak >= 0, "peak read")
end)

test("a freed buffer is reused: no new mapping for the same size again", function()
  settle()
  local a = torch.randn(512, 1024)
  a = nil
  settle()
  local maps, reserved = stat("num_device_alloc"), cpu.memory_reserved()
  for _ = 1, 50 do
    local b = torch.randn(512, 1024) * 2
    T.close(b:sum() - b:sum(), 0)
  end
  settle()
  eq(stat("num_device_alloc"), maps, "mappings made by 50 rounds of the same sizes")
  eq(cpu.memory_reserved(), reserved, "reserved")
end)

test("empty_cache unmaps the wholly free segments and keeps live buffers", function()
  settle()
  cpu.empty_cache()
  local keep = torch.full({300, 1000}, 3.0)
  local reserved0 = cpu.memory_reserved()
  local big = {}
  for i = 1, 4 do big[i] = torch.empty(4 * 1024 * 1024) end -- 16 MiB each
  ok(cpu.memory_reserved() >= reserved0 + 3 * 16 * 1024 * 1024, "at least three new 16 MiB segments")
  big = nil
  settle()
  local segs = stat("segment.all.current")
  eq(cpu.memory_allocated(), round512(300 * 1000 * 4), "only keep is live")
  cpu.empty_cache()
  eq(cpu.memory_reserved(), reserved0, "back to the segment that holds keep")
  ok(stat("segment.all.current") < segs, "segments released")
  eq(keep:sum():item(), 900000.0, "a live tensor is intact")
  local again = torch.ones(4 * 1024 * 1024) -- and the cache maps anew
  eq(again:sum():item(), 4 * 1024 * 1024.0, "allocation after empty_cache")
end)

test("a dropped 200 MB tensor goes back to the system: resident memory returns without empty_cache", function()
  -- above TENSH_CPU_CACHE_MAX_BLOCK (32 MiB) a buffer is unmapped when freed, as
  -- glibc's malloc does above its mmap threshold; the cache kept two (400 MiB)
  settle()
  local before = rss_kb()
  local n = 200 * 1000 * 1000 // 4
  for _ = 1, 20 do
    local x = torch.ones(n)
    x = nil
  end
  settle()
  local grown = rss_kb() - before
  -- (not under `make asan`: AddressSanitizer's shadow of each address a
  -- buffer took, an eighth of its size, stays resident after the munmap, 24 MiB
  -- for each new address; the cache's own count below is checked there too)
  if not os.getenv("ASAN_OPTIONS") then
    ok(grown < 32 * 1024, ("resident memory grew by %d kB after 20 cycles of 200 MB"):format(grown))
  end
  ok(cpu.memory_reserved() - cpu.memory_allocated() < 32 * 1024 * 1024, "no 200 MB segment is cached")
  local keep = torch.ones(n) -- a live one is untouched
  eq(keep[-1]:item(), 1.0, "a live big tensor")
end)

test("idle memory is bounded by TENSH_CPU_CACHE_LIMIT, big blocks by TENSH_CPU_CACHE_MAX_BLOCK", function()
  -- a child process: the cache reads its bounds when it starts
  local script = os.tmpname()
  T.write_file(script, [[
    local MiB = 1024 * 1024
    local function reserved() return torch.cpu.memory_reserved() // MiB end
    local live = {}
    for i = 1, 10 do live[i] = torch.empty(3 * MiB) end -- 12 MiB each: a segment of its own
    live = nil
    print("limit", reserved())
    local x = torch.empty(6 * MiB) -- 24 MiB, above the 16 MiB max block
    x = nil
    print("big", reserved())
    for _ = 1, 20 do local y = torch.empty(3 * MiB) end -- one size again and again: reused
    print("reuse", reserved(), torch.cpu.memory_stats()["num_device_alloc"])
    for _ = 1, 20 do local y = torch.empty(3 * MiB) end
    print("reuse", reserved(), torch.cpu.memory_stats()["num_device_alloc"])
  ]])
  local p = assert(io.popen(("TENSH_CPU_CACHE_LIMIT=40M TENSH_CPU_CACHE_MAX_BLOCK=16MiB %s/tensh %s 2>&1")
    :format(build, script)))
  local out = p:read("a")
  p:close()
  local got = {}
  for k, v, m in out:gmatch("(%a+)\t(%d+)\t?(%d*)") do got[#got + 1] = {k, tonumber(v), tonumber(m)} end
  os.remove(script)
  eq(#got, 4, "the child's report (output: " .. out .. ")")
  eq(got[1][2], 36, "ten idle 12 MiB segments trimmed to three (36 MiB <= 40 MiB)")
  eq(got[2][2], 36, "a 24 MiB buffer is unmapped when freed")
  ok(got[3][2] <= 40, "the loop stays within the limit")
  eq(got[4][3], got[3][3], "no new mapping for 20 more rounds of the same size")
  p = assert(io.popen(("TENSH_CPU_CACHE_LIMIT=lots %s/tensh -e 'torch.ones(1000)' 2>&1"):format(build)))
  out = p:read("a")
  p:close()
  ok(out:find("TENSH_CPU_CACHE_LIMIT=lots is not a size such as 256M or 1G; using 256 MiB", 1, true),
    "an unreadable setting is named, and the default used: " .. out)
end)

test("by default the idle limit follows the most mapped at once: a step bigger than 256 MiB maps nothing anew", function()
  -- a child process without TENSH_CPU_CACHE_LIMIT; torch.empty touches no page, so
  -- the 320 MiB are address space, not memory
  local script = os.tmpname()
  T.write_file(script, [[
    local MiB = 1024 * 1024
    local function step()
      local live = {}
      for i = 1, 20 do live[i] = torch.empty(4 * MiB) end -- 16 MiB each: below the max block
    end
    for round = 1, 3 do
      step()
      print("round", torch.cpu.memory_reserved() // MiB, torch.cpu.memory_stats()["num_device_alloc"])
    end
  ]])
  local p = assert(io.popen(("env -u TENSH_CPU_CACHE_LIMIT -u TENSH_CPU_CACHE_MAX_BLOCK %s/tensh %s 2>&1")
    :format(build, script)))
  local out = p:read("a")
  p:close()
  os.remove(script)
  local got = {}
  for v, m in out:gmatch("round\t(%d+)\t(%d+)") do got[#got + 1] = {tonumber(v), tonumber(m)} end
  eq(#got, 3, "the child's report (output: " .. out .. ")")
  ok(got[1][1] >= 320, ("the first step's 320 MiB stay mapped once free (%d MiB)"):format(got[1][1]))
  eq(got[3][2], got[1][2], "no new mapping in the later steps")
end)

test("out of memory: a clear error, counters unchanged, the session goes on", function()
  settle()
  local allocated, ooms = cpu.memory_allocated(), stat("num_ooms")
  -- 2^48 bytes: more than the address space, so no mapping can succeed
  raises(function() return torch.empty(2 ^ 46) end, "out of memory: tried to allocate 281474976710656 bytes on cpu",
    "message")
  -- one per failed attempt: the first, and the storage layer's retry after
  -- Lua's full collection (every build runs it: src/lua/lcuda.c's oom_collect)
  eq(stat("num_ooms"), ooms + 2, "num_ooms")
  eq(stat("num_alloc_retries") >= 1, true, "the cache was released and retried first")
  eq(cpu.memory_allocated(), allocated, "nothing allocated")
  eq(torch.ones(1000):sum():item(), 1000.0, "the next allocation works")
end)

test("a 20,000-step training loop runs at flat memory", function()
  torch.manual_seed(0)
  local model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
  local opt = optim.Adam(model:parameters(), {lr = 1e-3})
  local x, y = torch.randn(32, 64), torch.randint(0, 10, {32})
  local crit = nn.CrossEntropyLoss()
  local function step()
    opt:zero_grad()
    local loss = crit(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end
  local first_loss = step():item()
  for _ = 1, 999 do step() end
  settle()
  local allocated, reserved, maps = cpu.memory_allocated(), cpu.memory_reserved(), stat("num_device_alloc")
  local peak_reserved = reserved
  local last_loss
  for i = 1, 19000 do
    last_loss = step()
    if i % 1000 == 0 then peak_reserved = math.max(peak_reserved, cpu.memory_reserved()) end
  end
  last_loss = last_loss:item()
  settle()
  eq(cpu.memory_allocated(), allocated, "bytes in live buffers after 1,000 and after 20,000 steps")
  eq(cpu.memory_reserved(), reserved, "bytes reserved after 1,000 and after 20,000 steps")
  eq(peak_reserved, reserved, "reserved never grew in between")
  eq(stat("num_device_alloc"), maps, "no new mapping after the first 1,000 steps")
  ok(last_loss < first_loss, ("the loop trained (loss %.4f -> %.4f)"):format(first_loss, last_loss))
end)

test("a loop of 1-element ops keeps few dead tensors: resident memory stays flat", function()
  -- Lua sees ~40 bytes of userdata per tensor, not the ~360 bytes of C behind it; unless the
  -- binding charges them, 400,000 adds left ~100 MB of dead tensors resident
  local a, b = torch.ones(1), torch.ones(1)
  for _ = 1, 20000 do local _ = a + b end
  local before, heap = rss_kb(), 0
  for i = 1, 400000 do
    local _ = a + b
    if i % 20000 == 0 then heap = math.max(heap, collectgarbage("count")) end
  end
  local grown = rss_kb() - before
  ok(grown < 16 * 1024, ("resident memory grew by %d kB over 400,000 adds"):format(grown))
  ok(heap < 8 * 1024, ("Lua's heap reached %.0f kB"):format(heap))
end)

test("DataLoader workers allocate, the main thread frees: memory stays flat (MALLOC_ARENA_MAX=2)", function()
  -- a child process, so that glibc reads MALLOC_ARENA_MAX at its start
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write([[
    local ds = data.TensorDataset(torch.randn(512, 3, 32, 32), torch.arange(512))
    local loader = data.DataLoader(ds, {batch_size = 64, shuffle = true, num_workers = 2})
    local rss_kb = load(]] .. ("%q"):format(RSS_KB) .. [[)()
    for epoch = 1, 40 do
      local sum = 0
      for x, y in loader:iter() do sum = sum + x:sum():item() + y:sum():item() end
      collectgarbage() collectgarbage()
      if epoch == 5 or epoch == 40 then
        print(epoch, torch.cpu.memory_allocated(), torch.cpu.memory_reserved(),
          torch.cpu.memory_stats()["num_device_alloc"], rss_kb())
      end
    end
  ]])
  f:close()
  local p = assert(io.popen(("MALLOC_ARENA_MAX=2 %s/tensh %s 2>&1"):format(build, script)))
  local out = p:read("a")
  p:close()
  os.remove(script)
  local rows = {}
  for line in out:gmatch("[^\n]+") do
    local e, a, r, m, rss = line:match("^(%d+)%s+(%d+)%s+(%d+)%s+(%d+)%s+(%d+)$")
    if e then rows[#rows + 1] = {a = tonumber(a), r = tonumber(r), m = tonumber(m), rss = tonumber(rss)} end
  end
  eq(#rows, 2, "the child's report (output: " .. out .. ")")
  eq(rows[2].a, rows[1].a, "allocated after 5 and 40 epochs")
  -- how many batches are in flight at once depends on how the threads are
  -- scheduled (2 workers x prefetch 2 x 786 kB), so the cache may map one
  -- more segment later on; a leak would grow with the 35 epochs' 210 MB
  ok(rows[2].r - rows[1].r <= 8 * 1024 * 1024,
    ("reserved after 5 and 40 epochs: %d -> %d bytes"):format(rows[1].r, rows[2].r))
  -- 35 epochs move 35 x 6 MB of batches between threads; a leak of the
  -- fragmentation kind grows by that much, the Lua heap by far less
  ok(rows[2].rss - rows[1].rss < 16 * 1024, ("resident memory grew %d kB"):format(rows[2].rss - rows[1].rss))
end)

T.run()
