-- The simulated CUDA device tests itself: each case of tests/sim/selftest.cu
-- and tests/sim/checks.cu is a small broken CUDA program, run in a process of its own
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

-- Under `make asan` the cases run without LeakSanitizer: each is a small
-- program that leaves its streams, events and handles to the process's end.
local SELFTEST_ENV = "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 TENSH_SIM_DEVICES=2 "

local function run(case)
  need_sim()
  local p = assert(io.popen(SELFTEST_ENV .. exe .. " " .. case .. " 2>&1; echo EXIT=$?"))
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
  {"capture", "stream capture: a fork and join replayed by cudaGraphLaunch after nothing ran; CUDA's capture errors",
   {"RESULT begin cudaSuccess", "RESULT joined_stream_capturing=1", "RESULT sync_in_capture cudaErrorStreamCaptureUnsupported",
    "RESULT end_after_sync cudaErrorStreamCaptureInvalidated", "RESULT end cudaSuccess", "RESULT during_capture value=0",
    "RESULT instantiate cudaSuccess", "RESULT after_launch value=3",
    "RESULT malloc_in_capture cudaErrorStreamCaptureUnsupported", "RESULT launch_after_invalid cudaErrorStreamCaptureInvalidated",
    "RESULT end_invalidated cudaErrorStreamCaptureInvalidated", "RESULT host_alloc_in_capture cudaErrorStreamCaptureUnsupported",
    "RESULT malloc_relaxed cudaSuccess",
    "RESULT end_relaxed cudaSuccess", "RESULT unjoined cudaErrorStreamCaptureUnjoined",
    "RESULT legacy_beside_capture cudaErrorStreamCaptureImplicit", "RESULT outside_event cudaErrorStreamCaptureIsolation",
    "RESULT legacy_capture cudaErrorStreamCaptureUnsupported", "RESULT device_ok cudaSuccess"}},
  -- the access checks (sim/check.cc) and call sites (tests/sim/checks.cu); each has a right twin below
  {"lost_update", "threads adding to one counter without an atomic: the race, with both threads",
   {"RESULT lost_update cudaErrorLaunchFailure", "kernel count_up<false> (tests/sim/checks.cu:",
    "block (0,0,0) thread (1,0,0): data race: this thread read 4 bytes that block (0,0,0) thread (0,0,0) wrote"}},
  {"stores_meet", "threads storing into one slot with plain stores: the race",
   {"RESULT stores_meet cudaErrorLaunchFailure", "kernel store_one_slot<false> (tests/sim/checks.cu:",
    "data race: this thread wrote 4 bytes that block (0,0,0) thread"}},
  {"shared_race", "a shared slot read before its writer reached the barrier that is missing",
   {"RESULT shared_race cudaErrorLaunchFailure", "data race", "shared memory, byte 4 of the block's __shared__",
    "with no __syncthreads between them"}},
  {"global_race", "the same through device memory within a block", {"RESULT global_race cudaErrorLaunchFailure",
   "data race", "4 bytes into a live allocation of 256 bytes"}},
  {"across_blocks", "blocks reading what other blocks of the launch write",
   {"RESULT across_blocks cudaErrorLaunchFailure", "in another block of the same launch"}},
  {"write_after_read", "a slot rewritten while other threads still read it (the second barrier missing)",
   {"RESULT write_after_read cudaErrorLaunchFailure", "data race"}},
  {"misaligned_vector", "a float4 load 4 bytes past a 16-byte boundary: CUDA's misaligned address, reported",
   {"RESULT misaligned_vector cudaErrorMisalignedAddress", "kernel load_vec (tests/sim/checks.cu:",
    "block (0,0,0) thread (0,0,0): read 16 bytes at 0x", "a misaligned address"}},
  {"unwritten_shared", "a shared slot no thread wrote reads as NaN, not 0", {"RESULT unwritten_shared sum=-nan"}},
  {"barriers_apart", "__syncthreads at two call sites in divergent code",
   {"RESULT barriers_apart cudaErrorLaunchFailure", "__syncthreads at different call sites",
    "block (0,0,0) thread (0,0,0) waits at tests/sim/checks.cu:", "block (0,0,0) thread (16,0,0) at tests/sim/checks.cu:"}},
  {"shuffles_apart", "a shuffle at two call sites", {"RESULT shuffles_apart cudaErrorLaunchFailure",
   "warp operations at different call sites meet"}},
  {"shuffle_width_3", "a shuffle width that is not a power of two", {"RESULT shuffle_width_3 cudaErrorLaunchFailure",
   "__shfl_down_sync with width 3: the width must be a power of two"}},
  {"block_overrun", "a write one float past a cached block's 140 bytes, inside its segment",
   {"RESULT block_overrun cudaErrorIllegalAddress", "kernel store_at",
    "0 bytes past the end of a block of 140 bytes at 0x", "from the caching allocator"}},
  {"cached_block_read", "a read of a block the caching allocator holds free",
   {"RESULT cached_block_read cudaErrorIllegalAddress", "12 bytes into a block of 512 bytes",
    "that the caching allocator holds free"}},
  {"reused_block", "a block handed out again reads as 0xff bytes, not as what it held", {"first=0xffffffff"}},
  {"copy_past_block", "a copy running past a cached block's end",
   {"RESULT copy_past_block cudaErrorIllegalAddress", "cudaMemcpyAsync destination of 144 bytes",
    "0 bytes past the end of a block of 140 bytes"}},
  -- the emulated cuBLAS's rules: alignment as promised, no output over an input
  {"lt_misaligned", "cuBLASLt given an operand less aligned than its preference said",
   {"RESULT lt_misaligned matmul CUBLAS_STATUS_EXECUTION_FAILED", "cudaErrorMisalignedAddress",
    "cublasLtMatmul A at 0x", "is not aligned to 16 bytes"}},
  {"lt_in_place", "cuBLASLt writing D over its A", {"RESULT lt_in_place matmul CUBLAS_STATUS_INVALID_VALUE",
   "cublasLtMatmul: the output", "overlaps an input"}},
  {"gemm_in_place", "cuBLAS writing C over its A", {"RESULT gemm_in_place CUBLAS_STATUS_INVALID_VALUE",
   "cublasGemmStridedBatchedEx: the output", "overlaps an input"}},
  {"lt_bias_moved", "cuBLASLt's bias epilogue given a bias less aligned than the heuristic saw",
   {"RESULT lt_bias_moved matmul CUBLAS_STATUS_EXECUTION_FAILED", "cudaErrorMisalignedAddress",
    "cublasLtMatmul bias at 0x", "is not aligned to 16 bytes"}},
}

