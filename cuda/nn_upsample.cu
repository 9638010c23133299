// CUDA kernels of interpolation (contracts in src/ops/ops_nn.def; the CPU
// reference is src/cpu/nn_upsample.c): nearest and bilinear resizing of
// (N, C, H, W) planes, one thread per output cell, with the CPU's index and
// weight formulas (PyTorch's). The backward passes scatter each gradient cell
// into the input cells it read with atomicAdd (upsampling makes the windows
// overlap), so their sums may be added in another order than the CPU's.
#include <math.h>

#include "common.cuh"

namespace {

struct up_geo {
  int64_t C, H, W, Ho, Wo;
  int64_t xs[4]; // strides of the strided operand: x (forward) or grad_out (backward)
  double sh, sw; // the scales given (0: in/out)
  bool align, one_d;
};

// torch's nearest_idx: exact for the same size and for doubling, else floor(o * scale) in float
__device__ __forceinline__ int64_t nearest_idx(int64_t o, int64_t in, int64_t out, double scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const float s = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
  const int64_t i = (int64_t)floorf((float)o * s);
  return i < in - 1 ? i : in - 1;
}

// torch's compute_source_index_and_lambda: the ratio in T, the position in double
template <typename T>
__device__ __forceinline__ void linear_idx(int64_t o, int64_t in, int64_t out, bool align, double scale, int64_t &i0,
                                           int64_t &i1, T &l0, T &l1) {
  if (out == in) {
    i0 = i1 = o, l0 = (T)1, l1 = (T)0;
    return;
  }
  const T ratio = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)
                        : (scale > 0 ? (T)(1.0 / scale) : (T)in / (T)out);
  double real = align ? (double)ratio * (double)o : (double)ratio * ((double)o + 0.5) - 0.5;
  if (real < 0) real = 0;
  const int64_t i = (int64_t)real;
  i0 = i < in - 1 ? i : in - 1;
  i1 = i0 + (i0 < in - 1 ? 1 : 0);
  l1 = (T)(real - (double)i);
  l0 = (T)1 - l1;
}

// Output cell i of (N, C, Ho, Wo): its plane and position.
#define CELL(I, i, g, pl, y, x0)                                \
  const int64_t x0 = (int64_t)((i) % (I)(g).Wo);               \
  const int64_t y = (int64_t)(((i) / (I)(g).Wo) % (I)(g).Ho);  \
  const int64_t pl = (int64_t)((i) / ((I)(g).Wo * (I)(g).Ho))

template <typename T, typename I> __global__ void nearest_kernel(up_geo g, const T *x, T *out, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    CELL(I, i, g, pl, y, x0);
    const T *src = x + (pl / g.C) * g.xs[0] + (pl % g.C) * g.xs[1];
    out[i] = src[nearest_idx(y, g.H, g.Ho, g.sh) * g.xs[2] + nearest_idx(x0, g.W, g.Wo, g.sw) * g.xs[3]];
  }
}

// out (N, C, H, W) zeroed beforehand
template <typename T, typename I> __global__ void nearest_bw_kernel(up_geo g, const T *go, T *out, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    CELL(I, i, g, pl, y, x0);
    const T v = go[(pl / g.C) * g.xs[0] + (pl % g.C) * g.xs[1] + y * g.xs[2] + x0 * g.xs[3]];
    atomicAdd(out + pl * g.H * g.W + nearest_idx(y, g.H, g.Ho, g.sh) * g.W + nearest_idx(x0, g.W, g.Wo, g.sw), v);
  }
}

// (x00 * w0 + x01 * w1) * h0 + (x10 * w0 + x11 * w1) * h1, as the CPU; 1-D: the first row only
template <typename T, typename I> __global__ void bilinear_kernel(up_geo g, const T *x, T *out, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    CELL(I, i, g, pl, y, x0);
    const T *src = x + (pl / g.C) * g.xs[0] + (pl % g.C) * g.xs[1];
    int64_t h0, h1, w0, w1;
    T hl0, hl1, wl0, wl1;
    linear_idx<T>(y, g.H, g.Ho, g.align, g.sh, h0, h1, hl0, hl1);
    linear_idx<T>(x0, g.W, g.Wo, g.align, g.sw, w0, w1, wl0, wl1);
    const T *r0 = src + h0 * g.xs[2], *r1 = src + h1 * g.xs[2];
    const int64_t a = w0 * g.xs[3], b = w1 * g.xs[3];
    const T top = r0[a] * wl0 + r0[b] * wl1;
    out[i] = g.one_d ? top : top * hl0 + (r1[a] * wl0 + r1[b] * wl1) * hl1;
  }
}

