// CUDA kernels of the nn family (contracts in src/ops/ops_nn.def; the CPU
// reference is src/cpu/nn.c). This file holds batch, layer and group norm and the
// family's registration; convolution kernels live in nn_conv.cu, pooling in nn_pool.cu.
//
// Batch norm sees x as (N, C, S) contiguous and per-channel vectors (C)
// contiguous, float32 or float64. The per-channel reductions (statistics,
// backward sums) accumulate in double in two launches: partial states per
// (channel, slice of the channel's elements), then one block per channel
// merges them. The statistics use Welford states merged with Chan's formula,
// so the variance does not suffer the cancellation of sum-of-squares.
// Two layouts of the partial pass: with long planes (S large) a block walks
// segments of one channel's planes; with short ones (S small, e.g. (N, C)
// inputs) warps read rows of the (N, C*S) matrix across channels, so loads
// stay coalesced either way.
#include "common.cuh"

// C's NAN (a positive quiet NaN), as the CPU kernels store
#define NAN_D __longlong_as_double(0x7ff8000000000000LL)

void tsc_register_nn_conv(ts_kernel *k); // nn_conv.cu
void tsc_register_nn_pool(ts_kernel *k); // nn_pool.cu
void tsc_register_rnn(ts_kernel *k);     // rnn.cu
void tsc_register_attention(ts_kernel *k); // attention.cu
void tsc_register_nn_act(ts_kernel *k);    // nn_act.cu
void tsc_register_nn_upsample(ts_kernel *k); // nn_upsample.cu

// ---- reduction states ------------------------------------------------------------

struct welford {
  double n, mean, m2;
};

__device__ __forceinline__ welford merge(const welford &a, const welford &b) {
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  const double n = a.n + b.n, d = b.mean - a.mean;
  return {n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * (b.n / n))};
}

__device__ __forceinline__ void welford_add(welford &s, double v) {
  s.n += 1;
  const double d = v - s.mean;
  s.mean += d / s.n;
  s.m2 += d * (v - s.mean);
}

__device__ __forceinline__ welford shfl_down(const welford &s, int off) {
  return {__shfl_down_sync(0xffffffffu, s.n, off), __shfl_down_sync(0xffffffffu, s.mean, off),
          __shfl_down_sync(0xffffffffu, s.m2, off)};
}

struct sums2 {
  double a, d;
};

__device__ __forceinline__ sums2 merge(const sums2 &x, const sums2 &y) { return {x.a + y.a, x.d + y.d}; }

__device__ __forceinline__ sums2 shfl_down(const sums2 &s, int off) {
  return {__shfl_down_sync(0xffffffffu, s.a, off), __shfl_down_sync(0xffffffffu, s.d, off)};
}

// Mean and biased variance of x (N, C, S) per channel.
template <typename T> struct stats_op {
  using acc = welford;
  struct chan {};
  const T *x;
  T *mean, *var; // (C)
  __device__ chan channel(int64_t) const { return {}; }
  __device__ static acc zero() { return {0, 0, 0}; }
  __device__ void add(acc &s, const chan &, int64_t off) const { welford_add(s, (double)x[off]); }
  __device__ void finish(int64_t c, const acc &s) const {
    mean[c] = (T)(s.n > 0 ? s.mean : NAN_D);
    var[c] = (T)(s.n > 0 ? s.m2 / s.n : NAN_D);
  }
};

// The backward sums per channel: sum go, and sum go * (x - mean) * invstd
// (x - mean in T, as the CPU).
template <typename T> struct bw_reduce_op {
  using acc = sums2;
  struct chan {
    T m;
  };
  const T *go, *x, *mean, *inv; // go, x (N, C, S); mean, inv (C)
  T *sg, *sgx;                  // (C)
  __device__ chan channel(int64_t c) const { return {mean[c]}; }
  __device__ static acc zero() { return {0, 0}; }
  __device__ void add(acc &s, const chan &ch, int64_t off) const {
    const T g = go[off];
    s.a += (double)g;
    s.d += (double)g * (double)(x[off] - ch.m);
  }
  __device__ void finish(int64_t c, const acc &s) const {
    sg[c] = (T)s.a;
    sgx[c] = (T)(s.d * (double)inv[c]);
  }
};

