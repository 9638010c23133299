/* The op layer of fused scaled dot-product attention (contract in
 * op_attention.h; kernels in ops_attention.def). Checks the operands, makes
 * q, k, v readable by the kernels, broadcasts the mask as a strided view (no copy), draws
 * the dropout counters and records one autograd node. The node saves q, k, v,
 * the output and the log-sum-exp of each query's scores: the backward
 * rebuilds each block of probabilities as exp(score - lse) instead of keeping
 * the (L, S) matrix. Operands keep their strides (kernel_view) and results
 * take their layout (empty_as), so attention over the heads of a projection
 * copies nothing. */
#include "autograd/grad.h"
#include "ops.h"
#include "op_nn_common.h" /* the temporaries helpers */

static const char *const FN = "scaled_dot_product_attention";

static ts_status check_operand(const char *what, const ts_tensor *t, const ts_tensor *q) {
  if (!t) return ts_fail(TS_ERR_ARG, "%s: %s is required", FN, what);
  if (t->ndim != 3 && t->ndim != 4)
    return ts_fail(TS_ERR_SHAPE, "%s: expected %s to be 3-D (batch, length, features) or 4-D (batch, heads, length, "
                   "features), got %s", FN, what, shape_of(t).s);
  if (t->ndim != q->ndim)
    return ts_fail(TS_ERR_SHAPE, "%s: expected %s %s to have as many dims as query %s", FN, what, shape_of(t).s,
                   shape_of(q).s);
  if (t->dtype != TS_FLOAT32 && t->dtype != TS_FLOAT64)
    return ts_fail(TS_ERR_DTYPE, "%s: expected %s of dtype float32 or float64, got %s", FN, what,
                   ts_dtype_name(t->dtype));
  if (t->dtype != q->dtype)
    return ts_fail(TS_ERR_DTYPE, "%s: expected %s of dtype %s like query, got %s", FN, what, ts_dtype_name(q->dtype),
                   ts_dtype_name(t->dtype));
  if (!ts_device_eq(t->device, q->device)) return ts_fail_devices(FN, q->device, t->device);
  return TS_OK;
}

static ts_status check_all(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask, double p, double scale) {
  ts_status st;
  if (!q) return ts_fail(TS_ERR_ARG, "%s: query is required", FN);
  if ((st = check_operand("query", q, q)) || (st = check_operand("key", k, q)) || (st = check_operand("value", v, q)))
    return st;
  const int nb = q->ndim - 2; /* batch dims */
  for (int d = 0; d < nb; d++)
    if (k->sizes[d] != q->sizes[d] || v->sizes[d] != q->sizes[d])
      return ts_fail(TS_ERR_SHAPE, "%s: query %s, key %s and value %s must have the same batch size", FN,
                     shape_of(q).s, shape_of(k).s, shape_of(v).s);
  if (k->sizes[nb + 1] != q->sizes[nb + 1])
    return ts_fail(TS_ERR_SHAPE, "%s: query %s and key %s must have the same embedding size", FN, shape_of(q).s,
                   shape_of(k).s);
  if (v->sizes[nb] != k->sizes[nb])
    return ts_fail(TS_ERR_SHAPE, "%s: key %s and value %s must have the same length", FN, shape_of(k).s,
                   shape_of(v).s);
  if (mask) {
    if (mask->dtype != q->dtype)
      return ts_fail(TS_ERR_DTYPE, "%s: expected attn_mask of dtype %s like query (or bool), got %s", FN,
                     ts_dtype_name(q->dtype), ts_dtype_name(mask->dtype));
    if (!ts_device_eq(mask->device, q->device)) return ts_fail_devices(FN, q->device, mask->device);
  }
  if (!(p >= 0 && p <= 1)) return ts_fail(TS_ERR_ARG, "%s: dropout_p must be in [0, 1], got %g", FN, p);
  if (!isfinite(scale)) return ts_fail(TS_ERR_ARG, "%s: scale must be finite, got %g", FN, scale);
  return TS_OK;
}

static ts_status fill(ts_tensor *t, double value) {
  if (ts_numel(t) == 0) return TS_OK;
  ts_call c = {.op = TS_OP_FILL, .nin = 0, .out = {t}, .f = {value}};
  return ts_dispatch(&c);
}

