/* CPU kernels of interpolation (contracts in ops_nn.def): nearest and
 * bilinear resizing of (N, C, H, W) planes and their backward passes. The
 * source rows and columns of each output cell (and the bilinear weights) are
 * computed once per call into tables, with PyTorch's formulas and in its
 * precision (nearest in float, bilinear in the operands' type), so the values
 * are PyTorch's. Planes in parallel: the backward passes add into one plane
 * per thread, no atomics. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* torch's compute_scales_value: 1/scale when one was given, else in/out */
#define SCALE_VALUE(T, scale, in, out) ((scale) > 0 ? (T)(1.0 / (scale)) : (T)(in) / (T)(out))

/* torch's nearest_idx: exact for the same size and for doubling, else floor(o * scale) in float */
static int64_t nearest_idx(int64_t o, int64_t in, int64_t out, double scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const float s = SCALE_VALUE(float, scale, in, out);
  const int64_t i = (int64_t)floorf((float)o * s);
  return i < in - 1 ? i : in - 1;
}

/* torch's compute_source_index_and_lambda for output index o: the ratio in T, the source
 * position in double (its accscalar), the weights in T */
#define LINEAR_INDEX(SUF, T)                                                                         \
  static void linear_idx_##SUF(int64_t o, int64_t in, int64_t out, bool align, double scale,       \
                               int64_t *i0, int64_t *i1, T *l0, T *l1) {                           \
    if (out == in) {                                                                               \
      *i0 = *i1 = o, *l0 = 1, *l1 = 0;                                                             \
      return;                                                                                      \
    }                                                                                              \
    const T ratio = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0) : SCALE_VALUE(T, scale, in, out); \
    double real = align ? (double)ratio * (double)o : (double)ratio * ((double)o + 0.5) - 0.5;    \
    if (real < 0) real = 0;                                                                        \
    const int64_t i = (int64_t)real;                                                               \
    *i0 = i < in - 1 ? i : in - 1; /* a guard only: torch's formula stays below in */              \
    *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);                                                            \
    *l1 = (T)(real - (double)i);                                                                   \
    *l0 = (T)1 - *l1;                                                                              \
  }

/* The tables of one call: per output row and column, the source indices and weights. */
#define TABLES(SUF, T)                                                                             \
  typedef struct tables_##SUF {                                                                    \
    int64_t *h0, *h1, *w0, *w1;                                                                    \
    T *hl0, *hl1, *wl0, *wl1;                                                                      \
  } tables_##SUF;                                                                                  \
  static bool tables_##SUF##_make(tables_##SUF *t, const ts_call *c, int64_t H, int64_t W,        \
                                  int64_t Ho, int64_t Wo) {                                        \
    const bool linear = c->op == TS_OP_UPSAMPLE_BILINEAR2D || c->op == TS_OP_UPSAMPLE_BILINEAR2D_BACKWARD; \
    const int64_t n = 2 * (Ho + Wo);                                                               \
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)n);                                             \
    T *lx = malloc(sizeof(T) * (size_t)n);                                                         \
    if (!ix || !lx) return free(ix), free(lx), false;                                              \
    t->h0 = ix, t->h1 = ix + Ho, t->w0 = ix + 2 * Ho, t->w1 = ix + 2 * Ho + Wo;                    \
    t->hl0 = lx, t->hl1 = lx + Ho, t->wl0 = lx + 2 * Ho, t->wl1 = lx + 2 * Ho + Wo;                \
    for (int64_t y = 0; y < Ho; y++) {                                                             \
      if (linear) linear_idx_##SUF(y, H, Ho, c->i[0], c->f[0], &t->h0[y], &t->h1[y], &t->hl0[y], &t->hl1[y]); \
      else t->h0[y] = nearest_idx(y, H, Ho, c->f[0]);                                              \
    }                                                                                              \
    for (int64_t x = 0; x < Wo; x++) {                                                             \
      if (linear) linear_idx_##SUF(x, W, Wo, c->i[0], c->f[1], &t->w0[x], &t->w1[x], &t->wl0[x], &t->wl1[x]); \
      else t->w0[x] = nearest_idx(x, W, Wo, c->f[1]);                                              \
    }                                                                                              \
    return true;                                                                                   \
  }                                                                                                \
  static void tables_##SUF##_free(tables_##SUF *t) { free(t->h0), free(t->hl0); }

