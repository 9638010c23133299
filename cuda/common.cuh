// What every CUDA kernel file shares: the core's C headers, dtype dispatch and
// conversion, an offset calculator for strided tensors, the current stream,
// launch checks and stream-ordered temporaries. Kernel files follow STYLE.md
// rule 6: kernel, launcher (stream, grid), entry (dtype, shape); each fills
// its slots of the kernel table through tsc_register_<family>.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "ops/ops.h"
#include "core/philox.h"
}
#include "core/loop_plan.h"
#include "core/cuda_api.h"

// ---- registration: one function per family file -------------------------
extern "C" {
void tsc_register_copy(ts_kernel *k);        // copy.cu: COPY FILL ARANGE LINSPACE
void tsc_register_random(ts_kernel *k);      // random.cu: RAND RANDN RANDINT RANDPERM
void tsc_register_elementwise(ts_kernel *k); // elementwise.cu: unary, binary, compare, WHERE, LERP, THRESHOLD_BACKWARD
void tsc_register_reduce(ts_kernel *k);      // reduce.cu: reductions, scans, softmax
void tsc_register_linalg(ts_kernel *k);      // linalg.cu: BMM (cuBLAS / cuBLASLt)
void tsc_register_index(ts_kernel *k);       // index.cu, sort.cu: joining, indexing, sorting
void tsc_register_optim(ts_kernel *k);       // optim.cu: ADAM_STEP
void tsc_register_amp(ts_kernel *k);         // amp.cu: AMP_UNSCALE
void tsc_register_nn(ts_kernel *k);          // nn.cu: im2col, pools, batch norm, ...
void tsc_register_cudnn(ts_kernel *k);       // conv_cudnn.cu: CONV2D_FORWARD/BACKWARD_* (TS_KIND_LIBRARY)
void tsc_register_loss(ts_kernel *k);        // loss.cu: NLL_LOSS, NLL_LOSS_BACKWARD
}

// ---- runtime (device.cu) ----------------------------------------------------
cudaStream_t tsc_stream(void);   // the current stream of the current device
int tsc_sm_count(void);          // multiprocessors of the current device
// ts_fail with CUDA's message, naming `what`, and the CUDA_LAUNCH_BLOCKING hint.
ts_status tsc_cuda_error(cudaError_t e, const char *what);
// After a launch: the launch error, and with CUDA_LAUNCH_BLOCKING=1 the
// kernel's own error (the stream is synchronised).
ts_status tsc_after_launch(const char *what);
// activity.cu: a status a runtime wrapper reported through the CUDA error
// code e (sync debug mode "error", a device assert), taken once; else TS_OK.
ts_status tsc_take_reported(cudaError_t e);
void tsc_activity_init(void); // the simulated device's launch observer
// Device memory for a kernel's scratch, from the caching allocator on the
// current stream: freeing it right after the launches that use it is safe
// (later allocations on this stream run after them). NULL and a message on
// failure (*st set).
void *tsc_temp_alloc(size_t nbytes, ts_status *st);
void tsc_temp_free(void *p);

