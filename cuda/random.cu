// CUDA random kernels over Philox (src/core/philox.h): rand, randn, randint and
// randperm. Element j of the (contiguous) output draws counter offset + j
// (rand below float64: word j % 4 of counter offset + j / 4, as the CPU)
// and goes through the CPU's formulas (src/cpu/random.c) operation for
// operation, so a seed gives the same tensor on either device. Device code
// contracts a*b + c into one fused multiply-add, which rounds once where the
// CPU rounds twice: the formulas spell their products and sums with
// __dmul_rn/__dadd_rn, which are never fused. Stores round as ts_store_f64
// and ts_store_i64 do (float16 and bfloat16 through float).
#include <mutex>
#include <type_traits>

#include "common.cuh"
#include "ops/op_random.h"

// ---- random numbers inside a CUDA graph -----------------------------------------
//
// A captured kernel keeps the arguments it was captured with, so a Philox
// seed and offset passed by value would draw the same numbers on every
// replay. While a stream captures for a graph (ts_cuda_graph_rng_begin),
// its random kernels read the seed and a base offset from the graph's
// device memory instead and add their own offset within the capture (the
// counters the capture reserved, counted from its first); each replay first
// writes the generator's seed and next offset there (ts_cuda_graph_rng_set)
// and the generator moves past the capture's counters: PyTorch's
// seed_extragraph / offset_extragraph and wholegraph increment.

namespace {

struct rng_capture {
  int device;
  cudaStream_t stream;
  const uint64_t *state; // device memory: seed, base offset
  uint64_t start;        // the generator's offset when the capture began
  bool used;
};

#define RNG_CAPTURES 16 // captures underway at once
std::mutex g_rng_mu;
rng_capture g_rng[RNG_CAPTURES];
int g_nrng;

// The current stream's capture, if it captures for a graph: its state and
// the offset its counters count from; marks the capture as drawing.
const uint64_t *capture_state(uint64_t *start) {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return NULL;
  cudaStream_t s = tsc_stream();
  std::lock_guard<std::mutex> lock(g_rng_mu);
  for (int i = 0; i < g_nrng; i++)
    if (g_rng[i].device == dev && g_rng[i].stream == s) {
      g_rng[i].used = true;
      *start = g_rng[i].start;
      return g_rng[i].state;
    }
  return NULL;
}

// A kernel's Philox key and counter base: the call's, or, inside a graph,
// the replay's seed and base offset plus the draw's offset within the capture.
struct philox_args {
  uint64_t seed, off;
  const uint64_t *state;
  __device__ void resolve(uint64_t *s, uint64_t *o) const {
    *s = state ? state[0] : seed;
    *o = state ? state[1] + off : off;
  }
};

philox_args philox_of(uint64_t seed, uint64_t off) {
  uint64_t start = 0;
  const uint64_t *st = capture_state(&start);
  return st ? philox_args{0, off - start, st} : philox_args{seed, off, NULL};
}

__global__ void rng_set_kernel(uint64_t *state, uint64_t seed, uint64_t off) { state[0] = seed, state[1] = off; }

} // namespace

extern "C" ts_status ts_cuda_graph_rng_begin(int device, uintptr_t stream, void *state, uint64_t start) {
  std::lock_guard<std::mutex> lock(g_rng_mu);
  if (g_nrng == RNG_CAPTURES)
    return ts_fail(TS_ERR_ARG, "CUDA graphs: more than %d captures underway at once", RNG_CAPTURES);
  g_rng[g_nrng++] = {device, (cudaStream_t)stream, (const uint64_t *)state, start, false};
  return TS_OK;
}

extern "C" bool ts_cuda_graph_rng_end(int device, uintptr_t stream) {
  std::lock_guard<std::mutex> lock(g_rng_mu);
  for (int i = 0; i < g_nrng; i++)
    if (g_rng[i].device == device && g_rng[i].stream == (cudaStream_t)stream) {
      bool used = g_rng[i].used;
      g_rng[i] = g_rng[--g_nrng];
      return used;
    }
  return false;
}

extern "C" ts_status ts_cuda_graph_rng_set(void *state, int device, uintptr_t stream, uint64_t seed, uint64_t offset) {
  tsc_device_guard g(device);
  if (g.st) return g.st;
  rng_set_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((uint64_t *)state, seed, offset);
  return tsc_after_launch("CUDA graph replay (the generator's state)");
}

