// The generic elementwise machinery of the CUDA backend: one output, NIN
// inputs of any storage types, a functor applied per element.
//
//   tsc_elementwise<Out, In...>("what", out, in, f)   out[i] = f(in0[i], in1[i], ...)
//
// f gets storage values (wrap it in tsc_via<Out, C, F> to compute in C and
// convert as the CPU does). Inputs already have out's shape (broadcast
// views with stride 0, ops.h). Three paths:
//  (a) dense: out and every input contiguous (or one value broadcast): each
//      thread loads 16 bytes of the widest operand per step (V elements of
//      every operand), a scalar tail, int64 indices (only adds);
//  (b) misaligned dense: the strided kernel, whose coalesced single dim
//      needs no division;
//  (c) strided: element offsets of tsc_offsets' coalesced dims in uint32
//      math with multiply-shift division (tsc_geom32); an iteration whose
//      offsets pass 2^31 is split until every piece fits.
// An input on the CPU (a wrapped number or a 0-dim CPU tensor, which
// ts_check_same_device lets through as a scalar) is read here on the host
// and passed by value; a broadcast 0-dim device tensor is read once per thread.
#pragma once

#include <stdint.h>
#include <string.h>

#include <type_traits>
#include <utility>

#include "common.cuh"

// Conversions as the CPU makes them: tsc_cast (common.cuh) follows the CPU.
template <typename To, typename From> __host__ __device__ __forceinline__ To tsc_cvt(From v) {
  return tsc_cast<To>(v);
}

// The compute type of an elementwise op on storage type S, as the CPU's:
// float for float/float16/bfloat16, double, and int64 for every integer
// type and bool (int32 and uint8 results wrap when stored).
template <typename S>
using tsc_ew_t = typename std::conditional<tsc_is_float<S>::value, tsc_opmath_t<S>, int64_t>::type;

// Converts the inputs to C, applies f, converts the result to Out.
template <typename Out, typename C, typename F> struct tsc_via {
  F f;
  template <typename... A> __device__ __forceinline__ Out operator()(A... a) const {
    return tsc_cvt<Out>(f(tsc_cvt<C>(a)...));
  }
};
template <typename Out, typename C, typename F> tsc_via<Out, C, F> tsc_make_via(F f) { return tsc_via<Out, C, F>{f}; }

// ---- operands -------------------------------------------------------------
template <typename T, int V> struct alignas(sizeof(T) * V) tsc_vec {
  T v[V];
};

template <typename T> struct tsc_in {
  const T *p;  // device address of the operand's element 0; nullptr: the host value v
  T v;         // the value of a host operand
  bool scalar; // one value for every element: v, or p[0] (a broadcast device scalar)
};

// True when t, over its own shape, is laid out contiguously (size-1 dims
// ignored): the dense path reads it as a flat array.
static inline bool tsc_dense(const ts_tensor *t) {
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->sizes[d] == 1) continue;
    if (t->strides[d] != expect) return false;
    expect *= t->sizes[d];
  }
  return true;
}

// True when every element of t is the same element (stride 0 wherever size > 1).
static inline bool tsc_one_value(const ts_tensor *t) {
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] != 1 && t->strides[d] != 0) return false;
  return true;
}

template <typename T> static tsc_in<T> tsc_make_in(const ts_tensor *t) {
  tsc_in<T> a;
  memset(&a, 0, sizeof a);
  if (t->device.type != TS_CUDA) { // a host scalar (checked by the caller)
    memcpy(&a.v, ts_data(t), sizeof(T));
    a.p = nullptr;
    a.scalar = true;
  } else {
    a.p = (const T *)ts_data(t);
    a.scalar = tsc_one_value(t);
  }
  return a;
}

// ---- kernels --------------------------------------------------------------
template <typename T> __device__ __forceinline__ tsc_in<T> tsc_resolve(tsc_in<T> a) {
  if (a.scalar && a.p) a.v = a.p[0];
  return a;
}

template <int V, typename T> __device__ __forceinline__ tsc_vec<T, V> tsc_load_vec(const tsc_in<T> &a, int64_t i) {
  if (a.scalar) {
    tsc_vec<T, V> r;
#pragma unroll
    for (int j = 0; j < V; j++) r.v[j] = a.v;
    return r;
  }
  return reinterpret_cast<const tsc_vec<T, V> *>(a.p)[i];
}

template <int V, typename Out, typename F, typename... In>
__device__ __forceinline__ void tsc_ew_dense_body(int64_t n, const F &f, Out *out, const tsc_in<In> &...in) {
  const int64_t nvec = n / V;
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  // the tail (fewer than V elements) first: placed after the loop, its copy
  // of f ran with the loop's values still live, and double atan spilled on sm_90
  if (V > 1) {
    const int64_t k = nvec * V + tid;
    if (k < n) out[k] = f((in.scalar ? in.v : in.p[k])...);
  }
  for (int64_t i = tid; i < nvec; i += step) {
    tsc_vec<Out, V> o;
    auto body = [&](const tsc_vec<In, V> &...x) {
#pragma unroll
      for (int j = 0; j < V; j++) o.v[j] = f(x.v[j]...);
    };
    body(tsc_load_vec<V>(in, i)...);
    reinterpret_cast<tsc_vec<Out, V> *>(out)[i] = o;
  }
}

