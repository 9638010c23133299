/* CPU neural-network kernels (contracts in ops_nn.def): im2col/col2im for the
 * GEMM convolution, a direct depthwise convolution, and the pooling loops.
 * Each works on one (n, c) plane at a time, planes in parallel: no two
 * threads ever write the same output element, so col2im and the backward
 * passes accumulate without atomics. Bodies are instantiated for float and
 * double (the op layer computes the half types in float). */
#include "cpu.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Geometry shared by the kernels, in elements. */
typedef struct geo {
  int64_t N, C, H, W, Ho, Wo;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t xs[4]; /* strides of the (N, C, H, W) operand */
} geo;

static void geo_pairs(geo *g, int64_t k, int64_t s, int64_t p, int64_t d) {
  g->kh = ts_unpack_h(k), g->kw = ts_unpack_w(k);
  g->sh = ts_unpack_h(s), g->sw = ts_unpack_w(s);
  g->ph = ts_unpack_h(p), g->pw = ts_unpack_w(p);
  g->dh = ts_unpack_h(d), g->dw = ts_unpack_w(d);
}

static void geo_image(geo *g, const ts_tensor *img, const ts_tensor *res) {
  g->N = img->sizes[0], g->C = img->sizes[1], g->H = img->sizes[2], g->W = img->sizes[3];
  memcpy(g->xs, img->strides, sizeof g->xs);
  g->Ho = res->sizes[res->ndim - 2], g->Wo = res->sizes[res->ndim - 1];
}

/* The range of output columns x whose input column x*s - p + off lies in [0, W). */
static void valid_range(int64_t off, int64_t s, int64_t p, int64_t W, int64_t Wo, int64_t *lo, int64_t *hi) {
  int64_t a = p - off; /* x*s >= a */
  int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
  int64_t b = W - 1 + p - off; /* x*s <= b */
  int64_t h = b < 0 ? -1 : b / s;
  *lo = l < Wo ? l : Wo;
  *hi = h + 1 < *lo ? *lo : (h + 1 < Wo ? h + 1 : Wo);
}

/* An OpenMP loop over planes, on one thread when the total work is small. */
#define PARALLEL_IF(work)              \
  const int64_t par_work_ = (work);    \
  _Pragma("omp parallel for schedule(static) if (par_work_ > TS_PARALLEL_GRAIN)")

/* ---- im2col / col2im ------------------------------------------------------ */

/* cols (N, C, kh, kw, Ho, Wo) with strides os (unit on the last dim: the op layer
 * lays it out as (C*kh*kw, N*Ho*Wo) for one GEMM per chunk); col2im walks the
 * same loops adding back. */
#define IM2COL(NAME, T)                                                                            \
  static void NAME(const geo *g, const T *x, T *cols, const int64_t *os) {                         \
    const int64_t planes = g->N * g->C;                                                            \
    PARALLEL_IF(planes * g->kh * g->kw * g->Ho * g->Wo)                                            \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const T *src = x + (pl / g->C) * g->xs[0] + (pl % g->C) * g->xs[1];                          \
      T *dst = cols + (pl / g->C) * os[0] + (pl % g->C) * os[1];                                   \
      for (int64_t i = 0; i < g->kh; i++)                                                          \
        for (int64_t j = 0; j < g->kw; j++) {                                                      \
          int64_t lo, hi;                                                                          \
          valid_range(j * g->dw, g->sw, g->pw, g->W, g->Wo, &lo, &hi);                             \
          for (int64_t y = 0; y < g->Ho; y++) {                                                    \
            T *row = dst + i * os[2] + j * os[3] + y * os[4];                                      \
            int64_t iy = y * g->sh - g->ph + i * g->dh;                                            \
            if (iy < 0 || iy >= g->H) {                                                            \
              memset(row, 0, sizeof(T) * (size_t)g->Wo);                                           \
              continue;                                                                            \
            }                                                                                      \
            const int64_t base = iy * g->xs[2] + (j * g->dw - g->pw) * g->xs[3];                   \
            const int64_t step = g->sw * g->xs[3];                                                 \
            for (int64_t x0 = 0; x0 < lo; x0++) row[x0] = 0;                                       \
            if (step == 1) memcpy(row + lo, src + base + lo, sizeof(T) * (size_t)(hi - lo));      \
            else                                                                                   \
              for (int64_t x0 = lo; x0 < hi; x0++) row[x0] = src[base + x0 * step];                \
            for (int64_t x0 = hi; x0 < g->Wo; x0++) row[x0] = 0;                                   \
          }                                                                                        \
        }                                                                                          \
    }                                                                                              \
  }

/* cols may have any strides (the op layer passes expanded gradients): cs are its 6 strides. */
#define COL2IM(NAME, T)                                                                            \
  static void NAME(const geo *g, const T *cols, const int64_t *cs, T *x) {                         \
    const int64_t planes = g->N * g->C;                                                            \
    const bool unit = g->sw == 1 && cs[5] == 1;                                                    \
    PARALLEL_IF(planes * g->kh * g->kw * g->Ho * g->Wo)                                            \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      T *dst = x + pl * g->H * g->W;                                                               \
      memset(dst, 0, sizeof(T) * (size_t)(g->H * g->W));                                          \
      const T *src = cols + (pl / g->C) * cs[0] + (pl % g->C) * cs[1];                             \
      for (int64_t i = 0; i < g->kh; i++)                                                          \
        for (int64_t j = 0; j < g->kw; j++) {                                                      \
          int64_t lo, hi;                                                                          \
          valid_range(j * g->dw, g->sw, g->pw, g->W, g->Wo, &lo, &hi);                             \
          for (int64_t y = 0; y < g->Ho; y++) {                                                    \
            int64_t iy = y * g->sh - g->ph + i * g->dh;                                            \
            if (iy < 0 || iy >= g->H) continue;                                                    \
            const T *row = src + i * cs[2] + j * cs[3] + y * cs[4];                                \
            const int64_t base = iy * g->W + (j * g->dw - g->pw);                                  \
            if (unit) { /* the GEMM layout, stride 1: a loop the compiler vectorises */            \
              T *restrict d = dst + base;                                                          \
              const T *restrict r = row;                                                           \
              for (int64_t x0 = lo; x0 < hi; x0++) d[x0] += r[x0];                                 \
            } else                                                                                 \
              for (int64_t x0 = lo; x0 < hi; x0++) dst[base + x0 * g->sw] += row[x0 * cs[5]];      \
          }                                                                                        \
        }                                                                                          \
    }                                                                                              \
  }

IM2COL(im2col_f32, float)
IM2COL(im2col_f64, double)
COL2IM(col2im_f32, float)
COL2IM(col2im_f64, double)

static ts_status k_im2col(const ts_call *c) {
  geo g;
  const ts_tensor *x = c->in[0];
  ts_tensor *o = c->out[0];
  geo_image(&g, x, o);
  geo_pairs(&g, ts_pack2(o->sizes[2], o->sizes[3]), c->i[0], c->i[1], c->i[2]);
  if (x->dtype == TS_FLOAT32) im2col_f32(&g, ts_data(x), ts_data(o), o->strides);
  else im2col_f64(&g, ts_data(x), ts_data(o), o->strides);
  return ts_check_interrupt();
}

static ts_status k_col2im(const ts_call *c) {
  geo g;
  const ts_tensor *cols = c->in[0];
  ts_tensor *o = c->out[0];
  geo_image(&g, o, cols);
  geo_pairs(&g, ts_pack2(cols->sizes[2], cols->sizes[3]), c->i[0], c->i[1], c->i[2]);
  if (o->dtype == TS_FLOAT32) col2im_f32(&g, ts_data(cols), cols->strides, ts_data(o));
  else col2im_f64(&g, ts_data(cols), cols->strides, ts_data(o));
  return ts_check_interrupt();
}

/* ---- depthwise convolution on tiny planes ---------------------------------
 * The last stages of a MobileNet see 1x1 and 2x2 maps: there the plane-at-a-time
 * loops below spend their time on per-plane and per-tap set-up (and
 * oneDNN falls back to a GEMM per channel). These walk (n, output pixel, valid tap)
 * once and run the innermost loop over the channels (unit stride on 1x1 maps:
 * vectorised), with the weights transposed to (kh*kw, O). Same contracts as
 * the plane kernels. */