/* the mask as a (B, H, L, S) view, broadcast with stride 0; ndim: the operands' (3: B is 1, not named) */
static ts_status mask_view(ts_tensor *mask, const int64_t want[4], int ndim, ts_tensor **out) {
  if (mask->ndim <= ndim && ts_broadcast_to(mask, 4, want, out) == TS_OK) return TS_OK;
  char w[160];
  ts_shape_str(ndim, want + 4 - ndim, w, sizeof w);
  return ts_fail(TS_ERR_SHAPE, "%s: attn_mask %s is not broadcastable to %s", FN, shape_of(mask).s, w);
}

/* An operand as the kernels read it, (B, H, rows, features) with a unit feature
 * stride and rows that do not overlap (a BLAS leading dimension): 3-D operands
 * get a leading batch of 1 (their batch becomes the heads), and only operands
 * that break the rule are copied. So the heads of a (B, T, 3, H, D)
 * projection, transposed to (B, H, T, D), are read in place. */
static ts_status kernel_view(ts_tensor *t, ts_tensor **out) {
  ts_tensor *t4 = t;
  if (t->ndim == 3) {
    ts_status st = ts_unsqueeze(t, 0, &t4);
    if (st) return st;
  } else {
    ts_tensor_retain(t);
  }
  const int64_t w = t4->sizes[3];
  if ((w <= 1 || t4->strides[3] == 1) && t4->strides[2] >= (w > 1 ? w : 1)) {
    *out = t4;
    return TS_OK;
  }
  ts_status st = ts_contiguous(t4, out);
  ts_tensor_release(t4);
  return st;
}

/* a new (B, H, rows, features) tensor laid out as like is: (B, rows, H, features)
 * in memory when like's heads are closer than its rows (the layout a projection
 * of (B, T, H, D) features gives, which the next projection reads without a
 * copy), else contiguous */
static ts_status empty_as(const ts_tensor *like, int64_t features, ts_tensor **out) {
  const int64_t B = like->sizes[0], H = like->sizes[1], R = like->sizes[2];
  if (!(H > 1 && R > 1 && like->strides[1] < like->strides[2])) {
    const int64_t sz[4] = {B, H, R, features};
    return ts_tensor_empty(4, sz, like->dtype, like->device, out);
  }
  const int64_t sz[4] = {B, R, H, features}, perm[4] = {0, 2, 1, 3};
  ts_tensor *t = NULL;
  ts_status st = ts_tensor_empty(4, sz, like->dtype, like->device, &t);
  if (st) return st;
  st = ts_permute(t, 4, perm, out);
  ts_tensor_release(t);
  return st;
}

/* a 4-D result back in the rank of the op's operands (3-D: the leading 1 dropped) */
static ts_status in_rank(ts_tensor **t, int ndim) {
  if (ndim == 4) return TS_OK;
  const int64_t d0 = 0;
  ts_tensor *r = NULL;
  ts_status st = ts_squeeze(*t, &d0, &r);
  if (st) return st;
  ts_tensor_release(*t);
  *t = r;
  return TS_OK;
}

static ts_status record(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *const saved[6], const int64_t ip[3],
                        double p, double scale, ts_tensor *o) {
  ts_tensor *in[3] = {q, k, v};
  ts_node *n;
  ts_status st = ts_ag_record_kind(TS_GRAD_SDPA, 3, in, o, &n);
  if (st) return st;
  n->i[1] = ip[0], n->i[2] = ip[1], n->i[3] = ip[2];
  n->f[0] = p, n->f[1] = scale;
  for (int s = 0; s < 6; s++)
    if (saved[s]) ts_ag_save(n, s, saved[s]);
  return TS_OK;
}

