// Force-included (g++ -include) before every cuda/*.cu compiled for the
// simulated device: CUDA's own headers for the types (dim3, __half,
// cudaError_t, ...), then what a host compiler lacks: the built-in indices,
// __shared__ memory, barriers, warp shuffles, atomics and the __*_rn
// intrinsics, with the semantics the hardware gives them. Kernel launches are
// rewritten into tsim::launch by tools/simlaunch.c.
//
// How a kernel runs: each block runs on one worker thread, its threads as
// fibers (Boost.Context). A thread runs until it reaches a barrier or a warp
// operation, then the next one runs; sim/exec.cc releases a barrier when all
// threads of the block are there and reports it when some cannot arrive.
// __shared__ variables live in the block's shared memory (an arena of the
// worker thread): tools/simlaunch.c rewrites each declaration into a
// reference to tsim::shared_var, filled with 0xff bytes when a block starts.
// Every load and store of a kernel is checked (sim/check.cc, through the
// compiler's -fsanitize=thread instrumentation): races, alignment, bytes
// outside a live block of the caching allocator.
#pragma once

// Code that talks to the simulator (cuda/backend.cu's allocator hook) asks this.
#define TSIM_SIMULATED 1

#define __host__
#define __device__
#define __global__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

// Libraries our CUDA code loads at run time come from the simulator: dlopen
// of NVML gives sim/nvml.cc's (a fixed utilisation); others load as usual.
#define dlopen tsim_dlopen
#define dlsym tsim_dlsym

#undef __shared__ // rewritten by tools/simlaunch.c; left in a file it did not see, it fails to compile
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __forceinline__
#define __forceinline__ inline

namespace tsim {

// Where a launch was written, for reports: the kernel as spelled, file, line.
struct site {
  const char *kernel, *file;
  int line;
};
#define TSIM_SITE(k) (::tsim::site{k, __FILE__, __LINE__})

struct launch_cfg {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
};
inline launch_cfg config(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0) {
  return {grid, block, smem, stream};
}

struct block_state;
// One simulated thread: its index and its block (sim/exec.cc).
struct thread_state {
  uint3 tid;
  int linear; // threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
  block_state *blk;
  // For the race checks: 1 + (the block's linear index mod 2^22) << 10 | linear,
  // so a thread's block and warp are bit fields (blocks 2^22 apart look alike);
  // and what orders its accesses: (barriers its block passed mod 1024) << 6 |
  // (warp operations its warp completed mod 64), kept by sim/exec.cc.
  uint32_t serial;
  uint16_t phase;
};
struct block_view {
  uint3 bid;
  dim3 bdim, gdim;
  uint64_t linear; // blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)
  // What orders two accesses of one block (sim/check.cc): the barriers the
  // block has passed, and per warp its completed warp operations.
  uint16_t barriers;
  uint16_t warp_syncs[32];
};
// __thread, not thread_local: no TLS wrapper call on each threadIdx (they need no constructor)
extern __thread thread_state *cur;
extern __thread block_view *cur_block;

// The kernel as the runtime keeps it: called once per simulated thread.
struct kernel_body {
  virtual ~kernel_body() = default;
  virtual void run() = 0;
};
template <class F> struct kernel_body_of final : kernel_body {
  F f;
  explicit kernel_body_of(F &&f) : f(std::move(f)) {}
  void run() override { f(); }
};

// Told of every kernel queued (sim/exec.cc; the CUDA backend counts launches
// with it, as a GPU build wraps cudaLaunchKernel): the kernel as spelled at
// its launch, its grid, block and stream.
using launch_observer_fn = void (*)(const char *kernel, dim3 grid, dim3 block, cudaStream_t stream);
void set_launch_observer(launch_observer_fn f);
void notify_launch(const site &s, const launch_cfg &c);

// Queues the kernel on its stream (sim/stream.cc); pointer arguments are
// checked to be device (or page-locked host) memory.
void enqueue_kernel(const site &s, const launch_cfg &c, kernel_body *body, const void *const *ptrs, int nptrs);

template <class T> inline void collect_pointer(const T &v, const void **ptrs, int &n) {
  if constexpr (std::is_pointer_v<T>) ptrs[n++] = (const void *)v;
}

template <class L, class... A> void launch(const site &s, const launch_cfg &c, L lambda, A &&...args) {
  auto tup = std::make_tuple(std::decay_t<A>(std::forward<A>(args))...);
  const void *ptrs[sizeof...(A) + 1];
  int n = 0;
  std::apply([&](const auto &...v) { (collect_pointer(v, ptrs, n), ...); }, tup);
  auto call = [lambda, tup]() mutable {
    auto copy = tup; // each thread its own parameters, as in CUDA
    std::apply(lambda, copy);
  };
  enqueue_kernel(s, c, new kernel_body_of<decltype(call)>(std::move(call)), ptrs, n);
}

} // namespace tsim

