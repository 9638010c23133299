/* The op layer for interpolation (contracts in op_nn.h): nearest and
 * (bi)linear resizing of (N, C, L) and (N, C, H, W) inputs, forward and
 * backward, on the UPSAMPLE_* kernels. A 1-D input runs the 2-D kernels on
 * an (N, C, 1, L) view, with the height left as it is. float16/bfloat16 are
 * computed in float32 and rounded once at the end. */
#include "op_nn_common.h"

static const char *up_name(const ts_upsample_params *p) {
  return p->nd == 1 ? (p->linear ? "upsample_linear1d" : "upsample_nearest1d")
                    : (p->linear ? "upsample_bilinear2d" : "upsample_nearest2d");
}

/* The input's sizes (its rank nd + 2) against p: torch's upsample checks. */
static ts_status up_check(const char *fn, int ndim, const int64_t *in, const ts_upsample_params *p) {
  if (p->nd != 1 && p->nd != 2) return ts_fail(TS_ERR_ARG, "%s: expected 1 or 2 spatial dims, got %d", fn, p->nd);
  char s[160];
  ts_shape_str(ndim, in, s, sizeof s);
  if (ndim != p->nd + 2)
    return ts_fail(TS_ERR_SHAPE, "%s: expected a %d-D input (N, C, %s), got shape %s", fn, p->nd + 2,
                   p->nd == 1 ? "L" : "H, W", s);
  int64_t rest = 1;
  for (int d = 1; d < ndim; d++) rest *= in[d];
  if (rest == 0)
    return ts_fail(TS_ERR_SHAPE, "%s: non-empty %d-D data tensor expected but got a tensor with sizes %s", fn, ndim, s);
  for (int d = 0; d < p->nd; d++) {
    if (p->size[d] < 1)
      return ts_fail(TS_ERR_ARG, "%s: input and output sizes should be greater than 0, but got input %s and output "
                     "size %lld", fn, s, (long long)p->size[d]);
    if (!(p->scales[d] >= 0) || isinf(p->scales[d]))
      return ts_fail(TS_ERR_ARG, "%s: scale factors must be finite and non-negative, got %g", fn, p->scales[d]);
  }
  return TS_OK;
}

/* The kernel's call for p on 4-D operands: f[] the scales (the height's 0 in 1-D) */
static ts_call up_call(const ts_upsample_params *p, bool backward) {
  ts_call c = {.nin = 1};
  if (p->linear) c.op = backward ? TS_OP_UPSAMPLE_BILINEAR2D_BACKWARD : TS_OP_UPSAMPLE_BILINEAR2D;
  else c.op = backward ? TS_OP_UPSAMPLE_NEAREST2D_BACKWARD : TS_OP_UPSAMPLE_NEAREST2D;
  c.i[0] = p->align_corners, c.i[1] = p->nd == 1;
  c.f[0] = p->nd == 1 ? 0 : p->scales[0], c.f[1] = p->scales[p->nd - 1];
  return c;
}

/* src (the input or grad_out) as 4-D in the compute dtype; a new (N, C, h, w) result of
 * the kernel, back in dtype dt and the caller's rank. */
static ts_status run_up(ts_call c, ts_tensor *src, int64_t h, int64_t w, int nd, ts_dtype dt, ts_tensor **out) {
  ts_status st;
  tmps k = {.n = 0};
  ts_tensor **sc = tmp(&k), **s4 = tmp(&k), **r = tmp(&k), **rv = tmp(&k);
  TRY(to_compute(src, sc));
  if (nd == 1) TRY(ts_unsqueeze(*sc, 2, s4));
  else ts_tensor_retain(*s4 = *sc);
  TRY(ts_tensor_empty(4, (int64_t[]){s4[0]->sizes[0], s4[0]->sizes[1], h, w}, compute_dtype(dt), src->device, r));
  if (s4[0]->sizes[0] > 0) {
    c.in = s4, c.out[0] = *r;
    TRY(ts_dispatch(&c));
  }
  if (nd == 1) {
    int64_t d2 = 2;
    TRY(ts_squeeze(*r, &d2, rv));
  } else {
    ts_tensor_retain(*rv = *r);
  }
  TRY(ts_to_dtype(*rv, dt, out));
done:
  tmps_free(&k);
  return st;
}

static ts_status upsample_impl(ts_tensor *x, const ts_upsample_params *p, ts_tensor **out) {
  const char *fn = up_name(p);
  ts_status st = up_check(fn, x->ndim, x->sizes, p);
  if (st || (st = check_float(fn, "input", x))) return st;
  return run_up(up_call(p, false), x, p->nd == 1 ? 1 : p->size[0], p->size[p->nd - 1], p->nd, x->dtype, out);
}

ts_status ts_upsample_backward(ts_tensor *go, const int64_t *in, const ts_upsample_params *p, ts_tensor **gx) {
  char fn[64];
  snprintf(fn, sizeof fn, "%s_backward", up_name(p));
  ts_status st = up_check(fn, p->nd + 2, in, p);
  if (st || (st = check_float(fn, "grad_output", go))) return st;
  int64_t want[4] = {in[0], in[1], p->size[0], p->size[1]};
  if (go->ndim != p->nd + 2 || memcmp(go->sizes, want, sizeof(int64_t) * (size_t)go->ndim)) {
    char ws[160];
    ts_shape_str(p->nd + 2, want, ws, sizeof ws);
    return ts_fail(TS_ERR_SHAPE, "%s: grad_output has shape %s but the output has shape %s", fn, shape_of(go).s, ws);
  }
  return run_up(up_call(p, true), go, p->nd == 1 ? 1 : in[2], in[p->nd + 1], p->nd, go->dtype, gx);
}

/* ---- autograd: one node that calls the backward above (grad_nn.c) ---- */

ts_status ts_upsample(ts_tensor *x, const ts_upsample_params *p, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = upsample_impl(x, p, out);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_upsample(x, p, *out);
  return st;
}
