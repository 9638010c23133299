// Device properties, streams, events and NVML utilisation: the runtime calls
// behind the cuda table's device API. Handles are the CUDA objects themselves
// cast to uintptr_t; the binding owns their lifetimes.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "common.cuh"

extern "C" int ts_cuda_driver_version(void) {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) cudaGetLastError(), v = 0;
  return v;
}

extern "C" ts_status ts_cuda_synchronize(int device) {
  if (device < 0) device = ts_cuda_current_device();
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  tsc_device_guard g(device);
  if (g.st) return g.st;
  TSC_CHECK(cudaDeviceSynchronize());
  return TS_OK;
}

extern "C" ts_status ts_cuda_get_properties(int device, ts_cuda_props *out) {
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  cudaDeviceProp p;
  TSC_CHECK(cudaGetDeviceProperties(&p, device));
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", p.name);
  const unsigned char *u = (const unsigned char *)p.uuid.bytes;
  snprintf(out->uuid, sizeof out->uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
           u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  out->total_memory = p.totalGlobalMem;
  out->major = p.major, out->minor = p.minor;
  out->multi_processor_count = p.multiProcessorCount;
  out->l2_cache_size = p.l2CacheSize;
  out->max_threads_per_multi_processor = p.maxThreadsPerMultiProcessor;
  out->warp_size = p.warpSize;
  out->is_integrated = p.integrated;
  out->pci_bus_id = p.pciBusID, out->pci_device_id = p.pciDeviceID;
  return TS_OK;
}

extern "C" ts_status ts_cuda_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes) {
  if (device < 0) device = ts_cuda_current_device();
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  tsc_device_guard g(device);
  if (g.st) return g.st;
  TSC_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
  return TS_OK;
}

extern "C" ts_status ts_cuda_can_access_peer(int device, int peer, bool *out) {
  ts_status st = ts_cuda_check_device(device);
  if (st || (st = ts_cuda_check_device(peer))) return st;
  int can = 0;
  TSC_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  *out = can != 0;
  return TS_OK;
}

// ---- NVML, loaded at run time (the driver ships it; the toolkit may not) ----

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_by_bus_fn)(const char *, void **);
typedef struct { unsigned gpu, memory; } nvml_util;
typedef int (*nvml_util_fn)(void *, nvml_util *);

extern "C" ts_status ts_cuda_utilization(int device, int *percent) {
  static void *lib;
  static nvml_by_bus_fn by_bus;
  static nvml_util_fn util;
  if (device < 0) device = ts_cuda_current_device();
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  if (!lib) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return ts_fail(TS_ERR_UNSUPPORTED, "utilization: NVML (libnvidia-ml.so.1, part of the driver) was not found");
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    by_bus = (nvml_by_bus_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    util = (nvml_util_fn)dlsym(lib, "nvmlDeviceGetUtilizationRates");
    if (!init || !by_bus || !util || init() != 0) {
      by_bus = NULL;
      return ts_fail(TS_ERR_UNSUPPORTED, "utilization: NVML could not be initialised");
    }
  }
  if (!by_bus) return ts_fail(TS_ERR_UNSUPPORTED, "utilization: NVML could not be initialised");
  // by PCI bus id: CUDA_VISIBLE_DEVICES renumbers CUDA's devices, not NVML's
  char bus[64];
  TSC_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  void *h = NULL;
  nvml_util u;
  if (by_bus(bus, &h) != 0 || util(h, &u) != 0)
    return ts_fail(TS_ERR_BACKEND, "utilization: NVML could not read device %d (%s)", device, bus);
  *percent = (int)u.gpu;
  return TS_OK;
}

// ---- streams ----------------------------------------------------------------

extern "C" ts_status ts_cuda_stream_create(int device, int priority, uintptr_t *out) {
  if (device < 0) device = ts_cuda_current_device();
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  tsc_device_guard g(device);
  if (g.st) return g.st;
  int lo = 0, hi = 0; // numerically lower is higher priority; clamp as PyTorch does
  TSC_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  if (priority < hi) priority = hi;
  if (priority > lo) priority = lo;
  cudaStream_t s;
  TSC_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority));
  *out = (uintptr_t)s;
  return TS_OK;
}

extern "C" ts_status ts_cuda_stream_destroy(uintptr_t s) {
  if (s) TSC_CHECK(cudaStreamDestroy((cudaStream_t)s));
  return TS_OK;
}

extern "C" ts_status ts_cuda_stream_synchronize(uintptr_t s, int device) {
  tsc_device_guard g(device); // the default stream 0 means this device's
  if (g.st) return g.st;
  TSC_CHECK(cudaStreamSynchronize((cudaStream_t)s));
  return TS_OK;
}

extern "C" ts_status ts_cuda_stream_query(uintptr_t s, int device, bool *done) {
  tsc_device_guard g(device);
  if (g.st) return g.st;
  cudaError_t e = cudaStreamQuery((cudaStream_t)s);
  if (e == cudaErrorNotReady) return cudaGetLastError(), *done = false, TS_OK;
  if (e != cudaSuccess) return tsc_cuda_error(e, "cudaStreamQuery");
  *done = true;
  return TS_OK;
}

