/* The op layer for batch and layer normalisation (contracts in op_nn.h),
 * forward and backward: batch norm runs the BATCH_NORM_* kernels, layer norm
 * the LAYER_NORM ones (one pass over the rows each way), group norm the GROUP_NORM
 * ones (rows of C/G channels, per-channel affine). float16/bfloat16 are
 * computed in float32 and rounded once at the end. */
#include "op_nn_common.h"

static ts_status check_param(const char *fn, const char *what, const ts_tensor *t, int64_t C) {
  if (!t) return TS_OK;
  if (ts_numel(t) != C || t->ndim != 1)
    return ts_fail(TS_ERR_SHAPE, "%s: %s should be a 1-D tensor of %lld elements, got shape %s", fn, what,
                   (long long)C, shape_of(t).s);
  return check_float(fn, what, t);
}

/* x as (N, C, S) contiguous in the compute dtype (xc, x3: the steps, released by the caller) */
static ts_status bn_view(ts_tensor *x, ts_tensor **xc, ts_tensor **x3, ts_tensor **out) {
  int64_t S = 1;
  for (int d = 2; d < x->ndim; d++) S *= x->sizes[d];
  ts_status st = to_compute(x, xc);
  if (!st) st = ts_reshape(*xc, 3, (int64_t[]){x->sizes[0], x->sizes[1], S}, x3);
  return st ? st : ts_contiguous(*x3, out);
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
  TRY(bn_view(x, xc, x3, x3c));
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

/* A backward's results from its kernels' (compute-dtype) outputs, each where need says:
 * gx from r (x's element count) in x's shape and dtype, gw and gb from rw, rb in the
 * parameters' shape (pnd dims pshape) and dtype pdt. */
static ts_status hand_back(const bool need[3], ts_tensor *r, ts_tensor *rw, ts_tensor *rb, ts_tensor *x, int pnd,
                           const int64_t *pshape, ts_dtype pdt, ts_tensor **gx, ts_tensor **gw, ts_tensor **gb) {
  ts_status st;
  tmps k = {.n = 0};
  ts_tensor **rv = tmp(&k), **rwv = tmp(&k), **rbv = tmp(&k), **fx = tmp(&k), **fw = tmp(&k), **fb = tmp(&k);
  if (need[0]) {
    TRY(ts_view(r, x->ndim, x->sizes, rv));
    TRY(ts_to_dtype(*rv, x->dtype, fx));
  }
  if (need[1]) {
    TRY(ts_view(rw, pnd, pshape, rwv));
    TRY(ts_to_dtype(*rwv, pdt, fw));
  }
  if (need[2]) {
    TRY(ts_view(rb, pnd, pshape, rbv));
    TRY(ts_to_dtype(*rbv, pdt, fb));
  }
  if (need[0]) *gx = take(fx);
  if (need[1]) *gw = take(fw);
  if (need[2]) *gb = take(fb);
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
            **m = tmp(&k), **iv = tmp(&k), **wc = tmp(&k), **sg = tmp(&k), **sgx = tmp(&k), **r = tmp(&k);
  TRY(bn_view(x, xc, x3, x3c));
  TRY(bn_view(go, gc, g3, g3c));
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
  }
  TRY(hand_back(need, *r, *sgx, *sg, x, 1, &C, pdt, gx, gw, gb));
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

/* (M, D) contiguous in the compute dtype */
static ts_status ln_rows(ts_tensor *t, int64_t M, int64_t D, ts_tensor **tc, ts_tensor **t2, ts_tensor **out) {
  ts_status st = to_compute(t, tc);
  if (!st) st = ts_reshape(*tc, 2, (int64_t[]){M, D}, t2);
  return st ? st : ts_contiguous(*t2, out);
}

static ts_status layer_norm_impl(ts_tensor *x, int nd, const int64_t *shape, ts_tensor *w, ts_tensor *b, double eps,
                        ts_tensor **out, ts_tensor **saved_mean, ts_tensor **saved_rstd) {
  const char *fn = "layer_norm";
  int64_t M, D;
  ts_status st = ln_check(fn, x, nd, shape, w, b, &M, &D);
  if (st) return st;
  const ts_dtype cd = compute_dtype(x->dtype);
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x2 = tmp(&k), **xr = tmp(&k), **wc = tmp(&k), **bc = tmp(&k), **y = tmp(&k),
            **mean = tmp(&k), **rstd = tmp(&k), **yv = tmp(&k), **fy = tmp(&k), **fm = tmp(&k), **fr = tmp(&k);
  TRY(ln_rows(x, M, D, xc, x2, xr));
  TRY(bn_param(w, 1, D, cd, x->device, wc));
  TRY(bn_param(b, 0, D, cd, x->device, bc));
  TRY(ts_tensor_empty(2, (int64_t[]){M, D}, cd, x->device, y));
  TRY(ts_tensor_empty(1, &M, cd, x->device, mean));
  TRY(ts_tensor_empty(1, &M, cd, x->device, rstd));
  {
    ts_tensor *in[3] = {*xr, *wc, *bc};
    ts_call c = {.op = TS_OP_LAYER_NORM, .nin = 3, .in = in, .out = {*y, *mean, *rstd}, .f = {eps}};
    TRY(ts_dispatch(&c));
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
  if ((st = check_float(fn, "grad_output", go)) || (st = check_float(fn, "saved_mean", mean)) ||
      (st = check_float(fn, "saved_rstd", rstd)))
    return st;
  ts_tensor *all[5] = {go, x, mean, rstd, w};
  if ((st = ts_check_same_device(fn, w ? 5 : 4, all))) return st;
  const ts_dtype cd = compute_dtype(x->dtype), pdt = w ? w->dtype : x->dtype;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x2 = tmp(&k), **xr = tmp(&k), **gc = tmp(&k), **g2 = tmp(&k), **gr = tmp(&k),
            **mc = tmp(&k), **rc = tmp(&k), **wc = tmp(&k), **r = tmp(&k), **rw = tmp(&k), **rb = tmp(&k);
  TRY(ln_rows(x, M, D, xc, x2, xr));
  TRY(ln_rows(go, M, D, gc, g2, gr));
  TRY(bn_param(mean, 0, M, cd, x->device, mc));
  TRY(bn_param(rstd, 0, M, cd, x->device, rc));
  TRY(bn_param(w, 1, D, cd, x->device, wc));
  if (need[0]) TRY(ts_tensor_empty(2, (int64_t[]){M, D}, cd, x->device, r));
  if (need[1]) TRY(ts_tensor_empty(1, &D, cd, x->device, rw));
  if (need[2]) TRY(ts_tensor_empty(1, &D, cd, x->device, rb));
  {
    ts_tensor *in[5] = {*gr, *xr, *mc, *rc, *wc};
    ts_call c = {.op = TS_OP_LAYER_NORM_BACKWARD, .nin = 5, .in = in, .out = {*r, *rw, *rb}};
    if (need[0] || need[1] || need[2]) TRY(ts_dispatch(&c));
  }
  TRY(hand_back(need, *r, *rw, *rb, x, nd, shape, pdt, gx, gw, gb));
done:
  tmps_free(&k);
  return st;
}

/* Checks x (N, C, *) against G and the per-channel weight and bias; N samples of G
 * rows of D = C/G * S elements. */
static ts_status gn_check(const char *fn, ts_tensor *x, int64_t G, ts_tensor *w, ts_tensor *b, int64_t *N, int64_t *C,
                          int64_t *S) {
  if (x->ndim < 2)
    return ts_fail(TS_ERR_SHAPE, "%s: expected an input of at least 2 dims (N, C, ...), got shape %s", fn,
                   shape_of(x).s);
  ts_status st = check_float(fn, "input", x);
  if (st) return st;
  *N = x->sizes[0], *C = x->sizes[1], *S = 1;
  for (int d = 2; d < x->ndim; d++) *S *= x->sizes[d];
  if (G < 1 || *C % G != 0)
    return ts_fail(TS_ERR_ARG, "%s: expected the number of channels to be divisible by num_groups, but got input of "
                   "shape %s and num_groups=%lld", fn, shape_of(x).s, (long long)G);
  if ((st = check_param(fn, "weight", w, *C)) || (st = check_param(fn, "bias", b, *C))) return st;
  ts_tensor *all[3] = {x, w ? w : x, b ? b : x};
  return ts_check_same_device(fn, 3, all);
}

static ts_status group_norm_impl(ts_tensor *x, int64_t G, ts_tensor *w, ts_tensor *b, double eps, ts_tensor **out,
                                 ts_tensor **saved_mean, ts_tensor **saved_rstd) {
  const char *fn = "group_norm";
  int64_t N, C, S;
  ts_status st = gn_check(fn, x, G, w, b, &N, &C, &S);
  if (st) return st;
  const ts_dtype cd = compute_dtype(x->dtype);
  const int64_t NG = N * G;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x3 = tmp(&k), **x3c = tmp(&k), **wc = tmp(&k), **bc = tmp(&k), **y = tmp(&k),
            **mean = tmp(&k), **rstd = tmp(&k), **yv = tmp(&k), **fy = tmp(&k), **fm = tmp(&k), **fr = tmp(&k);
  TRY(bn_view(x, xc, x3, x3c));
  TRY(bn_param(w, 1, C, cd, x->device, wc));
  TRY(bn_param(b, 0, C, cd, x->device, bc));
  TRY(ts_tensor_empty(3, x3c[0]->sizes, cd, x->device, y));
  TRY(ts_tensor_empty(1, &NG, cd, x->device, mean));
  TRY(ts_tensor_empty(1, &NG, cd, x->device, rstd));
  if (NG > 0) { /* rows of no elements get NaN statistics, as layer norm's */
    ts_tensor *in[3] = {*x3c, *wc, *bc};
    ts_call c = {.op = TS_OP_GROUP_NORM, .nin = 3, .in = in, .out = {*y, *mean, *rstd}, .i = {G}, .f = {eps}};
    TRY(ts_dispatch(&c));
  }
  TRY(ts_view(*y, x->ndim, x->sizes, yv));
  TRY(ts_to_dtype(*yv, x->dtype, fy));
  if (saved_mean) TRY(ts_view(*mean, 2, (int64_t[]){N, G}, fm));
  if (saved_rstd) TRY(ts_view(*rstd, 2, (int64_t[]){N, G}, fr));
  *out = take(fy);
  if (saved_mean) *saved_mean = take(fm);
  if (saved_rstd) *saved_rstd = take(fr);
done:
  tmps_free(&k);
  return st;
}

ts_status ts_group_norm_backward(ts_tensor *go, ts_tensor *x, int64_t G, ts_tensor *mean, ts_tensor *rstd,
                                 ts_tensor *w, const bool need[3], ts_tensor **gx, ts_tensor **gw, ts_tensor **gb) {
  const char *fn = "group_norm_backward";
  int64_t N, C, S;
  ts_status st = gn_check(fn, x, G, w, NULL, &N, &C, &S);
  if (st) return st;
  if (go->ndim != x->ndim || memcmp(go->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim))
    return ts_fail(TS_ERR_SHAPE, "%s: grad_output has shape %s but the input has shape %s", fn, shape_of(go).s,
                   shape_of(x).s);
  if (ts_numel(mean) != N * G || ts_numel(rstd) != N * G)
    return ts_fail(TS_ERR_SHAPE, "%s: expected saved_mean and saved_rstd of %lld elements, got shapes %s and %s", fn,
                   (long long)(N * G), shape_of(mean).s, shape_of(rstd).s);
  if ((st = check_float(fn, "grad_output", go)) || (st = check_float(fn, "saved_mean", mean)) ||
      (st = check_float(fn, "saved_rstd", rstd)))
    return st;
  ts_tensor *all[4] = {go, x, mean, rstd};
  if ((st = ts_check_same_device(fn, 4, all))) return st;
  const ts_dtype cd = compute_dtype(x->dtype), pdt = w ? w->dtype : x->dtype;
  const int64_t NG = N * G;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **x3 = tmp(&k), **x3c = tmp(&k), **gc = tmp(&k), **g3 = tmp(&k), **g3c = tmp(&k),
            **mc = tmp(&k), **rc = tmp(&k), **wc = tmp(&k), **r = tmp(&k), **rw = tmp(&k), **rb = tmp(&k),
            **m1 = tmp(&k), **r1 = tmp(&k);
  TRY(bn_view(x, xc, x3, x3c));
  TRY(bn_view(go, gc, g3, g3c));
  TRY(ts_reshape(mean, 1, &NG, m1));
  TRY(ts_reshape(rstd, 1, &NG, r1));
  TRY(bn_param(*m1, 0, NG, cd, x->device, mc));
  TRY(bn_param(*r1, 0, NG, cd, x->device, rc));
  TRY(bn_param(w, 1, C, cd, x->device, wc));
  if (need[0]) TRY(ts_tensor_empty(3, x3c[0]->sizes, cd, x->device, r));
  if (need[1]) TRY(ts_tensor_empty(1, &C, cd, x->device, rw));
  if (need[2]) TRY(ts_tensor_empty(1, &C, cd, x->device, rb));
  if (need[0] || need[1] || need[2]) {
    ts_tensor *in[5] = {*g3c, *x3c, *mc, *rc, *wc};
    ts_call c = {.op = TS_OP_GROUP_NORM_BACKWARD, .nin = 5, .in = in, .out = {*r, *rw, *rb}, .i = {G}};
    TRY(ts_dispatch(&c));
  }
  TRY(hand_back(need, *r, *rw, *rb, x, 1, &C, pdt, gx, gw, gb));
done:
  tmps_free(&k);
  return st;
}

/* ---- autograd: each op records one node that calls its backward (grad_nn.c) ---- */

/* The statistics an impl made (for the node, or because the caller asked): a reference
 * to each for the caller's pointers that are set, the impl's own released. */
static void give_stats(ts_tensor *mean, ts_tensor *spread, ts_tensor **saved_mean, ts_tensor **saved_spread) {
  if (saved_mean && mean) ts_tensor_retain(*saved_mean = mean);
  if (saved_spread && spread) ts_tensor_retain(*saved_spread = spread);
  ts_tensor_release(mean);
  ts_tensor_release(spread);
}

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
  give_stats(mean, invstd, saved_mean, saved_invstd);
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
  give_stats(mean, rstd, saved_mean, saved_rstd);
  return st;
}

ts_status ts_group_norm(ts_tensor *x, int64_t G, ts_tensor *w, ts_tensor *b, double eps, ts_tensor **out,
                        ts_tensor **saved_mean, ts_tensor **saved_rstd) {
  ts_tensor *in[3] = {x, w, b}, *mean = NULL, *rstd = NULL;
  bool track = ts_ag_needed(3, in);
  TS_AG_OFF(prev);
  ts_status st = group_norm_impl(x, G, w, b, eps, out, track || saved_mean ? &mean : NULL,
                                 track || saved_rstd ? &rstd : NULL);
  TS_AG_RESTORE(prev);
  if (!st && track) st = ts_ag_group_norm(x, G, w, b, mean, rstd, *out);
  give_stats(mean, rstd, saved_mean, saved_rstd);
  return st;
}