// The caching allocator's hook (cuda/backend.cu), as a custom allocator tells
// AddressSanitizer: [p, p + size) is one block of which the first `live`
// bytes are handed out (0: none, the block is free or cached). Applied in the
// order of the work queued on `stream` (a block freed on the host may still
// be used by work queued before), it poisons the rest for the access checks
// and fills the live bytes with 0xff, as new memory is.
extern "C" void tsim_mark_block(void *p, size_t size, size_t live, cudaStream_t stream);

// A store kernels let other threads of the launch make to the same bytes
// (cuda/common.cuh's tsc_store_any): checked as a relaxed atomic store, so
// it races with no other one (reads and plain stores still race with it).
extern "C" void tsim_store_any(void *p, const void *v, size_t n);

namespace tsim {

// ---- shared memory (sim/exec.cc) ----
// The block's copy of one __shared__ declaration (`key` tells declarations
// apart): placed in the block's shared memory by the first thread that
// reaches it, filled with 0xff bytes (NaN, -1), so a read of a slot no
// thread wrote gives garbage instead of a lucky 0.
void *shared_alloc(const void *key, size_t size, size_t align);
template <class T> inline T &shared_var(const void *key) { return *(T *)shared_alloc(key, sizeof(T), alignof(T)); }

// ---- barriers and warp operations (sim/exec.cc) ----
// `file` and `line` are the call site: threads meeting at a barrier or a warp
// operation must all have reached the same one.
void syncthreads(const char *file, int line);
void syncwarp(unsigned mask, const char *file, int line);
void launch_bounds(int max_threads, int min_blocks = 0);
// Publishes `n` bytes of this thread's value to its warp and waits until the
// lanes of `mask` have all published; returns the warp's 32 values (16 bytes
// a lane) as they were when the last lane arrived.
const unsigned char *warp_exchange(unsigned mask, const void *v, size_t n, const char *what, const char *file,
                                   int line);
void warp_lane_check(unsigned mask, int src_lane, const char *what);
// Fails the launch: a shuffle width that is not a power of two in [1, 32].
void warp_width_check(int width, const char *what);

enum shfl_kind { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
template <class T>
T shfl(unsigned mask, T v, shfl_kind kind, int arg, int width, const char *what, const char *file, int line) {
  static_assert(sizeof(T) <= 16, "a shuffled value has at most 16 bytes");
  if (width < 1 || width > 32 || (width & (width - 1))) {
    warp_width_check(width, what);
    width = 32;
  }
  const unsigned char *snap = warp_exchange(mask, &v, sizeof(T), what, file, line);
  int lane = cur->linear & 31;
  int base = lane & ~(width - 1), src = lane;
  switch (kind) {
  case SHFL_IDX: src = base + (arg & (width - 1)); break;
  case SHFL_UP: src = lane - arg >= base ? lane - arg : lane; break;
  case SHFL_DOWN: src = lane + arg < base + width ? lane + arg : lane; break;
  case SHFL_XOR: src = (lane ^ arg) < base + width ? lane ^ arg : lane; break;
  }
  warp_lane_check(mask, src, what);
  T r;
  memcpy((void *)&r, snap + 16 * src, sizeof(T));
  return r;
}

// ---- atomics: real ones, since blocks run on several worker threads ----
template <class T, class F> inline T atomic_update(T *p, F f) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "atomics on 2, 4 or 8 bytes");
  using U = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  U *w = (U *)p, old = __atomic_load_n(w, __ATOMIC_RELAXED), nw;
  T o;
  do {
    memcpy((void *)&o, &old, sizeof o);
    T n = f(o);
    memcpy(&nw, (const void *)&n, sizeof nw);
  } while (!__atomic_compare_exchange_n(w, &old, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  return o;
}

} // namespace tsim

#define threadIdx (::tsim::cur->tid)
#define blockIdx (::tsim::cur_block->bid)
#define blockDim (::tsim::cur_block->bdim)
#define gridDim (::tsim::cur_block->gdim)
// warpSize: the header's extern const int, defined as 32 in sim/exec.cc
#define TSIM_LAUNCH_BOUNDS(...) ::tsim::launch_bounds(__VA_ARGS__)

// the call site comes with each barrier and warp operation (GCC evaluates
// __builtin_FILE/LINE in a default argument at the caller)
inline void __syncthreads(const char *f = __builtin_FILE(), int l = __builtin_LINE()) { ::tsim::syncthreads(f, l); }
inline void __syncwarp(unsigned mask = 0xffffffffu, const char *f = __builtin_FILE(), int l = __builtin_LINE()) {
  ::tsim::syncwarp(mask, f, l);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

template <class T>
inline T __shfl_sync(unsigned m, T v, int src, int w = 32, const char *f = __builtin_FILE(), int l = __builtin_LINE()) {
  return ::tsim::shfl(m, v, ::tsim::SHFL_IDX, src, w, "__shfl_sync", f, l);
}
template <class T>
inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32, const char *f = __builtin_FILE(), int l = __builtin_LINE()) {
  return ::tsim::shfl(m, v, ::tsim::SHFL_UP, (int)d, w, "__shfl_up_sync", f, l);
}
template <class T>
inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32, const char *f = __builtin_FILE(), int l = __builtin_LINE()) {
  return ::tsim::shfl(m, v, ::tsim::SHFL_DOWN, (int)d, w, "__shfl_down_sync", f, l);
}
template <class T>
inline T __shfl_xor_sync(unsigned m, T v, int x, int w = 32, const char *f = __builtin_FILE(), int l = __builtin_LINE()) {
  return ::tsim::shfl(m, v, ::tsim::SHFL_XOR, x, w, "__shfl_xor_sync", f, l);
}

