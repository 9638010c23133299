// CUDA kernels for pooling (contracts in src/ops/ops_nn.def; the CPU reference is
// src/cpu/nn.c): max, average, adaptive average and adaptive max pooling, their
// backward passes, and the max-pool backward scatter (adaptive max pooling's too).
//
// Forward kernels take one thread per output element; the average pools'
// backward passes are gathers (one thread per input pixel, visiting the
// windows that hold it in the CPU's order), so they need no atomics and give
// the CPU's sums. Only MAX_POOL2D_BACKWARD scatters (the saved indices say
// where), with atomicAdd, and checks every index on the device.
#include "common.cuh"

// C's NAN (a positive quiet NaN), as the CPU kernels store
#define NAN_D __longlong_as_double(0x7ff8000000000000LL)

// Geometry in elements; xs are the strides of the (N, C, H, W) input of a
// forward kernel, gs those of the (N, C, Ho, Wo) gradient of a backward one.
struct pool_geo {
  int64_t N, C, H, W, Ho, Wo;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t xs[4];
};

// img (N, C, H, W), res (N, C, Ho, Wo); src the strided operand (x or grad_out).
static pool_geo make_geo(const ts_tensor *img, const ts_tensor *res, const ts_tensor *src, const int64_t *ip,
                         bool dilation) {
  pool_geo g;
  g.N = img->sizes[0], g.C = img->sizes[1], g.H = img->sizes[2], g.W = img->sizes[3];
  g.Ho = res->sizes[2], g.Wo = res->sizes[3];
  for (int i = 0; i < 4; i++) g.xs[i] = src->strides[i];
  g.kh = g.kw = g.sh = g.sw = 1, g.ph = g.pw = 0, g.dh = g.dw = 1;
  if (ip) {
    g.kh = ts_unpack_h(ip[0]), g.kw = ts_unpack_w(ip[0]);
    g.sh = ts_unpack_h(ip[1]), g.sw = ts_unpack_w(ip[1]);
    g.ph = ts_unpack_h(ip[2]), g.pw = ts_unpack_w(ip[2]);
    if (dilation) g.dh = ts_unpack_h(ip[3]), g.dw = ts_unpack_w(ip[3]);
  }
  return g;
}

// Splits flat index i of a contiguous (N, C, A, B) tensor into (plane, a, b).
#define SPLIT4(I, i, A, B, pl, a, b)  \
  I b = (i) % (I)(B), pl##_t_ = (i) / (I)(B); \
  I a = pl##_t_ % (I)(A), pl = pl##_t_ / (I)(A)

// ---- max pool ----------------------------------------------------------------------------

// out, idx (N, C, Ho, Wo) contiguous: the window maximum and its flat index h*W + w,
// the first on ties; a NaN replaces the running maximum (so the last NaN wins), as
// the CPU's `bi < 0 || v > best || isnan(v)`.
template <typename T, typename I>
__global__ void max_pool_kernel(pool_geo g, const T *__restrict__ x, T *__restrict__ out, int64_t *__restrict__ idx,
                                I total) {
  TSC_GRID_STRIDE(I, i, total) {
    SPLIT4(I, i, g.Ho, g.Wo, pl, y, x0);
    const T *src = x + ((int64_t)pl / g.C) * g.xs[0] + ((int64_t)pl % g.C) * g.xs[1];
    T best = T(0);
    int64_t bi = -1;
    for (int64_t ki = 0; ki < g.kh; ki++) {
      const int64_t iy = (int64_t)y * g.sh - g.ph + ki * g.dh;
      if (iy < 0 || iy >= g.H) continue;
      for (int64_t kj = 0; kj < g.kw; kj++) {
        const int64_t ix = (int64_t)x0 * g.sw - g.pw + kj * g.dw;
        if (ix < 0 || ix >= g.W) continue;
        const T v = src[iy * g.xs[2] + ix * g.xs[3]];
        if (bi < 0 || v > best || isnan(v)) best = v, bi = iy * g.W + ix;
      }
    }
    out[i] = best;
    idx[i] = bi;
  }
}