#define DEPTHWISE_TINY_L 4 /* output planes of at most this many pixels (at 4x4, strided channels lost) */

/* the weights (O, 1, kh, kw) with strides ws, as (kh*kw, O) */
#define DW_TRANSPOSED(T, wt, w, ws, O, g)                                                          \
  T *wt = malloc(sizeof(T) * (size_t)((O) * (g)->kh * (g)->kw));                                   \
  if (wt)                                                                                          \
    for (int64_t o_ = 0; o_ < (O); o_++)                                                           \
      for (int64_t t_ = 0; t_ < (g)->kh * (g)->kw; t_++)                                           \
        wt[t_ * (O) + o_] = (w)[o_ * (ws)[0] + (t_ / (g)->kw) * (ws)[2] + (t_ % (g)->kw) * (ws)[3]];

#define DEPTHWISE_TINY(NAME, T)                                                                    \
  /* forward: out (N, O, Ho, Wo) contiguous; false when the weight copy cannot be allocated */    \
  static bool NAME##_fwd(const geo *g, int64_t O, const T *x, const T *w, const int64_t *ws,        \
                         const T *b, int64_t bs, T *out) {                                         \
    const int64_t m = O / g->C, L = g->Ho * g->Wo;                                                 \
    DW_TRANSPOSED(T, wt, w, ws, O, g)                                                              \
    if (!wt) return false;                                                                         \
    PARALLEL_IF(g->N * O * L * g->kh * g->kw)                                                      \
    for (int64_t n = 0; n < g->N; n++)                                                             \
      for (int64_t p = 0; p < L; p++) {                                                            \
        const int64_t y = p / g->Wo, xo = p % g->Wo;                                               \
        T *restrict d = out + n * O * L + p; /* element (n, o, y, xo) is d[o * L] */               \
        for (int64_t o = 0; o < O; o++) d[o * L] = b ? b[o * bs] : (T)0;                           \
        for (int64_t i = 0; i < g->kh; i++) {                                                      \
          const int64_t iy = y * g->sh - g->ph + i * g->dh;                                        \
          if (iy < 0 || iy >= g->H) continue;                                                      \
          for (int64_t j = 0; j < g->kw; j++) {                                                    \
            const int64_t ix = xo * g->sw - g->pw + j * g->dw;                                     \
            if (ix < 0 || ix >= g->W) continue;                                                    \
            const T *restrict s = x + n * g->xs[0] + iy * g->xs[2] + ix * g->xs[3];                \
            const T *restrict wr = wt + (i * g->kw + j) * O;                                       \
            const int64_t cs = g->xs[1];                                                           \
            if (m == 1)                                                                            \
              for (int64_t o = 0; o < O; o++) d[o * L] += wr[o] * s[o * cs];                      \
            else                                                                                   \
              for (int64_t o = 0; o < O; o++) d[o * L] += wr[o] * s[(o / m) * cs];                 \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    free(wt);                                                                                      \
    return true;                                                                                   \
  }                                                                                                \
  /* grad_input (N, C, H, W) contiguous from go (N, O, Ho, Wo) and w (O, 1, kh, kw) contiguous */ \
  static bool NAME##_bw_input(const geo *g, int64_t O, const T *go, const T *w, T *gi) {           \
    const int64_t m = O / g->C, L = g->Ho * g->Wo, HW = g->H * g->W, kk = g->kh * g->kw;           \
    const int64_t ws[4] = {kk, kk, g->kw, 1};                                                      \
    DW_TRANSPOSED(T, wt, w, ws, O, g)                                                              \
    if (!wt) return false;                                                                         \
    PARALLEL_IF(g->N * O * L * kk)                                                                 \
    for (int64_t n = 0; n < g->N; n++) {                                                           \
      T *restrict gin = gi + n * g->C * HW;                                                        \
      memset(gin, 0, sizeof(T) * (size_t)(g->C * HW));                                             \
      for (int64_t p = 0; p < L; p++) {                                                            \
        const int64_t y = p / g->Wo, xo = p % g->Wo;                                               \
        const T *restrict s = go + n * O * L + p;                                                  \
        for (int64_t i = 0; i < g->kh; i++) {                                                      \
          const int64_t iy = y * g->sh - g->ph + i * g->dh;                                        \
          if (iy < 0 || iy >= g->H) continue;                                                      \
          for (int64_t j = 0; j < g->kw; j++) {                                                    \
            const int64_t ix = xo * g->sw - g->pw + j * g->dw;                                     \
            if (ix < 0 || ix >= g->W) continue;                                                    \
            T *restrict d = gin + iy * g->W + ix;                                                  \
            const T *restrict wr = wt + (i * g->kw + j) * O;                                       \
            if (m == 1)                                                                            \
              for (int64_t o = 0; o < O; o++) d[o * HW] += wr[o] * s[o * L];                       \
            else                                                                                   \
              for (int64_t o = 0; o < O; o++) d[(o / m) * HW] += wr[o] * s[o * L];                 \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    free(wt);                                                                                      \
    return true;                                                                                   \
  }                                                                                                \
  /* grad_weight (O, 1, kh, kw) contiguous: sums in double over the batch and pixels, channels   \
   * in blocks (one block per thread: no shared sums) */                                         \
  static bool NAME##_bw_weight(const geo *g, int64_t O, const T *go, const T *x, T *gw) {          \
    const int64_t m = O / g->C, L = g->Ho * g->Wo, kk = g->kh * g->kw, BLK = 64;                   \
    double *acc = calloc((size_t)(kk * O), sizeof(double)); /* (kk, O) */                          \
    if (!acc) return false;                                                                        \
    const int64_t nblk = (O + BLK - 1) / BLK;                                                      \
    PARALLEL_IF(g->N * O * L * kk)                                                                 \
    for (int64_t blk = 0; blk < nblk; blk++) {                                                     \
      const int64_t o0 = blk * BLK, o1 = o0 + BLK < O ? o0 + BLK : O;                              \
      for (int64_t n = 0; n < g->N; n++)                                                           \
        for (int64_t p = 0; p < L; p++) {                                                          \
          const int64_t y = p / g->Wo, xo = p % g->Wo;                                             \
          const T *restrict s = go + n * O * L + p;                                                \
          for (int64_t i = 0; i < g->kh; i++) {                                                    \
            const int64_t iy = y * g->sh - g->ph + i * g->dh;                                      \
            if (iy < 0 || iy >= g->H) continue;                                                    \
            for (int64_t j = 0; j < g->kw; j++) {                                                  \
              const int64_t ix = xo * g->sw - g->pw + j * g->dw;                                   \
              if (ix < 0 || ix >= g->W) continue;                                                  \
              const T *restrict r = x + n * g->xs[0] + iy * g->xs[2] + ix * g->xs[3];              \
              double *restrict a = acc + (i * g->kw + j) * O;                                      \
              const int64_t cs = g->xs[1];                                                         \
              for (int64_t o = o0; o < o1; o++) a[o] += (double)s[o * L] * (double)r[(o / m) * cs]; \
            }                                                                                      \
          }                                                                                        \
        }                                                                                          \
    }                                                                                              \
    for (int64_t o = 0; o < O; o++)                                                                \
      for (int64_t t = 0; t < kk; t++) gw[o * kk + t] = (T)acc[t * O + o];                         \
    free(acc);                                                                                     \
    return true;                                                                                   \
  }

DEPTHWISE_TINY(depthwise_tiny_f32, float)
DEPTHWISE_TINY(depthwise_tiny_f64, double)

/* ---- depthwise convolution ------------------------------------------------ */

/* One output plane at a time: for each kernel tap, a row-wise multiply-add
 * over the output columns whose input column is in bounds (unit stride:
 * a loop the compiler vectorises).
 * x is (N, C, H, W) with element strides g->xs; w is (O, 1, kh, kw) with strides ws;
 * b is (O) with stride bs, or NULL; out is (N, O, Ho, Wo) contiguous. O = C*m: output
 * channel o reads input channel o / m. */
#define DEPTHWISE(NAME, T)                                                                         \
  /* Stride 1: the plane zero-padded to (Hp, Wp) once, then each tap is ONE multiply-add     \
   * over the whole (Ho, Wp) output (columns past Wo computed and dropped): long loops the   \
   * compiler vectorises, instead of Ho*kh*kw rows of Wo. False (nothing written) when the   \
   * buffer cannot be allocated. */                                                          \
  static bool NAME##_padded(const geo *g, const T *src, const T *w, const int64_t *ws, T bias, T *dst) { \
    const int64_t Hp = g->H + 2 * g->ph, Wp = g->W + 2 * g->pw, slack = (g->kw - 1) * g->dw;       \
    const int64_t np = Hp * Wp + slack, no = g->Ho * Wp;                                           \
    T *ip = malloc(sizeof(T) * (size_t)(np + no));                                                 \
    if (!ip) return false;                                                                         \
    T *restrict op = ip + np;                                                                      \
    memset(ip, 0, sizeof(T) * (size_t)np);                                                         \
    for (int64_t y = 0; y < g->H; y++)                                                             \
      for (int64_t x0 = 0; x0 < g->W; x0++) ip[(y + g->ph) * Wp + x0 + g->pw] = src[y * g->xs[2] + x0 * g->xs[3]]; \
    for (int64_t k = 0; k < no; k++) op[k] = bias;                                                 \
    for (int64_t i = 0; i < g->kh; i++)                                                            \
      for (int64_t j = 0; j < g->kw; j++) {                                                        \
        const T wv = w[i * ws[2] + j * ws[3]];                                                     \
        const T *restrict s = ip + i * g->dh * Wp + j * g->dw; /* reads end before np */          \
        for (int64_t k = 0; k < no; k++) op[k] += wv * s[k];                                       \
      }                                                                                            \
    for (int64_t y = 0; y < g->Ho; y++) memcpy(dst + y * g->Wo, op + y * Wp, sizeof(T) * (size_t)g->Wo); \
    free(ip);                                                                                      \
    return true;                                                                                   \
  }                                                                                                \
  static void NAME(const geo *g, int64_t O, const T *x, const T *w, const int64_t *ws, const T *b, \
                   int64_t bs, T *out) {                                                           \
    const int64_t planes = g->N * O, m = O / g->C, L = g->Ho * g->Wo;                              \
    PARALLEL_IF(planes * L * g->kh * g->kw)                                                        \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const int64_t n = pl / O, o = pl % O;                                                        \
      const T *src = x + n * g->xs[0] + (o / m) * g->xs[1];                                        \
      T *dst = out + pl * L;                                                                       \
      const T bias = b ? b[o * bs] : (T)0;                                                         \
      if (g->sh == 1 && g->sw == 1 && NAME##_padded(g, src, w + o * ws[0], ws, bias, dst)) continue; \
      for (int64_t k = 0; k < L; k++) dst[k] = bias;                                               \
      for (int64_t i = 0; i < g->kh; i++)                                                          \
        for (int64_t j = 0; j < g->kw; j++) {                                                      \
          const T wv = w[o * ws[0] + i * ws[2] + j * ws[3]];                                       \
          int64_t lo, hi;                                                                          \
          valid_range(j * g->dw, g->sw, g->pw, g->W, g->Wo, &lo, &hi);                             \
          const int64_t step = g->sw * g->xs[3];                                                   \
          for (int64_t y = 0; y < g->Ho; y++) {                                                    \
            int64_t iy = y * g->sh - g->ph + i * g->dh;                                            \
            if (iy < 0 || iy >= g->H) continue;                                                    \
            const T *s = src + iy * g->xs[2];                                                      \
            const int64_t base = (j * g->dw - g->pw) * g->xs[3];                                   \
            T *d = dst + y * g->Wo;                                                                \
            if (step == 1)                                                                         \
              for (int64_t x0 = lo; x0 < hi; x0++) d[x0] += wv * s[base + x0];                     \
            else                                                                                   \
              for (int64_t x0 = lo; x0 < hi; x0++) d[x0] += wv * s[base + x0 * step];              \
          }                                                                                        \
        }                                                                                          \
    }                                                                                              \
  }

DEPTHWISE(depthwise_f32, float)
DEPTHWISE(depthwise_f64, double)

static ts_status k_conv2d_depthwise(const ts_call *c) {
  geo g;
  const ts_tensor *x = c->in[0], *w = c->in[1], *b = c->nin > 2 ? c->in[2] : NULL;
  ts_tensor *o = c->out[0];
  geo_image(&g, x, o);
  geo_pairs(&g, ts_pack2(w->sizes[2], w->sizes[3]), c->i[0], c->i[1], c->i[2]);
  int64_t bs = b ? b->strides[0] : 0;
  const bool tiny = g.Ho * g.Wo <= DEPTHWISE_TINY_L;
  if (tiny && x->dtype == TS_FLOAT32 &&
      depthwise_tiny_f32_fwd(&g, o->sizes[1], ts_data(x), ts_data(w), w->strides, b ? ts_data(b) : NULL, bs, ts_data(o)))
    return ts_check_interrupt();
  if (tiny && x->dtype == TS_FLOAT64 &&
      depthwise_tiny_f64_fwd(&g, o->sizes[1], ts_data(x), ts_data(w), w->strides, b ? ts_data(b) : NULL, bs, ts_data(o)))
    return ts_check_interrupt();
  if (x->dtype == TS_FLOAT32)
    depthwise_f32(&g, o->sizes[1], ts_data(x), ts_data(w), w->strides, b ? ts_data(b) : NULL, bs, ts_data(o));
  else
    depthwise_f64(&g, o->sizes[1], ts_data(x), ts_data(w), w->strides, b ? ts_data(b) : NULL, bs, ts_data(o));
  return ts_check_interrupt();
}

/* grad_input: one input plane per iteration, gathering from its m output
 * channels (so no two threads write one plane); grad_weight: one output
 * channel per iteration, summing over the batch. go, w, gi, gw contiguous.
 * go is (N, O, Ho, Wo); x is (N, C, H, W) with strides g->xs; w and gw are (O, 1, kh, kw);
 * gi is (N, C, H, W), O = C*m as in the forward. */
#define DEPTHWISE_BW(NAME, T)                                                                      \
  static void NAME(const geo *g, int64_t O, const T *go, const T *x, const T *w, T *gi, T *gw) {   \
    const int64_t m = O / g->C, L = g->Ho * g->Wo, HW = g->H * g->W, kk = g->kh * g->kw;           \
    if (gi) {                                                                                      \
      PARALLEL_IF(g->N * O * L * kk)                                                               \
      for (int64_t pl = 0; pl < g->N * g->C; pl++) {                                               \
        const int64_t n = pl / g->C, c = pl % g->C;                                                \
        T *dst = gi + pl * HW;                                                                     \
        memset(dst, 0, sizeof(T) * (size_t)HW);                                                    \
        for (int64_t o = c * m; o < (c + 1) * m; o++) {                                            \
          const T *src = go + (n * O + o) * L;                                                     \
          for (int64_t i = 0; i < g->kh; i++)                                                      \
            for (int64_t j = 0; j < g->kw; j++) {                                                  \
              const T wv = w[o * kk + i * g->kw + j];                                              \
              int64_t lo, hi;                                                                      \
              valid_range(j * g->dw, g->sw, g->pw, g->W, g->Wo, &lo, &hi);                         \
              for (int64_t y = 0; y < g->Ho; y++) {                                                \
                int64_t iy = y * g->sh - g->ph + i * g->dh;                                        \
                if (iy < 0 || iy >= g->H) continue;                                                \
                const int64_t base = iy * g->W + (j * g->dw - g->pw);                              \
                const T *s = src + y * g->Wo;                                                      \
                for (int64_t x0 = lo; x0 < hi; x0++) dst[base + x0 * g->sw] += wv * s[x0];         \
              }                                                                                    \
            }                                                                                      \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    if (gw) {                                                                                      \
      PARALLEL_IF(g->N * O * L * kk)                                                               \
      for (int64_t o = 0; o < O; o++) {                                                            \
        for (int64_t t = 0; t < kk; t++) {                                                         \
          const int64_t i = t / g->kw, j = t % g->kw;                                              \
          int64_t lo, hi;                                                                          \
          valid_range(j * g->dw, g->sw, g->pw, g->W, g->Wo, &lo, &hi);                             \
          double acc = 0;                                                                          \
          for (int64_t n = 0; n < g->N; n++) {                                                     \
            const T *src = go + (n * O + o) * L, *img = x + n * g->xs[0] + (o / m) * g->xs[1];     \
            for (int64_t y = 0; y < g->Ho; y++) {                                                  \
              int64_t iy = y * g->sh - g->ph + i * g->dh;                                          \
              if (iy < 0 || iy >= g->H) continue;                                                  \
              const int64_t base = iy * g->xs[2] + (j * g->dw - g->pw) * g->xs[3];                 \
              const int64_t step = g->sw * g->xs[3];                                               \
              const T *s = src + y * g->Wo;                                                        \
              T part = 0;                                                                          \
              if (step == 1) { /* simd: the row's dot product may be reassociated (vectorised) */  \
                const T *r = img + base;                                                           \
                _Pragma("omp simd reduction(+ : part)")                                            \
                for (int64_t x0 = lo; x0 < hi; x0++) part += s[x0] * r[x0];                        \
              } else                                                                               \
                for (int64_t x0 = lo; x0 < hi; x0++) part += s[x0] * img[base + x0 * step];        \
              acc += part;                                                                         \
            }                                                                                      \
          }                                                                                        \
          gw[o * kk + t] = (T)acc;                                                                 \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

DEPTHWISE_BW(depthwise_bw_f32, float)
DEPTHWISE_BW(depthwise_bw_f64, double)

static ts_status k_conv2d_depthwise_backward(const ts_call *c) {
  geo g;
  const ts_tensor *go = c->in[0], *x = c->in[1], *w = c->in[2];
  geo_image(&g, x, go);
  geo_pairs(&g, ts_pack2(w->sizes[2], w->sizes[3]), c->i[0], c->i[1], c->i[2]);
  ts_tensor *gi = c->out[0], *gw = c->out[1];
  const int64_t O = go->sizes[1];
  if (g.Ho * g.Wo <= DEPTHWISE_TINY_L) { /* what the tiny kernels cannot allocate for falls through */
    bool f32 = x->dtype == TS_FLOAT32;
    if (gi && (f32 ? depthwise_tiny_f32_bw_input(&g, O, ts_data(go), ts_data(w), ts_data(gi))
                   : depthwise_tiny_f64_bw_input(&g, O, ts_data(go), ts_data(w), ts_data(gi))))
      gi = NULL;
    if (gw && (f32 ? depthwise_tiny_f32_bw_weight(&g, O, ts_data(go), ts_data(x), ts_data(gw))
                   : depthwise_tiny_f64_bw_weight(&g, O, ts_data(go), ts_data(x), ts_data(gw))))
      gw = NULL;
    if (!gi && !gw) return ts_check_interrupt();
  }
  if (x->dtype == TS_FLOAT32)
    depthwise_bw_f32(&g, go->sizes[1], ts_data(go), ts_data(x), ts_data(w), gi ? ts_data(gi) : NULL,
                     gw ? ts_data(gw) : NULL);
  else
    depthwise_bw_f64(&g, go->sizes[1], ts_data(go), ts_data(x), ts_data(w), gi ? ts_data(gi) : NULL,
                     gw ? ts_data(gw) : NULL);
  return ts_check_interrupt();
}

/* ---- pooling ----------------------------------------------------------------- */

/* One output row of a 2x2, stride-2 max pool: rows r0 and r1 of the input, flat input
 * index base of r0[0], row length W. NaN wins, the first maximum on ties (as torch).
 * Written for the vectoriser: the winner of each window is a code 0-3 from selects
 * (which element wins is a coin toss on real activations: branches mispredicted half
 * the time, and a scalar select chain ran at 25 cycles per window), turned into flat
 * indices in a second loop. */
#define MAXPOOL_ROW(NAME, T)                                                                       \
  static void NAME(const T *restrict r0, const T *restrict r1, int64_t Wo, int64_t base, int64_t W, \
                   T *restrict o, int64_t *restrict oi) {                                          \
    int32_t code[256];                                                                             \
    for (int64_t x0 = 0; x0 < Wo; x0 += 256) {                                                     \
      const int64_t n = Wo - x0 < 256 ? Wo - x0 : 256;                                             \
      const T *a = r0 + 2 * x0, *c = r1 + 2 * x0;                                                  \
      for (int64_t j = 0; j < n; j++) {                                                            \
        T best = a[2 * j], v;                                                                      \
        int32_t k = 0, t;                                                                          \
        v = a[2 * j + 1], t = (v > best) | (v != v), best = t ? v : best, k = t ? 1 : k;           \
        v = c[2 * j], t = (v > best) | (v != v), best = t ? v : best, k = t ? 2 : k;               \
        v = c[2 * j + 1], t = (v > best) | (v != v), best = t ? v : best, k = t ? 3 : k;           \
        o[x0 + j] = best, code[j] = k;                                                             \
      }                                                                                            \
      for (int64_t j = 0; j < n; j++)                                                              \
        oi[x0 + j] = base + 2 * (x0 + j) + (code[j] & 1) + (code[j] >> 1) * W;                     \
    }                                                                                              \
  }
MAXPOOL_ROW(maxpool2x2_row_f32, float)
MAXPOOL_ROW(maxpool2x2_row_f64, double)

#define MAXPOOL(NAME, T, ROW)                                                                         \
  static void NAME(const geo *g, const T *x, T *out, int64_t *idx) {                               \
    const int64_t planes = g->N * g->C, L = g->Ho * g->Wo;                                         \
    const bool fast2 = g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 &&       \
                       g->pw == 0 && g->dh == 1 && g->dw == 1 && g->xs[3] == 1 &&                  \
                       2 * g->Ho <= g->H && 2 * g->Wo <= g->W; /* ceil_mode may add a partial window */ \
    PARALLEL_IF(planes * L * g->kh * g->kw)                                                        \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const T *src = x + (pl / g->C) * g->xs[0] + (pl % g->C) * g->xs[1];                          \
      if (fast2) { /* 2x2, stride 2, no padding, unit dilation, rows contiguous: no bounds checks */ \
        for (int64_t y = 0; y < g->Ho; y++) {                                                      \
          const T *r0 = src + 2 * y * g->xs[2], *r1 = r0 + g->xs[2];                               \
          ROW(r0, r1, g->Wo, 2 * y * g->W, g->W, out + pl * L + y * g->Wo, idx + pl * L + y * g->Wo); \
        }                                                                                          \
        continue;                                                                                  \
      }                                                                                            \
      for (int64_t y = 0; y < g->Ho; y++)                                                          \
        for (int64_t x0 = 0; x0 < g->Wo; x0++) {                                                   \
          T best = 0;                                                                              \
          int64_t bi = -1;                                                                         \
          for (int64_t i = 0; i < g->kh; i++) {                                                    \
            int64_t iy = y * g->sh - g->ph + i * g->dh;                                            \
            if (iy < 0 || iy >= g->H) continue;                                                    \
            for (int64_t j = 0; j < g->kw; j++) {                                                  \
              int64_t ix = x0 * g->sw - g->pw + j * g->dw;                                         \
              if (ix < 0 || ix >= g->W) continue;                                                  \
              T v = src[iy * g->xs[2] + ix * g->xs[3]];                                            \
              if (bi < 0 || v > best || isnan(v)) best = v, bi = iy * g->W + ix; /* as torch */      \
            }                                                                                      \
          }                                                                                        \
          out[pl * L + y * g->Wo + x0] = best;                                                     \
          idx[pl * L + y * g->Wo + x0] = bi;                                                       \
        }                                                                                          \
    }                                                                                              \
  }

MAXPOOL(maxpool_f32, float, maxpool2x2_row_f32)
MAXPOOL(maxpool_f64, double, maxpool2x2_row_f64)

static ts_status k_max_pool2d(const ts_call *c) {
  geo g;
  const ts_tensor *x = c->in[0];
  geo_image(&g, x, c->out[0]);
  geo_pairs(&g, c->i[0], c->i[1], c->i[2], c->i[3]);
  if (x->dtype == TS_FLOAT32) maxpool_f32(&g, ts_data(x), ts_data(c->out[0]), ts_data(c->out[1]));
  else maxpool_f64(&g, ts_data(x), ts_data(c->out[0]), ts_data(c->out[1]));
  return ts_check_interrupt();
}

/* torch's avg_pool2d window for output (y, x): its clipped bounds and divisor. */
static inline void avg_window(const geo *g, bool count_pad, int64_t y, int64_t x0, int64_t *h0, int64_t *h1,
                              int64_t *w0, int64_t *w1, int64_t *div) {
  int64_t hs = y * g->sh - g->ph, ws = x0 * g->sw - g->pw;
  int64_t he = hs + g->kh, we = ws + g->kw;
  if (he > g->H + g->ph) he = g->H + g->ph;
  if (we > g->W + g->pw) we = g->W + g->pw;
  int64_t pool = (he - hs) * (we - ws);
  if (hs < 0) hs = 0;
  if (ws < 0) ws = 0;
  if (he > g->H) he = g->H;
  if (we > g->W) we = g->W;
  *h0 = hs, *h1 = he, *w0 = ws, *w1 = we;
  *div = count_pad ? pool : (he - hs) * (we - ws);
}

#define AVGPOOL(NAME, NAME_BW, T)                                                                  \
  static void NAME(const geo *g, bool cp, const T *x, T *out) {                                    \
    const int64_t planes = g->N * g->C, L = g->Ho * g->Wo;                                         \
    PARALLEL_IF(planes * L * g->kh * g->kw)                                                        \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const T *src = x + (pl / g->C) * g->xs[0] + (pl % g->C) * g->xs[1];                          \
      for (int64_t y = 0; y < g->Ho; y++)                                                          \
        for (int64_t x0 = 0; x0 < g->Wo; x0++) {                                                   \
          int64_t h0, h1, w0, w1, div;                                                             \
          avg_window(g, cp, y, x0, &h0, &h1, &w0, &w1, &div);                                      \
          double s = 0;                                                                            \
          for (int64_t i = h0; i < h1; i++)                                                        \
            for (int64_t j = w0; j < w1; j++) s += src[i * g->xs[2] + j * g->xs[3]];               \
          out[pl * L + y * g->Wo + x0] = (T)(div > 0 ? s / (double)div : NAN);                     \
        }                                                                                          \
    }                                                                                              \
  }                                                                                                \
  /* gs: strides of the (N, C, Ho, Wo) gradient; out (N, C, H, W) contiguous */                   \
  static void NAME_BW(const geo *g, bool cp, const T *go, const int64_t *gs, T *out) {             \
    const int64_t planes = g->N * g->C, HW = g->H * g->W;                                          \
    PARALLEL_IF(planes * g->Ho * g->Wo * g->kh * g->kw)                                            \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const T *src = go + (pl / g->C) * gs[0] + (pl % g->C) * gs[1];                               \
      T *dst = out + pl * HW;                                                                      \
      memset(dst, 0, sizeof(T) * (size_t)HW);                                                      \
      for (int64_t y = 0; y < g->Ho; y++)                                                          \
        for (int64_t x0 = 0; x0 < g->Wo; x0++) {                                                   \
          int64_t h0, h1, w0, w1, div;                                                             \
          avg_window(g, cp, y, x0, &h0, &h1, &w0, &w1, &div);                                      \
          T v = (T)(src[y * gs[2] + x0 * gs[3]] / (double)div);                                    \
          for (int64_t i = h0; i < h1; i++)                                                        \
            for (int64_t j = w0; j < w1; j++) dst[i * g->W + j] += v;                              \
        }                                                                                          \
    }                                                                                              \
  }

AVGPOOL(avgpool_f32, avgpool_bw_f32, float)
AVGPOOL(avgpool_f64, avgpool_bw_f64, double)

static ts_status k_avg_pool2d(const ts_call *c) {
  geo g;
  const ts_tensor *x = c->in[0];
  geo_image(&g, x, c->out[0]);
  geo_pairs(&g, c->i[0], c->i[1], c->i[2], ts_pack2(1, 1));
  if (x->dtype == TS_FLOAT32) avgpool_f32(&g, c->i[3] != 0, ts_data(x), ts_data(c->out[0]));
  else avgpool_f64(&g, c->i[3] != 0, ts_data(x), ts_data(c->out[0]));
  return ts_check_interrupt();
}

static ts_status k_avg_pool2d_backward(const ts_call *c) {
  geo g;
  const ts_tensor *go = c->in[0];
  ts_tensor *o = c->out[0];
  geo_image(&g, o, go);
  geo_pairs(&g, c->i[0], c->i[1], c->i[2], ts_pack2(1, 1));
  if (o->dtype == TS_FLOAT32) avgpool_bw_f32(&g, c->i[3] != 0, ts_data(go), go->strides, ts_data(o));
  else avgpool_bw_f64(&g, c->i[3] != 0, ts_data(go), go->strides, ts_data(o));
  return ts_check_interrupt();
}

/* torch's adaptive pooling bounds: [floor(i*n/o), ceil((i+1)*n/o)) */
static inline int64_t ad_start(int64_t i, int64_t o, int64_t n) { return (i * n) / o; }
static inline int64_t ad_end(int64_t i, int64_t o, int64_t n) { return ((i + 1) * n + o - 1) / o; }

/* forward: x is (N, C, H, W) with strides g->xs, out (N, C, Ho, Wo) contiguous;
 * backward: go is (N, C, Ho, Wo) with strides gs, out (N, C, H, W) contiguous, one
 * plane (n, c) per iteration, so no two threads write one cell */
/* Output 1x1 (global average pooling, a squeeze-excitation's squeeze) has its own loops:
 * one plane sum each, vectorised along rows, with no window bounds to compute per plane
 * (the general loops spent their time on those when planes are 2x2 to 8x8). */
#define ADAPTIVE(NAME, NAME_BW, T)                                                                 \
  static void NAME##_global(const geo *g, const T *x, T *out) {                                    \
    const int64_t planes = g->N * g->C;                                                            \
    const double inv = 1.0 / (double)(g->H * g->W);                                                \
    PARALLEL_IF(planes * g->H * g->W)                                                              \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const T *src = x + (pl / g->C) * g->xs[0] + (pl % g->C) * g->xs[1];                          \
      double s = 0;                                                                                \
      for (int64_t i = 0; i < g->H; i++) {                                                         \
        const T *r = src + i * g->xs[2];                                                           \
        if (g->xs[3] == 1) {                                                                       \
          _Pragma("omp simd reduction(+ : s)")                                                     \
          for (int64_t j = 0; j < g->W; j++) s += (double)r[j];                                    \
        } else                                                                                     \
          for (int64_t j = 0; j < g->W; j++) s += (double)r[j * g->xs[3]];                         \
      }                                                                                            \
      out[pl] = (T)(s * inv);                                                                      \
    }                                                                                              \
  }                                                                                                \
  static void NAME(const geo *g, const T *x, T *out) {                                             \
    if (g->Ho == 1 && g->Wo == 1) {                                                                \
      NAME##_global(g, x, out);                                                                    \
      return;                                                                                      \
    }                                                                                              \
    const int64_t planes = g->N * g->C, L = g->Ho * g->Wo;                                         \
    PARALLEL_IF(planes * g->H * g->W)                                                              \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const T *src = x + (pl / g->C) * g->xs[0] + (pl % g->C) * g->xs[1];                          \
      for (int64_t y = 0; y < g->Ho; y++) {                                                        \
        int64_t h0 = ad_start(y, g->Ho, g->H), h1 = ad_end(y, g->Ho, g->H);                        \
        for (int64_t x0 = 0; x0 < g->Wo; x0++) {                                                   \
          int64_t w0 = ad_start(x0, g->Wo, g->W), w1 = ad_end(x0, g->Wo, g->W);                    \
          double s = 0;                                                                            \
          for (int64_t i = h0; i < h1; i++)                                                        \
            for (int64_t j = w0; j < w1; j++) s += src[i * g->xs[2] + j * g->xs[3]];               \
          out[pl * L + y * g->Wo + x0] = (T)(s / (double)((h1 - h0) * (w1 - w0)));                 \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  static void NAME_BW(const geo *g, const T *go, const int64_t *gs, T *out) {                      \
    const int64_t planes = g->N * g->C, HW = g->H * g->W;                                          \
    PARALLEL_IF(planes * HW)                                                                       \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const T *src = go + (pl / g->C) * gs[0] + (pl % g->C) * gs[1];                               \
      T *dst = out + pl * HW;                                                                      \
      if (g->Ho == 1 && g->Wo == 1) { /* global: the plane is one value */                        \
        const T v = (T)(src[0] / (double)HW);                                                      \
        for (int64_t k = 0; k < HW; k++) dst[k] = v;                                               \
        continue;                                                                                  \
      }                                                                                            \
      memset(dst, 0, sizeof(T) * (size_t)HW);                                                      \
      for (int64_t y = 0; y < g->Ho; y++) {                                                        \
        int64_t h0 = ad_start(y, g->Ho, g->H), h1 = ad_end(y, g->Ho, g->H);                        \
        for (int64_t x0 = 0; x0 < g->Wo; x0++) {                                                   \
          int64_t w0 = ad_start(x0, g->Wo, g->W), w1 = ad_end(x0, g->Wo, g->W);                    \
          T v = (T)(src[y * gs[2] + x0 * gs[3]] / (double)((h1 - h0) * (w1 - w0)));                \
          for (int64_t i = h0; i < h1; i++)                                                        \
            for (int64_t j = w0; j < w1; j++) dst[i * g->W + j] += v;                              \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

ADAPTIVE(adaptive_f32, adaptive_bw_f32, float)
ADAPTIVE(adaptive_f64, adaptive_bw_f64, double)

static ts_status k_adaptive_avg_pool2d(const ts_call *c) {
  geo g;
  const ts_tensor *x = c->in[0];
  geo_image(&g, x, c->out[0]);
  if (x->dtype == TS_FLOAT32) adaptive_f32(&g, ts_data(x), ts_data(c->out[0]));
  else adaptive_f64(&g, ts_data(x), ts_data(c->out[0]));
  return ts_check_interrupt();
}

static ts_status k_adaptive_avg_pool2d_backward(const ts_call *c) {
  geo g;
  const ts_tensor *go = c->in[0];
  ts_tensor *o = c->out[0];
  geo_image(&g, o, go);
  if (o->dtype == TS_FLOAT32) adaptive_bw_f32(&g, ts_data(go), go->strides, ts_data(o));
  else adaptive_bw_f64(&g, ts_data(go), go->strides, ts_data(o));
  return ts_check_interrupt();
}

/* adaptive max pool: x (N, C, H, W) with strides g->xs, out and idx (N, C, Ho, Wo)
 * contiguous; the first maximum of each window (NaN wins), as torch's */
#define ADAPTIVE_MAX(NAME, T)                                                                      \
  static void NAME(const geo *g, const T *x, T *out, int64_t *idx) {                               \
    const int64_t planes = g->N * g->C, L = g->Ho * g->Wo;                                         \
    PARALLEL_IF(planes * g->H * g->W)                                                              \
    for (int64_t pl = 0; pl < planes; pl++) {                                                      \
      const T *src = x + (pl / g->C) * g->xs[0] + (pl % g->C) * g->xs[1];                          \
      for (int64_t y = 0; y < g->Ho; y++) {                                                        \
        const int64_t h0 = ad_start(y, g->Ho, g->H), h1 = ad_end(y, g->Ho, g->H);                  \
        for (int64_t x0 = 0; x0 < g->Wo; x0++) {                                                   \
          const int64_t w0 = ad_start(x0, g->Wo, g->W), w1 = ad_end(x0, g->Wo, g->W);              \
          T best = 0;                                                                              \
          int64_t bi = -1;                                                                         \
          for (int64_t i = h0; i < h1; i++)                                                        \
            for (int64_t j = w0; j < w1; j++) {                                                    \
              const T v = src[i * g->xs[2] + j * g->xs[3]];                                        \
              if (bi < 0 || v > best || isnan(v)) best = v, bi = i * g->W + j;                     \
            }                                                                                      \
          out[pl * L + y * g->Wo + x0] = best;                                                     \
          idx[pl * L + y * g->Wo + x0] = bi;                                                       \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

ADAPTIVE_MAX(adaptive_max_f32, float)
ADAPTIVE_MAX(adaptive_max_f64, double)

static ts_status k_adaptive_max_pool2d(const ts_call *c) {
  geo g;
  const ts_tensor *x = c->in[0];
  geo_image(&g, x, c->out[0]);
  if (x->dtype == TS_FLOAT32) adaptive_max_f32(&g, ts_data(x), ts_data(c->out[0]), ts_data(c->out[1]));
  else adaptive_max_f64(&g, ts_data(x), ts_data(c->out[0]), ts_data(c->out[1]));
  return ts_check_interrupt();
}

/* ---- batch norm ------------------------------------------------------------- */

/* Per channel c the planes x[n, c, :] of S elements; sums in double, one
 * channel per thread for the reductions, (n, c) planes for the element passes.
 * x, y, go, gx are (N, C, S) contiguous; mean, var, inv, w, b, sg, sgx are (C). */
#define BATCHNORM(SUF, T)                                                                          \
  static void bn_stats_##SUF(int64_t N, int64_t C, int64_t S, const T *x, T *mean, T *var) {       \
    _Pragma("omp parallel for schedule(dynamic, 1) if (N * C * S > TS_PARALLEL_GRAIN)")            \
    for (int64_t c = 0; c < C; c++) {                                                              \
      double s = 0;                                                                                \
      for (int64_t n = 0; n < N; n++) {                                                            \
        const T *p = x + (n * C + c) * S;                                                          \
        double dp = 0;                                                                             \
        _Pragma("omp simd reduction(+ : dp)")                                                      \
        for (int64_t k = 0; k < S; k++) dp += p[k];                                                \
        s += dp;                                                                                   \
      }                                                                                            \
      const double m = N * S > 0 ? s / (double)(N * S) : NAN;                                      \
      double v = 0;                                                                                \
      for (int64_t n = 0; n < N; n++) {                                                            \
        const T *p = x + (n * C + c) * S;                                                          \
        double dv = 0;                                                                             \
        _Pragma("omp simd reduction(+ : dv)")                                                      \
        for (int64_t k = 0; k < S; k++) {                                                          \
          double d = (double)p[k] - m;                                                             \
          dv += d * d;                                                                             \
        }                                                                                          \
        v += dv;                                                                                   \
      }                                                                                            \
      mean[c] = (T)m, var[c] = (T)(N * S > 0 ? v / (double)(N * S) : NAN);                         \
    }                                                                                              \
  }                                                                                                \
  static void bn_elemt_##SUF(int64_t N, int64_t C, int64_t S, const T *x, const T *mean,           \
                             const T *inv, const T *w, const T *b, T *y) {                         \
    _Pragma("omp parallel for schedule(static) if (N * C * S > TS_PARALLEL_GRAIN)")                \
    for (int64_t pl = 0; pl < N * C; pl++) {                                                       \
      const int64_t c = pl % C;                                                                    \
      const T sc = inv[c] * w[c], sh = b[c] - mean[c] * sc;                                        \
      const T *p = x + pl * S;                                                                     \
      T *q = y + pl * S;                                                                           \
      for (int64_t k = 0; k < S; k++) q[k] = p[k] * sc + sh;                                       \
    }                                                                                              \
  }                                                                                                \
  static void bn_bw_reduce_##SUF(int64_t N, int64_t C, int64_t S, const T *go, const T *x,         \
                                 const T *mean, const T *inv, T *sg, T *sgx) {                     \
    _Pragma("omp parallel for schedule(dynamic, 1) if (N * C * S > TS_PARALLEL_GRAIN)")            \
    for (int64_t c = 0; c < C; c++) {                                                              \
      double a = 0, d = 0;                                                                         \
      const T m = mean[c];                                                                         \
      for (int64_t n = 0; n < N; n++) {                                                            \
        const T *g = go + (n * C + c) * S, *p = x + (n * C + c) * S;                               \
        double pa = 0, pd = 0;                                                                     \
        _Pragma("omp simd reduction(+ : pa, pd)")                                                  \
        for (int64_t k = 0; k < S; k++) pa += g[k], pd += (double)g[k] * (double)(p[k] - m);       \
        a += pa, d += pd;                                                                          \
      }                                                                                            \
      sg[c] = (T)a, sgx[c] = (T)(d * (double)inv[c]);                                              \
    }                                                                                              \
  }                                                                                                \
  static void bn_bw_elemt_##SUF(int64_t N, int64_t C, int64_t S, const T *go, const T *x,          \
                                const T *mean, const T *inv, const T *w, const T *sg,              \
                                const T *sgx, double f, T *gx) {                                   \
    _Pragma("omp parallel for schedule(static) if (N * C * S > TS_PARALLEL_GRAIN)")                \
    for (int64_t pl = 0; pl < N * C; pl++) {                                                       \
      const int64_t c = pl % C;                                                                    \
      /* gx = a * go + b * (x - mean) + d */                                                       \
      const double iv = inv[c], k = (double)w[c] * iv;                                             \
      const T a = (T)k, bb = (T)(-k * iv * f * (double)sgx[c]), d = (T)(-k * f * (double)sg[c]);  \
      const T m = mean[c];                                                                         \
      const T *g = go + pl * S, *p = x + pl * S;                                                   \
      T *q = gx + pl * S;                                                                          \
      for (int64_t j = 0; j < S; j++) q[j] = a * g[j] + bb * (p[j] - m) + d;                       \
    }                                                                                              \
  }

BATCHNORM(f32, float)
BATCHNORM(f64, double)

/* ---- layer norm ---------------------------------------------------------------------
 * x and go are (M, D) contiguous, one row per normalised group; w, b, gw, gb (D); mean
 * and rstd (M). A row's statistics and its backward sums accumulate in double; the
 * elementwise formulas run in T with the row's constants rounded to T, as cuda/nn.cu. */

#define LAYERNORM(SUF, T)                                                                          \
  __attribute__((target_clones("avx2", "default"))) static void ln_row_##SUF(                     \
      int64_t D, const T *restrict x, const T *restrict w, const T *restrict b, double eps,        \
      T *restrict y, T *mean, T *rstd) {                                                           \
    double s = 0, v = 0;                                                                           \
    _Pragma("omp simd reduction(+ : s)")                                                           \
    for (int64_t j = 0; j < D; j++) s += x[j];                                                     \
    const double m = D > 0 ? s / (double)D : NAN;                                                  \
    _Pragma("omp simd reduction(+ : v)")                                                           \
    for (int64_t j = 0; j < D; j++) {                                                              \
      const double d = (double)x[j] - m;                                                           \
      v += d * d;                                                                                  \
    }                                                                                              \
    const T mt = (T)m, rt = (T)(1 / sqrt((D > 0 ? v / (double)D : NAN) + eps));                    \
    for (int64_t j = 0; j < D; j++) y[j] = (x[j] - mt) * rt * w[j] + b[j];                         \
    *mean = mt, *rstd = rt;                                                                        \
  }                                                                                                \
  static void ln_forward_##SUF(int64_t M, int64_t D, const T *x, const T *w, const T *b,           \
                               double eps, T *y, T *mean, T *rstd) {                               \
    _Pragma("omp parallel for schedule(static) if (M * D > TS_PARALLEL_GRAIN)")                    \
    for (int64_t i = 0; i < M; i++) ln_row_##SUF(D, x + i * D, w, b, eps, y + i * D, mean + i, rstd + i); \
  }                                                                                                \
  /* gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = go * w, for one row; adds go * xhat   \
   * and go into the row-sum accumulators aw, ab when they are not NULL */                        \
  __attribute__((target_clones("avx2", "default"))) static void ln_bw_row_##SUF(                  \
      int64_t D, const T *restrict go, const T *restrict x, T mt, T rt, const T *restrict w,       \
      T *restrict gx, double *restrict aw, double *restrict ab) {                                  \
    if (aw)                                                                                        \
      _Pragma("omp simd")                                                                          \
      for (int64_t j = 0; j < D; j++) aw[j] += (double)go[j] * (double)((x[j] - mt) * rt);         \
    if (ab)                                                                                        \
      _Pragma("omp simd")                                                                          \
      for (int64_t j = 0; j < D; j++) ab[j] += (double)go[j];                                      \
    if (!gx) return;                                                                               \
    double sg = 0, sgx = 0;                                                                        \
    _Pragma("omp simd reduction(+ : sg, sgx)")                                                     \
    for (int64_t j = 0; j < D; j++) {                                                              \
      const T g = go[j] * w[j];                                                                    \
      sg += (double)g, sgx += (double)g * (double)((x[j] - mt) * rt);                              \
    }                                                                                              \
    const T ca = (T)(sg / (double)D), cb = (T)(sgx / (double)D);                                   \
    for (int64_t j = 0; j < D; j++) gx[j] = rt * (go[j] * w[j] - ca - (x[j] - mt) * rt * cb);      \
  }                                                                                                \
  /* Rows split evenly over the threads; each thread sums its rows' gw, gb terms into its own    \
   * double accumulators (acc: threads x 2 x D), then the columns add them up. */                 \
  static void ln_backward_##SUF(int64_t M, int64_t D, const T *go, const T *x, const T *mean,      \
                                const T *rstd, const T *w, T *gx, T *gw, T *gb, double *acc,       \
                                int nt_max) {                                                      \
    int used = 1;                                                                                  \
    _Pragma("omp parallel num_threads(nt_max) if (nt_max > 1)")                                    \
    {                                                                                              \
      const int nt = omp_get_num_threads(), id = omp_get_thread_num();                             \
      if (id == 0) used = nt;                                                                      \
      double *base = acc ? acc + (size_t)id * 2 * (size_t)D : NULL;                               \
      double *aw = gw ? base : NULL, *ab = gb ? base + D : NULL;                                   \
      if (aw) memset(aw, 0, sizeof(double) * (size_t)D);                                          \
      if (ab) memset(ab, 0, sizeof(double) * (size_t)D);                                          \
      const int64_t lo = M * id / nt, hi = M * (id + 1) / nt;                                      \
      for (int64_t i = lo; i < hi; i++)                                                            \
        ln_bw_row_##SUF(D, go + i * D, x + i * D, mean[i], rstd[i], w, gx ? gx + i * D : NULL, aw, ab); \
    }                                                                                              \
    if (!gw && !gb) return;                                                                        \
    _Pragma("omp parallel for schedule(static) if ((int64_t)used * D > TS_PARALLEL_GRAIN)")        \
    for (int64_t j = 0; j < D; j++) {                                                              \
      double sw = 0, sb = 0;                                                                       \
      for (int t = 0; t < used; t++) {                                                             \
        const double *a = acc + (size_t)t * 2 * (size_t)D;                                         \
        sw += gw ? a[j] : 0, sb += gb ? a[D + j] : 0;                                              \
      }                                                                                            \
      if (gw) gw[j] = (T)sw;                                                                       \
      if (gb) gb[j] = (T)sb;                                                                       \
    }                                                                                              \
  }

LAYERNORM(f32, float)
LAYERNORM(f64, double)

/* x (N, C, S) from a tensor's sizes: S the product of the trailing dims */
static void bn_dims(const ts_tensor *x, int64_t *N, int64_t *C, int64_t *S) {
  *N = x->sizes[0], *C = x->sizes[1], *S = 1;
  for (int d = 2; d < x->ndim; d++) *S *= x->sizes[d];
}

#define D(t) ts_data(t)

static ts_status k_batch_norm_stats(const ts_call *c) {
  int64_t N, C, S;
  bn_dims(c->in[0], &N, &C, &S);
  if (c->in[0]->dtype == TS_FLOAT32) bn_stats_f32(N, C, S, D(c->in[0]), D(c->out[0]), D(c->out[1]));
  else bn_stats_f64(N, C, S, D(c->in[0]), D(c->out[0]), D(c->out[1]));
  return ts_check_interrupt();
}

static ts_status k_batch_norm_elemt(const ts_call *c) {
  int64_t N, C, S;
  bn_dims(c->in[0], &N, &C, &S);
  ts_tensor *const *in = c->in;
  if (in[0]->dtype == TS_FLOAT32) bn_elemt_f32(N, C, S, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(in[4]), D(c->out[0]));
  else bn_elemt_f64(N, C, S, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(in[4]), D(c->out[0]));
  return ts_check_interrupt();
}

static ts_status k_batch_norm_backward_reduce(const ts_call *c) {
  int64_t N, C, S;
  bn_dims(c->in[0], &N, &C, &S);
  ts_tensor *const *in = c->in;
  if (in[0]->dtype == TS_FLOAT32)
    bn_bw_reduce_f32(N, C, S, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(c->out[0]), D(c->out[1]));
  else bn_bw_reduce_f64(N, C, S, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(c->out[0]), D(c->out[1]));
  return ts_check_interrupt();
}

static ts_status k_batch_norm_backward_elemt(const ts_call *c) {
  int64_t N, C, S;
  bn_dims(c->in[0], &N, &C, &S);
  ts_tensor *const *in = c->in;
  if (in[0]->dtype == TS_FLOAT32)
    bn_bw_elemt_f32(N, C, S, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(in[4]), D(in[5]), D(in[6]), c->f[0],
                    D(c->out[0]));
  else
    bn_bw_elemt_f64(N, C, S, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(in[4]), D(in[5]), D(in[6]), c->f[0],
                    D(c->out[0]));
  return ts_check_interrupt();
}

/* in x, w, b; out y, mean, rstd; f[0] eps */
static ts_status k_layer_norm(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = ts_numel(c->out[1]), D = ts_numel(in[1]);
  if (in[0]->dtype == TS_FLOAT32)
    ln_forward_f32(M, D, D(in[0]), D(in[1]), D(in[2]), c->f[0], D(c->out[0]), D(c->out[1]), D(c->out[2]));
  else ln_forward_f64(M, D, D(in[0]), D(in[1]), D(in[2]), c->f[0], D(c->out[0]), D(c->out[1]), D(c->out[2]));
  return ts_check_interrupt();
}

/* in go, x, mean, rstd, w; out gx, gw, gb, each when not NULL */
static ts_status k_layer_norm_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = ts_numel(in[2]), D = ts_numel(in[4]);
  ts_tensor *gx = c->out[0], *gw = c->out[1], *gb = c->out[2];
  /* enough threads that each has rows to sum, and no more than the team */
  int nt = M * D > TS_PARALLEL_GRAIN ? omp_get_max_threads() : 1;
  if (nt > M) nt = M > 0 ? (int)M : 1;
  double *acc = NULL;
  if (gw || gb) {
    acc = malloc(sizeof(double) * 2 * (size_t)D * (size_t)nt + 1);
    if (!acc) return ts_fail(TS_ERR_OOM, "layer_norm_backward: out of memory for %d x %lld row sums", nt, (long long)D);
  }
#define P(t) ((t) ? D(t) : NULL)
  if (in[0]->dtype == TS_FLOAT32)
    ln_backward_f32(M, D, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(in[4]), P(gx), P(gw), P(gb), acc, nt);
  else ln_backward_f64(M, D, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(in[4]), P(gx), P(gw), P(gb), acc, nt);
#undef P
  free(acc);
  return ts_check_interrupt();
}

/* ---- max-pool backward ------------------------------------------------------- */

/* Returns 1 and an out-of-range index in *bad when one was met (those out of range
 * are skipped: the indices may come from the user through torch._backward). */
#define MAXPOOL_BW(NAME, T)                                                                        \
  static int NAME(int64_t P, int64_t L, int64_t HW, const T *go, const int64_t *idx, T *gi, int64_t *bad) { \
    int found = 0;                                                                                 \
    _Pragma("omp parallel for schedule(static) if (P * (L + HW) > TS_PARALLEL_GRAIN)")             \
    for (int64_t pl = 0; pl < P; pl++) {                                                           \
      T *dst = gi + pl * HW;                                                                       \
      const T *g = go + pl * L;                                                                    \
      const int64_t *ix = idx + pl * L;                                                            \
      memset(dst, 0, sizeof(T) * (size_t)HW);                                                      \
      for (int64_t l = 0; l < L; l++) {                                                            \
        if ((uint64_t)ix[l] >= (uint64_t)HW) {                                                     \
          _Pragma("omp critical(maxpool_bw_bad)") { found = 1; *bad = ix[l]; }                       \
          continue;                                                                                \
        }                                                                                          \
        dst[ix[l]] += g[l];                                                                        \
      }                                                                                            \
    }                                                                                              \
    return found;                                                                                  \
  }

MAXPOOL_BW(maxpool_bw_f32, float)
MAXPOOL_BW(maxpool_bw_f64, double)

static ts_status k_max_pool2d_backward(const ts_call *c) {
  const int64_t P = c->i[0], L = c->i[1], HW = c->i[2];
  int64_t bad = 0;
  int found;
  if (c->out[0]->dtype == TS_FLOAT32) found = maxpool_bw_f32(P, L, HW, D(c->in[0]), D(c->in[1]), D(c->out[0]), &bad);
  else found = maxpool_bw_f64(P, L, HW, D(c->in[0]), D(c->in[1]), D(c->out[0]), &bad);
  if (found)
    return ts_fail(TS_ERR_INDEX, "max_pool2d_backward: index %lld is out of bounds for an input plane of %lld elements",
                   (long long)bad, (long long)HW);
  return ts_check_interrupt();
}

#undef D

void ts_cpu_register_nn_act(ts_kernel *k);        /* nn_act.c */
void ts_cpu_register_nn_group_norm(ts_kernel *k); /* nn_group_norm.c */
void ts_cpu_register_nn_upsample(ts_kernel *k);   /* nn_upsample.c */

void ts_cpu_register_nn(ts_kernel *k) {
  ts_cpu_register_nn_act(k);
  ts_cpu_register_nn_group_norm(k);
  ts_cpu_register_nn_upsample(k);
  k[TS_OP_BATCH_NORM_STATS] = k_batch_norm_stats;
  k[TS_OP_BATCH_NORM_ELEMT] = k_batch_norm_elemt;
  k[TS_OP_BATCH_NORM_BACKWARD_REDUCE] = k_batch_norm_backward_reduce;
  k[TS_OP_BATCH_NORM_BACKWARD_ELEMT] = k_batch_norm_backward_elemt;
  k[TS_OP_LAYER_NORM] = k_layer_norm;
  k[TS_OP_LAYER_NORM_BACKWARD] = k_layer_norm_backward;
  k[TS_OP_MAX_POOL2D_BACKWARD] = k_max_pool2d_backward;
  k[TS_OP_IM2COL] = k_im2col;
  k[TS_OP_COL2IM] = k_col2im;
  k[TS_OP_CONV2D_DEPTHWISE] = k_conv2d_depthwise;
  k[TS_OP_CONV2D_DEPTHWISE_BACKWARD] = k_conv2d_depthwise_backward;
  k[TS_OP_MAX_POOL2D] = k_max_pool2d;
  k[TS_OP_AVG_POOL2D] = k_avg_pool2d;
  k[TS_OP_AVG_POOL2D_BACKWARD] = k_avg_pool2d_backward;
  k[TS_OP_ADAPTIVE_AVG_POOL2D] = k_adaptive_avg_pool2d;
  k[TS_OP_ADAPTIVE_AVG_POOL2D_BACKWARD] = k_adaptive_avg_pool2d_backward;
  k[TS_OP_ADAPTIVE_MAX_POOL2D] = k_adaptive_max_pool2d;
}
