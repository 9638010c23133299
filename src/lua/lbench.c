/* Timing and threads: torch._clock(), a monotonic wall clock for scripts/bench
 * (os.clock() is CPU time summed over threads, os.time() whole seconds),
 * torch._time(), seconds since the epoch to the nanosecond (tensh.time),
 * torch.set_num_threads / get_num_threads as PyTorch's (OpenMP's team size and
 * OpenBLAS's threads together), torch._blas_info() for the benchmarks' JSON lines
 * (which OpenBLAS kernels run, with how many threads), and the timed blocks
 * bench.Timer (lua/tensh/bench.lua) is built on. */
#include "lt.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef TS_HAVE_CUDA
#include "core/cuda_api.h"
#endif

/* torch._clock() -> seconds (float) on CLOCK_MONOTONIC; only differences mean anything */
static int l_clock(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

/* torch._time() -> seconds since the epoch (float) on CLOCK_REALTIME, Python's time.time() */
static int l_time(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

/* Each OpenBLAS thread added maps a buffer of BUFFER_SIZE (128 MiB on x86-64)
 * plus alignment, its OpenMP thread a stack (8 MiB) and, at its first
 * malloc, a glibc arena (128 MiB reserved); OpenBLAS retries a failed
 * mapping for ever, so under an address-space limit (ulimit -v) a large
 * count hung. The threads [have, want) fit when the limit leaves room. */
enum { THREAD_ADDRESS_SPACE_MIB = 129 + 8 + 128 };

static int64_t threads_that_fit(int64_t have, int64_t want) {
  struct rlimit r;
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY || want <= have) return want;
  long long used_kib = -1;
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %lld kB", &used_kib) == 1) break;
  if (f) fclose(f);
  if (used_kib < 0) return want;
  const long long room_mib = ((long long)(r.rlim_cur / 1024) - used_kib) / 1024;
  /* one share kept back: the calling thread's own buffer, mapped at its first GEMM */
  const int64_t more = room_mib > 0 && room_mib / THREAD_ADDRESS_SPACE_MIB > 1 ? room_mib / THREAD_ADDRESS_SPACE_MIB - 1 : 0;
  return have + more < want ? have + more : want;
}

static int l_set_num_threads(lua_State *L) {
  int64_t n = lt_checkint(L, 1);
  if (n < 1 || n > 4096) return lt_errorf(L, "set_num_threads: expected a number of threads >= 1, got %lld", (long long)n);
  const int64_t have = openblas_get_num_threads(), fit = threads_that_fit(have, n);
  if (fit < n)
    return lt_errorf(L, "set_num_threads: %lld threads need ~%d MiB of address space each for OpenBLAS's buffers and "
                     "their stacks, and this process's limit (ulimit -v) has room for %lld in all; ask for at most %lld "
                     "or raise the limit", (long long)n, (int)THREAD_ADDRESS_SPACE_MIB, (long long)fit, (long long)fit);
#ifdef _OPENMP
  omp_set_num_threads((int)n);
#endif
  openblas_set_num_threads((int)n);
  return 0;
}

static int l_get_num_threads(lua_State *L) {
#ifdef _OPENMP
  lua_pushinteger(L, omp_get_max_threads());
#else
  lua_pushinteger(L, 1);
#endif
  return 1;
}

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef TS_HAVE_CUDA
/* a start and an end event per device, made once and kept: a block that
 * raises leaves nothing to free */
#define BENCH_MAX_DEVICES 64
static uintptr_t block_events[BENCH_MAX_DEVICES][2];

static int cuda_block_events(lua_State *L, int d, uintptr_t **ev) {
  if (d < 0 || d >= BENCH_MAX_DEVICES) return lt_errorf(L, "_bench_block: device index %d out of range", d);
  for (int k = 0; k < 2; k++)
    if (!block_events[d][k]) LT_TRY(L, ts_cuda_event_create(d, true, false, &block_events[d][k]));
  *ev = block_events[d];
  return 0;
}
#endif

/* torch._bench_block(fn, number[, cuda_index]) -> seconds, host_seconds,
 * cpu_peak_bytes, device_peak_bytes: calls fn() number times. On a CUDA
 * device the device is synchronised before the block and after it, and the
 * seconds are those of CUDA events recorded on its current stream around the
 * calls (host_seconds is the host clock over the same span); on the CPU both
 * are the host clock. The peaks are the most bytes live storages held during
 * the block (CPU; all CUDA devices). */
static int l_bench_block(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int64_t number = lt_checkint(L, 2);
  if (number < 0 || number > INT32_MAX) /* PyTorch's Timer stops there too */
    return lt_errorf(L, "_bench_block: number must be in [0, 2^31 - 1], got %lld", (long long)number);
  int dev = lua_isnoneornil(L, 3) ? -1 : (int)lt_checkint(L, 3);
#ifdef TS_HAVE_CUDA
  uintptr_t *ev = NULL;
  if (dev >= 0) {
    cuda_block_events(L, dev, &ev);
    LT_TRY(L, ts_cuda_synchronize(dev));
  }
#else
  if (dev >= 0) return lt_errorf(L, "_bench_block: this build has no CUDA");
#endif
  ts_reset_bytes_peak(TS_CPU);
  ts_reset_bytes_peak(TS_CUDA);
  double t0 = monotonic_s();
#ifdef TS_HAVE_CUDA
  if (ev) LT_TRY(L, ts_cuda_event_record(ev[0], ts_cuda_current_stream(dev), dev));
#endif
  for (int64_t i = 0; i < number; i++) {
    lua_pushvalue(L, 1);
    lua_call(L, 0, 0);
  }
  double seconds;
#ifdef TS_HAVE_CUDA
  if (ev) {
    LT_TRY(L, ts_cuda_event_record(ev[1], ts_cuda_current_stream(dev), dev));
    LT_TRY(L, ts_cuda_event_synchronize(ev[1]));
    LT_TRY(L, ts_cuda_synchronize(dev));
  }
#endif
  double host = monotonic_s() - t0;
  seconds = host;
#ifdef TS_HAVE_CUDA
  if (ev) {
    float ms;
    LT_TRY(L, ts_cuda_event_elapsed(ev[0], ev[1], &ms));
    seconds = ms * 1e-3;
  }
#endif
  lua_pushnumber(L, seconds);
  lua_pushnumber(L, host);
  lua_pushinteger(L, (lua_Integer)ts_bytes_peak(TS_CPU));
  lua_pushinteger(L, (lua_Integer)ts_bytes_peak(TS_CUDA));
  return 4;
}

/* torch._busy_wait(seconds): spins on the monotonic clock for that long:
 * work of a known length for the Timer's tests (a sleep would let a loaded
 * machine stretch it; a spin ends when the clock says so) */
static int l_busy_wait(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  if (!(s >= 0 && s <= 10)) return lt_errorf(L, "_busy_wait: seconds must be in [0, 10], got %g", s);
  double end = monotonic_s() + s;
  while (monotonic_s() < end) {
  }
  return 0;
}

/* torch._bench_env() -> {build =, openblas_coretype =}: what a measurement
 * depends on besides threads, the device and the BLAS (torch._blas_info) */
static int l_bench_env(lua_State *L) {
  lua_newtable(L);
#if defined(TS_SIM_DEVICE)
  lua_pushliteral(L, "simulated");
#elif defined(TS_HAVE_CUDA)
  lua_pushliteral(L, "CUDA");
#else
  lua_pushliteral(L, "CPU");
#endif
  lua_setfield(L, -2, "build");
  const char *env = getenv("OPENBLAS_CORETYPE");
  if (env) {
    lua_pushstring(L, env);
    lua_setfield(L, -2, "openblas_coretype");
  }
  return 1;
}

/* torch._blas_info() -> {core = "Haswell", threads = 2}: the kernel family
 * OpenBLAS chose (or OPENBLAS_CORETYPE forced) and its thread count, so a
 * benchmark line says what it compared */
static int l_blas_info(lua_State *L) {
  lua_createtable(L, 0, 2);
  const char *core = openblas_get_corename();
  lua_pushstring(L, core ? core : "unknown");
  lua_setfield(L, -2, "core");
  lua_pushinteger(L, openblas_get_num_threads());
  lua_setfield(L, -2, "threads");
  return 1;
}

void lt_open_profiler(lua_State *L); /* lprofiler.c */

void lt_open_bench(lua_State *L) {
  static const luaL_Reg fns[] = {{"_clock", l_clock},
                                 {"_time", l_time},
                                 {"set_num_threads", l_set_num_threads},
                                 {"get_num_threads", l_get_num_threads},
                                 {"_blas_info", l_blas_info},
                                 {"_bench_block", l_bench_block},
                                 {"_busy_wait", l_busy_wait},
                                 {"_bench_env", l_bench_env},
                                 {NULL, NULL}};
  lt_register(L, fns, NULL);
  lt_open_profiler(L);
}