// The state merged over the block (blockDim.x a multiple of 32); valid in
// thread 0. Every thread of the block must call it.
template <typename A> __device__ A block_merge(A s) {
  __shared__ A part[32];
  for (int off = 16; off > 0; off >>= 1) s = merge(s, shfl_down(s, off));
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5);
  __syncthreads(); // a previous call may still read part
  if (lane == 0) part[wid] = s;
  __syncthreads();
  if (wid == 0) {
    s = lane < nw ? part[lane] : part[0];
    for (int off = 16; off > 0; off >>= 1) {
      A o = shfl_down(s, off);
      if (lane + off < nw) s = merge(s, o); // lanes past nw hold copies of part[0]
    }
  }
  return s;
}

#define BN_THREADS 256
#define BN_SEG 2048 // elements of one plane a block takes at a time (long planes)
#define BN_COLS 32  // columns per block (short planes): one warp's row
#define BN_ROWS 8   // rows per block step (short planes)

// Long planes: virtual block vb is slice g of channel c (vb = c*G + g); slice g
// takes the (plane, segment) items g, g + G, ...; partial[c*G + g].
template <typename Op>
__global__ void bn_partial_planes(Op op, int64_t N, int64_t C, int64_t S, int64_t G, typename Op::acc *partial) {
  const int64_t segs = (S + BN_SEG - 1) / BN_SEG, items = N * segs;
  for (int64_t vb = blockIdx.x; vb < C * G; vb += gridDim.x) { // block-uniform
    const int64_t c = vb / G, g = vb % G;
    const typename Op::chan ch = op.channel(c);
    typename Op::acc s = Op::zero();
    for (int64_t it = g; it < items; it += G) {
      const int64_t n = it / segs, s0 = (it % segs) * BN_SEG, e = min(s0 + BN_SEG, S);
      const int64_t base = (n * C + c) * S;
      for (int64_t k = s0 + threadIdx.x; k < e; k += blockDim.x) op.add(s, ch, base + k);
    }
    s = block_merge(s);
    if (threadIdx.x == 0) partial[vb] = s;
  }
}

// Short planes: x as (N, C*S); virtual block vb = tile*G + g covers columns
// [tile*32, tile*32 + 32) and rows g*8 + ty, stepping G*8; partial[j*G + g] for
// column j = c*S + k, so channel c's S*G partials are contiguous.
template <typename Op>
__global__ void bn_partial_cols(Op op, int64_t N, int64_t C, int64_t S, int64_t G, typename Op::acc *partial) {
  __shared__ typename Op::acc part[BN_ROWS][BN_COLS];
  const int64_t cols = C * S, tiles = (cols + BN_COLS - 1) / BN_COLS;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t vb = blockIdx.x; vb < tiles * G; vb += gridDim.x) { // block-uniform
    const int64_t tile = vb / G, g = vb % G, j = tile * BN_COLS + tx;
    typename Op::acc s = Op::zero();
    if (j < cols) {
      const typename Op::chan ch = op.channel(j / S);
      for (int64_t n = g * BN_ROWS + ty; n < N; n += G * BN_ROWS) op.add(s, ch, n * cols + j);
    }
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && j < cols) {
      for (int r = 1; r < BN_ROWS; r++) s = merge(s, part[r][tx]);
      partial[j * G + g] = s;
    }
    __syncthreads();
  }
}

// One block per channel merges its Q partials (Q may be 0: an empty channel).
template <typename Op> __global__ void bn_final(Op op, int64_t C, int64_t Q, const typename Op::acc *partial) {
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) { // block-uniform
    typename Op::acc s = Op::zero();
    for (int64_t q = threadIdx.x; q < Q; q += blockDim.x) s = merge(s, partial[c * Q + q]);
    s = block_merge(s);
    if (threadIdx.x == 0) op.finish(c, s);
  }
}

