/* Binding of fused attention (src/ops/op_attention.h) for lua/tensh/nn/attention.lua:
 * torch._sdpa(q, k, v, {mask =, dropout_p =, is_causal =, scale =}) -> o, with q
 * (B, L, E), k (B, S, E), v (B, S, Ev) (or 4-D with heads: (B, H, L, E) ...,
 * strided) and an additive mask of q's dtype broadcastable to (B, L, S) / (B, H, L, S). F.scaled_dot_product_attention checks its
 * arguments with PyTorch's messages first; the core checks again, so no call
 * from Lua can crash. */
#include <math.h>

#include "lt.h"

static int l_sdpa(lua_State *L) {
  ts_tensor *q = lt_check(L, 1), *k = lt_check(L, 2), *v = lt_check(L, 3), *mask = NULL;
  static const char *const known[] = {"mask", "dropout_p", "is_causal", "scale", NULL};
  int opts = lt_opts_index(L, 4);
  lt_opts_check(L, opts, "_sdpa", known);
  if (opts && lua_getfield(L, opts, "mask") != LUA_TNIL) {
    mask = lt_test(L, -1);
    if (!mask) lt_errorf(L, "_sdpa: option 'mask' must be a tensor, got %s", luaL_typename(L, -1));
  }
  if (opts) lua_pop(L, 1); /* the options table keeps the mask alive */
  double p = lt_opt_number(L, opts, "dropout_p", 0.0);
  bool causal = lt_opt_bool(L, opts, "is_causal", false);
  double scale = lt_opt_number(L, opts, "scale", 1.0 / sqrt((double)(q->ndim == 3 ? q->sizes[2] : 1)));
  ts_tensor **o = lt_newslot(L);
  LT_TRY(L, ts_sdpa(q, k, v, mask, p, causal, scale, o));
  lt_gc_debt(L);
  return 1;
}

void lt_open_attention(lua_State *L) {
  static const luaL_Reg fns[] = {{"_sdpa", l_sdpa}, {NULL, NULL}};
  static const luaL_Reg none[] = {{NULL, NULL}};
  lt_register(L, fns, none);
}
