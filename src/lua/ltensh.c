/* luaopen_tensh: builds the torch table, the tensor metatable and the Lua
 * library, for the shell and for `require "tensh"` from plain lua5.4. */
#include "lt.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct { const char *name; const char *src; size_t len; const char *bc; size_t bclen; } ts_lua_modules[];

/* embedded module i as a function on the stack: its bytecode (compiled at
 * build time by tools/embed.c under this chunk name), or its source where
 * this Lua reads another bytecode format (tensh.so under another lua5.4) */
static int load_embedded(lua_State *L, int i, const char *chunk) {
  if (luaL_loadbufferx(L, ts_lua_modules[i].bc, ts_lua_modules[i].bclen, chunk, "b") == LUA_OK) return LUA_OK;
  lua_pop(L, 1);
  return luaL_loadbufferx(L, ts_lua_modules[i].src, ts_lua_modules[i].len, chunk, "t");
}

/* package.searchers entry: finds the embedded tensh.* Lua modules */
static int embedded_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  for (int i = 0; ts_lua_modules[i].name; i++) {
    if (strcmp(ts_lua_modules[i].name, name) != 0) continue;
    char chunk[256]; /* "@lua/tensh/nn.lua" for tensh.nn, so tracebacks name the source file */
    snprintf(chunk, sizeof chunk, "@lua/%s.lua", name);
    for (char *c = chunk + 5; *c; c++)
      if (*c == '.' && strcmp(c, ".lua") != 0) *c = '/';
    if (load_embedded(L, i, chunk)) return lua_error(L);
    lua_pushstring(L, name);
    return 2;
  }
  lua_pushfstring(L, "no embedded module '%s'", name);
  return 1;
}

/* The embedded searcher goes second, right after package.preload: a tensh.*
 * module is then found without a look at the file system (appended last, each
 * require first failed through every LUA_PATH and LUA_CPATH entry: 347 failed
 * openat calls per start-up, a third of the start-up time on a loaded machine). */
static void add_searcher(lua_State *L) {
  lua_getglobal(L, "package");
  if (lua_getfield(L, -1, "searchers") == LUA_TTABLE) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = n; i >= 2; i--) {
      lua_rawgeti(L, -1, i);
      lua_rawseti(L, -2, i + 1);
    }
    lua_pushcfunction(L, embedded_searcher);
    lua_rawseti(L, -2, n >= 1 ? 2 : 1);
  }
  lua_pop(L, 2);
}

/* os.setenv(name, value): Python's os.environ[name] = value, which the
 * tutorials use for CUDA_VISIBLE_DEVICES before the first CUDA call (tensh
 * starts CUDA when a device is first named); value nil unsets. Child
 * processes (io.popen, os.execute) inherit it. */
static int l_setenv(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (!*name || strchr(name, '='))
    return luaL_error(L, "os.setenv: invalid variable name '%s' (non-empty, without '=')", name);
  int rc;
  if (lua_isnoneornil(L, 2)) rc = unsetenv(name);
  else {
    if (lua_type(L, 2) != LUA_TSTRING && lua_type(L, 2) != LUA_TNUMBER)
      return luaL_typeerror(L, 2, "string or nil");
    rc = setenv(name, lua_tostring(L, 2), 1);
  }
  if (rc != 0) return luaL_error(L, "os.setenv: cannot set '%s' (out of memory)", name);
  return 0;
}

static void add_setenv(lua_State *L) {
  if (lua_getglobal(L, "os") == LUA_TTABLE) {
    lua_pushcfunction(L, l_setenv);
    lua_setfield(L, -2, "setenv");
  }
  lua_pop(L, 1);
}

/* torch._is_cfunction(f): f is a C function (lua_iscfunction), for
 * classes.tensor_methods, which wraps the methods written in Lua: asked of
 * debug.getinfo(f, "S"), which builds a table of five fields per call, the
 * 324 methods took a fifth of `tensh -e ''` (2.3M instructions). */
static int l_is_cfunction(lua_State *L) {
  lua_pushboolean(L, lua_iscfunction(L, 1));
  return 1;
}

/* The dtype names the C enum owns, for prelude.lua: a list of the names and
 * the set of the floating-point ones. */
static void push_dtypes(lua_State *L) {
  lua_createtable(L, TS_DTYPE_COUNT, 0);
  lua_createtable(L, 0, TS_DTYPE_COUNT);
  for (int d = 0; d < TS_DTYPE_COUNT; d++) {
    lua_pushstring(L, ts_dtype_name((ts_dtype)d));
    lua_rawseti(L, -3, d + 1);
    lua_pushboolean(L, ts_dtype_is_float((ts_dtype)d));
    lua_setfield(L, -2, ts_dtype_name((ts_dtype)d));
  }
}

