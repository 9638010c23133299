/* The op layer for neural-network ops: convolution, pooling, batch and layer
 * normalisation, embedding, forward and backward (contracts in op_nn.h).
 *
 * Convolution is im2col + GEMM: IM2COL unrolls a chunk of samples into
 * cols (n, C, kh, kw, Ho, Wo), and one BMM per group multiplies the group's
 * weight (Og, K) by its rows of cols (K, L), L = Ho*Wo, writing straight into
 * the output (bias pre-filled, beta 1). Chunks bound cols to ~64 MB. The
 * backward uses the same layout, grad_out reordered to (O, n*L) per chunk:
 * grad_weight accumulates grad_out @ cols^T, grad_input is COL2IM of
 * W^T @ grad_out, one GEMM per group per chunk for each (a thin K, as in a
 * first layer, keeps per-sample GEMMs batched over the chunk's samples). Depthwise convolution
 * (one input channel per group, a one-channel first layer included) has direct kernels, forward and backward:
 * its GEMMs are too thin to pay.
 *
 * Pooling has kernels of its own; max-pool backward is a scatter-add of the
 * gradient at the saved indices. Normalisation and embedding are composed
 * from reductions, elementwise ops, index_select and scatter-add.
 * float16/bfloat16 are computed in float32 and rounded once at the end. */
#include "ops.h"
#include "autocast.h"
#include "grad.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers -------------------------------------------------------------- */

/* Temporaries released at the end of a function, whatever path it takes. */
typedef struct tmps {
  ts_tensor *t[40];
  int n;
} tmps;

static ts_tensor **tmp(tmps *k) {
  k->t[k->n] = NULL;
  return &k->t[k->n++];
}

static void tmps_free(tmps *k) {
  for (int i = 0; i < k->n; i++)
    if (k->t[i]) ts_tensor_release(k->t[i]);
}

static ts_tensor *take(ts_tensor **s) {
  ts_tensor *t = *s;
  *s = NULL;
  return t;
}

#define TRY(e)                          \
  do {                                  \
    if ((st = (e)) != TS_OK) goto done; \
  } while (0)

typedef struct shp {
  char s[160];
} shp;

static shp shape_of(const ts_tensor *t) {
  shp r;
  ts_shape_str(t->ndim, t->sizes, r.s, sizeof r.s);
  return r;
}

static shp pair_str(const int64_t *p) {
  shp r;
  snprintf(r.s, sizeof r.s, "(%lld, %lld)", (long long)p[0], (long long)p[1]);
  return r;
}

static ts_dtype compute_dtype(ts_dtype d) { return d == TS_FLOAT64 ? TS_FLOAT64 : TS_FLOAT32; }

static ts_status to_compute(ts_tensor *t, ts_tensor **out) { return ts_to_dtype(t, compute_dtype(t->dtype), out); }

static ts_status check_float(const char *fn, const char *what, const ts_tensor *t) {
  if (ts_dtype_is_float(t->dtype)) return TS_OK;
  return ts_fail(TS_ERR_DTYPE, "%s: expected a floating-point %s, got %s (convert it first, e.g. t:float())", fn, what,
                 ts_dtype_name(t->dtype));
}

/* A (C, H, W) input as (1, C, H, W); others retained as they are. */
static ts_status lift4(ts_tensor *x, ts_tensor **out) {
  if (x->ndim == 3) return ts_unsqueeze(x, 0, out);
  ts_tensor_retain(x);
  return *out = x, TS_OK;
}

/* r in x's dtype and, for an unbatched x, without its leading 1. */
static ts_status finish(ts_tensor *r, ts_dtype dt, bool unbatched, ts_tensor **out) {
  tmps k = {.n = 0};
  ts_tensor **a = tmp(&k);
  ts_status st;
  TRY(ts_to_dtype(r, dt, a));
  if (unbatched) {
    int64_t d0 = 0;
    TRY(ts_squeeze(*a, &d0, out));
  } else {
    *out = take(a);
  }
done:
  tmps_free(&k);
  return st;
}

static ts_status mul_s(ts_tensor *a, double v, ts_tensor **out) {
  ts_scalar_box b;
  return ts_binary(TS_OP_MUL, a, ts_scalar_wrap_double(&b, v), out);
}

static ts_status add_s(ts_tensor *a, double v, ts_tensor **out) {
  ts_scalar_box b;
  return ts_binary(TS_OP_ADD, a, ts_scalar_wrap_double(&b, v), out);
}

/* A stack view of a contiguous-or-not base with an explicit 3-D geometry, for BMM. */
static ts_tensor view3(const ts_tensor *base, int64_t offset, int64_t s0, int64_t s1, int64_t s2, int64_t t0,
                       int64_t t1, int64_t t2) {
  ts_tensor v = *base;
  v.ndim = 3;
  v.offset = base->offset + offset;
  v.sizes[0] = s0, v.sizes[1] = s1, v.sizes[2] = s2;
  v.strides[0] = t0, v.strides[1] = t1, v.strides[2] = t2;
  return v;
}

/* A stack view of t's first `rows` entries along dim 0, starting at row r0. */
static ts_tensor rows_view(const ts_tensor *t, int64_t r0, int64_t rows) {
  ts_tensor v = *t;
  v.offset += r0 * t->strides[0];
  v.sizes[0] = rows;
  return v;
}

static ts_status bmm(ts_tensor *a, ts_tensor *b, ts_tensor *o, double beta) {
  ts_tensor *in[2] = {a, b};
  ts_call c = {.op = TS_OP_BMM, .nin = 2, .in = in, .out = {o}, .f = {1, beta}};
  return ts_dispatch(&c);
}

static int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* ---- convolution ------------------------------------------------------------- */

typedef struct conv_geo {
  int64_t N, C, H, W, O, kh, kw, G, Og, Cg, K, Ho, Wo, L;
  bool unbatched;
} conv_geo;

