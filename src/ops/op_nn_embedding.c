/* The op layer for embedding (contracts in op_nn.h): a gather of rows
 * forward, a scatter-add backward, every index checked against the table:
 * on the CPU before the kernel runs, on a device by the kernel itself, which
 * reports a bad one through the device-assert record (GATHER's i[2],
 * SCATTER's i[3]), so a training step's lookups never wait for the host. */
#include "op_loss.h"
#include "op_nn_common.h"

static ts_status embedding_range_error(const char *fn, long long index, int64_t V) {
  return ts_fail(TS_ERR_INDEX, "%s: index %lld is out of range for a weight of %lld rows (expected 0 <= index < %lld)",
                 fn, index, (long long)V, (long long)V);
}

/* The flat index (n) seen as (n, D), stride 0 along D: the kernels' geometry
 * for moving whole rows of D elements. */
static ts_tensor rows_of(const ts_tensor *flat, int64_t D) {
  ts_tensor iv = *flat;
  iv.ndim = 2;
  iv.sizes[1] = D, iv.strides[1] = 0;
  return iv;
}

/* Indices as a flat contiguous int64 tensor (n), each checked against V on the CPU
 * (elsewhere the gather/scatter kernels bound-check them). */
static ts_status embedding_index(const char *fn, ts_tensor *idx, int64_t V, ts_tensor **flat) {
  if (idx->dtype != TS_INT64 && idx->dtype != TS_INT32)
    return ts_fail(TS_ERR_DTYPE, "%s: expected indices of dtype int64 or int32, got %s (convert with idx:long())", fn,
                   ts_dtype_name(idx->dtype));
  int64_t n = ts_numel(idx);
  tmps k = {.n = 0};
  ts_tensor **i64 = tmp(&k), **f = tmp(&k);
  ts_status st;
  TRY(ts_to_dtype(idx, TS_INT64, i64));
  TRY(ts_reshape(*i64, 1, &n, f));
  if ((*f)->device.type == TS_CPU) {
    const int64_t *p = ts_data(*f), s = (*f)->strides[0];
    for (int64_t i = 0; i < n; i++)
      if (p[i * s] < 0 || p[i * s] >= V) {
        st = embedding_range_error(fn, (long long)p[i * s], V);
        goto done;
      }
  }
  *flat = take(f);
done:
  tmps_free(&k);
  return st;
}

static ts_status embedding_impl(ts_tensor *w, ts_tensor *idx, ts_tensor **out) {
  const char *fn = "embedding";
  if (w->ndim != 2)
    return ts_fail(TS_ERR_SHAPE, "%s: expected a 2-D weight (num_embeddings, embedding_dim), got shape %s", fn,
                   shape_of(w).s);
  if (idx->ndim + 1 > TS_MAX_DIMS)
    return ts_fail(TS_ERR_SHAPE, "%s: indices have too many dims (%d)", fn, idx->ndim);
  ts_tensor *ts[2] = {w, idx};
  ts_status st = ts_check_same_device(fn, 2, ts);
  if (st) return st;
  tmps k = {.n = 0};
  ts_tensor **f = tmp(&k), **r = tmp(&k);
  TRY(embedding_index(fn, idx, w->sizes[0], f));
  const int64_t n = (*f)->sizes[0], D = w->sizes[1];
  TRY(ts_tensor_empty(2, (int64_t[]){n, D}, w->dtype, w->device, r));
  if (n * D > 0) { /* out[j] = w[idx[j]]: GATHER along dim 0 */
    ts_tensor iv = rows_of(*f, D), *in[2] = {w, &iv};
    ts_call c = {.op = TS_OP_GATHER, .nin = 2, .in = in, .out = {*r}, .i = {0, 0, TS_LOSS_ERR_EMBEDDING_INDEX}};
    TRY(ts_dispatch(&c));
  }
  int64_t sizes[TS_MAX_DIMS];
  memcpy(sizes, idx->sizes, sizeof(int64_t) * (size_t)idx->ndim);
  sizes[idx->ndim] = w->sizes[1];
  TRY(ts_view(*r, idx->ndim + 1, sizes, out));
done:
  tmps_free(&k);
  return st;
}

ts_status ts_embedding_backward(ts_tensor *go, ts_tensor *idx, int64_t V, const int64_t *padding_idx, ts_tensor **out) {
  const char *fn = "embedding_backward";
  if (go->ndim != idx->ndim + 1 || memcmp(go->sizes, idx->sizes, sizeof(int64_t) * (size_t)idx->ndim))
    return ts_fail(TS_ERR_SHAPE, "%s: grad_output of shape %s does not match indices of shape %s (expected the "
                   "indices' shape plus the embedding dim)", fn, shape_of(go).s, shape_of(idx).s);
  ts_status st = check_float(fn, "grad_output", go);
  if (st) return st;
  if (V < 0) return ts_fail(TS_ERR_ARG, "%s: num_weights must be non-negative, got %lld", fn, (long long)V);
  int64_t pad = -1;
  if (padding_idx) {
    pad = *padding_idx < 0 ? *padding_idx + V : *padding_idx;
    if (pad < 0 || pad >= V)
      return ts_fail(TS_ERR_INDEX, "%s: padding_idx %lld must be within num_embeddings (%lld)", fn,
                     (long long)*padding_idx, (long long)V);
  }
  ts_tensor *ts[2] = {go, idx};
  if ((st = ts_check_same_device(fn, 2, ts))) return st;
  const int64_t D = go->sizes[go->ndim - 1], n = ts_numel(idx);
  tmps k = {.n = 0};
  ts_tensor **f = tmp(&k), **gc = tmp(&k), **g2 = tmp(&k), **r = tmp(&k), **row = tmp(&k);
  TRY(embedding_index(fn, idx, V, f));
  TRY(ts_to_dtype(go, compute_dtype(go->dtype), gc));
  TRY(ts_reshape(*gc, 2, (int64_t[]){n, D}, g2));
  TRY(ts_full(2, (int64_t[]){V, D}, 0, compute_dtype(go->dtype), go->device, r));
  if (n * D > 0) { /* r[idx[j]] += g[j]: SCATTER, adding, along dim 0 */
    ts_tensor iv = rows_of(*f, D), *in[2] = {&iv, *g2};
    ts_call c = {.op = TS_OP_SCATTER, .nin = 2, .in = in, .out = {*r},
                 .i = {0, 1, 0, TS_LOSS_ERR_EMBEDDING_BACKWARD_INDEX}};
    TRY(ts_dispatch(&c));
  }
  if (pad >= 0) {
    TRY(ts_select(*r, 0, pad, row));
    TRY(ts_fill_(*row, 0));
  }
  TRY(ts_to_dtype(*r, go->dtype, out));
done:
  tmps_free(&k);
  return st;
}

/* ---- autograd: each op records one node that calls its backward (grad_nn.c) ---- */

ts_status ts_embedding_padded(ts_tensor *w, ts_tensor *idx, const int64_t *padding_idx, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = embedding_impl(w, idx, out);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &w)) st = ts_ag_embedding(w, idx, padding_idx, *out);
  return st;
}

ts_status ts_embedding(ts_tensor *w, ts_tensor *idx, ts_tensor **out) { return ts_embedding_padded(w, idx, NULL, out); }