// Runs launch(T{}, I{}, total) for a max kernel writing values and int64 indices over
// out[0]'s cells: T x's dtype, I the index width the size needs.
template <typename L> static ts_status launch_max(const ts_call *c, const char *what, L launch) {
  const int64_t total = ts_numel(c->out[0]);
  if (total == 0) return TS_OK;
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    if (c->in[0]->dtype == TS_FLOAT32) launch(float{}, itag, total);
    else launch(double{}, itag, total);
    TSC_LAUNCH_CHECK(what);
    return TS_OK;
  });
}

static ts_status k_max_pool2d(const ts_call *c) {
  const ts_tensor *x = c->in[0];
  ts_tensor *o = c->out[0], *oi = c->out[1];
  pool_geo g = make_geo(x, o, x, c->i, true);
  return launch_max(c, "max_pool2d", [&](auto t, auto itag, int64_t total) {
    using T = decltype(t);
    using I = decltype(itag);
    max_pool_kernel<T, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
        g, tsc_ptr<T>(x), tsc_ptr<T>(o), tsc_ptr<int64_t>(oi), (I)total);
  });
}

// The error slot of max-pool backward: set when an index fell outside [0, HW).
struct bad_index {
  int bad;
  int pad_;
  unsigned long long value; // one of the bad indices
};

// out (P, HW) zeroed beforehand; out[p, idx[p, l]] += go[p, l], indices checked.
template <typename T, typename I>
__global__ void max_pool_bw_kernel(const T *__restrict__ go, const int64_t *__restrict__ idx, T *out, I L, int64_t HW,
                                   bad_index *err, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    const int64_t ix = idx[i];
    if ((uint64_t)ix >= (uint64_t)HW) {
      atomicExch(&err->value, (unsigned long long)ix);
      atomicExch(&err->bad, 1);
      continue;
    }
    atomicAdd(out + (int64_t)(i / L) * HW + ix, go[i]);
  }
}

static ts_status k_max_pool2d_backward(const ts_call *c) {
  const int64_t P = c->i[0], L = c->i[1], HW = c->i[2];
  ts_tensor *o = c->out[0];
  const bool f32 = o->dtype == TS_FLOAT32;
  if (P * HW > 0) TSC_CHECK(cudaMemsetAsync(ts_data(o), 0, (size_t)(P * HW) * ts_dtype_size(o->dtype), tsc_stream()));
  const int64_t total = P * L;
  if (total == 0) return TS_OK;
  ts_status st;
  bad_index *err = (bad_index *)tsc_temp_alloc(sizeof(bad_index), &st);
  if (st) return st;
  struct freer {
    void *p;
    ~freer() { tsc_temp_free(p); }
  } f{err};
  TSC_CHECK(cudaMemsetAsync(err, 0, sizeof(bad_index), tsc_stream()));
  st = tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    if (f32)
      max_pool_bw_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
          tsc_ptr<float>(c->in[0]), tsc_ptr<int64_t>(c->in[1]), tsc_ptr<float>(o), (I)L, HW, err, (I)total);
    else
      max_pool_bw_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
          tsc_ptr<double>(c->in[0]), tsc_ptr<int64_t>(c->in[1]), tsc_ptr<double>(o), (I)L, HW, err, (I)total);
    TSC_LAUNCH_CHECK("max_pool2d_backward");
    return TS_OK;
  });
  if (st) return st;
  // the indices may come from the user (torch._backward): the flag must be read
  bad_index h;
  TSC_CHECK(cudaMemcpyAsync(&h, err, sizeof h, cudaMemcpyDeviceToHost, tsc_stream()));
  TSC_CHECK(cudaStreamSynchronize(tsc_stream()));
  if (h.bad)
    return ts_fail(TS_ERR_INDEX, "max_pool2d_backward: index %lld is out of bounds for an input plane of %lld elements",
                   (long long)h.value, (long long)HW);
  return TS_OK;
}

// ---- average pool ------------------------------------------------------------------------

