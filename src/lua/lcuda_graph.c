/* CUDA graphs in the `cuda` table: cuda.CUDAGraph (capture_begin /
 * capture_end / replay / reset / pool), cuda.graph_pool_handle(),
 * cuda.is_current_stream_capturing(); cuda.graph and
 * cuda.make_graphed_callables are composed in Lua (lua/tensh/cuda_graphs.lua),
 * loaded on their first call. A graph's private memory pool is shared by the
 * graphs captured into it (graph(g2, {pool = g1:pool()})) and released when
 * the last of them is reset or collected. */
#include "lt.h"

#include <inttypes.h>
#include <string.h>

#ifdef TS_HAVE_CUDA
#include "core/cuda_api.h"

#define LT_GRAPH "tensh.cuda.CUDAGraph"

typedef struct lgraph {
  uintptr_t exec;   /* the executable graph; 0 before capture_end and after reset */
  uintptr_t stream; /* the stream of the capture underway (capturing) */
  uint64_t pool;    /* 0: none yet */
  int device;
  bool capturing;
  /* random numbers: the seed and base offset the captured random kernels read
   * (2 x int64 on the device, filled before each replay), the generator's
   * offset when the capture began and how many counters it took; NULL when
   * the capture drew none */
  ts_tensor *rng_state;
  uint64_t rng_start, rng_count;
} lgraph;

/* How many graphs hold each pool: it goes back to the device with the last. */
#define POOL_SLOTS 256
static struct { uint64_t pool; int device, refs; } pool_refs[POOL_SLOTS];

static void pool_hold(uint64_t pool, int device) {
  for (int i = 0; i < POOL_SLOTS; i++)
    if (pool_refs[i].pool == pool) return (void)pool_refs[i].refs++;
  for (int i = 0; i < POOL_SLOTS; i++)
    if (!pool_refs[i].pool) {
      ts_cuda_graph_pool_hold();
      pool_refs[i].pool = pool, pool_refs[i].device = device, pool_refs[i].refs = 1;
      return;
    }
  /* more pools alive than slots: this one is never released early (its blocks stay cached) */
}

static void pool_drop(uint64_t pool) {
  for (int i = 0; i < POOL_SLOTS; i++)
    if (pool_refs[i].pool == pool && --pool_refs[i].refs == 0) {
      ts_cuda_graph_pool_release(pool_refs[i].device, pool);
      pool_refs[i].pool = 0;
    }
}

static lgraph *self_graph(lua_State *L) { return lt_check_self(L, LT_GRAPH, "cuda.CUDAGraph", "g"); }

static int l_graph_new(lua_State *L) {
  if (lua_gettop(L) > 0) return lt_errorf(L, "cuda.CUDAGraph: takes no arguments, got %d", lua_gettop(L));
  if (ts_cuda_device_count() == 0) LT_TRY(L, ts_cuda_check_device(0)); /* says why not */
  lgraph *g = lua_newuserdatauv(L, sizeof *g, 0);
  memset(g, 0, sizeof *g);
  luaL_setmetatable(L, LT_GRAPH);
  return 1;
}

static void rng_release(lgraph *g) {
  if (g->rng_state) ts_tensor_release(g->rng_state), g->rng_state = NULL;
}

/* The end of g's capture for its random kernels: keeps their state if any drew. */
static void rng_end(lgraph *g) {
  bool drew = ts_cuda_graph_rng_end(g->device, g->stream);
  ts_rng_graph_capture(-1);
  uint64_t seed, now;
  ts_rng_get_state(&seed, &now);
  g->rng_count = now - g->rng_start;
  if (!drew) rng_release(g);
}

/* Drops the executable graph and the pool reference; ends a capture left open. */
static void graph_release(lgraph *g) {
  if (g->capturing) {
    uintptr_t x = 0;
    rng_end(g);
    if (ts_cuda_capture_end(g->device, g->stream, &x) == TS_OK) ts_cuda_graph_destroy(x);
    g->capturing = false;
  }
  rng_release(g);
  if (g->exec) ts_cuda_graph_destroy(g->exec), g->exec = 0;
  if (g->pool) pool_drop(g->pool), g->pool = 0;
}