static ts_status conv_check(const char *fn, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv2d_params *p,
                            conv_geo *g) {
  ts_tensor *ts[3] = {x, w, b};
  ts_status st = ts_check_same_device(fn, b ? 3 : 2, ts);
  if (st) return st;
  if (x->ndim != 3 && x->ndim != 4)
    return ts_fail(TS_ERR_SHAPE, "%s: expected a 4-D input (N, C, H, W) or a 3-D unbatched one (C, H, W), got shape %s",
                   fn, shape_of(x).s);
  if (w->ndim != 4)
    return ts_fail(TS_ERR_SHAPE, "%s: expected a 4-D weight (out_channels, in_channels/groups, kh, kw), got shape %s",
                   fn, shape_of(w).s);
  if ((st = check_float(fn, "input", x))) return st;
  if (w->dtype != x->dtype)
    return ts_fail(TS_ERR_DTYPE, "%s: input (%s) and weight (%s) must have the same dtype; convert one, e.g. "
                   "weight:to(\"%s\")", fn, ts_dtype_name(x->dtype), ts_dtype_name(w->dtype), ts_dtype_name(x->dtype));
  for (int d = 0; d < 2; d++) {
    if (p->stride[d] < 1 || p->stride[d] > INT32_MAX)
      return ts_fail(TS_ERR_ARG, "%s: stride must be positive, got %s", fn, pair_str(p->stride).s);
    if (p->dilation[d] < 1 || p->dilation[d] > INT32_MAX)
      return ts_fail(TS_ERR_ARG, "%s: dilation must be positive, got %s", fn, pair_str(p->dilation).s);
    if (p->padding[d] < 0 || p->padding[d] > INT32_MAX)
      return ts_fail(TS_ERR_ARG, "%s: padding must be non-negative, got %s", fn, pair_str(p->padding).s);
  }
  if (p->groups < 1) return ts_fail(TS_ERR_ARG, "%s: groups must be positive, got %lld", fn, (long long)p->groups);
  g->unbatched = x->ndim == 3;
  int o = g->unbatched ? 0 : 1; /* the channel dim */
  g->N = g->unbatched ? 1 : x->sizes[0];
  g->C = x->sizes[o], g->H = x->sizes[o + 1], g->W = x->sizes[o + 2];
  g->O = w->sizes[0], g->kh = w->sizes[2], g->kw = w->sizes[3], g->G = p->groups;
  if (g->C % g->G)
    return ts_fail(TS_ERR_SHAPE, "%s: groups %lld does not divide the input's %lld channels", fn, (long long)g->G,
                   (long long)g->C);
  if (w->sizes[1] * g->G != g->C)
    return ts_fail(TS_ERR_SHAPE, "%s: input has %lld channels but weight expects %lld (groups %lld); weight %s, input %s",
                   fn, (long long)g->C, (long long)(w->sizes[1] * g->G), (long long)g->G, shape_of(w).s,
                   shape_of(x).s);
  if (g->O % g->G)
    return ts_fail(TS_ERR_SHAPE, "%s: groups %lld does not divide the weight's %lld output channels", fn,
                   (long long)g->G, (long long)g->O);
  if (b) {
    if (b->ndim != 1 || b->sizes[0] != g->O)
      return ts_fail(TS_ERR_SHAPE, "%s: expected a bias of shape (%lld,), got %s", fn, (long long)g->O, shape_of(b).s);
    if (b->dtype != x->dtype)
      return ts_fail(TS_ERR_DTYPE, "%s: input (%s) and bias (%s) must have the same dtype", fn,
                     ts_dtype_name(x->dtype), ts_dtype_name(b->dtype));
  }
  int64_t k[2] = {g->kh, g->kw}, in[2] = {g->H, g->W}, eff[2], pad[2], out[2];
  for (int d = 0; d < 2; d++) {
    eff[d] = p->dilation[d] * (k[d] - 1) + 1, pad[d] = in[d] + 2 * p->padding[d];
    if (k[d] > INT32_MAX) return ts_fail(TS_ERR_ARG, "%s: kernel size %s is too large", fn, pair_str(k).s);
  }
  if (eff[0] > pad[0] || eff[1] > pad[1])
    return ts_fail(TS_ERR_SHAPE, "%s: kernel size %s (dilated %s) can't be greater than the padded input size %s", fn,
                   pair_str(k).s, pair_str(eff).s, pair_str(pad).s);
  for (int d = 0; d < 2; d++) out[d] = (pad[d] - eff[d]) / p->stride[d] + 1;
  g->Ho = out[0], g->Wo = out[1], g->L = out[0] * out[1];
  g->Og = g->O / g->G, g->Cg = g->C / g->G, g->K = g->Cg * g->kh * g->kw;
  int64_t n;
  if (ts_shape_numel(4, (int64_t[]){g->N, g->C * g->kh * g->kw, g->Ho, g->Wo}, &n) ||
      ts_shape_numel(4, (int64_t[]){g->N, g->O, g->Ho, g->Wo}, &n))
    return ts_fail(TS_ERR_OVERFLOW, "%s: sizes overflow", fn);
  return TS_OK;
}

static void conv_params(const ts_conv2d_params *p, int64_t i[4]) {
  i[0] = ts_pack2(p->stride[0], p->stride[1]);
  i[1] = ts_pack2(p->padding[0], p->padding[1]);
  i[2] = ts_pack2(p->dilation[0], p->dilation[1]);
  i[3] = 0;
}

/* samples per im2col chunk: cols stays under ~16M elements */
static int64_t conv_chunk(const conv_geo *g) {
  int64_t per = g->C * g->kh * g->kw * g->L, nb = per > 0 ? ((int64_t)1 << 24) / per : g->N;
  if (nb < 1) nb = 1;
  return nb < g->N ? nb : g->N;
}

/* The (rows, C, kh, kw, Ho, Wo) view of a (C*kh*kw, nb, L) contiguous buffer: im2col
 * writes the whole chunk's columns as one (C*kh*kw, nb*L) matrix, so that each group
 * takes ONE GEMM per chunk instead of one small GEMM per sample. */
static ts_tensor cols_view(const ts_tensor *buf, const conv_geo *g, int64_t nb, int64_t rows) {
  ts_tensor v = *buf;
  const int64_t L = g->L;
  v.ndim = 6;
  int64_t sz[6] = {rows, g->C, g->kh, g->kw, g->Ho, g->Wo};
  int64_t st[6] = {L, g->kh * g->kw * nb * L, g->kw * nb * L, nb * L, g->Wo, 1};
  memcpy(v.sizes, sz, sizeof sz);
  memcpy(v.strides, st, sizeof st);
  return v;
}

/* The backend's library convolution (oneDNN, cuDNN: TS_KIND_LIBRARY) on contiguous copies of
 * a, b and the bias; *ran false when it has none, is switched off, or declines the case. */
static ts_status conv_library(ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor *bias, const ts_conv2d_params *p,
                              ts_tensor *out0, ts_tensor *out1, bool *ran) {
  *ran = false;
  if (!ts_library_available(op, out0->device.type)) return TS_OK; /* no contiguous copies for nothing */
  ts_tensor *in[3] = {NULL, NULL, NULL};
  ts_status st = ts_contiguous(a, &in[0]);
  if (!st) st = ts_contiguous(b, &in[1]);
  if (!st && bias) st = ts_contiguous(bias, &in[2]);
  if (!st) {
    ts_call c = {.op = op, .nin = bias ? 3 : 2, .in = in, .out = {out0, out1}};
    conv_params(p, c.i);
    c.i[3] = p->groups;
    st = ts_dispatch_library(&c, ran);
  }
  for (int i = 0; i < 3; i++)
    if (in[i]) ts_tensor_release(in[i]);
  return st;
}

static ts_status im2col(ts_tensor *x, ts_tensor *cols, const ts_conv2d_params *p) {
  ts_call c = {.op = TS_OP_IM2COL, .nin = 1, .in = &x, .out = {cols}};
  conv_params(p, c.i);
  return ts_dispatch(&c);
}

