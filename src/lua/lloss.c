/* Binding of the fused classification losses (src/op_loss.h) for
 * lua/tensh/nn/losses.lua:
 *   torch._nll_loss(input, target, {weight =, ignore_index = -100,
 *                   reduction = "mean", label_smoothing = 0, logits = false})
 * logits = true is cross_entropy (log-softmax fused). The Lua functions check
 * their arguments with PyTorch's messages first; the core checks again, so no
 * call from Lua can crash. */
#include <string.h>

#include "lt.h"
#include "../op_loss.h"

static int l_nll_loss(lua_State *L) {
  ts_tensor *x = lt_check(L, 1), *target = lt_check(L, 2), *weight = NULL;
  static const char *const known[] = {"weight", "ignore_index", "reduction", "label_smoothing", "logits", NULL};
  int opts = lt_opts_index(L, 3);
  lt_opts_check(L, opts, "_nll_loss", known);
  if (opts && lua_getfield(L, opts, "weight") != LUA_TNIL) {
    weight = lt_test(L, -1);
    if (!weight) lt_errorf(L, "_nll_loss: option 'weight' must be a tensor, got %s", luaL_typename(L, -1));
  }
  if (opts) lua_pop(L, 1); /* the options table keeps the weight alive */
  int64_t ignore_index = lt_opt_int(L, opts, "ignore_index", -100);
  double eps = lt_opt_number(L, opts, "label_smoothing", 0.0);
  bool logits = lt_opt_bool(L, opts, "logits", false);
  ts_reduction red = TS_REDUCTION_MEAN;
  if (opts && lua_getfield(L, opts, "reduction") != LUA_TNIL) {
    const char *r = lua_tostring(L, -1);
    if (r && !strcmp(r, "sum")) red = TS_REDUCTION_SUM;
    else if (r && !strcmp(r, "none")) red = TS_REDUCTION_NONE;
    else if (!r || strcmp(r, "mean"))
      lt_errorf(L, "_nll_loss: option 'reduction': \"mean\", \"sum\" or \"none\" expected, got %s", luaL_tolstring(L, -1, NULL));
  }
  if (opts) lua_pop(L, 1);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_nll_loss(x, target, weight, ignore_index, red, eps, logits, out));
  lt_gc_debt(L);
  return 1;
}

void lt_open_loss(lua_State *L) {
  static const luaL_Reg fns[] = {{"_nll_loss", l_nll_loss}, {NULL, NULL}};
  static const luaL_Reg none[] = {{NULL, NULL}};
  lt_register(L, fns, none);
}