/* require(mod).install() */
static void install(lua_State *L, const char *mod) {
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "install");
  lua_call(L, 0, 0);
  lua_pop(L, 1);
}

void lt_make_metatable(lua_State *L);
void lt_open_amp(lua_State *L);   /* lamp.c: autocast regions, GradScaler's unscale */
void lt_open_bench(lua_State *L); /* lbench.c: torch._clock for scripts/bench */
void lt_open_dist(lua_State *L);  /* ldist.c: torch._dist, MPI collectives for lua/tensh/dist.lua */

int luaopen_tensh(lua_State *L) {
  ts_backend_get(TS_CPU);
  lua_newtable(L); /* torch */
  int torch = lua_gettop(L);
  lua_newtable(L); /* tensor methods */
  lt_make_metatable(L);
  luaL_newmetatable(L, LT_SIZE);
  lua_pop(L, 1);
  luaL_newmetatable(L, LT_DEVICE);
  lua_pop(L, 1);
  lt_open_tensor(L);
  lt_open_create(L);
  lt_open_elementwise(L);
  lt_open_shape(L);
  lt_open_reduce(L);
  lt_open_linalg(L);
  lt_open_index(L);
  lt_open_nn_ops(L);
  lt_open_rnn(L);
  lt_open_attention(L);
  lt_open_loss(L);
  lt_open_print(L);
  lt_open_autograd(L);
  lt_open_optim(L);
  lt_open_amp(L);
  lt_open_cuda(L);
  lt_open_save(L);
  lt_open_data(L);
  lt_open_image(L);
  lt_open_bench(L);
  lt_open_dist(L);
  lt_open_tb(L);
  lt_open_backends(L);
  lt_open_ops(L);
  lt_open_cpu(L);
  lua_setfield(L, torch, "_methods"); /* for completion and for Lua-side additions */
  lua_pushliteral(L, TS_VERSION);
  lua_setfield(L, torch, "__version__");
  lua_pushcfunction(L, l_is_cfunction);
  lua_setfield(L, torch, "_is_cfunction");

  add_searcher(L);
  /* the Lua part of the namespace */
  for (int i = 0;; i++) {
    if (!ts_lua_modules[i].name) return luaL_error(L, "tensh: embedded prelude missing (broken build)");
    if (strcmp(ts_lua_modules[i].name, "tensh.prelude") != 0) continue;
    if (load_embedded(L, i, "@lua/tensh/prelude.lua")) return lua_error(L);
    break;
  }
  lua_pushvalue(L, torch);
  luaL_getmetatable(L, LT_SIZE);
  luaL_getmetatable(L, LT_DEVICE);
  push_dtypes(L);
  lua_call(L, 5, 0);
  lua_pushvalue(L, torch);
  lua_setglobal(L, "torch");
  /* the Lua library's namespaces, as globals the way the API names them
   * (tb, amp): each lua/tensh/<name>.lua that the build embedded; nn,
   * models, optim, profiler, data, dist and bench load on first use
   * (lua/tensh/lazy.lua) */
  install(L, "tensh.lazy");
  static const char *const globals[] = {"tb", "amp", NULL};
  for (int g = 0; globals[g]; g++) {
    char mod[64];
    snprintf(mod, sizeof mod, "tensh.%s", globals[g]);
    bool present = false;
    for (int i = 0; ts_lua_modules[i].name && !present; i++) present = strcmp(ts_lua_modules[i].name, mod) == 0;
    if (!present) continue;
    lua_getglobal(L, "require");
    lua_pushstring(L, mod);
    lua_call(L, 1, 1);
    lua_pushvalue(L, -1); /* torch.amp too, as PyTorch spells it */
    lua_setfield(L, torch, globals[g]);
    lua_setglobal(L, globals[g]);
  }
  add_setenv(L);
  /* the functions composed in Lua (torch.flip, t:tril, ...): lua/tensh/tensor_extra.lua */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tensh.tensor_extra");
  lua_call(L, 1, 0);
  /* last: the library's tables raise on a missing name (lua/tensh/strict.lua),
   * and the C side's printable values join with `..` as they print (printable.lua) */
  install(L, "tensh.strict");
  install(L, "tensh.printable");
  return 1;
}
