/* torch.backends: PyTorch's switches for the libraries behind the ops.
 *   torch.backends.mkldnn.enabled          oneDNN convolution on the CPU
 *   torch.backends.cudnn.enabled, .benchmark, .deterministic, .allow_tf32
 *   torch.backends.cuda.matmul.allow_tf32  torch.set_float32_matmul_precision's "high"
 * Each table reads and writes its settings through __index/__newindex, so a
 * typo or a non-boolean is an error instead of a silently ignored field. */
#include "lt.h"
#include "ops/op_linalg.h"
#ifdef TS_HAVE_CUDA
#include "core/cuda_api.h"
#endif

#include <string.h>

/* one settings table: its name, its settings, a getter and a setter, and the
 * version of the library behind it (0 when absent; NULL: no library) */
typedef struct backend_settings {
  const char *name;
  const char *const *keys;
  bool (*get)(int key);
  void (*set)(int key, bool v);
  int (*version)(void);
} backend_settings;

static int key_index(const backend_settings *b, const char *k) {
  for (int i = 0; b->keys[i]; i++)
    if (strcmp(b->keys[i], k) == 0) return i;
  return -1;
}

/* "torch.backends.cudnn has no setting 'benchmrk' (its settings: ...)" */
static int no_setting(lua_State *L, const backend_settings *b, const char *k) {
  luaL_Buffer buf;
  luaL_buffinit(L, &buf);
  for (int j = 0; b->keys[j]; j++) {
    if (j) luaL_addstring(&buf, ", ");
    luaL_addstring(&buf, b->keys[j]);
  }
  luaL_pushresult(&buf);
  return luaL_error(L, "%s has no setting '%s' (its settings: %s)", b->name, k, lua_tostring(L, -1));
}

/* a missing public name raises on reading too, as every namespace does
 * (lua/tensh/strict.lua); private names (_x) and other keys read as nil */
static int settings_index(lua_State *L) {
  const backend_settings *b = lua_touserdata(L, lua_upvalueindex(1));
  if (lua_type(L, 2) != LUA_TSTRING) return lua_pushnil(L), 1;
  const char *k = lua_tostring(L, 2);
  int i = key_index(b, k);
  if (i < 0 && k[0] == '_') return lua_pushnil(L), 1;
  if (i < 0) return no_setting(L, b, k);
  return lua_pushboolean(L, b->get(i)), 1;
}

static int settings_newindex(lua_State *L) {
  const backend_settings *b = lua_touserdata(L, lua_upvalueindex(1));
  const char *k = luaL_checkstring(L, 2);
  int i = key_index(b, k);
  if (i < 0) return no_setting(L, b, k);
  if (!lua_isboolean(L, 3))
    return luaL_error(L, "%s.%s must be true or false, got %s", b->name, k, luaL_typename(L, 3));
  b->set(i, lua_toboolean(L, 3));
  return 0;
}

static int l_is_available(lua_State *L) {
  const backend_settings *b = lua_touserdata(L, lua_upvalueindex(1));
  return lua_pushboolean(L, b->version() > 0), 1;
}

/* the library's version as 20603 for 2.6.3, nil without it */
static int l_version(lua_State *L) {
  const backend_settings *b = lua_touserdata(L, lua_upvalueindex(1));
  int v = b->version();
  if (v) lua_pushinteger(L, v);
  else lua_pushnil(L);
  return 1;
}

/* Pushes a table whose settings b reads and writes, with is_available() and
 * version() when a library stands behind it. */
