/* Device activity in the `cuda` table (src/core/activity.h): counters for tests
 * and benchmarks, and PyTorch's sync debug mode.
 *   cuda.launch_count(), cuda.sync_count()   kernels launched, host synchronisations, since start-up
 *   cuda.activity_counts()                   {launches =, syncs =, memcpys =, memsets =}
 *   cuda.set_sync_debug_mode("warn" | "error" | "default" | 0 | 1 | 2), cuda.get_sync_debug_mode() -> 0, 1, 2
 * Without CUDA the counters stay 0. */
#include <pthread.h>
#include <string.h>

#include "lt.h"
#include "core/activity.h"

static int l_launch_count(lua_State *L) {
  ts_activity_counts c;
  ts_activity_read(&c);
  return lua_pushinteger(L, c.launches), 1;
}

static int l_sync_count(lua_State *L) {
  ts_activity_counts c;
  ts_activity_read(&c);
  return lua_pushinteger(L, c.syncs), 1;
}

static int l_activity_counts(lua_State *L) {
  ts_activity_counts c;
  ts_activity_read(&c);
  lua_createtable(L, 0, 4);
  const struct { const char *k; int64_t v; } f[] = {
      {"launches", c.launches}, {"syncs", c.syncs}, {"memcpys", c.memcpys}, {"memsets", c.memsets}};
  for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
    lua_pushinteger(L, f[i].v);
    lua_setfield(L, -2, f[i].k);
  }
  return 1;
}

/* "warn" mode: the warning names the innermost Lua line of the main thread
 * (when the waiting thread is the one that opened the cuda table) */
static lua_State *warn_L;
static pthread_t warn_thread;
static void warn_at_lua_line(const char *api) {
  lua_Debug ar;
  char where[256] = "";
  bool here = warn_L && pthread_equal(pthread_self(), warn_thread);
  for (int level = 0; here && lua_getstack(warn_L, level, &ar); level++) {
    if (lua_getinfo(warn_L, "Sl", &ar) && ar.currentline > 0) {
      snprintf(where, sizeof where, " at %s:%d", ar.short_src, ar.currentline);
      break;
    }
  }
  fprintf(stderr, "UserWarning: called a synchronizing CUDA operation (%s)%s\n", api, where);
}

static int l_set_sync_debug_mode(lua_State *L) {
  int mode;
  if (lua_type(L, 1) == LUA_TNUMBER) {
    mode = (int)lt_checkint(L, 1);
    if (mode < 0 || mode > 2) return lt_errorf(L, "cuda.set_sync_debug_mode: invalid value of debug_mode %d (0, 1 or 2)", mode);
  } else {
    const char *s = luaL_checkstring(L, 1);
    if (!strcmp(s, "default")) mode = 0;
    else if (!strcmp(s, "warn")) mode = 1;
    else if (!strcmp(s, "error")) mode = 2;
    else return lt_errorf(L, "cuda.set_sync_debug_mode: invalid value of debug_mode '%s' (expected \"default\", \"warn\" or \"error\")", s);
  }
  ts_set_sync_debug_mode(mode);
  return 0;
}

static int l_get_sync_debug_mode(lua_State *L) { return lua_pushinteger(L, ts_get_sync_debug_mode()), 1; }

/* Adds the functions to the table on top of the stack (the cuda table). */
void lt_cuda_activity_fns(lua_State *L) {
  static const luaL_Reg fns[] = {{"launch_count", l_launch_count},
                                 {"sync_count", l_sync_count},
                                 {"activity_counts", l_activity_counts},
                                 {"set_sync_debug_mode", l_set_sync_debug_mode},
                                 {"get_sync_debug_mode", l_get_sync_debug_mode},
                                 {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD); /* also for TENSH_SYNC_CHECK */
  warn_L = lua_tothread(L, -1);
  lua_pop(L, 1);
  warn_thread = pthread_self();
  ts_sync_warn_hook = warn_at_lua_line;
}
