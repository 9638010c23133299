/* CPU kernels of group norm (contracts in ops_nn.def). x and go are (N, C, S)
 * contiguous: row r = n*G + g is the D = C/G*S consecutive elements of channels
 * g*C/G .. (g+1)*C/G - 1 of sample n, so a row is one contiguous span, as a
 * layer-norm row, with the affine per channel (every S elements). A row's
 * statistics and backward sums accumulate in double, the elementwise terms in
 * T with the row's constants rounded to T, as the layer-norm kernels
 * (src/cpu/nn.c) and cuda/nn.cu. Rows in parallel; the weight and bias
 * gradients one channel per iteration (no shared sums). */
#include "cpu.h"

#include <math.h>
#include <string.h>

#define GROUPNORM(SUF, T)                                                                          \
  static void gn_forward_##SUF(int64_t N, int64_t C, int64_t S, int64_t G, const T *x, const T *w, \
                               const T *b, double eps, T *y, T *mean, T *rstd) {                   \
    const int64_t cg = C / G, D = cg * S;                                                          \
    _Pragma("omp parallel for schedule(static) if (N * C * S > TS_PARALLEL_GRAIN)")                \
    for (int64_t r = 0; r < N * G; r++) {                                                          \
      const T *xr = x + r * D;                                                                     \
      double s = 0, v = 0;                                                                         \
      for (int64_t j = 0; j < D; j++) s += xr[j];                                                  \
      const double m = D > 0 ? s / (double)D : NAN;                                                \
      for (int64_t j = 0; j < D; j++) {                                                            \
        const double d = (double)xr[j] - m;                                                        \
        v += d * d;                                                                                \
      }                                                                                            \
      const T mt = (T)m, rt = (T)(1 / sqrt((D > 0 ? v / (double)D : NAN) + eps));                  \
      mean[r] = mt, rstd[r] = rt;                                                                  \
      const int64_t c0 = (r % G) * cg;                                                             \
      T *yr = y + r * D;                                                                           \
      for (int64_t c = 0; c < cg; c++) {                                                           \
        const T wc = w[c0 + c], bc = b[c0 + c];                                                    \
        for (int64_t k = 0; k < S; k++) yr[c * S + k] = (xr[c * S + k] - mt) * rt * wc + bc;       \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  /* gx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row, g = go * w[c] */                  \
  static void gn_backward_x_##SUF(int64_t N, int64_t C, int64_t S, int64_t G, const T *go,          \
                                  const T *x, const T *mean, const T *rstd, const T *w, T *gx) {   \
    const int64_t cg = C / G, D = cg * S;                                                          \
    _Pragma("omp parallel for schedule(static) if (N * C * S > TS_PARALLEL_GRAIN)")                \
    for (int64_t r = 0; r < N * G; r++) {                                                          \
      const T *gr = go + r * D, *xr = x + r * D, *wr = w + (r % G) * cg, mt = mean[r], rt = rstd[r]; \
      double sg = 0, sgx = 0;                                                                      \
      for (int64_t c = 0; c < cg; c++)                                                             \
        for (int64_t k = 0; k < S; k++) {                                                          \
          const T g = gr[c * S + k] * wr[c];                                                       \
          sg += (double)g, sgx += (double)g * (double)((xr[c * S + k] - mt) * rt);                 \
        }                                                                                          \
      const T ca = (T)(sg / (double)D), cb = (T)(sgx / (double)D);                                 \
      T *q = gx + r * D;                                                                           \
      for (int64_t c = 0; c < cg; c++)                                                             \
        for (int64_t k = 0; k < S; k++) {                                                          \
          const int64_t j = c * S + k;                                                             \
          q[j] = rt * (gr[j] * wr[c] - ca - (xr[j] - mt) * rt * cb);                               \
        }                                                                                          \
    }                                                                                              \
  }                                                                                                \
  /* gw[c] = sum over n, k of go * xhat; gb[c] = sum of go (either may be NULL) */                \
  static void gn_backward_w_##SUF(int64_t N, int64_t C, int64_t S, int64_t G, const T *go,          \
                                  const T *x, const T *mean, const T *rstd, T *gw, T *gb) {        \
    const int64_t cg = C / G;                                                                      \
    _Pragma("omp parallel for schedule(static) if (N * C * S > TS_PARALLEL_GRAIN)")                \
    for (int64_t c = 0; c < C; c++) {                                                              \
      double a = 0, d = 0;                                                                         \
      for (int64_t n = 0; n < N; n++) {                                                            \
        const int64_t r = n * G + c / cg;                                                          \
        const T mt = mean[r], rt = rstd[r];                                                        \
        const T *gp = go + (n * C + c) * S, *xp = x + (n * C + c) * S;                             \
        for (int64_t k = 0; k < S; k++) a += (double)gp[k], d += (double)gp[k] * (double)((xp[k] - mt) * rt); \
      }                                                                                            \
      if (gw) gw[c] = (T)d;                                                                        \
      if (gb) gb[c] = (T)a;                                                                        \
    }                                                                                              \
  }

GROUPNORM(f32, float)
GROUPNORM(f64, double)

#define D(t) ts_data(t)
#define P(t) ((t) ? D(t) : NULL)

/* in x (N, C, S), w, b (C); out y, mean, rstd (N*G); i[0] G, f[0] eps */
static ts_status k_group_norm(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const ts_tensor *x = in[0];
  const int64_t N = x->sizes[0], C = x->sizes[1], S = x->sizes[2], G = c->i[0];
  if (x->dtype == TS_FLOAT32)
    gn_forward_f32(N, C, S, G, D(x), D(in[1]), D(in[2]), c->f[0], D(c->out[0]), D(c->out[1]), D(c->out[2]));
  else gn_forward_f64(N, C, S, G, D(x), D(in[1]), D(in[2]), c->f[0], D(c->out[0]), D(c->out[1]), D(c->out[2]));
  return ts_check_interrupt();
}

/* in go, x (N, C, S), mean, rstd (N*G), w (C); out gx, gw, gb, each when not NULL; i[0] G */
static ts_status k_group_norm_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const ts_tensor *x = in[1];
  const int64_t N = x->sizes[0], C = x->sizes[1], S = x->sizes[2], G = c->i[0];
  const bool f32 = x->dtype == TS_FLOAT32;
  if (c->out[0]) {
    if (f32) gn_backward_x_f32(N, C, S, G, D(in[0]), D(x), D(in[2]), D(in[3]), D(in[4]), D(c->out[0]));
    else gn_backward_x_f64(N, C, S, G, D(in[0]), D(x), D(in[2]), D(in[3]), D(in[4]), D(c->out[0]));
  }
  if (c->out[1] || c->out[2]) {
    if (f32) gn_backward_w_f32(N, C, S, G, D(in[0]), D(x), D(in[2]), D(in[3]), P(c->out[1]), P(c->out[2]));
    else gn_backward_w_f64(N, C, S, G, D(in[0]), D(x), D(in[2]), D(in[3]), P(c->out[1]), P(c->out[2]));
  }
  return ts_check_interrupt();
}

#undef P
#undef D

void ts_cpu_register_nn_group_norm(ts_kernel *k) {
  k[TS_OP_GROUP_NORM] = k_group_norm;
  k[TS_OP_GROUP_NORM_BACKWARD] = k_group_norm_backward;
}