template <typename Op> static ts_status bn_reduce(const Op &op, int64_t N, int64_t C, int64_t S, const char *what) {
  using A = typename Op::acc;
  if (C == 0) return TS_OK;
  const int64_t target = (int64_t)tsc_sm_count() * 8; // blocks for the partial pass
  const bool planes = S >= 512;
  int64_t G = 1, Q = 0, units = 0; // slices per channel (or column tile), partials per channel
  if (N * S > 0) {
    if (planes) {
      const int64_t items = N * ((S + BN_SEG - 1) / BN_SEG);
      G = (target + C - 1) / C;
      G = G < 1 ? 1 : G > items ? items : G;
      Q = G, units = C * G;
    } else {
      const int64_t tiles = (C * S + BN_COLS - 1) / BN_COLS, rows = (N + BN_ROWS - 1) / BN_ROWS;
      G = (target + tiles - 1) / tiles;
      G = G < 1 ? 1 : G > rows ? rows : G;
      Q = S * G, units = tiles * G;
    }
  }
  ts_status st = TS_OK;
  A *partial = NULL;
  if (Q > 0) {
    partial = (A *)tsc_temp_alloc((size_t)(C * Q) * sizeof(A), &st);
    if (st) return st;
    const unsigned grid = (unsigned)(units < INT32_MAX ? units : INT32_MAX);
    if (planes) bn_partial_planes<Op><<<grid, BN_THREADS, 0, tsc_stream()>>>(op, N, C, S, G, partial);
    else bn_partial_cols<Op><<<grid, dim3(BN_COLS, BN_ROWS), 0, tsc_stream()>>>(op, N, C, S, G, partial);
    st = tsc_after_launch(what);
  }
  if (!st) {
    const unsigned grid = (unsigned)(C < INT32_MAX ? C : INT32_MAX);
    bn_final<Op><<<grid, BN_THREADS, 0, tsc_stream()>>>(op, C, Q, partial);
    st = tsc_after_launch(what);
  }
  tsc_temp_free(partial);
  return st;
}

// ---- elementwise passes -----------------------------------------------------------

template <typename T, int V> struct alignas(sizeof(T) * V) vec {
  T v[V];
};

// y = x * sc + sh per channel, sc = inv * w, sh = b - mean * sc (in T, as the CPU).
template <typename T> struct elemt_op {
  const T *x, *mean, *inv, *w, *b;
  T *y;
  struct chan {
    T sc, sh;
  };
  __device__ chan channel(int64_t c) const {
    const T sc = inv[c] * w[c];
    return {sc, b[c] - mean[c] * sc};
  }
  template <int V> __device__ void run(const chan &ch, int64_t i) const {
    vec<T, V> p = *(const vec<T, V> *)(x + i), q;
#pragma unroll
    for (int k = 0; k < V; k++) q.v[k] = p.v[k] * ch.sc + ch.sh;
    *(vec<T, V> *)(y + i) = q;
  }
};

// gx = a * go + bb * (x - mean) + d per channel, the coefficients from double
// as the CPU: k = w * invstd, a = k, bb = -k * invstd * f * sum_gxhat,
// d = -k * f * sum_go.
template <typename T> struct bw_elemt_op {
  const T *go, *x, *mean, *inv, *w, *sg, *sgx;
  double f;
  T *gx;
  struct chan {
    T a, bb, d, m;
  };
  __device__ chan channel(int64_t c) const {
    const double iv = (double)inv[c], k = (double)w[c] * iv;
    return {(T)k, (T)(-k * iv * f * (double)sgx[c]), (T)(-k * f * (double)sg[c]), mean[c]};
  }
  template <int V> __device__ void run(const chan &ch, int64_t i) const {
    vec<T, V> g = *(const vec<T, V> *)(go + i), p = *(const vec<T, V> *)(x + i), q;
#pragma unroll
    for (int k = 0; k < V; k++) q.v[k] = ch.a * g.v[k] + ch.bb * (p.v[k] - ch.m) + ch.d;
    *(vec<T, V> *)(gx + i) = q;
  }
};

