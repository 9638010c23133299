/* The op layer for convolution (contracts in op_nn.h).
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
 * its GEMMs are too thin to pay. A backend's library (oneDNN, cuDNN) goes first
 * when it has one. float16/bfloat16 are computed in float32 and rounded once at the end. */
#include "op_nn_common.h"

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

/* Backward by the backend's library (oneDNN, cuDNN); clears todo[k] for each
 * gradient it computed (the bias's comes with the weight's, into *rgb). */
static ts_status conv_backward_library(const conv_geo *g, ts_tensor *g4, ts_tensor *x4, ts_tensor *wcc,
                                       const ts_conv2d_params *p, bool todo[3], ts_tensor *rgi, ts_tensor *rgw,
                                       ts_tensor **rgb) {
  bool ran = false;
  ts_status st = TS_OK;
  if (todo[0]) {
    if ((st = conv_library(TS_OP_CONV2D_BACKWARD_INPUT, g4, wcc, NULL, p, rgi, NULL, &ran))) return st;
    todo[0] = !ran;
  }
  if (todo[1]) {
    ts_tensor *lgb = NULL;
    if (todo[2] && (st = ts_tensor_empty(1, &g->O, rgw->dtype, rgw->device, &lgb))) return st;
    st = conv_library(TS_OP_CONV2D_BACKWARD_WEIGHT, g4, x4, NULL, p, rgw, lgb, &ran);
    todo[1] = st || !ran;
    if (!st && ran && lgb) *rgb = lgb, lgb = NULL, todo[2] = false;
    ts_tensor_release(lgb);
  }
  return st;
}

/* Depthwise backward by the direct kernel: grad_input and/or grad_weight, overwritten. */
static ts_status conv_backward_depthwise(ts_tensor *g4, ts_tensor *x4, ts_tensor *wcc, const ts_conv2d_params *p,
                                         const bool todo[3], ts_tensor *rgi, ts_tensor *rgw) {
  ts_tensor *gcc = NULL;
  ts_status st = ts_contiguous(g4, &gcc);
  if (st) return st;
  ts_tensor *in[3] = {gcc, x4, wcc};
  ts_call c = {.op = TS_OP_CONV2D_DEPTHWISE_BACKWARD, .nin = 3, .in = in,
               .out = {todo[0] ? rgi : NULL, todo[1] ? rgw : NULL}};
  conv_params(p, c.i);
  st = ts_dispatch(&c);
  ts_tensor_release(gcc);
  return st;
}

/* Backward by im2col + GEMM, in the forward's layout: cols (C*kh*kw, nb, L) and grad_out
 * reordered to (O, nb, L), so that each group takes one GEMM per chunk for each gradient.
 * rgw (O, Cg, kh, kw) is accumulated into (zeroed by the caller); rgi (N, C, H, W) is
 * overwritten by COL2IM. */
