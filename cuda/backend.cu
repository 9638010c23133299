// The CUDA backend table: per-device caching allocators over cudaMalloc,
// pinned host memory, byte copies between host and devices, the current
// device and stream, and the kernel table filled by the family files.
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common.cuh"
extern "C" {
#include "core/cache_alloc.h"
}

#define TSC_MAX_DEVICES 64

static void pinned_release_cache(void);

// ---- the current device and stream (per thread, as in PyTorch) -------------

static thread_local int cur_device = -1;                  // -1: not asked yet
static thread_local uintptr_t cur_stream[TSC_MAX_DEVICES]; // 0: the legacy default stream

extern "C" int ts_cuda_current_device(void) {
  if (cur_device < 0) {
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess) cudaGetLastError(), d = 0;
    cur_device = d;
  }
  return cur_device;
}

extern "C" ts_status ts_cuda_check_device(int device) {
  int n = ts_cuda_device_count();
  if (n == 0) return ts_fail(TS_ERR_DEVICE, "CUDA is not available (no GPU or driver): cuda.is_available() is false");
  if (device < 0 || device >= n)
    return ts_fail(TS_ERR_DEVICE, "invalid device ordinal %d: this machine has %d CUDA device%s (0 to %d)", device, n,
                   n == 1 ? "" : "s", n - 1);
  return TS_OK;
}

extern "C" ts_status ts_cuda_set_device(int device) {
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  if (device == ts_cuda_current_device()) return TS_OK;
  TSC_CHECK(cudaSetDevice(device));
  cur_device = device;
  return TS_OK;
}

static int resolve(int device) { return device < 0 ? ts_cuda_current_device() : device; }

cudaStream_t tsc_stream(void) { return (cudaStream_t)cur_stream[ts_cuda_current_device()]; }

extern "C" uintptr_t ts_cuda_current_stream(int device) {
  device = resolve(device);
  return device < TSC_MAX_DEVICES ? cur_stream[device] : 0;
}

extern "C" ts_status ts_cuda_set_current_stream(int device, uintptr_t s) {
  device = resolve(device);
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  cur_stream[device] = s;
  return TS_OK;
}

// ---- private pools of CUDA graphs ------------------------------------------

// While a stream captures, its allocations take the capture's pool id as
// their "stream": the caching allocator reuses a block only for the stream
// it was allocated on, so a pool's blocks go to no one else, before or after
// they are freed, as PyTorch's private pools. Ids are odd (a stream handle
// is an aligned pointer) and never reused.
#define TSC_MAX_ROUTES 16
struct pool_route {
  int device;
  uintptr_t stream; // capturing now; 0: the entry is free
  uint64_t pool;
};
static pool_route routes[TSC_MAX_ROUTES];
static int routes_active;              // captures underway in this process
struct pool_home {                     // where a pool's blocks are marked for the access checks
  uint64_t pool;
  uintptr_t stream;
};
static pool_home homes[256];
static int live_pools; // pools some graph holds: their idle segments must stay (see ts_cuda_empty_cache)
static uint64_t next_pool = 1;
static pthread_mutex_t routes_lock = PTHREAD_MUTEX_INITIALIZER;

extern "C" void ts_cuda_graph_pool_hold(void) { __atomic_add_fetch(&live_pools, 1, __ATOMIC_ACQ_REL); }

extern "C" uint64_t ts_cuda_graph_pool_new(void) {
  pthread_mutex_lock(&routes_lock);
  uint64_t id = next_pool += 2;
  pthread_mutex_unlock(&routes_lock);
  return id;
}

extern "C" void tsc_route_to_pool(int device, uintptr_t stream, uint64_t pool) {
  pthread_mutex_lock(&routes_lock);
  for (pool_route &r : routes)
    if (r.stream == stream && r.device == device) r.stream = 0, routes_active--;
  if (pool)
    for (pool_route &r : routes)
      if (!r.stream) {
        r = pool_route{device, stream, pool}, routes_active++;
        pool_home &h = homes[(pool >> 1) % 256];
        h.pool = pool, h.stream = stream;
        break;
      }
  pthread_mutex_unlock(&routes_lock);
}

