// CUDA softmax and log_softmax along one dim (SOFTMAX, LOG_SOFTMAX in
// src/ops/ops_reduce.def; the CPU's softmax_row_f32 and scan_tile in
// src/cpu/reduce.c are the reference). float16 and bfloat16 compute in float.
//
// Semantics, as the CPU and torch: the max is taken with NaN winning; softmax
// shifts by it (by 0 when it is -inf) and multiplies exp(x - shift) by
// 1 / sum, so a +inf, a NaN or an all -inf row gives NaN everywhere;
// log_softmax is (x - shift) - log(sum), as torch computes it (x - (shift +
// log(sum)) loses the small result of a large x), NaN everywhere when the max is +inf.
//
// Three kernels over the lines of tsr_lines:
//   warp:   rows contiguous in x and y, R <= 1024, float and narrower: W lanes
//           (<= 32) per row hold the row in registers (ELEMS per lane,
//           128-bit loads when rows are aligned): one read, one write;
//   block:  a block per row. Rows of whole aligned vectors that fit 16 values
//           per thread stay in registers (one read); longer or strided rows
//           take an online pass (running max and rescaled sum, see
//           tsr_lse_add) and a second pass that writes, which mostly hits L2;
//   column: threads over neighbouring lines when the softmax dim is the far
//           one (e.g. dim 0 of a row-major matrix), BY threads per line
//           merging in shared memory, then a writing pass.
#include "reduce.cuh"

#include <type_traits>

namespace {

template <typename F> __device__ __forceinline__ F fmax_(F a, F b) { return fmax(a, b); } // NaN handled by a flag

template <typename T, typename F> __device__ __forceinline__ void put(T *p, F v) { *p = tsc_cast<T>(v); }

// Every kernel here: x and y are g's lines (tsr_lines, reduce.cuh): line l is the
// softmax over R = g.R elements at x + off[0] + r*g.rs, written at y + off[1] + r*g.ors,
// off from tsr_line_offsets(g, l).

// ---- warp kernel ------------------------------------------------------------
// W lanes per line (32 / W lines per warp); each lane holds ELEMS elements in chunks of V.
template <typename T, int ELEMS, int V>
__device__ __forceinline__ void warp_rows(const tsr_lines &g, const T *__restrict__ x, T *__restrict__ y, int R, int W,
                                          bool logsm) {
  constexpr int NC = ELEMS / V; // chunks of V per lane
  if (ELEMS > 1) W = 32;        // rows of more than 32: a constant width makes the column offsets immediates
  int lane = threadIdx.x & 31, sub = lane & (W - 1), rpw = 32 / W;
  int64_t wid = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int64_t wstep = (int64_t)gridDim.x * (blockDim.x >> 5) * rpw;
  for (int64_t base = wid * rpw; base < g.nlines; base += wstep) { // uniform across the warp
    int64_t row = base + lane / W;
    bool valid = row < g.nlines;
    int64_t off[2] = {0, 0};
    if (valid) tsr_line_offsets<2>(g, row, off);
    const T *xr = x + off[0];
    T *yr = y + off[1];
    float v[ELEMS];
#pragma unroll
    for (int c = 0; c < NC; c++) {
      int col = (c * W + sub) * V;
      if (valid && col < R) {
        if constexpr (V == 1) {
          v[c] = tsc_cast<float>(xr[col]);
        } else {
          tsr_vec<T, V> w = *(const tsr_vec<T, V> *)(xr + col);
#pragma unroll
          for (int e = 0; e < V; e++) v[c * V + e] = tsc_cast<float>(w.v[e]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < V; e++) v[c * V + e] = -INFINITY;
      }
    }
    float m = -INFINITY;
    int nan = 0;
#pragma unroll
    for (int i = 0; i < ELEMS; i++) m = fmaxf(m, v[i]), nan |= v[i] != v[i];
    for (int o = W >> 1; o > 0; o >>= 1) {
      m = fmaxf(m, tsr_shfl_xor(m, o, W));
      nan |= tsr_shfl_xor(nan, o, W);
    }
    if (nan) m = NAN;
    float shift = m == -INFINITY ? 0.0f : m, sum = 0;
#pragma unroll
    for (int i = 0; i < ELEMS; i++) { // padding is -inf: adds 0
      float e = expf(v[i] - shift);
      sum += e;
      if (!logsm) v[i] = e;
    }
    for (int o = W >> 1; o > 0; o >>= 1) sum += tsr_shfl_xor(sum, o, W);
    if (logsm) {
      float ls = logf(sum);
#pragma unroll
      for (int i = 0; i < ELEMS; i++) v[i] = (v[i] - shift) - ls;
    } else {
      float inv = 1.0f / sum;
#pragma unroll
      for (int i = 0; i < ELEMS; i++) v[i] *= inv;
    }
#pragma unroll
    for (int c = 0; c < NC; c++) {
      int col = (c * W + sub) * V;
      if (valid && col < R) {
        if constexpr (V == 1) {
          put(yr + col, v[c]);
        } else {
          tsr_vec<T, V> w;
#pragma unroll
          for (int e = 0; e < V; e++) w.v[e] = tsc_cast<T>(v[c * V + e]);
          *(tsr_vec<T, V> *)(yr + col) = w;
        }
      }
    }
  }
}

template <typename T, int ELEMS, int V>
__global__ void __launch_bounds__(256) softmax_warp_k(tsr_lines g, const T *__restrict__ x, T *__restrict__ y, int R,
                                                      int W, bool logsm) {
  warp_rows<T, ELEMS, V>(g, x, y, R, W, logsm);
}

// 32 values a lane read one at a time (rows of 513 to 1024 not in whole
// vectors) need some 80 to 110 registers: with the blocks per SM left to
// ptxas, it spilled to keep 3 of them on sm_90; given as 2, it does not.
template <typename T, int ELEMS, int V>
__global__ void __launch_bounds__(256, 2) softmax_warp_wide_k(tsr_lines g, const T *__restrict__ x,
                                                              T *__restrict__ y, int R, int W, bool logsm) {
  warp_rows<T, ELEMS, V>(g, x, y, R, W, logsm);
}

// ---- block kernel -------------------------------------------------------------
// Values per thread the register path holds: 16 floats, 8 doubles.
template <typename T> struct cache_vecs {
  static constexpr int V = tsr_vw<T>::value;
  static constexpr int value = V >= 4 ? 16 / V : 4;
};

// Block-wide max (NaN when any thread saw one) or sum; every thread gets it.
// sm: 32 slots per call site (distinct call sites use distinct slots, so no
// barrier is needed between them).
template <typename F> __device__ __forceinline__ F block_max_nan(F m, int nan, F *smf, int *smi) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    m = fmax_(m, tsr_shfl_down(m, o, 32));
    nan |= tsr_shfl_down(nan, o, 32);
  }
  if (lane == 0) smf[warp] = m, smi[warp] = nan;
  __syncthreads();
  if (warp == 0) {
    m = lane < nw ? smf[lane] : F(-INFINITY);
    nan = lane < nw ? smi[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) {
      m = fmax_(m, tsr_shfl_down(m, o, 32));
      nan |= tsr_shfl_down(nan, o, 32);
    }
    if (lane == 0) smf[0] = nan ? F(NAN) : m;
  }
  __syncthreads();
  return smf[0];
}

