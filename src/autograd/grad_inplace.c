/* Backward formulas of the ops that overwrite values: copy_, fill_, zero_,
 * masked_fill(_), index_put_ (x[idx] = v). What was overwritten gets no
 * gradient; what was written gets the gradient of the places it went to,
 * summed back to its own shape by the engine (a value broadcast over many
 * places collects them all). */
#include "grad.h"
#include "grad_util.h"

/* g with the places index (an int64 index or a bool mask) picks set to 0 */
static ts_tensor *zero_at(ag_scope *s, ts_tensor *g, ts_tensor *index) {
  if (s->st) return NULL;
  ts_tensor *c = NULL;
  ts_status st = ts_clone(g, &c);
  c = ag_keep(s, st, c);
  ts_scalar_box zero;
  if (!s->st) s->st = ts_index_put_(c, index, ts_scalar_wrap_double(&zero, 0));
  return c;
}

ts_status ts_inplace_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *saved = NULL;
  ts_status st = TS_OK;
  if (n->i[0] == TS_GRAD_MASKED_FILL || n->i[0] == TS_GRAD_MASKED_FILL_TENSOR || n->i[0] == TS_GRAD_INDEX_PUT)
    st = ts_ag_saved(n, 0, &saved);
  if (st) return st;
  ag_scope s = {.st = TS_OK};
  ts_tensor *g0 = NULL, *g1 = NULL;
  switch (n->i[0]) {
  case TS_GRAD_COPY:
  case TS_GRAD_FILL:
  case TS_GRAD_FILL_TENSOR:
  case TS_GRAD_ZERO: /* every element overwritten; the source gets g (summed to its shape) */
    if (ag_wants(n, 0)) g0 = ag_zeros_like(&s, g);
    if (n->nin > 1 && ag_wants(n, 1)) g1 = g;
    break;
  case TS_GRAD_MASKED_FILL:
  case TS_GRAD_MASKED_FILL_TENSOR: /* the mask may broadcast against x: g has their joint shape */
    if (ag_wants(n, 0)) g0 = ag_where(&s, saved, ag_num(&s, 0), g);
    if (n->nin > 1 && ag_wants(n, 1)) g1 = ag_where(&s, saved, g, ag_num(&s, 0));
    break;
  case TS_GRAD_INDEX_PUT:
    if (ag_wants(n, 0)) g0 = zero_at(&s, g, saved);
    if (ag_wants(n, 1) && !s.st) {
      ts_tensor *r = NULL;
      st = ts_index_get(g, saved, &r);
      g1 = ag_keep(&s, st, r);
    }
    break;
  default: s.st = ts_fail(TS_ERR_ARG, "%s: unknown kind", n->name);
  }
  grads[0] = ag_end_keep(&s, g0);
  if (n->nin > 1) grads[1] = ag_end_keep(&s, g1);
  return ag_end_grads(&s, n->nin, grads);
}

ts_status ts_ag_overwrite(ts_grad_kind kind, int nin, ts_tensor *const *in, ts_tensor *y, ts_tensor *saved) {
  if (!ts_dtype_is_float(y->dtype)) return TS_OK;
  ts_node *n;
  ts_status st = ts_ag_record_kind(kind, nin, in, y, &n);
  if (st) return st;
  if (saved) ts_ag_save(n, 0, saved);
  return TS_OK;
}