// One thread per V consecutive elements of (N, C, S); S % V == 0, so the V
// share a channel. I indexes the vectors.
template <typename Op, int V, typename I>
__global__ void bn_elemt_kernel(Op op, I nvec, I S, I C) {
  for (I vi = (I)blockIdx.x * blockDim.x + threadIdx.x; vi < nvec; vi += (I)gridDim.x * blockDim.x) {
    const I i = vi * (I)V;
    op.template run<V>(op.channel((int64_t)((i / S) % C)), (int64_t)i);
  }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

template <typename T, typename Op>
static ts_status bn_elemt(const Op &op, int64_t N, int64_t C, int64_t S, bool aligned, const char *what) {
  const int64_t n = N * C * S;
  if (n == 0) return TS_OK;
  constexpr int VW = 16 / (int)sizeof(T); // 128-bit accesses
  const bool vw = aligned && S % VW == 0;
  const int64_t nvec = vw ? n / VW : n;
  const bool small = n < INT32_MAX;
  const unsigned grid = tsc_blocks(nvec);
  if (vw && small) bn_elemt_kernel<Op, VW, uint32_t><<<grid, TSC_THREADS, 0, tsc_stream()>>>(op, (uint32_t)nvec, (uint32_t)S, (uint32_t)C);
  else if (vw) bn_elemt_kernel<Op, VW, int64_t><<<grid, TSC_THREADS, 0, tsc_stream()>>>(op, nvec, S, C);
  else if (small) bn_elemt_kernel<Op, 1, uint32_t><<<grid, TSC_THREADS, 0, tsc_stream()>>>(op, (uint32_t)nvec, (uint32_t)S, (uint32_t)C);
  else bn_elemt_kernel<Op, 1, int64_t><<<grid, TSC_THREADS, 0, tsc_stream()>>>(op, nvec, S, C);
  TSC_LAUNCH_CHECK(what);
  return TS_OK;
}

// ---- the kernels ----------------------------------------------------------------------

// x (N, C, S) from a tensor's sizes: S the product of the trailing dims
static void bn_dims(const ts_tensor *x, int64_t *N, int64_t *C, int64_t *S) {
  *N = x->sizes[0], *C = x->sizes[1], *S = 1;
  for (int d = 2; d < x->ndim; d++) *S *= x->sizes[d];
}

template <typename T> static T *P(const ts_tensor *t) { return tsc_ptr<T>(t); }

static ts_status k_batch_norm_stats(const ts_call *c) {
  int64_t N, C, S;
  bn_dims(c->in[0], &N, &C, &S);
  if (c->in[0]->dtype == TS_FLOAT32)
    return bn_reduce(stats_op<float>{P<float>(c->in[0]), P<float>(c->out[0]), P<float>(c->out[1])}, N, C, S,
                     "batch_norm_stats");
  return bn_reduce(stats_op<double>{P<double>(c->in[0]), P<double>(c->out[0]), P<double>(c->out[1])}, N, C, S,
                   "batch_norm_stats");
}

static ts_status k_batch_norm_backward_reduce(const ts_call *c) {
  int64_t N, C, S;
  bn_dims(c->in[0], &N, &C, &S);
  ts_tensor *const *in = c->in;
  if (in[0]->dtype == TS_FLOAT32)
    return bn_reduce(bw_reduce_op<float>{P<float>(in[0]), P<float>(in[1]), P<float>(in[2]), P<float>(in[3]),
                                         P<float>(c->out[0]), P<float>(c->out[1])},
                     N, C, S, "batch_norm_backward_reduce");
  return bn_reduce(bw_reduce_op<double>{P<double>(in[0]), P<double>(in[1]), P<double>(in[2]), P<double>(in[3]),
                                        P<double>(c->out[0]), P<double>(c->out[1])},
                   N, C, S, "batch_norm_backward_reduce");
}

static ts_status k_batch_norm_elemt(const ts_call *c) {
  int64_t N, C, S;
  bn_dims(c->in[0], &N, &C, &S);
  ts_tensor *const *in = c->in;
  const bool al = aligned16(ts_data(in[0])) && aligned16(ts_data(c->out[0]));
  if (in[0]->dtype == TS_FLOAT32)
    return bn_elemt<float>(elemt_op<float>{P<float>(in[0]), P<float>(in[1]), P<float>(in[2]), P<float>(in[3]),
                                           P<float>(in[4]), P<float>(c->out[0])},
                           N, C, S, al, "batch_norm_elemt");
  return bn_elemt<double>(elemt_op<double>{P<double>(in[0]), P<double>(in[1]), P<double>(in[2]), P<double>(in[3]),
                                           P<double>(in[4]), P<double>(c->out[0])},
                          N, C, S, al, "batch_norm_elemt");
}

static ts_status k_batch_norm_backward_elemt(const ts_call *c) {
  int64_t N, C, S;
  bn_dims(c->in[0], &N, &C, &S);
  ts_tensor *const *in = c->in;
  const bool al = aligned16(ts_data(in[0])) && aligned16(ts_data(in[1])) && aligned16(ts_data(c->out[0]));
  const double f = c->f[0];
  if (in[0]->dtype == TS_FLOAT32)
    return bn_elemt<float>(bw_elemt_op<float>{P<float>(in[0]), P<float>(in[1]), P<float>(in[2]), P<float>(in[3]),
                                              P<float>(in[4]), P<float>(in[5]), P<float>(in[6]), f,
                                              P<float>(c->out[0])},
                           N, C, S, al, "batch_norm_backward_elemt");
  return bn_elemt<double>(bw_elemt_op<double>{P<double>(in[0]), P<double>(in[1]), P<double>(in[2]), P<double>(in[3]),
                                              P<double>(in[4]), P<double>(in[5]), P<double>(in[6]), f,
                                              P<double>(c->out[0])},
                          N, C, S, al, "batch_norm_backward_elemt");
}

// ---- layer norm ----------------------------------------------------------------------
// x and go (M, D) contiguous, one row per normalised group; w, b, gw, gb (D); mean, rstd
// (M). A block takes a row at a time: its statistics (Welford) or backward sums in double
// merged over the block, then the elementwise pass in T with the row's constants rounded
// to T, as the CPU (src/cpu/nn.c). gw and gb are column sums: the backward kernel's
// per-block partials and bn_final (ln_backward_fused), else bn_reduce's column pass.

template <typename T>
__global__ void ln_forward_kernel(const T *x, const T *w, const T *b, double eps, T *y, T *mean, T *rstd,
                                  int64_t M, int64_t D) {
  __shared__ T row[2]; // the row's mean and rstd
  for (int64_t i = blockIdx.x; i < M; i += gridDim.x) { // block-uniform
    const T *xr = x + i * D;
    welford s = {0, 0, 0};
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) welford_add(s, (double)xr[j]);
    s = block_merge(s);
    if (threadIdx.x == 0) {
      row[0] = mean[i] = (T)(s.n > 0 ? s.mean : NAN_D);
      row[1] = rstd[i] = (T)(1 / sqrt((s.n > 0 ? s.m2 / s.n : NAN_D) + eps));
    }
    __syncthreads();
    const T mt = row[0], rt = row[1];
    T *yr = y + i * D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) yr[j] = (xr[j] - mt) * rt * w[j] + b[j];
    __syncthreads(); // row[] is written again for the next row
  }
}

