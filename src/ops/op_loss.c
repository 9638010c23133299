/* The op layer of the fused classification losses (op_loss.h,
 * ops_loss.def): checks, the (N, C, S) layout, the compute dtype, and one
 * autograd node whose backward is one NLL_LOSS_BACKWARD call. */
#include "op_loss.h"

#include "op_nn_common.h"

ts_status ts_loss_device_error(ts_op op, int code, const long long v[3]) {
  if (op == TS_OP_NLL_LOSS && (code == TS_LOSS_ERR_CE_TARGET || code == TS_LOSS_ERR_NLL_TARGET))
    return ts_fail(TS_ERR_INDEX,
                   "%s: target %lld is out of bounds (class indices must be in [0, %lld] for C = %lld, or "
                   "ignore_index = %lld)",
                   code == TS_LOSS_ERR_CE_TARGET ? "cross_entropy" : "nll_loss", v[0], v[1] - 1, v[1], v[2]);
  if (op == TS_OP_CHECK_RANGE && code == TS_LOSS_ERR_BCE_INPUT) {
    double x;
    memcpy(&x, &v[0], sizeof x);
    char xs[32];
    snprintf(xs, sizeof xs, x != x ? "nan" : "%g", x); /* 0/0 has its sign bit set: not "-nan" */
    return ts_fail(TS_ERR_ARG,
                   "binary_cross_entropy: all elements of input should be between 0 and 1, got %s (element %lld); "
                   "apply sigmoid, or use binary_cross_entropy_with_logits",
                   xs, v[1]);
  }
  if ((op == TS_OP_GATHER && code == TS_LOSS_ERR_EMBEDDING_INDEX) ||
      (op == TS_OP_SCATTER && code == TS_LOSS_ERR_EMBEDDING_BACKWARD_INDEX)) /* the CPU's words (op_nn_embedding.c) */
    return ts_fail(TS_ERR_INDEX, "%s: index %lld is out of range for a weight of %lld rows (expected 0 <= index < %lld)",
                   op == TS_OP_GATHER ? "embedding" : "embedding_backward", v[0], v[1], v[1]);
  return ts_fail(TS_ERR_BACKEND, "a device kernel of %s reported error %d (%lld, %lld, %lld)",
                 (unsigned)op < TS_OP_COUNT ? ts_ops[op].name : "an unknown op", code, v[0], v[1], v[2]);
}

ts_status ts_check_range(ts_tensor *x, double lo, double hi, int code) {
  if (code != TS_LOSS_ERR_BCE_INPUT) return ts_fail(TS_ERR_ARG, "check_range: unknown code %d", code);
  ts_status st = check_float("binary_cross_entropy", "input", x);
  if (st || ts_numel(x) == 0) return st;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **xr = tmp(&k);
  TS_AG_OFF(prev);
  TRY(to_compute(x, xc));
  TRY(ts_contiguous(*xc, xr));
  {
    ts_call c = {.op = TS_OP_CHECK_RANGE, .nin = 1, .in = xr, .i = {code}, .f = {lo, hi}};
    TRY(ts_dispatch(&c));
  }
done:
  TS_AG_RESTORE(prev);
  tmps_free(&k);
  return st;
}

/* The sizes of a class-index loss: N rows of C classes over S positions. */
typedef struct nll_dims {
  int64_t N, C, S;
} nll_dims;

