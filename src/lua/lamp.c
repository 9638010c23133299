/* Mixed-precision bindings: the autocast regions' state (lua/tensh/amp.lua
 * checks the arguments and keeps the <close> objects) and GradScaler's
 * fused check-and-unscale. */
#include "autograd/autocast.h"
#include "ops/op_amp.h"
#include "lt.h"

static const char *const device_types[] = {"cpu", "cuda", NULL};

static ts_device_type check_type(lua_State *L, int idx) {
  return (ts_device_type)luaL_checkoption(L, idx, NULL, device_types);
}

static int push_state(lua_State *L, ts_autocast_state s) {
  lua_pushboolean(L, s.enabled);
  lt_push_dtype(L, s.dtype);
  lua_pushboolean(L, s.cache_enabled);
  return 3;
}

static ts_autocast_state check_state(lua_State *L, int idx) {
  ts_autocast_state s = {lua_toboolean(L, idx), lt_check_dtype(L, idx + 1), lua_toboolean(L, idx + 2)};
  if (s.dtype != TS_FLOAT16 && s.dtype != TS_BFLOAT16 && s.dtype != TS_FLOAT32)
    luaL_argerror(L, idx + 1, "float16, bfloat16 or float32 expected");
  return s;
}

/* torch._autocast_enter(device_type, enabled, dtype, cache_enabled) -> the
 * previous enabled, dtype, cache_enabled, for _autocast_exit */
static int l_enter(lua_State *L) {
  ts_device_type t = check_type(L, 1);
  ts_autocast_state s = check_state(L, 2), prev;
  ts_autocast_enter(t, s, &prev);
  return push_state(L, prev);
}

/* torch._autocast_exit(device_type, enabled, dtype, cache_enabled) */
static int l_exit(lua_State *L) {
  ts_device_type t = check_type(L, 1);
  ts_autocast_exit(t, check_state(L, 2));
  return 0;
}

/* torch._autocast_state(device_type) -> enabled, dtype, cache_enabled */
static int l_state(lua_State *L) { return push_state(L, ts_autocast_get(check_type(L, 1))); }

static int l_clear_cache(lua_State *L) {
  (void)L;
  ts_autocast_clear_cache();
  return 0;
}

/* torch._autocast_to_float32(...): the tensors as a loss sees them under
 * autocast (autocast.def's LOSS entry); other values pass through. */
static int l_to_float32(lua_State *L) {
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    ts_tensor *t = lt_test(L, i);
    ts_tensor **args[1] = {&t};
    int nmade;
    if (!t) continue;
    ts_tensor **slot = lt_newslot(L); /* the cast lands in a userdata the stack owns */
    LT_TRY(L, ts_autocast_cast(TS_AC_LOSS, 1, args, slot, &nmade));
    if (nmade) lua_replace(L, i);
    else lua_pop(L, 1);
  }
  return n;
}

/* torch._amp_foreach_non_finite_check_and_unscale_({tensors}, found_inf, inv_scale) */
static int l_unscale(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  ts_tensor *found = lt_check(L, 2), *inv = lt_check(L, 3);
  int n = (int)luaL_len(L, 1);
  ts_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(n > 0 ? n : 1), 0); /* freed by the GC on an error */
  for (int k = 0; k < n; k++) {
    lua_geti(L, 1, k + 1);
    ts[k] = lt_test(L, -1);
    if (!ts[k])
      return luaL_error(L, "_amp_foreach_non_finite_check_and_unscale_: element %d of the list is a %s, expected a tensor",
                        k + 1, luaL_typename(L, -1));
    lua_pop(L, 1); /* the table keeps it alive */
  }
  LT_TRY(L, ts_amp_unscale_(n, ts, found, inv));
  return 0;
}

void lt_open_amp(lua_State *L) {
  static const luaL_Reg fns[] = {{"_autocast_enter", l_enter},
                                 {"_autocast_exit", l_exit},
                                 {"_autocast_state", l_state},
                                 {"clear_autocast_cache", l_clear_cache},
                                 {"_autocast_to_float32", l_to_float32},
                                 {"_amp_foreach_non_finite_check_and_unscale_", l_unscale},
                                 {NULL, NULL}};
  lt_register(L, fns, NULL);
}