// Integer atomics: the hardware's wrapping arithmetic.
#define TSIM_INT_ATOMICS(T)                                                                              \
  inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }                  \
  inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }                  \
  inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }                \
  inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }                  \
  inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }                    \
  inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }                  \
  inline T atomicMax(T *p, T v) { return ::tsim::atomic_update(p, [v](T o) { return o < v ? v : o; }); } \
  inline T atomicMin(T *p, T v) { return ::tsim::atomic_update(p, [v](T o) { return v < o ? v : o; }); } \
  inline T atomicCAS(T *p, T cmp, T v) {                                                                 \
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                  \
    return cmp;                                                                                          \
  }
TSIM_INT_ATOMICS(int)
TSIM_INT_ATOMICS(unsigned)
TSIM_INT_ATOMICS(unsigned long long)
TSIM_INT_ATOMICS(long long)
#undef TSIM_INT_ATOMICS
inline unsigned short atomicCAS(unsigned short *p, unsigned short cmp, unsigned short v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
inline float atomicAdd(float *p, float v) { return ::tsim::atomic_update(p, [v](float o) { return o + v; }); }
inline double atomicAdd(double *p, double v) { return ::tsim::atomic_update(p, [v](double o) { return o + v; }); }
inline __half atomicAdd(__half *p, __half v) {
  return ::tsim::atomic_update(p, [v](__half o) { return __float2half_rn(__half2float(o) + __half2float(v)); });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v) {
  return ::tsim::atomic_update(
      p, [v](__nv_bfloat16 o) { return __float2bfloat16_rn(__bfloat162float(o) + __bfloat162float(v)); });
}
inline float atomicExch(float *p, float v) { return ::tsim::atomic_update(p, [v](float) { return v; }); }

// ---- intrinsics: IEEE operations in the named rounding (round to nearest is
// the host's mode; -ffp-contract=off keeps a*b+c two roundings, as __*_rn) ----
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __ll2double_rn(long long v) { return (double)v; }
inline float __double2float_rn(double v) { return (float)v; }
// CUDA's min/max overloads for mixed integer and floating arguments
template <class A, class B> inline std::common_type_t<A, B> min(A a, B b) {
  return b < a ? (std::common_type_t<A, B>)b : (std::common_type_t<A, B>)a;
}
template <class A, class B> inline std::common_type_t<A, B> max(A a, B b) {
  return a < b ? (std::common_type_t<A, B>)b : (std::common_type_t<A, B>)a;
}
inline double __longlong_as_double(long long v) {
  double d;
  memcpy(&d, &v, 8);
  return d;
}
inline long long __double_as_longlong(double d) {
  long long v;
  memcpy(&v, &d, 8);
  return v;
}
inline float __int_as_float(int v) {
  float f;
  memcpy(&f, &v, 4);
  return f;
}
inline int __float_as_int(float f) {
  int v;
  memcpy(&v, &f, 4);
  return v;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v ? __builtin_clz((unsigned)v) : 32; }
inline int __clzll(long long v) { return v ? __builtin_clzll((unsigned long long)v) : 64; }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
template <class T> inline T __ldg(const T *p) { return *p; }
#include <math.h>
inline float rsqrtf(float v) { return 1.0f / sqrtf(v); }
inline double rsqrt(double v) { return 1.0 / sqrt(v); }
inline float __expf(float v) { return expf(v); }
inline float __logf(float v) { return logf(v); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }
