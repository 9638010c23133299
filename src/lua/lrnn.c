/* Binding of the recurrent op (src/ops/op_rnn.h) for lua/tensh/nn/rnn.lua:
 * torch._rnn_layer(mode, xproj, w_hh, {h0 =, c0 =, b_hh =, w_hr =,
 * reverse =, batch_sizes = {...}, scratch =}) -> output, h_n[, c_n].
 * scratch = true gives xproj up: the layer may compute its gates in it. The layers check
 * their arguments with PyTorch's messages first; this checks again (the core
 * does) so that no call from Lua can crash. */
#include <stdlib.h>
#include <string.h>

#include "lt.h"

static ts_tensor *opt_field(lua_State *L, int opts, const char *key) {
  if (!opts) return NULL;
  lua_getfield(L, opts, key);
  ts_tensor *t = lua_isnil(L, -1) ? NULL : lt_test(L, -1);
  if (!t && !lua_isnil(L, -1)) lt_errorf(L, "_rnn_layer: option '%s' must be a tensor, got %s", key, luaL_typename(L, -1));
  lua_pop(L, 1); /* the options table keeps it alive */
  return t;
}

static int l_rnn_layer(lua_State *L) {
  static const char *const modes[] = {"rnn_tanh", "rnn_relu", "lstm", "gru", NULL};
  ts_rnn_mode mode = (ts_rnn_mode)luaL_checkoption(L, 1, NULL, modes);
  ts_tensor *x = lt_check(L, 2), *w = lt_check(L, 3);
  static const char *const known[] = {"h0", "c0", "b_hh", "w_hr", "reverse", "batch_sizes", "scratch", NULL};
  int opts = lt_opts_index(L, 4);
  lt_opts_check(L, opts, "_rnn_layer", known);
  ts_tensor *h0 = opt_field(L, opts, "h0"), *c0 = opt_field(L, opts, "c0"), *b = opt_field(L, opts, "b_hh"),
            *wr = opt_field(L, opts, "w_hr");
  bool reverse = lt_opt_bool(L, opts, "reverse", false), scratch = lt_opt_bool(L, opts, "scratch", false);
  int64_t *bsz = NULL;
  if (opts && lua_getfield(L, opts, "batch_sizes") != LUA_TNIL) {
    if (!lua_istable(L, -1)) lt_errorf(L, "_rnn_layer: batch_sizes must be a list of integers");
    lua_Integer n = luaL_len(L, -1);
    if (x->ndim != 3 || n != x->sizes[0])
      lt_errorf(L, "_rnn_layer: batch_sizes has %lld entries, expected one per step", (long long)n);
    /* the list lives in a userdata so that an error below cannot leak it */
    bsz = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n > 0 ? n : 1), 0);
    for (lua_Integer k = 1; k <= n; k++) {
      lua_geti(L, -2, k);
      bsz[k - 1] = lt_checkint(L, -1);
      lua_pop(L, 1);
    }
    lua_remove(L, -2);
  } else if (opts) {
    lua_pop(L, 1);
  }
  ts_tensor **o = lt_newslot(L), **hn = lt_newslot(L), **cn = mode == TS_RNN_LSTM ? lt_newslot(L) : NULL;
  ts_tensor *none = NULL;
  LT_TRY(L, ts_rnn_layer(mode, x, scratch, h0, c0, w, b, wr, reverse, bsz, o, hn, cn ? cn : &none));
  lt_gc_debt(L);
  return mode == TS_RNN_LSTM ? 3 : 2;
}

void lt_open_rnn(lua_State *L) {
  static const luaL_Reg fns[] = {{"_rnn_layer", l_rnn_layer}, {NULL, NULL}};
  static const luaL_Reg none[] = {{NULL, NULL}};
  lt_register(L, fns, none);
}