// The pool allocations on stream go to, or 0.
static uint64_t routed_pool(int device, uintptr_t stream) {
  if (!__atomic_load_n(&routes_active, __ATOMIC_ACQUIRE)) return 0;
  uint64_t pool = 0;
  pthread_mutex_lock(&routes_lock);
  for (pool_route &r : routes)
    if (r.stream && r.stream == stream && r.device == device) pool = r.pool;
  pthread_mutex_unlock(&routes_lock);
  return pool;
}

// ---- the caching allocator of each device --------------------------------

static void *raw_malloc(void *ctx, size_t n) {
  tsc_device_guard g((int)(intptr_t)ctx);
  void *p = NULL;
  // a new segment for a capture's pool: cudaMalloc is "unsafe" during
  // capture, but the graph keeps the address and never frees it before its
  // replays, so the thread relaxes its mode for the call (PyTorch's
  // cudaMallocMaybeCapturing)
  bool relax = __atomic_load_n(&routes_active, __ATOMIC_ACQUIRE) > 0 &&
               routed_pool((int)(intptr_t)ctx, cur_stream[(int)(intptr_t)ctx]) != 0;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (relax) cudaThreadExchangeStreamCaptureMode(&mode);
  cudaError_t e = g.st ? cudaErrorInvalidDevice : cudaMalloc(&p, n);
  if (relax) cudaThreadExchangeStreamCaptureMode(&mode);
  if (e != cudaSuccess) {
    cudaGetLastError(); // out of memory is not sticky: clear it
    return NULL;
  }
  return p;
}

static void raw_free(void *ctx, void *p) {
  tsc_device_guard g((int)(intptr_t)ctx);
  cudaFree(p);
}

static void *raw_event_record(void *ctx, uintptr_t stream) {
  tsc_device_guard g((int)(intptr_t)ctx);
  cudaEvent_t ev;
  if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) return cudaGetLastError(), (void *)NULL;
  if (cudaEventRecord(ev, (cudaStream_t)stream) != cudaSuccess) {
    cudaGetLastError();
    cudaEventDestroy(ev);
    return NULL;
  }
  return (void *)ev;
}

static bool raw_event_done(void *ctx, void *ev) {
  cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
  if (e == cudaErrorNotReady) return cudaGetLastError(), false;
  return true; // done, or failed: either way nothing more will happen on it
}

static void raw_event_wait(void *ctx, void *ev) { cudaEventSynchronize((cudaEvent_t)ev); }
static void raw_event_destroy(void *ctx, void *ev) { cudaEventDestroy((cudaEvent_t)ev); }

#ifdef TSIM_SIMULATED
// The simulated device checks each access against the blocks handed out
// (sim/check.cc), not only against cudaMalloc's segments.
static void raw_mark(void *ctx, void *p, size_t size, size_t live, uintptr_t stream) {
  if (stream & 1) { // a graph's pool: marked in the order of its capture stream, so a capture records them
    // Handing out is marked (and replayed), freeing is not: graphs sharing a
    // pool replay each other's segment marks, and a free replayed by one
    // would poison a block another graph's replay still reads. The checks
    // see no use after free inside a pool.
    if (!live) return;
    pool_home &h = homes[(stream >> 1) % 256];
    stream = h.pool == stream ? h.stream : 0;
  }
  tsc_device_guard g((int)(intptr_t)ctx); // stream 0 is the device's own default stream
  // a block of a stream destroyed since (a warm-up side stream a script let
  // go): its work has completed, so the default stream orders the mark
  cudaStreamCaptureStatus cs;
  if (stream && cudaStreamIsCapturing((cudaStream_t)stream, &cs) != cudaSuccess) cudaGetLastError(), stream = 0;
  if (!g.st) tsim_mark_block(p, size, live, (cudaStream_t)stream);
}
#define TSC_RAW_MARK raw_mark
#else
#define TSC_RAW_MARK NULL
#endif

static ts_cache *caches[TSC_MAX_DEVICES];
static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;

