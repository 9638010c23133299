// CUDA kernels of fused scaled dot-product attention (contracts in
// src/ops/ops_attention.def; the CPU's src/cpu/attention.c is the reference).
// Flash attention's scheme with one thread per row: a block of ROWS threads
// owns ROWS query rows (forward, dq) or key rows (dk, dv) and walks the other
// side in tiles staged in shared memory. The forward keeps an online softmax
// per query (running max and sum; its output row is rescaled when the max
// grows), so no (L, S) matrix exists; the backward rebuilds each probability
// as exp(score - lse) from the saved log-sum-exp. Every output row is written
// by one thread: no atomics, the same answer on every run. Dropout draws
// ts_sdpa_keep (src/ops/op_attention.h), as the CPU does.
// Operands are (B, H, rows, features) with any strides but a unit stride in
// the last dim, so the heads of a (B, T, 3, H, D) projection are read where
// the projection wrote them and the output is written in the layout the next
// projection reads: no layout copies around the op. The backward is one
// launch (its first blocks compute dq, the rest dk and dv) and computes the
// softmax's row term delta_i = do_i . o_i itself.
#include "common.cuh"

namespace {

constexpr int ROWS = 64;          // threads per block, one row each
constexpr int TILE = 32;          // rows of the other side per tile, at most
constexpr int SMEM_BYTES = 16384; // shared memory per block for the tiles

// an operand's strides in elements over (B, H, rows); the feature dim's stride is 1
struct strides3 {
  int64_t b, h, r;
};

struct attn_p {
  int64_t B, H, L, S, E, Ev;
  int64_t ms0, ms1, ms2, ms3; // the mask's strides over (B, H, L, S)
  strides3 q, k, v, o, g, dq, dk, dv;
  int causal;
  double p, scale;
  uint64_t seed, offset;
};

// batch-and-head bh = b * H + h and its parts, divided once per thread: a
// 64-bit division is a call to a routine, and with one per tile (and per
// masked score) the values live across the calls spilled (sdpa_fwd<double>)
struct head {
  int64_t bh, b, h;
};
__device__ __forceinline__ head head_of(const attn_p &a, int64_t bh) {
  const int64_t b = bh / a.H;
  return {bh, b, bh - b * a.H};
}

// the offset of row r of head hd in an operand
__device__ __forceinline__ int64_t at(const strides3 &s, const head &hd, int64_t r) {
  return hd.b * s.b + hd.h * s.h + r * s.r;
}

// rows of the other side per tile: what fits the shared memory (0: read global memory)
template <typename T> int tile_rows(int64_t width) {
  int64_t t = SMEM_BYTES / (int64_t)sizeof(T) / (width > 0 ? width : 1);
  return (int)(t > TILE ? TILE : t);
}

// score (bh, i, j) from the dot product: scaled, masked, -inf for a future key
template <typename T>
__device__ __forceinline__ T score(const attn_p &a, const T *mask, const head &hd, int64_t i, int64_t j, T dot) {
  T s = dot * (T)a.scale;
  if (mask) s += mask[hd.b * a.ms0 + hd.h * a.ms1 + i * a.ms2 + j * a.ms3];
  if (a.causal && j > i) s = -(T)INFINITY;
  return s;
}

template <typename T> __device__ __forceinline__ T dropped(const attn_p &a, const head &hd, int64_t i, int64_t j, T x) {
  if (a.p <= 0) return x;
  const T rs = a.p < 1 ? (T)(1 / (1 - a.p)) : (T)0; // as the CPU computes it
  return ts_sdpa_keep(a.seed, a.offset, hd.bh * a.L + i, a.S, j, (float)a.p) ? x * rs : (T)0;
}

template <typename T> __device__ __forceinline__ T dot(const T *x, const T *y, int64_t n) {
  T acc = 0;
  for (int64_t e = 0; e < n; e++) acc += x[e] * y[e];
  return acc;
}

// n rows (row stride ld) of width features into shared memory, packed (all
// threads). A tile fits SMEM_BYTES, so its indices divide in 32 bits (inline;
// a 64-bit division is a routine call)
template <typename T> __device__ void stage(T *dst, const T *src, int n, int width, int64_t ld) {
  for (int x = threadIdx.x; x < n * width; x += blockDim.x) dst[x] = src[(int64_t)(x / width) * ld + x % width];
}

// the next tile: n rows of x (wx features, row stride ldx) and y (wy, ldy) moved
// into shared memory at xs, ys when tiles are used (tile > 0), x and y then
// pointing there with packed rows. Every thread of the block calls it (barriers).
template <typename T>
__device__ void next_tile(int tile, T *xs, T *ys, const T *&x, const T *&y, int64_t &ldx, int64_t &ldy, int64_t n,
                          int64_t wx, int64_t wy) {
  if (tile <= 0) return;
  __syncthreads(); // the previous tile is used up
  stage(xs, x, (int)n, (int)wx, ldx);
  stage(ys, y, (int)n, (int)wy, ldy);
  __syncthreads();
  x = xs, y = ys, ldx = wx, ldy = wy;
}

template <typename T>
__global__ void __launch_bounds__(ROWS)
    sdpa_fwd(attn_p a, const T *Q, const T *K, const T *V, const T *mask, T *O, T *LSE, int tile) {
  __shared__ double smem[SMEM_BYTES / sizeof(double)];
  T *ks = (T *)smem, *vs = ks + (int64_t)tile * a.E;
  const int64_t nb = (a.L + ROWS - 1) / ROWS, bh = blockIdx.x / nb, i0 = (blockIdx.x % nb) * ROWS;
  const int64_t i = i0 + threadIdx.x, step = tile > 0 ? tile : TILE;
  const bool active = i < a.L;
  const head hd = head_of(a, bh);
  const T *q = Q + at(a.q, hd, i);
  T *o = O + at(a.o, hd, i);
  T m = -(T)INFINITY, l = 0, s[TILE];
  if (active)
    for (int64_t e = 0; e < a.Ev; e++) o[e] = 0;
  const int64_t jend = a.causal && i0 + ROWS < a.S ? i0 + ROWS : a.S; // uniform across the block
  for (int64_t j0 = 0; j0 < jend; j0 += step) {
    const int nk = (int)(a.S - j0 < step ? a.S - j0 : step);
    const T *kt = K + at(a.k, hd, j0), *vt = V + at(a.v, hd, j0);
    int64_t ldk = a.k.r, ldv = a.v.r;
    next_tile(tile, ks, vs, kt, vt, ldk, ldv, nk, a.E, a.Ev);
    if (!active) continue;
    T mx = -(T)INFINITY;
    for (int c = 0; c < nk; c++) {
      s[c] = score(a, mask, hd, i, j0 + c, dot(q, kt + c * ldk, a.E));
      mx = s[c] > mx ? s[c] : mx;
    }
    const T mn = mx > m ? mx : m, shift = mn == -(T)INFINITY ? (T)0 : mn, corr = exp(m - shift);
    T sum = 0;
    for (int c = 0; c < nk; c++) {
      T e = exp(s[c] - shift);
      sum += e;
      s[c] = dropped(a, hd, i, j0 + c, e);
    }
    l = l * corr + sum, m = mn;
    for (int64_t e = 0; e < a.Ev; e++) {
      T acc = o[e] * corr;
      for (int c = 0; c < nk; c++) acc += s[c] * vt[c * ldv + e];
      o[e] = acc;
    }
  }
  if (!active) return;
  const T inv = (T)1 / l; // l = 0: every key masked, o = 0 * inf = NaN as the math gives
  for (int64_t e = 0; e < a.Ev; e++) o[e] *= inv;
  LSE[bh * a.L + i] = m + log(l);
}

// the operands of the backward
template <typename T> struct bwd_args {
  const T *dO, *Q, *K, *V, *O, *LSE, *mask;
  T *dQ, *dK, *dV;
};

// dq: one thread per query row over tiles of keys and values (block qb of the dq blocks)
template <typename T> __device__ void bwd_q(const attn_p &a, const bwd_args<T> &w, int64_t qb, int tile, T *smem) {
  T *ks = smem, *vs = ks + (int64_t)tile * a.E;
  const int64_t nb = (a.L + ROWS - 1) / ROWS, bh = qb / nb, i0 = (qb % nb) * ROWS;
  const int64_t i = i0 + threadIdx.x, step = tile > 0 ? tile : TILE;
  const bool active = i < a.L;
  const head hd = head_of(a, bh);
  const T *q = w.Q + at(a.q, hd, i), *g = w.dO + at(a.g, hd, i);
  T *dq = w.dQ + at(a.dq, hd, i), ds[TILE];
  // delta_i = do_i . o_i, the softmax backward's row term (o = dropped p v)
  const T lse = active ? w.LSE[bh * a.L + i] : (T)0, delta = active ? dot(g, w.O + at(a.o, hd, i), a.Ev) : (T)0;
  if (active)
    for (int64_t e = 0; e < a.E; e++) dq[e] = 0;
  const int64_t jend = a.causal && i0 + ROWS < a.S ? i0 + ROWS : a.S;
  for (int64_t j0 = 0; j0 < jend; j0 += step) {
    const int nk = (int)(a.S - j0 < step ? a.S - j0 : step);
    const T *kt = w.K + at(a.k, hd, j0), *vt = w.V + at(a.v, hd, j0);
    int64_t ldk = a.k.r, ldv = a.v.r;
    next_tile(tile, ks, vs, kt, vt, ldk, ldv, nk, a.E, a.Ev);
    if (!active) continue;
    for (int c = 0; c < nk; c++) {
      const int64_t j = j0 + c;
      T p = exp(score(a, w.mask, hd, i, j, dot(q, kt + c * ldk, a.E)) - lse);
      T dp = dropped(a, hd, i, j, dot(g, vt + c * ldv, a.Ev));
      ds[c] = p * (dp - delta);
    }
    for (int64_t e = 0; e < a.E; e++) {
      T acc = 0;
      for (int c = 0; c < nk; c++) acc += ds[c] * kt[c * ldk + e];
      dq[e] += (T)a.scale * acc;
    }
  }
}

// dk, dv: one thread per key row over tiles of queries and their output
// gradients (block kb of the dk/dv blocks); the tile's deltas in dl
template <typename T>
__device__ void bwd_kv(const attn_p &a, const bwd_args<T> &w, int64_t kb, int tile, T *smem, T *dl) {
  T *qs = smem, *gs = qs + (int64_t)tile * a.E;
  const int64_t nb = (a.S + ROWS - 1) / ROWS, bh = kb / nb, j0 = (kb % nb) * ROWS;
  const int64_t j = j0 + threadIdx.x, step = tile > 0 ? tile : TILE;
  const bool active = j < a.S;
  const head hd = head_of(a, bh);
  const T *k = w.K + at(a.k, hd, j), *v = w.V + at(a.v, hd, j);
  T *dk = w.dK + at(a.dk, hd, j), *dv = w.dV + at(a.dv, hd, j), pv[TILE], ds[TILE];
  if (active) {
    for (int64_t e = 0; e < a.E; e++) dk[e] = 0;
    for (int64_t e = 0; e < a.Ev; e++) dv[e] = 0;
  }
  // causal: queries before the block's first key see none of its keys
  for (int64_t i0 = a.causal ? j0 : 0; i0 < a.L; i0 += step) {
    const int nq = (int)(a.L - i0 < step ? a.L - i0 : step);
    const T *qt = w.Q + at(a.q, hd, i0), *gt = w.dO + at(a.g, hd, i0);
    int64_t ldq = a.q.r, ldg = a.g.r;
    __syncthreads(); // the previous tile's deltas are used up
    next_tile(tile, qs, gs, qt, gt, ldq, ldg, nq, a.E, a.Ev);
    if (threadIdx.x < nq) dl[threadIdx.x] = dot(gt + threadIdx.x * ldg, w.O + at(a.o, hd, i0 + threadIdx.x), a.Ev);
    __syncthreads();
    if (!active) continue;
    for (int c = 0; c < nq; c++) {
      const int64_t i = i0 + c;
      T p = exp(score(a, w.mask, hd, i, j, dot(qt + c * ldq, k, a.E)) - w.LSE[bh * a.L + i]);
      pv[c] = dropped(a, hd, i, j, p);
      T dp = dropped(a, hd, i, j, dot(gt + c * ldg, v, a.Ev));
      ds[c] = p * (dp - dl[c]);
    }
    for (int64_t e = 0; e < a.Ev; e++) {
      T acc = 0;
      for (int c = 0; c < nq; c++) acc += pv[c] * gt[c * ldg + e];
      dv[e] += acc;
    }
    for (int64_t e = 0; e < a.E; e++) {
      T acc = 0;
      for (int c = 0; c < nq; c++) acc += ds[c] * qt[c * ldq + e];
      dk[e] += (T)a.scale * acc;
    }
  }
}

// the whole backward in one launch: blocks [0, qblocks) compute dq, the rest dk and dv
template <typename T>
__global__ void __launch_bounds__(ROWS) sdpa_bwd(attn_p a, bwd_args<T> w, int64_t qblocks, int tile) {
  __shared__ double smem[SMEM_BYTES / sizeof(double)];
  __shared__ double dls[TILE];
  if ((int64_t)blockIdx.x < qblocks) bwd_q(a, w, (int64_t)blockIdx.x, tile, (T *)smem);
  else bwd_kv(a, w, (int64_t)blockIdx.x - qblocks, tile, (T *)smem, (T *)dls);
}

strides3 strides_of(const ts_tensor *t) { return {t->strides[0], t->strides[1], t->strides[2]}; }

attn_p params_of(const ts_call *c, int q, int k, int v, int mask) {
  ts_tensor *const *in = c->in;
  attn_p a = {};
  a.B = in[q]->sizes[0], a.H = in[q]->sizes[1], a.L = in[q]->sizes[2], a.S = in[k]->sizes[2];
  a.E = in[q]->sizes[3], a.Ev = in[v]->sizes[3];
  a.q = strides_of(in[q]), a.k = strides_of(in[k]), a.v = strides_of(in[v]);
  if (c->nin > mask) {
    const int64_t *ms = in[mask]->strides;
    a.ms0 = ms[0], a.ms1 = ms[1], a.ms2 = ms[2], a.ms3 = ms[3];
  }
  a.causal = c->i[2] != 0, a.p = c->f[0], a.scale = c->f[1];
  a.seed = (uint64_t)c->i[0], a.offset = (uint64_t)c->i[1];
  return a;
}

template <typename T> const T *opt(const ts_call *c, int k) { return c->nin > k ? tsc_ptr<T>(c->in[k]) : nullptr; }

template <typename T> ts_status forward(const ts_call *c) {
  attn_p a = params_of(c, 0, 1, 2, 3);
  a.o = strides_of(c->out[0]);
  const unsigned blocks = (unsigned)(a.B * a.H * ((a.L + ROWS - 1) / ROWS));
  sdpa_fwd<T><<<blocks, ROWS, 0, tsc_stream()>>>(a, tsc_ptr<T>(c->in[0]), tsc_ptr<T>(c->in[1]), tsc_ptr<T>(c->in[2]),
                                                opt<T>(c, 3), tsc_ptr<T>(c->out[0]), tsc_ptr<T>(c->out[1]),
                                                tile_rows<T>(a.E + a.Ev));
  TSC_LAUNCH_CHECK("sdpa_forward");
  return TS_OK;
}

template <typename T> ts_status backward(const ts_call *c) {
  attn_p a = params_of(c, 1, 2, 3, 6);
  ts_tensor *const *in = c->in;
  a.g = strides_of(in[0]), a.o = strides_of(in[4]);
  a.dq = strides_of(c->out[0]), a.dk = strides_of(c->out[1]), a.dv = strides_of(c->out[2]);
  bwd_args<T> w = {tsc_ptr<T>(in[0]), tsc_ptr<T>(in[1]), tsc_ptr<T>(in[2]), tsc_ptr<T>(in[3]), tsc_ptr<T>(in[4]),
                   tsc_ptr<T>(in[5]), opt<T>(c, 6), tsc_ptr<T>(c->out[0]), tsc_ptr<T>(c->out[1]),
                   tsc_ptr<T>(c->out[2])};
  const int64_t qblocks = a.B * a.H * ((a.L + ROWS - 1) / ROWS), kblocks = a.B * a.H * ((a.S + ROWS - 1) / ROWS);
  sdpa_bwd<T><<<(unsigned)(qblocks + kblocks), ROWS, 0, tsc_stream()>>>(a, w, qblocks, tile_rows<T>(a.E + a.Ev));
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