// (a): V elements per operand per step; with V == 1, plain loads.
template <int V, typename Out, typename F, typename... In>
__global__ void __launch_bounds__(TSC_THREADS) tsc_ew_dense_kernel(int64_t n, F f, Out *out, tsc_in<In>... in) {
  tsc_ew_dense_body<V>(n, f, out, tsc_resolve(in)...);
}

template <typename T, typename I> __device__ __forceinline__ T tsc_load_at(const tsc_in<T> &a, I off) {
  return a.p ? a.p[off] : a.v;
}

// Element offsets of N operands in uint32 math, from tsc_offsets' coalesced
// dims, with each division by a size done as a multiply-high and a shift
// (Granlund-Montgomery, as PyTorch's IntDivider): the strided path's cost is
// mostly these divisions. Valid for dividends below 2^31, which the 32-bit
// path guarantees. The outermost dim needs no division.
template <int N> struct tsc_geom32 {
  int ndim;
  uint32_t sizes[TS_MAX_DIMS], magic[TS_MAX_DIMS], shift[TS_MAX_DIMS];
  uint32_t strides[N][TS_MAX_DIMS];

  __device__ __forceinline__ void get(uint32_t linear, uint32_t off[N]) const {
#pragma unroll
    for (int k = 0; k < N; k++) off[k] = 0;
    for (int d = ndim - 1; d > 0; d--) {
      uint32_t q = (__umulhi(linear, magic[d]) + linear) >> shift[d];
      uint32_t r = linear - q * sizes[d];
      linear = q;
#pragma unroll
      for (int k = 0; k < N; k++) off[k] += r * strides[k][d];
    }
#pragma unroll
    for (int k = 0; k < N; k++) off[k] += linear * strides[k][0];
  }
};

template <int N> static void tsc_make_geom32(tsc_geom32<N> *g, ts_tensor *const *ops) {
  tsc_offsets<N, uint32_t> o;
  tsc_make_offsets<N, uint32_t>(&o, ops);
  g->ndim = o.ndim;
  for (int d = 0; d < o.ndim; d++) {
    uint32_t div = o.sizes[d] ? o.sizes[d] : 1, sh = 0;
    while (sh < 32 && ((uint64_t)1 << sh) < div) sh++;
    g->sizes[d] = div;
    g->shift[d] = sh;
    g->magic[d] = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << sh) - div)) / div + 1);
    for (int k = 0; k < N; k++) g->strides[k][d] = o.strides[k][d];
  }
}

template <typename Out, typename F, typename... In, size_t... K>
__device__ __forceinline__ void tsc_ew_strided_body(uint32_t n, const tsc_geom32<1 + sizeof...(In)> &g, const F &f,
                                                    Out *out, std::index_sequence<K...>, const tsc_in<In> &...in) {
  constexpr int N = 1 + sizeof...(In);
  const uint32_t step = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    uint32_t off[N];
    g.get(i, off);
    out[off[0]] = f(tsc_load_at(in, off[K + 1])...);
  }
}

// (b), (c): any strides, 32-bit offsets (tsc_ew_strided splits larger iterations).
template <typename Out, typename F, typename... In>
__global__ void __launch_bounds__(TSC_THREADS)
    tsc_ew_strided_kernel(uint32_t n, tsc_geom32<1 + sizeof...(In)> g, F f, Out *out, tsc_in<In>... in) {
  tsc_ew_strided_body(n, g, f, out, std::index_sequence_for<In...>{}, in...);
}

// ---- launcher -------------------------------------------------------------
template <typename... T> struct tsc_max_size;
template <> struct tsc_max_size<> { static constexpr size_t value = 1; };
template <typename T, typename... R> struct tsc_max_size<T, R...> {
  static constexpr size_t value = sizeof(T) > tsc_max_size<R...>::value ? sizeof(T) : tsc_max_size<R...>::value;
};

template <typename T> static bool tsc_aligned_for(const tsc_in<T> &a, size_t bytes) {
  return a.scalar || ((uintptr_t)a.p % bytes) == 0;
}

template <typename Out, typename... In, typename F, size_t... K>
static ts_status tsc_ew_launch_strided(const char *what, ts_tensor *const *ops, F f, std::index_sequence<K...>) {
  constexpr int N = 1 + sizeof...(In);
  tsc_geom32<N> g;
  tsc_make_geom32<N>(&g, ops);
  uint32_t n = (uint32_t)ts_numel(ops[0]);
  tsc_ew_strided_kernel<<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(n, g, f, tsc_ptr<Out>(ops[0]),
                                                                          tsc_make_in<In>(ops[K + 1])...);
  TSC_LAUNCH_CHECK(what);
  return TS_OK;
}