template <typename F> __device__ __forceinline__ F block_sum(F s, F *smf) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) s += tsr_shfl_down(s, o, 32);
  if (lane == 0) smf[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < nw ? smf[lane] : F(0);
    for (int o = 16; o > 0; o >>= 1) s += tsr_shfl_down(s, o, 32);
    if (lane == 0) smf[0] = s;
  }
  __syncthreads();
  return smf[0];
}

template <typename F> __device__ __forceinline__ void block_lse(F &m, F &s, F *smm, F *sms) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    F bm = tsr_shfl_down(m, o, 32), bs = tsr_shfl_down(s, o, 32);
    if (lane + o < 32) tsr_lse_merge(m, s, bm, bs);
  }
  if (lane == 0) smm[warp] = m, sms[warp] = s;
  __syncthreads();
  if (warp == 0) {
    m = lane < nw ? smm[lane] : F(-INFINITY);
    s = lane < nw ? sms[lane] : F(0);
    for (int o = 16; o > 0; o >>= 1) {
      F bm = tsr_shfl_down(m, o, 32), bs = tsr_shfl_down(s, o, 32);
      if (lane + o < 32) tsr_lse_merge(m, s, bm, bs);
    }
    if (lane == 0) smm[0] = m, sms[0] = s;
  }
  __syncthreads();
  m = smm[0], s = sms[0];
}

// What the writing pass needs from a row's (reference, sum) state.
template <typename F> struct finisher {
  F a, b; // softmax: exp(x - a) * b; log_softmax: (x - a) - b
  bool logsm, bad;
  __device__ void init(F m, F s, bool log_) {
    logsm = log_;
    if (logsm) {
      a = m == F(INFINITY) ? F(NAN) : tsr_sh(m), b = log(s), bad = false;
    } else {
      bad = !isfinite(m); // +inf, NaN, or an all -inf row
      a = m, b = F(1) / s;
    }
  }
  __device__ F operator()(F x) const {
    if (logsm) return (x - a) - b;
    return bad ? F(NAN) : tsr_exp(x - a) * b;
  }
};

