/* Linear algebra bindings: matmul, mm, bmm, mv, dot, addmm, outer/ger, each
 * as a torch function and a tensor method. Lua has no `@`: a:matmul(b). */
#include "lt.h"

typedef ts_status (*product_fn)(ts_tensor *, ts_tensor *, ts_tensor **);

/* upvalue 1: the core function */
static int l_product(lua_State *L) {
  product_fn f = (product_fn)lua_touserdata(L, lua_upvalueindex(1));
  ts_tensor *a = lt_check(L, 1), *b = lt_check(L, 2);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, f(a, b, slot));
  lt_gc_debt(L);
  return 1;
}

/* addmm(bias, a, b, {beta = 1, alpha = 1}) */
static int l_addmm(lua_State *L) {
  ts_tensor *bias = lt_check(L, 1), *a = lt_check(L, 2), *b = lt_check(L, 3);
  static const char *const known[] = {"beta", "alpha", NULL};
  int opts = lt_opts_index(L, 4);
  if (!opts && !lua_isnoneornil(L, 4))
    return luaL_argerror(L, 4, lua_pushfstring(L, "options table {beta=, alpha=} expected, got %s", luaL_typename(L, 4)));
  lt_opts_check(L, opts, "addmm", known);
  double beta = lt_opt_number(L, opts, "beta", 1), alpha = lt_opt_number(L, opts, "alpha", 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_addmm(bias, a, b, beta, alpha, slot));
  lt_gc_debt(L);
  return 1;
}

static const char *const precisions[] = {"highest", "high", "medium", NULL};

/* torch.set_float32_matmul_precision("highest" | "high" | "medium"): "high"
 * and "medium" let GPU GEMMs use TF32 tensor cores */
static int l_set_matmul_precision(lua_State *L) {
  ts_set_float32_matmul_precision((ts_matmul_precision)luaL_checkoption(L, 1, NULL, precisions));
  return 0;
}

static int l_get_matmul_precision(lua_State *L) {
  return lua_pushstring(L, precisions[ts_get_float32_matmul_precision()]), 1;
}

void lt_open_linalg(lua_State *L) {
  static const struct {
    const char *name;
    product_fn f;
  } products[] = {{"matmul", ts_matmul}, {"mm", ts_mm}, {"bmm", ts_bmm}, {"mv", ts_mv},
                  {"dot", ts_dot},       {"outer", ts_outer}, {"ger", ts_outer}};
  for (size_t i = 0; i < sizeof products / sizeof products[0]; i++) {
    for (int t = -2; t <= -1; t++) { /* torch at -2, methods at -1 */
      lua_pushlightuserdata(L, (void *)products[i].f);
      lua_pushcclosure(L, l_product, 1);
      lua_setfield(L, t - 1, products[i].name);
    }
  }
  static const luaL_Reg fns[] = {{"addmm", l_addmm}, {NULL, NULL}};
  lt_register(L, fns, fns);
  lua_pushcfunction(L, l_set_matmul_precision);
  lua_setfield(L, -3, "set_float32_matmul_precision");
  lua_pushcfunction(L, l_get_matmul_precision);
  lua_setfield(L, -3, "get_float32_matmul_precision");
}