// The strided path with 32-bit offsets only: an iteration space whose
// offsets pass 2^31 is cut in two along its largest dim (every operand's
// view shifted alike) until each piece fits, as PyTorch does; so no kernel
// needs 64-bit division, and none is compiled.
template <typename Out, typename... In, typename F>
static ts_status tsc_ew_strided(const char *what, ts_tensor *const *ops, F f) {
  constexpr int N = 1 + sizeof...(In);
  if (ts_numel(ops[0]) == 0) return TS_OK;
  if (tsc_fits_32bit<N>(ops)) return tsc_ew_launch_strided<Out, In...>(what, ops, f, std::index_sequence_for<In...>{});
  int d = -1;
  for (int k = 0; k < ops[0]->ndim; k++)
    if (ops[0]->sizes[k] > 1 && (d < 0 || ops[0]->sizes[k] > ops[0]->sizes[d])) d = k;
  if (d < 0) return ts_fail(TS_ERR_OVERFLOW, "%s: element offsets too large for one element", what);
  int64_t half = ops[0]->sizes[d] / 2;
  ts_tensor lo[N], hi[N];
  ts_tensor *plo[N], *phi[N];
  for (int k = 0; k < N; k++) {
    lo[k] = *ops[k];
    hi[k] = *ops[k];
    lo[k].sizes[d] = half;
    hi[k].sizes[d] = ops[k]->sizes[d] - half;
    hi[k].offset += half * ops[k]->strides[d];
    plo[k] = &lo[k];
    phi[k] = &hi[k];
  }
  ts_status st = tsc_ew_strided<Out, In...>(what, plo, f);
  return st ? st : tsc_ew_strided<Out, In...>(what, phi, f);
}

template <typename Out, typename... In, typename F, size_t... K>
static ts_status tsc_elementwise_impl(const char *what, ts_tensor *out, ts_tensor *const *in, F f,
                                      std::index_sequence<K...>) {
  constexpr int NIN = sizeof...(In);
  constexpr int N = NIN + 1;
  const int64_t n = ts_numel(out);
  if (n == 0) return TS_OK;
  for (int k = 0; k < NIN; k++)
    if (in[k]->device.type != TS_CUDA && !tsc_one_value(in[k]))
      return ts_fail(TS_ERR_DEVICE, "%s: an input on the CPU that is not a scalar reached a CUDA kernel", what);
  Out *po = tsc_ptr<Out>(out);
  cudaStream_t s = tsc_stream();

  // (a): out and every input dense or a single value, pointers aligned for V
  constexpr int V = (int)(16 / tsc_max_size<Out, In...>::value);
  bool dense = tsc_dense(out);
  for (int k = 0; k < NIN && dense; k++) dense = in[k]->device.type != TS_CUDA || tsc_one_value(in[k]) || tsc_dense(in[k]);
  if (dense) {
    bool aligned = ((uintptr_t)po % (sizeof(Out) * V)) == 0;
    bool ok[] = {true, tsc_aligned_for(tsc_make_in<In>(in[K]), sizeof(In) * V)...};
    for (bool b : ok) aligned = aligned && b;
    if (aligned) {
      // no more threads than steps: a broadcast device scalar may be out itself
      // (in place, n == 1), and an idle thread's read of it would race with the
      // write (done here, not by an early return, which made two kernels spill on sm_90)
      const int64_t steps = n / V > n % V ? n / V : n % V;
      const int threads = steps < TSC_THREADS ? (steps > 0 ? (int)steps : 1) : TSC_THREADS;
      tsc_ew_dense_kernel<V><<<tsc_blocks(steps, threads), threads, 0, s>>>(n, f, po, tsc_make_in<In>(in[K])...);
      TSC_LAUNCH_CHECK(what);
      return TS_OK;
    }
  }

  // (b), (c): operand 0 is out; dense operands coalesce to one dim
  ts_tensor *ops[N] = {out, in[K]...};
  return tsc_ew_strided<Out, In...>(what, ops, f);
}

// out[i] = f(in[0][i], ..., in[NIN-1][i]) over out's elements; Out and In
// are the storage types the tensors hold (the caller dispatched on dtype).
// `what` names the op in errors.
template <typename Out, typename... In, typename F>
ts_status tsc_elementwise(const char *what, ts_tensor *out, ts_tensor *const *in, F f) {
  return tsc_elementwise_impl<Out, In...>(what, out, in, f, std::index_sequence_for<In...>{});
}

// ---- a device error flag ----------------------------------------------------
// For kernels that meet inputs they cannot compute (integer division by
// zero): the kernel stores a non-zero code, read back after the launches.
struct tsc_flag {
  int *d = nullptr;
  ts_status init() {
    ts_status st;
    d = (int *)tsc_temp_alloc(sizeof(int), &st);
    if (st) return st;
    TSC_CHECK(cudaMemsetAsync(d, 0, sizeof(int), tsc_stream()));
    return TS_OK;
  }
  // Waits for the stream; *code gets the flag.
  ts_status read(int *code) {
    *code = 0;
    TSC_CHECK(cudaMemcpyAsync(code, d, sizeof(int), cudaMemcpyDeviceToHost, tsc_stream()));
    TSC_CHECK(cudaStreamSynchronize(tsc_stream()));
    return TS_OK;
  }
  ~tsc_flag() { tsc_temp_free(d); }
};
