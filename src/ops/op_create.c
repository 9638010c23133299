/* The op layer for creation and copies: full, fill_, arange, linspace,
 * copy_, dtype casts, contiguous, clone. (The random constructors are in
 * random.c.) */
#include "ops.h"
#include "autograd/grad.h"

#include <math.h>
#include <string.h>

/* fill_ and zero_: kind names the node autograd records (a tensor in the
 * graph takes the new history: nothing flows to what was overwritten) */
static ts_status fill_named(const char *fn, ts_grad_kind kind, ts_tensor *t, double v) {
  bool track = ts_ag_needed(1, &t) && ts_dtype_is_float(t->dtype);
  ts_status st = track ? ts_ag_check_inplace(fn, t) : TS_OK;
  if (st || (st = ts_check_internal_overlap(fn, t))) return st;
  ts_call c = {.op = TS_OP_FILL, .nin = 0, .out = {t}, .f = {v}};
  if (ts_dtype_is_int(t->dtype) && v == floor(v) && fabs(v) < 9.3e18) c.i[0] = 1, c.i[1] = (int64_t)v;
  t->storage->version++;
  if ((st = ts_dispatch(&c))) return st;
  return track ? ts_ag_overwrite(kind, 1, &t, t, NULL) : TS_OK;
}

ts_status ts_fill_(ts_tensor *t, double v) { return fill_named("fill_", TS_GRAD_FILL, t, v); }
ts_status ts_zero_(ts_tensor *t) { return fill_named("zero_", TS_GRAD_ZERO, t, 0); }

ts_status ts_full(int ndim, const int64_t *sizes, double v, ts_dtype dt, ts_device dev, ts_tensor **out) {
  ts_tensor *t;
  ts_status st = ts_tensor_empty(ndim, sizes, dt, dev, &t);
  if (st) return st;
  if ((st = ts_fill_(t, v))) {
    ts_tensor_release(t);
    return st;
  }
  t->storage->version = 0; /* new: its first fill is no in-place change (torch's _version 0) */
  *out = t;
  return TS_OK;
}

/* n = ceil((end - start) / step) after the checks torch makes, or an error */
static ts_status range_count(double start, double end, double step, int64_t *n) {
  if (step == 0) return ts_fail(TS_ERR_ARG, "arange: step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return ts_fail(TS_ERR_ARG, "arange: upper bound and larger bound inconsistent with step sign");
  if (!isfinite(start) || !isfinite(end)) return ts_fail(TS_ERR_ARG, "arange: unsupported range: %f -> %f", start, end);
  double nf = ceil((end - start) / step);
  if (nf > 9.0e18) return ts_fail(TS_ERR_ARG, "arange: too many elements (%g)", nf);
  *n = (int64_t)nf;
  return TS_OK;
}

static ts_status run_range(const ts_call *proto, int64_t n, ts_dtype dt, ts_device dev, ts_tensor **out) {
  ts_tensor *t;
  ts_status st = ts_tensor_empty(1, &n, dt, dev, &t);
  if (st) return st;
  ts_call c = *proto;
  c.out[0] = t;
  if ((st = ts_dispatch(&c))) {
    ts_tensor_release(t);
    return st;
  }
  *out = t;
  return TS_OK;
}

ts_status ts_arange(double start, double end, double step, ts_dtype dt, ts_device dev, ts_tensor **out) {
  int64_t n;
  ts_status st = range_count(start, end, step, &n);
  if (st) return st;
  ts_call c = {.op = TS_OP_ARANGE, .f = {start, step}};
  return run_range(&c, n, dt, dev, out);
}

ts_status ts_arange_int(int64_t start, int64_t end, int64_t step, ts_dtype dt, ts_device dev, ts_tensor **out) {
  int64_t n, span;
  ts_status st = range_count((double)start, (double)end, (double)step, &n);
  if (st) return st;
  /* the count in integers: the doubles above round past 2^53 */
  if (!__builtin_sub_overflow(end, start, &span)) n = span / step + (span % step != 0);
  ts_call c = {.op = TS_OP_ARANGE, .f = {(double)start, (double)step}, .i = {1, start, step}};
  return run_range(&c, n, dt, dev, out);
}

ts_status ts_linspace(double start, double end, int64_t steps, ts_dtype dt, ts_device dev, ts_tensor **out) {
  if (steps < 0) return ts_fail(TS_ERR_ARG, "linspace: number of steps must be non-negative, got %lld", (long long)steps);
  ts_call c = {.op = TS_OP_LINSPACE, .f = {start, end}};
  return run_range(&c, steps, dt, dev, out);
}

/* The copy itself, not recorded. */
static ts_status copy_values(ts_tensor *dst, ts_tensor *src) {
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  ts_status st = ts_broadcast_shapes("copy_", dst->ndim, dst->sizes, src->ndim, src->sizes, &nd, sizes);
  if (st || (st = ts_check_internal_overlap("copy_", dst)) || (st = ts_check_partial_overlap("copy_", dst, src))) return st;
  if (src->storage == dst->storage && src->dtype == dst->dtype && src->offset == dst->offset && src->ndim == dst->ndim &&
      !memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)src->ndim) &&
      !memcmp(src->strides, dst->strides, sizeof(int64_t) * (size_t)src->ndim))
    return TS_OK; /* onto itself: nothing to do (and memcpy may not copy a range onto itself) */
  if (nd != dst->ndim || memcmp(sizes, dst->sizes, sizeof(int64_t) * (size_t)nd) != 0) {
    char a[256], b[256];
    ts_shape_str(src->ndim, src->sizes, a, sizeof a);
    ts_shape_str(dst->ndim, dst->sizes, b, sizeof b);
    return ts_fail(TS_ERR_SHAPE, "copy_: source of shape %s cannot be broadcast to destination shape %s", a, b);
  }
  /* stack view of src expanded to dst's shape */
  ts_tensor v = *src;
  int off = nd - src->ndim;
  v.ndim = nd;
  for (int d = 0; d < nd; d++) {
    v.sizes[d] = sizes[d];
    v.strides[d] = d < off || src->sizes[d - off] == 1 ? 0 : src->strides[d - off];
  }
  bool host_scalar = src->ndim == 0 && src->device.type == TS_CPU; /* a 0-dim CPU tensor is a scalar */
  if (!ts_device_eq(src->device, dst->device) && !src->is_wrapped_number && !host_scalar) {
    uint32_t v = dst->storage->version;
    st = ts_copy_across(dst, src, false);
    if (!st) dst->storage->version = v + 1; /* one copy_, one version (the staging copies bumped too) */
    return st;
  }
  if (host_scalar) v.is_wrapped_number = true; /* still one for ts_dispatch's device guard once expanded */
  ts_tensor *in = &v;
  ts_call c = {.op = TS_OP_COPY, .nin = 1, .in = &in, .out = {dst}};
  dst->storage->version++;
  return ts_dispatch(&c);
}