static ts_status conv_forward(const char *fn, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv2d_params *p,
                              ts_tensor **out) {
  conv_geo g;
  ts_status st = conv_check(fn, x, w, b, p, &g);
  if (st) return st;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x4 = tmp(&k), **wc = tmp(&k), **wcc = tmp(&k), **bc = tmp(&k), **r = tmp(&k),
            **cols = tmp(&k), **ob = tmp(&k);
  const ts_dtype cd = compute_dtype(x->dtype);
  TRY(to_compute(x, xc));
  TRY(lift4(*xc, x4));
  TRY(to_compute(w, wc));
  if (b) TRY(to_compute(b, bc));
  TRY(ts_tensor_empty(4, (int64_t[]){g.N, g.O, g.Ho, g.Wo}, cd, x->device, r));
  bool ran = false;
  if (g.N * g.O * g.L > 0) TRY(conv_library(TS_OP_CONV2D_FORWARD, *x4, *wc, b ? *bc : NULL, p, *r, NULL, &ran));
  if (g.N * g.O * g.L > 0 && !ran) {
    if (g.Cg == 1) { /* depthwise, or one input channel (a first layer): the direct kernel */
      ts_tensor *in[3] = {*x4, *wc, b ? *bc : NULL};
      ts_call c = {.op = TS_OP_CONV2D_DEPTHWISE, .nin = b ? 3 : 2, .in = in, .out = {*r}};
      conv_params(p, c.i);
      TRY(ts_dispatch(&c));
    } else {
      TRY(ts_contiguous(*wc, wcc));
      if (b) {
        ts_tensor bv = *bc[0];
        bv.ndim = 4;
        bv.sizes[0] = 1, bv.sizes[1] = g.O, bv.sizes[2] = bv.sizes[3] = 1;
        bv.strides[1] = bc[0]->strides[0], bv.strides[0] = bv.strides[2] = bv.strides[3] = 0;
        TRY(ts_copy_(*r, &bv));
      }
      const int64_t nb = conv_chunk(&g), CK = g.C * g.kh * g.kw;
      TRY(ts_tensor_empty(3, (int64_t[]){CK, nb, g.L}, cd, x->device, cols));
      TRY(ts_tensor_empty(3, (int64_t[]){g.O, nb, g.L}, cd, x->device, ob));
      for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
        int64_t rows = g.N - n0 < nb ? g.N - n0 : nb;
        ts_tensor xv = rows_view(*x4, n0, rows), cv = cols_view(*cols, &g, nb, rows);
        TRY(im2col(&xv, &cv, p));
        for (int64_t gi = 0; gi < g.G; gi++) { /* ob[g] (Og, rows*L) = W[g] (Og, K) @ cols[g] (K, rows*L) */
          ts_tensor A = view3(*wcc, gi * g.Og * g.K, 1, g.Og, g.K, 0, g.K, 1);
          ts_tensor B = view3(*cols, gi * g.K * nb * g.L, 1, g.K, rows * g.L, 0, nb * g.L, 1);
          ts_tensor O = view3(*ob, gi * g.Og * nb * g.L, 1, g.Og, rows * g.L, 0, nb * g.L, 1);
          TRY(bmm(&A, &B, &O, 0));
        }
        /* (O, rows, L) -> r[n0:n0+rows] (rows, O, L), onto the bias when there is one */
        ts_tensor src = view3(*ob, 0, rows, g.O, g.L, g.L, nb * g.L, 1);
        ts_tensor dst = view3(*r, n0 * g.O * g.L, rows, g.O, g.L, g.O * g.L, g.L, 1);
        if (b) TRY(ts_binary_out(TS_OP_ADD, &dst, &src, &dst));
        else TRY(ts_copy_(&dst, &src));
      }
    }
  }
  TRY(finish(*r, x->dtype, g.unbatched, out));
done:
  tmps_free(&k);
  return st;
}

static ts_status conv2d_impl(ts_tensor *x, ts_tensor *weight, ts_tensor *bias, const ts_conv2d_params *p, ts_tensor **out) {
  return conv_forward("conv2d", x, weight, bias, p, out);
}

