/* Storage: reference-counted buffers from a backend's allocator, and the
 * byte accounting the binding uses to pace Lua's collector. */
#include "cache_alloc.h"
#include "backend.h"
#include "ops/ops.h"

#include <stdatomic.h>
#include <stdlib.h>

static _Atomic size_t alloc_debt;  /* bytes allocated since the binding last asked */
/* bytes held by live storages per device type, and their peak since the last
 * reset (the peak is updated without a lock: two threads allocating at once
 * may leave it a little low, which a benchmark's peak can live with) */
static _Atomic size_t live[TS_DEVICE_TYPE_COUNT];
static _Atomic size_t peak[TS_DEVICE_TYPE_COUNT];

static void *cpu_alloc(void *ctx, size_t n, ts_device dev) {
  (void)ctx, (void)dev;
  /* small buffers come from malloc's thread caches (the caching allocator's
   * lock and 512-byte rounding cost more than the op itself); larger ones
   * from the CPU's caching allocator, which keeps their pages mapped from one
   * step to the next (src/cpu/cache.c) and aligns them to 512 bytes */
  if (n <= TS_CPU_CACHE_MIN) return ts_small_alloc(n ? n : 1);
  return ts_cpu_cache_alloc(n);
}

static void cpu_free(void *ctx, void *p, size_t n, ts_device dev) {
  (void)ctx, (void)dev;
  if (n <= TS_CPU_CACHE_MIN) ts_small_free(p, n ? n : 1);
  else ts_cpu_cache_free(p);
}

const ts_allocator ts_cpu_allocator = {cpu_alloc, cpu_free, NULL};

static void (*oom_hook)(void *);
static void *oom_hook_ud;
static _Thread_local bool oom_hook_thread; /* only the thread that set it runs it (Lua's) */
void ts_set_oom_hook(void (*hook)(void *ud), void *ud) { oom_hook = hook, oom_hook_ud = ud, oom_hook_thread = true; }

ts_status ts_storage_sync(ts_storage *s) {
  if (!s->pending) return TS_OK;
  uintptr_t ev = s->pending;
  ts_backend *be = s->pending_on;
  s->pending = 0;
  s->pending_on = NULL;
  return be->pending_wait(ev);
}

/* the wording of ts_device_resolve, which callers normally meet first */
static ts_status unavailable(ts_device dev) {
  char buf[32];
  ts_device_str(dev, buf, sizeof buf);
  return ts_fail(TS_ERR_DEVICE, "CUDA is not available for %s (no GPU, driver or CUDA build: cuda.is_available() "
                 "is false); use \"cpu\"", buf);
}

ts_status ts_storage_new_from(size_t nbytes, ts_device dev, const ts_allocator *a, ts_storage **out) {
  ts_storage *s = ts_small_alloc(sizeof *s);
  if (!s) return ts_fail(TS_ERR_OOM, "out of memory allocating a storage header");
  s->data = a->alloc(a->ctx, nbytes, dev);
  if (!s->data && oom_hook && oom_hook_thread) { /* tensors Lua has dropped may hold the memory: collect, retry once */
    oom_hook(oom_hook_ud);
    s->data = a->alloc(a->ctx, nbytes, dev);
  }
  if (!s->data) {
    ts_small_free(s, sizeof *s);
    char buf[32];
    ts_device_str(dev, buf, sizeof buf);
    if (dev.type == TS_CPU && a == &ts_cpu_allocator) /* the pinned allocator leaves its own message too */
      return ts_fail(TS_ERR_OOM, "out of memory: tried to allocate %zu bytes on %s; drop references to "
                     "large tensors (collectgarbage()) or use smaller sizes", nbytes, buf);
    /* device allocators leave their own message (formatting it into itself,
     * as ts_fail("%s", ts_last_error()) did, is undefined and came out empty) */
    return TS_ERR_OOM;
  }
  s->nbytes = nbytes;
  s->device = dev;
  s->allocator = a;
  s->refcount = 1;
  s->pinned = false;
  s->version = 0;
  s->inplace_version = 0;
  s->inplace_fn = NULL;
  s->pending = 0;
  s->pending_on = NULL;
  /* buffers only: the fixed-size headers behind each tensor are charged to
   * Lua's own debt by the binding, per tensor box (lt_gc_debt in
   * src/lua/ltensor.c), where they cost an incremental step, not a full
   * collection */
  atomic_fetch_add(&alloc_debt, nbytes < 64 ? 64 : nbytes);
  size_t now = atomic_fetch_add(&live[dev.type], nbytes) + nbytes;
  if (now > atomic_load_explicit(&peak[dev.type], memory_order_relaxed))
    atomic_store_explicit(&peak[dev.type], now, memory_order_relaxed);
  *out = s;
  return TS_OK;
}

ts_status ts_storage_new(size_t nbytes, ts_device dev, ts_storage **out) {
  ts_backend *be = ts_backend_get((ts_device_type)dev.type);
  if (!be) return unavailable(dev);
  ts_status st = ts_device_resolve(&dev);
  if (st) return st;
  return ts_storage_new_from(nbytes, dev, be->allocator, out);
}

void ts_storage_retain(ts_storage *s) { s->refcount++; }

void ts_storage_release(ts_storage *s) {
  if (!s || --s->refcount > 0) return;
  if (s->allocator) {
    if (s->pending) ts_storage_sync(s); /* a copy still writing into it */
    s->allocator->free(s->allocator->ctx, s->data, s->nbytes, s->device);
    atomic_fetch_sub(&live[s->device.type], s->nbytes);
    ts_small_free(s, sizeof *s);
  }
}

size_t ts_take_alloc_debt(void) { return atomic_exchange(&alloc_debt, 0); }
size_t ts_cpu_bytes_live(void) { return atomic_load(&live[TS_CPU]); }
size_t ts_bytes_live(ts_device_type t) { return atomic_load(&live[t]); }
size_t ts_bytes_peak(ts_device_type t) { return atomic_load(&peak[t]); }
void ts_reset_bytes_peak(ts_device_type t) { atomic_store(&peak[t], atomic_load(&live[t])); }
