// The CUDA backend's choke points for device activity (src/core/activity.h):
// every kernel launch, copy, fill and host synchronisation that our code,
// CUB included, asks of the runtime passes through here, so the counters and
// the profiler see all of them and the sync debug mode checks every wait.
//
// How: the link wraps the runtime's entry points (the Makefile's CUDA_WRAP,
// -Wl,--wrap=cudaStreamSynchronize ...): a call to X from any object lands in
// __wrap_X below, which calls the runtime's __real_X and notes it. nvcc's
// launch stubs call __cudaLaunchKernel (CUDA 13) or cudaLaunchKernel (older
// toolkits): both are wrapped on a GPU build. The simulated device has no
// launch stubs (tools/simlaunch.c rewrites <<<>>> into calls of the
// simulator), so its launches come from the simulator's launch observer;
// its copies and synchronisations are wrapped as on a GPU.
//
// Library kernels: cuBLAS and cuBLASLt launch theirs through the driver,
// unseen, so each matrix product call (cublasGemmStridedBatchedEx,
// cublasLtMatmul, also wrapped) counts as one launch, of a kernel named after
// the call: the least a GPU runs (cuBLAS may split a product in two). cuDNN's
// kernels are not counted.
//
// After every synchronisation the device-assert record (device_assert.cuh) is
// read: a kernel's report becomes the error of that synchronisation.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cxxabi.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "device_assert.cuh"
extern "C" {
#include "core/activity.h"
#include "ops/op_loss.h"
#include "core/profiler.h"
}

static inline int64_t now_if(bool timed) { return timed ? ts_monotonic_ns() : 0; }

// ---- errors reported through a runtime status -------------------------------
// A wrapper that must fail the caller (sync debug mode "error", a device
// assert) sets the message with ts_fail, keeps the status here and returns a
// CUDA error code; tsc_cuda_error (device.cu) hands the status on instead of
// describing the code.
static thread_local ts_status reported = TS_OK;

ts_status tsc_take_reported(cudaError_t e) {
  if (!reported || (e != cudaErrorAssert && e != cudaErrorNotPermitted)) return TS_OK;
  ts_status st = reported;
  reported = TS_OK;
  return st;
}

// ---- device asserts ---------------------------------------------------------
static tsc_assert_record *assert_record;
static std::mutex assert_lock;

tsc_assert_record *tsc_assert_record_get(ts_status *st) {
  *st = TS_OK;
  std::lock_guard<std::mutex> g(assert_lock);
  if (assert_record) return assert_record;
  void *p = NULL;
  // mapped into every device; with unified addressing (every 64-bit
  // platform CUDA supports) the host address is the device address
  cudaError_t e = cudaHostAlloc(&p, sizeof(tsc_assert_record), cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    *st = tsc_cuda_error(e, "cudaHostAlloc of the device-assert record");
    return NULL;
  }
  memset(p, 0, sizeof(tsc_assert_record));
  return assert_record = (tsc_assert_record *)p;
}

// After a wait: a report from a kernel that has run becomes this thread's error.
static bool take_device_assert(void) {
  tsc_assert_record *r = __atomic_load_n(&assert_record, __ATOMIC_ACQUIRE);
  if (!r || !*(volatile int *)&r->ready) return false;
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  long long v[3] = {r->v[0], r->v[1], r->v[2]};
  int op = r->op, code = r->code;
  r->ready = 0;
  __atomic_store_n(&r->claimed, 0, __ATOMIC_RELEASE); // the next failing kernel may report
  reported = ts_loss_device_error((ts_op)op, code, v);
  return true;
}

// ---- synchronisations -------------------------------------------------------
// A quiet wait (a tool's, CUDA_LAUNCH_BLOCKING's) is not noted, but still
// reports a device assert: the kernel's error is due at the first wait after it.
static cudaError_t after_sync(const char *api, uintptr_t stream, bool timed, int64_t t0, cudaError_t e) {
  ts_status st = ts_activity_is_quiet() ? TS_OK : ts_note_sync(api, ts_cuda_current_device(), stream, t0, now_if(timed));
  if (e != cudaSuccess) return e; // the runtime's own error comes first
  if (take_device_assert()) return cudaErrorAssert;
  if (st) return reported = st, cudaErrorNotPermitted;
  return cudaSuccess;
}

