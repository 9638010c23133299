// CUDA kernels for convolution (contracts in src/ops/ops_nn.def; the CPU
// reference is src/cpu/nn.c): IM2COL and its adjoint COL2IM for the GEMM
// convolution, and the direct depthwise convolution, forward and backward.
//
// Every kernel is a gather: one thread per output element reads what it
// needs, so no two threads write one element and nothing needs atomics. Sums
// per element run in the CPU's order (kernel taps row-major, channels
// outermost), so the float results match the CPU's up to FMA contraction.
// Flat indices are decomposed in 32-bit arithmetic when they fit (I =
// uint32_t), element offsets are always int64.
#include "common.cuh"

// Geometry shared by the kernels, in elements.
struct conv_geo {
  int64_t N, C, H, W, Ho, Wo;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t xs[4]; // strides of the (N, C, H, W) operand
};

struct strides6 {
  int64_t s[6];
};

// img (N, C, H, W), res (..., Ho, Wo); k the packed kernel size; s, p, d the
// packed stride, padding and dilation of the call.
static conv_geo make_geo(const ts_tensor *img, const ts_tensor *res, int64_t k, int64_t s, int64_t p, int64_t d) {
  conv_geo g;
  g.N = img->sizes[0], g.C = img->sizes[1], g.H = img->sizes[2], g.W = img->sizes[3];
  for (int i = 0; i < 4; i++) g.xs[i] = img->strides[i];
  g.Ho = res->sizes[res->ndim - 2], g.Wo = res->sizes[res->ndim - 1];
  g.kh = ts_unpack_h(k), g.kw = ts_unpack_w(k);
  g.sh = ts_unpack_h(s), g.sw = ts_unpack_w(s);
  g.ph = ts_unpack_h(p), g.pw = ts_unpack_w(p);
  g.dh = ts_unpack_h(d), g.dw = ts_unpack_w(d);
  return g;
}

static strides6 strides_of(const ts_tensor *t) {
  strides6 r;
  for (int i = 0; i < 6; i++) r.s[i] = t->strides[i];
  return r;
}

// ---- im2col / col2im ---------------------------------------------------------------

// out (N, C, kh, kw, Ho, Wo) <- x: one thread per (n, c, y, x0), writing its kh*kw
// entries (consecutive threads, consecutive x0: coalesced on out's unit stride).
template <typename T, typename I>
__global__ void im2col_kernel(conv_geo g, const T *__restrict__ x, T *__restrict__ out, strides6 os, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    I x0 = i % (I)g.Wo, t = i / (I)g.Wo;
    I y = t % (I)g.Ho;
    t /= (I)g.Ho;
    I c = t % (I)g.C, n = t / (I)g.C;
    const T *src = x + (int64_t)n * g.xs[0] + (int64_t)c * g.xs[1];
    T *dst = out + (int64_t)n * os.s[0] + (int64_t)c * os.s[1] + (int64_t)y * os.s[4] + (int64_t)x0 * os.s[5];
    for (int64_t ki = 0; ki < g.kh; ki++) {
      const int64_t iy = (int64_t)y * g.sh - g.ph + ki * g.dh;
      const bool row_in = iy >= 0 && iy < g.H;
      for (int64_t kj = 0; kj < g.kw; kj++) {
        const int64_t ix = (int64_t)x0 * g.sw - g.pw + kj * g.dw;
        dst[ki * os.s[2] + kj * os.s[3]] = row_in && ix >= 0 && ix < g.W ? src[iy * g.xs[2] + ix * g.xs[3]] : T(0);
      }
    }
  }
}

// x (N, C, H, W) contiguous <- the sum of the cols (N, C, kh, kw, Ho, Wo) entries that
// read each pixel: the taps (ki, kj) with (h + ph - ki*dh) a multiple of sh landing in
// [0, Ho), the same for columns. Taps in the CPU's order.
template <typename T, typename I>
__global__ void col2im_kernel(conv_geo g, const T *__restrict__ cols, strides6 cs, T *__restrict__ x, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    I w = i % (I)g.W, t = i / (I)g.W;
    I h = t % (I)g.H;
    t /= (I)g.H;
    I c = t % (I)g.C, n = t / (I)g.C;
    const T *src = cols + (int64_t)n * cs.s[0] + (int64_t)c * cs.s[1];
    T acc = T(0);
    for (int64_t ki = 0; ki < g.kh; ki++) {
      const int64_t ty = (int64_t)h + g.ph - ki * g.dh;
      if (ty < 0) break; // decreasing in ki
      if (ty % g.sh) continue;
      const int64_t y = ty / g.sh;
      if (y >= g.Ho) continue;
      for (int64_t kj = 0; kj < g.kw; kj++) {
        const int64_t tx = (int64_t)w + g.pw - kj * g.dw;
        if (tx < 0) break;
        if (tx % g.sw) continue;
        const int64_t xo = tx / g.sw;
        if (xo >= g.Wo) continue;
        acc += src[ki * cs.s[2] + kj * cs.s[3] + y * cs.s[4] + xo * cs.s[5]];
      }
    }
    x[i] = acc;
  }
}

