/* Helpers for scripts/bench/: a monotonic wall clock. os.clock() is CPU time
 * (summed over threads, so it misreads parallel kernels) and os.time() counts
 * whole seconds, so neither can time an op. Underscored: not part of the API. */
#include "lt.h"

#include <time.h>

/* torch._clock() -> seconds (float) on CLOCK_MONOTONIC; only differences mean anything */
static int l_clock(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

void lt_open_bench(lua_State *L) {
  static const luaL_Reg fns[] = {{"_clock", l_clock}, {NULL, NULL}};
  lt_register(L, fns, NULL);
}
