/* The op layer for pooling (contracts in op_nn.h): max, average, adaptive
 * average and adaptive max pooling have kernels of their own; the max pools'
 * backward is a scatter-add of the gradient at the saved indices. float16/bfloat16 are
 * computed in float32 and rounded once at the end. */
#include "op_nn_common.h"

typedef struct pool_geo {
  int64_t N, C, H, W, Ho, Wo;
  bool unbatched;
} pool_geo;

static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t o = floordiv(in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--; /* the last window must start inside the input or left padding */
  return o;
}

static ts_status pool_check(const char *fn, ts_tensor *x, const ts_pool2d_params *p, pool_geo *g) {
  if (x->ndim != 3 && x->ndim != 4)
    return ts_fail(TS_ERR_SHAPE, "%s: expected a 4-D input (N, C, H, W) or a 3-D unbatched one (C, H, W), got shape %s",
                   fn, shape_of(x).s);
  ts_status st = check_float(fn, "input", x);
  if (st) return st;
  for (int d = 0; d < 2; d++) {
    if (p->kernel[d] < 1 || p->kernel[d] > INT32_MAX)
      return ts_fail(TS_ERR_ARG, "%s: kernel_size must be positive, got %s", fn, pair_str(p->kernel).s);
    if (p->stride[d] < 1 || p->stride[d] > INT32_MAX)
      return ts_fail(TS_ERR_ARG, "%s: stride must be positive, got %s", fn, pair_str(p->stride).s);
    if (p->dilation[d] < 1 || p->dilation[d] > INT32_MAX)
      return ts_fail(TS_ERR_ARG, "%s: dilation must be positive, got %s", fn, pair_str(p->dilation).s);
    if (p->padding[d] < 0)
      return ts_fail(TS_ERR_ARG, "%s: padding must be non-negative, got %s", fn, pair_str(p->padding).s);
    if (p->padding[d] > p->kernel[d] / 2)
      return ts_fail(TS_ERR_ARG, "%s: padding should be at most half of the kernel size, but got padding %s and "
                     "kernel_size %s", fn, pair_str(p->padding).s, pair_str(p->kernel).s);
  }
  g->unbatched = x->ndim == 3;
  int o = g->unbatched ? 0 : 1; /* the channel dim */
  g->N = g->unbatched ? 1 : x->sizes[0];
  g->C = x->sizes[o], g->H = x->sizes[o + 1], g->W = x->sizes[o + 2];
  if (g->C == 0 || g->H == 0 || g->W == 0)
    return ts_fail(TS_ERR_SHAPE, "%s: expected non-empty channel and spatial dims, got shape %s", fn, shape_of(x).s);
  g->Ho = pool_out(g->H, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], p->ceil_mode);
  g->Wo = pool_out(g->W, p->kernel[1], p->stride[1], p->padding[1], p->dilation[1], p->ceil_mode);
  if (g->Ho < 1 || g->Wo < 1)
    return ts_fail(TS_ERR_SHAPE, "%s: given input size (%lld, %lld, %lld), the calculated output size (%lld, %lld, %lld) "
                   "is too small", fn, (long long)g->C, (long long)g->H, (long long)g->W, (long long)g->C,
                   (long long)g->Ho, (long long)g->Wo);
  return TS_OK;
}

