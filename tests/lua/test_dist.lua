-- dist (torch.distributed) and `tensh --nproc`: the single-process errors
-- here, the collectives in two processes (tests/lua/dist/*.lua, started
-- with `tensh --nproc 2` and bounded by a timeout: a hang is a failure, not
-- a stuck suite). Skipped with the reason where mpirun is missing.
local T = require "harness"

local build = os.getenv("TENSH_BUILD") or "../../build"
local tensh = build .. "/tensh"
local has_mpirun = os.execute("command -v mpirun >/dev/null 2>&1") == true

local function need_mpirun()
  if not has_mpirun then T.skip("needs Open MPI's mpirun (apt-get install openmpi-bin libopenmpi3)") end
end

-- Runs a shell command with a time limit; returns its output and exit code
-- (124: the limit was reached).
local function run(cmd, limit)
  local p = io.popen(("%stimeout %d %s 2>&1; echo \"exit=$?\""):format(T.MPI_ASAN_ENV, limit or 120, cmd))
  local out = p:read("a")
  p:close()
  local code = tonumber(out:match("exit=(%d+)%s*$"))
  return out, code
end

local function shows(out) return "\n    | " .. out:gsub("\n", "\n    | ") end

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)
local function script(name, src)
  local path = tmp .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write(src)
  f:close()
  return path
end

T.test("before init_process_group: rank queries say what to call", function()
  T.eq(dist.is_initialized(), false, "is_initialized")
  T.eq(dist.is_available(), true, "is_available")
  T.raises(function() dist.get_rank() end, "get_rank: the default process group has not been initialized")
  T.raises(function() dist.get_world_size() end, "get_world_size: the default process group has not been")
  T.raises(function() dist.all_reduce(torch.ones(1)) end, "all_reduce: the default process group has not been")
  T.raises(function() dist.barrier() end, "barrier: the default process group")
end)

T.test("init_process_group's arguments", function()
  T.raises(function() dist.init_process_group("gloo") end, "unknown backend 'gloo'")
  T.raises(function() dist.init_process_group(42) end, "bad argument #1 to 'init_process_group'")
  T.raises(function() dist.init_process_group("mpi", {init_method = "tcp://10.0.0.1:23456"}) end,
    "init_method 'tcp://10.0.0.1:23456' is not supported")
  T.raises(function() dist.init_process_group("mpi", {ranks = 1}) end, "unknown option 'ranks'")
  T.eq(dist.is_initialized(), false, "is_initialized after the errors")
end)

T.test("collectives in two processes against their definitions", function()
  need_mpirun()
  local out, code = run(("%s --nproc 2 dist/collectives.lua"):format(tensh), 300)
  T.ok(code ~= 124, "timed out (a hang):" .. shows(out))
  local ok = 0
  for line in out:gmatch("[^\n]+") do
    local p, f = line:match("^lua:collectives.lua: (%d+) passed, (%d+) failed")
    if p then
      T.ok(tonumber(p) >= 60 and f == "0", "a rank's line: " .. line .. shows(out))
      ok = ok + 1
    end
  end
  T.eq(ok, 2, "ranks that finished" .. (ok ~= 2 and shows(out) or ""))
  T.eq(code, 0, "exit code")
end)

T.test("DistributedDataParallel in two processes equals one process on the full batch", function()
  need_mpirun()
  local out, code = run(("%s --nproc 2 dist/ddp.lua"):format(tensh), 300)
  T.ok(code ~= 124, "timed out (a hang):" .. shows(out))
  local ok = 0
  for line in out:gmatch("[^\n]+") do
    local p, f = line:match("^lua:ddp.lua: (%d+) passed, (%d+) failed")
    if p then
      T.ok(tonumber(p) >= 6 and f == "0", "a rank's line: " .. line .. shows(out))
      ok = ok + 1
    end
  end
  T.eq(ok, 2, "ranks that finished" .. (ok ~= 2 and shows(out) or ""))
  T.eq(code, 0, "exit code")
end)

T.test("DistributedDataParallel before init_process_group", function()
  T.raises(function() nn.parallel.DistributedDataParallel(nn.Linear(2, 2)) end,
    "DistributedDataParallel: the default process group has not been initialized")
  T.eq(torch.nn.parallel.DistributedDataParallel, nn.parallel.DistributedDataParallel, "torch.nn.parallel")
end)

T.test("a rank that errors ends both processes with its message", function()
  need_mpirun()
  local s = script("fails.lua", [[
    dist.init_process_group("mpi")
    if dist.get_rank() == 1 then error("boom on purpose") end
    dist.all_reduce(torch.ones(4)) -- rank 0 waits here for a rank that is gone
    print("rank 0 went on")
  ]])
  local out, code = run(("%s --nproc 2 %s"):format(tensh, s), 60)
  T.ok(code ~= 124, "timed out (a hang):" .. shows(out))
  T.ok(code ~= 0, "exit code 0:" .. shows(out))
  T.ok(out:find("tensh: rank 1: [^\n]*fails.lua:2: boom on purpose"), "the message names the rank:" .. shows(out))
  T.ok(not out:find("rank 0 went on", 1, true), "rank 0 went on:" .. shows(out))
end)

T.test("a rank that errors before init_process_group, or exits with a failure, ends the job too", function()
  need_mpirun()
  local s = script("early.lua", [[
    if os.getenv("RANK") == "0" then error("no data here") end
    dist.init_process_group("mpi")
    dist.barrier()
  ]])
  local out, code = run(("%s --nproc 2 %s"):format(tensh, s), 60)
  T.ok(code ~= 124 and code ~= 0, "exit code " .. tostring(code) .. shows(out))
  T.ok(out:find("tensh: rank 0: [^\n]*no data here"), "the message names the rank:" .. shows(out))
  s = script("exits.lua", [[
    dist.init_process_group("mpi")
    if dist.get_rank() == 1 then os.exit(3) end
    dist.all_reduce(torch.ones(4))
  ]])
  out, code = run(("%s --nproc 2 %s"):format(tensh, s), 60)
  T.ok(code ~= 124 and code ~= 0, "os.exit(3): exit code " .. tostring(code) .. shows(out))
  T.ok(out:find("rank 1", 1, true), "os.exit(3): the output names rank 1:" .. shows(out))
end)

T.test("a rank killed by a signal ends the job", function()
  need_mpirun()
  local s = script("killed.lua", [[
    dist.init_process_group("mpi")
    if dist.get_rank() == 1 then
      local pid = io.open("/proc/self/stat"):read("l"):match("^(%d+)")
      os.execute("kill -KILL " .. pid)
    end
    dist.all_reduce(torch.ones(4))
  ]])
  local out, code = run(("%s --nproc 2 %s"):format(tensh, s), 60)
  T.ok(code ~= 124 and code ~= 0, "exit code " .. tostring(code) .. shows(out))
  T.ok(out:find("rank 1", 1, true) and out:find("signal 9", 1, true), "mpirun names the rank and signal:" .. shows(out))
end)

T.test("one process without mpirun is a world of one; mpirun -np 2 tensh works as --nproc 2", function()
  need_mpirun()
  local s = script("world.lua", [[
    dist.init_process_group("mpi")
    local t = torch.tensor({dist.get_rank() + 1.0})
    dist.all_reduce(t)
    print(("rank %d of %d sum %g"):format(dist.get_rank(), dist.get_world_size(), t:item()))
    dist.destroy_process_group()
    assert(not dist.is_initialized())
  ]])
  local out, code = run(("%s %s"):format(tensh, s), 60)
  T.eq(code, 0, "exit code" .. (code ~= 0 and shows(out) or ""))
  T.ok(out:find("rank 0 of 1 sum 1", 1, true), "a world of one:" .. shows(out))
  out, code = run(("env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe %s %s")
    :format(tensh, s), 60)
  T.eq(code, 0, "mpirun's exit code" .. (code ~= 0 and shows(out) or ""))
  T.ok(out:find("rank 0 of 2 sum 3", 1, true) and out:find("rank 1 of 2 sum 3", 1, true), "two ranks:" .. shows(out))
end)

T.test("tensh --nproc's own errors", function()
  local out, code = run(("%s --nproc x a.lua"):format(tensh), 30)
  T.eq(code, 1, "exit code")
  T.ok(out:find("--nproc needs a number of processes (1 to 4096), got 'x'", 1, true), out)
  out, code = run(("%s --nproc 2"):format(tensh), 30)
  T.eq(code, 1, "exit code")
  T.ok(out:find("needs a script to run", 1, true), out)
  out, code = run(("env TENSH_MPIRUN=/nonexistent/mpirun %s --nproc 2 x.lua"):format(tensh), 30)
  T.eq(code, 1, "exit code")
  T.ok(out:find("could not be started", 1, true) and out:find("openmpi-bin", 1, true), out)
end)

T.test("the nccl loader finds libnccl's functions and makes a unique id (no GPU needed)", function()
  if not rawget(torch, "_nccl") then T.skip("a CPU-only build has no nccl backend") end
  local id = torch.zeros(torch._nccl.ID_BYTES, {dtype = torch.uint8, device = "cpu"})
  local ok, err = pcall(torch._nccl.get_unique_id, id)
  if not ok and tostring(err):find("could not be loaded", 1, true) then T.skip("needs NCCL (libnccl.so.2)") end
  T.ok(ok, tostring(err))
  T.ok(id:sum():item() > 0, "an id of zeros")
  T.raises(function() torch._nccl.get_unique_id(torch.zeros(3, {dtype = torch.uint8, device = "cpu"})) end,
    "a contiguous uint8 CPU tensor of ID_BYTES elements")
end)

T.test("the nccl backend", function()
  if not (cuda and cuda.is_available()) or os.getenv("TENSH_SIM_DEVICES") then
    T.skip("needs a GPU and NCCL")
  end
  need_mpirun()
  local out, code = run(("%s --nproc 2 dist/nccl.lua"):format(tensh), 300)
  if out:find("libnccl", 1, true) and out:find("could not be loaded", 1, true) then T.skip("needs NCCL (libnccl.so.2)") end
  T.eq(code, 0, "exit code" .. (code ~= 0 and shows(out) or ""))
  T.ok(select(2, out:gsub("nccl ok", "")) == 2, "both ranks:" .. shows(out))
end)

T.run()
