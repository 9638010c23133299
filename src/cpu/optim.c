/* CPU optimizer kernels: the fused Adam/AdamW, SGD and RMSprop steps over all
 * the parameters of a group (see ops_optim.def). Each computes in double per
 * element and stores in the parameter's dtype, in the order PyTorch's
 * single-tensor update uses; a state value read back later in the same step
 * (SGD's and RMSprop's buffers) is the stored one, as PyTorch reads it. This
 * is the reference for cuda/optim.cu, which does the same arithmetic.
 * Adam's common case on float32 (no weight decay but AdamW's decoupled one,
 * no amsgrad or maximize) is the exception: float arithmetic in PyTorch's
 * order, as PyTorch's float32 update, vectorised (in double it cost as much as the forward and backward
 * GEMMs of seed 003's step together). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

#define ADAM_LOOP(T)                                                                                  \
  do {                                                                                                \
    T *p = ts_data(t[0]), *m = ts_data(t[2]), *v = ts_data(t[3]), *vm = amsgrad ? ts_data(t[4]) : NULL; \
    const T *g = ts_data(t[1]);                                                                       \
    _Pragma("omp parallel for schedule(static) if (n > TS_PARALLEL_GRAIN)")                           \
    for (int64_t j = 0; j < n; j++) {                                                                 \
      double gj = maximize ? -(double)g[j] : (double)g[j], pj = p[j];                                 \
      if (wd != 0) {                                                                                  \
        if (decoupled) pj *= 1 - lr * wd;                                                             \
        else gj += wd * pj;                                                                           \
      }                                                                                               \
      double mj = (double)m[j] * b1 + (1 - b1) * gj, vj = (double)v[j] * b2 + (1 - b2) * gj * gj;    \
      m[j] = (T)mj, v[j] = (T)vj;                                                                     \
      double vv = vj;                                                                                 \
      if (vm) {                                                                                       \
        vv = (double)vm[j] > vj ? (double)vm[j] : vj;                                                 \
        vm[j] = (T)vv;                                                                                \
      }                                                                                               \
      p[j] = (T)(pj - step_size * mj / (sqrt(vv) / bc2_sqrt + eps));                                  \
    }                                                                                                 \
  } while (0)

/* p *= decay (AdamW's p.mul_(1 - lr wd); 1 otherwise), m = b1 m + (1 - b1) g,
 * v = b2 v + (1 - b2) g^2, p -= step_size m / (sqrt(v) / bc2_sqrt + eps):
 * PyTorch's mul_/add_, mul_/addcmul_, sqrt/div/add_ and addcdiv_ in float,
 * one pass over the four arrays */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
adam_f32(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t n, float b1,
         float b2, float eps, float step_size, float bc2_sqrt, float decay) {
  for (int64_t j = 0; j < n; j++) {
    float gj = g[j];
    float mj = m[j] * b1 + (1 - b1) * gj, vj = v[j] * b2 + (1 - b2) * (gj * gj);
    m[j] = mj, v[j] = vj;
    p[j] = p[j] * decay - step_size * (mj / (sqrtf(vj) / bc2_sqrt + eps));
  }
}

static void adam_f32_parallel(ts_tensor *const *t, int64_t n, double b1, double b2, double eps, double step_size,
                              double bc2_sqrt, double decay) {
  float *p = ts_data(t[0]), *m = ts_data(t[2]), *v = ts_data(t[3]);
  const float *g = ts_data(t[1]);
#pragma omp parallel if (n > TS_PARALLEL_GRAIN)
  {
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t chunk = (n + nt - 1) / nt, lo = chunk * id, hi = lo + chunk < n ? lo + chunk : n;
    if (lo < hi)
      adam_f32(p + lo, g + lo, m + lo, v + lo, hi - lo, (float)b1, (float)b2, (float)eps, (float)step_size,
               (float)bc2_sqrt, (float)decay);
  }
}