static ts_status nll_check(const char *fn, ts_tensor *x, ts_tensor *target, ts_tensor *weight, double eps, bool logits,
                           nll_dims *d) {
  ts_status st = check_float(fn, "input", x);
  if (st) return st;
  if (x->ndim < 1) return ts_fail(TS_ERR_SHAPE, "%s: expected input with 1 or more dimensions (got 0)", fn);
  if (target->dtype != TS_INT64)
    return ts_fail(TS_ERR_DTYPE, "%s: expected target dtype torch.int64 for class indices, got %s; convert it with :long()",
                   fn, ts_dtype_name(target->dtype));
  /* (C) with a 0-dim target is a batch of one; else target is x's shape without dim 1 */
  int64_t want[TS_MAX_DIMS];
  int nw = 0;
  d->N = x->ndim == 1 ? 1 : x->sizes[0];
  d->C = x->ndim == 1 ? x->sizes[0] : x->sizes[1];
  d->S = 1;
  if (x->ndim > 1) want[nw++] = x->sizes[0];
  for (int k = 2; k < x->ndim; k++) want[nw++] = x->sizes[k], d->S *= x->sizes[k];
  if (target->ndim != nw || memcmp(target->sizes, want, sizeof(int64_t) * (size_t)nw)) {
    char ws[160];
    ts_shape_str(nw, want, ws, sizeof ws);
    return ts_fail(TS_ERR_SHAPE, "%s: expected target of size %s (class indices) for input of size %s, got target of size %s",
                   fn, ws, shape_of(x).s, shape_of(target).s);
  }
  ts_tensor *all[3] = {x, target, weight};
  if ((st = ts_check_same_device(fn, weight ? 3 : 2, all))) return st;
  if (weight) {
    if (weight->ndim != 1 || weight->sizes[0] != d->C)
      return ts_fail(TS_ERR_SHAPE,
                     "%s: weight should be defined for all %lld classes (a tensor of size torch.Size([%lld])), got size %s",
                     fn, (long long)d->C, (long long)d->C, shape_of(weight).s);
    if (weight->dtype != x->dtype)
      return ts_fail(TS_ERR_DTYPE, "%s: weight dtype %s does not match input dtype %s", fn, ts_dtype_name(weight->dtype),
                     ts_dtype_name(x->dtype));
  }
  if (!(eps >= 0 && eps <= 1)) return ts_fail(TS_ERR_ARG, "%s: label_smoothing must be between 0.0 and 1.0, got %g", fn, eps);
  if (eps != 0 && !logits) return ts_fail(TS_ERR_ARG, "%s: label_smoothing needs logits (cross_entropy)", fn);
  return TS_OK;
}

static int nll_flags(bool logits, const ts_tensor *weight, ts_reduction red) {
  return (logits ? TS_NLL_LOGITS : 0) | (weight ? TS_NLL_WEIGHT : 0) | (red != TS_REDUCTION_NONE ? TS_NLL_REDUCE : 0) |
         (red == TS_REDUCTION_MEAN ? TS_NLL_MEAN : 0);
}

/* t as a contiguous tensor of the given sizes in dtype dt */
static ts_status as_rows(ts_tensor *t, ts_dtype dt, int nd, const int64_t *sizes, ts_tensor **tc, ts_tensor **tv,
                         ts_tensor **out) {
  ts_status st = ts_to_dtype(t, dt, tc);
  if (!st) st = ts_reshape(*tc, nd, sizes, tv);
  return st ? st : ts_contiguous(*tv, out);
}

/* Everything the backward needs, in the compute dtype's layout. */
typedef struct nll_saved {
  ts_tensor *x3, *t2, *w, *lse, *stats; /* retained; w and lse may be NULL */
} nll_saved;

static ts_status nll_forward(const char *fn, ts_tensor *x, ts_tensor *target, ts_tensor *weight, int64_t ignore_index,
                             ts_reduction red, double eps, bool logits, ts_tensor **out, nll_saved *sv) {
  nll_dims d;
  ts_status st = nll_check(fn, x, target, weight, eps, logits, &d);
  if (st) return st;
  const ts_dtype cd = compute_dtype(x->dtype);
  const int64_t M = d.N * d.S, x3s[3] = {d.N, d.C, d.S}, t2s[2] = {d.N, d.S}, two = 2;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **xv = tmp(&k), **x3 = tmp(&k), **tc = tmp(&k), **tv = tmp(&k), **t2 = tmp(&k),
            **wc = tmp(&k), **wv = tmp(&k), **w = tmp(&k), **loss = tmp(&k), **lse = tmp(&k), **stats = tmp(&k),
            **fl = tmp(&k);
  TRY(as_rows(x, cd, 3, x3s, xc, xv, x3));
  TRY(as_rows(target, TS_INT64, 2, t2s, tc, tv, t2));
  if (weight) TRY(as_rows(weight, cd, 1, &d.C, wc, wv, w));
  const int flags = nll_flags(logits, weight, red);
  if (red == TS_REDUCTION_NONE) TRY(ts_tensor_empty(target->ndim, target->sizes, cd, x->device, loss));
  else TRY(ts_tensor_empty(0, NULL, cd, x->device, loss));
  if (logits) TRY(ts_tensor_empty(1, &M, TS_FLOAT64, x->device, lse));
  TRY(ts_tensor_empty(1, &two, TS_FLOAT64, x->device, stats));
  {
    ts_tensor *in[3] = {*x3, *t2, *w};
    ts_call c = {.op = TS_OP_NLL_LOSS, .nin = weight ? 3 : 2, .in = in, .out = {*loss, *lse, *stats},
                 .i = {ignore_index, flags}, .f = {eps}};
    TRY(ts_dispatch(&c));
  }
  TRY(ts_to_dtype(*loss, x->dtype, fl));
  *out = take(fl);
  if (sv) {
    sv->x3 = take(x3), sv->t2 = take(t2), sv->w = take(w), sv->lse = take(lse), sv->stats = take(stats);
  }
done:
  tmps_free(&k);
  return st;
}