static void push_settings(lua_State *L, const backend_settings *b) {
  lua_newtable(L);
  if (b->version) {
    lua_pushlightuserdata(L, (void *)b);
    lua_pushcclosure(L, l_is_available, 1);
    lua_setfield(L, -2, "is_available");
    lua_pushlightuserdata(L, (void *)b);
    lua_pushcclosure(L, l_version, 1);
    lua_setfield(L, -2, "version");
  }
  lua_newtable(L); /* its metatable */
  lua_pushlightuserdata(L, (void *)b);
  lua_pushcclosure(L, settings_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushlightuserdata(L, (void *)b);
  lua_pushcclosure(L, settings_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
}

/* ---- mkldnn (oneDNN) ---------------------------------------------------- */
static const char *const mkldnn_keys[] = {"enabled", NULL};
static bool mkldnn_get(int key) { return ts_library_kernels_enabled(TS_CPU); }
static void mkldnn_set(int key, bool v) { ts_set_library_kernels(TS_CPU, v); }
static const backend_settings mkldnn = {"torch.backends.mkldnn", mkldnn_keys, mkldnn_get, mkldnn_set,
                                        ts_cpu_dnnl_version};

/* ---- cudnn ---------------------------------------------------------------- */
enum { CUDNN_ENABLED, CUDNN_BENCHMARK, CUDNN_DETERMINISTIC, CUDNN_ALLOW_TF32 };
static const char *const cudnn_keys[] = {"enabled", "benchmark", "deterministic", "allow_tf32", NULL};
#ifdef TS_HAVE_CUDA
static bool cudnn_get(int key) {
  ts_cudnn_flags f = ts_cuda_cudnn_get_flags();
  switch (key) {
  case CUDNN_ENABLED: return ts_library_kernels_enabled(TS_CUDA);
  case CUDNN_BENCHMARK: return f.benchmark;
  case CUDNN_DETERMINISTIC: return f.deterministic;
  default: return f.allow_tf32;
  }
}
static void cudnn_set(int key, bool v) {
  ts_cudnn_flags f = ts_cuda_cudnn_get_flags();
  switch (key) {
  case CUDNN_ENABLED: ts_set_library_kernels(TS_CUDA, v); return;
  case CUDNN_BENCHMARK: f.benchmark = v; break;
  case CUDNN_DETERMINISTIC: f.deterministic = v; break;
  default: f.allow_tf32 = v;
  }
  ts_cuda_cudnn_set_flags(f);
}
static int cudnn_version(void) { return ts_cuda_cudnn_version(); }
#else /* a CPU build: the settings are kept (scripts set them unconditionally) and do nothing */
static bool cudnn_flags[4] = {true, false, false, true};
static bool cudnn_get(int key) { return cudnn_flags[key]; }
static void cudnn_set(int key, bool v) { cudnn_flags[key] = v; }
static int cudnn_version(void) { return 0; }
#endif
static const backend_settings cudnn = {"torch.backends.cudnn", cudnn_keys, cudnn_get, cudnn_set, cudnn_version};

/* ---- cuda.matmul ---------------------------------------------------------- */
static const char *const matmul_keys[] = {"allow_tf32", NULL};
static bool matmul_get(int key) { return ts_get_float32_matmul_precision() != TS_MATMUL_HIGHEST; }
static void matmul_set(int key, bool v) { ts_set_float32_matmul_precision(v ? TS_MATMUL_HIGH : TS_MATMUL_HIGHEST); }
static const backend_settings matmul = {"torch.backends.cuda.matmul", matmul_keys, matmul_get, matmul_set, NULL};

/* torch.backends._library_runs("cpu" | "cuda"): TS_KIND_LIBRARY kernels run so far
 * (oneDNN, cuDNN), for tests that must know which path computed a result */
static int l_library_runs(lua_State *L) {
  static const char *const types[] = {"cpu", "cuda", NULL};
  int t = luaL_checkoption(L, 1, NULL, types);
  return lua_pushinteger(L, (lua_Integer)ts_library_kernel_runs(t == 0 ? TS_CPU : TS_CUDA)), 1;
}

/* torch.backends._dispatch_counts([on]): with a boolean, starts (true) or
 * stops counting kernel calls; returns {cpu = {op = n}, cuda = {op = n}} for
 * every registry op (0 for those not called), for tests that must prove which ops a case ran. */
static int l_dispatch_counts(lua_State *L) {
  if (!lua_isnoneornil(L, 1)) ts_set_dispatch_counting(lua_toboolean(L, 1));
  lua_newtable(L);
  static const char *const types[] = {"cpu", "cuda"};
  for (int t = 0; t < 2; t++) {
    lua_newtable(L);
    for (int op = 0; op < TS_OP_COUNT; op++) {
      lua_pushinteger(L, (lua_Integer)ts_dispatch_count(t == 0 ? TS_CPU : TS_CUDA, (ts_op)op));
      lua_setfield(L, -2, ts_ops[op].name);
    }
    lua_setfield(L, -2, types[t]);
  }
  return 1;
}

void lt_open_backends(lua_State *L) {
  lua_newtable(L); /* torch.backends */
  lua_pushcfunction(L, l_library_runs);
  lua_setfield(L, -2, "_library_runs");
  lua_pushcfunction(L, l_dispatch_counts);
  lua_setfield(L, -2, "_dispatch_counts");
  push_settings(L, &mkldnn);
  lua_setfield(L, -2, "mkldnn");
  push_settings(L, &cudnn);
  lua_setfield(L, -2, "cudnn");
  lua_newtable(L); /* torch.backends.cuda */
  push_settings(L, &matmul);
  lua_setfield(L, -2, "matmul");
  lua_setfield(L, -2, "cuda");
  lua_setfield(L, -3, "backends"); /* torch at -2 before the table was pushed */
}
