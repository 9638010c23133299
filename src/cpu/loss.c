/* CPU kernels of the fused classification losses (contracts in
 * src/ops/ops_loss.def): one pass over the rows each way, row sums in double,
 * the reduction summed in row order (the same result at any thread count).
 * A class index out of range fails before anything is written. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_loss.h"
#include "cpu.h"
#include "vmath.h"

#define GRAIN 32768 /* elements below which one thread does the rows */

static ts_status check_targets(const ts_call *c, int64_t M, int64_t C) {
  const int64_t *t = ts_data(c->in[1]), ign = c->i[0];
  for (int64_t r = 0; r < M; r++)
    if (t[r] != ign && (t[r] < 0 || t[r] >= C)) {
      const long long v[3] = {t[r], C, ign};
      return ts_loss_device_error(TS_OP_NLL_LOSS, c->i[1] & TS_NLL_LOGITS ? TS_LOSS_ERR_CE_TARGET : TS_LOSS_ERR_NLL_TARGET, v);
    }
  return TS_OK;
}

/* The row's log-sum-exp over C values S apart; NaN anywhere gives NaN. */
#define ROW_LSE(T)                                                                                   \
  static double row_lse_##T(const T *x, int64_t C, int64_t S) {                                      \
    double m = -INFINITY, s = 0;                                                                     \
    for (int64_t k = 0; k < C; k++)                                                                  \
      if (!((double)x[k * S] <= m)) m = (double)x[k * S];                                            \
    for (int64_t k = 0; k < C; k++) s += exp((double)x[k * S] - m);                                  \
    return m + log(s);                                                                               \
  }

ROW_LSE(float)
ROW_LSE(double)

#define DENSE_F32(T, S) (sizeof(T) == sizeof(float) && (S) == 1)

/* Float rows of contiguous logits (S = 1, the usual case): the exponentials
 * in float lanes (vmath.h's ts_expf, eight at a time where the CPU has AVX2,
 * with AVX-512's mask registers for its range checks where it has them),
 * as PyTorch's float log_softmax computes them, where the loops above call
 * libm's double exp per element (a tenth of an LSTM language-model step).
 * The partial sums are added in double. A row with a NaN or without a finite
 * max takes the double loop (its NaN or inf comes out the same). */
#define ROW_LANES 8
TS_VECTOR_V4 static double row_lse_float_dense(const float *x, int64_t C) {
  float ml[ROW_LANES], sl[ROW_LANES] = {0};
  for (int q = 0; q < ROW_LANES; q++) ml[q] = -INFINITY;
  const int64_t body = C / ROW_LANES * ROW_LANES;
  for (int64_t k = 0; k < body; k += ROW_LANES)
    for (int q = 0; q < ROW_LANES; q++) ml[q] = x[k + q] > ml[q] || x[k + q] != x[k + q] ? x[k + q] : ml[q];
  float m = -INFINITY;
  for (int q = 0; q < ROW_LANES; q++) m = ml[q] > m || ml[q] != ml[q] ? ml[q] : m;
  for (int64_t k = body; k < C; k++) m = x[k] > m || x[k] != x[k] ? x[k] : m;
  if (!isfinite(m)) return row_lse_float(x, C, 1);
  for (int64_t k = 0; k < body; k += ROW_LANES)
    for (int q = 0; q < ROW_LANES; q++) sl[q] += ts_expf(x[k + q] - m);
  double sum = 0;
  for (int q = 0; q < ROW_LANES; q++) sum += sl[q];
  for (int64_t k = body; k < C; k++) sum += ts_expf(x[k] - m);
  return (double)m + log(sum);
}

/* p_k = exp(x_k - lse) of a float row of contiguous logits, into g (C) */
TS_VECTOR_V4 static void row_probs_float_dense(const float *x, int64_t C, double lse, float *g) {
  const float l = (float)lse;
#pragma omp simd
  for (int64_t k = 0; k < C; k++) g[k] = ts_expf(x[k] - l);
}