ts_status ts_sdpa(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask, double dropout_p, bool causal,
                  double scale, ts_tensor **out) {
  ts_status st = check_all(q, k, v, mask, dropout_p, scale);
  if (st) return st;
  if (dropout_p > 0 && q->device.type != TS_CPU && ts_rng_graph_capturing()) /* see ts_rng_graph_capturing */
    return ts_fail(TS_ERR_ARG, "scaled_dot_product_attention: dropout_p %g inside a CUDA graph capture is not "
                   "supported yet (its kernels take the generator's offset by value, so every replay would repeat "
                   "the capture's mask): capture it with dropout_p = 0, or use nn.functional.dropout", dropout_p);
  tmps t = {.n = 0};
  ts_tensor **qc = tmp(&t), **kc = tmp(&t), **vc = tmp(&t), **mv = tmp(&t), **o4 = tmp(&t), **lse = tmp(&t);
  ts_tensor **o = tmp(&t);
  TS_AG_OFF(prev);
  TRY(kernel_view(q, qc));
  TRY(kernel_view(k, kc));
  TRY(kernel_view(v, vc));
  const int64_t B = (*qc)->sizes[0], H = (*qc)->sizes[1], L = (*qc)->sizes[2], S = (*kc)->sizes[2];
  const int64_t Ev = (*vc)->sizes[3];
  {
    const int64_t ms[4] = {B, H, L, S};
    if (mask) TRY(mask_view(mask, ms, q->ndim, mv));
  }
  TRY(empty_as(*qc, Ev, o4));
  {
    const int64_t ls[3] = {B, H, L};
    TRY(ts_tensor_empty(3, ls, q->dtype, q->device, lse));
  }
  uint64_t seed = 0, offset = 0;
  if (dropout_p > 0 && B * H * L > 0)
    ts_rng_reserve((uint64_t)(B * H * L * ts_sdpa_row_counters(S)), &seed, &offset);
  const int64_t ip[3] = {(int64_t)seed, (int64_t)offset, causal};
  if (S == 0) { /* no keys: softmax over nothing times nothing is 0, as the math gives */
    TRY(fill(*o4, 0));
    TRY(fill(*lse, -INFINITY));
  } else if (B * H * L > 0) {
    ts_tensor *in[4] = {*qc, *kc, *vc, *mv};
    ts_call c = {.op = TS_OP_SDPA_FORWARD, .nin = mask ? 4 : 3, .in = in, .out = {*o4, *lse},
                 .i = {ip[0], ip[1], ip[2]}, .f = {dropout_p, scale}};
    TRY(ts_dispatch(&c));
  }
  ts_tensor_retain(*o4);
  *o = *o4;
  TRY(in_rank(o, q->ndim));
  TS_AG_RESTORE(prev);
  {
    ts_tensor *in[3] = {q, k, v};
    ts_tensor *saved[6] = {*qc, *kc, *vc, *o4, *lse, *mv};
    if (ts_ag_needed(3, in)) TRY(record(q, k, v, saved, ip, dropout_p, scale, *o));
  }
  *out = take(o);
done:
  TS_AG_RESTORE(prev);
  tmps_free(&t);
  return st;
}

/* the node's backward (grad_kinds.def) */
ts_status ts_sdpa_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *s[6] = {NULL};
  ts_status st = TS_OK;
  for (int k = 0; k < 5 && !st; k++) st = ts_ag_saved(n, k, &s[k]);
  if (!st && n->saved[5]) st = ts_ag_saved(n, 5, &s[5]);
  if (st) return st;
  ts_tensor *q = s[0], *k = s[1], *v = s[2], *o = s[3], *lse = s[4], *mask = s[5];
  tmps t = {.n = 0};
  ts_tensor **gc = tmp(&t), **dq = tmp(&t), **dk = tmp(&t), **dv = tmp(&t);
  TS_AG_OFF(prev);
  TRY(kernel_view(g, gc)); /* the gradient as the output's view gave it: read in place */
  TRY(empty_as(q, q->sizes[3], dq));
  TRY(empty_as(k, k->sizes[3], dk));
  TRY(empty_as(v, v->sizes[3], dv));
  if (ts_numel(*dq) == 0 || k->sizes[2] == 0) { /* nothing attended: the gradients are zero */
    TRY(fill(*dq, 0));
    TRY(fill(*dk, 0));
    TRY(fill(*dv, 0));
  } else {
    ts_tensor *in[7] = {*gc, q, k, v, o, lse, mask};
    ts_call c = {.op = TS_OP_SDPA_BACKWARD, .nin = mask ? 7 : 6, .in = in, .out = {*dq, *dk, *dv},
                 .i = {n->i[1], n->i[2], n->i[3]}, .f = {n->f[0], n->f[1]}};
    TRY(ts_dispatch(&c));
  }
  for (int i = 0; i < 3; i++) {
    ts_tensor **d = i == 0 ? dq : i == 1 ? dk : dv;
    TRY(in_rank(d, g->ndim));
    if (n->next[i].fn || n->next[i].leaf) grads[i] = take(d);
  }
done:
  TS_AG_RESTORE(prev);
  tmps_free(&t);
  return st;
}
