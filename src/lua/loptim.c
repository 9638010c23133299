/* torch._adam_step, torch._sgd_step, torch._rmsprop_step: the fused
 * optimizer steps that lua/tensh/optim.lua calls for a whole parameter group
 * (parallel lists of tensors, one entry per parameter, and an options table);
 * torch._clip_grad_norm_ for lua/tensh/nn/utils.lua. */
#include <math.h>
#include <stdlib.h>

#include "lt.h"

/* Reads the list at idx (n tensors) into v, or raises naming fn and the list's number. */
static void read_list(lua_State *L, const char *fn, int idx, int n, ts_tensor **v) {
  luaL_checktype(L, idx, LUA_TTABLE);
  if ((int)lua_rawlen(L, idx) != n)
    lt_errorf(L, "%s: list %d has %d entries, expected %d", fn, idx, (int)lua_rawlen(L, idx), n);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    v[i] = lt_test(L, -1);
    lua_pop(L, 1); /* the list keeps it alive */
    if (!v[i]) lt_errorf(L, "%s: list %d holds a non-tensor at %d", fn, idx, i + 1);
  }
}

/* Room for k lists of n tensors, owned by Lua (left on the stack). */
static ts_tensor **lists(lua_State *L, int n, int k) {
  return lua_newuserdatauv(L, sizeof(ts_tensor *) * (size_t)(n > 0 ? n : 1) * (size_t)k, 0);
}

static int count(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  return (int)lua_rawlen(L, 1);
}

/* torch._adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs|nil,
 *   {step=, lr=, beta1=, beta2=, eps=, weight_decay=, amsgrad=, maximize=, decoupled=, steps=})
 * steps: a list of the parameters' step counts as one-element float32 tensors on their
 * device, incremented and read there (PyTorch's capturable); step is then unused. */
static int l_adam_step(lua_State *L) {
  const char *fn = "_adam_step";
  static const char *const known[] = {"step", "lr", "beta1", "beta2", "eps", "weight_decay",
                                      "amsgrad", "maximize", "decoupled", "steps", NULL};
  int n = count(L), opts = lt_opts_index(L, 6);
  if (!opts) return luaL_typeerror(L, 6, "options table");
  lt_opts_check(L, opts, fn, known);
  ts_adam_params p = {.lr = lt_opt_number(L, opts, "lr", 1e-3), .beta1 = lt_opt_number(L, opts, "beta1", 0.9),
                      .beta2 = lt_opt_number(L, opts, "beta2", 0.999), .eps = lt_opt_number(L, opts, "eps", 1e-8),
                      .weight_decay = lt_opt_number(L, opts, "weight_decay", 0),
                      .step = (int64_t)lt_opt_number(L, opts, "step", 1),
                      .amsgrad = lt_opt_bool(L, opts, "amsgrad", false),
                      .maximize = lt_opt_bool(L, opts, "maximize", false),
                      .decoupled = lt_opt_bool(L, opts, "decoupled", false)};
  ts_tensor **v = lists(L, n, 6);
  for (int i = 0; i < (p.amsgrad ? 5 : 4); i++) read_list(L, fn, i + 1, n, v + (size_t)i * n);
  bool capturable = lua_getfield(L, opts, "steps") != LUA_TNIL;
  if (capturable) {
    if (!lua_istable(L, -1)) return lt_errorf(L, "%s: steps must be a list of tensors, got %s", fn, luaL_typename(L, -1));
    read_list(L, fn, lua_gettop(L), n, v + 5 * (size_t)n);
  }
  LT_TRY(L, ts_adam_step(n, v, v + n, v + 2 * n, v + 3 * n, v + 4 * n, capturable ? v + 5 * n : NULL, &p));
  return 0;
}

/* torch._sgd_step(params, grads, momentum_buffers|nil, fresh|nil,
 *   {lr=, momentum=, dampening=, weight_decay=, nesterov=, maximize=})
 * momentum_buffers is needed when momentum != 0; fresh, a list of booleans,
 * marks the buffers to be set from the grad (a first step). */