namespace {



// ts_store_f64 / ts_store_i64 on the device: the same casts, in the same order.
template <typename T> struct rstore {
  __device__ static T f64(double v) { return (T)v; }
  __device__ static T i64(int64_t v) { return (T)v; }
};
template <> struct rstore<float> {
  __device__ static float f64(double v) { return __double2float_rn(v); }
  __device__ static float i64(int64_t v) { return f64(__ll2double_rn(v)); }
};
template <> struct rstore<double> {
  __device__ static double f64(double v) { return v; }
  __device__ static double i64(int64_t v) { return __ll2double_rn(v); }
};
template <> struct rstore<__half> {
  __device__ static __half f64(double v) { return __float2half_rn(__double2float_rn(v)); }
  __device__ static __half i64(int64_t v) { return f64(__ll2double_rn(v)); }
};
template <> struct rstore<__nv_bfloat16> {
  __device__ static __nv_bfloat16 f64(double v) { return __float2bfloat16_rn(__double2float_rn(v)); }
  __device__ static __nv_bfloat16 i64(int64_t v) { return f64(__ll2double_rn(v)); }
};
template <typename N> struct rstore_narrow { // the 8- and 16-bit integers: doubles through int64
  __device__ static N f64(double v) { return (N)(int64_t)v; }
  __device__ static N i64(int64_t v) { return (N)v; }
};
template <> struct rstore<uint8_t> : rstore_narrow<uint8_t> {};
template <> struct rstore<int8_t> : rstore_narrow<int8_t> {};
template <> struct rstore<int16_t> : rstore_narrow<int16_t> {};
template <> struct rstore<bool> {
  __device__ static bool f64(double v) { return v != 0; }
  __device__ static bool i64(int64_t v) { return v != 0; }
};

enum { MODE_RAND, MODE_RANDN, MODE_RANDINT, MODE_KEEP /* RAND's TS_RAND_KEEP: dropout's factors */ };

// a float dtype's value back in double (the keep mode compares as the dtype holds them)
template <typename T> __device__ double rdouble(T v) { return (double)(float)v; }
template <> __device__ double rdouble<double>(double v) { return v; }

// lo, hi: rand's [lo, hi), randn's (mean, std); ilo, range: randint's [ilo, ilo + range).
template <typename T>
__global__ void random_kernel(T *out, int64_t n, philox_args pa, int mode, double lo, double hi, uint64_t ilo,
                              uint64_t range) {
  uint64_t seed, off;
  pa.resolve(&seed, &off);
  if (mode != MODE_RANDN && mode != MODE_RANDINT && !std::is_same<T, double>::value) { // four elements a counter
    const int64_t groups = (n + 3) / 4;
    const double thr = mode == MODE_KEEP ? rdouble(rstore<T>::f64(lo)) : 0;
    TSC_GRID_STRIDE(int64_t, g, groups) {
      ts_u32x4 r = ts_philox(seed, off + (uint64_t)g);
      for (int l = 0; l < 4 && 4 * g + l < n; l++) {
        const double u = (double)ts_uniform_f32(r.v[l]);
        out[4 * g + l] = mode == MODE_KEEP ? rstore<T>::f64(rdouble(rstore<T>::f64(u)) >= thr ? hi : 0)
                                           : rstore<T>::f64(__dadd_rn(lo, __dmul_rn(__dsub_rn(hi, lo), u)));
      }
    }
    return;
  }
  TSC_GRID_STRIDE(int64_t, j, n) {
    ts_u32x4 r = ts_philox(seed, off + (uint64_t)j);
    if (mode == MODE_RAND || mode == MODE_KEEP) { // float64 (the others took the branch above)
      double u = std::is_same<T, double>::value ? ts_uniform_f64(r.v[0], r.v[1]) : (double)ts_uniform_f32(r.v[0]);
      out[j] = rstore<T>::f64(mode == MODE_KEEP ? (u >= lo ? hi : 0) : __dadd_rn(lo, __dmul_rn(__dsub_rn(hi, lo), u)));
    } else if (mode == MODE_RANDN) { // Box-Muller on two uniforms in (0, 1], in double as the CPU
      double u1 = __dsub_rn(1.0, ts_uniform_f64(r.v[0], r.v[1])), u2 = ts_uniform_f64(r.v[2], r.v[3]);
      double z = __dmul_rn(sqrt(__dmul_rn(-2.0, log(u1))), cos(__dmul_rn(6.283185307179586, u2)));
      out[j] = rstore<T>::f64(__dadd_rn(lo, __dmul_rn(hi, z)));
    } else {
      uint64_t x = ((uint64_t)r.v[0] << 32) | r.v[1];
      out[j] = rstore<T>::i64((int64_t)(ilo + x % range));
    }
  }
}

// RAND, RANDN, RANDINT: i[0] seed, i[1] offset; f[0], f[1] or i[2], i[3] (ops.def).
ts_status k_random(const ts_call *c) {
  ts_tensor *out = c->out[0];
  int64_t n = ts_numel(out);
  if (n == 0) return TS_OK;
  int mode = c->op == TS_OP_RAND ? (c->i[2] == TS_RAND_KEEP ? MODE_KEEP : MODE_RAND)
             : c->op == TS_OP_RANDN ? MODE_RANDN : MODE_RANDINT;
  uint64_t range = (uint64_t)c->i[3] - (uint64_t)c->i[2]; // unsigned: no overflow
  if (mode == MODE_RANDINT && range == 0)
    return ts_fail(TS_ERR_ARG, "randint: expected low < high, got low=%lld, high=%lld", (long long)c->i[2], (long long)c->i[3]);
  return tsc_dispatch(out->dtype, [&](auto tag) {
    using T = decltype(tag);
    random_kernel<T><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(
        (T *)ts_data(out), n, philox_of((uint64_t)c->i[0], (uint64_t)c->i[1]), mode, c->f[0], c->f[1],
        (uint64_t)c->i[2], range);
    TSC_LAUNCH_CHECK(ts_ops[c->op].name);
    return TS_OK;
  });
}

// randperm: the positions sorted by their 64-bit Philox keys, ties by
// position (a stable sort of positions in order), as the CPU's qsort.
template <typename V> __global__ void perm_keys_kernel(uint64_t *keys, V *vals, int64_t n, philox_args pa) {
  uint64_t seed, off;
  pa.resolve(&seed, &off);
  TSC_GRID_STRIDE(int64_t, j, n) {
    ts_u32x4 r = ts_philox(seed, off + (uint64_t)j);
    keys[j] = ((uint64_t)r.v[0] << 32) | r.v[1];
    vals[j] = (V)j;
  }
}

template <typename T, typename V> __global__ void perm_store_kernel(T *out, const V *perm, int64_t n) {
  TSC_GRID_STRIDE(int64_t, j, n) out[j] = rstore<T>::i64((int64_t)perm[j]);
}

template <typename V> ts_status randperm_with(ts_tensor *out, int64_t n, uint64_t seed, uint64_t off) {
  tsc_temp kbuf, vbuf;
  ts_status st = kbuf.alloc((size_t)n * 2 * sizeof(uint64_t));
  if (st || (st = vbuf.alloc((size_t)n * 2 * sizeof(V)))) return st;
  uint64_t *keys = (uint64_t *)kbuf.p;
  V *vals = (V *)vbuf.p;
  perm_keys_kernel<V><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(keys, vals, n, philox_of(seed, off));
  TSC_LAUNCH_CHECK("randperm");
  if ((st = tsc_sort_pairs_u64(keys, keys + n, vals, vals + n, sizeof(V) == 8, n, 64))) return st;
  return tsc_dispatch(out->dtype, [&](auto tag) {
    using T = decltype(tag);
    perm_store_kernel<T, V><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>((T *)ts_data(out), vals + n, n);
    TSC_LAUNCH_CHECK("randperm");
    return TS_OK;
  });
}

ts_status k_randperm(const ts_call *c) {
  ts_tensor *out = c->out[0];
  int64_t n = ts_numel(out);
  if (n == 0) return TS_OK;
  uint64_t seed = (uint64_t)c->i[0], off = (uint64_t)c->i[1];
  return n < INT32_MAX ? randperm_with<int32_t>(out, n, seed, off) : randperm_with<int64_t>(out, n, seed, off);
}

} // namespace

extern "C" void tsc_register_random(ts_kernel *k) {
  k[TS_OP_RAND] = k_random;
  k[TS_OP_RANDN] = k_random;
  k[TS_OP_RANDINT] = k_random;
  k[TS_OP_RANDPERM] = k_randperm;
}
