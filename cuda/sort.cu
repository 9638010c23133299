// CUDA sort and topk along a dim, and the (64-bit key, index) pair sort that
// randperm shares (random.cu). The CPU's stable merge sort (src/cpu/index.c)
// is the reference: NaN sorts as the largest value, -0.0 ties with 0.0, ties
// keep index order in both directions.
//
// Values become unsigned keys whose ascending order is that order (NaN
// canonicalised to the largest key, -0.0 to +0.0; descending inverts the key
// bits, so equal values stay tied), paired with their positions and radix
// sorted (stable); the outputs then gather the original elements by position,
// so NaN payloads and signed zeros come out as they went in. The CUB sort
// depends on the rows' shape:
//   one row                          DeviceRadixSort of the row
//   long rows, key + row bits <= 64   one DeviceRadixSort of (row, key) composite keys
//   long rows, few, wider keys       DeviceRadixSort row by row
//   otherwise (many short rows)      DeviceSegmentedSort::StableSortPairs
// (DeviceSegmentedSort gives a long segment one block, too little for a
// long row.) topk sorts whole rows and keeps the first k.
#include <string.h>

#include <type_traits>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "common.cuh"

ts_status tsc_sort_kernel(const ts_call *c);

namespace {



// ---- keys ----------------------------------------------------------------------

// IEEE bits (any width) -> an unsigned key in value order; inf is the
// positive infinity's bits.
template <typename U> __device__ __forceinline__ U float_key(U b, U inf) {
  const U sign = (U)((U)1 << (sizeof(U) * 8 - 1));
  U mag = (U)(b & (U)~sign);
  if (mag > inf) return (U)~(U)0; // every NaN: the largest key
  if (mag == 0) b = 0;            // -0.0 ties with 0.0
  return (b & sign) ? (U)~b : (U)(b | sign);
}

// Per dtype: T the stored bits, K the smallest CUB key type that holds the
// key, bits its width.
struct key_f32 {
  using T = uint32_t; using K = uint32_t; static constexpr int bits = 32;
  __device__ static uint64_t map(T b) { return float_key<uint32_t>(b, 0x7f800000u); }
};
struct key_f64 {
  using T = uint64_t; using K = uint64_t; static constexpr int bits = 64;
  __device__ static uint64_t map(T b) { return float_key<uint64_t>(b, 0x7ff0000000000000ull); }
};
struct key_f16 {
  using T = uint16_t; using K = uint16_t; static constexpr int bits = 16;
  __device__ static uint64_t map(T b) { return float_key<uint16_t>(b, (uint16_t)0x7c00u); }
};
struct key_bf16 {
  using T = uint16_t; using K = uint16_t; static constexpr int bits = 16;
  __device__ static uint64_t map(T b) { return float_key<uint16_t>(b, (uint16_t)0x7f80u); }
};
struct key_i64 {
  using T = uint64_t; using K = uint64_t; static constexpr int bits = 64;
  __device__ static uint64_t map(T b) { return b ^ 0x8000000000000000ull; }
};
struct key_i32 {
  using T = uint32_t; using K = uint32_t; static constexpr int bits = 32;
  __device__ static uint64_t map(T b) { return b ^ 0x80000000u; }
};
struct key_i16 {
  using T = uint16_t; using K = uint16_t; static constexpr int bits = 16;
  __device__ static uint64_t map(T b) { return (uint16_t)(b ^ 0x8000u); }
};
struct key_i8 { // 16-bit keys sorted on 8 bits, as uint8
  using T = uint8_t; using K = uint16_t; static constexpr int bits = 8;
  __device__ static uint64_t map(T b) { return (uint8_t)(b ^ 0x80u); }
};
struct key_u8 { // CUB has no 8-bit keys worth having: 16-bit keys sorted on 8 bits
  using T = uint8_t; using K = uint16_t; static constexpr int bits = 8;
  __device__ static uint64_t map(T b) { return b; }
};
struct key_bool {
  using T = uint8_t; using K = uint16_t; static constexpr int bits = 8;
  __device__ static uint64_t map(T b) { return b != 0; }
};

__host__ __device__ constexpr uint64_t low_bits(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }

// keys[e], vals[e] for e = r * n + j, element j of row r (x seen with the
// sorted dim last). row_shift >= 0: the row goes above the key (composite).
template <class KM, typename K, typename V, typename I>
__global__ void make_keys_kernel(const typename KM::T *x, tsc_offsets<1, I> o, I N, I n, bool desc, int row_shift,
                                 K *keys, V *vals) {
  TSC_GRID_STRIDE(I, e, N) {
    I off[1];
    o.get(e, off);
    uint64_t k = KM::map(x[off[0]]);
    if (desc) k ^= low_bits(KM::bits);
    I r = e / n, j = e - r * n;
    if (row_shift >= 0) k |= (uint64_t)r << row_shift;
    keys[e] = (K)k;
    vals[e] = (V)j;
  }
}

// The first k of each sorted row: operands {vals, inds, x with k along the
// dim}, all with the sorted dim last; perm (rows, n) holds the sorted
// positions (NULL: rows of one element, position 0).
template <typename E, typename V, typename I>
__global__ void sort_finish_kernel(const E *x, E *vals, int64_t *inds, const V *perm, tsc_offsets<3, I> o, I M, I k,
                                   int64_t n, int64_t xs) {
  TSC_GRID_STRIDE(I, e, M) {
    I off[3];
    o.get(e, off);
    I r = e / k, t = e - r * k;
    int64_t j = perm ? (int64_t)perm[(int64_t)r * n + t] : (int64_t)t;
    vals[off[0]] = x[(int64_t)off[2] + (j - (int64_t)t) * xs];
    inds[off[1]] = j;
  }
}

__global__ void row_offsets_kernel(int64_t *o, int64_t count, int64_t n) {
  TSC_GRID_STRIDE(int64_t, r, count) o[r] = r * n;
}

// ---- CUB wrappers (instantiated for the few key/value pairs used) -----------------

template <typename K, typename V> struct radix_pairs {
  size_t bytes = 0;
  tsc_temp tmp;
  ts_status prepare(int64_t n, int end_bit) {
    TSC_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const K *)nullptr, (K *)nullptr, (const V *)nullptr,
                                              (V *)nullptr, n, 0, end_bit, tsc_stream()));
    return tmp.alloc(bytes);
  }
  ts_status run(const K *kin, K *kout, const V *vin, V *vout, int64_t n, int end_bit) {
    size_t b = bytes;
    TSC_CHECK(cub::DeviceRadixSort::SortPairs(tmp.p, b, kin, kout, vin, vout, n, 0, end_bit, tsc_stream()));
    return TS_OK;
  }
};