static int l_sgd_step(lua_State *L) {
  const char *fn = "_sgd_step";
  static const char *const known[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", NULL};
  int n = count(L), opts = lt_opts_index(L, 5);
  if (!opts) return luaL_typeerror(L, 5, "options table");
  lt_opts_check(L, opts, fn, known);
  ts_sgd_params p = {.lr = lt_opt_number(L, opts, "lr", 1e-3), .momentum = lt_opt_number(L, opts, "momentum", 0),
                     .dampening = lt_opt_number(L, opts, "dampening", 0),
                     .weight_decay = lt_opt_number(L, opts, "weight_decay", 0),
                     .nesterov = lt_opt_bool(L, opts, "nesterov", false),
                     .maximize = lt_opt_bool(L, opts, "maximize", false)};
  ts_tensor **v = lists(L, n, 3);
  bool *fresh = NULL;
  read_list(L, fn, 1, n, v);
  read_list(L, fn, 2, n, v + n);
  if (p.momentum != 0) {
    read_list(L, fn, 3, n, v + 2 * n);
    if (!lua_isnoneornil(L, 4)) {
      luaL_checktype(L, 4, LUA_TTABLE);
      fresh = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1), 0);
      for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 4, i + 1);
        fresh[i] = lua_toboolean(L, -1);
        lua_pop(L, 1);
      }
    }
  }
  LT_TRY(L, ts_sgd_step(n, v, v + n, v + 2 * n, fresh, &p));
  return 0;
}

/* torch._rmsprop_step(params, grads, square_avgs, momentum_buffers|nil, grad_avgs|nil,
 *   {lr=, alpha=, eps=, weight_decay=, momentum=, centered=, maximize=})
 * momentum_buffers is needed when momentum > 0, grad_avgs when centered. */
static int l_rmsprop_step(lua_State *L) {
  const char *fn = "_rmsprop_step";
  static const char *const known[] = {"lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize", NULL};
  int n = count(L), opts = lt_opts_index(L, 6);
  if (!opts) return luaL_typeerror(L, 6, "options table");
  lt_opts_check(L, opts, fn, known);
  ts_rmsprop_params p = {.lr = lt_opt_number(L, opts, "lr", 1e-2), .alpha = lt_opt_number(L, opts, "alpha", 0.99),
                         .eps = lt_opt_number(L, opts, "eps", 1e-8),
                         .weight_decay = lt_opt_number(L, opts, "weight_decay", 0),
                         .momentum = lt_opt_number(L, opts, "momentum", 0),
                         .centered = lt_opt_bool(L, opts, "centered", false),
                         .maximize = lt_opt_bool(L, opts, "maximize", false)};
  ts_tensor **v = lists(L, n, 5);
  for (int i = 0; i < 3; i++) read_list(L, fn, i + 1, n, v + (size_t)i * n);
  if (p.momentum > 0) read_list(L, fn, 4, n, v + 3 * n);
  if (p.centered) read_list(L, fn, 5, n, v + 4 * n);
  LT_TRY(L, ts_rmsprop_step(n, v, v + n, v + 2 * n, v + 3 * n, v + 4 * n, &p));
  return 0;
}

/* torch._clip_grad_norm_(grads, max_norm, norm_type) -> the total norm (0-dim);
 * norm_type 2 or math.huge; the grads scaled in place */
static int l_clip_grad_norm(lua_State *L) {
  int n = count(L);
  double max_norm = luaL_checknumber(L, 2), norm_type = luaL_optnumber(L, 3, 2);
  ts_tensor **v = lists(L, n, 1);
  read_list(L, "_clip_grad_norm_", 1, n, v);
  ts_tensor **out = lt_newslot(L);
  LT_TRY(L, ts_clip_grad_norm(n, v, max_norm, norm_type, out));
  return 1;
}

/* torch._foreach_zero_(tensors): each set to 0, in one kernel call */
static int l_foreach_zero(lua_State *L) {
  int n = count(L);
  ts_tensor **v = lists(L, n, 1);
  read_list(L, "_foreach_zero_", 1, n, v);
  LT_TRY(L, ts_foreach_zero(n, v));
  return 0;
}

void lt_open_optim(lua_State *L) {
  static const luaL_Reg fns[] = {{"_adam_step", l_adam_step},
                                 {"_sgd_step", l_sgd_step},
                                 {"_rmsprop_step", l_rmsprop_step},
                                 {"_clip_grad_norm_", l_clip_grad_norm},
                                 {"_foreach_zero_", l_foreach_zero},
                                 {NULL, NULL}};
  lt_register(L, fns, NULL);
}