// one row's gx from the threads' partial sums s of g and g * xhat (g = go * w,
// xhat = (x - mean) * rstd): the block's merge, through row (shared, 2), then
// gx = rstd * (g - mean(g) - xhat * mean(g * xhat)). Every thread of the block calls it.
template <typename T>
__device__ void ln_dx_row(sums2 s, const T *gr, const T *xr, const T *w, T mt, T rt, int64_t D, T *q, T *row) {
  s = block_merge(s);
  if (threadIdx.x == 0) row[0] = (T)(s.a / (double)D), row[1] = (T)(s.d / (double)D);
  __syncthreads();
  const T ca = row[0], cb = row[1];
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) q[j] = rt * (gr[j] * w[j] - ca - (xr[j] - mt) * rt * cb);
  __syncthreads();
}

// gx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row, g = go * w
template <typename T>
__global__ void ln_backward_kernel(const T *go, const T *x, const T *mean, const T *rstd, const T *w, T *gx,
                                   int64_t M, int64_t D) {
  __shared__ T row[2]; // mean(g) and mean(g * xhat)
  for (int64_t i = blockIdx.x; i < M; i += gridDim.x) { // block-uniform
    const T *gr = go + i * D, *xr = x + i * D, mt = mean[i], rt = rstd[i];
    sums2 s = {0, 0};
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const T g = gr[j] * w[j];
      s.a += (double)g, s.d += (double)g * (double)((xr[j] - mt) * rt);
    }
    ln_dx_row(s, gr, xr, w, mt, rt, D, gx + i * D, row);
  }
}