// torch's avg_pool2d window for output (y, x0): its clipped bounds and divisor.
__device__ __forceinline__ void avg_window(const pool_geo &g, bool count_pad, int64_t y, int64_t x0, int64_t *h0,
                                           int64_t *h1, int64_t *w0, int64_t *w1, int64_t *div) {
  int64_t hs = y * g.sh - g.ph, ws = x0 * g.sw - g.pw;
  int64_t he = hs + g.kh, we = ws + g.kw;
  if (he > g.H + g.ph) he = g.H + g.ph;
  if (we > g.W + g.pw) we = g.W + g.pw;
  const int64_t pool = (he - hs) * (we - ws);
  if (hs < 0) hs = 0;
  if (ws < 0) ws = 0;
  if (he > g.H) he = g.H;
  if (we > g.W) we = g.W;
  *h0 = hs, *h1 = he, *w0 = ws, *w1 = we;
  *div = count_pad ? pool : (he - hs) * (we - ws);
}

// x (N, C, H, W) with element strides g.xs; out (N, C, Ho, Wo) contiguous, one
// thread per output element i (total = N*C*Ho*Wo).
template <typename T, typename I>
__global__ void avg_pool_kernel(pool_geo g, bool cp, const T *__restrict__ x, T *__restrict__ out, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    SPLIT4(I, i, g.Ho, g.Wo, pl, y, x0);
    const T *src = x + ((int64_t)pl / g.C) * g.xs[0] + ((int64_t)pl % g.C) * g.xs[1];
    int64_t h0, h1, w0, w1, div;
    avg_window(g, cp, y, x0, &h0, &h1, &w0, &w1, &div);
    double s = 0;
    for (int64_t a = h0; a < h1; a++)
      for (int64_t b = w0; b < w1; b++) s += (double)src[a * g.xs[2] + b * g.xs[3]];
    out[i] = (T)(div > 0 ? s / (double)div : NAN_D);
  }
}

// out (N, C, H, W) contiguous: each pixel sums grad / divisor over the windows
// that hold it, rows y in [ylo, yhi]: y*sh - ph <= h < y*sh - ph + kh.
template <typename T, typename I>
__global__ void avg_pool_bw_kernel(pool_geo g, bool cp, const T *__restrict__ go, T *__restrict__ out, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    SPLIT4(I, i, g.H, g.W, pl, h, w);
    const T *src = go + ((int64_t)pl / g.C) * g.xs[0] + ((int64_t)pl % g.C) * g.xs[1];
    const int64_t hp = (int64_t)h + g.ph, wp = (int64_t)w + g.pw;
    const int64_t ylo = hp < g.kh ? 0 : (hp - g.kh) / g.sh + 1, xlo = wp < g.kw ? 0 : (wp - g.kw) / g.sw + 1;
    const int64_t yhi = min(hp / g.sh, g.Ho - 1), xhi = min(wp / g.sw, g.Wo - 1);
    T acc = T(0);
    for (int64_t y = ylo; y <= yhi; y++)
      for (int64_t x0 = xlo; x0 <= xhi; x0++) {
        int64_t h0, h1, w0, w1, div;
        avg_window(g, cp, y, x0, &h0, &h1, &w0, &w1, &div);
        if (h < h0 || h >= h1 || w < w0 || w >= w1) continue;
        acc += (T)((double)src[y * g.xs[2] + x0 * g.xs[3]] / (double)div);
      }
    out[i] = acc;
  }
}

static ts_status k_avg_pool2d(const ts_call *c) {
  const ts_tensor *x = c->in[0];
  ts_tensor *o = c->out[0];
  pool_geo g = make_geo(x, o, x, c->i, false);
  const bool cp = c->i[3] != 0;
  const int64_t total = ts_numel(o);
  if (total == 0) return TS_OK;
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    if (x->dtype == TS_FLOAT32)
      avg_pool_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, cp, tsc_ptr<float>(x),
                                                                                      tsc_ptr<float>(o), (I)total);
    else
      avg_pool_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, cp, tsc_ptr<double>(x),
                                                                                       tsc_ptr<double>(o), (I)total);
    TSC_LAUNCH_CHECK("avg_pool2d");
    return TS_OK;
  });
}