// One block per line at a time (long lines; blocks stride over the lines): its threads stride over r.
template <typename T>
__global__ void __launch_bounds__(1024, 1) softmax_block_k(tsr_lines g, const T *__restrict__ x, T *__restrict__ y,
                                                        bool logsm, bool cached) {
  using F = tsc_opmath_t<T>;
  constexpr int V = tsr_vw<T>::value, CACHE = cache_vecs<T>::value;
  __shared__ F sm_a[32], sm_b[32];
  __shared__ int sm_i[32];
  int tid = threadIdx.x, nt = blockDim.x;
  int64_t R = g.R, rs = g.rs, ors = g.ors;
  for (int64_t row = blockIdx.x; row < g.nlines; row += gridDim.x) {
    int64_t off[2];
    tsr_line_offsets<2>(g, row, off);
    const T *xr = x + off[0];
    T *yr = y + off[1];
    if (cached) { // rs == ors == 1, rows aligned, R % V == 0, R <= nt * V * CACHE
      int64_t nv = R / V;
      F v[CACHE][V];
      F m = F(-INFINITY);
      int nan = 0;
#pragma unroll
      for (int c = 0; c < CACHE; c++) {
        int64_t i = (int64_t)c * nt + tid;
        if (i < nv) {
          tsr_vec<T, V> w = ((const tsr_vec<T, V> *)xr)[i];
#pragma unroll
          for (int e = 0; e < V; e++) {
            v[c][e] = tsc_cast<F>(w.v[e]);
            m = fmax_(m, v[c][e]), nan |= v[c][e] != v[c][e];
          }
        } else {
#pragma unroll
          for (int e = 0; e < V; e++) v[c][e] = F(-INFINITY);
        }
      }
      m = block_max_nan(m, nan, sm_a, sm_i);
      F shift = m == F(-INFINITY) ? F(0) : m, s = 0;
#pragma unroll
      for (int c = 0; c < CACHE; c++)
#pragma unroll
        for (int e = 0; e < V; e++) {
          F ex = tsr_exp(v[c][e] - shift);
          s += ex;
          if (!logsm) v[c][e] = ex;
        }
      s = block_sum(s, sm_b);
      F a = logsm ? log(s) : F(1) / s;
#pragma unroll
      for (int c = 0; c < CACHE; c++) {
        int64_t i = (int64_t)c * nt + tid;
        if (i < nv) {
          tsr_vec<T, V> w;
#pragma unroll
          for (int e = 0; e < V; e++) w.v[e] = tsc_cast<T>(logsm ? (v[c][e] - shift) - a : v[c][e] * a);
          ((tsr_vec<T, V> *)yr)[i] = w;
        }
      }
    } else {
      F m = F(-INFINITY), s = F(0);
      if (rs == 1) {
        int64_t head = tsr_head(xr);
        if (head > R) head = R;
#pragma unroll 1
        for (int64_t j = tid; j < head; j += nt) tsr_lse_add(m, s, tsc_cast<F>(xr[j]));
        int64_t nv = (R - head) / V;
        const tsr_vec<T, V> *vx = (const tsr_vec<T, V> *)(xr + head);
        tsr_strided_for<2>(tid, nv, nt, [&](int64_t c) {
          tsr_vec<T, V> w = vx[c];
#pragma unroll
          for (int e = 0; e < V; e++) tsr_lse_add(m, s, tsc_cast<F>(w.v[e]));
        });
#pragma unroll 1
        for (int64_t j = head + nv * V + tid; j < R; j += nt) tsr_lse_add(m, s, tsc_cast<F>(xr[j]));
      } else {
        tsr_strided_for<4>(tid, R, nt, [&](int64_t r) { tsr_lse_add(m, s, tsc_cast<F>(xr[r * rs])); });
      }
      block_lse(m, s, sm_a, sm_b);
      finisher<F> fin;
      fin.init(m, s, logsm);
      if (rs == 1 && ors == 1 && tsr_head(xr) == tsr_head(yr)) {
        int64_t head = tsr_head(xr);
        if (head > R) head = R;
#pragma unroll 1
        for (int64_t j = tid; j < head; j += nt) put(yr + j, fin(tsc_cast<F>(xr[j])));
        int64_t nv = (R - head) / V;
        const tsr_vec<T, V> *vx = (const tsr_vec<T, V> *)(xr + head);
        tsr_vec<T, V> *vy = (tsr_vec<T, V> *)(yr + head);
        tsr_strided_for<2>(tid, nv, nt, [&](int64_t c) {
          tsr_vec<T, V> w = vx[c];
#pragma unroll
          for (int e = 0; e < V; e++) w.v[e] = tsc_cast<T>(fin(tsc_cast<F>(w.v[e])));
          vy[c] = w;
        });
#pragma unroll 1
        for (int64_t j = head + nv * V + tid; j < R; j += nt) put(yr + j, fin(tsc_cast<F>(xr[j])));
      } else {
        tsr_strided_for<4>(tid, R, nt, [&](int64_t r) { put(yr + r * ors, fin(tsc_cast<F>(xr[r * rs]))); });
      }
    }
    __syncthreads(); // the shared slots are reused by the next row
  }
}