// gw = column sums of go * xhat, gb = those of go, over x as (N = M, C = D, S = 1)
template <typename T> struct ln_param_grad_op {
  using acc = sums2;
  struct chan {};
  const T *go, *x, *mean, *rstd; // go, x (M, D); mean, rstd (M)
  int64_t D;
  T *gw, *gb; // (D), either may be NULL
  __device__ chan channel(int64_t) const { return {}; }
  __device__ static acc zero() { return {0, 0}; }
  __device__ void add(acc &s, const chan &, int64_t off) const {
    const int64_t i = off / D;
    const T g = go[off];
    s.a += (double)g;
    s.d += (double)g * (double)((x[off] - mean[i]) * rstd[i]);
  }
  __device__ void finish(int64_t c, const acc &s) const {
    if (gb) gb[c] = (T)s.a;
    if (gw) gw[c] = (T)s.d;
  }
};

static unsigned row_blocks(int64_t M) { return (unsigned)(M < 65535 * 8 ? M : 65535 * 8); }

template <typename T> static ts_status layer_norm(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = ts_numel(c->out[1]), D = ts_numel(in[1]);
  if (M == 0) return TS_OK;
  ln_forward_kernel<T><<<row_blocks(M), BN_THREADS, 0, tsc_stream()>>>(P<T>(in[0]), P<T>(in[1]), P<T>(in[2]),
                                                                        c->f[0], P<T>(c->out[0]), P<T>(c->out[1]),
                                                                        P<T>(c->out[2]), M, D);
  return tsc_after_launch("layer_norm");
}

// gx as ln_backward_kernel, and the block's share of gw and gb (column sums of
// go * xhat and go over its rows) in registers, stored as partial[j * P + block]
// for bn_final: the parameters' gradients cost one more launch, not two. A
// thread keeps the columns threadIdx.x + k * blockDim.x, k < LN_COLS.
constexpr int LN_COLS = 4;
template <typename T>
__global__ void ln_backward_fused(const T *go, const T *x, const T *mean, const T *rstd, const T *w, T *gx,
                                  sums2 *partial, int64_t M, int64_t D) {
  __shared__ T row[2]; // mean(g) and mean(g * xhat)
  sums2 acc[LN_COLS];
  for (int k = 0; k < LN_COLS; k++) acc[k] = {0, 0};
  for (int64_t i = blockIdx.x; i < M; i += gridDim.x) { // block-uniform
    const T *gr = go + i * D, *xr = x + i * D, mt = mean[i], rt = rstd[i];
    sums2 s = {0, 0};
    for (int64_t j = threadIdx.x, k = 0; j < D; j += blockDim.x, k++) {
      const T xh = (xr[j] - mt) * rt, g = gr[j] * w[j];
      s.a += (double)g, s.d += (double)g * (double)xh;
      acc[k].a += (double)gr[j], acc[k].d += (double)gr[j] * (double)xh;
    }
    if (!gx) continue; // block-uniform
    ln_dx_row(s, gr, xr, w, mt, rt, D, gx + i * D, row);
  }
  for (int64_t j = threadIdx.x, k = 0; j < D; j += blockDim.x, k++) partial[j * gridDim.x + blockIdx.x] = acc[k];
}