static ts_status k_avg_pool2d_backward(const ts_call *c) {
  const ts_tensor *go = c->in[0];
  ts_tensor *o = c->out[0];
  pool_geo g = make_geo(o, go, go, c->i, false);
  const bool cp = c->i[3] != 0;
  const int64_t total = ts_numel(o);
  if (total == 0) return TS_OK;
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    if (o->dtype == TS_FLOAT32)
      avg_pool_bw_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
          g, cp, tsc_ptr<float>(go), tsc_ptr<float>(o), (I)total);
    else
      avg_pool_bw_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
          g, cp, tsc_ptr<double>(go), tsc_ptr<double>(o), (I)total);
    TSC_LAUNCH_CHECK("avg_pool2d_backward");
    return TS_OK;
  });
}

// ---- adaptive average pool ------------------------------------------------------------------

// torch's adaptive pooling bounds: [floor(i*n/o), ceil((i+1)*n/o))
__device__ __forceinline__ int64_t ad_start(int64_t i, int64_t o, int64_t n) { return (i * n) / o; }
__device__ __forceinline__ int64_t ad_end(int64_t i, int64_t o, int64_t n) { return ((i + 1) * n + o - 1) / o; }

// x (N, C, H, W) with element strides g.xs; out (N, C, Ho, Wo) contiguous, one
// thread per output cell i, averaging rows [ad_start, ad_end) and the same columns.
template <typename T, typename I>
__global__ void adaptive_kernel(pool_geo g, const T *__restrict__ x, T *__restrict__ out, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    SPLIT4(I, i, g.Ho, g.Wo, pl, y, x0);
    const T *src = x + ((int64_t)pl / g.C) * g.xs[0] + ((int64_t)pl % g.C) * g.xs[1];
    const int64_t h0 = ad_start(y, g.Ho, g.H), h1 = ad_end(y, g.Ho, g.H);
    const int64_t w0 = ad_start(x0, g.Wo, g.W), w1 = ad_end(x0, g.Wo, g.W);
    double s = 0;
    for (int64_t a = h0; a < h1; a++)
      for (int64_t b = w0; b < w1; b++) s += (double)src[a * g.xs[2] + b * g.xs[3]];
    out[i] = (T)(s / (double)((h1 - h0) * (w1 - w0)));
  }
}

// out (N, C, H, W) contiguous: each pixel gathers from the cells whose window
// holds it; cell y holds row h iff floor(h*Ho/H) <= y <= floor(((h+1)*Ho - 1)/H)
// (checked again against the bounds themselves).
template <typename T, typename I>
__global__ void adaptive_bw_kernel(pool_geo g, const T *__restrict__ go, T *__restrict__ out, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    SPLIT4(I, i, g.H, g.W, pl, h, w);
    const T *src = go + ((int64_t)pl / g.C) * g.xs[0] + ((int64_t)pl % g.C) * g.xs[1];
    T acc = T(0);
    if (g.Ho > 0 && g.Wo > 0) {
      const int64_t ylo = (int64_t)h * g.Ho / g.H, yhi = (((int64_t)h + 1) * g.Ho - 1) / g.H;
      const int64_t xlo = (int64_t)w * g.Wo / g.W, xhi = (((int64_t)w + 1) * g.Wo - 1) / g.W;
      for (int64_t y = ylo; y <= yhi && y < g.Ho; y++) {
        const int64_t h0 = ad_start(y, g.Ho, g.H), h1 = ad_end(y, g.Ho, g.H);
        if (h < h0 || h >= h1) continue;
        for (int64_t x0 = xlo; x0 <= xhi && x0 < g.Wo; x0++) {
          const int64_t w0 = ad_start(x0, g.Wo, g.W), w1 = ad_end(x0, g.Wo, g.W);
          if (w < w0 || w >= w1) continue;
          acc += (T)((double)src[y * g.xs[2] + x0 * g.xs[3]] / (double)((h1 - h0) * (w1 - w0)));
        }
      }
    }
    out[i] = acc;
  }
}

