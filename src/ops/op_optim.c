/* The op layer of the fused optimizer steps: checks every parameter's
 * tensors, lays them out per parameter (ops_optim.def), then one kernel call
 * for the whole group, and bumps the versions of what it wrote. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Checks parameter k's `per` tensors t[0..per) (t[0] the parameter, role[j]
 * what t[j] is) against each other and against the group's first parameter p0. */
static ts_status check_param(const char *fn, int k, ts_tensor *const *t, int per, const char *const *role,
                             const ts_tensor *p0) {
  if (!t[0]) return ts_fail(TS_ERR_ARG, "%s: parameter %d is missing", fn, k);
  if (t[0]->dtype != TS_FLOAT32 && t[0]->dtype != TS_FLOAT64)
    return ts_fail(TS_ERR_DTYPE, "%s: parameter %d is %s; the fused step takes float32 or float64", fn, k,
                   ts_dtype_name(t[0]->dtype));
  if (!ts_device_eq(t[0]->device, p0->device))
    return ts_fail(TS_ERR_DEVICE, "%s: parameter %d is on another device than parameter 0", fn, k);
  for (int j = 0; j < per; j++) {
    const ts_tensor *x = t[j];
    if (!x) return ts_fail(TS_ERR_ARG, "%s: parameter %d lacks its %s", fn, k, role[j]);
    if (x->dtype != t[0]->dtype)
      return ts_fail(TS_ERR_DTYPE, "%s: parameter %d: its %s is %s but the parameter is %s (one dtype per parameter)",
                     fn, k, role[j], ts_dtype_name(x->dtype), ts_dtype_name(t[0]->dtype));
    if (!ts_device_eq(x->device, t[0]->device))
      return ts_fail(TS_ERR_DEVICE, "%s: parameter %d: its %s is on another device than the parameter", fn, k, role[j]);
    if (x->ndim != t[0]->ndim || memcmp(x->sizes, t[0]->sizes, sizeof(int64_t) * (size_t)x->ndim) != 0)
      return ts_fail(TS_ERR_SHAPE, "%s: parameter %d: its %s's shape differs from the parameter's", fn, k, role[j]);
    if (!ts_is_contiguous(x))
      return ts_fail(TS_ERR_SHAPE, "%s: parameter %d: %s %s is not contiguous (call :contiguous())", fn, k,
                     j ? "its" : "the", role[j]);
  }
  return TS_OK;
}

/* Checks the n x per table `in` (parameter-major; the first `shaped` of each
 * parameter's tensors against the parameter, the rest the caller checked),
 * dispatches c with it, and on success bumps the version of every tensor but
 * the grads (slot 1). */
static ts_status run_step(const char *fn, ts_call *c, int n, int per, int shaped, const char *const *role,
                          ts_tensor **in) {
  ts_status st = TS_OK;
  for (int k = 0; k < n && !st; k++) st = check_param(fn, k, in + (size_t)k * per, shaped, role, in[0]);
  if (!st) {
    c->in = in, c->nin = n * per, c->out[0] = in[0];
    st = ts_dispatch(c);
  }
  if (!st)
    for (int k = 0; k < n * per; k++)
      if (k % per != 1) in[k]->storage->version++;
  return st;
}

static ts_tensor **table(const char *fn, int n, int per, ts_status *st) {
  ts_tensor **in = calloc((size_t)n * (size_t)per, sizeof *in);
  *st = in ? TS_OK : ts_fail(TS_ERR_OOM, "%s: out of memory", fn);
  return in;
}

/* A capturable step's count: one float32 element on the parameter's device. */
static ts_status check_step(const char *fn, int k, const ts_tensor *s, const ts_tensor *param) {
  if (!s) return ts_fail(TS_ERR_ARG, "%s: parameter %d lacks its step", fn, k);
  if (s->dtype != TS_FLOAT32 || ts_numel(s) != 1 || !ts_device_eq(s->device, param->device))
    return ts_fail(TS_ERR_ARG,
                   "%s: parameter %d: its step must be a one-element float32 tensor on the parameter's device, "
                   "got %s with %lld elements",
                   fn, k, ts_dtype_name(s->dtype), (long long)ts_numel(s));
  return TS_OK;
}