/* copy_ and fill_ of a 0-dim tensor: in the graph when either side is, the
 * source getting the gradient of every place it went to */
static ts_status copy_named(const char *fn, ts_grad_kind kind, ts_tensor *dst, ts_tensor *src) {
  ts_tensor *in[2] = {dst, src};
  if (!ts_ag_needed(2, in) || !ts_dtype_is_float(dst->dtype)) return copy_values(dst, src);
  ts_status st = ts_ag_check_inplace(fn, dst);
  if (st) return st;
  TS_AG_OFF(prev);
  st = copy_values(dst, src);
  TS_AG_RESTORE(prev);
  return st ? st : ts_ag_overwrite(kind, 2, in, dst, NULL);
}

ts_status ts_copy_(ts_tensor *dst, ts_tensor *src) { return copy_named("copy_", TS_GRAD_COPY, dst, src); }

ts_status ts_fill_tensor_(ts_tensor *t, ts_tensor *value) {
  if (value->ndim != 0)
    return ts_fail(TS_ERR_ARG, "fill_: only supports a 0-dimension value tensor, got %d dims", value->ndim);
  return copy_named("fill_", TS_GRAD_FILL_TENSOR, t, value);
}

static ts_status copy_new(ts_tensor *t, ts_dtype dt, const char *grad_name, ts_tensor **out) {
  ts_tensor *r;
  ts_status st = ts_tensor_empty(t->ndim, t->sizes, dt, t->device, &r);
  if (st) return st;
  bool track = ts_ag_needed(1, &t);
  TS_AG_OFF(prev);
  st = ts_copy_(r, t);
  TS_AG_RESTORE(prev);
  if (!st && track) st = ts_ag_identity(grad_name, t, r);
  if (st) {
    ts_tensor_release(r);
    return st;
  }
  r->storage->version = 0; /* a new tensor: the copy that made it is no in-place change */
  *out = r;
  return TS_OK;
}

ts_status ts_to_dtype(ts_tensor *t, ts_dtype dt, ts_tensor **out) {
  if (t->dtype == dt && !t->is_wrapped_number) {
    ts_tensor_retain(t);
    return *out = t, TS_OK;
  }
  return copy_new(t, dt, "ToCopyBackward0", out);
}

ts_status ts_contiguous(ts_tensor *t, ts_tensor **out) {
  if (ts_is_contiguous(t) && !t->is_wrapped_number) {
    ts_tensor_retain(t);
    return *out = t, TS_OK;
  }
  return copy_new(t, t->dtype, "CloneBackward0", out);
}

ts_status ts_clone(ts_tensor *t, ts_tensor **out) { return copy_new(t, t->dtype, "CloneBackward0", out); }