-- what must pass quietly: the checks above report only what is wrong
local quiet = {
  {"atomic_update", "atomicAdd from every thread of every block", "count=256"},
  {"stores_meet_any", "stores into one slot that meet by design (tsc_store_any)", "RESULT stores_meet_any one_of_them=1"},
  {"shared_ordered", "the shared exchange with its barrier", "RESULT shared_ordered cudaSuccess"},
  {"global_ordered", "the device-memory exchange with its barrier", "RESULT global_ordered cudaSuccess"},
  {"read_then_barrier", "the slot rewritten after a barrier", "RESULT read_then_barrier cudaSuccess"},
  {"warp_ordered", "lanes exchanging through shared memory with __syncwarp between", "RESULT warp_ordered cudaSuccess"},
  {"aligned_vector", "a float4 load at a 16-byte boundary", "RESULT aligned_vector cudaSuccess"},
  {"shuffle_width_8", "a shuffle of width 8", "RESULT shuffle_width_8 cudaSuccess"},
  {"block_last_byte", "a write to a cached block's last float", "RESULT block_last_byte cudaSuccess"},
  {"with_barrier", "the rotation with its barrier, in both thread orders", "wrong_forward=0 wrong_reverse=0"},
  {"lt_product", "a cuBLASLt product with aligned operands", "RESULT lt_product matmul CUBLAS_STATUS_SUCCESS"},
  {"lt_bias", "cuBLASLt's bias epilogue adds bias[i] to D's row i", "RESULT lt_bias d=3,4,5,6"},
  {"lt_gelu_bias", "an epilogue the emulation lacks (GELU) has no algorithm, as cuBLASLt says for one it lacks",
   "RESULT lt_gelu_bias heuristic CUBLAS_STATUS_NOT_SUPPORTED returned=0"},
}
for _, q in ipairs(quiet) do
  test(q[1] .. ": " .. q[2] .. " passes without a report", function()
    local out = run(q[1])
    has(out, q[3], q[1])
    ok(not out:find("tensh-sim:", 1, true), q[1] .. ": the simulator reported something:\n" .. out)
  end)
