// CUDA kernels of the fused classification losses (contracts in
// src/ops/ops_loss.def; the CPU reference is src/cpu/loss.c). A warp per row
// (n, s): the log-sum-exp, the target's term and the smoothing sum, in double
// across the lanes. The forward is one launch when the loss is reduced and
// small enough for one block (the usual batch: its warps take the rows, then
// the block sums them in a fixed order), else a launch over the rows and one
// block summing them. The backward is one elementwise launch. A class index
// out of range is reported through the device-assert record (read at the next
// synchronisation), never by waiting for the host here; its row's loss is NaN.
#include <math.h>
#include <string.h>

#include "device_assert.cuh"
extern "C" {
#include "ops/op_loss.h"
}

namespace {

constexpr int kWarps = 8;            // warps per block of the row kernels
constexpr int64_t kOneBlock = 1 << 20; // x elements one block reduces alone

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// max that keeps a NaN (as the CPU's row_lse)
__device__ __forceinline__ double warp_max(double v) {
  for (int o = 16; o > 0; o >>= 1) {
    const double u = __shfl_xor_sync(0xffffffffu, v, o);
    if (!(u <= v)) v = u;
  }
  return v;
}

template <typename T> struct nll_args {
  const T *x, *w;       // x (N, C, S); w (C) or NULL
  const int64_t *t;     // (N, S)
  int64_t N, C, S, ign;
  double eps;
  bool logits;
  double *lse;          // (N, S) or NULL
  tsc_assert_record *rec;
};

// W = sum of the class weights (C without); every lane gets it
template <typename T> __device__ double class_weight_sum(const nll_args<T> &a) {
  if (!a.w) return (double)a.C;
  double s = 0;
  for (int64_t k = threadIdx.x & 31; k < a.C; k += 32) s += (double)a.w[k];
  return warp_sum(s);
}

// Row r by one warp: its loss (lane 0's value counts) and its target's weight.
template <typename T> __device__ void nll_row(const nll_args<T> &a, double W, int64_t r, double *loss, double *wt) {
  const int lane = threadIdx.x & 31;
  const T *row = a.x + (r / a.S) * a.C * a.S + r % a.S;
  double l = 0;
  if (a.logits) {
    double m = -INFINITY, s = 0;
    for (int64_t k = lane; k < a.C; k += 32)
      if (!((double)row[k * a.S] <= m)) m = (double)row[k * a.S];
    m = warp_max(m);
    for (int64_t k = lane; k < a.C; k += 32) s += exp((double)row[k * a.S] - m);
    l = m + log(warp_sum(s));
    if (a.lse && lane == 0) a.lse[r] = l;
  }
  const int64_t t = a.t[r];
  *loss = 0, *wt = 0;
  if (t == a.ign) return;
  if (t < 0 || t >= a.C) {
    if (lane == 0)
      tsc_device_assert(a.rec, TS_OP_NLL_LOSS, a.logits ? TS_LOSS_ERR_CE_TARGET : TS_LOSS_ERR_NLL_TARGET, t, a.C, a.ign);
    *loss = NAN;
    return;
  }
  const double w_t = a.w ? (double)a.w[t] : 1.0, nll = -w_t * ((double)row[t * a.S] - l);
  double v = nll;
  if (a.eps != 0) {
    double sx = 0;
    for (int64_t k = lane; k < a.C; k += 32) sx += (a.w ? (double)a.w[k] : 1.0) * (double)row[k * a.S];
    v = (1 - a.eps) * nll + a.eps / (double)a.C * (W * l - warp_sum(sx)); // -sum_c w_c (x_c - l)
  }
  *loss = v, *wt = w_t;
}

// The whole loss in one block: warp j takes rows j, j + kWarps, ...; the block
// sums the warps' totals in warp order. out: the 0-dim loss; stats: {wsum, W}.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32) nll_one_block(nll_args<T> a, bool mean, T *out, double *stats) {
  __shared__ double part[2][kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const double W = class_weight_sum(a);
  double acc = 0, accw = 0;
  for (int64_t r = warp; r < a.N * a.S; r += kWarps) {
    double v, w;
    nll_row(a, W, r, &v, &w);
    acc += v, accw += w;
  }
  if (lane == 0) part[0][warp] = acc, part[1][warp] = accw;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0, sw = 0;
    for (int j = 0; j < kWarps; j++) s += part[0][j], sw += part[1][j];
    *out = (T)(mean ? s / sw : s);
    stats[0] = sw, stats[1] = W;
  }
}