/* forward: rl[r] the row's loss, rw[r] its target's weight (0 when ignored) */
#define NLL_FORWARD(T)                                                                                          \
  static void nll_rows_##T(const ts_call *c, int64_t N, int64_t C, int64_t S, double W, double *rl, double *rw) { \
    const T *x = ts_data(c->in[0]), *w = c->i[1] & TS_NLL_WEIGHT ? ts_data(c->in[2]) : NULL;                   \
    const int64_t *t = ts_data(c->in[1]), ign = c->i[0];                                                        \
    const bool logits = c->i[1] & TS_NLL_LOGITS;                                                                \
    const double eps = c->f[0];                                                                                 \
    double *lse = logits ? ts_data(c->out[1]) : NULL;                                                           \
    _Pragma("omp parallel for schedule(static) if (N * C * S > GRAIN)")                                        \
    for (int64_t r = 0; r < N * S; r++) {                                                                       \
      const T *row = x + (r / S) * C * S + r % S;                                                               \
      const double l = !logits ? 0 : DENSE_F32(T, S) ? row_lse_float_dense((const float *)row, C) : row_lse_##T(row, C, S); \
      if (lse) lse[r] = l;                                                                                      \
      if (t[r] == ign) {                                                                                        \
        rl[r] = 0, rw[r] = 0;                                                                                   \
        continue;                                                                                               \
      }                                                                                                         \
      const double wt = w ? (double)w[t[r]] : 1.0, nll = -wt * ((double)row[t[r] * S] - l);                   \
      double v = nll;                                                                                           \
      if (eps != 0) {                                                                                           \
        double sx = 0;                                                                                          \
        for (int64_t k = 0; k < C; k++) sx += (w ? (double)w[k] : 1.0) * (double)row[k * S];                  \
        v = (1 - eps) * nll + eps / (double)C * (W * l - sx); /* -sum_c w_c (x_c - l) */                       \
      }                                                                                                         \
      rl[r] = v, rw[r] = wt;                                                                                    \
    }                                                                                                           \
  }

#define NLL_BACKWARD(T)                                                                                         \
  static void nll_backward_##T(const ts_call *c, int64_t N, int64_t C, int64_t S) {                             \
    ts_tensor *const *in = c->in;                                                                               \
    const int flags = (int)c->i[1];                                                                             \
    const T *go = ts_data(in[0]), *x = ts_data(in[1]);                                                          \
    const int64_t *t = ts_data(in[2]), ign = c->i[0];                                                           \
    const double *stats = ts_data(in[3]);                                                                       \
    const bool logits = flags & TS_NLL_LOGITS;                                                                  \
    const double *lse = logits ? ts_data(in[4]) : NULL;                                                         \
    const T *w = flags & TS_NLL_WEIGHT ? ts_data(in[logits ? 5 : 4]) : NULL;                                    \
    const double eps = c->f[0], W = stats[1], scale = flags & TS_NLL_MEAN ? 1.0 / stats[0] : 1.0;             \
    T *gx = ts_data(c->out[0]);                                                                                 \
    _Pragma("omp parallel for schedule(static) if (N * C * S > GRAIN)")                                        \
    for (int64_t r = 0; r < N * S; r++) {                                                                       \
      T *grow = gx + (r / S) * C * S + r % S;                                                                   \
      const T *row = x + (r / S) * C * S + r % S;                                                               \
      if (t[r] == ign || t[r] < 0 || t[r] >= C) {                                                               \
        for (int64_t k = 0; k < C; k++) grow[k * S] = 0;                                                        \
        continue;                                                                                               \
      }                                                                                                         \
      const double g = (double)go[flags & TS_NLL_REDUCE ? 0 : r] * scale;                                       \
      const double wt = w ? (double)w[t[r]] : 1.0;                                                              \
      const bool dense = logits && DENSE_F32(T, S);                                                             \
      if (dense) row_probs_float_dense((const float *)row, C, lse[r], (float *)grow);                           \
      if (dense && !w && eps == 0) { /* g (p - onehot): the probabilities scaled in place */                    \
        const T a = (T)(g * wt);                                                                                \
        _Pragma("omp simd")                                                                                     \
        for (int64_t k = 0; k < C; k++) grow[k] *= a;                                                           \
        grow[t[r]] -= a;                                                                                        \
        continue;                                                                                               \
      }                                                                                                         \
      for (int64_t k = 0; k < C; k++) {                                                                         \
        const double hot = k == t[r] ? 1.0 : 0.0;                                                               \
        double v;                                                                                               \
        if (logits) {                                                                                           \
          const double p = dense ? (double)grow[k] : exp((double)row[k * S] - lse[r]), wk = w ? (double)w[k] : 1.0; \
          v = (1 - eps) * wt * (p - hot) + eps / (double)C * (p * W - wk);                                      \
        } else {                                                                                                \
          v = -wt * hot;                                                                                        \
        }                                                                                                       \
        grow[k * S] = (T)(g * v);                                                                               \
      }                                                                                                         \
    }                                                                                                           \
  }