static ts_cache *cache_of(int device) {
  if (device < 0 || device >= TSC_MAX_DEVICES) return NULL;
  ts_cache *c = __atomic_load_n(&caches[device], __ATOMIC_ACQUIRE);
  if (c) return c;
  pthread_mutex_lock(&caches_lock);
  if (!caches[device]) {
    ts_cache_raw raw = {raw_malloc,          raw_free, raw_event_record, raw_event_done, raw_event_wait,
                        raw_event_destroy,   (void *)(intptr_t)device, TSC_RAW_MARK};
    __atomic_store_n(&caches[device], ts_cache_new(raw, ts_cache_env_caching()), __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&caches_lock);
  return caches[device];
}

static void *dev_alloc(void *ctx, size_t n, ts_device dev) {
  ts_cache *c = cache_of(dev.index);
  if (!c) return ts_fail(TS_ERR_OOM, "out of host memory for the allocator of cuda:%d", dev.index), (void *)NULL;
  uintptr_t s = cur_stream[dev.index];
  if (uint64_t pool = routed_pool(dev.index, s)) s = (uintptr_t)pool;
  void *p = ts_cache_alloc(c, n, s);
  if (!p) {
    size_t free_b = 0, total = 0;
    {
      tsc_device_guard g(dev.index);
      if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) cudaGetLastError();
    }
    char name[16], msg[512];
    snprintf(name, sizeof name, "cuda:%d", dev.index);
    ts_cache_oom_message(c, n, name, total, free_b, msg, sizeof msg);
    ts_fail(TS_ERR_OOM, "%s", msg);
  }
  return p;
}

static void dev_free(void *ctx, void *p, size_t n, ts_device dev) {
  ts_cache *c = cache_of(dev.index);
  if (c) ts_cache_free(c, p);
}

static const ts_allocator device_allocator = {dev_alloc, dev_free, NULL};

void *tsc_temp_alloc(size_t nbytes, ts_status *st) {
  ts_device dev = {TS_CUDA, (int8_t)ts_cuda_current_device()};
  void *p = dev_alloc(NULL, nbytes, dev);
  *st = p ? TS_OK : TS_ERR_OOM;
  return p;
}

void tsc_temp_free(void *p) {
  if (p) dev_free(NULL, p, 0, ts_device{TS_CUDA, (int8_t)ts_cuda_current_device()});
}

extern "C" ts_status ts_cuda_memory_stats(int device, ts_cache_stats *out) {
  device = resolve(device);
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  ts_cache *c = cache_of(device);
  if (!c) return ts_fail(TS_ERR_OOM, "out of host memory");
  ts_cache_get_stats(c, out);
  return TS_OK;
}

extern "C" ts_status ts_cuda_reset_peak(int device) {
  device = resolve(device);
  ts_status st = ts_cuda_check_device(device);
  if (!st && cache_of(device)) ts_cache_reset_peak(cache_of(device));
  return st;
}

extern "C" ts_status ts_cuda_reset_accumulated(int device) {
  device = resolve(device);
  ts_status st = ts_cuda_check_device(device);
  if (!st && cache_of(device)) ts_cache_reset_accumulated(cache_of(device));
  return st;
}

extern "C" ts_status ts_cuda_empty_cache(void) {
  // During a capture nothing can go back (cudaFree would invalidate it); and
  // while a graph holds a pool, the cache cannot tell that pool's idle
  // segments (addresses the graph's replays still write) from the others:
  // the device's cache is kept, as PyTorch keeps private pools.
  if (__atomic_load_n(&routes_active, __ATOMIC_ACQUIRE)) return TS_OK;
  if (__atomic_load_n(&live_pools, __ATOMIC_ACQUIRE)) return pinned_release_cache(), TS_OK;
  for (int d = 0; d < TSC_MAX_DEVICES; d++)
    if (__atomic_load_n(&caches[d], __ATOMIC_ACQUIRE)) ts_cache_empty(caches[d]);
  pinned_release_cache();
  return TS_OK;
}

// A pool no graph uses: its idle segments go back (those still holding a
// live tensor stay until it is freed and the cache is emptied). The pool's
// marks go to the default stream from now on, since its capture stream may
// be destroyed.
extern "C" ts_status ts_cuda_graph_pool_release(int device, uint64_t pool) {
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  pthread_mutex_lock(&routes_lock);
  pool_home &h = homes[(pool >> 1) % 256];
  if (h.pool == pool) h.stream = 0;
  pthread_mutex_unlock(&routes_lock);
  __atomic_sub_fetch(&live_pools, 1, __ATOMIC_ACQ_REL);
  return ts_cuda_empty_cache();
}

extern "C" ts_status ts_cuda_record_stream(void *ptr, int device, uintptr_t stream) {
  ts_cache *c = cache_of(device);
  if (!c) return ts_fail(TS_ERR_OOM, "out of host memory");
  return ts_cache_record_stream(c, ptr, stream);
}