template <typename T> static ts_status layer_norm_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = ts_numel(in[2]), D = ts_numel(in[4]);
  T *gx = c->out[0] ? P<T>(c->out[0]) : NULL, *gw = c->out[1] ? P<T>(c->out[1]) : NULL,
    *gb = c->out[2] ? P<T>(c->out[2]) : NULL;
  const ln_param_grad_op<T> op{P<T>(in[0]), P<T>(in[1]), P<T>(in[2]), P<T>(in[3]), D, gw, gb};
  if ((gw || gb) && M > 0 && D > 0 && D <= (int64_t)LN_COLS * BN_THREADS) { // two launches
    const int64_t cap = (int64_t)tsc_sm_count() * 4, nparts = M < cap ? M : cap;
    ts_status st = TS_OK;
    sums2 *partial = (sums2 *)tsc_temp_alloc((size_t)(nparts * D) * sizeof(sums2), &st);
    if (st) return st;
    ln_backward_fused<T><<<(unsigned)nparts, BN_THREADS, 0, tsc_stream()>>>(P<T>(in[0]), P<T>(in[1]), P<T>(in[2]),
                                                                       P<T>(in[3]), P<T>(in[4]), gx, partial, M, D);
    st = tsc_after_launch("layer_norm_backward");
    if (!st) {
      bn_final<ln_param_grad_op<T>><<<(unsigned)(D < INT32_MAX ? D : INT32_MAX), BN_THREADS, 0, tsc_stream()>>>(
          op, D, nparts, partial);
      st = tsc_after_launch("layer_norm_backward");
    }
    tsc_temp_free(partial);
    return st;
  }
  if (gx && M > 0) {
    ln_backward_kernel<T><<<row_blocks(M), BN_THREADS, 0, tsc_stream()>>>(P<T>(in[0]), P<T>(in[1]), P<T>(in[2]),
                                                                           P<T>(in[3]), P<T>(in[4]), gx, M, D);
    ts_status st = tsc_after_launch("layer_norm_backward");
    if (st) return st;
  }
  if (!gw && !gb) return TS_OK;
  return bn_reduce(op, M, D, 1, "layer_norm_backward"); // rows wider than the fused kernel keeps, or none
}

static ts_status k_layer_norm(const ts_call *c) {
  return c->in[0]->dtype == TS_FLOAT32 ? layer_norm<float>(c) : layer_norm<double>(c);
}

static ts_status k_layer_norm_backward(const ts_call *c) {
  return c->in[0]->dtype == TS_FLOAT32 ? layer_norm_backward<float>(c) : layer_norm_backward<double>(c);
}

// ---- group norm ----------------------------------------------------------------------
// x and go (N, C, S) contiguous; row r = n*G + g is the D = C/G*S consecutive elements of
// channels g*C/G.. of sample n (one contiguous span, as a layer-norm row), with the affine
// per channel. Rows as the layer-norm kernels; the weight and bias gradients are per-channel
// sums over (n, s): bn_reduce's passes.

template <typename T>
__global__ void gn_forward_kernel(const T *x, const T *w, const T *b, double eps, T *y, T *mean, T *rstd, int64_t NG,
                                  int64_t G, int64_t cg, int64_t S) {
  __shared__ T row[2]; // the row's mean and rstd
  const int64_t D = cg * S;
  for (int64_t r = blockIdx.x; r < NG; r += gridDim.x) { // block-uniform
    const T *xr = x + r * D;
    welford s = {0, 0, 0};
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) welford_add(s, (double)xr[j]);
    s = block_merge(s);
    if (threadIdx.x == 0) {
      row[0] = mean[r] = (T)(s.n > 0 ? s.mean : NAN_D);
      row[1] = rstd[r] = (T)(1 / sqrt((s.n > 0 ? s.m2 / s.n : NAN_D) + eps));
    }
    __syncthreads();
    const T mt = row[0], rt = row[1];
    const T *wr = w + (r % G) * cg, *br = b + (r % G) * cg;
    T *yr = y + r * D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) yr[j] = (xr[j] - mt) * rt * wr[j / S] + br[j / S];
    __syncthreads(); // row[] is written again for the next row
  }
}

// gx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row, g = go * w[c]
template <typename T>
__global__ void gn_backward_kernel(const T *go, const T *x, const T *mean, const T *rstd, const T *w, T *gx,
                                   int64_t NG, int64_t G, int64_t cg, int64_t S) {
  __shared__ T row[2]; // mean(g) and mean(g * xhat)
  const int64_t D = cg * S;
  for (int64_t r = blockIdx.x; r < NG; r += gridDim.x) { // block-uniform
    const T *gr = go + r * D, *xr = x + r * D, *wr = w + (r % G) * cg, mt = mean[r], rt = rstd[r];
    sums2 s = {0, 0};
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const T g = gr[j] * wr[j / S];
      s.a += (double)g, s.d += (double)g * (double)((xr[j] - mt) * rt);
    }
    s = block_merge(s);
    if (threadIdx.x == 0) row[0] = (T)(s.a / (double)D), row[1] = (T)(s.d / (double)D);
    __syncthreads();
    const T ca = row[0], cb = row[1];
    T *q = gx + r * D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
      q[j] = rt * (gr[j] * wr[j / S] - ca - (xr[j] - mt) * rt * cb);
    __syncthreads();
  }
}