#define TSC_CHECK(call)                                          \
  do {                                                           \
    cudaError_t tsc_e_ = (call);                                 \
    if (tsc_e_ != cudaSuccess) return tsc_cuda_error(tsc_e_, #call); \
  } while (0)
#define TSC_LAUNCH_CHECK(what)                    \
  do {                                            \
    ts_status tsc_s_ = tsc_after_launch(what);    \
    if (tsc_s_ != TS_OK) return tsc_s_;           \
  } while (0)

// Scratch for one entry: freed when the entry returns, after the launches
// that use it were queued (stream order makes that safe).
struct tsc_temp {
  void *p = nullptr;
  tsc_temp() = default;
  tsc_temp(const tsc_temp &) = delete;
  tsc_temp &operator=(const tsc_temp &) = delete;
  ~tsc_temp() { tsc_temp_free(p); }
  ts_status alloc(size_t n) {
    ts_status st;
    p = tsc_temp_alloc(n, &st);
    return st;
  }
};

// Shared by the index family's files.
ts_status tsc_sort_kernel(const ts_call *c); // sort.cu: SORT and TOPK
// Stable radix sort of 64-bit keys with 32- or 64-bit values (randperm, unique).
ts_status tsc_sort_pairs_u64(const uint64_t *kin, uint64_t *kout, const void *vin, void *vout, bool v64, int64_t n,
                             int end_bit);

// f(I{}) with I = uint32_t when `small` (index math fits 32 bits: the fast case), else int64_t
template <typename F> inline ts_status tsc_with_index(bool small, F &&f) {
  return small ? f(uint32_t{}) : f(int64_t{});
}

#define TSC_GRID_STRIDE(I, e, n)                                                                         \
  for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x, e##_step = (I)gridDim.x * blockDim.x; e < (n); \
       e += e##_step)

// Runs the rest of a scope on `device` (nothing for a negative one), then
// makes the previous device current again; st says whether the switch worked.
struct tsc_device_guard {
  int prev = -1;
  ts_status st = TS_OK;
  explicit tsc_device_guard(int device) {
    if (device < 0) return;
    int cur = ts_cuda_current_device();
    if (device != cur && (st = ts_cuda_set_device(device)) == TS_OK) prev = cur;
  }
  ~tsc_device_guard() {
    if (prev >= 0) ts_cuda_set_device(prev);
  }
  tsc_device_guard(const tsc_device_guard &) = delete;
  tsc_device_guard &operator=(const tsc_device_guard &) = delete;
};

#define TSC_THREADS 256

// Blocks for a grid-stride loop over n items with `per_thread` items each:
// enough to fill the GPU, never past what is needed.
static inline unsigned tsc_blocks(int64_t n, int threads = TSC_THREADS, int per_thread = 1) {
  int64_t need = (n + (int64_t)threads * per_thread - 1) / ((int64_t)threads * per_thread);
  int64_t cap = (int64_t)tsc_sm_count() * 32;
  if (need > cap) need = cap;
  return need < 1 ? 1u : (unsigned)need;
}

// ---- dtypes ---------------------------------------------------------------
// Storage types: float, double, __half, __nv_bfloat16, int64_t, int32_t,
// int16_t, int8_t, uint8_t, bool. Arithmetic on float16 and bfloat16 runs in float (opmath).
template <typename T> struct tsc_opmath { using type = T; };
template <> struct tsc_opmath<__half> { using type = float; };
template <> struct tsc_opmath<__nv_bfloat16> { using type = float; };
template <typename T> using tsc_opmath_t = typename tsc_opmath<T>::type;

template <typename T> struct tsc_is_float { static constexpr bool value = false; };
template <> struct tsc_is_float<float> { static constexpr bool value = true; };
template <> struct tsc_is_float<double> { static constexpr bool value = true; };
template <> struct tsc_is_float<__half> { static constexpr bool value = true; };
template <> struct tsc_is_float<__nv_bfloat16> { static constexpr bool value = true; };

// Conversion between any two storage/opmath types, as the CPU casts
// (src/cpu/copy.c, ts_store_f64): float16 and bfloat16 through float (round
// to nearest even; double rounds to float first), to bool as != 0, float to
// integer truncating, to the narrow integers through int64 (-1.0 -> 255 in
// uint8, as torch; 200.0 -> -56 in int8, as the CPU).
template <typename T> struct tsc_conv {
  template <typename F> __host__ __device__ static T from(F v) { return static_cast<T>(v); }
  __host__ __device__ static T from(__half v) { return static_cast<T>(__half2float(v)); }
  __host__ __device__ static T from(__nv_bfloat16 v) { return static_cast<T>(__bfloat162float(v)); }
};
template <> struct tsc_conv<bool> {
  template <typename F> __host__ __device__ static bool from(F v) { return v != F(0); }
  __host__ __device__ static bool from(bool v) { return v; }
  __host__ __device__ static bool from(__half v) { return __half2float(v) != 0.0f; }
  __host__ __device__ static bool from(__nv_bfloat16 v) { return __bfloat162float(v) != 0.0f; }
};
template <> struct tsc_conv<__half> {
  template <typename F> __host__ __device__ static __half from(F v) { return __float2half_rn((float)v); }
  __host__ __device__ static __half from(double v) { return __float2half_rn((float)v); }
  __host__ __device__ static __half from(__half v) { return v; }
  __host__ __device__ static __half from(__nv_bfloat16 v) { return __float2half_rn(__bfloat162float(v)); }
};
template <> struct tsc_conv<__nv_bfloat16> {
  template <typename F> __host__ __device__ static __nv_bfloat16 from(F v) { return __float2bfloat16_rn((float)v); }
  __host__ __device__ static __nv_bfloat16 from(double v) { return __float2bfloat16_rn((float)v); }
  __host__ __device__ static __nv_bfloat16 from(__half v) { return __float2bfloat16_rn(__half2float(v)); }
  __host__ __device__ static __nv_bfloat16 from(__nv_bfloat16 v) { return v; }
};
template <> struct tsc_conv<uint8_t> {
  template <typename F> __host__ __device__ static uint8_t from(F v) { return static_cast<uint8_t>(v); }
  __host__ __device__ static uint8_t from(float v) { return (uint8_t)(int64_t)v; }
  __host__ __device__ static uint8_t from(double v) { return (uint8_t)(int64_t)v; }
  __host__ __device__ static uint8_t from(__half v) { return (uint8_t)(int64_t)__half2float(v); }
  __host__ __device__ static uint8_t from(__nv_bfloat16 v) { return (uint8_t)(int64_t)__bfloat162float(v); }
};
// The narrow signed integers: floats through int64, as uint8 above.
template <typename N> struct tsc_conv_narrow {
  template <typename F> __host__ __device__ static N from(F v) { return static_cast<N>(v); }
  __host__ __device__ static N from(float v) { return (N)(int64_t)v; }
  __host__ __device__ static N from(double v) { return (N)(int64_t)v; }
  __host__ __device__ static N from(__half v) { return (N)(int64_t)__half2float(v); }
  __host__ __device__ static N from(__nv_bfloat16 v) { return (N)(int64_t)__bfloat162float(v); }
};
template <> struct tsc_conv<int8_t> : tsc_conv_narrow<int8_t> {};
template <> struct tsc_conv<int16_t> : tsc_conv_narrow<int16_t> {};
template <typename To, typename From> __host__ __device__ inline To tsc_cast(From v) { return tsc_conv<To>::from(v); }

// Calls f(T{}) with T the storage type of dt; f returns a ts_status. Use a
// generic lambda: tsc_dispatch(dt, [&](auto tag) { using T = decltype(tag); ... }).
template <typename F> ts_status tsc_dispatch(ts_dtype dt, F &&f) {
  switch (dt) {
  case TS_FLOAT32: return f(float{});
  case TS_FLOAT64: return f(double{});
  case TS_FLOAT16: return f(__half{});
  case TS_BFLOAT16: return f(__nv_bfloat16{});
  case TS_INT64: return f(int64_t{});
  case TS_INT32: return f(int32_t{});
  case TS_INT16: return f(int16_t{});
  case TS_INT8: return f(int8_t{});
  case TS_UINT8: return f(uint8_t{});
  case TS_BOOL: return f(bool{});
  default: return ts_fail(TS_ERR_DTYPE, "unknown dtype %d on cuda", (int)dt);
  }
}
// The same over the four floating dtypes only.
template <typename F> ts_status tsc_dispatch_float(ts_dtype dt, const char *op, F &&f) {
  switch (dt) {
  case TS_FLOAT32: return f(float{});
  case TS_FLOAT64: return f(double{});
  case TS_FLOAT16: return f(__half{});
  case TS_BFLOAT16: return f(__nv_bfloat16{});
  default: return ts_fail(TS_ERR_DTYPE, "%s: expected a floating dtype on cuda, got %s", op, ts_dtype_name(dt));
  }
}

template <typename T> inline T *tsc_ptr(const ts_tensor *t) { return (T *)ts_data(t); } // host side: the device address

// A store that other threads of the launch may make to the same address by
// design: scatter and index_put with a repeated index leave one of the values
// (PyTorch documents the result as nondeterministic). A plain store on a GPU;
// the simulated device checks it as a relaxed atomic store, which races with
// no other such store (a plain store there would be reported as a race).
template <typename T> __device__ __forceinline__ void tsc_store_any(T *p, const T &v) {
#ifdef TSIM_SIMULATED
  tsim_store_any(p, &v, sizeof v);
#else
  *p = v;
#endif
}

// ---- strided offsets ------------------------------------------------------
// Element offsets of N operands that share operand 0's shape (broadcast
// inputs have stride 0), as the CPU iterator: size-1 dims dropped, dims
// merged where every operand is contiguous across them. I is the index type:
// uint32_t when numel < 2^31 (fast division), int64_t otherwise.
template <int N, typename I> struct tsc_offsets {
  int ndim;                      // >= 1 after coalescing; innermost last
  I sizes[TS_MAX_DIMS];
  I strides[N][TS_MAX_DIMS];     // in elements of each operand's dtype

  __device__ __forceinline__ void get(I linear, I off[N]) const {
#pragma unroll
    for (int k = 0; k < N; k++) off[k] = 0;
    for (int d = ndim - 1; d >= 0; d--) {
      I q = linear / sizes[d], r = linear - q * sizes[d];
      linear = q;
#pragma unroll
      for (int k = 0; k < N; k++) off[k] += r * strides[k][d];
    }
  }
};

// Fills o from ops[0..N) (the shape is ops[0]'s). Returns true when every
// operand is contiguous with unit stride over the whole range (one dim,
// stride 1), the case for vectorised kernels.
template <int N, typename I> bool tsc_make_offsets(tsc_offsets<N, I> *o, ts_tensor *const *ops) {
  static_assert(N <= TS_LOOP_MAX_OPS, "more operands than the planner takes");
  ts_loop_plan p;
  ts_loop_plan_init(&p, N, (const ts_tensor *const *)ops, -1);
  const int nd = p.ndim;
  const int64_t *sizes = p.sizes;
  const int64_t(*strides)[TS_MAX_DIMS] = p.strides;
  o->ndim = nd;
  bool contiguous = nd == 1;
  for (int d = 0; d < nd; d++) {
    o->sizes[d] = (I)sizes[d];
    for (int k = 0; k < N; k++) {
      o->strides[k][d] = (I)strides[k][d]; // negative strides never occur (views never flip)
      if (nd == 1 && sizes[0] != 1 && strides[k][0] != 1) contiguous = false; // one element: stride 0, contiguous
    }
  }
  return contiguous;
}

// True when every offset this iteration can produce fits the 32-bit path.
template <int N> bool tsc_fits_32bit(ts_tensor *const *ops) {
  for (int k = 0; k < N; k++) {
    int64_t extent = 1; // largest element offset + 1
    for (int d = 0; d < ops[k]->ndim; d++)
      if (ops[k]->sizes[d] > 0) extent += (ops[k]->sizes[d] - 1) * ops[k]->strides[d];
    if (extent >= INT32_MAX || ts_numel(ops[k]) >= INT32_MAX) return false;
  }
  return true;
}