/* Forward: x (N, C, H, W) with strides xs, out (N, C, Ho, Wo) contiguous. Backward: go
 * (N, C, Ho, Wo) with strides xs, out (N, C, H, W) contiguous, overwritten. one_d: the
 * height is left alone (linear 1-D: no weight-0 terms, whose 0 * inf would be NaN). */
#define UPSAMPLE(SUF, T)                                                                           \
  LINEAR_INDEX(SUF, T)                                                                             \
  TABLES(SUF, T)                                                                                   \
  static void nearest_##SUF(const tables_##SUF *t, int64_t P, int64_t C, const int64_t *xs,        \
                            int64_t Ho, int64_t Wo, const T *x, T *out) {                          \
    _Pragma("omp parallel for schedule(static) if (P * Ho * Wo > TS_PARALLEL_GRAIN)")              \
    for (int64_t pl = 0; pl < P; pl++) {                                                           \
      const T *src = x + (pl / C) * xs[0] + (pl % C) * xs[1];                                      \
      T *dst = out + pl * Ho * Wo;                                                                 \
      for (int64_t y = 0; y < Ho; y++)                                                             \
        for (int64_t x0 = 0; x0 < Wo; x0++) dst[y * Wo + x0] = src[t->h0[y] * xs[2] + t->w0[x0] * xs[3]]; \
    }                                                                                              \
  }                                                                                                \
  static void nearest_bw_##SUF(const tables_##SUF *t, int64_t P, int64_t C, const int64_t *gs,     \
                               int64_t H, int64_t W, int64_t Ho, int64_t Wo, const T *go, T *out) { \
    _Pragma("omp parallel for schedule(static) if (P * Ho * Wo > TS_PARALLEL_GRAIN)")              \
    for (int64_t pl = 0; pl < P; pl++) {                                                           \
      const T *src = go + (pl / C) * gs[0] + (pl % C) * gs[1];                                     \
      T *dst = out + pl * H * W;                                                                   \
      memset(dst, 0, sizeof(T) * (size_t)(H * W));                                                 \
      for (int64_t y = 0; y < Ho; y++)                                                             \
        for (int64_t x0 = 0; x0 < Wo; x0++) dst[t->h0[y] * W + t->w0[x0]] += src[y * gs[2] + x0 * gs[3]]; \
    }                                                                                              \
  }                                                                                                \
  static void bilinear_##SUF(const tables_##SUF *t, bool one_d, int64_t P, int64_t C,              \
                             const int64_t *xs, int64_t Ho, int64_t Wo, const T *x, T *out) {      \
    _Pragma("omp parallel for schedule(static) if (P * Ho * Wo > TS_PARALLEL_GRAIN)")              \
    for (int64_t pl = 0; pl < P; pl++) {                                                           \
      const T *src = x + (pl / C) * xs[0] + (pl % C) * xs[1];                                      \
      T *dst = out + pl * Ho * Wo;                                                                 \
      for (int64_t y = 0; y < Ho; y++) {                                                           \
        const T *r0 = src + t->h0[y] * xs[2], *r1 = src + t->h1[y] * xs[2];                        \
        for (int64_t x0 = 0; x0 < Wo; x0++) {                                                      \
          const int64_t a = t->w0[x0] * xs[3], b = t->w1[x0] * xs[3];                              \
          const T wa = t->wl0[x0], wb = t->wl1[x0];                                                \
          const T top = r0[a] * wa + r0[b] * wb;                                                   \
          dst[y * Wo + x0] = one_d ? top : top * t->hl0[y] + (r1[a] * wa + r1[b] * wb) * t->hl1[y]; \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  static void bilinear_bw_##SUF(const tables_##SUF *t, bool one_d, int64_t P, int64_t C,           \
                                const int64_t *gs, int64_t H, int64_t W, int64_t Ho, int64_t Wo,   \
                                const T *go, T *out) {                                             \
    _Pragma("omp parallel for schedule(static) if (P * Ho * Wo > TS_PARALLEL_GRAIN)")              \
    for (int64_t pl = 0; pl < P; pl++) {                                                           \
      const T *src = go + (pl / C) * gs[0] + (pl % C) * gs[1];                                     \
      T *dst = out + pl * H * W;                                                                   \
      memset(dst, 0, sizeof(T) * (size_t)(H * W));                                                 \
      for (int64_t y = 0; y < Ho; y++) {                                                           \
        T *r0 = dst + t->h0[y] * W, *r1 = dst + t->h1[y] * W;                                      \
        const T l0 = one_d ? (T)1 : t->hl0[y], l1 = t->hl1[y];                                     \
        for (int64_t x0 = 0; x0 < Wo; x0++) {                                                      \
          const T g = src[y * gs[2] + x0 * gs[3]];                                                 \
          const int64_t a = t->w0[x0], b = t->w1[x0];                                              \
          r0[a] += l0 * t->wl0[x0] * g;                                                            \
          r0[b] += l0 * t->wl1[x0] * g;                                                            \
          if (one_d) continue;                                                                     \
          r1[a] += l1 * t->wl0[x0] * g;                                                            \
          r1[b] += l1 * t->wl1[x0] * g;                                                            \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  static ts_status run_##SUF(const ts_call *c) {                                                   \
    const bool back = c->op == TS_OP_UPSAMPLE_NEAREST2D_BACKWARD || c->op == TS_OP_UPSAMPLE_BILINEAR2D_BACKWARD; \
    const ts_tensor *src = c->in[0], *o = c->out[0];                                               \
    const ts_tensor *img = back ? o : src, *res = back ? src : o; /* (N, C, H, W), (N, C, Ho, Wo) */ \
    const int64_t C = img->sizes[1], H = img->sizes[2], W = img->sizes[3], Ho = res->sizes[2],    \
                  Wo = res->sizes[3], P = img->sizes[0] * C;                                       \
    tables_##SUF t;                                                                                \
    if (!tables_##SUF##_make(&t, c, H, W, Ho, Wo))                                                 \
      return ts_fail(TS_ERR_OOM, "%s: out of memory for the index tables", ts_ops[c->op].name);     \
    const bool one_d = c->i[1] != 0;                                                               \
    switch (c->op) {                                                                               \
    case TS_OP_UPSAMPLE_NEAREST2D: nearest_##SUF(&t, P, C, src->strides, Ho, Wo, ts_data(src), ts_data(o)); break; \
    case TS_OP_UPSAMPLE_NEAREST2D_BACKWARD:                                                        \
      nearest_bw_##SUF(&t, P, C, src->strides, H, W, Ho, Wo, ts_data(src), ts_data(o));             \
      break;                                                                                       \
    case TS_OP_UPSAMPLE_BILINEAR2D:                                                                \
      bilinear_##SUF(&t, one_d, P, C, src->strides, Ho, Wo, ts_data(src), ts_data(o));              \
      break;                                                                                       \
    default: bilinear_bw_##SUF(&t, one_d, P, C, src->strides, H, W, Ho, Wo, ts_data(src), ts_data(o)); \
    }                                                                                              \
    tables_##SUF##_free(&t);                                                                       \
    return ts_check_interrupt();                                                                   \
  }

UPSAMPLE(f32, float)
UPSAMPLE(f64, double)

static ts_status k_upsample(const ts_call *c) {
  return c->out[0]->dtype == TS_FLOAT32 ? run_f32(c) : run_f64(c);
}

void ts_cpu_register_nn_upsample(ts_kernel *k) {
  k[TS_OP_UPSAMPLE_NEAREST2D] = k_upsample;
  k[TS_OP_UPSAMPLE_NEAREST2D_BACKWARD] = k_upsample;
  k[TS_OP_UPSAMPLE_BILINEAR2D] = k_upsample;
  k[TS_OP_UPSAMPLE_BILINEAR2D_BACKWARD] = k_upsample;
}