static ts_status check_grad_shape(const char *fn, const ts_tensor *go, const ts_tensor *x, int64_t Ho, int64_t Wo) {
  bool ok = go->ndim == x->ndim && memcmp(go->sizes, x->sizes, sizeof(int64_t) * (size_t)(x->ndim - 2)) == 0 &&
            go->sizes[x->ndim - 2] == Ho && go->sizes[x->ndim - 1] == Wo;
  if (ok) return check_float(fn, "grad_output", go);
  int64_t e[TS_MAX_DIMS];
  memcpy(e, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
  e[x->ndim - 2] = Ho, e[x->ndim - 1] = Wo;
  char es[160];
  ts_shape_str(x->ndim, e, es, sizeof es);
  return ts_fail(TS_ERR_SHAPE, "%s: grad_output has shape %s but the output has shape %s", fn, shape_of(go).s, es);
}

/* The shared shape of the max pools: x as 4-D in its compute dtype, fresh (N, C, oh, ow)
 * values and int64 indices from kernel call c, then x's dtype and rank again. */
static ts_status run_max_pool(ts_call c, ts_tensor *x, const pool_geo *g, int64_t oh, int64_t ow, ts_tensor **out,
                              ts_tensor **indices) {
  ts_status st;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x4 = tmp(&k), **r = tmp(&k), **ri = tmp(&k), **fr = tmp(&k), **fi = tmp(&k);
  int64_t os[4] = {g->N, g->C, oh, ow};
  TRY(to_compute(x, xc));
  TRY(lift4(*xc, x4));
  TRY(ts_tensor_empty(4, os, compute_dtype(x->dtype), x->device, r));
  TRY(ts_tensor_empty(4, os, TS_INT64, x->device, ri));
  if (g->N * g->C * oh * ow > 0) {
    c.nin = 1, c.in = x4, c.out[0] = *r, c.out[1] = *ri;
    TRY(ts_dispatch(&c));
  }
  TRY(finish(*r, x->dtype, g->unbatched, fr));
  TRY(finish(*ri, TS_INT64, g->unbatched, fi));
  *out = take(fr);
  *indices = take(fi);
done:
  tmps_free(&k);
  return st;
}

static ts_status max_pool2d_impl(ts_tensor *x, const ts_pool2d_params *p, ts_tensor **out, ts_tensor **indices) {
  pool_geo g;
  ts_status st = pool_check("max_pool2d", x, p, &g);
  if (st) return st;
  ts_call c = {.op = TS_OP_MAX_POOL2D,
               .i = {ts_pack2(p->kernel[0], p->kernel[1]), ts_pack2(p->stride[0], p->stride[1]),
                     ts_pack2(p->padding[0], p->padding[1]), ts_pack2(p->dilation[0], p->dilation[1])}};
  return run_max_pool(c, x, &g, g.Ho, g.Wo, out, indices);
}

ts_status ts_max_pool2d_backward(ts_tensor *grad_out, ts_tensor *indices, ts_tensor *x, ts_tensor **grad_input) {
  const char *fn = "max_pool2d_backward";
  if (x->ndim != 3 && x->ndim != 4)
    return ts_fail(TS_ERR_SHAPE, "%s: expected a 4-D input (N, C, H, W) or a 3-D unbatched one (C, H, W), got shape %s",
                   fn, shape_of(x).s);
  ts_tensor *ts[3] = {grad_out, indices, x};
  ts_status st = ts_check_same_device(fn, 3, ts);
  if (st) return st;
  if (indices->dtype != TS_INT64)
    return ts_fail(TS_ERR_DTYPE, "%s: expected int64 indices, got %s", fn, ts_dtype_name(indices->dtype));
  if (indices->ndim != grad_out->ndim || memcmp(indices->sizes, grad_out->sizes, sizeof(int64_t) * (size_t)grad_out->ndim))
    return ts_fail(TS_ERR_SHAPE, "%s: indices of shape %s do not match grad_output of shape %s", fn,
                   shape_of(indices).s, shape_of(grad_out).s);
  int nd = x->ndim;
  if ((st = check_grad_shape(fn, grad_out, x, grad_out->ndim == nd ? grad_out->sizes[nd - 2] : 0,
                             grad_out->ndim == nd ? grad_out->sizes[nd - 1] : 0)))
    return st;
  /* planes (P) of H*W pixels: grad_input[p, idx[p, l]] += grad_out[p, l] */
  int64_t HW = x->sizes[nd - 2] * x->sizes[nd - 1], L = grad_out->sizes[nd - 2] * grad_out->sizes[nd - 1];
  int64_t P = 1;
  for (int d = 0; d < nd - 2; d++) P *= x->sizes[d];
  tmps k = {.n = 0};
  ts_tensor **gc = tmp(&k), **g2 = tmp(&k), **i2 = tmp(&k), **r = tmp(&k), **rv = tmp(&k);
  TRY(ts_to_dtype(grad_out, compute_dtype(x->dtype), gc)); /* the kernel reads it as the output's type */
  TRY(ts_contiguous(*gc, g2));
  TRY(ts_contiguous(indices, i2));
  TRY(ts_tensor_empty(2, (int64_t[]){P, HW}, compute_dtype(x->dtype), x->device, r));
  {
    ts_tensor *in[2] = {*g2, *i2};
    ts_call c = {.op = TS_OP_MAX_POOL2D_BACKWARD, .nin = 2, .in = in, .out = {*r}, .i = {P, L, HW}};
    TRY(ts_dispatch(&c));
  }
  TRY(ts_view(*r, nd, x->sizes, rv));
  TRY(ts_to_dtype(*rv, x->dtype, grad_input));
done:
  tmps_free(&k);
  return st;
}

static ts_status avg_check(const char *fn, ts_tensor *x, const ts_pool2d_params *p, pool_geo *g) {
  if (p->dilation[0] != 1 || p->dilation[1] != 1)
    return ts_fail(TS_ERR_ARG, "%s: dilation is not supported (got %s)", fn, pair_str(p->dilation).s);
  return pool_check(fn, x, p, g);
}

static void avg_params(const ts_pool2d_params *p, int64_t *i) {
  i[0] = ts_pack2(p->kernel[0], p->kernel[1]);
  i[1] = ts_pack2(p->stride[0], p->stride[1]);
  i[2] = ts_pack2(p->padding[0], p->padding[1]);
  i[3] = p->count_include_pad;
}

/* The shared shape of the average pools, forward and backward: src (the input
 * or grad_out) as 4-D in x's compute dtype, a fresh (N, C, h, w) output, one
 * kernel (with p's parameters when given), then x's dtype and rank again. */
static ts_status run_pool(ts_op op, ts_tensor *src, ts_tensor *x, const pool_geo *g, int64_t h, int64_t w,
                          const ts_pool2d_params *p, ts_tensor **out) {
  ts_status st;
  tmps k = {.n = 0};
  ts_tensor **sc = tmp(&k), **s4 = tmp(&k), **r = tmp(&k);
  TRY(ts_to_dtype(src, compute_dtype(x->dtype), sc));
  TRY(lift4(*sc, s4));
  TRY(ts_tensor_empty(4, (int64_t[]){g->N, g->C, h, w}, compute_dtype(x->dtype), x->device, r));
  if (g->N * g->C * h * w > 0) {
    ts_call c = {.op = op, .nin = 1, .in = s4, .out = {*r}};
    if (p) avg_params(p, c.i);
    TRY(ts_dispatch(&c));
  }
  TRY(finish(*r, x->dtype, g->unbatched, out));
done:
  tmps_free(&k);
  return st;
}

static ts_status avg_pool2d_impl(ts_tensor *x, const ts_pool2d_params *p, ts_tensor **out) {
  pool_geo g;
  ts_status st = avg_check("avg_pool2d", x, p, &g);
  return st ? st : run_pool(TS_OP_AVG_POOL2D, x, x, &g, g.Ho, g.Wo, p, out);
}

ts_status ts_avg_pool2d_backward(ts_tensor *grad_out, ts_tensor *x, const ts_pool2d_params *p, ts_tensor **grad_input) {
  pool_geo g;
  ts_status st = avg_check("avg_pool2d_backward", x, p, &g);
  if (st || (st = check_grad_shape("avg_pool2d_backward", grad_out, x, g.Ho, g.Wo))) return st;
  ts_tensor *ts[2] = {grad_out, x};
  if ((st = ts_check_same_device("avg_pool2d_backward", 2, ts))) return st;
  return run_pool(TS_OP_AVG_POOL2D_BACKWARD, grad_out, x, &g, g.H, g.W, p, grad_input);
}

static ts_status adaptive_check(const char *fn, ts_tensor *x, int64_t oh, int64_t ow, pool_geo *g) {
  if (x->ndim != 3 && x->ndim != 4)
    return ts_fail(TS_ERR_SHAPE, "%s: expected a 4-D input (N, C, H, W) or a 3-D unbatched one (C, H, W), got shape %s",
                   fn, shape_of(x).s);
  ts_status st = check_float(fn, "input", x);
  if (st) return st;
  if (oh < 0 || ow < 0)
    return ts_fail(TS_ERR_ARG, "%s: output_size must be non-negative, got (%lld, %lld)", fn, (long long)oh,
                   (long long)ow);
  g->unbatched = x->ndim == 3;
  int o = g->unbatched ? 0 : 1; /* the channel dim */
  g->N = g->unbatched ? 1 : x->sizes[0];
  g->C = x->sizes[o], g->H = x->sizes[o + 1], g->W = x->sizes[o + 2];
  if (g->H == 0 || g->W == 0)
    return ts_fail(TS_ERR_SHAPE, "%s: expected non-empty spatial dims, got shape %s", fn, shape_of(x).s);
  g->Ho = oh, g->Wo = ow;
  return TS_OK;
}

static ts_status adaptive_avg_pool2d_impl(ts_tensor *x, int64_t oh, int64_t ow, ts_tensor **out) {
  pool_geo g;
  ts_status st = adaptive_check("adaptive_avg_pool2d", x, oh, ow, &g);
  return st ? st : run_pool(TS_OP_ADAPTIVE_AVG_POOL2D, x, x, &g, oh, ow, NULL, out);
}

ts_status ts_adaptive_avg_pool2d_backward(ts_tensor *grad_out, ts_tensor *x, ts_tensor **grad_input) {
  const char *fn = "adaptive_avg_pool2d_backward";
  pool_geo g;
  int nd = grad_out->ndim;
  ts_status st = adaptive_check(fn, x, nd >= 2 ? grad_out->sizes[nd - 2] : 0, nd >= 2 ? grad_out->sizes[nd - 1] : 0, &g);
  if (st || (st = check_grad_shape(fn, grad_out, x, g.Ho, g.Wo))) return st;
  ts_tensor *ts[2] = {grad_out, x};
  if ((st = ts_check_same_device(fn, 2, ts))) return st;
  return run_pool(TS_OP_ADAPTIVE_AVG_POOL2D_BACKWARD, grad_out, x, &g, g.H, g.W, NULL, grad_input);
}

static ts_status adaptive_max_pool2d_impl(ts_tensor *x, int64_t oh, int64_t ow, ts_tensor **out, ts_tensor **indices) {
  pool_geo g;
  ts_status st = adaptive_check("adaptive_max_pool2d", x, oh, ow, &g);
  return st ? st : run_max_pool((ts_call){.op = TS_OP_ADAPTIVE_MAX_POOL2D}, x, &g, oh, ow, out, indices);
}

/* ---- autograd: each op records one node that calls its backward (grad_nn.c) ---- */

ts_status ts_max_pool2d(ts_tensor *x, const ts_pool2d_params *p, ts_tensor **out, ts_tensor **indices) {
  ts_tensor *ix = NULL; /* the backward needs the indices even when the caller does not */
  TS_AG_OFF(prev);
  ts_status st = max_pool2d_impl(x, p, out, &ix);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_max_pool2d(x, ix, *out);
  if (!st && indices) *indices = ix;
  else ts_tensor_release(ix);
  return st;
}

ts_status ts_avg_pool2d(ts_tensor *x, const ts_pool2d_params *p, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = avg_pool2d_impl(x, p, out);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_avg_pool2d(x, p, *out);
  return st;
}

ts_status ts_adaptive_avg_pool2d(ts_tensor *x, int64_t oh, int64_t ow, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = adaptive_avg_pool2d_impl(x, oh, ow, out);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_adaptive_avg_pool2d(x, *out);
  return st;
}

ts_status ts_adaptive_max_pool2d(ts_tensor *x, int64_t oh, int64_t ow, ts_tensor **out, ts_tensor **indices) {
  ts_tensor *ix = NULL; /* the backward needs the indices even when the caller does not */
  TS_AG_OFF(prev);
  ts_status st = adaptive_max_pool2d_impl(x, oh, ow, out, &ix);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_adaptive_max_pool2d(x, ix, *out);
  if (!st && indices) *indices = ix;
  else ts_tensor_release(ix);
  return st;
}
