/* The op layer of fused scaled dot-product attention (contract in
 * op_attention.h; kernels in ops_attention.def). Checks the operands, makes
 * q, k, v contiguous, broadcasts the mask as a strided view (no copy), draws
 * the dropout counters and records one autograd node. The node saves q, k, v,
 * the output and the log-sum-exp of each query's scores: the backward
 * rebuilds each block of probabilities as exp(score - lse) instead of keeping
 * the (L, S) matrix. */
#include "grad.h"
#include "ops.h"
#include "op_nn_common.h" /* the temporaries helpers */

static const char *const FN = "scaled_dot_product_attention";

static ts_status check_operand(const char *what, const ts_tensor *t, const ts_tensor *q) {
  if (!t) return ts_fail(TS_ERR_ARG, "%s: %s is required", FN, what);
  if (t->ndim != 3)
    return ts_fail(TS_ERR_SHAPE, "%s: expected %s to be 3-D (batch, length, features), got %s", FN, what,
                   shape_of(t).s);
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
  if (k->sizes[0] != q->sizes[0] || v->sizes[0] != q->sizes[0])
    return ts_fail(TS_ERR_SHAPE, "%s: query %s, key %s and value %s must have the same batch size", FN,
                   shape_of(q).s, shape_of(k).s, shape_of(v).s);
  if (k->sizes[2] != q->sizes[2])
    return ts_fail(TS_ERR_SHAPE, "%s: query %s and key %s must have the same embedding size", FN, shape_of(q).s,
                   shape_of(k).s);
  if (v->sizes[1] != k->sizes[1])
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

/* the mask as a (B, L, S) view, broadcast with stride 0 */
static ts_status mask_view(ts_tensor *mask, const int64_t want[3], ts_tensor **out) {
  if (mask->ndim <= 3 && ts_broadcast_to(mask, 3, want, out) == TS_OK) return TS_OK;
  char w[160];
  ts_shape_str(3, want, w, sizeof w);
  return ts_fail(TS_ERR_SHAPE, "%s: attn_mask %s is not broadcastable to %s", FN, shape_of(mask).s, w);
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
  const int64_t B = q->sizes[0], L = q->sizes[1], S = k->sizes[1], Ev = v->sizes[2];
  tmps t = {.n = 0};
  ts_tensor **qc = tmp(&t), **kc = tmp(&t), **vc = tmp(&t), **mv = tmp(&t), **o = tmp(&t), **lse = tmp(&t);
  TS_AG_OFF(prev);
  {
    const int64_t ms[3] = {B, L, S};
    if (mask) TRY(mask_view(mask, ms, mv));
  }
  TRY(ts_contiguous(q, qc));
  TRY(ts_contiguous(k, kc));
  TRY(ts_contiguous(v, vc));
  {
    const int64_t os[3] = {B, L, Ev}, ls[2] = {B, L};
    TRY(ts_tensor_empty(3, os, q->dtype, q->device, o));
    TRY(ts_tensor_empty(2, ls, q->dtype, q->device, lse));
  }
  uint64_t seed = 0, offset = 0;
  if (dropout_p > 0 && B * L > 0) ts_rng_reserve((uint64_t)(B * L * ts_sdpa_row_counters(S)), &seed, &offset);
  const int64_t ip[3] = {(int64_t)seed, (int64_t)offset, causal};
  if (S == 0) { /* no keys: softmax over nothing times nothing is 0, as the math gives */
    TRY(fill(*o, 0));
    TRY(fill(*lse, -INFINITY));
  } else if (B * L > 0) {
    ts_tensor *in[4] = {*qc, *kc, *vc, *mv};
    ts_call c = {.op = TS_OP_SDPA_FORWARD, .nin = mask ? 4 : 3, .in = in, .out = {*o, *lse},
                 .i = {ip[0], ip[1], ip[2]}, .f = {dropout_p, scale}};
    TRY(ts_dispatch(&c));
  }
  TS_AG_RESTORE(prev);
  {
    ts_tensor *in[3] = {q, k, v};
    ts_tensor *saved[6] = {*qc, *kc, *vc, *o, *lse, *mv};
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
  ts_tensor **gc = tmp(&t), **prod = tmp(&t), **delta = tmp(&t), **dq = tmp(&t), **dk = tmp(&t), **dv = tmp(&t);
  TS_AG_OFF(prev);
  TRY(ts_contiguous(g, gc));
  TRY(ts_tensor_empty(q->ndim, q->sizes, q->dtype, q->device, dq));
  TRY(ts_tensor_empty(k->ndim, k->sizes, k->dtype, k->device, dk));
  TRY(ts_tensor_empty(v->ndim, v->sizes, v->dtype, v->device, dv));
  if (ts_numel(*dq) == 0 || k->sizes[1] == 0) { /* nothing attended: the gradients are zero */
    TRY(fill(*dq, 0));
    TRY(fill(*dk, 0));
    TRY(fill(*dv, 0));
  } else {
    /* delta_i = do_i . o_i, the softmax backward's row term (o = dropped p v) */
    const int64_t last = 2;
    TRY(ts_binary(TS_OP_MUL, *gc, o, prod));
    TRY(ts_sum(*prod, 1, &last, false, delta));
    ts_tensor *in[7] = {*gc, q, k, v, lse, *delta, mask};
    ts_call c = {.op = TS_OP_SDPA_BACKWARD, .nin = mask ? 7 : 6, .in = in, .out = {*dq, *dk, *dv},
                 .i = {n->i[1], n->i[2], n->i[3]}, .f = {n->f[0], n->f[1]}};
    TRY(ts_dispatch(&c));
  }
  for (int i = 0; i < 3; i++) {
    ts_tensor **d = i == 0 ? dq : i == 1 ? dk : dv;
    if (n->next[i].fn || n->next[i].leaf) grads[i] = take(d);
  }
done:
  TS_AG_RESTORE(prev);
  tmps_free(&t);
  return st;
}