template <typename K>
ts_status segmented_pairs(const K *kin, K *kout, const int32_t *vin, int32_t *vout, int64_t N, int64_t rows, int64_t n) {
  cudaStream_t s = tsc_stream();
  tsc_temp offs, tmp;
  ts_status st = offs.alloc((size_t)(rows + 1) * sizeof(int64_t));
  if (st) return st;
  int64_t *o = (int64_t *)offs.p;
  row_offsets_kernel<<<tsc_blocks(rows + 1), TSC_THREADS, 0, s>>>(o, rows + 1, n);
  TSC_LAUNCH_CHECK("sort");
  size_t bytes = 0;
  TSC_CHECK(cub::DeviceSegmentedSort::StableSortPairs(nullptr, bytes, kin, kout, vin, vout, N, rows, o, o + 1, s));
  if ((st = tmp.alloc(bytes))) return st;
  TSC_CHECK(cub::DeviceSegmentedSort::StableSortPairs(tmp.p, bytes, kin, kout, vin, vout, N, rows, o, o + 1, s));
  return TS_OK;
}

// ---- sort and topk --------------------------------------------------------------------

// t's sizes and strides with dim moved last (its size set to `last`).
ts_tensor move_last(const ts_tensor *t, int dim, int64_t last) {
  ts_tensor v = *t;
  int j = 0;
  for (int d = 0; d < t->ndim; d++)
    if (d != dim) v.sizes[j] = t->sizes[d], v.strides[j] = t->strides[d], j++;
  v.sizes[j] = last;
  v.strides[j] = t->strides[dim];
  return v;
}

enum sort_path { ONE_ROW, COMPOSITE, ROW_BY_ROW, SEGMENTED };

constexpr int64_t LONG_ROW = 4096; // rows at least this long sort with the whole GPU
constexpr int64_t FEW_ROWS = 64;   // at most this many long rows go one by one

