// CUDA cumsum along one dim (CUMSUM in src/ops/ops_reduce.def; the CPU's
// scan_tile in src/cpu/reduce.c is the reference). Float inputs accumulate in
// double and write their own dtype (float16 and bfloat16 through float, as the
// CPU's store); integers and bool accumulate in uint64 (wrapping like torch)
// and write int64.
//
// Two kernels over the lines of tsr_lines:
//   row:    a block per (line, chunk) walks the chunk in tiles of NT * IPT
//           elements: coalesced loads into shared memory, IPT consecutive
//           elements per thread scanned serially, the thread totals scanned
//           across the block (warp shuffles), a running prefix between tiles;
//   column: a thread per (line, chunk) scans serially, neighbouring threads
//           on neighbouring lines (coalesced when lines are adjacent in
//           memory, or rows are short).
// A few long lines are cut into chunks (reduce, then scan): pass 1 writes
// each chunk's total, a block per line turns the totals into exclusive
// prefixes, pass 2 scans each chunk from its prefix. That reads the input
// twice, which is the price of filling the GPU with a single long line.
#include "reduce.cuh"

#include <type_traits>

namespace {

template <typename T> using acc_t = std::conditional_t<tsc_is_float<T>::value, double, uint64_t>;
template <typename T> using out_t = std::conditional_t<tsc_is_float<T>::value, T, int64_t>;

template <typename T> __device__ __forceinline__ acc_t<T> to_acc(T x) {
  if constexpr (tsc_is_float<T>::value) return tsc_cast<double>(x);
  else return (uint64_t)(int64_t)x;
}

template <typename T> __device__ __forceinline__ out_t<T> to_out(acc_t<T> v) {
  if constexpr (std::is_same<T, double>::value) return v;
  else if constexpr (tsc_is_float<T>::value) return tsc_cast<T>((float)v); // double -> float -> T, as ts_store_f64
  else return (int64_t)v;
}

enum { SCAN_PLAIN, SCAN_SUMS, SCAN_CARRY }; // whole lines; chunk totals only; chunks from carried prefixes

constexpr int IPT = 8; // elements per thread per tile

// Exclusive scan of one value per thread across the block (NT threads);
// total gets the block's sum. wsum: NT / 32 values of shared memory. Every
// thread must call it; the caller synchronises before wsum is used again.
template <int NT, typename Acc> __device__ __forceinline__ Acc block_excl_scan(Acc v, Acc *wsum, Acc &total) {
  constexpr int NW = NT / 32;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  Acc inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    Acc t = tsr_shfl_up(inc, o);
    if (lane >= o) inc += t;
  }
  Acc excl = tsr_shfl_up(inc, 1); // not inc - v: exact for floats
  if (lane == 0) excl = Acc(0);
  if constexpr (NW == 1) {
    total = tsr_shfl_idx(inc, 31);
    return excl;
  }
  if (lane == 31) wsum[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    Acc w = lane < NW ? wsum[lane] : Acc(0);
#pragma unroll
    for (int o = 1; o < NW; o <<= 1) {
      Acc t = tsr_shfl_up(w, o);
      if (lane >= o) w += t;
    }
    if (lane < NW) wsum[lane] = w; // inclusive warp sums
  }
  __syncthreads();
  if (warp > 0) excl = wsum[warp - 1] + excl;
  total = wsum[NW - 1];
  return excl;
}

__device__ __forceinline__ int pad(int i) { return i + i / IPT; } // spreads a thread's IPT values over banks

// Row kernel: blocks over (line, chunk) pairs, b = line * nchunks + chunk.
template <typename T, int NT>
__global__ void __launch_bounds__(NT) scan_row_k(tsr_lines g, const T *__restrict__ x, out_t<T> *y, int64_t chunk,
                                                 int64_t nchunks, acc_t<T> *carry, int mode) {
  using Acc = acc_t<T>;
  constexpr int TILE = NT * IPT;
  __shared__ Acc buf[TILE + TILE / IPT];
  __shared__ Acc wsum[NT / 32];
  int tid = threadIdx.x;
  int64_t nb = g.nlines * nchunks;
  for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
    int64_t line = b / nchunks, r0 = (b - line * nchunks) * chunk;
    int64_t r1 = r0 + chunk < g.R ? r0 + chunk : g.R;
    int64_t off[2];
    tsr_line_offsets<2>(g, line, off);
    const T *p = x + off[0];
    out_t<T> *q = y + off[1];
    Acc prefix = mode == SCAN_CARRY ? carry[b] : Acc(0);
    for (int64_t t0 = r0; t0 < r1; t0 += TILE) {
      int n = r1 - t0 < TILE ? (int)(r1 - t0) : TILE;
#pragma unroll
      for (int k = 0; k < IPT; k++) {
        int i = k * NT + tid;
        buf[pad(i)] = i < n ? to_acc(p[(t0 + i) * g.rs]) : Acc(0);
      }
      __syncthreads();
      Acc v[IPT];
#pragma unroll
      for (int j = 0; j < IPT; j++) v[j] = buf[pad(tid * IPT + j)];
#pragma unroll
      for (int j = 1; j < IPT; j++) v[j] += v[j - 1];
      Acc total;
      Acc excl = block_excl_scan<NT>(v[IPT - 1], wsum, total);
      if (mode != SCAN_SUMS) {
        Acc base = prefix + excl;
#pragma unroll
        for (int j = 0; j < IPT; j++) buf[pad(tid * IPT + j)] = base + v[j]; // only this thread's slots
        __syncthreads();
#pragma unroll
        for (int k = 0; k < IPT; k++) {
          int i = k * NT + tid;
          if (i < n) q[(t0 + i) * g.ors] = to_out<T>(buf[pad(i)]);
        }
      }
      prefix += total;
      __syncthreads(); // buf and wsum are reused by the next tile
    }
    if (mode == SCAN_SUMS && tid == 0) carry[b] = prefix;
  }
}