extern "C" ts_status ts_cuda_memory_summary(int device, char *buf, size_t n) {
  ts_cache_stats s;
  ts_status st = ts_cuda_memory_stats(device, &s);
  if (st) return st;
  char name[16];
  snprintf(name, sizeof name, "cuda:%d", resolve(device));
  ts_cache_summary(&s, name, buf, n);
  return TS_OK;
}

// ---- pinned host memory ---------------------------------------------------

// cudaHostAlloc costs milliseconds, so freed page-locked blocks are kept
// for reuse, binned by power-of-two size (a data loader pins every batch).
// A block comes back only after any copy still reading it has landed: the
// storage layer waits for its pending event before freeing.
#define PINNED_BINS 48
static void *pinned_free_list[PINNED_BINS]; // each free block stores the next pointer in its first bytes
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;

static int pinned_bin(size_t n) {
  int b = 9; // 512 bytes at least
  while (b < PINNED_BINS - 1 && ((size_t)1 << b) < n) b++;
  return b;
}

static void *pinned_alloc(void *ctx, size_t n, ts_device dev) {
  int b = pinned_bin(n);
  pthread_mutex_lock(&pinned_lock);
  void *p = pinned_free_list[b];
  if (p) pinned_free_list[b] = *(void **)p;
  pthread_mutex_unlock(&pinned_lock);
  if (p) return p;
  cudaError_t e = cudaHostAlloc(&p, (size_t)1 << b, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (e == cudaErrorStreamCaptureUnsupported || e == cudaErrorStreamCaptureInvalidated ||
        e == cudaErrorStreamCaptureImplicit)
      ts_fail(TS_ERR_DEVICE,
              "pin_memory: page-locked host memory cannot be allocated while a CUDA graph is being captured "
              "(cudaHostAlloc is not permitted during stream capture; the capture is invalidated): pin the tensor "
              "before capturing");
    else
      ts_fail(TS_ERR_OOM, "pin_memory: cannot allocate %zu bytes of page-locked host memory: %s", n,
              cudaGetErrorString(e));
    return NULL;
  }
  return p;
}

static void pinned_free(void *ctx, void *p, size_t n, ts_device dev) {
  int b = pinned_bin(n);
  pthread_mutex_lock(&pinned_lock);
  *(void **)p = pinned_free_list[b];
  pinned_free_list[b] = p;
  pthread_mutex_unlock(&pinned_lock);
}

static void pinned_release_cache(void) {
  pthread_mutex_lock(&pinned_lock);
  for (int b = 0; b < PINNED_BINS; b++) {
    while (pinned_free_list[b]) {
      void *p = pinned_free_list[b];
      pinned_free_list[b] = *(void **)p;
      cudaFreeHost(p);
    }
  }
  pthread_mutex_unlock(&pinned_lock);
}

extern "C" const ts_allocator ts_cuda_pinned_allocator = {pinned_alloc, pinned_free, NULL};

// ---- copies ---------------------------------------------------------------

// An event recorded on stream s, waited for by the host before it reads or
// writes a host buffer a non-blocking copy still uses.
static ts_status record_pending(cudaStream_t s, uintptr_t *pending) {
  cudaEvent_t ev;
  TSC_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaError_t e = cudaEventRecord(ev, s);
  if (e != cudaSuccess) {
    cudaEventDestroy(ev);
    return tsc_cuda_error(e, "cudaEventRecord");
  }
  *pending = (uintptr_t)ev;
  return TS_OK;
}

static ts_status wait_pending(uintptr_t ev) {
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);
  cudaEventDestroy((cudaEvent_t)ev);
  return e == cudaSuccess ? TS_OK : tsc_cuda_error(e, "a non-blocking copy");
}

static bool peer_enabled[TSC_MAX_DEVICES][TSC_MAX_DEVICES];