template <typename E, typename V> ts_status sort_finish(ts_tensor *x, ts_tensor *vals, ts_tensor *inds, int dim, const V *perm) {
  int64_t n = x->sizes[dim], k = vals->sizes[dim], M = ts_numel(vals);
  ts_tensor vv = move_last(vals, dim, k), iv = move_last(inds, dim, k), xv = move_last(x, dim, k);
  ts_tensor *ops[3] = {&vv, &iv, &xv};
  auto launch = [&](auto itag) {
    using I = decltype(itag);
    tsc_offsets<3, I> o;
    tsc_make_offsets<3, I>(&o, ops);
    sort_finish_kernel<E, V, I><<<tsc_blocks(M), TSC_THREADS, 0, tsc_stream()>>>(
        (const E *)ts_data(x), (E *)ts_data(vals), (int64_t *)ts_data(inds), perm, o, (I)M, (I)k, n, x->strides[dim]);
    TSC_LAUNCH_CHECK("sort");
    return TS_OK;
  };
  return tsc_fits_32bit<3>(ops) ? launch(uint32_t{}) : launch(int64_t{});
}

template <typename F> ts_status with_elem(size_t es, F &&f) {
  switch (es) {
  case 1: return f(uint8_t{});
  case 2: return f(uint16_t{});
  case 4: return f(uint32_t{});
  default: return f(uint64_t{});
  }
}

// Sorts every row of x with keys K and positions V, then writes the outputs.
template <class KM, typename K, typename V>
ts_status sort_rows(ts_tensor *x, ts_tensor *vals, ts_tensor *inds, int dim, bool desc, sort_path path) {
  int64_t n = x->sizes[dim], N = ts_numel(x), rows = N / n;
  int segbits = rows > 1 ? 64 - __builtin_clzll((unsigned long long)(rows - 1)) : 0;
  int end_bit = path == COMPOSITE ? KM::bits + segbits : KM::bits;
  tsc_temp kbuf, vbuf;
  ts_status st = kbuf.alloc((size_t)N * 2 * sizeof(K));
  if (st || (st = vbuf.alloc((size_t)N * 2 * sizeof(V)))) return st;
  K *kin = (K *)kbuf.p, *kout = kin + N;
  V *vin = (V *)vbuf.p, *vout = vin + N;
  ts_tensor xv = move_last(x, dim, n);
  ts_tensor *ops[1] = {&xv};
  auto keys = [&](auto itag) {
    using I = decltype(itag);
    tsc_offsets<1, I> o;
    tsc_make_offsets<1, I>(&o, ops);
    make_keys_kernel<KM, K, V, I><<<tsc_blocks(N), TSC_THREADS, 0, tsc_stream()>>>(
        (const typename KM::T *)ts_data(x), o, (I)N, (I)n, desc, path == COMPOSITE ? KM::bits : -1, kin, vin);
    TSC_LAUNCH_CHECK("sort");
    return TS_OK;
  };
  if ((st = tsc_fits_32bit<1>(ops) ? keys(uint32_t{}) : keys(int64_t{}))) return st;
  if (path == SEGMENTED) {
    if constexpr (sizeof(V) == 4 && sizeof(K) >= 4) {
      if ((st = segmented_pairs<K>(kin, kout, vin, vout, N, rows, n))) return st;
    } else {
      return ts_fail(TS_ERR_BACKEND, "sort: internal error: no segmented sort for these keys");
    }
  } else {
    radix_pairs<K, V> rp;
    int64_t len = path == ROW_BY_ROW ? n : N;
    if ((st = rp.prepare(len, end_bit))) return st;
    for (int64_t r = 0; r < (path == ROW_BY_ROW ? rows : 1); r++)
      if ((st = rp.run(kin + r * len, kout + r * len, vin + r * len, vout + r * len, len, end_bit))) return st;
  }
  return with_elem(ts_dtype_size(x->dtype), [&](auto etag) {
    using E = decltype(etag);
    return sort_finish<E, V>(x, vals, inds, dim, vout);
  });
}

