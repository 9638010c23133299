/* torch._nn: the C ops behind nn.functional's activations, group_norm,
 * interpolate and adaptive_max_pool2d (as PyTorch's torch._C._nn), with
 * positional arguments. lua/tensh/nn/functional.lua checks and defaults the
 * user's arguments and calls these; they check again what the core needs. */
#include <math.h>

#include "lt.h"

static double check_number(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TNUMBER) lt_typeerror(L, idx, "number");
  return lua_tonumber(L, idx);
}

/* torch._nn.softplus(x, beta, threshold) and the others: upvalue 1 the ts_activation,
 * upvalue 2 how many numbers follow x */
static int l_activation(lua_State *L) {
  ts_activation a = (ts_activation)lua_tointeger(L, lua_upvalueindex(1));
  int np = (int)lua_tointeger(L, lua_upvalueindex(2));
  ts_tensor *x = lt_check(L, 1);
  double p[2] = {0, 0};
  for (int k = 0; k < np; k++) p[k] = check_number(L, 2 + k);
  if (a == TS_ACT_SOFTPLUS && p[0] == 0) return lt_argerror(L, 2, "beta must not be 0");
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_activation_forward(a, x, p, out));
  lt_gc_debt(L);
  return 1;
}

/* torch._nn.group_norm(x, num_groups, weight or nil, bias or nil, eps) */
static int l_group_norm(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t G = lt_checkint(L, 2);
  ts_tensor *w = lua_isnoneornil(L, 3) ? NULL : lt_check(L, 3), *b = lua_isnoneornil(L, 4) ? NULL : lt_check(L, 4);
  double eps = check_number(L, 5);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_group_norm(x, G, w, b, eps, out, NULL, NULL));
  lt_gc_debt(L);
  return 1;
}

/* A list of n integers (or numbers, for scales) at idx into out. */
static void read_list(lua_State *L, int idx, int n, bool integers, double *out) {
  lt_unsize(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE || (int)lua_rawlen(L, idx) != n)
    lt_argerror(L, idx, lua_pushfstring(L, "a list of %d %s expected", n, integers ? "integers" : "numbers"));
  for (int k = 0; k < n; k++) {
    lua_rawgeti(L, idx, k + 1);
    int ok = lua_type(L, -1) == LUA_TNUMBER;
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    if (!ok || (integers && (v != floor(v) || fabs(v) > 9e15)))
      lt_argerror(L, idx, lua_pushfstring(L, "a list of %d %s expected", n, integers ? "integers" : "numbers"));
    out[k] = v;
  }
}

/* torch._nn.upsample(x, mode "nearest" | "linear", size {..}, scales {..} or nil, align_corners):
 * 1 or 2 spatial dims as x has (3-D or 4-D) */
static int l_upsample(lua_State *L) {
  static const char *const modes[] = {"nearest", "linear", NULL};
  ts_tensor *x = lt_check(L, 1);
  ts_upsample_params p = {.linear = luaL_checkoption(L, 2, NULL, modes) == 1, .nd = x->ndim == 3 ? 1 : 2};
  double size[2] = {0, 0};
  read_list(L, 3, p.nd, true, size);
  if (!lua_isnoneornil(L, 4)) read_list(L, 4, p.nd, false, p.scales);
  p.align_corners = lua_toboolean(L, 5);
  for (int d = 0; d < p.nd; d++) p.size[d] = (int64_t)size[d];
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_upsample(x, &p, out));
  lt_gc_debt(L);
  return 1;
}

/* torch._nn.adaptive_max_pool2d(x, {oh, ow}) -> values, indices */
static int l_adaptive_max_pool2d(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  double s[2];
  read_list(L, 2, 2, true, s);
  ts_tensor **out = lt_newslot(L), **idx = lt_newslot(L);
  LT_TRY(L, ts_adaptive_max_pool2d(x, (int64_t)s[0], (int64_t)s[1], out, idx));
  lt_gc_debt(L);
  return 2;
}

void lt_open_nn_functional(lua_State *L) {
  static const struct {
    const char *name;
    ts_activation a;
    int np;
  } acts[] = {{"softplus", TS_ACT_SOFTPLUS, 2}, {"elu", TS_ACT_ELU, 1}, {"hardtanh", TS_ACT_HARDTANH, 2},
              {"log_sigmoid", TS_ACT_LOG_SIGMOID, 0}, {"mish", TS_ACT_MISH, 0}};
  static const luaL_Reg fns[] = {{"group_norm", l_group_norm},
                                 {"upsample", l_upsample},
                                 {"adaptive_max_pool2d", l_adaptive_max_pool2d},
                                 {NULL, NULL}};
  lua_newtable(L);
  for (size_t k = 0; k < sizeof acts / sizeof *acts; k++) {
    lua_pushinteger(L, acts[k].a);
    lua_pushinteger(L, acts[k].np);
    lua_pushcclosure(L, l_activation, 2);
    lua_setfield(L, -2, acts[k].name);
  }
  luaL_setfuncs(L, fns, 0);
  lua_setfield(L, -3, "_nn"); /* torch is at -2 below the new table: -3 now */
}