static ts_status copy_bytes(void *dst, ts_device dd, const void *src, ts_device sd, size_t n, bool non_blocking) {
  int dev = dd.type == TS_CUDA ? dd.index : sd.index; // the copy runs on this device's stream
  tsc_device_guard g(dev);
  if (g.st) return g.st;
  cudaStream_t s = (cudaStream_t)cur_stream[dev];
  if (dd.type == TS_CUDA && sd.type == TS_CUDA && dd.index != sd.index) {
    // the source's stream must be done with src first; peer access when the
    // hardware allows, else the runtime stages through the host
    if (!peer_enabled[dd.index][sd.index]) {
      int can = 0;
      cudaDeviceCanAccessPeer(&can, dd.index, sd.index);
      if (can && cudaDeviceEnablePeerAccess(sd.index, 0) != cudaSuccess) cudaGetLastError();
      peer_enabled[dd.index][sd.index] = true;
    }
    {
      tsc_device_guard gs(sd.index); // stream 0 is each device's own default stream: sync it on its device
      if (gs.st) return gs.st;
      TSC_CHECK(cudaStreamSynchronize((cudaStream_t)cur_stream[sd.index]));
    }
    TSC_CHECK(cudaMemcpyPeerAsync(dst, dd.index, src, sd.index, n, s));
    // The copy runs on dd's stream, but src's block goes back to sd's
    // allocator, which orders reuse on sd's stream only: a temporary source
    // (ts_to_device's contiguous copy) freed on return could be overwritten
    // by sd's next kernel while the copy still reads it. sd's current stream
    // waits for the copy (an event may be waited on from another device).
    cudaEvent_t ev;
    TSC_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaError_t e = cudaEventRecord(ev, s);
    ts_status st = TS_OK;
    if (e == cudaSuccess) {
      tsc_device_guard gs(sd.index); // stream 0 is sd's own default stream only with sd current
      if (gs.st) st = gs.st;
      else e = cudaStreamWaitEvent((cudaStream_t)cur_stream[sd.index], ev, 0);
    }
    cudaEventDestroy(ev); // destruction is deferred until the wait is done
    if (st) return st;
    if (e != cudaSuccess) return tsc_cuda_error(e, "a copy between devices");
  } else {
    cudaMemcpyKind kind = dd.type == TS_CPU ? cudaMemcpyDeviceToHost
                          : sd.type == TS_CPU ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice;
    TSC_CHECK(cudaMemcpyAsync(dst, src, n, kind, s));
  }
  // a blocking copy from or to the host has landed when it returns (as in
  // PyTorch); device-to-device copies stay ordered on the stream
  if (!non_blocking && (dd.type == TS_CPU || sd.type == TS_CPU)) TSC_CHECK(cudaStreamSynchronize(s));
  return TS_OK;
}

static ts_status copy_pending(ts_device dev, uintptr_t *pending) {
  tsc_device_guard g(dev.index);
  if (g.st) return g.st;
  return record_pending((cudaStream_t)cur_stream[dev.index], pending);
}

// ---- the backend ----------------------------------------------------------

static ts_status prepare(ts_device dev) {
  if (dev.index == cur_device) return TS_OK;
  return ts_cuda_set_device(dev.index);
}

static int current_device_fn(void) { return ts_cuda_current_device(); }

static ts_kernel cuda_kernels[TS_OP_COUNT];
static ts_backend cuda_backend;

extern "C" void ts_cuda_backend_init(void) {
  if (ts_backends[TS_CUDA] || ts_cuda_device_count() == 0) return;
  cuda_backend.name = "cuda";
  cuda_backend.kernels = cuda_kernels;
  cuda_backend.allocator = &device_allocator;
  cuda_backend.prepare = prepare;
  cuda_backend.copy_bytes = copy_bytes;
  cuda_backend.copy_pending = copy_pending;
  cuda_backend.current_device = current_device_fn;
  cuda_backend.device_count = ts_cuda_device_count();
  cuda_backend.host_allocator = &ts_cuda_pinned_allocator;
  ts_cuda_kernel_table(cuda_backend.kernels);
  tsc_activity_init();
  cuda_backend.pending_wait = wait_pending;
  ts_backends[TS_CUDA] = &cuda_backend;
}

// For the registry test: the kernel table as it would be, GPU or not.
extern "C" void ts_cuda_kernel_table(ts_kernel *k) {
  tsc_register_copy(k);
  tsc_register_random(k);
  tsc_register_elementwise(k);
  tsc_register_reduce(k);
  tsc_register_linalg(k);
  tsc_register_index(k);
  tsc_register_optim(k);
  tsc_register_amp(k);
  tsc_register_nn(k);
  tsc_register_cudnn(k);
  tsc_register_loss(k);
}
