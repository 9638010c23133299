/* The formula helpers of grad_util.h. */
#include "grad_util.h"

#include <string.h>

ts_tensor *ag_keep(ag_scope *s, ts_status st, ts_tensor *r) {
  if (st) {
    if (!s->st) s->st = st;
    return NULL;
  }
  if (s->ntmp == AG_MAX_TMP) {
    ts_tensor_release(r);
    s->st = ts_fail(TS_ERR_ARG, "backward formula uses too many temporaries (internal limit %d)", AG_MAX_TMP);
    return NULL;
  }
  s->tmp[s->ntmp++] = r;
  return r;
}

ts_tensor *ag_end(ag_scope *s, ts_tensor *result) {
  if (result && !s->st) ts_tensor_retain(result);
  else result = NULL;
  for (int i = 0; i < s->ntmp; i++) ts_tensor_release(s->tmp[i]);
  s->ntmp = 0;
  return result;
}

ts_status ag_end_grads(ag_scope *s, int n, ts_tensor **grads) {
  ag_end(s, NULL);
  if (s->st)
    for (int k = 0; k < n; k++) {
      ts_tensor_release(grads[k]);
      grads[k] = NULL;
    }
  return s->st;
}

ts_tensor *ag_end_keep(ag_scope *s, ts_tensor *t) {
  if (s->st || !t) return NULL;
  ts_tensor_retain(t);
  return t;
}

ts_tensor *ag_num(ag_scope *s, double v) {
  if (s->nbox == AG_MAX_SCALARS) {
    if (!s->st) s->st = ts_fail(TS_ERR_ARG, "backward formula uses too many scalars");
    return NULL;
  }
  return ts_scalar_wrap_double(&s->boxes[s->nbox++], v);
}

ts_tensor *ag_bin(ag_scope *s, ts_op op, ts_tensor *a, ts_tensor *b) {
  if (s->st || !a || !b) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_binary(op, a, b, &r);
  return ag_keep(s, st_, r);
}

ts_tensor *ag_un(ag_scope *s, ts_op op, ts_tensor *a) {
  if (s->st || !a) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_unary(op, a, &r);
  return ag_keep(s, st_, r);
}

ts_tensor *ag_where(ag_scope *s, ts_tensor *c, ts_tensor *a, ts_tensor *b) {
  if (s->st || !c || !a || !b) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_where(c, a, b, &r);
  return ag_keep(s, st_, r);
}

ts_tensor *ag_zeros_like(ag_scope *s, ts_tensor *t) {
  if (s->st || !t) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_full(t->ndim, t->sizes, 0, t->dtype, t->device, &r);
  return ag_keep(s, st_, r);
}

ts_tensor *ag_sum_dims(ag_scope *s, ts_tensor *t, int n, const int64_t *dims, bool keepdim) {
  if (s->st || !t) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_sum(t, n, dims, keepdim, &r);
  return ag_keep(s, st_, r);
}

ts_tensor *ag_reshape(ag_scope *s, ts_tensor *t, int nd, const int64_t *sizes) {
  if (s->st || !t) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_reshape(t, nd, sizes, &r);
  return ag_keep(s, st_, r);
}

ts_tensor *ag_expand(ag_scope *s, ts_tensor *t, int nd, const int64_t *sizes) {
  if (s->st || !t) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_expand(t, nd, sizes, &r);
  return ag_keep(s, st_, r);
}