// ---- column kernel ------------------------------------------------------------
// Lines whose elements are far apart (the softmax dim is not innermost): BX threads
// across neighbouring lines (coalesced reads), BY = blockDim.x / BX down each line.
template <typename T>
__device__ __forceinline__ void col_lines(const tsr_lines &g, const T *__restrict__ x, T *__restrict__ y, int BX,
                                          bool logsm, tsc_opmath_t<T> *sm_m, tsc_opmath_t<T> *sm_s) {
  using F = tsc_opmath_t<T>;
  int tx = threadIdx.x % BX, ty = threadIdx.x / BX, BY = blockDim.x / BX;
  int64_t R = g.R, rs = g.rs, ors = g.ors;
  for (int64_t first = (int64_t)blockIdx.x * BX; first < g.nlines; first += (int64_t)gridDim.x * BX) {
    int64_t line = first + tx; // (no count of line blocks: a 64-bit division, a routine call)
    bool valid = line < g.nlines;
    F m = F(-INFINITY), s = F(0);
    if (valid) {
      int64_t off[1];
      tsr_line_offsets<1>(g, line, off);
      const T *xl = x + off[0];
      tsr_strided_for<4>(ty, R, BY, [&](int64_t r) { tsr_lse_add(m, s, tsc_cast<F>(xl[r * rs])); });
    }
    if (BY > 1) {
      sm_m[threadIdx.x] = m, sm_s[threadIdx.x] = s;
      __syncthreads();
      for (int h = BY >> 1; h > 0; h >>= 1) {
        if (ty < h) {
          tsr_lse_merge(m, s, sm_m[threadIdx.x + h * BX], sm_s[threadIdx.x + h * BX]);
          sm_m[threadIdx.x] = m, sm_s[threadIdx.x] = s;
        }
        __syncthreads();
      }
      m = sm_m[tx], s = sm_s[tx];
    }
    if (valid) {
      // the offsets again, rather than kept live across the merge (that spilled)
      int64_t off[2];
      tsr_line_offsets<2>(g, line, off);
      finisher<F> fin;
      fin.init(m, s, logsm);
      const T *xl = x + off[0];
      T *yl = y + off[1];
      tsr_strided_for<4>(ty, R, BY, [&](int64_t r) { put(yl + r * ors, fin(tsc_cast<F>(xl[r * rs]))); });
    }
    __syncthreads(); // the shared slots are reused by the next lines
  }
}

// The blocks per SM are given: left to ptxas, it picked the register count of
// an occupancy step and spilled to reach it (8 to 48 bytes). Six (40
// registers) for float and narrower; double's exp and log need more, and its
// kernel keeps three.
template <typename T>
__global__ void __launch_bounds__(256, 6) softmax_col_k(tsr_lines g, const T *__restrict__ x, T *__restrict__ y, int BX,
                                                        bool logsm) {
  __shared__ float sm_m[256], sm_s[256];
  col_lines<T>(g, x, y, BX, logsm, sm_m, sm_s);
}

__global__ void __launch_bounds__(256, 3) softmax_col_double_k(tsr_lines g, const double *__restrict__ x,
                                                               double *__restrict__ y, int BX, bool logsm) {
  __shared__ double sm_m[256], sm_s[256];
  col_lines<double>(g, x, y, BX, logsm, sm_m, sm_s);
}

// ---- launcher -------------------------------------------------------------------

static unsigned grid_x(int64_t nblocks) {
  const int64_t cap = 1 << 30; // grid-stride loops cover the rest
  return (unsigned)(nblocks < 1 ? 1 : nblocks > cap ? cap : nblocks);
}