// gw[c] = sums of go * xhat, gb[c] = those of go, over x as (N, C, S)
template <typename T> struct gn_param_grad_op {
  using acc = sums2;
  struct chan {
    int64_t g; // the channel's group
  };
  const T *go, *x, *mean, *rstd; // go, x (N, C, S); mean, rstd (N*G)
  int64_t CS, G, cg;
  T *gw, *gb; // (C), either may be NULL
  __device__ chan channel(int64_t c) const { return {c / cg}; }
  __device__ static acc zero() { return {0, 0}; }
  __device__ void add(acc &s, const chan &ch, int64_t off) const {
    const int64_t r = (off / CS) * G + ch.g;
    const T g = go[off];
    s.a += (double)g;
    s.d += (double)g * (double)((x[off] - mean[r]) * rstd[r]);
  }
  __device__ void finish(int64_t c, const acc &s) const {
    if (gb) gb[c] = (T)s.a;
    if (gw) gw[c] = (T)s.d;
  }
};

template <typename T> static ts_status group_norm(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t N = in[0]->sizes[0], C = in[0]->sizes[1], S = in[0]->sizes[2], G = c->i[0];
  if (N * G == 0) return TS_OK;
  gn_forward_kernel<T><<<row_blocks(N * G), BN_THREADS, 0, tsc_stream()>>>(
      P<T>(in[0]), P<T>(in[1]), P<T>(in[2]), c->f[0], P<T>(c->out[0]), P<T>(c->out[1]), P<T>(c->out[2]), N * G, G,
      C / G, S);
  return tsc_after_launch("group_norm");
}

template <typename T> static ts_status group_norm_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t N = in[1]->sizes[0], C = in[1]->sizes[1], S = in[1]->sizes[2], G = c->i[0];
  T *gx = c->out[0] ? P<T>(c->out[0]) : NULL, *gw = c->out[1] ? P<T>(c->out[1]) : NULL,
    *gb = c->out[2] ? P<T>(c->out[2]) : NULL;
  if (gx && N * G > 0 && C * S > 0) {
    gn_backward_kernel<T><<<row_blocks(N * G), BN_THREADS, 0, tsc_stream()>>>(
        P<T>(in[0]), P<T>(in[1]), P<T>(in[2]), P<T>(in[3]), P<T>(in[4]), gx, N * G, G, C / G, S);
    ts_status st = tsc_after_launch("group_norm_backward");
    if (st) return st;
  }
  if (!gw && !gb) return TS_OK;
  return bn_reduce(gn_param_grad_op<T>{P<T>(in[0]), P<T>(in[1]), P<T>(in[2]), P<T>(in[3]), C * S, G, C / G, gw, gb},
                   N, C, S, "group_norm_backward");
}

static ts_status k_group_norm(const ts_call *c) {
  return c->in[0]->dtype == TS_FLOAT32 ? group_norm<float>(c) : group_norm<double>(c);
}

static ts_status k_group_norm_backward(const ts_call *c) {
  return c->in[0]->dtype == TS_FLOAT32 ? group_norm_backward<float>(c) : group_norm_backward<double>(c);
}

extern "C" void tsc_register_nn(ts_kernel *k) {
  k[TS_OP_BATCH_NORM_STATS] = k_batch_norm_stats;
  k[TS_OP_BATCH_NORM_ELEMT] = k_batch_norm_elemt;
  k[TS_OP_BATCH_NORM_BACKWARD_REDUCE] = k_batch_norm_backward_reduce;
  k[TS_OP_BATCH_NORM_BACKWARD_ELEMT] = k_batch_norm_backward_elemt;
  k[TS_OP_LAYER_NORM] = k_layer_norm;
  k[TS_OP_LAYER_NORM_BACKWARD] = k_layer_norm_backward;
  k[TS_OP_GROUP_NORM] = k_group_norm;
  k[TS_OP_GROUP_NORM_BACKWARD] = k_group_norm_backward;
  tsc_register_nn_act(k);
  tsc_register_nn_upsample(k);
  tsc_register_nn_conv(k);
  tsc_register_nn_pool(k);
  tsc_register_rnn(k);
  tsc_register_attention(k);
}
