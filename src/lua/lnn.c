/* Neural-network op bindings: torch.conv1d/conv2d, max/avg/adaptive_avg
 * pooling, batch_norm, layer_norm, embedding, as PyTorch's functional ops
 * (options in a trailing table; sizes an integer or a pair {h, w}).
 * The backward functions are exposed under torch._backward for the tests
 * until autograd calls them from C. */
#include "lt.h"

/* nil (or none) -> NULL; otherwise a tensor */
static ts_tensor *opt_tensor(lua_State *L, int idx) { return lua_isnoneornil(L, idx) ? NULL : lt_check(L, idx); }

/* "max_pool2d: kernel_size must be ..., got <got>" (the function as called; no got: none shown) */
static void pair_error(lua_State *L, const char *what, const char *got) {
  const char *fn = lt_running_name(L);
  lt_errorf(L, "%s%s%s must be an integer or a pair of integers {h, w}%s%s", fn ? fn : "", fn ? ": " : "", what,
            got ? ", got " : "", got ? got : "");
}

/* An integer or a pair {h, w} at idx into out; `what` names it in errors. */
static void read_pair(lua_State *L, int idx, const char *what, int64_t out[2]) {
  idx = lua_absindex(L, idx); /* the checks below push values */
  lt_unsize(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) {
    int ok;
    out[0] = out[1] = lua_tointegerx(L, idx, &ok);
    if (!ok) pair_error(L, what, lua_tostring(L, idx));
    return;
  }
  if (lua_type(L, idx) == LUA_TTABLE && lua_rawlen(L, idx) == 2 && !luaL_getmetafield(L, idx, "__name")) {
    for (int k = 0; k < 2; k++) {
      lua_rawgeti(L, idx, k + 1);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      lua_pop(L, 1);
      if (!ok) pair_error(L, what, NULL);
      out[k] = v;
    }
    return;
  }
  pair_error(L, what, lt_value_name(L, idx));
}