static ts_status k_adam_step(const ts_call *c) {
  double lr = c->f[0], b1 = c->f[1], b2 = c->f[2], eps = c->f[3], wd;
  memcpy(&wd, &c->i[3], sizeof wd);
  bool amsgrad = c->i[0] & 1, maximize = c->i[0] & 2, decoupled = c->i[0] & 4, capturable = c->i[0] & 8;
  int per = (int)c->i[1];
  double step = (double)c->i[2];
  double step_size = lr / (1 - pow(b1, step)), bc2_sqrt = sqrt(1 - pow(b2, step));
  for (int k = 0; k + per <= c->nin; k += per) {
    ts_tensor *const *t = c->in + k;
    int64_t n = ts_numel(t[0]);
    if (capturable) { /* the count lives in a tensor: incremented, then read (as the CUDA kernel does) */
      float *s = ts_data(t[per - 1]);
      step = (double)(*s += 1.0f);
      step_size = lr / (1 - pow(b1, step)), bc2_sqrt = sqrt(1 - pow(b2, step));
    }
    if (t[0]->dtype == TS_FLOAT32 && !amsgrad && (wd == 0 || decoupled) && !maximize)
      adam_f32_parallel(t, n, b1, b2, eps, step_size, bc2_sqrt, decoupled ? 1 - lr * wd : 1);
    else if (t[0]->dtype == TS_FLOAT32) ADAM_LOOP(float);
    else ADAM_LOOP(double);
  }
  return TS_OK;
}

/* SGD: d = grad (negated when maximizing) + wd p; with momentum the buffer
 * becomes d on its first step, else mom buf + (1 - dampening) d, and d is
 * the buffer (or d + mom buf with nesterov); p -= lr d. */
#define SGD_LOOP(T)                                                                      \
  do {                                                                                   \
    T *p = ts_data(t[0]), *b = per > 2 ? ts_data(t[2]) : NULL;                           \
    const T *g = ts_data(t[1]);                                                          \
    _Pragma("omp parallel for schedule(static) if (n > TS_PARALLEL_GRAIN)")              \
    for (int64_t j = 0; j < n; j++) {                                                    \
      double pj = p[j], d = maximize ? -(double)g[j] : (double)g[j];                     \
      if (wd != 0) d += wd * pj;                                                         \
      if (b) {                                                                           \
        T bs = (T)(fresh ? d : (double)b[j] * mom + (1 - damp) * d);                     \
        b[j] = bs;                                                                       \
        d = nesterov ? d + mom * (double)bs : (double)bs;                                \
      }                                                                                  \
      p[j] = (T)(pj - lr * d);                                                           \
    }                                                                                    \
  } while (0)

static ts_status k_sgd_step(const ts_call *c) {
  double lr = c->f[0], mom = c->f[1], damp = c->f[2], wd = c->f[3];
  bool nesterov = c->i[0] & 1, maximize = c->i[0] & 2;
  int per = (int)c->i[1];
  int64_t nfresh = c->i[2];
  for (int k = 0; k + per <= c->nin; k += per) {
    ts_tensor *const *t = c->in + k;
    int64_t n = ts_numel(t[0]);
    bool fresh = k / per < nfresh;
    if (t[0]->dtype == TS_FLOAT32) SGD_LOOP(float);
    else SGD_LOOP(double);
  }
  return TS_OK;
}

/* torch.lerp's formula (exact at both ends): a + w (b - a), or from b's side
 * when w >= 0.5 */
static inline double lerp(double a, double b, double w) {
  return fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);
}

/* RMSprop: d = grad (negated when maximizing) + wd p; sq = alpha sq +
 * (1 - alpha) d^2; centered: ga = lerp(ga, d, 1 - alpha), avg = sqrt(sq -
 * ga^2), else avg = sqrt(sq); avg += eps; with momentum buf = mom buf + d /
 * avg and p -= lr buf, else p -= lr d / avg. */
#define RMSPROP_LOOP(T)                                                                              \
  do {                                                                                               \
    T *p = ts_data(t[0]), *sq = ts_data(t[2]), *b = has_buf ? ts_data(t[3]) : NULL,                  \
      *ga = centered ? ts_data(t[has_buf ? 4 : 3]) : NULL;                                           \
    const T *g = ts_data(t[1]);                                                                      \
    _Pragma("omp parallel for schedule(static) if (n > TS_PARALLEL_GRAIN)")                          \
    for (int64_t j = 0; j < n; j++) {                                                                \
      double pj = p[j], d = maximize ? -(double)g[j] : (double)g[j];                                 \
      if (wd != 0) d += wd * pj;                                                                     \
      T sqs = (T)((double)sq[j] * alpha + (1 - alpha) * (d * d));                                    \
      sq[j] = sqs;                                                                                   \
      double avg;                                                                                    \
      if (ga) {                                                                                      \
        T gas = (T)lerp((double)ga[j], d, 1 - alpha);                                                \
        ga[j] = gas;                                                                                 \
        avg = sqrt((double)sqs - (double)gas * (double)gas);                                         \
      } else {                                                                                       \
        avg = sqrt((double)sqs);                                                                     \
      }                                                                                              \
      avg += eps;                                                                                    \
      if (b) {                                                                                       \
        T bs = (T)((double)b[j] * mom + d / avg);                                                    \
        b[j] = bs;                                                                                   \
        p[j] = (T)(pj - lr * (double)bs);                                                            \
      } else {                                                                                       \
        p[j] = (T)(pj - lr * (d / avg));                                                             \
      }                                                                                              \
    }                                                                                                \
  } while (0)