static ts_status k_im2col(const ts_call *c) {
  const ts_tensor *x = c->in[0];
  ts_tensor *o = c->out[0];
  conv_geo g = make_geo(x, o, ts_pack2(o->sizes[2], o->sizes[3]), c->i[0], c->i[1], c->i[2]);
  const int64_t total = g.N * g.C * g.Ho * g.Wo;
  if (total == 0 || g.kh * g.kw == 0) return TS_OK;
  const strides6 os = strides_of(o);
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    if (x->dtype == TS_FLOAT32)
      im2col_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, tsc_ptr<float>(x),
                                                                                    tsc_ptr<float>(o), os, (I)total);
    else
      im2col_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, tsc_ptr<double>(x),
                                                                                     tsc_ptr<double>(o), os, (I)total);
    TSC_LAUNCH_CHECK("im2col");
    return TS_OK;
  });
}

static ts_status k_col2im(const ts_call *c) {
  const ts_tensor *cols = c->in[0];
  ts_tensor *o = c->out[0];
  conv_geo g = make_geo(o, cols, ts_pack2(cols->sizes[2], cols->sizes[3]), c->i[0], c->i[1], c->i[2]);
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return TS_OK;
  const strides6 cs = strides_of(cols);
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    if (o->dtype == TS_FLOAT32)
      col2im_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, tsc_ptr<float>(cols), cs,
                                                                                    tsc_ptr<float>(o), (I)total);
    else
      col2im_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, tsc_ptr<double>(cols), cs,
                                                                                     tsc_ptr<double>(o), (I)total);
    TSC_LAUNCH_CHECK("col2im");
    return TS_OK;
  });
}

// ---- depthwise convolution -------------------------------------------------------------

// out (N, O, Ho, Wo) contiguous; output channel o reads input channel o / m.
// w (O, 1, kh, kw) and bias (O) with any strides (ws, bs).
template <typename T, typename I>
__global__ void depthwise_kernel(conv_geo g, int64_t O, const T *__restrict__ x, const T *__restrict__ w,
                                 int64_t ws0, int64_t ws2, int64_t ws3, const T *__restrict__ b, int64_t bs,
                                 T *__restrict__ out, I total) {
  const int64_t m = O / g.C;
  TSC_GRID_STRIDE(I, i, total) {
    I x0 = i % (I)g.Wo, t = i / (I)g.Wo;
    I y = t % (I)g.Ho;
    t /= (I)g.Ho;
    I o = t % (I)O, n = t / (I)O;
    const T *src = x + (int64_t)n * g.xs[0] + ((int64_t)o / m) * g.xs[1];
    const T *wo = w + (int64_t)o * ws0;
    T acc = b ? b[(int64_t)o * bs] : T(0);
    for (int64_t ki = 0; ki < g.kh; ki++) {
      const int64_t iy = (int64_t)y * g.sh - g.ph + ki * g.dh;
      if (iy < 0 || iy >= g.H) continue;
      for (int64_t kj = 0; kj < g.kw; kj++) {
        const int64_t ix = (int64_t)x0 * g.sw - g.pw + kj * g.dw;
        if (ix < 0 || ix >= g.W) continue;
        acc += wo[ki * ws2 + kj * ws3] * src[iy * g.xs[2] + ix * g.xs[3]];
      }
    }
    out[i] = acc;
  }
}