template <class KM> ts_status sort_typed(ts_tensor *x, ts_tensor *vals, ts_tensor *inds, int dim, bool desc) {
  int64_t n = x->sizes[dim], rows = ts_numel(x) / n;
  int segbits = rows > 1 ? 64 - __builtin_clzll((unsigned long long)(rows - 1)) : 0;
  if (n >= INT32_MAX) // positions need 64 bits: one (rare, huge) row at a time on 64-bit keys
    return sort_rows<KM, uint64_t, int64_t>(x, vals, inds, dim, desc, ROW_BY_ROW);
  // 8- and 16-bit keys go in 32-bit ones (sorted on their own bits, so the
  // passes are as many): CUB's radix downsweep for 16-bit keys spilled (72
  // bytes on sm_80, 96 on sm_90; with 32-bit offsets still 56), the 32-bit one
  // does not, and no 16-bit sort is compiled (~20 s each)
  using SK = std::conditional_t<sizeof(typename KM::K) < 4, uint32_t, typename KM::K>;
  if (rows == 1) return sort_rows<KM, SK, int32_t>(x, vals, inds, dim, desc, ONE_ROW);
  if (n >= LONG_ROW && KM::bits + segbits <= 64)
    return sort_rows<KM, uint64_t, int32_t>(x, vals, inds, dim, desc, COMPOSITE);
  if (n >= LONG_ROW && rows <= FEW_ROWS) return sort_rows<KM, SK, int32_t>(x, vals, inds, dim, desc, ROW_BY_ROW);
  return sort_rows<KM, SK, int32_t>(x, vals, inds, dim, desc, SEGMENTED);
}

} // namespace

// SORT and TOPK: in[0] x along i[0]; i[1] descending (topk: largest); out[0]
// values and out[1] int64 positions hold the first k = out[0]'s size along the dim.
ts_status tsc_sort_kernel(const ts_call *c) {
  ts_tensor *x = c->in[0], *vals = c->out[0], *inds = c->out[1];
  int dim = (int)c->i[0];
  bool desc = c->i[1] != 0;
  int64_t n = x->sizes[dim];
  if (n == 0 || ts_numel(vals) == 0) return TS_OK;
  if (x->device.type != TS_CUDA) return ts_fail(TS_ERR_DEVICE, "%s: expected the input on the CUDA device", ts_ops[c->op].name);
  if (n == 1) // nothing to order: each row's one element, at position 0
    return with_elem(ts_dtype_size(x->dtype), [&](auto etag) {
      using E = decltype(etag);
      return sort_finish<E, int32_t>(x, vals, inds, dim, nullptr);
    });
  switch (x->dtype) {
  case TS_FLOAT32: return sort_typed<key_f32>(x, vals, inds, dim, desc);
  case TS_FLOAT64: return sort_typed<key_f64>(x, vals, inds, dim, desc);
  case TS_FLOAT16: return sort_typed<key_f16>(x, vals, inds, dim, desc);
  case TS_BFLOAT16: return sort_typed<key_bf16>(x, vals, inds, dim, desc);
  case TS_INT64: return sort_typed<key_i64>(x, vals, inds, dim, desc);
  case TS_INT32: return sort_typed<key_i32>(x, vals, inds, dim, desc);
  case TS_INT16: return sort_typed<key_i16>(x, vals, inds, dim, desc);
  case TS_INT8: return sort_typed<key_i8>(x, vals, inds, dim, desc);
  case TS_UINT8: return sort_typed<key_u8>(x, vals, inds, dim, desc);
  case TS_BOOL: return sort_typed<key_bool>(x, vals, inds, dim, desc);
  default: return ts_fail(TS_ERR_DTYPE, "%s: unknown dtype %d on cuda", ts_ops[c->op].name, (int)x->dtype);
  }
}

// A stable ascending radix sort of n (key, value) pairs on the key's low
// end_bit bits; values int64 (v64) or int32. Equal keys keep their order.
ts_status tsc_sort_pairs_u64(const uint64_t *kin, uint64_t *kout, const void *vin, void *vout, bool v64, int64_t n,
                             int end_bit) {
  if (n == 0) return TS_OK;
  if (v64) {
    radix_pairs<uint64_t, int64_t> rp;
    ts_status st = rp.prepare(n, end_bit);
    return st ? st : rp.run(kin, kout, (const int64_t *)vin, (int64_t *)vout, n, end_bit);
  }
  radix_pairs<uint64_t, int32_t> rp;
  ts_status st = rp.prepare(n, end_bit);
  return st ? st : rp.run(kin, kout, (const int32_t *)vin, (int32_t *)vout, n, end_bit);
}