static ts_status conv_backward(const char *fn, ts_tensor *go, ts_tensor *x, ts_tensor *w, const ts_conv2d_params *p,
                               const bool need[3], ts_tensor **gi, ts_tensor **gw, ts_tensor **gb) {
  conv_geo g;
  ts_status st = conv_check(fn, x, w, NULL, p, &g);
  if (st) return st;
  int64_t os[4] = {g.N, g.O, g.Ho, g.Wo};
  const int u = g.unbatched ? 1 : 0;
  if (go->ndim != x->ndim || memcmp(go->sizes, os + u, sizeof(int64_t) * (size_t)go->ndim) != 0) {
    char e[160];
    ts_shape_str(x->ndim, os + u, e, sizeof e);
    return ts_fail(TS_ERR_SHAPE, "%s_backward: grad_output has shape %s but the output has shape %s", fn,
                   shape_of(go).s, e);
  }
  if ((st = check_float(fn, "grad_output", go))) return st;
  tmps k = {.n = 0};
  ts_tensor **gc = tmp(&k), **g4 = tmp(&k), **gcc = tmp(&k), **xc = tmp(&k), **x4 = tmp(&k), **wc = tmp(&k),
            **wcc = tmp(&k), **cols = tmp(&k), **rgi = tmp(&k), **rgw = tmp(&k), **rgb = tmp(&k), **fgi = tmp(&k),
            **fgw = tmp(&k), **fgb = tmp(&k), **gt = tmp(&k), **part = tmp(&k), **ones = tmp(&k), **lgb = tmp(&k);
  const ts_dtype cd = compute_dtype(x->dtype);
  TRY(ts_to_dtype(go, cd, gc));
  TRY(lift4(*gc, g4));
  TRY(to_compute(x, xc));
  TRY(lift4(*xc, x4));
  TRY(to_compute(w, wc));
  TRY(ts_contiguous(*wc, wcc));
  if (need[1]) TRY(ts_tensor_empty(4, w->sizes, cd, x->device, rgw));
  if (need[0]) TRY(ts_tensor_empty(4, (int64_t[]){g.N, g.C, g.H, g.W}, cd, x->device, rgi));
  /* the backend's library first; what it declines is composed below (todo) */
  bool todo[3] = {need[0], need[1], need[2]}, ran = false;
  if (need[0] && g.N > 0) {
    TRY(conv_library(TS_OP_CONV2D_BACKWARD_INPUT, *g4, *wcc, NULL, p, *rgi, NULL, &ran));
    todo[0] = !ran;
  }
  if (need[1] && g.N > 0) {
    if (need[2]) TRY(ts_tensor_empty(1, &g.O, cd, x->device, lgb));
    TRY(conv_library(TS_OP_CONV2D_BACKWARD_WEIGHT, *g4, *x4, NULL, p, *rgw, need[2] ? *lgb : NULL, &ran));
    todo[1] = !ran;
    if (ran && need[2]) *rgb = take(lgb), todo[2] = false;
  }
  if (todo[1]) TRY(ts_fill_(*rgw, 0)); /* the composed path accumulates into it */
  if (todo[2]) TRY(ts_sum(*g4, 3, (int64_t[]){0, 2, 3}, false, rgb));
  /* depthwise: the direct kernel. A one-channel first layer (G = 1) keeps the GEMM path
   * below: its per-sample weight-gradient GEMMs measured 2x faster than the direct loop. */
  if ((todo[0] || todo[1]) && g.N > 0 && g.Cg == 1 && g.G > 1) {
    TRY(ts_contiguous(*g4, gcc));
    ts_tensor *in[3] = {*gcc, *x4, *wcc};
    ts_call c = {.op = TS_OP_CONV2D_DEPTHWISE_BACKWARD, .nin = 3, .in = in,
                 .out = {todo[0] ? *rgi : NULL, todo[1] ? *rgw : NULL}};
    conv_params(p, c.i);
    TRY(ts_dispatch(&c));
  } else if ((todo[0] || todo[1]) && g.N > 0) {
    /* The forward's layout: cols (C*kh*kw, nb, L) and grad_out reordered to (O, nb, L), so
     * that each group takes one GEMM per chunk for each gradient. */
    const int64_t nb = conv_chunk(&g), CK = g.C * g.kh * g.kw, NL = nb * g.L;
    /* A thin K (a first layer: C*kh*kw of 9) makes the chunk GEMMs long and thin, which
     * OpenBLAS runs slower than the per-sample products batched over samples (measured:
     * conv 1->32 3x3 on 28x28, batch 100, 1.7x); those go per sample, summed by a GEMV. */
    const bool small = g.K < 32;
    TRY(ts_tensor_empty(3, (int64_t[]){CK, nb, g.L}, cd, x->device, cols));
    if (small && todo[1]) {
      TRY(ts_tensor_empty(3, (int64_t[]){nb, g.Og, g.K}, cd, x->device, part));
      TRY(ts_full(2, (int64_t[]){1, nb}, 1, cd, x->device, ones));
    }
    if (!small || !ts_is_contiguous(*g4)) TRY(ts_tensor_empty(3, (int64_t[]){g.O, nb, g.L}, cd, x->device, gt));
    int64_t ip[4];
    conv_params(p, ip);
    for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
      int64_t rows = g.N - n0 < nb ? g.N - n0 : nb, RL = rows * g.L;
      ts_tensor cv = cols_view(*cols, &g, nb, rows);
      /* grad_out's (Og, L) matrices: sample j of group q at go_off + j*go_bs + q*go_gs, rows go_rs apart.
       * The per-sample products read a contiguous grad_out in place; the rest reads gt. */
      const bool direct = small && ts_is_contiguous(*g4);
      ts_tensor *gsrc = direct ? *g4 : *gt;
      const int64_t go_off = direct ? n0 * g.O * g.L : 0, go_bs = direct ? g.O * g.L : g.L,
                    go_rs = direct ? g.L : NL, go_gs = g.Og * go_rs;
      if (!direct) { /* grad_out[n0:n0+rows] (rows, O, Ho, Wo), any strides (often an expanded scalar) -> gt (O, rows, L) */
        ts_tensor src = rows_view(*g4, n0, rows), dst = *gt[0];
        dst.ndim = 4;
        int64_t sz[4] = {rows, g.O, g.Ho, g.Wo}, st4[4] = {g.L, NL, g.Wo, 1};
        memcpy(dst.sizes, sz, sizeof sz);
        memcpy(dst.strides, st4, sizeof st4);
        TRY(ts_copy_(&dst, &src));
      }
      if (todo[1]) { /* grad_weight[g] (Og, K) += gt[g] (Og, rows*L) @ cols[g]^T (rows*L, K) */
        ts_tensor xv = rows_view(*x4, n0, rows);
        TRY(im2col(&xv, &cv, p));
        for (int64_t gi2 = 0; gi2 < g.G; gi2++) {
          ts_tensor O = view3(*rgw, gi2 * g.Og * g.K, 1, g.Og, g.K, 0, g.K, 1);
          if (small) { /* per-sample products (rows, Og, K), then ones (1, rows) @ them, onto grad_weight */
            ts_tensor A = view3(gsrc, go_off + gi2 * go_gs, rows, g.Og, g.L, go_bs, go_rs, 1);
            ts_tensor B = view3(*cols, gi2 * g.K * NL, rows, g.L, g.K, g.L, 1, NL);
            ts_tensor P = view3(*part, 0, rows, g.Og, g.K, g.Og * g.K, g.K, 1);
            TRY(bmm(&A, &B, &P, 0));
            ts_tensor ov = view3(*ones, 0, 1, 1, rows, 0, nb, 1);
            ts_tensor pv = view3(*part, 0, 1, rows, g.Og * g.K, 0, g.Og * g.K, 1);
            ts_tensor wv = view3(*rgw, gi2 * g.Og * g.K, 1, 1, g.Og * g.K, 0, g.Og * g.K, 1);
            TRY(bmm(&ov, &pv, &wv, 1));
            continue;
          }
          ts_tensor A = view3(*gt, gi2 * g.Og * NL, 1, g.Og, RL, 0, NL, 1);
          ts_tensor B = view3(*cols, gi2 * g.K * NL, 1, RL, g.K, 0, 1, NL);
          TRY(bmm(&A, &B, &O, 1));
        }
      }
      if (todo[0]) { /* cols[g] (K, rows*L) = W[g]^T (K, Og) @ gt[g] (Og, rows*L), then col2im */
        for (int64_t gi2 = 0; gi2 < g.G; gi2++) {
          const int64_t bt = small ? rows : 1, cl = small ? g.L : RL; /* small: one product per sample */
          ts_tensor A = view3(*wcc, gi2 * g.Og * g.K, bt, g.K, g.Og, 0, 1, g.K);
          ts_tensor B = view3(gsrc, go_off + gi2 * go_gs, bt, g.Og, cl, go_bs, go_rs, 1);
          ts_tensor O = view3(*cols, gi2 * g.K * NL, bt, g.K, cl, g.L, NL, 1);
          TRY(bmm(&A, &B, &O, 0));
        }
        ts_tensor iv = rows_view(*rgi, n0, rows), *cin = &cv;
        ts_call c = {.op = TS_OP_COL2IM, .nin = 1, .in = &cin, .out = {&iv}};
        memcpy(c.i, ip, sizeof ip);
        TRY(ts_dispatch(&c));
      }
    }
  } else if (todo[0]) {
    TRY(ts_fill_(*rgi, 0));
  }
  if (need[0]) TRY(finish(*rgi, x->dtype, g.unbatched, fgi));
  if (need[1]) TRY(ts_to_dtype(*rgw, w->dtype, fgw));
  if (need[2]) TRY(ts_to_dtype(*rgb, w->dtype, fgb));
  if (need[0]) *gi = take(fgi);
  if (need[1]) *gw = take(fgw);
  if (need[2]) *gb = take(fgb);
done:
  tmps_free(&k);
  return st;
}

ts_status ts_conv2d_backward(ts_tensor *grad_out, ts_tensor *x, ts_tensor *weight, const ts_conv2d_params *p,
                             const bool need[3], ts_tensor **grad_input, ts_tensor **grad_weight,
                             ts_tensor **grad_bias) {
  return conv_backward("conv2d", grad_out, x, weight, p, need, grad_input, grad_weight, grad_bias);
}