static int64_t pool_arg(lua_State *L, int idx, const char *fn) {
  if (!lua_isinteger(L, idx) || lua_tointeger(L, idx) <= 0 || !(lua_tointeger(L, idx) & 1))
    return lt_errorf(L, "%s: pool must be a handle from g:pool() or cuda.graph_pool_handle(), got %s", fn,
                     luaL_typename(L, idx));
  return lua_tointeger(L, idx);
}

/* g:capture_begin([pool], {capture_error_mode}): captures the current stream */
static int m_capture_begin(lua_State *L) {
  static const char *const known[] = {"pool", "capture_error_mode", NULL};
  static const char *const modes[] = {"global", "thread_local", "relaxed", NULL};
  lgraph *g = self_graph(L);
  int opts = lua_gettop(L) >= 2 ? lt_opts_index(L, lua_gettop(L)) : 0;
  lt_opts_check(L, opts, "capture_begin", known);
  uint64_t pool = 0;
  if (lua_gettop(L) >= 2 && !lua_isnil(L, 2) && opts != 2) pool = (uint64_t)pool_arg(L, 2, "capture_begin");
  if (opts && lua_getfield(L, opts, "pool") != LUA_TNIL) pool = (uint64_t)pool_arg(L, -1, "capture_begin");
  int mode = 0;
  if (opts && lua_getfield(L, opts, "capture_error_mode") != LUA_TNIL) {
    const char *m = lua_tostring(L, -1);
    for (mode = 0; modes[mode] && (!m || strcmp(m, modes[mode]) != 0); mode++) {}
    if (!modes[mode])
      return lt_errorf(L, "capture_begin: capture_error_mode must be \"global\", \"thread_local\" or \"relaxed\", got %s",
                       m ? m : luaL_typename(L, -1));
  }
  if (g->capturing) return lt_errorf(L, "capture_begin: this graph is capturing already");
  if (g->exec) return lt_errorf(L, "capture_begin: this graph holds a capture already; call g:reset() first");
  int d = ts_cuda_current_device();
  uintptr_t s = ts_cuda_current_stream(d);
  if (!s)
    return lt_errorf(L, "capture_begin: CUDA graphs must be captured on a stream other than the default stream "
                        "(use cuda.graph(g, fn), which captures on a side stream, or cuda.stream(s, fn))");
  if (!pool) pool = ts_cuda_graph_pool_new();
  /* the random kernels' seed and base offset: made before the capture (outside its pool) */
  ts_status st = ts_tensor_empty(1, (int64_t[]){2}, TS_INT64, (ts_device){TS_CUDA, d}, &g->rng_state);
  if (st) return lt_error(L, st);
  uint64_t seed;
  ts_rng_get_state(&seed, &g->rng_start);
  pool_hold(pool, d);
  g->pool = pool, g->device = d, g->stream = s;
  if (!(st = ts_cuda_graph_rng_begin(d, s, ts_data(g->rng_state), g->rng_start)) &&
      (st = ts_cuda_capture_begin(d, s, pool, mode)))
    ts_cuda_graph_rng_end(d, s);
  if (!st) ts_rng_graph_capture(1);
  if (st) {
    rng_release(g);
    pool_drop(pool), g->pool = 0;
    return lt_error(L, st);
  }
  g->capturing = true;
  return 0;
}

static int m_capture_end(lua_State *L) {
  lgraph *g = self_graph(L);
  if (!g->capturing) return lt_errorf(L, "capture_end: this graph is not capturing (call capture_begin first)");
  g->capturing = false;
  rng_end(g);
  ts_status st = ts_cuda_capture_end(g->device, g->stream, &g->exec);
  if (st) {
    g->exec = 0;
    rng_release(g);
    pool_drop(g->pool), g->pool = 0;
    return lt_error(L, st);
  }
  return 0;
}

/* g:replay(): the captured work again, on the current stream; its random
 * kernels draw the generator's next counters (fresh numbers each replay, the
 * same after the same manual_seed), as many as the capture took */
