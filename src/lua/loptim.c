/* torch._adam_step: the fused optimizer step that lua/tensh/optim.lua calls
 * for a whole parameter group. */
#include <stdlib.h>

#include "lt.h"

/* Reads list at idx (n tensors) into v; returns false if an entry is not a tensor. */
static bool read_list(lua_State *L, int idx, int n, ts_tensor **v) {
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    v[i] = lt_test(L, -1);
    lua_pop(L, 1); /* the list keeps it alive */
    if (!v[i]) return false;
  }
  return true;
}

/* torch._adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs|nil,
 *   {step=, lr=, beta1=, beta2=, eps=, weight_decay=, amsgrad=, maximize=, decoupled=}) */
static int l_adam_step(lua_State *L) {
  for (int i = 1; i <= 4; i++) luaL_checktype(L, i, LUA_TTABLE);
  int n = (int)lua_rawlen(L, 1), opts = lt_opts_index(L, 6);
  if (!opts) return luaL_typeerror(L, 6, "options table");
  ts_adam_params p = {.lr = lt_opt_number(L, opts, "lr", 1e-3), .beta1 = lt_opt_number(L, opts, "beta1", 0.9),
                      .beta2 = lt_opt_number(L, opts, "beta2", 0.999), .eps = lt_opt_number(L, opts, "eps", 1e-8),
                      .weight_decay = lt_opt_number(L, opts, "weight_decay", 0),
                      .step = (int64_t)lt_opt_number(L, opts, "step", 1),
                      .amsgrad = lt_opt_bool(L, opts, "amsgrad", false),
                      .maximize = lt_opt_bool(L, opts, "maximize", false),
                      .decoupled = lt_opt_bool(L, opts, "decoupled", false)};
  if (p.amsgrad) luaL_checktype(L, 5, LUA_TTABLE);
  ts_tensor **v = lua_newuserdatauv(L, sizeof *v * (size_t)(n > 0 ? n : 1) * 5, 0); /* freed by Lua */
  ts_tensor **lists[5] = {v, v + n, v + 2 * n, v + 3 * n, v + 4 * n};
  for (int i = 0; i < (p.amsgrad ? 5 : 4); i++) {
    if ((int)lua_rawlen(L, i + 1) != n) return lt_errorf(L, "_adam_step: list %d has %d entries, expected %d", i + 1,
                                                         (int)lua_rawlen(L, i + 1), n);
    if (!read_list(L, i + 1, n, lists[i])) return lt_errorf(L, "_adam_step: list %d holds a non-tensor", i + 1);
  }
  LT_TRY(L, ts_adam_step(n, lists[0], lists[1], lists[2], lists[3], lists[4], &p));
  return 0;
}

void lt_open_optim(lua_State *L) {
  static const luaL_Reg fns[] = {{"_adam_step", l_adam_step}, {NULL, NULL}};
  lt_register(L, fns, NULL);
}
