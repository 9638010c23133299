/* The op layer for devices: resolving "cuda" to an ordinal, moving tensors
 * between devices, pinned host memory. The byte copies themselves belong to
 * the device backend (copy_bytes); casts and layout changes run as ordinary
 * ops on whichever side is faster to run them. */
#include "autograd/grad.h"
#include "ops.h"

#include <string.h>

static ts_backend *backend_between(ts_device a, ts_device b) {
  return ts_backends[a.type != TS_CPU ? a.type : b.type];
}

/* Contiguous dst <- contiguous src of the same dtype and numel, on two devices. */
static ts_status copy_bytes(ts_tensor *dst, ts_tensor *src, bool non_blocking) {
  ts_backend *be = backend_between(dst->device, src->device);
  size_t n = (size_t)ts_numel(src) * ts_dtype_size(src->dtype);
  if (n == 0) return TS_OK;
  ts_status st = ts_host_ready(src);
  if (st) return st;
  if (dst->device.type == TS_CPU && (st = ts_host_ready(dst))) return st;
  dst->storage->version++;
  /* only page-locked host memory lets a copy run on after the call */
  ts_storage *host = dst->device.type == TS_CPU ? dst->storage : src->device.type == TS_CPU ? src->storage : NULL;
  if (host && !host->pinned) non_blocking = false;
  if ((st = be->copy_bytes(ts_data(dst), dst->device, ts_data(src), src->device, n, non_blocking))) return st;
  if (non_blocking && host) /* the host waits for it before it touches these bytes again */
    st = be->copy_pending(dst->device.type == TS_CPU ? src->device : dst->device, &host->pending);
  if (non_blocking && host && !st) host->pending_on = be;
  return st;
}

/* An uninitialised contiguous CPU tensor in page-locked memory from a. */
static ts_status pinned_empty(int ndim, const int64_t *sizes, ts_dtype dt, const ts_allocator *a, ts_tensor **out) {
  ts_storage *s;
  ts_tensor *r;
  int64_t n;
  ts_status st = ts_shape_numel(ndim, sizes, &n);
  if (st || (st = ts_storage_new_from((size_t)n * ts_dtype_size(dt), TS_DEVICE_CPU, a, &s))) return st;
  s->pinned = true;
  if ((st = ts_tensor_empty(0, NULL, dt, TS_DEVICE_CPU, &r))) {
    ts_storage_release(s);
    return st;
  }
  ts_storage_release(r->storage); /* the 1-element placeholder */
  r->storage = s;
  r->ndim = ndim;
  if (ndim) memcpy(r->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  ts_contiguous_strides(ndim, sizes, r->strides);
  *out = r;
  return TS_OK;
}

/* t on dev, contiguous, in t's dtype (no autograd). A non-blocking copy to the
 * host goes into page-locked memory, so that it can run on. */
static ts_status move_raw(ts_tensor *t, ts_device dev, bool non_blocking, ts_tensor **out) {
  ts_tensor *c = NULL, *r = NULL;
  ts_status st = ts_contiguous(t, &c);
  if (st) return st;
  const ts_allocator *host = backend_between(dev, t->device)->host_allocator;
  if (non_blocking && dev.type == TS_CPU && host) st = pinned_empty(c->ndim, c->sizes, c->dtype, host, &r);
  else st = ts_tensor_empty(c->ndim, c->sizes, c->dtype, dev, &r);
  if (!st) st = copy_bytes(r, c, non_blocking);
  ts_tensor_release(c);
  if (st) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

ts_status ts_to_device(ts_tensor *t, ts_device dev, ts_dtype dt, bool non_blocking, ts_tensor **out) {
  ts_status st = ts_device_resolve(&dev);
  if (st) return st;
  if (ts_device_eq(dev, t->device)) return ts_to_dtype(t, dt, out);
  ts_tensor *a = NULL, *b = NULL;
  bool to_host = dev.type == TS_CPU;
  bool track = ts_ag_needed(1, &t) && ts_dtype_is_float(dt);
  TS_AG_OFF(prev);
  /* casts run on the GPU side: before a copy to the host, after one to the GPU */
  if (to_host) st = ts_to_dtype(t, dt, &a);
  else ts_tensor_retain(a = t);
  if (!st) st = move_raw(a, dev, non_blocking, &b);
  ts_tensor_release(a);
  a = NULL;
  if (!st && !to_host && b->dtype != dt) {
    st = ts_to_dtype(b, dt, &a);
    ts_tensor_release(b);
    b = a;
  }
  TS_AG_RESTORE(prev);
  if (!st && track) st = ts_ag_identity("ToCopyBackward0", t, b); /* the engine moves the gradient back */
  if (st) {
    ts_tensor_release(b);
    return st;
  }
  b->storage->version = 0; /* a new tensor: the copy that made it is no in-place change */
  *out = b;
  return TS_OK;
}

ts_status ts_copy_across(ts_tensor *dst, ts_tensor *src, bool non_blocking) {
  ts_backend *be = backend_between(dst->device, src->device);
  if (!be || !be->copy_bytes) return ts_fail(TS_ERR_DEVICE, "copy_: device not available in this build");
  if (ts_is_contiguous(dst) && ts_is_contiguous(src) && dst->dtype == src->dtype && dst->ndim == src->ndim &&
      memcmp(dst->sizes, src->sizes, sizeof(int64_t) * (size_t)dst->ndim) == 0)
    return copy_bytes(dst, src, non_blocking); /* the common case: no temporary */
  ts_tensor *m = NULL;
  ts_status st = ts_to_device(src, dst->device, dst->dtype, false, &m);
  if (!st) st = ts_copy_(dst, m); /* broadcast and strides, on dst's device */
  ts_tensor_release(m);
  return st;
}

ts_status ts_tensor_empty_pinned(int ndim, const int64_t *sizes, ts_dtype dt, ts_tensor **out) {
  ts_backend *be = ts_backend_get(TS_CUDA);
  if (!be || !be->host_allocator || be->device_count <= 0)
    return ts_fail(TS_ERR_DEVICE, "pin_memory: page-locked memory needs CUDA (cuda.is_available() is false)");
  return pinned_empty(ndim, sizes, dt, be->host_allocator, out);
}

ts_status ts_pin_memory(ts_tensor *t, ts_tensor **out) {
  if (t->device.type != TS_CPU)
    return ts_fail(TS_ERR_DEVICE, "pin_memory: only CPU tensors can be pinned, this one is on cuda:%d", t->device.index);
  if (t->storage->pinned) {
    ts_tensor_retain(t);
    return *out = t, TS_OK;
  }
  ts_tensor *r;
  ts_status st = ts_tensor_empty_pinned(t->ndim, t->sizes, t->dtype, &r);
  if (st) return st;
  if ((st = ts_copy_(r, t))) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}
