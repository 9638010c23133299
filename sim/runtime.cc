// The simulated device's runtime: configuration, errors as CUDA reports them,
// devices with an H100's properties. See sim/sim.h for the other files.
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern "C" const int warpSize = 32;

namespace tsim {

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}

// TENSH_SIM_DEVICES devices, of which CUDA_VISIBLE_DEVICES shows a list as
// CUDA does: ordinals in order, up to the first that is invalid or repeated.
int device_count() {
  static int n = [] {
    long v = env_long("TENSH_SIM_DEVICES", 1);
    int all = v < 0 ? 0 : v > 16 ? 16 : (int)v;
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (!vis) return all;
    int shown = 0;
    bool seen[16] = {false};
    for (const char *p = vis; *p;) {
      char *end;
      long d = strtol(p, &end, 10);
      if (end == p || d < 0 || d >= all || seen[d]) break;
      seen[d] = true, shown++;
      p = *end == ',' ? end + 1 : end;
      if (*end != ',' && *end) break;
    }
    return shown;
  }();
  return n;
}

size_t device_memory() {
  static size_t n = [] {
    const char *v = getenv("TENSH_SIM_MEMORY");
    if (!v || !*v) return (size_t)4 << 30;
    char *end;
    double x = strtod(v, &end);
    switch (*end) {
    case 'k': case 'K': x *= 1 << 10; break;
    case 'm': case 'M': x *= 1 << 20; break;
    case 'g': case 'G': x *= 1 << 30; break;
    }
    return x < (1 << 20) ? (size_t)1 << 20 : (size_t)x;
  }();
  return n;
}

int worker_count() {
  static int n = [] {
    long v = env_long("TENSH_SIM_WORKERS", 0);
    if (v <= 0) v = sysconf(_SC_NPROCESSORS_ONLN);
    return v < 1 ? 1 : v > 64 ? 64 : (int)v;
  }();
  return n;
}

bool protect_mode() {
  static bool on = env_long("TENSH_SIM_PROTECT", 1) != 0;
  return on;
}

const char *schedule_mode() {
  static const char *m = [] {
    const char *v = getenv("TENSH_SIM_SCHEDULE");
    return v && *v ? v : "alternate";
  }();
  return m;
}

std::recursive_mutex &lock() {
  static std::recursive_mutex m;
  return m;
}

// ---- errors ----

static thread_local cudaError_t last_error = cudaSuccess;
static cudaError_t sticky = cudaSuccess;
static cudaError_t detail_code = cudaSuccess;
static char detail[1024];

cudaError_t fail(cudaError_t e, bool is_sticky, const char *fmt, ...) {
  char msg[sizeof detail - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  // a fault the context does not survive is printed where it happens; an
  // ordinary error (out of memory, a bad argument) comes back with its code,
  // and cudaGetErrorString gives the detail
  if (is_sticky) fprintf(stderr, "tensh-sim: %s: %s\n", cudaGetErrorName(e), msg);
  if (detail_code == cudaSuccess || !sticky) { // the first fault explains the rest
    detail_code = e;
    snprintf(detail, sizeof detail, "%s", msg);
  }
  if (is_sticky && sticky == cudaSuccess) sticky = e;
  last_error = e;
  return e;
}

cudaError_t sticky_error() { return sticky; }

} // namespace tsim

using namespace tsim;

// Every entry point returns the sticky error once the context is broken, as CUDA does.
#define TSIM_ENTER()                                        \
  std::lock_guard<std::recursive_mutex> tsim_guard(lock()); \
  if (sticky_error()) return last_error = sticky_error()

struct err_name {
  cudaError_t e;
  const char *name, *text;
};
static const err_name errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled",
     "peer access is already enabled"},
    {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress", "misaligned address"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
};

static const err_name *find_error(cudaError_t e) {
  for (const err_name &n : errors)
    if (n.e == e) return &n;
  return NULL;
}