/* opts[key] as a pair, or the default */
static void opt_pair(lua_State *L, int opts, const char *key, const int64_t dflt[2], int64_t out[2]) {
  out[0] = dflt[0], out[1] = dflt[1];
  if (!opts) return;
  if (lua_getfield(L, opts, key) != LUA_TNIL) {
    lua_pushfstring(L, "option '%s'", key);
    read_pair(L, -2, lua_tostring(L, -1), out);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* The options table at idx (0 for none), holding only keys in known. */
static int opts_at(lua_State *L, int idx, const char *fn, const char *const *known) {
  int opts = lt_opts_index(L, idx);
  if (!opts && !lua_isnoneornil(L, idx))
    lt_errorf(L, "%s: options table expected at argument #%d, got %s", fn, idx, luaL_typename(L, idx));
  lt_opts_check(L, opts, fn, known);
  return opts;
}

static const char *const conv_keys[] = {"stride", "padding", "dilation", "groups", NULL};
/* avg_pool2d reads dilation to refuse anything but 1 */
static const char *const avg_pool_keys[] = {"stride", "padding", "dilation", "ceil_mode", "count_include_pad", NULL};
static const char *const max_pool_keys[] = {"stride", "padding", "dilation", "ceil_mode", "return_indices", NULL};

/* ---- convolution ----------------------------------------------------------- */

static void conv_opts(lua_State *L, int opts, bool one_d, ts_conv2d_params *p) {
  static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  opt_pair(L, opts, "stride", one, p->stride);
  opt_pair(L, opts, "padding", zero, p->padding);
  opt_pair(L, opts, "dilation", one, p->dilation);
  p->groups = (int64_t)lt_opt_number(L, opts, "groups", 1);
  if (one_d) /* conv1d's sizes are single integers: the width entries */
    p->stride[0] = p->dilation[0] = 1, p->padding[0] = 0;
}

/* conv2d(x, weight, bias, {stride, padding, dilation, groups}); upvalue: 1 for conv1d */
static int l_conv(lua_State *L) {
  bool one_d = lua_toboolean(L, lua_upvalueindex(1));
  ts_tensor *x = lt_check(L, 1), *w = lt_check(L, 2), *b = opt_tensor(L, 3);
  ts_conv2d_params p;
  conv_opts(L, opts_at(L, 4, one_d ? "conv1d" : "conv2d", conv_keys), one_d, &p);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, one_d ? ts_conv1d(x, w, b, &p, slot) : ts_conv2d(x, w, b, &p, slot));
  lt_gc_debt(L);
  return 1;
}

/* _backward.conv2d(grad_out, x, weight, opts) -> grad_input, grad_weight, grad_bias */
static int l_conv_backward(lua_State *L) {
  bool one_d = lua_toboolean(L, lua_upvalueindex(1));
  ts_tensor *go = lt_check(L, 1), *x = lt_check(L, 2), *w = lt_check(L, 3);
  ts_conv2d_params p;
  conv_opts(L, opts_at(L, 4, one_d ? "conv1d" : "conv2d", conv_keys), one_d, &p);
  ts_tensor **gi = lt_newslot(L), **gw = lt_newslot(L), **gb = lt_newslot(L);
  const bool need[3] = {true, true, true};
  LT_TRY(L, one_d ? ts_conv1d_backward(go, x, w, &p, need, gi, gw, gb) : ts_conv2d_backward(go, x, w, &p, need, gi, gw, gb));
  lt_gc_debt(L);
  return 3;
}

/* ---- pooling ----------------------------------------------------------------- */

/* kernel at idx, options (keys in known) at idx + 1 */
static void pool_opts(lua_State *L, int idx, const char *fn, const char *const *known, ts_pool2d_params *p) {
  static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  read_pair(L, idx, "kernel_size", p->kernel);
  int opts = opts_at(L, idx + 1, fn, known);
  opt_pair(L, opts, "stride", p->kernel, p->stride);
  opt_pair(L, opts, "padding", zero, p->padding);
  opt_pair(L, opts, "dilation", one, p->dilation);
  p->ceil_mode = lt_opt_bool(L, opts, "ceil_mode", false);
  p->count_include_pad = lt_opt_bool(L, opts, "count_include_pad", true);
}

/* max_pool2d(x, kernel, {stride, padding, dilation, ceil_mode, return_indices}) */
static int l_max_pool2d(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  ts_pool2d_params p;
  pool_opts(L, 2, "max_pool2d", max_pool_keys, &p);
  bool ri = lt_opt_bool(L, lt_opts_index(L, 3), "return_indices", false);
  ts_tensor **out = lt_newslot(L), **idx = lt_newslot(L);
  LT_TRY(L, ts_max_pool2d(x, &p, out, idx));
  lt_gc_debt(L);
  if (!ri) lua_pop(L, 1);
  return ri ? 2 : 1;
}

static int l_avg_pool2d(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  ts_pool2d_params p;
  pool_opts(L, 2, "avg_pool2d", avg_pool_keys, &p);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_avg_pool2d(x, &p, out));
  lt_gc_debt(L);
  return 1;
}

static int l_adaptive_avg_pool2d(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t s[2];
  read_pair(L, 2, "output_size", s);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_adaptive_avg_pool2d(x, s[0], s[1], out));
  lt_gc_debt(L);
  return 1;
}

/* _backward.max_pool2d(grad_out, indices, x) */
static int l_max_pool2d_backward(lua_State *L) {
  ts_tensor *go = lt_check(L, 1), *idx = lt_check(L, 2), *x = lt_check(L, 3);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_max_pool2d_backward(go, idx, x, out));
  lt_gc_debt(L);
  return 1;
}

/* _backward.avg_pool2d(grad_out, x, kernel, opts) */
static int l_avg_pool2d_backward(lua_State *L) {
  ts_tensor *go = lt_check(L, 1), *x = lt_check(L, 2);
  ts_pool2d_params p;
  pool_opts(L, 3, "avg_pool2d", avg_pool_keys, &p);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_avg_pool2d_backward(go, x, &p, out));
  lt_gc_debt(L);
  return 1;
}