// grad_input (N, C, H, W) contiguous: each pixel gathers from its m output
// channels; go (N, O, Ho, Wo) and w (O, 1, kh, kw) contiguous.
template <typename T, typename I>
__global__ void depthwise_bw_input_kernel(conv_geo g, int64_t O, const T *__restrict__ go, const T *__restrict__ w,
                                          T *__restrict__ gi, I total) {
  const int64_t m = O / g.C, kk = g.kh * g.kw;
  TSC_GRID_STRIDE(I, i, total) {
    I wx = i % (I)g.W, t = i / (I)g.W;
    I h = t % (I)g.H;
    t /= (I)g.H;
    I c = t % (I)g.C, n = t / (I)g.C;
    T acc = T(0);
    for (int64_t o = (int64_t)c * m; o < ((int64_t)c + 1) * m; o++) {
      const T *src = go + ((int64_t)n * O + o) * g.Ho * g.Wo;
      for (int64_t ki = 0; ki < g.kh; ki++) {
        const int64_t ty = (int64_t)h + g.ph - ki * g.dh;
        if (ty < 0) break;
        if (ty % g.sh) continue;
        const int64_t y = ty / g.sh;
        if (y >= g.Ho) continue;
        for (int64_t kj = 0; kj < g.kw; kj++) {
          const int64_t tx = (int64_t)wx + g.pw - kj * g.dw;
          if (tx < 0) break;
          if (tx % g.sw) continue;
          const int64_t xo = tx / g.sw;
          if (xo >= g.Wo) continue;
          acc += w[o * kk + ki * g.kw + kj] * src[y * g.Wo + xo];
        }
      }
    }
    gi[i] = acc;
  }
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024); the
// result is valid in thread 0. Every thread of the block must call it.
template <typename A> __device__ A block_sum(A v) {
  __shared__ A part[32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  __syncthreads(); // part may still be read by a previous call
  if (lane == 0) part[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < (int)(blockDim.x >> 5) ? part[lane] : A(0);
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  }
  return v;
}

// grad_weight (O, 1, kh, kw) contiguous: the sum of go * x over the batch and
// the output pixels, in double, for each (o, tap). Virtual block vb = (o*kk +
// tap)*G + gs takes the pixels gs*blockDim + tid, stepping G*blockDim; with
// G = 1 it writes the weight, else its partial sum (summed in order by
// depthwise_bw_weight_final: deterministic, no atomics).
template <typename T, typename I>
__global__ void depthwise_bw_weight_kernel(conv_geo g, int64_t O, const T *__restrict__ go, const T *__restrict__ x,
                                           T *__restrict__ gw, double *__restrict__ partial, int64_t G, I nl) {
  const int64_t m = O / g.C, kk = g.kh * g.kw;
  const I L = (I)(g.Ho * g.Wo);
  for (int64_t vb = blockIdx.x; vb < O * kk * G; vb += gridDim.x) { // block-uniform
    const int64_t wi = vb / G, gs = vb % G;
    const int64_t o = wi / kk, tap = wi % kk, ki = tap / g.kw, kj = tap % g.kw;
    const T *img = x + (o / m) * g.xs[1];
    double acc = 0;
    for (int64_t r0 = gs * blockDim.x + threadIdx.x; r0 < (int64_t)nl; r0 += G * blockDim.x) {
      const I r = (I)r0, n = r / L, rem = r % L;
      const I y = rem / (I)g.Wo, xo = rem % (I)g.Wo;
      const int64_t iy = (int64_t)y * g.sh - g.ph + ki * g.dh, ix = (int64_t)xo * g.sw - g.pw + kj * g.dw;
      if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
      acc += (double)go[((int64_t)n * O + o) * (int64_t)L + rem] *
             (double)img[(int64_t)n * g.xs[0] + iy * g.xs[2] + ix * g.xs[3]];
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) {
      if (G == 1) gw[wi] = (T)acc;
      else partial[vb] = acc;
    }
  }
}

template <typename T>
__global__ void depthwise_bw_weight_final(const double *__restrict__ partial, int64_t G, T *__restrict__ gw, int64_t nw) {
  for (int64_t wi = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; wi < nw; wi += (int64_t)gridDim.x * blockDim.x) {
    double acc = 0;
    for (int64_t k = 0; k < G; k++) acc += partial[wi * G + k];
    gw[wi] = (T)acc;
  }
}

static ts_status k_conv2d_depthwise(const ts_call *c) {
  const ts_tensor *x = c->in[0], *w = c->in[1], *b = c->nin > 2 ? c->in[2] : NULL;
  ts_tensor *o = c->out[0];
  conv_geo g = make_geo(x, o, ts_pack2(w->sizes[2], w->sizes[3]), c->i[0], c->i[1], c->i[2]);
  const int64_t O = o->sizes[1], total = ts_numel(o);
  if (total == 0) return TS_OK;
  const int64_t bs = b ? b->strides[0] : 0;
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    if (x->dtype == TS_FLOAT32)
      depthwise_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
          g, O, tsc_ptr<float>(x), tsc_ptr<float>(w), w->strides[0], w->strides[2], w->strides[3],
          b ? tsc_ptr<float>(b) : NULL, bs, tsc_ptr<float>(o), (I)total);
    else
      depthwise_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
          g, O, tsc_ptr<double>(x), tsc_ptr<double>(w), w->strides[0], w->strides[2], w->strides[3],
          b ? tsc_ptr<double>(b) : NULL, bs, tsc_ptr<double>(o), (I)total);
    TSC_LAUNCH_CHECK("conv2d_depthwise");
    return TS_OK;
  });
}

