/* Tensors: creation, reference counting, geometry queries, shape helpers. */
#include "ops/ops.h"
#include "autograd/autograd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ts_status ts_mul_overflow(int64_t a, int64_t b, int64_t *out) {
  if (__builtin_mul_overflow(a, b, out))
    return ts_fail(TS_ERR_OVERFLOW, "size overflow: %lld * %lld does not fit in 64 bits", (long long)a, (long long)b);
  return TS_OK;
}

/* The element count; the product of the nonzero sizes must fit too (a
 * contiguous layout's strides are its partial products), so (0, 2^53, 2^53)
 * is refused although it holds no element. */
ts_status ts_shape_numel(int ndim, const int64_t *sizes, int64_t *out) {
  int64_t n = 1;
  bool empty = false;
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] < 0) return ts_fail(TS_ERR_ARG, "negative size %lld in dim %d", (long long)sizes[i], i);
    if (sizes[i] == 0) {
      empty = true;
      continue;
    }
    if (ts_mul_overflow(n, sizes[i], &n)) {
      char shape[256];
      ts_shape_str(ndim, sizes, shape, sizeof shape);
      return ts_fail(TS_ERR_OVERFLOW, "shape %s has more elements than 64-bit sizes can count", shape);
    }
  }
  *out = empty ? 0 : n;
  return TS_OK;
}

void ts_shape_str(int ndim, const int64_t *sizes, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)sizes[i]);
  if (k < n) snprintf(buf + k, n - k, ndim == 1 ? ",)" : ")");
}

void ts_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
}

ts_status ts_wrap_dim(const char *fn, int64_t dim, int ndim, int *out) {
  int n = ndim > 0 ? ndim : 1; /* a 0-dim tensor accepts dims 0 and -1, as torch */
  if (dim < -n || dim >= n)
    return ts_fail(TS_ERR_INDEX, "%s: dimension out of range (expected to be in range of [%d, %d], but got %lld)",
                   fn, -n, n - 1, (long long)dim);
  *out = (int)(dim < 0 ? dim + n : dim);
  return TS_OK;
}

ts_status ts_broadcast_shapes(const char *fn, int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                              int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : a[i - (n - na)];
    int64_t y = i < n - nb ? 1 : b[i - (n - nb)];
    if (x != y && x != 1 && y != 1) {
      char sa[256], sb[256];
      ts_shape_str(na, a, sa, sizeof sa);
      ts_shape_str(nb, b, sb, sizeof sb);
      return ts_fail(TS_ERR_SHAPE, "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)", fn, sa, sb, i,
                     (long long)x, (long long)y);
    }
    out[i] = x == 1 ? y : x;
  }
  *nout = n;
  return TS_OK;
}

static ts_tensor *tensor_alloc(void) {
  ts_tensor *t = ts_small_alloc(sizeof *t);
  if (t) {
    memset(t, 0, sizeof *t);
    t->refcount = 1;
    t->self = t;
  }
  return t;
}

ts_status ts_tensor_empty(int ndim, const int64_t *sizes, ts_dtype dt, ts_device dev, ts_tensor **out) {
  if (ndim < 0 || ndim > TS_MAX_DIMS)
    return ts_fail(TS_ERR_ARG, "tensors have at most %d dims, got %d", TS_MAX_DIMS, ndim);
  int64_t n, nbytes;
  ts_status st = ts_shape_numel(ndim, sizes, &n);
  if (st) return st;
  if ((st = ts_mul_overflow(n, (int64_t)ts_dtype_size(dt), &nbytes))) return st;
  ts_tensor *t = tensor_alloc();
  if (!t) return ts_fail(TS_ERR_OOM, "out of memory allocating a tensor");
  if ((st = ts_storage_new((size_t)nbytes, dev, &t->storage))) {
    ts_small_free(t, sizeof *t);
    return st;
  }
  t->ndim = ndim;
  if (ndim > 0) memcpy(t->sizes, sizes, sizeof(int64_t) * (size_t)ndim); /* sizes may be NULL for 0-dim */
  ts_contiguous_strides(ndim, sizes, t->strides);
  t->dtype = dt;
  t->device = t->storage->device;
  *out = t;
  return TS_OK;
}

ts_status ts_tensor_view_of(ts_tensor *base, int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset,
                            ts_tensor **out) {
  if (ndim < 0 || ndim > TS_MAX_DIMS)
    return ts_fail(TS_ERR_ARG, "tensors have at most %d dims, got %d", TS_MAX_DIMS, ndim);
  ts_tensor *t = tensor_alloc();
  if (!t) return ts_fail(TS_ERR_OOM, "out of memory allocating a tensor");
  t->storage = base->storage;
  ts_storage_retain(t->storage);
  t->offset = offset;
  t->ndim = ndim;
  if (ndim > 0) memcpy(t->sizes, sizes, sizeof(int64_t) * (size_t)ndim); /* sizes may be NULL for 0-dim */
  if (ndim > 0) memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
  t->dtype = base->dtype;
  t->device = base->device;
  *out = t;
  return TS_OK;
}

void ts_tensor_retain(ts_tensor *t) { t->refcount++; }

void ts_tensor_release(ts_tensor *t) {
  if (!t || --t->refcount > 0) return;
  ts_storage_release(t->storage);
  ts_tensor_release(t->grad);
  if (t->grad_fn) ts_node_release(t->grad_fn);
  ts_tensor_release(t->base);
  ts_small_free(t, sizeof *t);
}

static ts_tensor *wrap(ts_scalar_box *b, ts_dtype dt) {
  memset(&b->t, 0, sizeof b->t);
  b->s = (ts_storage){.data = &b->v, .nbytes = sizeof b->v, .device = TS_DEVICE_CPU, .refcount = 1};
  b->t.storage = &b->s;
  b->t.dtype = dt;
  b->t.device = TS_DEVICE_CPU;
  b->t.refcount = 1;
  b->t.is_wrapped_number = true;
  return &b->t;
}

ts_tensor *ts_scalar_wrap_double(ts_scalar_box *b, double v) { b->v.f = v; return wrap(b, TS_FLOAT64); }
ts_tensor *ts_scalar_wrap_int(ts_scalar_box *b, int64_t v) { b->v.i = v; return wrap(b, TS_INT64); }
ts_tensor *ts_scalar_wrap_bool(ts_scalar_box *b, bool v) { b->v.b = v; return wrap(b, TS_BOOL); }

int64_t ts_numel(const ts_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->sizes[i];
  return n;
}

bool ts_is_contiguous(const ts_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->sizes[i] == 0) return true;
    if (t->sizes[i] != 1 && t->strides[i] != s) return false;
    s *= t->sizes[i];
  }
  return true;
}