ts_status ts_adam_step(int n, ts_tensor *const *params, ts_tensor *const *grads, ts_tensor *const *exp_avg,
                       ts_tensor *const *exp_avg_sq, ts_tensor *const *max_exp_avg_sq, ts_tensor *const *steps,
                       const ts_adam_params *p) {
  const char *fn = "adam_step";
  if (n <= 0) return TS_OK;
  const int shaped = p->amsgrad ? 5 : 4, per = shaped + (steps ? 1 : 0);
  ts_status st;
  ts_tensor **in = table(fn, n, per, &st);
  if (st) return st;
  for (int k = 0; k < n; k++) {
    ts_tensor **t = in + (size_t)k * per;
    t[0] = params[k], t[1] = grads[k], t[2] = exp_avg[k], t[3] = exp_avg_sq[k];
    if (p->amsgrad) t[4] = max_exp_avg_sq[k];
    if (steps) {
      t[shaped] = steps[k];
      if (!st && t[0]) st = check_step(fn, k, steps[k], t[0]);
    }
  }
  ts_call c = {.op = TS_OP_ADAM_STEP, .f = {p->lr, p->beta1, p->beta2, p->eps},
               .i = {(p->amsgrad ? 1 : 0) | (p->maximize ? 2 : 0) | (p->decoupled ? 4 : 0) | (steps ? 8 : 0), per,
                     steps ? 0 : p->step, 0}};
  memcpy(&c.i[3], &p->weight_decay, sizeof(double));
  static const char *const role[] = {"parameter", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  if (!st) st = run_step(fn, &c, n, per, shaped, role, in);
  free(in);
  return st;
}

ts_status ts_sgd_step(int n, ts_tensor *const *params, ts_tensor *const *grads, ts_tensor *const *momentum_buffers,
                      const bool *fresh, const ts_sgd_params *p) {
  const char *fn = "sgd_step";
  if (n <= 0) return TS_OK;
  bool mom = p->momentum != 0;
  int per = mom ? 3 : 2;
  ts_status st;
  ts_tensor **in = table(fn, n, per, &st);
  if (st) return st;
  /* the kernel knows fresh buffers by place: the parameters with one go first
   * (their order within the group does not matter: each is updated alone) */
  int row = 0, nfresh = 0;
  for (int pass = 0; pass < (mom ? 2 : 1); pass++)
    for (int k = 0; k < n; k++) {
      bool f = mom && fresh && fresh[k];
      if (mom && f != (pass == 0)) continue;
      ts_tensor **t = in + (size_t)row++ * per;
      t[0] = params[k], t[1] = grads[k];
      if (mom) t[2] = momentum_buffers ? momentum_buffers[k] : NULL;
      nfresh += f;
    }
  ts_call c = {.op = TS_OP_SGD_STEP, .f = {p->lr, p->momentum, p->dampening, p->weight_decay},
               .i = {(p->nesterov ? 1 : 0) | (p->maximize ? 2 : 0), per, nfresh, 0}};
  static const char *const role[] = {"parameter", "grad", "momentum_buffer"};
  st = run_step(fn, &c, n, per, per, role, in);
  free(in);
  return st;
}

ts_status ts_clip_grad_norm(int n, ts_tensor *const *grads, double max_norm, double norm_type, ts_tensor **total) {
  const char *fn = "clip_grad_norm_";
  if (n <= 0) return ts_fail(TS_ERR_ARG, "%s: no gradients", fn);
  if (norm_type != 2 && norm_type != INFINITY)
    return ts_fail(TS_ERR_ARG, "%s: the fused norm takes norm_type 2 or inf, got %g", fn, norm_type);
  static const char *const role[] = {"grad"};
  for (int k = 0; k < n; k++) {
    ts_status st = check_param(fn, k, grads + k, 1, role, grads[0]);
    if (st) return st;
    if (grads[k]->dtype != grads[0]->dtype)
      return ts_fail(TS_ERR_DTYPE, "%s: gradient %d is %s, gradient 0 %s (one dtype)", fn, k,
                     ts_dtype_name(grads[k]->dtype), ts_dtype_name(grads[0]->dtype));
  }
  ts_status st = ts_tensor_empty(0, NULL, grads[0]->dtype, grads[0]->device, total);
  if (st) return st;
  ts_call c = {.op = TS_OP_CLIP_GRAD_NORM, .nin = n, .in = grads, .out = {*total}, .i = {norm_type == 2 ? 2 : 0, 1},
               .f = {max_norm}};
  if ((st = ts_dispatch(&c))) {
    ts_tensor_release(*total);
    *total = NULL;
    return st;
  }
  for (int k = 0; k < n; k++) grads[k]->storage->version++;
  return TS_OK;
}

ts_status ts_foreach_zero(int n, ts_tensor *const *ts) {
  if (n <= 0) return TS_OK;
  static const char *const role[] = {"tensor"};
  ts_call c = {.op = TS_OP_FOREACH_ZERO, .i = {0, 1}};
  return run_step("_foreach_zero_", &c, n, 1, 1, role, (ts_tensor **)ts);
}

ts_status ts_rmsprop_step(int n, ts_tensor *const *params, ts_tensor *const *grads, ts_tensor *const *square_avgs,
                          ts_tensor *const *momentum_buffers, ts_tensor *const *grad_avgs, const ts_rmsprop_params *p) {
  const char *fn = "rmsprop_step";
  if (n <= 0) return TS_OK;
  bool mom = p->momentum > 0;
  int per = 3 + (mom ? 1 : 0) + (p->centered ? 1 : 0);
  ts_status st;
  ts_tensor **in = table(fn, n, per, &st);
  if (st) return st;
  for (int k = 0; k < n; k++) {
    ts_tensor **t = in + (size_t)k * per;
    int j = 3;
    t[0] = params[k], t[1] = grads[k], t[2] = square_avgs[k];
    if (mom) t[j++] = momentum_buffers ? momentum_buffers[k] : NULL;
    if (p->centered) t[j++] = grad_avgs ? grad_avgs[k] : NULL;
  }
  ts_call c = {.op = TS_OP_RMSPROP_STEP, .f = {p->lr, p->alpha, p->eps, p->weight_decay},
               .i = {(p->centered ? 1 : 0) | (p->maximize ? 2 : 0), per, 0, 0}};
  memcpy(&c.i[2], &p->momentum, sizeof(double));
  const char *role[5] = {"parameter", "grad", "square_avg", "momentum_buffer", "grad_avg"};
  if (p->centered && !mom) role[3] = "grad_avg";
  st = run_step(fn, &c, n, per, per, role, in);
  free(in);
  return st;
}