/* _backward.adaptive_avg_pool2d(grad_out, x) */
static int l_adaptive_avg_pool2d_backward(lua_State *L) {
  ts_tensor *go = lt_check(L, 1), *x = lt_check(L, 2);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_adaptive_avg_pool2d_backward(go, x, out));
  lt_gc_debt(L);
  return 1;
}

/* ---- normalisation --------------------------------------------------------- */

/* torch._nn.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
 * -> out, saved_mean, saved_invstd (what the backward takes) */
static int l_batch_norm_saved(lua_State *L) {
  ts_tensor *x = lt_check(L, 1), *rm = opt_tensor(L, 2), *rv = opt_tensor(L, 3), *w = opt_tensor(L, 4),
            *b = opt_tensor(L, 5);
  bool training = lua_toboolean(L, 6);
  double momentum = luaL_optnumber(L, 7, 0.1), eps = luaL_optnumber(L, 8, 1e-5);
  ts_tensor **out = lt_newslot(L), **m = lt_newslot(L), **is = lt_newslot(L);
  LT_TRY(L, ts_batch_norm(x, rm, rv, w, b, training, momentum, eps, out, m, is));
  lt_gc_debt(L);
  return 3;
}

/* _backward.batch_norm(grad_out, x, weight, saved_mean, saved_invstd, training) -> gx, gw, gb */
static int l_batch_norm_backward(lua_State *L) {
  ts_tensor *go = lt_check(L, 1), *x = lt_check(L, 2), *w = opt_tensor(L, 3), *m = lt_check(L, 4),
            *is = lt_check(L, 5);
  bool training = lua_toboolean(L, 6);
  ts_tensor **gx = lt_newslot(L), **gw = lt_newslot(L), **gb = lt_newslot(L);
  const bool need[3] = {true, true, true};
  LT_TRY(L, ts_batch_norm_backward(go, x, w, m, is, training, need, gx, gw, gb));
  lt_gc_debt(L);
  return 3;
}

/* torch.batch_norm(...): the output only, as PyTorch's */
static int l_batch_norm(lua_State *L) {
  l_batch_norm_saved(L);
  lua_pop(L, 2);
  return 1;
}

/* torch._nn.layer_norm(x, normalized_shape, weight, bias, eps) -> out, saved_mean, saved_rstd */
static int l_layer_norm_saved(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int nd;
  int64_t shape[TS_MAX_DIMS];
  if (lt_sizes(L, 2, &nd, shape) != 1) return luaL_argerror(L, 2, "normalized_shape (an integer or a list) expected");
  ts_tensor *w = opt_tensor(L, 3), *b = opt_tensor(L, 4);
  double eps = luaL_optnumber(L, 5, 1e-5);
  ts_tensor **out = lt_newslot(L), **m = lt_newslot(L), **rs = lt_newslot(L);
  LT_TRY(L, ts_layer_norm(x, nd, shape, w, b, eps, out, m, rs));
  lt_gc_debt(L);
  return 3;
}

/* torch.layer_norm(...): the output only, as PyTorch's */
static int l_layer_norm(lua_State *L) {
  l_layer_norm_saved(L);
  lua_pop(L, 2);
  return 1;
}

/* _backward.layer_norm(grad_out, x, normalized_shape, saved_mean, saved_rstd, weight) -> gx, gw, gb */
static int l_layer_norm_backward(lua_State *L) {
  ts_tensor *go = lt_check(L, 1), *x = lt_check(L, 2);
  int nd;
  int64_t shape[TS_MAX_DIMS];
  if (lt_sizes(L, 3, &nd, shape) != 1) return luaL_argerror(L, 3, "normalized_shape (an integer or a list) expected");
  ts_tensor *m = lt_check(L, 4), *rs = lt_check(L, 5), *w = opt_tensor(L, 6);
  ts_tensor **gx = lt_newslot(L), **gw = lt_newslot(L), **gb = lt_newslot(L);
  const bool need[3] = {true, true, true};
  LT_TRY(L, ts_layer_norm_backward(go, x, nd, shape, m, rs, w, need, gx, gw, gb));
  lt_gc_debt(L);
  return 3;
}