end
for _, r in ipairs(reports) do
  test(r[1] .. ": " .. r[2], function()
    local out = run(r[1])
    for _, text in ipairs(r[3]) do has(out, text, r[1]) end
  end)
end

test("TENSH_SIM_LT_DECLINE=1: cuBLASLt finds no algorithm, as it may for a shape it has no kernel for", function()
  need_sim()
  local p = assert(io.popen("TENSH_SIM_LT_DECLINE=1 " .. SELFTEST_ENV .. exe .. " lt_product 2>&1"))
  local out = p:read("a")
  p:close()
  has(out, "RESULT lt_product heuristic CUBLAS_STATUS_NOT_SUPPORTED returned=0", "lt_product declined")
end)

test("a missing __syncthreads is reported as the race it is", function()
  local bad = run("missing_barrier")
  has(bad, "kernel rotate<false> (tests/sim/selftest.cu:", "missing_barrier")
  has(bad, "data race: this thread wrote 4 bytes that block (0,0,0) thread (0,0,0) read, with no __syncthreads",
      "missing_barrier")
end)

test("TENSH_SIM_RACES=0: no race report, and the alternating thread order still shows the missing barrier", function()
  need_sim()
  local p = assert(io.popen("TENSH_SIM_RACES=0 " .. SELFTEST_ENV .. exe .. " missing_barrier 2>&1"))
  local out = p:read("a")
  p:close()
  ok(not out:find("data race", 1, true), "TENSH_SIM_RACES=0 still reported a race:\n" .. out)
  local f, r = out:match("wrong_forward=(%d+) wrong_reverse=(%d+)")
  ok(f and tonumber(f) + tonumber(r) > 0, "the race stayed hidden: " .. out)
end)

test("host code that reads device memory is stopped and told why", function()
  local out, code = run("host_reads_device")
  has(out, "host code read device memory", "report")
  ok(not out:find("RESULT host_reads_device read", 1, true), "the read went through")
  ok(code ~= 0, "the process should end as on a GPU machine, exit " .. tostring(code))
end)

-- (the fuzzer's find, issue 26: a worker's std::bad_alloc ended the process)
test("a launch the host has no memory left for fails with a clear error, the process goes on", function()
  need_sim()
  if os.getenv("ASAN_OPTIONS") then T.skip("under AddressSanitizer (its shadow takes terabytes of address space)") end
  local env = "TENSH_SIM_DEVICES=2 TENSH_SIM_MEMORY=2G "
  local p = assert(io.popen(env .. build .. [[/tensh -e 'torch.zeros(1, {device = "cuda"}):sum():item()
    print(io.open("/proc/self/status"):read("a"):match("VmSize:%s*(%d+)"))']]))
  local held = tonumber(p:read("a"))
  p:close()
  ok(held, "the size of a process that used cuda")
  p = assert(io.popen(("ulimit -v %d && %s%s/tensh ../sim/host_oom.lua 2>&1; echo EXIT=$?"):format(held + (300 << 10),
    env, build)))
  local out = p:read("a")
  p:close()
  has(out, "RESULT\tfalse", "the reduction fails")
  has(out, "the simulator has no host memory left for a thread's stack", "and says why")
  has(out, "EXIT=0", "the process ends normally")
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