NLL_FORWARD(float)
NLL_FORWARD(double)
NLL_BACKWARD(float)
NLL_BACKWARD(double)

/* in x (N, C, S), target[, weight]; out loss, lse (logits), stats */
static ts_status k_nll_loss(const ts_call *c) {
  const ts_tensor *x = c->in[0];
  const int64_t N = x->sizes[0], C = x->sizes[1], S = x->sizes[2], M = N * S;
  const bool f32 = x->dtype == TS_FLOAT32;
  ts_status st = check_targets(c, M, C);
  if (st) return st;
  double W = (double)C;
  if (c->i[1] & TS_NLL_WEIGHT) {
    W = 0;
    for (int64_t k = 0; k < C; k++) W += f32 ? (double)((const float *)ts_data(c->in[2]))[k] : ((const double *)ts_data(c->in[2]))[k];
  }
  double *rl = malloc(sizeof(double) * 2 * (size_t)M + 1);
  if (!rl) return ts_fail(TS_ERR_OOM, "nll_loss: out of memory for %lld row losses", (long long)M);
  double *rw = rl + M;
  if (f32) nll_rows_float(c, N, C, S, W, rl, rw);
  else nll_rows_double(c, N, C, S, W, rl, rw);
  double total = 0, wsum = 0;
  for (int64_t r = 0; r < M; r++) total += rl[r], wsum += rw[r];
  void *out = ts_data(c->out[0]);
  if (c->i[1] & TS_NLL_REDUCE) {
    const double v = c->i[1] & TS_NLL_MEAN ? total / wsum : total;
    if (f32) *(float *)out = (float)v;
    else *(double *)out = v;
  } else {
    for (int64_t r = 0; r < M; r++)
      if (f32) ((float *)out)[r] = (float)rl[r];
      else ((double *)out)[r] = rl[r];
  }
  double *stats = ts_data(c->out[2]);
  stats[0] = wsum, stats[1] = W;
  free(rl);
  return ts_check_interrupt();
}

/* in go, x, target, stats[, lse][, weight]; out grad_x (N, C, S) */
static ts_status k_nll_loss_backward(const ts_call *c) {
  const ts_tensor *x = c->in[1];
  if (x->dtype == TS_FLOAT32) nll_backward_float(c, x->sizes[0], x->sizes[1], x->sizes[2]);
  else nll_backward_double(c, x->sizes[0], x->sizes[1], x->sizes[2]);
  return ts_check_interrupt();
}

/* in x contiguous; f[0], f[1] the range; i[0] the code */
static ts_status k_check_range(const ts_call *c) {
  const int64_t n = ts_numel(c->in[0]);
  const bool f32 = c->in[0]->dtype == TS_FLOAT32;
  for (int64_t j = 0; j < n; j++) {
    const double v = f32 ? (double)((const float *)ts_data(c->in[0]))[j] : ((const double *)ts_data(c->in[0]))[j];
    if (!(v >= c->f[0] && v <= c->f[1])) {
      long long e[3] = {0, j, 0};
      memcpy(&e[0], &v, sizeof v);
      return ts_loss_device_error(TS_OP_CHECK_RANGE, (int)c->i[0], e);
    }
  }
  return TS_OK;
}

void ts_cpu_register_loss(ts_kernel *k) {
  k[TS_OP_CHECK_RANGE] = k_check_range;
  k[TS_OP_NLL_LOSS] = k_nll_loss;
  k[TS_OP_NLL_LOSS_BACKWARD] = k_nll_loss_backward;
}