template <typename T, typename I> __global__ void bilinear_bw_kernel(up_geo g, const T *go, T *out, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    CELL(I, i, g, pl, y, x0);
    const T v = go[(pl / g.C) * g.xs[0] + (pl % g.C) * g.xs[1] + y * g.xs[2] + x0 * g.xs[3]];
    int64_t h0, h1, w0, w1;
    T hl0, hl1, wl0, wl1;
    linear_idx<T>(y, g.H, g.Ho, g.align, g.sh, h0, h1, hl0, hl1);
    linear_idx<T>(x0, g.W, g.Wo, g.align, g.sw, w0, w1, wl0, wl1);
    T *plane = out + pl * g.H * g.W;
    const T l0 = g.one_d ? (T)1 : hl0;
    atomicAdd(plane + h0 * g.W + w0, l0 * wl0 * v);
    atomicAdd(plane + h0 * g.W + w1, l0 * wl1 * v);
    if (g.one_d) continue;
    atomicAdd(plane + h1 * g.W + w0, hl1 * wl0 * v);
    atomicAdd(plane + h1 * g.W + w1, hl1 * wl1 * v);
  }
}

template <typename T> ts_status launch(const ts_call *c) {
  const bool back = c->op == TS_OP_UPSAMPLE_NEAREST2D_BACKWARD || c->op == TS_OP_UPSAMPLE_BILINEAR2D_BACKWARD;
  const ts_tensor *src = c->in[0];
  ts_tensor *o = c->out[0];
  const ts_tensor *img = back ? o : src, *res = back ? src : o; // (N, C, H, W), (N, C, Ho, Wo)
  up_geo g;
  g.C = img->sizes[1], g.H = img->sizes[2], g.W = img->sizes[3], g.Ho = res->sizes[2], g.Wo = res->sizes[3];
  for (int d = 0; d < 4; d++) g.xs[d] = src->strides[d];
  g.sh = c->f[0], g.sw = c->f[1], g.align = c->i[0] != 0, g.one_d = c->i[1] != 0;
  if (back && ts_numel(o) > 0)
    TSC_CHECK(cudaMemsetAsync(ts_data(o), 0, (size_t)ts_numel(o) * sizeof(T), tsc_stream()));
  const int64_t total = ts_numel(res);
  if (total == 0) return TS_OK;
  const T *in = tsc_ptr<T>(src);
  T *out = tsc_ptr<T>(o);
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    const unsigned blocks = tsc_blocks(total);
    switch (c->op) {
    case TS_OP_UPSAMPLE_NEAREST2D: nearest_kernel<T, I><<<blocks, TSC_THREADS, 0, tsc_stream()>>>(g, in, out, (I)total); break;
    case TS_OP_UPSAMPLE_NEAREST2D_BACKWARD:
      nearest_bw_kernel<T, I><<<blocks, TSC_THREADS, 0, tsc_stream()>>>(g, in, out, (I)total);
      break;
    case TS_OP_UPSAMPLE_BILINEAR2D:
      bilinear_kernel<T, I><<<blocks, TSC_THREADS, 0, tsc_stream()>>>(g, in, out, (I)total);
      break;
    default: bilinear_bw_kernel<T, I><<<blocks, TSC_THREADS, 0, tsc_stream()>>>(g, in, out, (I)total);
    }
    TSC_LAUNCH_CHECK(ts_ops[c->op].name);
    return TS_OK;
  });
}

ts_status k_upsample(const ts_call *c) {
  return c->out[0]->dtype == TS_FLOAT32 ? launch<float>(c) : launch<double>(c);
}

} // namespace

void tsc_register_nn_upsample(ts_kernel *k) {
  k[TS_OP_UPSAMPLE_NEAREST2D] = k_upsample;
  k[TS_OP_UPSAMPLE_NEAREST2D_BACKWARD] = k_upsample;
  k[TS_OP_UPSAMPLE_BILINEAR2D] = k_upsample;
  k[TS_OP_UPSAMPLE_BILINEAR2D_BACKWARD] = k_upsample;
}
