/* Timing and threads: torch._clock(), a monotonic wall clock for scripts/bench
 * (os.clock() is CPU time summed over threads, os.time() whole seconds),
 * torch._time(), seconds since the epoch to the nanosecond (tensh.time), and
 * torch.set_num_threads / get_num_threads as PyTorch's (OpenMP's team size and
 * OpenBLAS's threads together), torch._blas_info() for the benchmarks' JSON lines
 * (which OpenBLAS kernels run, with how many threads). */
#include "lt.h"

#include <cblas.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
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

static int l_set_num_threads(lua_State *L) {
  int64_t n = lt_checkint(L, 1);
  if (n < 1 || n > 4096) return lt_errorf(L, "set_num_threads: expected a number of threads >= 1, got %lld", (long long)n);
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

void lt_open_bench(lua_State *L) {
  static const luaL_Reg fns[] = {{"_clock", l_clock}, {"_time", l_time}, {"set_num_threads", l_set_num_threads},
                                 {"get_num_threads", l_get_num_threads}, {"_blas_info", l_blas_info},
                                 {NULL, NULL}};
  lt_register(L, fns, NULL);
}
