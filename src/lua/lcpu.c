/* torch.cpu: the CPU caching allocator's statistics and cache, named as
 * torch.cuda's (src/cpu/cache.c says which buffers it serves):
 *   memory_allocated(), max_memory_allocated()  bytes in live buffers (rounded)
 *   memory_reserved(), max_memory_reserved()    bytes the cache holds mapped
 *   memory_stats()                              every counter, PyTorch's keys
 *   reset_peak_memory_stats(), empty_cache()    peaks := now; unmap what is free
 * Tensors Lua has dropped hold their memory until collected, so each of these
 * runs a full collection first (as torch.cuda's do: the figures say what the
 * program still holds). */
#include "lt.h"
#include "core/cache_alloc.h"

static ts_cache_stats cpu_stats(lua_State *L, const char *fn) {
  lua_gc(L, LUA_GCCOLLECT);
  ts_cache *c = ts_cpu_cache();
  if (!c) luaL_error(L, "torch.cpu.%s: the CPU allocator could not start (out of memory)", fn);
  ts_cache_stats s;
  ts_cache_get_stats(c, &s);
  return s;
}

static int l_memory_allocated(lua_State *L) {
  return lua_pushinteger(L, cpu_stats(L, "memory_allocated").allocated_bytes[TS_POOL_ALL].current), 1;
}
static int l_max_memory_allocated(lua_State *L) {
  return lua_pushinteger(L, cpu_stats(L, "max_memory_allocated").allocated_bytes[TS_POOL_ALL].peak), 1;
}
static int l_memory_reserved(lua_State *L) {
  return lua_pushinteger(L, cpu_stats(L, "memory_reserved").reserved_bytes[TS_POOL_ALL].current), 1;
}
static int l_max_memory_reserved(lua_State *L) {
  return lua_pushinteger(L, cpu_stats(L, "max_memory_reserved").reserved_bytes[TS_POOL_ALL].peak), 1;
}

static void set_stat(void *ud, const char *key, int64_t v) {
  lua_State *L = ud;
  lua_pushinteger(L, v);
  lua_setfield(L, -2, key);
}

static int l_memory_stats(lua_State *L) {
  ts_cache_stats s = cpu_stats(L, "memory_stats");
  lua_newtable(L);
  ts_cache_stats_foreach(&s, set_stat, L);
  return 1;
}

static int l_reset_peak_memory_stats(lua_State *L) {
  (void)cpu_stats(L, "reset_peak_memory_stats");
  ts_cache_reset_peak(ts_cpu_cache());
  return 0;
}

static int l_empty_cache(lua_State *L) {
  lua_gc(L, LUA_GCCOLLECT);
  ts_cache *c = ts_cpu_cache();
  if (c) ts_cache_empty(c);
  return 0;
}

void lt_open_cpu(lua_State *L) {
  static const luaL_Reg fns[] = {{"memory_allocated", l_memory_allocated},
                                 {"max_memory_allocated", l_max_memory_allocated},
                                 {"memory_reserved", l_memory_reserved},
                                 {"max_memory_reserved", l_max_memory_reserved},
                                 {"memory_stats", l_memory_stats},
                                 {"reset_peak_memory_stats", l_reset_peak_memory_stats},
                                 {"empty_cache", l_empty_cache},
                                 {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_setfield(L, -3, "cpu"); /* torch.cpu (the torch table is below the methods) */
}
