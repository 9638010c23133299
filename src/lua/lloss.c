/* Binding of the fused classification losses (src/ops/op_loss.h) for
 * lua/tensh/nn/losses.lua:
 *   torch._nll_loss(input, target, {weight =, ignore_index = -100,
 *                   reduction = "mean", label_smoothing = 0, logits = false})
 * logits = true is cross_entropy (log-softmax fused). The Lua functions check
 * their arguments with PyTorch's messages first; the core checks again, so no
 * call from Lua can crash. */
#include <string.h>

#include "lt.h"
#include "ops/op_loss.h"

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

/* torch._check_range(x, lo, hi, "binary_cross_entropy"): every element in [lo, hi], checked
 * without waiting for a device (an error at its next synchronisation there) */
static int l_check_range(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  double lo = luaL_checknumber(L, 2), hi = luaL_checknumber(L, 3);
  const char *who = luaL_checkstring(L, 4);
  if (strcmp(who, "binary_cross_entropy")) return lt_errorf(L, "_check_range: unknown loss '%s'", who);
  LT_TRY(L, ts_check_range(x, lo, hi, TS_LOSS_ERR_BCE_INPUT));
  return 0;
}

void lt_open_loss(lua_State *L) {
  static const luaL_Reg fns[] = {{"_nll_loss", l_nll_loss}, {"_check_range", l_check_range}, {NULL, NULL}};
  static const luaL_Reg none[] = {{NULL, NULL}};
  lt_register(L, fns, none);
}