/* The node: i[0] ignore_index, i[1] flags, f[0] eps; saved x3, t2, stats, lse, w */
static ts_status nll_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *s[5] = {NULL}; /* borrowed from the node */
  ts_status st = TS_OK;
  for (int j = 0; j < 5 && !st; j++)
    if (n->saved[j] || j == 0) st = ts_ag_saved(n, j, &s[j]);
  if (st) return st;
  ts_tensor *x3 = s[0], *t2 = s[1], *stats = s[2], *lse = s[3], *w = s[4];
  const int flags = (int)n->i[1];
  tmps k = {.n = 0};
  ts_tensor **gc = tmp(&k), **gv = tmp(&k), **gr = tmp(&k), **r = tmp(&k), **rv = tmp(&k), **fr = tmp(&k);
  /* the loss was computed in x3's dtype: its gradient too, as rows (N, S) or one value */
  TRY(as_rows(g, x3->dtype, flags & TS_NLL_REDUCE ? 0 : 2, t2->sizes, gc, gv, gr));
  TRY(ts_tensor_empty(3, x3->sizes, x3->dtype, x3->device, r));
  {
    ts_tensor *in[6];
    int nin = 0;
    in[nin++] = *gr, in[nin++] = x3, in[nin++] = t2, in[nin++] = stats;
    if (flags & TS_NLL_LOGITS) in[nin++] = lse;
    if (flags & TS_NLL_WEIGHT) in[nin++] = w;
    ts_call c = {.op = TS_OP_NLL_LOSS_BACKWARD, .nin = nin, .in = in, .out = {*r}, .i = {n->i[0], flags},
                 .f = {n->f[0]}};
    TRY(ts_dispatch(&c));
  }
  /* back to the input's shape and dtype (the edge's) */
  TRY(ts_view(*r, n->next[0].ndim, n->next[0].sizes, rv));
  TRY(ts_to_dtype(*rv, n->next[0].dtype, fr));
  grads[0] = take(fr);
done:
  tmps_free(&k);
  return st;
}

ts_status ts_nll_loss(ts_tensor *x, ts_tensor *target, ts_tensor *weight, int64_t ignore_index, ts_reduction reduction,
                      double label_smoothing, bool logits, ts_tensor **out) {
  const char *fn = logits ? "cross_entropy" : "nll_loss";
  if (weight && weight->requires_grad && ts_grad_enabled())
    return ts_fail(TS_ERR_ARG, "%s: the derivative for 'weight' is not implemented (detach it: weight:detach())", fn);
  bool track = ts_ag_needed(1, &x);
  nll_saved sv = {NULL};
  TS_AG_OFF(prev);
  ts_status st = nll_forward(fn, x, target, weight, ignore_index, reduction, label_smoothing, logits, out,
                             track ? &sv : NULL);
  TS_AG_RESTORE(prev);
  if (!st && track) {
    ts_node *n;
    st = ts_ag_record("NllLossBackward0", nll_backward, 1, &x, *out, &n);
    if (!st) {
      n->i[0] = ignore_index;
      n->i[1] = nll_flags(logits, weight, reduction);
      n->f[0] = label_smoothing;
      ts_ag_save(n, 0, sv.x3);
      ts_ag_save(n, 1, sv.t2);
      ts_ag_save(n, 2, sv.stats);
      if (sv.lse) ts_ag_save(n, 3, sv.lse);
      if (sv.w) ts_ag_save(n, 4, sv.w);
    }
  }
  ts_tensor *held[5] = {sv.x3, sv.t2, sv.w, sv.lse, sv.stats};
  for (int j = 0; j < 5; j++)
    if (held[j]) ts_tensor_release(held[j]);
  if (st && *out) ts_tensor_release(*out), *out = NULL;
  return st;
}
