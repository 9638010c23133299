/* The op layer of GradScaler's fused non-finite check and unscale. */
#include "op_amp.h"

#include <stdlib.h>

#include "autograd/autograd.h"

static const char *const FN = "_amp_foreach_non_finite_check_and_unscale_";

static ts_status check_scalar(const char *what, const ts_tensor *t) {
  if (ts_numel(t) != 1 || t->dtype != TS_FLOAT32)
    return ts_fail(TS_ERR_ARG, "%s: %s must be a one-element float32 tensor, got %s with %lld elements", FN, what,
                   ts_dtype_name(t->dtype), (long long)ts_numel(t));
  return TS_OK;
}

ts_status ts_amp_unscale_(int n, ts_tensor *const *ts, ts_tensor *found_inf, ts_tensor *inv_scale) {
  ts_status st;
  if ((st = check_scalar("found_inf", found_inf)) || (st = check_scalar("inv_scale", inv_scale))) return st;
  if (!ts_device_eq(found_inf->device, inv_scale->device)) return ts_fail_devices(FN, found_inf->device, inv_scale->device);
  if (!ts_is_contiguous(found_inf)) return ts_fail(TS_ERR_ARG, "%s: found_inf must be contiguous", FN);
  /* the kernel's inputs: inv_scale, then contiguous stand-ins for the tensors */
  ts_tensor **in = calloc((size_t)n + 1, sizeof *in);
  if (!in) return ts_fail(TS_ERR_OOM, "%s: out of memory", FN);
  in[0] = inv_scale;
  int m = 1;
  for (int k = 0; k < n && !st; k++) {
    ts_tensor *t = ts[k];
    if (!ts_dtype_is_float(t->dtype))
      st = ts_fail(TS_ERR_DTYPE, "%s: tensor %d is %s; expected a floating dtype", FN, k + 1, ts_dtype_name(t->dtype));
    else if (!ts_device_eq(t->device, found_inf->device))
      st = ts_fail_devices(FN, found_inf->device, t->device);
    else if (!(st = ts_check_internal_overlap(FN, t)) && !(st = ts_ag_check_inplace(FN, t)) && ts_numel(t) > 0)
      st = ts_contiguous(t, &in[m++]); /* a copy for a strided tensor, written back below */
  }
  if (!st && m > 1) {
    ts_call c = {.op = TS_OP_AMP_UNSCALE, .nin = m, .in = in, .out = {found_inf}};
    st = ts_dispatch(&c);
    found_inf->storage->version++;
  }
  for (int k = 0, j = 1; k < n && j < m; k++) {
    ts_tensor *t = ts[k];
    if (ts_numel(t) == 0) continue;
    if (!st && in[j] != t) st = ts_copy_(t, in[j]);
    if (!st) t->storage->version++;
    j++;
  }
  for (int j = 1; j < m; j++) ts_tensor_release(in[j]);
  free(in);
  return st;
}