static ts_status k_rmsprop_step(const ts_call *c) {
  double lr = c->f[0], alpha = c->f[1], eps = c->f[2], wd = c->f[3], mom;
  memcpy(&mom, &c->i[2], sizeof mom);
  bool centered = c->i[0] & 1, maximize = c->i[0] & 2, has_buf = mom > 0;
  int per = (int)c->i[1];
  for (int k = 0; k + per <= c->nin; k += per) {
    ts_tensor *const *t = c->in + k;
    int64_t n = ts_numel(t[0]);
    if (t[0]->dtype == TS_FLOAT32) RMSPROP_LOOP(float);
    else RMSPROP_LOOP(double);
  }
  return TS_OK;
}

/* the sum of squares (p = 2) or the largest |g| of n values, in double; NaN wins */
#define NORM_ACC(T)                                                                                 \
  static double norm_acc_##T(const T *g, int64_t n, bool inf, double acc) {                        \
    for (int64_t j = 0; j < n; j++) {                                                               \
      const double a = fabs((double)g[j]);                                                          \
      if (!inf) acc += a * a;                                                                       \
      else if (!(a <= acc) && acc == acc) acc = a; /* a NaN stays */                               \
    }                                                                                               \
    return acc;                                                                                     \
  }
NORM_ACC(float)
NORM_ACC(double)

#define CLIP_SCALE(T)                                                                               \
  do {                                                                                              \
    const T tot = (T)(inf ? acc : sqrt(acc)), d = tot + (T)1e-6;                                    \
    T coef = (T)c->f[0] / d;                                                                        \
    if (coef > (T)1) coef = (T)1;                                                                   \
    *(T *)ts_data(c->out[0]) = tot;                                                                 \
    for (int k = 0; k < c->nin; k++) {                                                              \
      T *g = ts_data(c->in[k]);                                                                     \
      const int64_t n = ts_numel(c->in[k]);                                                         \
      _Pragma("omp parallel for schedule(static) if (n > TS_PARALLEL_GRAIN)")                       \
      for (int64_t j = 0; j < n; j++) g[j] = g[j] * coef;                                          \
    }                                                                                               \
  } while (0)

/* in n grads (one dtype); out[0] the total norm; the grads scaled (ops_optim.def) */
static ts_status k_clip_grad_norm(const ts_call *c) {
  const bool inf = c->i[0] == 0, f32 = c->in[0]->dtype == TS_FLOAT32;
  double acc = 0;
  for (int k = 0; k < c->nin; k++) {
    const int64_t n = ts_numel(c->in[k]);
    acc = f32 ? norm_acc_float(ts_data(c->in[k]), n, inf, acc) : norm_acc_double(ts_data(c->in[k]), n, inf, acc);
  }
  if (f32) CLIP_SCALE(float);
  else CLIP_SCALE(double);
  return ts_check_interrupt();
}

static ts_status k_foreach_zero(const ts_call *c) {
  for (int k = 0; k < c->nin; k++) memset(ts_data(c->in[k]), 0, (size_t)ts_numel(c->in[k]) * ts_dtype_size(c->in[k]->dtype));
  return TS_OK;
}

void ts_cpu_register_optim(ts_kernel *k) {
  k[TS_OP_CLIP_GRAD_NORM] = k_clip_grad_norm;
  k[TS_OP_FOREACH_ZERO] = k_foreach_zero;
  k[TS_OP_ADAM_STEP] = k_adam_step;
  k[TS_OP_SGD_STEP] = k_sgd_step;
  k[TS_OP_RMSPROP_STEP] = k_rmsprop_step;
}