/* ---- embedding ----------------------------------------------------------------- */

/* embedding(weight, indices [, {padding_idx = i}]) (padding_idx only matters to the backward) */
static int l_embedding(lua_State *L) {
  ts_tensor *w = lt_check(L, 1), *idx = lt_check(L, 2);
  static const char *const known[] = {"padding_idx", NULL};
  int opts = lt_opts_index(L, 3);
  lt_opts_check(L, opts, "embedding", known);
  int64_t pad = 0;
  bool has_pad = false;
  if (opts && lua_getfield(L, opts, "padding_idx") != LUA_TNIL) pad = lt_opt_int(L, opts, "padding_idx", 0), has_pad = true;
  if (opts) lua_pop(L, 1);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_embedding_padded(w, idx, has_pad ? &pad : NULL, out));
  lt_gc_debt(L);
  return 1;
}

/* _backward.embedding(grad_out, indices, num_weights, padding_idx or nil) */
static int l_embedding_backward(lua_State *L) {
  ts_tensor *go = lt_check(L, 1), *idx = lt_check(L, 2);
  int64_t V = lt_checkint(L, 3), pad = 0;
  bool has_pad = !lua_isnoneornil(L, 4);
  if (has_pad) pad = lt_checkint(L, 4);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_embedding_backward(go, idx, V, has_pad ? &pad : NULL, out));
  lt_gc_debt(L);
  return 1;
}

void lt_open_nn_ops(lua_State *L) {
  for (int one_d = 0; one_d <= 1; one_d++) {
    lua_pushboolean(L, one_d);
    lua_pushcclosure(L, l_conv, 1);
    lua_setfield(L, -3, one_d ? "conv1d" : "conv2d");
  }
  static const luaL_Reg fns[] = {{"max_pool2d", l_max_pool2d},
                                 {"avg_pool2d", l_avg_pool2d},
                                 {"adaptive_avg_pool2d", l_adaptive_avg_pool2d},
                                 {"batch_norm", l_batch_norm},
                                 {"layer_norm", l_layer_norm},
                                 {"embedding", l_embedding},
                                 {NULL, NULL}};
  static const luaL_Reg none[] = {{NULL, NULL}};
  lt_register(L, fns, none);
  /* torch._backward: the backward functions, for tests until autograd wires them */
  lua_newtable(L);
  for (int one_d = 0; one_d <= 1; one_d++) {
    lua_pushboolean(L, one_d);
    lua_pushcclosure(L, l_conv_backward, 1);
    lua_setfield(L, -2, one_d ? "conv1d" : "conv2d");
  }
  static const luaL_Reg bw[] = {{"max_pool2d", l_max_pool2d_backward},
                                {"avg_pool2d", l_avg_pool2d_backward},
                                {"adaptive_avg_pool2d", l_adaptive_avg_pool2d_backward},
                                {"batch_norm", l_batch_norm_backward},
                                {"layer_norm", l_layer_norm_backward},
                                {"embedding", l_embedding_backward},
                                {NULL, NULL}};
  luaL_setfuncs(L, bw, 0);
  lua_setfield(L, -3, "_backward");
  lt_open_nn_functional(L);
  /* the forms with the saved statistics, for the backward's tests */
  lua_getfield(L, -2, "_nn");
  lua_pushcfunction(L, l_batch_norm_saved);
  lua_setfield(L, -2, "batch_norm");
  lua_pushcfunction(L, l_layer_norm_saved);
  lua_setfield(L, -2, "layer_norm");
  lua_pop(L, 1);
}
