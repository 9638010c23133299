-- The simulated CUDA device tests itself: each case of tests/sim/selftest.cu
-- is a small broken CUDA program, run in a process of its own
-- ($TENSH_BUILD/sim_selftest), and the simulator must report the fault
-- clearly (kernel, file and line, what was wrong) or, for a race, make it
-- change the result. Skips where there is no sim_selftest (a build that is not simulated).
local T = require "harness"
local test, eq, ok = T.test, T.eq, T.ok

local build = os.getenv("TENSH_BUILD") or "../../build-sim"
local exe = build .. "/sim_selftest"

local function need_sim()
  local f = io.open(exe, "rb")
  if not f then T.skip("not a simulated build: no " .. exe .. " (make sim builds it)") end
  f:close()
end

local function run(case)
  need_sim()
  local p = assert(io.popen("TENSH_SIM_DEVICES=2 " .. exe .. " " .. case .. " 2>&1; echo EXIT=$?"))
  local out = p:read("a")
  p:close()
  return out, tonumber(out:match("EXIT=(%d+)"))
end

local function has(out, text, what)
  ok(out:find(text, 1, true), ("%s: expected the output to contain %q, got:\n%s"):format(what, text, out))
end

-- case, what it shows, and the lines its output must hold
local reports = {
  {"read_past_end", "a read one past an allocation: illegal address, with the kernel, its line and the allocation",
   {"RESULT read_past_end cudaErrorIllegalAddress", "kernel read_at (tests/sim/selftest.cu:",
    "0 bytes past the end of a live allocation of 1024 bytes"}},
  {"write_past_end", "a write a few bytes past an allocation's end (inside its alignment): the canary",
   {"RESULT write_past_end cudaErrorIllegalAddress", "wrote 4 bytes past the end of an allocation of 40 bytes"}},
  {"read_after_free", "a read after cudaFree",
   {"RESULT read_after_free cudaErrorIllegalAddress", "12 bytes into a freed allocation of 1024 bytes"}},
  {"double_free", "a double cudaFree is CUDA's invalid argument, saying so",
   {"RESULT double_free cudaErrorInvalidValue", "freed twice"}},
  {"divergent_barrier", "a barrier in divergent code fails the launch instead of hanging",
   {"RESULT divergent_barrier cudaErrorLaunchFailure", "__syncthreads reached by 16 of the block's 32 threads"}},
  {"missing_lanes", "a shuffle whose mask names lanes that do not exist",
   {"RESULT missing_lanes cudaErrorLaunchFailure", "waits for lane 16, which does not exist"}},
  {"block_2048", "a block of 2048 threads", {"RESULT block_2048 cudaErrorInvalidConfiguration",
   "2048 threads a block (at most 1024)"}},
  {"grid_y_70000", "a grid y of 70000", {"RESULT grid_y_70000 cudaErrorInvalidConfiguration", "y and z are at most 65535"}},
  {"launch_bounds", "more threads than __launch_bounds__", {"past its __launch_bounds__(64)"}},
  {"host_pointer", "a host pointer passed to a kernel", {"RESULT host_pointer cudaErrorIllegalAddress", "pointer argument 1"}},
  {"missing_stream_sync", "reading a non-blocking copy before synchronising sees the old bytes",
   {"early=0 after_sync=7"}},
  {"missing_stream_wait", "a missing wait between two streams reads stale data", {"missing_stream_wait value=0"}},
  {"with_stream_wait", "with the event wait between the streams the data is there", {"with_stream_wait value=5"}},
  {"event_other_device", "an event recorded on another device's stream is CUDA's invalid resource handle",
   {"RESULT event_other_device cudaErrorInvalidResourceHandle"}},
}
for _, r in ipairs(reports) do
  test(r[1] .. ": " .. r[2], function()
    local out = run(r[1])
    for _, text in ipairs(r[3]) do has(out, text, r[1]) end
  end)
end

test("a missing __syncthreads changes the result in one of the two thread orders", function()
  local bad = run("missing_barrier")
  local f, r = bad:match("wrong_forward=(%d+) wrong_reverse=(%d+)")
  ok(f and tonumber(f) + tonumber(r) > 0, "the race stayed hidden: " .. bad)
  local good = run("with_barrier")
  has(good, "wrong_forward=0 wrong_reverse=0", "with the barrier both orders are right")
end)

test("host code that reads device memory is stopped and told why", function()
  local out, code = run("host_reads_device")
  has(out, "host code read device memory", "report")
  ok(not out:find("RESULT host_reads_device read", 1, true), "the read went through")
  ok(code ~= 0, "the process should end as on a GPU machine, exit " .. tostring(code))
end)

test("the device says what it is", function()
  need_sim()
  local p = assert(io.popen(build .. "/tensh --version"))
  local v = p:read("a")
  p:close()
  has(v, "simulated CUDA device", "tensh --version")
  if cuda and cuda.is_available() then
    eq(cuda.get_device_name(0), "tensh simulated H100 (CPU)", "device name")
    eq(select(1, cuda.get_device_capability(0)), 9, "compute capability 9.0 (an H100's)")
    eq(cuda.utilization(0), 0, "NVML's utilisation: fixed at 0 (work runs when the host waits)")
  end
end)

T.run()