static ts_status k_conv2d_depthwise_backward(const ts_call *c) {
  const ts_tensor *go = c->in[0], *x = c->in[1], *w = c->in[2];
  ts_tensor *gi = c->out[0], *gw = c->out[1];
  conv_geo g = make_geo(x, go, ts_pack2(w->sizes[2], w->sizes[3]), c->i[0], c->i[1], c->i[2]);
  const int64_t O = go->sizes[1];
  const bool f32 = x->dtype == TS_FLOAT32;
  if (gi && ts_numel(gi) > 0) {
    const int64_t total = ts_numel(gi);
    ts_status st = tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
      using I = decltype(itag);
      if (f32)
        depthwise_bw_input_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
            g, O, tsc_ptr<float>(go), tsc_ptr<float>(w), tsc_ptr<float>(gi), (I)total);
      else
        depthwise_bw_input_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
            g, O, tsc_ptr<double>(go), tsc_ptr<double>(w), tsc_ptr<double>(gi), (I)total);
      TSC_LAUNCH_CHECK("conv2d_depthwise_backward (input)");
      return TS_OK;
    });
    if (st) return st;
  }
  if (gw && ts_numel(gw) > 0) {
    const int64_t nl = g.N * g.Ho * g.Wo, blocks = O * g.kh * g.kw;
    if (nl == 0) { // no output pixels: a zero gradient
      TSC_CHECK(cudaMemsetAsync(ts_data(gw), 0, (size_t)ts_numel(gw) * ts_dtype_size(gw->dtype), tsc_stream()));
      return TS_OK;
    }
    // enough blocks to fill the GPU: a few weights with many pixels each get
    // G > 1 slices per weight (each slice at least 8 steps of the block)
    const int64_t target = (int64_t)tsc_sm_count() * 8, per = (int64_t)TSC_THREADS * 8;
    int64_t G = (target + blocks - 1) / blocks, most = (nl + per - 1) / per;
    G = G > most ? most : G < 1 ? 1 : G;
    ts_status st = TS_OK;
    double *partial = NULL;
    if (G > 1) {
      partial = (double *)tsc_temp_alloc((size_t)(blocks * G) * sizeof(double), &st);
      if (st) return st;
    }
    const int64_t units = blocks * G;
    const unsigned grid = (unsigned)(units < INT32_MAX ? units : INT32_MAX);
    st = tsc_with_index(nl < INT32_MAX, [&](auto itag) -> ts_status {
      using I = decltype(itag);
      if (f32)
        depthwise_bw_weight_kernel<float, I><<<grid, TSC_THREADS, 0, tsc_stream()>>>(
            g, O, tsc_ptr<float>(go), tsc_ptr<float>(x), tsc_ptr<float>(gw), partial, G, (I)nl);
      else
        depthwise_bw_weight_kernel<double, I><<<grid, TSC_THREADS, 0, tsc_stream()>>>(
            g, O, tsc_ptr<double>(go), tsc_ptr<double>(x), tsc_ptr<double>(gw), partial, G, (I)nl);
      TSC_LAUNCH_CHECK("conv2d_depthwise_backward (weight)");
      if (G == 1) return TS_OK;
      if (f32)
        depthwise_bw_weight_final<float><<<tsc_blocks(blocks), TSC_THREADS, 0, tsc_stream()>>>(partial, G,
                                                                                               tsc_ptr<float>(gw), blocks);
      else
        depthwise_bw_weight_final<double><<<tsc_blocks(blocks), TSC_THREADS, 0, tsc_stream()>>>(partial, G,
                                                                                                tsc_ptr<double>(gw), blocks);
      TSC_LAUNCH_CHECK("conv2d_depthwise_backward (weight sums)");
      return TS_OK;
    });
    tsc_temp_free(partial);
    return st;
  }
  return TS_OK;
}

void tsc_register_nn_conv(ts_kernel *k) {
  k[TS_OP_IM2COL] = k_im2col;
  k[TS_OP_COL2IM] = k_col2im;
  k[TS_OP_CONV2D_DEPTHWISE] = k_conv2d_depthwise;
  k[TS_OP_CONV2D_DEPTHWISE_BACKWARD] = k_conv2d_depthwise_backward;
}
