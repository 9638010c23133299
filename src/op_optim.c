/* The op layer of the fused optimizer steps: checks, then one kernel call. */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

ts_status ts_adam_step(int n, ts_tensor *const *params, ts_tensor *const *grads, ts_tensor *const *exp_avg,
                       ts_tensor *const *exp_avg_sq, ts_tensor *const *max_exp_avg_sq, const ts_adam_params *p) {
  const char *fn = "adam_step";
  if (n <= 0) return TS_OK;
  int per = p->amsgrad ? 5 : 4;
  ts_tensor **in = malloc(sizeof *in * (size_t)n * (size_t)per);
  if (!in) return ts_fail(TS_ERR_OOM, "%s: out of memory", fn);
  ts_status st = TS_OK;
  for (int k = 0; k < n && !st; k++) {
    ts_tensor *t[5] = {params[k], grads[k], exp_avg[k], exp_avg_sq[k], p->amsgrad ? max_exp_avg_sq[k] : NULL};
    for (int j = 0; j < per && !st; j++) {
      ts_tensor *x = t[j];
      if (!x) st = ts_fail(TS_ERR_ARG, "%s: parameter %d lacks tensor %d", fn, k, j);
      else if (x->dtype != t[0]->dtype || !ts_dtype_is_float(x->dtype) || x->dtype == TS_FLOAT16 ||
               x->dtype == TS_BFLOAT16)
        st = ts_fail(TS_ERR_DTYPE, "%s: parameter %d: every tensor must be float32 or float64 of one dtype", fn, k);
      else if (!ts_device_eq(x->device, t[0]->device) || !ts_device_eq(x->device, params[0]->device))
        st = ts_fail(TS_ERR_DEVICE, "%s: parameter %d: tensors on different devices", fn, k);
      else if (!ts_is_contiguous(x) || x->ndim != t[0]->ndim ||
               memcmp(x->sizes, t[0]->sizes, sizeof(int64_t) * (size_t)x->ndim) != 0)
        st = ts_fail(TS_ERR_SHAPE, "%s: parameter %d: tensors must be contiguous and of one shape", fn, k);
      else in[k * per + j] = x;
    }
  }
  if (!st) {
    ts_call c = {.op = TS_OP_ADAM_STEP, .nin = n * per, .in = in, .out = {params[0]},
                 .f = {p->lr, p->beta1, p->beta2, p->eps},
                 .i = {(p->amsgrad ? 1 : 0) | (p->maximize ? 2 : 0) | (p->decoupled ? 4 : 0), per, p->step, 0}};
    memcpy(&c.i[3], &p->weight_decay, sizeof(double));
    st = ts_dispatch(&c);
  }
  free(in);
  return st;
}