/* conv1d: (N, C, L) as (N, C, 1, L), weight (O, Cg, k) as (O, Cg, 1, k). */
static ts_status conv1d_lift(ts_tensor *x, ts_tensor *w, const ts_conv2d_params *p, ts_tensor **x2, ts_tensor **w2,
                             ts_conv2d_params *p2) {
  if (x->ndim != 2 && x->ndim != 3)
    return ts_fail(TS_ERR_SHAPE, "conv1d: expected a 3-D input (N, C, L) or a 2-D unbatched one (C, L), got shape %s",
                   shape_of(x).s);
  if (w->ndim != 3)
    return ts_fail(TS_ERR_SHAPE, "conv1d: expected a 3-D weight (out_channels, in_channels/groups, k), got shape %s",
                   shape_of(w).s);
  *p2 = *p;
  p2->stride[0] = p2->dilation[0] = 1, p2->padding[0] = 0;
  ts_status st = ts_unsqueeze(x, -2, x2);
  return st ? st : ts_unsqueeze(w, -2, w2); /* the caller releases both slots */
}

static ts_status conv1d_impl(ts_tensor *x, ts_tensor *weight, ts_tensor *bias, const ts_conv2d_params *p, ts_tensor **out) {
  ts_conv2d_params p2;
  tmps k = {.n = 0};
  ts_tensor **x2 = tmp(&k), **w2 = tmp(&k), **r = tmp(&k);
  ts_status st;
  TRY(conv1d_lift(x, weight, p, x2, w2, &p2));
  TRY(conv_forward("conv1d", *x2, *w2, bias, &p2, r));
  TRY(ts_squeeze(*r, (int64_t[]){-2}, out));
done:
  tmps_free(&k);
  return st;
}

ts_status ts_conv1d_backward(ts_tensor *grad_out, ts_tensor *x, ts_tensor *weight, const ts_conv2d_params *p,
                             const bool need[3], ts_tensor **grad_input, ts_tensor **grad_weight,
                             ts_tensor **grad_bias) {
  ts_conv2d_params p2;
  tmps k = {.n = 0};
  ts_tensor **x2 = tmp(&k), **w2 = tmp(&k), **g2 = tmp(&k), **gi = tmp(&k), **gw = tmp(&k), **gb = tmp(&k),
            **fi = tmp(&k), **fw = tmp(&k);
  ts_status st;
  TRY(conv1d_lift(x, weight, p, x2, w2, &p2));
  TRY(ts_unsqueeze(grad_out, -2, g2));
  TRY(conv_backward("conv1d", *g2, *x2, *w2, &p2, need, gi, gw, gb));
  if (need[0]) TRY(ts_squeeze(*gi, (int64_t[]){-2}, fi));
  if (need[1]) TRY(ts_squeeze(*gw, (int64_t[]){-2}, fw));
  if (need[0]) *grad_input = take(fi);
  if (need[1]) *grad_weight = take(fw);
  if (need[2]) *grad_bias = take(gb);
done:
  tmps_free(&k);
  return st;
}

/* ---- pooling ------------------------------------------------------------------- */

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