// Column kernel: a thread per (line, chunk), lines fastest (coalesced).
template <typename T>
__global__ void __launch_bounds__(256) scan_col_k(tsr_lines g, const T *__restrict__ x, out_t<T> *y, int64_t chunk,
                                                  int64_t nchunks, acc_t<T> *carry, int mode) {
  using Acc = acc_t<T>;
  int64_t n = g.nlines * nchunks;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
    int64_t ch = t / g.nlines, line = t - ch * g.nlines;
    int64_t r0 = ch * chunk, r1 = r0 + chunk < g.R ? r0 + chunk : g.R;
    int64_t off[2];
    tsr_line_offsets<2>(g, line, off);
    const T *p = x + off[0];
    out_t<T> *q = y + off[1];
    int64_t rs = g.rs, ors = g.ors;
    Acc a = mode == SCAN_CARRY ? carry[line * nchunks + ch] : Acc(0);
    if (mode == SCAN_SUMS) {
#pragma unroll 4
      for (int64_t r = r0; r < r1; r++) a += to_acc(p[r * rs]);
      carry[line * nchunks + ch] = a;
    } else {
#pragma unroll 4
      for (int64_t r = r0; r < r1; r++) {
        a += to_acc(p[r * rs]);
        q[r * ors] = to_out<T>(a);
      }
    }
  }
}

// Chunk totals -> exclusive prefixes, in place: a block per line.
template <typename Acc> __global__ void __launch_bounds__(256) scan_carry_k(Acc *carry, int64_t nlines, int64_t nchunks) {
  __shared__ Acc wsum[256 / 32];
  for (int64_t line = blockIdx.x; line < nlines; line += gridDim.x) {
    Acc *c = carry + line * nchunks;
    Acc prefix = Acc(0);
    for (int64_t c0 = 0; c0 < nchunks; c0 += 256) {
      int64_t i = c0 + threadIdx.x;
      Acc v = i < nchunks ? c[i] : Acc(0), total;
      Acc excl = block_excl_scan<256>(v, wsum, total);
      if (i < nchunks) c[i] = prefix + excl;
      prefix += total;
      __syncthreads();
    }
  }
}

static unsigned grid_x(int64_t nblocks) {
  const int64_t cap = 1 << 30; // grid-stride loops cover the rest
  return (unsigned)(nblocks < 1 ? 1 : nblocks > cap ? cap : nblocks);
}

template <typename T> ts_status run_scan(const ts_call *c) {
  using Acc = acc_t<T>;
  tsr_lines g;
  tsr_lines_init(&g, c);
  if (g.nlines == 0 || g.R == 0) return TS_OK;
  const T *x = tsc_ptr<T>(c->in[0]);
  out_t<T> *y = tsc_ptr<out_t<T>>(c->out[0]);
  cudaStream_t stream = tsc_stream();
  int sms = tsc_sm_count();
  int64_t R = g.R, nlines = g.nlines, ls = tsr_line_stride(&g);
  // a thread per line when there are lines enough and they sit side by side
  // in memory (or rows are too short for a block)
  bool col = nlines >= 1024 && (ls < g.rs || R <= 16);
  bool small = R <= 2048; // a warp per line instead of 256 threads
  int64_t nchunks = 1, chunk = R;
  if (col) {
    int64_t want = (int64_t)sms * 4096; // threads
    if (nlines < want && R >= 128) {
      nchunks = tsr_cdiv(want, nlines);
      if (nchunks > R / 64) nchunks = R / 64;
    }
    chunk = tsr_cdiv(R, nchunks);
  } else if (!small) {
    const int64_t tile = 256 * IPT;
    int64_t want = (int64_t)sms * 16; // blocks
    if (nlines < want && R >= 2 * tile) {
      nchunks = tsr_cdiv(want, nlines);
      if (nchunks > R / tile) nchunks = R / tile;
    }
    chunk = tsr_cdiv(tsr_cdiv(R, nchunks), tile) * tile;
  }
  nchunks = tsr_cdiv(R, chunk);
  Acc *carry = nullptr;
  if (nchunks > 1) {
    ts_status st;
    carry = (Acc *)tsc_temp_alloc((size_t)nlines * (size_t)nchunks * sizeof(Acc), &st);
    if (!carry) return st;
  }
  auto launch = [&](int mode) -> ts_status {
    if (col) scan_col_k<T><<<grid_x(tsr_cdiv(nlines * nchunks, 256)), 256, 0, stream>>>(g, x, y, chunk, nchunks, carry, mode);
    else if (small) scan_row_k<T, 32><<<grid_x(nlines * nchunks), 32, 0, stream>>>(g, x, y, chunk, nchunks, carry, mode);
    else scan_row_k<T, 256><<<grid_x(nlines * nchunks), 256, 0, stream>>>(g, x, y, chunk, nchunks, carry, mode);
    return tsc_after_launch("cumsum");
  };
  ts_status st;
  if (nchunks == 1) {
    st = launch(SCAN_PLAIN);
  } else {
    st = launch(SCAN_SUMS);
    if (!st) {
      scan_carry_k<Acc><<<grid_x(nlines), 256, 0, stream>>>(carry, nlines, nchunks);
      st = tsc_after_launch("cumsum");
    }
    if (!st) st = launch(SCAN_CARRY);
  }
  tsc_temp_free(carry);
  return st;
}

} // namespace

ts_status tsc_cumsum(const ts_call *c) {
  return tsc_dispatch(c->in[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return run_scan<T>(c);
  });
}