// Rows over the grid: the loss of each row into out (T, reduction none) or
// into rl / rw (double, for nll_sum_rows).
template <typename T>
__global__ void __launch_bounds__(kWarps * 32) nll_rows(nll_args<T> a, T *out, double *rl, double *rw, double *stats) {
  const double W = class_weight_sum(a);
  const int64_t warps = (int64_t)gridDim.x * kWarps;
  for (int64_t r = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32; r < a.N * a.S; r += warps) {
    double v, w;
    nll_row(a, W, r, &v, &w);
    if ((threadIdx.x & 31) != 0) continue;
    if (out) out[r] = (T)v;
    else rl[r] = v, rw[r] = w;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) stats[0] = 0, stats[1] = W;
}

// One block: the sums of rl and rw (each thread a strided share, then the
// threads' shares in order), the 0-dim loss and stats[0].
template <typename T>
__global__ void __launch_bounds__(kWarps * 32) nll_sum_rows(const double *rl, const double *rw, int64_t M, bool mean,
                                                            T *out, double *stats) {
  __shared__ double part[2][kWarps * 32];
  double s = 0, sw = 0;
  for (int64_t r = threadIdx.x; r < M; r += blockDim.x) s += rl[r], sw += rw[r];
  part[0][threadIdx.x] = s, part[1][threadIdx.x] = sw;
  __syncthreads();
  if (threadIdx.x == 0) {
    s = 0, sw = 0;
    for (int j = 0; j < (int)blockDim.x; j++) s += part[0][j], sw += part[1][j];
    *out = (T)(mean ? s / sw : s);
    stats[0] = sw;
  }
}

template <typename T> ts_status nll_forward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int flags = (int)c->i[1];
  nll_args<T> a;
  a.x = tsc_ptr<T>(in[0]), a.t = tsc_ptr<int64_t>(in[1]), a.w = flags & TS_NLL_WEIGHT ? tsc_ptr<T>(in[2]) : NULL;
  a.N = in[0]->sizes[0], a.C = in[0]->sizes[1], a.S = in[0]->sizes[2], a.ign = c->i[0], a.eps = c->f[0];
  a.logits = flags & TS_NLL_LOGITS;
  a.lse = a.logits ? tsc_ptr<double>(c->out[1]) : NULL;
  ts_status st;
  a.rec = tsc_assert_record_get(&st);
  if (st) return st;
  T *out = tsc_ptr<T>(c->out[0]);
  double *stats = tsc_ptr<double>(c->out[2]);
  const int64_t M = a.N * a.S, threads = kWarps * 32;
  const bool reduce = flags & TS_NLL_REDUCE, mean = flags & TS_NLL_MEAN;
  if (reduce && M * a.C <= kOneBlock) {
    nll_one_block<T><<<1, threads, 0, tsc_stream()>>>(a, mean, out, stats);
    return tsc_after_launch("nll_loss");
  }
  const unsigned blocks = tsc_blocks(M, kWarps, 1); // a warp per row
  if (!reduce) {
    nll_rows<T><<<blocks, threads, 0, tsc_stream()>>>(a, out, (double *)NULL, (double *)NULL, stats);
    return tsc_after_launch("nll_loss");
  }
  tsc_temp rows;
  if ((st = rows.alloc(sizeof(double) * 2 * (size_t)M))) return st;
  double *rl = (double *)rows.p, *rw = rl + M;
  nll_rows<T><<<blocks, threads, 0, tsc_stream()>>>(a, (T *)NULL, rl, rw, stats);
  TSC_LAUNCH_CHECK("nll_loss");
  nll_sum_rows<T><<<1, threads, 0, tsc_stream()>>>(rl, rw, M, mean, out, stats);
  return tsc_after_launch("nll_loss");
}

// ---- backward: one thread per element of grad_x ----

template <typename T> struct nll_grad_args {
  const T *go, *x, *w;
  const int64_t *t;
  const double *stats, *lse;
  int64_t N, C, S, ign;
  double eps;
  int flags;
  T *gx;
};