extern "C" ts_status ts_cuda_stream_wait_stream(uintptr_t s, int device, uintptr_t other, int other_device) {
  if (s == other) return TS_OK;
  cudaEvent_t ev;
  cudaError_t e;
  { // the event belongs to other's device, where it is recorded; s may wait on it from any device
    tsc_device_guard g(other_device);
    if (g.st) return g.st;
    TSC_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    e = cudaEventRecord(ev, (cudaStream_t)other);
  }
  if (e == cudaSuccess) {
    tsc_device_guard g(device);
    if (g.st) return cudaEventDestroy(ev), g.st;
    e = cudaStreamWaitEvent((cudaStream_t)s, ev, 0);
  }
  cudaEventDestroy(ev); // destruction is deferred until the wait is done
  return e == cudaSuccess ? TS_OK : tsc_cuda_error(e, "wait_stream");
}

// ---- events -----------------------------------------------------------------

extern "C" ts_status ts_cuda_event_create(int device, bool timing, bool blocking, uintptr_t *out) {
  tsc_device_guard g(device);
  if (g.st) return g.st;
  unsigned flags = (timing ? cudaEventDefault : cudaEventDisableTiming) | (blocking ? cudaEventBlockingSync : 0);
  cudaEvent_t ev;
  TSC_CHECK(cudaEventCreateWithFlags(&ev, flags));
  *out = (uintptr_t)ev;
  return TS_OK;
}

extern "C" ts_status ts_cuda_event_destroy(uintptr_t e) {
  if (e) TSC_CHECK(cudaEventDestroy((cudaEvent_t)e));
  return TS_OK;
}

extern "C" ts_status ts_cuda_event_record(uintptr_t e, uintptr_t stream, int device) {
  tsc_device_guard g(device);
  if (g.st) return g.st;
  TSC_CHECK(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)stream));
  return TS_OK;
}

extern "C" ts_status ts_cuda_event_synchronize(uintptr_t e) {
  TSC_CHECK(cudaEventSynchronize((cudaEvent_t)e));
  return TS_OK;
}

extern "C" ts_status ts_cuda_event_query(uintptr_t e, bool *done) {
  cudaError_t r = cudaEventQuery((cudaEvent_t)e);
  if (r == cudaErrorNotReady) return cudaGetLastError(), *done = false, TS_OK;
  if (r != cudaSuccess) return tsc_cuda_error(r, "cudaEventQuery");
  *done = true;
  return TS_OK;
}

extern "C" ts_status ts_cuda_event_elapsed(uintptr_t start, uintptr_t end, float *ms) {
  TSC_CHECK(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
  return TS_OK;
}

extern "C" ts_status ts_cuda_stream_wait_event(uintptr_t s, uintptr_t e, int device) {
  tsc_device_guard g(device);
  if (g.st) return g.st;
  TSC_CHECK(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
  return TS_OK;
}

// ---- CUDA graphs: capture on a stream, instantiate, launch ------------------

// backend.cu: allocations on stream go to pool while it captures (pool 0: stop)
extern "C" void tsc_route_to_pool(int device, uintptr_t stream, uint64_t pool);

extern "C" ts_status ts_cuda_capture_begin(int device, uintptr_t stream, uint64_t pool, int mode) {
  ts_status st = ts_cuda_check_device(device);
  if (st) return st;
  if (!stream) return ts_fail(TS_ERR_ARG, "CUDA graphs must be captured on a stream other than the default stream");
  tsc_device_guard g(device);
  if (g.st) return g.st;
  tsc_route_to_pool(device, stream, pool);
  cudaError_t e = cudaStreamBeginCapture((cudaStream_t)stream, (cudaStreamCaptureMode)mode);
  if (e != cudaSuccess) {
    tsc_route_to_pool(device, stream, 0);
    return tsc_cuda_error(e, "cudaStreamBeginCapture");
  }
  return TS_OK;
}

extern "C" ts_status ts_cuda_capture_end(int device, uintptr_t stream, uintptr_t *exec) {
  tsc_device_guard g(device);
  if (g.st) return g.st;
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &graph);
  tsc_route_to_pool(device, stream, 0);
  if (e != cudaSuccess) return tsc_cuda_error(e, "cudaStreamEndCapture");
  cudaGraphExec_t x;
  e = cudaGraphInstantiate(&x, graph, 0);
  cudaGraphDestroy(graph); // the executable graph is a copy
  if (e != cudaSuccess) return tsc_cuda_error(e, "cudaGraphInstantiate");
  *exec = (uintptr_t)x;
  return TS_OK;
}

extern "C" ts_status ts_cuda_graph_launch(uintptr_t exec, int device, uintptr_t stream) {
  tsc_device_guard g(device);
  if (g.st) return g.st;
  TSC_CHECK(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream));
  return TS_OK;
}

extern "C" ts_status ts_cuda_graph_destroy(uintptr_t exec) {
  if (exec) TSC_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)exec));
  return TS_OK;
}

extern "C" ts_status ts_cuda_stream_is_capturing(uintptr_t stream, int device, bool *out) {
  tsc_device_guard g(device);
  if (g.st) return g.st;
  cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
  TSC_CHECK(cudaStreamIsCapturing((cudaStream_t)stream, &s));
  *out = s != cudaStreamCaptureStatusNone;
  return TS_OK;
}