static ts_status conv_backward_gemm(const conv_geo *gp, ts_tensor *g4, ts_tensor *x4, ts_tensor *wcc,
                                    const ts_conv2d_params *p, const bool todo[3], ts_tensor *rgi, ts_tensor *rgw) {
  const conv_geo g = *gp;
  const ts_dtype cd = wcc->dtype;
  const ts_device dev = x4->device;
  tmps k = {.n = 0};
  ts_tensor **cols = tmp(&k), **gt = tmp(&k), **part = tmp(&k), **ones = tmp(&k);
  ts_status st;
  const int64_t nb = conv_chunk(&g), CK = g.C * g.kh * g.kw, NL = nb * g.L;
  /* A thin K (a first layer: C*kh*kw of 9) makes the chunk GEMMs long and thin, which
   * OpenBLAS runs slower than the per-sample products batched over samples (measured:
   * conv 1->32 3x3 on 28x28, batch 100, 1.7x); those go per sample, summed by a GEMV. */
  const bool small = g.K < 32;
  TRY(ts_tensor_empty(3, (int64_t[]){CK, nb, g.L}, cd, dev, cols));
  if (small && todo[1]) {
    TRY(ts_tensor_empty(3, (int64_t[]){nb, g.Og, g.K}, cd, dev, part));
    TRY(ts_full(2, (int64_t[]){1, nb}, 1, cd, dev, ones));
  }
  if (!small || !ts_is_contiguous(g4)) TRY(ts_tensor_empty(3, (int64_t[]){g.O, nb, g.L}, cd, dev, gt));
  int64_t ip[4];
  conv_params(p, ip);
  for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
    int64_t rows = g.N - n0 < nb ? g.N - n0 : nb, RL = rows * g.L;
    ts_tensor cv = cols_view(*cols, &g, nb, rows);
    /* grad_out's (Og, L) matrices: sample j of group q at go_off + j*go_bs + q*go_gs, rows go_rs apart.
     * The per-sample products read a contiguous grad_out in place; the rest reads gt. */
    const bool direct = small && ts_is_contiguous(g4);
    ts_tensor *gsrc = direct ? g4 : *gt;
    const int64_t go_off = direct ? n0 * g.O * g.L : 0, go_bs = direct ? g.O * g.L : g.L,
                  go_rs = direct ? g.L : NL, go_gs = g.Og * go_rs;
    if (!direct) { /* grad_out[n0:n0+rows] (rows, O, Ho, Wo), any strides (often an expanded scalar) -> gt (O, rows, L) */
      ts_tensor src = rows_view(g4, n0, rows), dst = *gt[0];
      dst.ndim = 4;
      int64_t sz[4] = {rows, g.O, g.Ho, g.Wo}, st4[4] = {g.L, NL, g.Wo, 1};
      memcpy(dst.sizes, sz, sizeof sz);
      memcpy(dst.strides, st4, sizeof st4);
      TRY(ts_copy_(&dst, &src));
    }
    if (todo[1]) { /* grad_weight[g] (Og, K) += gt[g] (Og, rows*L) @ cols[g]^T (rows*L, K) */
      ts_tensor xv = rows_view(x4, n0, rows);
      TRY(im2col(&xv, &cv, p));
      for (int64_t gi2 = 0; gi2 < g.G; gi2++) {
        ts_tensor O = view3(rgw, gi2 * g.Og * g.K, 1, g.Og, g.K, 0, g.K, 1);
        if (small) { /* per-sample products (rows, Og, K), then ones (1, rows) @ them, onto grad_weight */
          ts_tensor A = view3(gsrc, go_off + gi2 * go_gs, rows, g.Og, g.L, go_bs, go_rs, 1);
          ts_tensor B = view3(*cols, gi2 * g.K * NL, rows, g.L, g.K, g.L, 1, NL);
          ts_tensor P = view3(*part, 0, rows, g.Og, g.K, g.Og * g.K, g.K, 1);
          TRY(bmm(&A, &B, &P, 0));
          ts_tensor ov = view3(*ones, 0, 1, 1, rows, 0, nb, 1);
          ts_tensor pv = view3(*part, 0, 1, rows, g.Og * g.K, 0, g.Og * g.K, 1);
          ts_tensor wv = view3(rgw, gi2 * g.Og * g.K, 1, 1, g.Og * g.K, 0, g.Og * g.K, 1);
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
        ts_tensor A = view3(wcc, gi2 * g.Og * g.K, bt, g.K, g.Og, 0, 1, g.K);
        ts_tensor B = view3(gsrc, go_off + gi2 * go_gs, bt, g.Og, cl, go_bs, go_rs, 1);
        ts_tensor O = view3(*cols, gi2 * g.K * NL, bt, g.K, cl, g.L, NL, 1);
        TRY(bmm(&A, &B, &O, 0));
      }
      ts_tensor iv = rows_view(rgi, n0, rows), *cin = &cv;
      ts_call c = {.op = TS_OP_COL2IM, .nin = 1, .in = &cin, .out = {&iv}};
      memcpy(c.i, ip, sizeof ip);
      TRY(ts_dispatch(&c));
    }
  }
done:
  tmps_free(&k);
  return st;
}

/* The gradients need[] asks for: checks, casts to the compute dtype, then the library,
 * the depthwise kernel or im2col + GEMM for what is left, and casts back. */
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
  ts_tensor **gc = tmp(&k), **g4 = tmp(&k), **xc = tmp(&k), **x4 = tmp(&k), **wc = tmp(&k), **wcc = tmp(&k),
            **rgi = tmp(&k), **rgw = tmp(&k), **rgb = tmp(&k), **fgi = tmp(&k), **fgw = tmp(&k), **fgb = tmp(&k);
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
  bool todo[3] = {need[0], need[1], need[2]};
  if (g.N > 0) TRY(conv_backward_library(&g, *g4, *x4, *wcc, p, todo, *rgi, *rgw, rgb));
  if (todo[1]) TRY(ts_fill_(*rgw, 0)); /* the composed path accumulates into it */
  if (todo[2]) TRY(ts_sum(*g4, 3, (int64_t[]){0, 2, 3}, false, rgb));
  /* depthwise: the direct kernel. A one-channel first layer (G = 1) keeps the GEMM path:
   * its per-sample weight-gradient GEMMs measured 2x faster than the direct loop. */
  bool composed = (todo[0] || todo[1]) && g.N > 0;
  if (composed && g.Cg == 1 && g.G > 1) TRY(conv_backward_depthwise(*g4, *x4, *wcc, p, todo, *rgi, *rgw));
  else if (composed) TRY(conv_backward_gemm(&g, *g4, *x4, *wcc, p, todo, *rgi, *rgw));
  else if (todo[0]) TRY(ts_fill_(*rgi, 0));
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

/* ---- autograd: each op records one node that calls its backward (grad_nn.c) ---- */

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