static ts_status max_pool2d_impl(ts_tensor *x, const ts_pool2d_params *p, ts_tensor **out, ts_tensor **indices) {
  pool_geo g;
  ts_status st = pool_check("max_pool2d", x, p, &g);
  if (st) return st;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x4 = tmp(&k), **r = tmp(&k), **ri = tmp(&k), **fr = tmp(&k), **fi = tmp(&k);
  int64_t os[4] = {g.N, g.C, g.Ho, g.Wo};
  TRY(to_compute(x, xc));
  TRY(lift4(*xc, x4));
  TRY(ts_tensor_empty(4, os, compute_dtype(x->dtype), x->device, r));
  TRY(ts_tensor_empty(4, os, TS_INT64, x->device, ri));
  if (g.N > 0) {
    ts_call c = {.op = TS_OP_MAX_POOL2D, .nin = 1, .in = x4, .out = {*r, *ri},
                 .i = {ts_pack2(p->kernel[0], p->kernel[1]), ts_pack2(p->stride[0], p->stride[1]),
                       ts_pack2(p->padding[0], p->padding[1]), ts_pack2(p->dilation[0], p->dilation[1])}};
    TRY(ts_dispatch(&c));
  }
  TRY(finish(*r, x->dtype, g.unbatched, fr));
  TRY(finish(*ri, TS_INT64, g.unbatched, fi));
  *out = take(fr);
  *indices = take(fi);
done:
  tmps_free(&k);
  return st;
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
  TRY(to_compute(grad_out, gc));
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

/* ---- normalisation ----------------------------------------------------------- */

/* The backward of y = xhat * w + b through xhat = (x - mean) * rstd over the
 * reduced dims: gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),
 * gxhat = grad_out * w. All operands broadcast against xhat. */
static ts_status norm_backward(ts_tensor *gxhat, ts_tensor *xhat, ts_tensor *rstd, int nd, const int64_t *dims,
                               ts_tensor **out) {
  tmps k = {.n = 0};
  ts_tensor **a = tmp(&k), **p = tmp(&k), **b = tmp(&k), **t = tmp(&k), **u = tmp(&k), **v = tmp(&k);
  ts_status st;
  TRY(ts_mean(gxhat, nd, dims, true, a));
  TRY(ts_binary(TS_OP_MUL, gxhat, xhat, p));
  TRY(ts_mean(*p, nd, dims, true, b));
  TRY(ts_binary(TS_OP_MUL, xhat, *b, t));
  TRY(ts_binary(TS_OP_SUB, gxhat, *a, u));
  TRY(ts_binary_out(TS_OP_SUB, *u, *t, *u));
  TRY(ts_binary(TS_OP_MUL, *u, rstd, v));
  *out = take(v);
done:
  tmps_free(&k);
  return st;
}

static ts_status check_param(const char *fn, const char *what, const ts_tensor *t, int64_t C) {
  if (!t) return TS_OK;
  if (ts_numel(t) != C || t->ndim != 1)
    return ts_fail(TS_ERR_SHAPE, "%s: %s should be a 1-D tensor of %lld elements, got shape %s", fn, what,
                   (long long)C, shape_of(t).s);
  return check_float(fn, what, t);
}

/* x as (N, C, S) in the compute dtype */
static ts_status bn_view(ts_tensor *x, ts_tensor **xc, ts_tensor **x3) {
  int64_t S = 1;
  for (int d = 2; d < x->ndim; d++) S *= x->sizes[d];
  ts_status st = to_compute(x, xc);
  return st ? st : ts_reshape(*xc, 3, (int64_t[]){x->sizes[0], x->sizes[1], S}, x3);
}

static ts_status bn_check(const char *fn, ts_tensor *x) {
  if (x->ndim < 2)
    return ts_fail(TS_ERR_SHAPE, "%s: expected an input of at least 2 dims (N, C, ...), got shape %s", fn,
                   shape_of(x).s);
  return check_float(fn, "input", x);
}

/* A per-channel parameter (C) contiguous in the compute dtype; `fill` everywhere when absent. */
static ts_status bn_param(ts_tensor *t, double fill, int64_t C, ts_dtype cd, ts_device dev, ts_tensor **out) {
  if (!t) return ts_full(1, &C, fill, cd, dev, out);
  ts_tensor *tc = NULL;
  ts_status st = ts_to_dtype(t, cd, &tc);
  if (!st) st = ts_contiguous(tc, out);
  ts_tensor_release(tc);
  return st;
}

static ts_status batch_norm_impl(ts_tensor *x, ts_tensor *rm, ts_tensor *rv, ts_tensor *w, ts_tensor *b, bool training,
                        double momentum, double eps, ts_tensor **out, ts_tensor **saved_mean,
                        ts_tensor **saved_invstd) {
  const char *fn = "batch_norm";
  ts_status st = bn_check(fn, x);
  if (st) return st;
  const int64_t C = x->sizes[1];
  ts_tensor *all[5] = {x, rm, rv, w, b}, *given[5];
  int ng = 0;
  for (int i = 0; i < 5; i++)
    if (all[i]) given[ng++] = all[i];
  if ((st = ts_check_same_device(fn, ng, given))) return st;
  if ((st = check_param(fn, "running_mean", rm, C)) || (st = check_param(fn, "running_var", rv, C)) ||
      (st = check_param(fn, "weight", w, C)) || (st = check_param(fn, "bias", b, C)))
    return st;
  if (!training && (!rm || !rv))
    return ts_fail(TS_ERR_ARG, "%s: running_mean and running_var must be given in evaluation mode (training false)", fn);
  if ((rm == NULL) != (rv == NULL))
    return ts_fail(TS_ERR_ARG, "%s: running_mean and running_var must be given together", fn);
  int64_t M = C > 0 ? ts_numel(x) / C : 0;
  if (training && M <= 1 && ts_numel(x) > 0)
    return ts_fail(TS_ERR_SHAPE, "%s: expected more than 1 value per channel when training, got input size %s", fn,
                   shape_of(x).s);
  const ts_dtype cd = compute_dtype(x->dtype);
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x3 = tmp(&k), **x3c = tmp(&k), **mean = tmp(&k), **var = tmp(&k), **ve = tmp(&k),
            **inv = tmp(&k), **t1 = tmp(&k), **t2 = tmp(&k), **t3 = tmp(&k), **t4 = tmp(&k), **md = tmp(&k),
            **vd = tmp(&k), **wc = tmp(&k), **bc = tmp(&k), **y = tmp(&k), **yv = tmp(&k);
  TRY(bn_view(x, xc, x3));
  TRY(ts_contiguous(*x3, x3c));
  if (training) { /* one direct pass per statistic instead of composed reductions */
    TRY(ts_tensor_empty(1, &C, cd, x->device, mean));
    TRY(ts_tensor_empty(1, &C, cd, x->device, var));
    ts_tensor *in[1] = {*x3c};
    ts_call c = {.op = TS_OP_BATCH_NORM_STATS, .nin = 1, .in = in, .out = {*mean, *var}};
    TRY(ts_dispatch(&c));
    if (rm) { /* running = (1 - momentum) * running + momentum * batch, the variance unbiased */
      TRY(mul_s(rm, 1 - momentum, t1));
      TRY(ts_add_scaled(*t1, *mean, momentum, t2));
      TRY(ts_copy_(rm, *t2));
      TRY(mul_s(rv, 1 - momentum, t3));
      TRY(ts_add_scaled(*t3, *var, momentum * (double)M / (double)(M > 1 ? M - 1 : 1), t4));
      TRY(ts_copy_(rv, *t4));
    }
  } else {
    TRY(ts_to_dtype(rm, cd, md));
    TRY(ts_contiguous(*md, mean));
    TRY(ts_to_dtype(rv, cd, vd));
    TRY(ts_contiguous(*vd, var));
  }
  TRY(add_s(*var, eps, ve));
  TRY(ts_unary(TS_OP_RSQRT, *ve, inv));
  TRY(bn_param(w, 1, C, cd, x->device, wc));
  TRY(bn_param(b, 0, C, cd, x->device, bc));
  TRY(ts_tensor_empty(3, x3c[0]->sizes, cd, x->device, y));
  {
    ts_tensor *in[5] = {*x3c, *mean, *inv, *wc, *bc};
    ts_call c = {.op = TS_OP_BATCH_NORM_ELEMT, .nin = 5, .in = in, .out = {*y}};
    TRY(ts_dispatch(&c));
  }
  TRY(ts_view(*y, x->ndim, x->sizes, yv));
  TRY(ts_to_dtype(*yv, x->dtype, out));
  if (saved_mean) *saved_mean = take(mean);
  if (saved_invstd) *saved_invstd = take(inv);
done:
  tmps_free(&k);
  return st;
}

ts_status ts_batch_norm_backward(ts_tensor *go, ts_tensor *x, ts_tensor *w, ts_tensor *mean, ts_tensor *invstd,
                                 bool training, const bool need[3], ts_tensor **gx, ts_tensor **gw, ts_tensor **gb) {
  const char *fn = "batch_norm_backward";
  ts_status st = bn_check(fn, x);
  if (st) return st;
  const int64_t C = x->sizes[1];
  if (go->ndim != x->ndim || memcmp(go->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim))
    return ts_fail(TS_ERR_SHAPE, "%s: grad_output has shape %s but the input has shape %s", fn, shape_of(go).s,
                   shape_of(x).s);
  if ((st = check_float(fn, "grad_output", go)) || (st = check_param(fn, "weight", w, C)) ||
      (st = check_param(fn, "saved_mean", mean, C)) || (st = check_param(fn, "saved_invstd", invstd, C)))
    return st;
  if (!mean || !invstd) return ts_fail(TS_ERR_ARG, "%s: saved_mean and saved_invstd are required", fn);
  const ts_dtype cd = compute_dtype(x->dtype), pdt = w ? w->dtype : x->dtype;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x3 = tmp(&k), **x3c = tmp(&k), **gc = tmp(&k), **g3 = tmp(&k), **g3c = tmp(&k),
            **m = tmp(&k), **iv = tmp(&k), **wc = tmp(&k), **sg = tmp(&k), **sgx = tmp(&k), **r = tmp(&k),
            **rv = tmp(&k), **fx = tmp(&k), **fw = tmp(&k), **fb = tmp(&k);
  TRY(bn_view(x, xc, x3));
  TRY(ts_contiguous(*x3, x3c));
  TRY(bn_view(go, gc, g3));
  TRY(ts_contiguous(*g3, g3c));
  TRY(bn_param(mean, 0, C, cd, x->device, m));
  TRY(bn_param(invstd, 0, C, cd, x->device, iv));
  /* the two per-channel sums (of go and of go * xhat) in one pass */
  TRY(ts_tensor_empty(1, &C, cd, x->device, sg));
  TRY(ts_tensor_empty(1, &C, cd, x->device, sgx));
  {
    ts_tensor *in[4] = {*g3c, *x3c, *m, *iv};
    ts_call c = {.op = TS_OP_BATCH_NORM_BACKWARD_REDUCE, .nin = 4, .in = in, .out = {*sg, *sgx}};
    TRY(ts_dispatch(&c));
  }
  if (need[0]) {
    TRY(bn_param(w, 1, C, cd, x->device, wc));
    TRY(ts_tensor_empty(3, x3c[0]->sizes, cd, x->device, r));
    const int64_t M = C > 0 ? ts_numel(x) / C : 0;
    ts_tensor *in[7] = {*g3c, *x3c, *m, *iv, *wc, *sg, *sgx};
    ts_call c = {.op = TS_OP_BATCH_NORM_BACKWARD_ELEMT, .nin = 7, .in = in, .out = {*r},
                 .f = {training && M > 0 ? 1.0 / (double)M : 0}}; /* constant statistics: gx = go * w * invstd */
    TRY(ts_dispatch(&c));
    TRY(ts_view(*r, x->ndim, x->sizes, rv));
    TRY(ts_to_dtype(*rv, x->dtype, fx));
  }
  if (need[1]) TRY(ts_to_dtype(*sgx, pdt, fw));
  if (need[2]) TRY(ts_to_dtype(*sg, pdt, fb));
  if (need[0]) *gx = take(fx);
  if (need[1]) *gw = take(fw);
  if (need[2]) *gb = take(fb);
done:
  tmps_free(&k);
  return st;
}

/* Checks x's trailing dims against shape; M rows of D normalised elements. */
static ts_status ln_check(const char *fn, ts_tensor *x, int nd, const int64_t *shape, ts_tensor *w, ts_tensor *b,
                          int64_t *M, int64_t *D) {
  char ss[160], inner[160] = "";
  ts_shape_str(nd, shape, ss, sizeof ss);
  for (int d = 0, n = 0; d < nd && n < (int)sizeof inner; d++)
    n += snprintf(inner + n, sizeof inner - (size_t)n, ", %lld", (long long)shape[d]);
  if (nd < 1 || nd > x->ndim || memcmp(x->sizes + x->ndim - nd, shape, sizeof(int64_t) * (size_t)nd))
    return ts_fail(TS_ERR_SHAPE, "%s: expected an input with shape (*%s), but got input of size %s", fn, inner,
                   shape_of(x).s);
  ts_status st = check_float(fn, "input", x);
  if (st) return st;
  ts_tensor *wb[2] = {w, b};
  const char *names[2] = {"weight", "bias"};
  for (int i = 0; i < 2; i++) {
    ts_tensor *t = wb[i];
    if (!t) continue;
    if (t->ndim != nd || memcmp(t->sizes, shape, sizeof(int64_t) * (size_t)nd))
      return ts_fail(TS_ERR_SHAPE, "%s: expected %s of shape %s, got %s", fn, names[i], ss, shape_of(t).s);
    if ((st = check_float(fn, names[i], t))) return st;
    ts_tensor *xt[2] = {x, t};
    if ((st = ts_check_same_device(fn, 2, xt))) return st;
  }
  *D = 1, *M = 1;
  for (int d = 0; d < nd; d++) *D *= shape[d];
  for (int d = 0; d < x->ndim - nd; d++) *M *= x->sizes[d];
  return TS_OK;
}

static ts_status layer_norm_impl(ts_tensor *x, int nd, const int64_t *shape, ts_tensor *w, ts_tensor *b, double eps,
                        ts_tensor **out, ts_tensor **saved_mean, ts_tensor **saved_rstd) {
  const char *fn = "layer_norm";
  int64_t M, D;
  ts_status st = ln_check(fn, x, nd, shape, w, b, &M, &D);
  if (st) return st;
  const ts_dtype cd = compute_dtype(x->dtype);
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x2 = tmp(&k), **mean = tmp(&k), **var = tmp(&k), **ve = tmp(&k), **rstd = tmp(&k),
            **xm = tmp(&k), **y = tmp(&k), **wc = tmp(&k), **w1 = tmp(&k), **bc = tmp(&k), **b1 = tmp(&k),
            **yv = tmp(&k), **fy = tmp(&k), **fm = tmp(&k), **fr = tmp(&k);
  TRY(to_compute(x, xc));
  TRY(ts_reshape(*xc, 2, (int64_t[]){M, D}, x2));
  TRY(ts_mean(*x2, 1, (int64_t[]){1}, true, mean));
  TRY(ts_var(*x2, 1, (int64_t[]){1}, 0, true, var));
  TRY(add_s(*var, eps, ve));
  TRY(ts_unary(TS_OP_RSQRT, *ve, rstd));
  TRY(ts_binary(TS_OP_SUB, *x2, *mean, xm));
  TRY(ts_binary(TS_OP_MUL, *xm, *rstd, y));
  if (w) {
    TRY(ts_to_dtype(w, cd, wc));
    TRY(ts_reshape(*wc, 1, &D, w1));
    TRY(ts_binary_out(TS_OP_MUL, *y, *w1, *y));
  }
  if (b) {
    TRY(ts_to_dtype(b, cd, bc));
    TRY(ts_reshape(*bc, 1, &D, b1));
    TRY(ts_binary_out(TS_OP_ADD, *y, *b1, *y));
  }
  TRY(ts_view(*y, x->ndim, x->sizes, yv));
  TRY(ts_to_dtype(*yv, x->dtype, fy));
  int64_t ss[TS_MAX_DIMS];
  memcpy(ss, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
  for (int d = x->ndim - nd; d < x->ndim; d++) ss[d] = 1;
  if (saved_mean) TRY(ts_view(*mean, x->ndim, ss, fm));
  if (saved_rstd) TRY(ts_view(*rstd, x->ndim, ss, fr));
  *out = take(fy);
  if (saved_mean) *saved_mean = take(fm);
  if (saved_rstd) *saved_rstd = take(fr);
done:
  tmps_free(&k);
  return st;
}

ts_status ts_layer_norm_backward(ts_tensor *go, ts_tensor *x, int nd, const int64_t *shape, ts_tensor *mean,
                                 ts_tensor *rstd, ts_tensor *w, const bool need[3], ts_tensor **gx, ts_tensor **gw,
                                 ts_tensor **gb) {
  const char *fn = "layer_norm_backward";
  int64_t M, D;
  ts_status st = ln_check(fn, x, nd, shape, w, NULL, &M, &D);
  if (st) return st;
  if (go->ndim != x->ndim || memcmp(go->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim))
    return ts_fail(TS_ERR_SHAPE, "%s: grad_output has shape %s but the input has shape %s", fn, shape_of(go).s,
                   shape_of(x).s);
  if (ts_numel(mean) != M || ts_numel(rstd) != M)
    return ts_fail(TS_ERR_SHAPE, "%s: expected saved_mean and saved_rstd of %lld elements, got shapes %s and %s", fn,
                   (long long)M, shape_of(mean).s, shape_of(rstd).s);
  if ((st = check_float(fn, "grad_output", go))) return st;
  const ts_dtype cd = compute_dtype(x->dtype), pdt = w ? w->dtype : x->dtype;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x2 = tmp(&k), **gc = tmp(&k), **g2 = tmp(&k), **mc = tmp(&k), **m2 = tmp(&k),
            **rc = tmp(&k), **r2 = tmp(&k), **xm = tmp(&k), **xhat = tmp(&k), **p = tmp(&k), **rw = tmp(&k),
            **rb = tmp(&k), **wc = tmp(&k), **w1 = tmp(&k), **gxh = tmp(&k), **r = tmp(&k), **rv = tmp(&k),
            **fx = tmp(&k), **rwv = tmp(&k), **rbv = tmp(&k), **fw = tmp(&k), **fb = tmp(&k);
  TRY(to_compute(x, xc));
  TRY(ts_reshape(*xc, 2, (int64_t[]){M, D}, x2));
  TRY(ts_to_dtype(go, cd, gc));
  TRY(ts_reshape(*gc, 2, (int64_t[]){M, D}, g2));
  TRY(ts_to_dtype(mean, cd, mc));
  TRY(ts_reshape(*mc, 2, (int64_t[]){M, 1}, m2));
  TRY(ts_to_dtype(rstd, cd, rc));
  TRY(ts_reshape(*rc, 2, (int64_t[]){M, 1}, r2));
  TRY(ts_binary(TS_OP_SUB, *x2, *m2, xm));
  TRY(ts_binary(TS_OP_MUL, *xm, *r2, xhat));
  if (need[1]) {
    TRY(ts_binary(TS_OP_MUL, *g2, *xhat, p));
    TRY(ts_sum(*p, 1, (int64_t[]){0}, false, rw));
    TRY(ts_view(*rw, nd, shape, rwv));
    TRY(ts_to_dtype(*rwv, pdt, fw));
  }
  if (need[2]) {
    TRY(ts_sum(*g2, 1, (int64_t[]){0}, false, rb));
    TRY(ts_view(*rb, nd, shape, rbv));
    TRY(ts_to_dtype(*rbv, pdt, fb));
  }
  if (need[0]) {
    if (w) {
      TRY(ts_to_dtype(w, cd, wc));
      TRY(ts_reshape(*wc, 1, &D, w1));
      TRY(ts_binary(TS_OP_MUL, *g2, *w1, gxh));
    } else {
      ts_tensor_retain(*g2);
      *gxh = *g2;
    }
    TRY(norm_backward(*gxh, *xhat, *r2, 1, (int64_t[]){1}, r));
    TRY(ts_view(*r, x->ndim, x->sizes, rv));
    TRY(ts_to_dtype(*rv, x->dtype, fx));
  }
  if (need[0]) *gx = take(fx);
  if (need[1]) *gw = take(fw);
  if (need[2]) *gb = take(fb);
done:
  tmps_free(&k);
  return st;
}

/* ---- embedding --------------------------------------------------------------- */

static ts_status embedding_range_error(const char *fn, long long index, int64_t V) {
  return ts_fail(TS_ERR_INDEX, "%s: index %lld is out of range for a weight of %lld rows (expected 0 <= index < %lld)",
                 fn, index, (long long)V, (long long)V);
}

/* On a device the gather/scatter kernel finds a bad index ("index N is out of
 * bounds ..."): the error in the CPU's words, so both devices read alike. */
static ts_status device_range_error(const char *fn, ts_status st, int64_t V) {
  const char *m = st == TS_ERR_INDEX ? strstr(ts_last_error(), "index ") : NULL;
  long long bad;
  if (m && sscanf(m, "index %lld", &bad) == 1) return embedding_range_error(fn, bad, V);
  return st;
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
  if ((st = device_range_error(fn, ts_index_select(w, 0, *f, r), w->sizes[0]))) goto done;
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
  if (n * D > 0) {
    ts_tensor iv = **f; /* index (n) seen as (n, D), stride 0 along D */
    iv.ndim = 2;
    iv.sizes[1] = D, iv.strides[1] = 0;
    if ((st = device_range_error(fn, ts_scatter_(*r, 0, &iv, *g2, true), V))) goto done;
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

ts_status ts_batch_norm(ts_tensor *x, ts_tensor *rm, ts_tensor *rv, ts_tensor *w, ts_tensor *b, bool training,
                        double momentum, double eps, ts_tensor **out, ts_tensor **saved_mean,
                        ts_tensor **saved_invstd) {
  ts_tensor *in[3] = {x, w, b}, *mean = NULL, *invstd = NULL;
  bool track = ts_ag_needed(3, in);
  TS_AG_OFF(prev);
  ts_status st = batch_norm_impl(x, rm, rv, w, b, training, momentum, eps, out, track || saved_mean ? &mean : NULL,
                                 track || saved_invstd ? &invstd : NULL);
  TS_AG_RESTORE(prev);
  if (!st && track) st = ts_ag_batch_norm(x, w, b, training, mean, invstd, *out);
  if (saved_mean && mean) ts_tensor_retain(*saved_mean = mean);
  if (saved_invstd && invstd) ts_tensor_retain(*saved_invstd = invstd);
  ts_tensor_release(mean);
  ts_tensor_release(invstd);
  return st;
}

ts_status ts_layer_norm(ts_tensor *x, int nd, const int64_t *shape, ts_tensor *w, ts_tensor *b, double eps,
                        ts_tensor **out, ts_tensor **saved_mean, ts_tensor **saved_rstd) {
  TS_AUTOCAST(TS_AC_LAYER_NORM, .t = {x, w, b}, .i = {nd}, .p = {shape}, .f = {eps}, .out = {out, saved_mean, saved_rstd});
  ts_tensor *in[3] = {x, w, b}, *mean = NULL, *rstd = NULL;
  bool track = ts_ag_needed(3, in);
  TS_AG_OFF(prev);
  ts_status st = layer_norm_impl(x, nd, shape, w, b, eps, out, track || saved_mean ? &mean : NULL,
                                 track || saved_rstd ? &rstd : NULL);
  TS_AG_RESTORE(prev);
  if (!st && track) st = ts_ag_layer_norm(x, nd, shape, w, b, mean, rstd, *out);
  if (saved_mean && mean) ts_tensor_retain(*saved_mean = mean);
  if (saved_rstd && rstd) ts_tensor_retain(*saved_rstd = rstd);
  ts_tensor_release(mean);
  ts_tensor_release(rstd);
  return st;
}

ts_status ts_embedding_padded(ts_tensor *w, ts_tensor *idx, const int64_t *padding_idx, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = embedding_impl(w, idx, out);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &w)) st = ts_ag_embedding(w, idx, padding_idx, *out);
  return st;
}

ts_status ts_embedding(ts_tensor *w, ts_tensor *idx, ts_tensor **out) { return ts_embedding_padded(w, idx, NULL, out); }

ts_status ts_conv2d(ts_tensor *x, ts_tensor *weight, ts_tensor *bias, const ts_conv2d_params *p, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_CONV2D, .t = {x, weight, bias}, .p = {p}, .out = {out});
  TS_AG_OFF(prev);
  ts_status st = conv2d_impl(x, weight, bias, p, out);
  TS_AG_RESTORE(prev);
  ts_tensor *in[3] = {x, weight, bias};
  if (!st && ts_ag_needed(3, in)) st = ts_ag_conv(false, x, weight, bias, p, *out);
  return st;
}

ts_status ts_conv1d(ts_tensor *x, ts_tensor *weight, ts_tensor *bias, const ts_conv2d_params *p, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_CONV1D, .t = {x, weight, bias}, .p = {p}, .out = {out});
  TS_AG_OFF(prev);
  ts_status st = conv1d_impl(x, weight, bias, p, out);
  TS_AG_RESTORE(prev);
  ts_tensor *in[3] = {x, weight, bias};
  if (!st && ts_ag_needed(3, in)) st = ts_ag_conv(true, x, weight, bias, p, *out);
  return st;
}

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