static int m_replay(lua_State *L) {
  lgraph *g = self_graph(L);
  if (!g->exec) return lt_errorf(L, "replay: this graph holds no capture (capture it first; after g:reset() it is empty)");
  uintptr_t s = ts_cuda_current_stream(g->device);
  if (g->rng_state) {
    uint64_t seed, offset;
    ts_rng_reserve(g->rng_count, &seed, &offset);
    LT_TRY(L, ts_cuda_graph_rng_set(ts_data(g->rng_state), g->device, s, seed, offset));
  }
  LT_TRY(L, ts_cuda_graph_launch(g->exec, g->device, s));
  return 0;
}

static int m_reset(lua_State *L) {
  lgraph *g = self_graph(L);
  if (g->capturing) return lt_errorf(L, "reset: this graph is capturing (end the capture first)");
  graph_release(g);
  return 0;
}

static int m_pool(lua_State *L) {
  lgraph *g = self_graph(L);
  if (!g->pool) return lt_errorf(L, "pool: this graph has no memory pool (it has not been captured)");
  lua_pushinteger(L, (lua_Integer)g->pool);
  return 1;
}

static int graph_gc(lua_State *L) {
  graph_release(luaL_checkudata(L, 1, LT_GRAPH));
  return 0;
}

static int graph_tostring(lua_State *L) {
  lgraph *g = luaL_checkudata(L, 1, LT_GRAPH);
  lua_pushfstring(L, "<torch.cuda.CUDAGraph %s>", g->capturing ? "capturing" : g->exec ? "captured" : "empty");
  return 1;
}

static int l_graph_pool_handle(lua_State *L) {
  if (lua_gettop(L) > 0) return lt_errorf(L, "cuda.graph_pool_handle: takes no arguments, got %d", lua_gettop(L));
  lua_pushinteger(L, (lua_Integer)ts_cuda_graph_pool_new());
  return 1;
}

#endif

/* false without CUDA, and on the default stream (which never captures) */
static int l_is_current_stream_capturing(lua_State *L) {
  if (lua_gettop(L) > 0) return lt_errorf(L, "cuda.is_current_stream_capturing: takes no arguments, got %d", lua_gettop(L));
  bool on = false;
#ifdef TS_HAVE_CUDA
  if (ts_cuda_device_count() > 0) {
    int d = ts_cuda_current_device();
    uintptr_t s = ts_cuda_current_stream(d);
    if (s) LT_TRY(L, ts_cuda_stream_is_capturing(s, d, &on));
  }
#endif
  lua_pushboolean(L, on);
  return 1;
}

/* cuda.graph / cuda.make_graphed_callables: lua/tensh/cuda_graphs.lua's, loaded on the first call */
static int l_lua_part(lua_State *L) {
  int n = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tensh.cuda_graphs");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, lua_tostring(L, lua_upvalueindex(1)));
  lua_insert(L, 1);
  lua_pop(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

void lt_cuda_graph_fns(lua_State *L) {
  static const char *const lua_part[] = {"graph", "make_graphed_callables", NULL};
  for (int i = 0; lua_part[i]; i++) {
    lua_pushstring(L, lua_part[i]);
    lua_pushcclosure(L, l_lua_part, 1);
    lua_setfield(L, -2, lua_part[i]);
  }
  lua_pushcfunction(L, l_is_current_stream_capturing);
  lua_setfield(L, -2, "is_current_stream_capturing");
#ifdef TS_HAVE_CUDA
  static const luaL_Reg fns[] = {{"CUDAGraph", l_graph_new}, {"graph_pool_handle", l_graph_pool_handle}, {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
  static const luaL_Reg methods[] = {{"capture_begin", m_capture_begin}, {"capture_end", m_capture_end},
                                     {"replay", m_replay}, {"reset", m_reset}, {"pool", m_pool}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__gc", graph_gc}, {"__tostring", graph_tostring}, {NULL, NULL}};
  lt_new_class(L, LT_GRAPH, methods, meta);
#endif
}