template <typename T> __global__ void __launch_bounds__(TSC_THREADS) nll_backward_kernel(nll_grad_args<T> a) {
  const int64_t n_el = a.N * a.C * a.S;
  TSC_GRID_STRIDE(int64_t, e, n_el) {
    // element e = (n, k, s) of (N, C, S), its row r = (n, s); divided by S, then C (dividing
    // by C * S first spilled 32 bytes on sm_90)
    const int64_t q = e / a.S, s = e - q * a.S, n = q / a.C, k = q - n * a.C, r = n * a.S + s;
    const int64_t t = a.t[r];
    if (t == a.ign || t < 0 || t >= a.C) {
      a.gx[e] = T(0);
      continue;
    }
    double g = (double)a.go[a.flags & TS_NLL_REDUCE ? 0 : r];
    if (a.flags & TS_NLL_MEAN) g /= a.stats[0];
    const double w_t = a.w ? (double)a.w[t] : 1.0, hot = k == t ? 1.0 : 0.0;
    double v;
    if (a.flags & TS_NLL_LOGITS) {
      const double p = exp((double)a.x[e] - a.lse[r]), w_k = a.w ? (double)a.w[k] : 1.0;
      v = (1 - a.eps) * w_t * (p - hot) + a.eps / (double)a.C * (p * a.stats[1] - w_k);
    } else {
      v = -w_t * hot;
    }
    a.gx[e] = (T)(g * v);
  }
}

template <typename T> ts_status nll_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  nll_grad_args<T> a;
  a.flags = (int)c->i[1];
  const bool logits = a.flags & TS_NLL_LOGITS;
  a.go = tsc_ptr<T>(in[0]), a.x = tsc_ptr<T>(in[1]), a.t = tsc_ptr<int64_t>(in[2]), a.stats = tsc_ptr<double>(in[3]);
  a.lse = logits ? tsc_ptr<double>(in[4]) : NULL;
  a.w = a.flags & TS_NLL_WEIGHT ? tsc_ptr<T>(in[logits ? 5 : 4]) : NULL;
  a.N = in[1]->sizes[0], a.C = in[1]->sizes[1], a.S = in[1]->sizes[2], a.ign = c->i[0], a.eps = c->f[0];
  a.gx = tsc_ptr<T>(c->out[0]);
  const int64_t n = a.N * a.C * a.S;
  if (n == 0) return TS_OK;
  nll_backward_kernel<T><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(a);
  return tsc_after_launch("nll_loss_backward");
}

// ---- check_range: the first element outside [lo, hi] this thread meets is reported ----

template <typename T>
__global__ void __launch_bounds__(TSC_THREADS)
    check_range_kernel(const T *x, int64_t n, double lo, double hi, int code, tsc_assert_record *rec) {
  TSC_GRID_STRIDE(int64_t, j, n) {
    const double v = (double)x[j];
    if (!(v >= lo && v <= hi)) {
      long long bits;
      memcpy(&bits, &v, sizeof bits);
      tsc_device_assert(rec, TS_OP_CHECK_RANGE, code, bits, j, 0);
      return;
    }
  }
}

ts_status k_check_range(const ts_call *c) {
  const int64_t n = ts_numel(c->in[0]);
  ts_status st;
  tsc_assert_record *rec = tsc_assert_record_get(&st);
  if (st || n == 0) return st;
  const int code = (int)c->i[0];
  if (c->in[0]->dtype == TS_FLOAT32)
    check_range_kernel<float><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(tsc_ptr<float>(c->in[0]), n, c->f[0],
                                                                               c->f[1], code, rec);
  else
    check_range_kernel<double><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(tsc_ptr<double>(c->in[0]), n, c->f[0],
                                                                                c->f[1], code, rec);
  return tsc_after_launch("check_range");
}

ts_status k_nll_loss(const ts_call *c) {
  return c->in[0]->dtype == TS_FLOAT32 ? nll_forward<float>(c) : nll_forward<double>(c);
}
ts_status k_nll_loss_backward(const ts_call *c) {
  return c->in[1]->dtype == TS_FLOAT32 ? nll_backward<float>(c) : nll_backward<double>(c);
}

} // namespace

extern "C" void tsc_register_loss(ts_kernel *k) {
  k[TS_OP_NLL_LOSS] = k_nll_loss;
  k[TS_OP_NLL_LOSS_BACKWARD] = k_nll_loss_backward;
  k[TS_OP_CHECK_RANGE] = k_check_range;
}