extern "C" {
cudaError_t __real_cudaStreamSynchronize(cudaStream_t s);
cudaError_t __real_cudaDeviceSynchronize(void);
cudaError_t __real_cudaEventSynchronize(cudaEvent_t e);
cudaError_t __real_cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind);
cudaError_t __real_cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s);
cudaError_t __real_cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t s);
cudaError_t __real_cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);

cudaError_t __wrap_cudaStreamSynchronize(cudaStream_t s) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  return after_sync("cudaStreamSynchronize", (uintptr_t)s, timed, t0, __real_cudaStreamSynchronize(s));
}

cudaError_t __wrap_cudaDeviceSynchronize(void) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  return after_sync("cudaDeviceSynchronize", 0, timed, t0, __real_cudaDeviceSynchronize());
}

cudaError_t __wrap_cudaEventSynchronize(cudaEvent_t ev) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  return after_sync("cudaEventSynchronize", 0, timed, t0, __real_cudaEventSynchronize(ev));
}

// ---- copies and fills -------------------------------------------------------
static const char *copy_name(cudaMemcpyKind kind) {
  switch (kind) {
  case cudaMemcpyHostToDevice: return "Memcpy HtoD";
  case cudaMemcpyDeviceToHost: return "Memcpy DtoH";
  case cudaMemcpyDeviceToDevice: return "Memcpy DtoD";
  case cudaMemcpyHostToHost: return "Memcpy HtoH";
  default: return "Memcpy";
  }
}

// cudaMemcpy waits for the device: a copy and a synchronisation
cudaError_t __wrap_cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  cudaError_t e = __real_cudaMemcpy(dst, src, n, kind);
  int d = ts_cuda_current_device();
  ts_note_copy("cudaMemcpy", copy_name(kind), false, (int64_t)n, d, 0, t0, now_if(timed));
  return after_sync("cudaMemcpy", 0, timed, t0, e);
}

cudaError_t __wrap_cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  cudaError_t e = __real_cudaMemcpyAsync(dst, src, n, kind, s);
  if (e == cudaSuccess && n)
    ts_note_copy("cudaMemcpyAsync", copy_name(kind), false, (int64_t)n, ts_cuda_current_device(), (uintptr_t)s, t0,
                 now_if(timed));
  return e;
}

cudaError_t __wrap_cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t s) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  cudaError_t e = __real_cudaMemcpyPeerAsync(dst, dd, src, sd, n, s);
  if (e == cudaSuccess && n) ts_note_copy("cudaMemcpyPeerAsync", "Memcpy PtoP", false, (int64_t)n, dd, (uintptr_t)s, t0, now_if(timed));
  return e;
}

cudaError_t __wrap_cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  cudaError_t e = __real_cudaMemsetAsync(p, v, n, s);
  if (e == cudaSuccess && n)
    ts_note_copy("cudaMemsetAsync", "Memset", true, (int64_t)n, ts_cuda_current_device(), (uintptr_t)s, t0, now_if(timed));
  return e;
}
} // extern "C"

// ---- launches -----------------------------------------------------------------
static void note_launch(const char *name, dim3 grid, dim3 block, cudaStream_t s, int64_t t0, int64_t t1) {
  const uint32_t g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
  ts_note_launch("cudaLaunchKernel", name, g, b, ts_cuda_current_device(), (uintptr_t)s, t0, t1);
}