extern "C" {

const char *cudaGetErrorName(cudaError_t e) {
  const err_name *n = find_error(e);
  return n ? n->name : "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  const err_name *n = find_error(e);
  const char *text = n ? n->text : "unknown error";
  if (e != detail_code || !detail[0]) return text;
  static thread_local char buf[sizeof detail + 128];
  snprintf(buf, sizeof buf, "%s [simulated device: %s]", text, detail);
  return buf;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return sticky ? sticky : e;
}

cudaError_t cudaPeekAtLastError(void) { return sticky ? sticky : last_error; }

cudaError_t cudaGetDeviceCount(int *n) {
  *n = device_count();
  return *n ? cudaSuccess : (last_error = cudaErrorNoDevice);
}

cudaError_t cudaRuntimeGetVersion(int *v) { return *v = CUDART_VERSION, cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { return *v = CUDART_VERSION, cudaSuccess; }

} // extern "C"

static thread_local int cur_dev = 0;
int tsim::current_device() { return cur_dev; }

static cudaError_t check_device(int d) {
  if (d < 0 || d >= device_count())
    return fail(cudaErrorInvalidDevice, false, "device %d: the simulator has %d device%s (TENSH_SIM_DEVICES)", d,
                device_count(), device_count() == 1 ? "" : "s");
  return cudaSuccess;
}

extern "C" {

cudaError_t cudaSetDevice(int d) {
  TSIM_ENTER();
  cudaError_t e = check_device(d);
  if (!e) cur_dev = d;
  return e;
}

cudaError_t cudaGetDevice(int *d) { return *d = cur_dev, cudaSuccess; }

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
  TSIM_ENTER();
  if (cudaError_t e = check_device(d)) return e;
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "tensh simulated H100 (CPU)");
  for (int i = 0; i < 16; i++) p->uuid.bytes[i] = (char)(0x51 + i * 7 + d);
  p->totalGlobalMem = device_memory();
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = 227 << 10;
  p->sharedMemPerMultiprocessor = 228 << 10;
  p->regsPerBlock = p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff, p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->totalConstMem = 64 << 10;
  p->major = 9, p->minor = 0;
  p->multiProcessorCount = 132;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxBlocksPerMultiProcessor = 32;
  p->l2CacheSize = 50 << 20;
  p->concurrentKernels = 1, p->asyncEngineCount = 3, p->unifiedAddressing = 1, p->canMapHostMemory = 1;
  p->streamPrioritiesSupported = 1, p->managedMemory = 0, p->memoryBusWidth = 5120;
  p->pciBusID = 0x18 + d, p->pciDeviceID = 0, p->pciDomainID = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) {
  TSIM_ENTER();
  if (cudaError_t e = check_device(d)) return e;
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, d);
  switch (a) {
  case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
  case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
  case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
  case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
  case cudaDevAttrWarpSize: *v = 32; break;
  case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
  case cudaDevAttrMaxGridDimX: *v = p.maxGridSize[0]; break;
  case cudaDevAttrMaxGridDimY: *v = p.maxGridSize[1]; break;
  case cudaDevAttrMaxGridDimZ: *v = p.maxGridSize[2]; break;
  case cudaDevAttrL2CacheSize: *v = p.l2CacheSize; break;
  default: return fail(cudaErrorInvalidValue, false, "cudaDeviceGetAttribute: attribute %d is not simulated", (int)a);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *buf, int n, int d) {
  TSIM_ENTER();
  if (cudaError_t e = check_device(d)) return e;
  snprintf(buf, (size_t)n, "0000:%02x:00.0", 0x18 + d);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer) {
  TSIM_ENTER();
  if (cudaError_t e = check_device(d)) return e;
  if (cudaError_t e = check_device(peer)) return e;
  *can = d != peer;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
  TSIM_ENTER();
  static bool enabled[16][16];
  if (cudaError_t e = check_device(peer)) return e;
  if (peer == cur_dev || flags) return fail(cudaErrorInvalidDevice, false, "cudaDeviceEnablePeerAccess(%d) on device %d", peer, cur_dev);
  if (enabled[cur_dev][peer]) return last_error = cudaErrorPeerAccessAlreadyEnabled;
  enabled[cur_dev][peer] = true;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  TSIM_ENTER();
  if (cudaError_t e = capture_device_sync(cur_dev)) return e;
  drain_device(cur_dev);
  return sticky_error();
}

} // extern "C"