template <typename T, int ELEMS>
ts_status launch_warp(const tsr_lines &g, const T *x, T *y, int W, bool vec, bool logsm, cudaStream_t stream) {
  constexpr int V = tsr_vw<T>::value;
  int64_t rows_per_block = 8 * (32 / W);
  unsigned grid = grid_x(tsr_cdiv(g.nlines, rows_per_block));
  if constexpr (ELEMS >= V) {
    if (vec) {
      softmax_warp_k<T, ELEMS, V><<<grid, 256, 0, stream>>>(g, x, y, (int)g.R, W, logsm);
      return tsc_after_launch(logsm ? "log_softmax" : "softmax");
    }
  }
  if constexpr (ELEMS == 32)
    softmax_warp_wide_k<T, ELEMS, 1><<<grid, 256, 0, stream>>>(g, x, y, (int)g.R, W, logsm);
  else
    softmax_warp_k<T, ELEMS, 1><<<grid, 256, 0, stream>>>(g, x, y, (int)g.R, W, logsm);
  return tsc_after_launch(logsm ? "log_softmax" : "softmax");
}

template <typename T> ts_status run_softmax(const ts_call *c, bool logsm) {
  constexpr int V = tsr_vw<T>::value;
  tsr_lines g;
  tsr_lines_init(&g, c);
  if (g.nlines == 0 || g.R == 0) return TS_OK;
  const T *x = tsc_ptr<T>(c->in[0]);
  T *y = tsc_ptr<T>(c->out[0]);
  cudaStream_t stream = tsc_stream();
  int64_t R = g.R;
  bool contig = g.rs == 1 && g.ors == 1;
  // every row of x and y starts 16-byte aligned and holds whole vectors
  bool vec = contig && R % V == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)y % 16 == 0;
  for (int d = 0; d < g.nd && vec; d++) vec = g.st[0][d] % V == 0 && g.st[1][d] % V == 0;
  if constexpr (!std::is_same<T, double>::value) {
    if (contig && R <= 1024) {
      int p2 = tsr_pow2_at_least(R, 1024), W = p2 < 32 ? p2 : 32;
      switch (p2 / W) {
      case 1: return launch_warp<T, 1>(g, x, y, W, vec, logsm, stream);
      case 2: return launch_warp<T, 2>(g, x, y, W, vec, logsm, stream);
      case 4: return launch_warp<T, 4>(g, x, y, W, vec, logsm, stream);
      case 8: return launch_warp<T, 8>(g, x, y, W, vec, logsm, stream);
      case 16: return launch_warp<T, 16>(g, x, y, W, vec, logsm, stream);
      default: return launch_warp<T, 32>(g, x, y, W, vec, logsm, stream);
      }
    }
  }
  int64_t ls = tsr_line_stride(&g);
  if (g.nlines == 1 || g.rs <= ls) {
    constexpr int CACHE = cache_vecs<T>::value;
    bool cached = vec && R <= (int64_t)1024 * V * CACHE;
    // cached: as many threads as the row needs; two passes: at most 512, so two blocks share an SM
    int nt = cached ? tsr_pow2_at_least(tsr_cdiv(R / V, CACHE), 1024) : tsr_pow2_at_least(tsr_cdiv(R, V * 8), 512);
    if (nt < (cached ? 32 : 128)) nt = cached ? 32 : 128;
    softmax_block_k<T><<<grid_x(g.nlines), nt, 0, stream>>>(g, x, y, logsm, cached);
    return tsc_after_launch(logsm ? "log_softmax" : "softmax");
  }
  int lines2 = tsr_pow2_at_least(g.nlines, 256), bxmin = lines2 < 32 ? lines2 : 32;
  int BY = 1;
  while (BY < 256 / bxmin && (int64_t)BY * 16 < R) BY <<= 1;
  int BX = 256 / BY < lines2 ? 256 / BY : lines2;
  if constexpr (std::is_same<T, double>::value)
    softmax_col_double_k<<<grid_x(tsr_cdiv(g.nlines, BX)), BX * BY, 0, stream>>>(g, x, y, BX, logsm);
  else
    softmax_col_k<T><<<grid_x(tsr_cdiv(g.nlines, BX)), BX * BY, 0, stream>>>(g, x, y, BX, logsm);
  return tsc_after_launch(logsm ? "log_softmax" : "softmax");
}

} // namespace

ts_status tsc_softmax(const ts_call *c) {
  bool logsm = c->op == TS_OP_LOG_SOFTMAX;
  return tsc_dispatch_float(c->in[0]->dtype, logsm ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    return run_softmax<T>(c, logsm);
  });
}