#ifdef TSIM_SITE // the simulated device: its observer reports each queued kernel
static void sim_launched(const char *kernel, dim3 grid, dim3 block, cudaStream_t s) {
  int64_t t = now_if(ts_activity_timed());
  note_launch(kernel, grid, block, s, t, t);
}
#else
// Kernel names, demangled once per kernel and kept for the process (the
// profiler's events point at them).
static const char *kernel_name(const void *func) {
  static std::mutex m;
  static std::unordered_map<const void *, const char *> names;
  std::lock_guard<std::mutex> g(m);
  auto it = names.find(func);
  if (it != names.end()) return it->second;
  const char *raw = NULL;
  if (cudaFuncGetName(&raw, func) != cudaSuccess || !raw) cudaGetLastError(), raw = "(unnamed kernel)";
  int status = 0;
  char *dem = abi::__cxa_demangle(raw, NULL, NULL, &status);
  const char *name = dem ? dem : strdup(raw);
  if (!name) name = "(unnamed kernel)";
  names.emplace(func, name);
  return name;
}

extern "C" {
cudaError_t __real_cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t s);
cudaError_t __wrap_cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t s) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  cudaError_t e = __real_cudaLaunchKernel(func, grid, block, args, smem, s);
  if (e == cudaSuccess) note_launch(timed ? kernel_name(func) : NULL, grid, block, s, t0, now_if(timed));
  return e;
}
#if CUDART_VERSION >= 13000 // nvcc's launch stubs call this one
cudaError_t __real___cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t s);
cudaError_t __wrap___cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t s) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  cudaError_t e = __real___cudaLaunchKernel(k, grid, block, args, smem, s);
  if (e == cudaSuccess) note_launch(timed ? kernel_name((const void *)k) : NULL, grid, block, s, t0, now_if(timed));
  return e;
}
#endif
} // extern "C"
#endif

// ---- library products: one launch each (see the top) --------------------------
static void note_library(const char *api, const char *kernel, cudaStream_t s, int64_t t0, int64_t t1) {
  const uint32_t none[3] = {0, 0, 0}; // the library's choice
  ts_note_launch(api, kernel, none, none, ts_cuda_current_device(), (uintptr_t)s, t0, t1);
}

extern "C" {
cublasStatus_t __real_cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void *alpha, const void *A, cudaDataType at,
                                                 int lda, long long sa, const void *B, cudaDataType bt, int ldb,
                                                 long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
                                                 long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo);
cublasStatus_t __wrap_cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void *alpha, const void *A, cudaDataType at,
                                                 int lda, long long sa, const void *B, cudaDataType bt, int ldb,
                                                 long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
                                                 long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  cublasStatus_t r = __real_cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta,
                                                       C, ct, ldc, sc, batch, comp, algo);
  // the handle's stream is the current one: linalg.cu sets it before each call
  if (r == CUBLAS_STATUS_SUCCESS) note_library("cublasGemmStridedBatchedEx", "gemm (cublasGemmStridedBatchedEx)",
                                               tsc_stream(), t0, now_if(timed));
  return r;
}

cublasStatus_t __real_cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                                     cublasLtMatrixLayout_t Ad, const void *B, cublasLtMatrixLayout_t Bd,
                                     const void *beta, const void *C, cublasLtMatrixLayout_t Cd, void *D,
                                     cublasLtMatrixLayout_t Dd, const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn,
                                     cudaStream_t s);
cublasStatus_t __wrap_cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                                     cublasLtMatrixLayout_t Ad, const void *B, cublasLtMatrixLayout_t Bd,
                                     const void *beta, const void *C, cublasLtMatrixLayout_t Cd, void *D,
                                     cublasLtMatrixLayout_t Dd, const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn,
                                     cudaStream_t s) {
  bool timed = ts_activity_timed();
  int64_t t0 = now_if(timed);
  cublasStatus_t r = __real_cublasLtMatmul(h, desc, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wsn, s);
  if (r == CUBLAS_STATUS_SUCCESS) note_library("cublasLtMatmul", "gemm (cublasLtMatmul)", s, t0, now_if(timed));
  return r;
}
} // extern "C"

void tsc_activity_init(void) {
#ifdef TSIM_SITE
  tsim::set_launch_observer(sim_launched);
#endif
}
