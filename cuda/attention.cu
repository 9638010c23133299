// CUDA kernels of fused scaled dot-product attention (contracts in
// src/ops_attention.def; the CPU's src/cpu/attention.c is the reference).
// Flash attention's scheme with one thread per row: a block of ROWS threads
// owns ROWS query rows (forward, dq) or key rows (dk, dv) and walks the other
// side in tiles staged in shared memory. The forward keeps an online softmax
// per query (running max and sum; its output row is rescaled when the max
// grows), so no (L, S) matrix exists; the backward rebuilds each probability
// as exp(score - lse) from the saved log-sum-exp. Every output row is written
// by one thread: no atomics, the same answer on every run. Dropout draws
// ts_sdpa_keep (src/op_attention.h), as the CPU does.
#include "common.cuh"

namespace {

constexpr int ROWS = 64;          // threads per block, one row each
constexpr int TILE = 32;          // rows of the other side per tile, at most
constexpr int SMEM_BYTES = 16384; // shared memory per block for the tiles

struct attn_p {
  int64_t B, L, S, E, Ev;
  int64_t ms0, ms1, ms2; // the mask's strides
  int causal;
  double p, scale;
  uint64_t seed, offset;
};

// rows of the other side per tile: what fits the shared memory (0: read global memory)
template <typename T> int tile_rows(int64_t width) {
  int64_t t = SMEM_BYTES / (int64_t)sizeof(T) / (width > 0 ? width : 1);
  return (int)(t > TILE ? TILE : t);
}

// score (b, i, j) from the dot product: scaled, masked, -inf for a future key
template <typename T>
__device__ __forceinline__ T score(const attn_p &a, const T *mask, int64_t b, int64_t i, int64_t j, T dot) {
  T s = dot * (T)a.scale;
  if (mask) s += mask[b * a.ms0 + i * a.ms1 + j * a.ms2];
  if (a.causal && j > i) s = -(T)INFINITY;
  return s;
}

template <typename T> __device__ __forceinline__ T dropped(const attn_p &a, int64_t b, int64_t i, int64_t j, T x) {
  if (a.p <= 0) return x;
  const T rs = a.p < 1 ? (T)(1 / (1 - a.p)) : (T)0; // as the CPU computes it
  return ts_sdpa_keep(a.seed, a.offset, b * a.L + i, a.S, j, (float)a.p) ? x * rs : (T)0;
}

template <typename T> __device__ __forceinline__ T dot(const T *x, const T *y, int64_t n) {
  T acc = 0;
  for (int64_t e = 0; e < n; e++) acc += x[e] * y[e];
  return acc;
}

// n rows of a (., width) matrix into shared memory (all threads)
template <typename T> __device__ void stage(T *dst, const T *src, int64_t n, int64_t width) {
  for (int64_t x = threadIdx.x; x < n * width; x += blockDim.x) dst[x] = src[x];
}

// the next tile: n rows of x (., wx) and y (., wy) moved into shared memory at
// xs, ys when tiles are used (tile > 0), x and y then pointing there. Every
// thread of the block calls it (barriers).
template <typename T>
__device__ void next_tile(int tile, T *xs, T *ys, const T *&x, const T *&y, int64_t n, int64_t wx, int64_t wy) {
  if (tile <= 0) return;
  __syncthreads(); // the previous tile is used up
  stage(xs, x, n, wx);
  stage(ys, y, n, wy);
  __syncthreads();
  x = xs, y = ys;
}

template <typename T>
__global__ void __launch_bounds__(ROWS)
    sdpa_fwd(attn_p a, const T *Q, const T *K, const T *V, const T *mask, T *O, T *LSE, int tile) {
  __shared__ double smem[SMEM_BYTES / sizeof(double)];
  T *ks = (T *)smem, *vs = ks + (int64_t)tile * a.E;
  const int64_t nb = (a.L + ROWS - 1) / ROWS, b = blockIdx.x / nb, i0 = (blockIdx.x % nb) * ROWS;
  const int64_t i = i0 + threadIdx.x, step = tile > 0 ? tile : TILE;
  const bool active = i < a.L;
  const T *q = Q + (b * a.L + i) * a.E;
  T *o = O + (b * a.L + i) * a.Ev;
  T m = -(T)INFINITY, l = 0, s[TILE];
  if (active)
    for (int64_t e = 0; e < a.Ev; e++) o[e] = 0;
  const int64_t jend = a.causal && i0 + ROWS < a.S ? i0 + ROWS : a.S; // uniform across the block
  for (int64_t j0 = 0; j0 < jend; j0 += step) {
    const int nk = (int)(a.S - j0 < step ? a.S - j0 : step);
    const T *kt = K + (b * a.S + j0) * a.E, *vt = V + (b * a.S + j0) * a.Ev;
    next_tile(tile, ks, vs, kt, vt, nk, a.E, a.Ev);
    if (!active) continue;
    T mx = -(T)INFINITY;
    for (int c = 0; c < nk; c++) {
      s[c] = score(a, mask, b, i, j0 + c, dot(q, kt + c * a.E, a.E));
      mx = s[c] > mx ? s[c] : mx;
    }
    const T mn = mx > m ? mx : m, shift = mn == -(T)INFINITY ? (T)0 : mn, corr = exp(m - shift);
    T sum = 0;
    for (int c = 0; c < nk; c++) {
      T e = exp(s[c] - shift);
      sum += e;
      s[c] = dropped(a, b, i, j0 + c, e);
    }
    l = l * corr + sum, m = mn;
    for (int64_t e = 0; e < a.Ev; e++) {
      T acc = o[e] * corr;
      for (int c = 0; c < nk; c++) acc += s[c] * vt[c * a.Ev + e];
      o[e] = acc;
    }
  }
  if (!active) return;
  const T inv = (T)1 / l; // l = 0: every key masked, o = 0 * inf = NaN as the math gives
  for (int64_t e = 0; e < a.Ev; e++) o[e] *= inv;
  LSE[b * a.L + i] = m + log(l);
}

// dq: one thread per query row over tiles of keys and values
template <typename T>
__global__ void __launch_bounds__(ROWS)
    sdpa_bwd_q(attn_p a, const T *dO, const T *Q, const T *K, const T *V, const T *LSE, const T *D, const T *mask,
               T *dQ, int tile) {
  __shared__ double smem[SMEM_BYTES / sizeof(double)];
  T *ks = (T *)smem, *vs = ks + (int64_t)tile * a.E;
  const int64_t nb = (a.L + ROWS - 1) / ROWS, b = blockIdx.x / nb, i0 = (blockIdx.x % nb) * ROWS;
  const int64_t i = i0 + threadIdx.x, step = tile > 0 ? tile : TILE;
  const bool active = i < a.L;
  const T *q = Q + (b * a.L + i) * a.E, *g = dO + (b * a.L + i) * a.Ev;
  T *dq = dQ + (b * a.L + i) * a.E, ds[TILE];
  const T lse = active ? LSE[b * a.L + i] : (T)0, delta = active ? D[b * a.L + i] : (T)0;
  if (active)
    for (int64_t e = 0; e < a.E; e++) dq[e] = 0;
  const int64_t jend = a.causal && i0 + ROWS < a.S ? i0 + ROWS : a.S;
  for (int64_t j0 = 0; j0 < jend; j0 += step) {
    const int nk = (int)(a.S - j0 < step ? a.S - j0 : step);
    const T *kt = K + (b * a.S + j0) * a.E, *vt = V + (b * a.S + j0) * a.Ev;
    next_tile(tile, ks, vs, kt, vt, nk, a.E, a.Ev);
    if (!active) continue;
    for (int c = 0; c < nk; c++) {
      const int64_t j = j0 + c;
      T p = exp(score(a, mask, b, i, j, dot(q, kt + c * a.E, a.E)) - lse);
      T dp = dropped(a, b, i, j, dot(g, vt + c * a.Ev, a.Ev));
      ds[c] = p * (dp - delta);
    }
    for (int64_t e = 0; e < a.E; e++) {
      T acc = 0;
      for (int c = 0; c < nk; c++) acc += ds[c] * kt[c * a.E + e];
      dq[e] += (T)a.scale * acc;
    }
  }
}

// dk, dv: one thread per key row over tiles of queries and their output gradients
template <typename T>
__global__ void __launch_bounds__(ROWS)
    sdpa_bwd_kv(attn_p a, const T *dO, const T *Q, const T *K, const T *V, const T *LSE, const T *D, const T *mask,
                T *dK, T *dV, int tile) {
  __shared__ double smem[SMEM_BYTES / sizeof(double)];
  T *qs = (T *)smem, *gs = qs + (int64_t)tile * a.E;
  const int64_t nb = (a.S + ROWS - 1) / ROWS, b = blockIdx.x / nb, j0 = (blockIdx.x % nb) * ROWS;
  const int64_t j = j0 + threadIdx.x, step = tile > 0 ? tile : TILE;
  const bool active = j < a.S;
  const T *k = K + (b * a.S + j) * a.E, *v = V + (b * a.S + j) * a.Ev;
  T *dk = dK + (b * a.S + j) * a.E, *dv = dV + (b * a.S + j) * a.Ev, pv[TILE], ds[TILE];
  if (active) {
    for (int64_t e = 0; e < a.E; e++) dk[e] = 0;
    for (int64_t e = 0; e < a.Ev; e++) dv[e] = 0;
  }
  // causal: queries before the block's first key see none of its keys
  for (int64_t i0 = a.causal ? j0 : 0; i0 < a.L; i0 += step) {
    const int nq = (int)(a.L - i0 < step ? a.L - i0 : step);
    const T *qt = Q + (b * a.L + i0) * a.E, *gt = dO + (b * a.L + i0) * a.Ev;
    next_tile(tile, qs, gs, qt, gt, nq, a.E, a.Ev);
    if (!active) continue;
    for (int c = 0; c < nq; c++) {
      const int64_t i = i0 + c;
      T p = exp(score(a, mask, b, i, j, dot(qt + c * a.E, k, a.E)) - LSE[b * a.L + i]);
      pv[c] = dropped(a, b, i, j, p);
      T dp = dropped(a, b, i, j, dot(gt + c * a.Ev, v, a.Ev));
      ds[c] = p * (dp - D[b * a.L + i]);
    }
    for (int64_t e = 0; e < a.Ev; e++) {
      T acc = 0;
      for (int c = 0; c < nq; c++) acc += pv[c] * gt[c * a.Ev + e];
      dv[e] += acc;
    }
    for (int64_t e = 0; e < a.E; e++) {
      T acc = 0;
      for (int c = 0; c < nq; c++) acc += ds[c] * qt[c * a.E + e];
      dk[e] += (T)a.scale * acc;
    }
  }
}

attn_p params_of(const ts_call *c, int q, int k, int v, int mask) {
  ts_tensor *const *in = c->in;
  attn_p a = {};
  a.B = in[q]->sizes[0], a.L = in[q]->sizes[1], a.S = in[k]->sizes[1], a.E = in[q]->sizes[2];
  a.Ev = in[v]->sizes[2];
  if (c->nin > mask) a.ms0 = in[mask]->strides[0], a.ms1 = in[mask]->strides[1], a.ms2 = in[mask]->strides[2];
  a.causal = c->i[2] != 0, a.p = c->f[0], a.scale = c->f[1];
  a.seed = (uint64_t)c->i[0], a.offset = (uint64_t)c->i[1];
  return a;
}

template <typename T> const T *opt(const ts_call *c, int k) { return c->nin > k ? tsc_ptr<T>(c->in[k]) : nullptr; }

template <typename T> ts_status forward(const ts_call *c) {
  attn_p a = params_of(c, 0, 1, 2, 3);
  const unsigned blocks = (unsigned)(a.B * ((a.L + ROWS - 1) / ROWS));
  sdpa_fwd<T><<<blocks, ROWS, 0, tsc_stream()>>>(a, tsc_ptr<T>(c->in[0]), tsc_ptr<T>(c->in[1]), tsc_ptr<T>(c->in[2]),
                                                opt<T>(c, 3), tsc_ptr<T>(c->out[0]), tsc_ptr<T>(c->out[1]),
                                                tile_rows<T>(a.E + a.Ev));
  TSC_LAUNCH_CHECK("sdpa_forward");
  return TS_OK;
}

template <typename T> ts_status backward(const ts_call *c) {
  attn_p a = params_of(c, 1, 2, 3, 6);
  ts_tensor *const *in = c->in;
  const T *g = tsc_ptr<T>(in[0]), *q = tsc_ptr<T>(in[1]), *k = tsc_ptr<T>(in[2]), *v = tsc_ptr<T>(in[3]);
  const T *lse = tsc_ptr<T>(in[4]), *d = tsc_ptr<T>(in[5]), *mask = opt<T>(c, 6);
  const int tile = tile_rows<T>(a.E + a.Ev);
  unsigned blocks = (unsigned)(a.B * ((a.L + ROWS - 1) / ROWS));
  sdpa_bwd_q<T><<<blocks, ROWS, 0, tsc_stream()>>>(a, g, q, k, v, lse, d, mask, tsc_ptr<T>(c->out[0]), tile);
  TSC_LAUNCH_CHECK("sdpa_backward");
  blocks = (unsigned)(a.B * ((a.S + ROWS - 1) / ROWS));
  sdpa_bwd_kv<T><<<blocks, ROWS, 0, tsc_stream()>>>(a, g, q, k, v, lse, d, mask, tsc_ptr<T>(c->out[1]),
                                                   tsc_ptr<T>(c->out[2]), tile);
  TSC_LAUNCH_CHECK("sdpa_backward");
  return TS_OK;
}

ts_status k_sdpa_forward(const ts_call *c) {
  return c->in[0]->dtype == TS_FLOAT64 ? forward<double>(c) : forward<float>(c);
}
ts_status k_sdpa_backward(const ts_call *c) {
  return c->in[0]->dtype == TS_FLOAT64 ? backward<double>(c) : backward<float>(c);
}

} // namespace

void tsc_register_attention(ts_kernel *k) {
  k[TS_OP_SDPA_FORWARD] = k_sdpa_forward;
  k[TS_OP_SDPA_BACKWARD] = k_sdpa_backward;
}