static ts_status k_adaptive_avg_pool2d(const ts_call *c) {
  const ts_tensor *x = c->in[0];
  ts_tensor *o = c->out[0];
  pool_geo g = make_geo(x, o, x, NULL, false);
  const int64_t total = ts_numel(o);
  if (total == 0) return TS_OK;
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    if (x->dtype == TS_FLOAT32)
      adaptive_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, tsc_ptr<float>(x),
                                                                                      tsc_ptr<float>(o), (I)total);
    else
      adaptive_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, tsc_ptr<double>(x),
                                                                                       tsc_ptr<double>(o), (I)total);
    TSC_LAUNCH_CHECK("adaptive_avg_pool2d");
    return TS_OK;
  });
}

static ts_status k_adaptive_avg_pool2d_backward(const ts_call *c) {
  const ts_tensor *go = c->in[0];
  ts_tensor *o = c->out[0];
  pool_geo g = make_geo(o, go, go, NULL, false);
  const int64_t total = ts_numel(o);
  if (total == 0) return TS_OK;
  return tsc_with_index(total < INT32_MAX, [&](auto itag) -> ts_status {
    using I = decltype(itag);
    if (o->dtype == TS_FLOAT32)
      adaptive_bw_kernel<float, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, tsc_ptr<float>(go),
                                                                                         tsc_ptr<float>(o), (I)total);
    else
      adaptive_bw_kernel<double, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(g, tsc_ptr<double>(go),
                                                                                          tsc_ptr<double>(o), (I)total);
    TSC_LAUNCH_CHECK("adaptive_avg_pool2d_backward");
    return TS_OK;
  });
}

// ---- adaptive max pool ---------------------------------------------------------------------

// out, idx (N, C, Ho, Wo) contiguous: the maximum of adaptive_kernel's window and its flat
// index h*W + w, the first on ties, NaN winning (as the CPU)
template <typename T, typename I>
__global__ void adaptive_max_kernel(pool_geo g, const T *__restrict__ x, T *__restrict__ out,
                                    int64_t *__restrict__ idx, I total) {
  TSC_GRID_STRIDE(I, i, total) {
    SPLIT4(I, i, g.Ho, g.Wo, pl, y, x0);
    const T *src = x + ((int64_t)pl / g.C) * g.xs[0] + ((int64_t)pl % g.C) * g.xs[1];
    const int64_t h0 = ad_start(y, g.Ho, g.H), h1 = ad_end(y, g.Ho, g.H);
    const int64_t w0 = ad_start(x0, g.Wo, g.W), w1 = ad_end(x0, g.Wo, g.W);
    T best = T(0);
    int64_t bi = -1;
    for (int64_t a = h0; a < h1; a++)
      for (int64_t b = w0; b < w1; b++) {
        const T v = src[a * g.xs[2] + b * g.xs[3]];
        if (bi < 0 || v > best || isnan(v)) best = v, bi = a * g.W + b;
      }
    out[i] = best;
    idx[i] = bi;
  }
}

static ts_status k_adaptive_max_pool2d(const ts_call *c) {
  const ts_tensor *x = c->in[0];
  ts_tensor *o = c->out[0], *oi = c->out[1];
  pool_geo g = make_geo(x, o, x, NULL, false);
  return launch_max(c, "adaptive_max_pool2d", [&](auto t, auto itag, int64_t total) {
    using T = decltype(t);
    using I = decltype(itag);
    adaptive_max_kernel<T, I><<<tsc_blocks(total), TSC_THREADS, 0, tsc_stream()>>>(
        g, tsc_ptr<T>(x), tsc_ptr<T>(o), tsc_ptr<int64_t>(oi), (I)total);
  });
}

void tsc_register_nn_pool(ts_kernel *k) {
  k[TS_OP_MAX_POOL2D] = k_max_pool2d;
  k[TS_OP_MAX_POOL2D_BACKWARD] = k_max_pool2d_backward;
  k[TS_OP_AVG_POOL2D] = k_avg_pool2d;
  k[TS_OP_AVG_POOL2D_BACKWARD] = k_avg_pool2d_backward;
  k[TS_OP_ADAPTIVE_AVG_POOL2D] = k_adaptive_avg_pool2d;
  k[TS_OP_ADAPTIVE_AVG_POOL2D_BACKWARD] = k_adaptive_avg_pool2d_backward;
  k[TS_OP_ADAPTIVE_MAX_POOL2D] = k_adaptive_max_pool2d;
}
