/* CPU kernels of the activations with kernels of their own (contracts in
 * ops_nn.def): softplus, elu, hardtanh, log_sigmoid, mish and their
 * backward passes, over operands of any strides through the iterator. Each
 * formula is PyTorch's CPU kernel's, in the operands' type (float or double:
 * the op layer computes the half types in float). */
#include "cpu.h"

#include <tgmath.h>

#include "vmath.h"

/* The backward formulas with a shared subexpression, for either type (tgmath picks
 * the float or double functions). */
#define softplus_grad(g, z)                                                 \
  ({                                                                        \
    const __typeof__(g) z_ = (z);                                           \
    (g) * z_ / (z_ + 1);                                                    \
  })
#define log_sigmoid_grad(g, x)                                              \
  ({                                                                        \
    const __typeof__(x) z_ = exp(-fabs(x));                                 \
    (g) * (((x) < 0 ? 1 : 0) - ((x) < 0 ? 1 : -1) * (z_ / (1 + z_)));      \
  })
#define mish_grad(g, x)                                                     \
  ({                                                                        \
    const __typeof__(x) t_ = tanh(log1p(exp(x))), s_ = 1 / (1 + exp(-(x))); \
    (g) * (t_ + (x) * s_ * (1 - t_ * t_));                                  \
  })
/* PyTorch's GeluKernel.cpp: exact Phi(x) + x phi(x); the tanh approximation's derivative.
 * erf, exp and tanh in float are vmath.h's, so the float loops vectorise. */
#define gelu_grad(g, x)                                                                    \
  ({                                                                                       \
    typedef __typeof__(x) T_;                                                              \
    const T_ cdf_ = (T_)0.5 * (1 + TS_VERF((x) * (T_)M_SQRT1_2));                          \
    const T_ pdf_ = TS_VEXP((T_)-0.5 * (x) * (x)) * (T_)(M_2_SQRTPI * M_SQRT1_2 * 0.5);    \
    (g) * (cdf_ + (x) * pdf_);                                                             \
  })
#define gelu_tanh_grad(g, x)                                                               \
  ({                                                                                       \
    typedef __typeof__(x) T_;                                                              \
    const T_ beta_ = (T_)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa_ = (T_)0.044715;              \
    const T_ x2_ = (x) * (x), t_ = TS_VTANH(beta_ * ((x) + kappa_ * x2_ * (x)));           \
    (g) * ((T_)0.5 * (1 + t_) + (T_)0.5 * (x) * (1 - t_ * t_) * beta_ * (1 + 3 * kappa_ * x2_)); \
  })

/* One loop per formula and type. Forward: d[0] out, d[1] x. Backward: d[0] out,
 * d[1] grad, d[2] x. p0, p1: the call's f[0], f[1]. */
#define ACT_LOOP(NAME, T, NIN, EXPR)                                                        \
  static void NAME(char **d, const int64_t *s, int64_t n, void *vctx) {                    \
    const ts_loop_ctx *ctx = vctx;                                                         \
    const T p0 = (T)ctx->f[0], p1 = (T)ctx->f[1];                                          \
    (void)p0, (void)p1;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                      \
      const T x = *(const T *)(d[NIN] + i * s[NIN]);                                       \
      const T g = NIN == 2 ? *(const T *)(d[1] + i * s[1]) : (T)0;                         \
      (void)g;                                                                             \
      *(T *)(d[0] + i * s[0]) = (EXPR);                                                    \
    }                                                                                      \
  }
#define ACT(NAME, NIN, EXPR) ACT_LOOP(NAME##_f32, float, NIN, EXPR) ACT_LOOP(NAME##_f64, double, NIN, EXPR)

/* A backward's float loop whose unit-stride rows run in a function cloned for
 * x86-64-v3 and -v4 (vmath.h): GELU's backward is ~40 operations an element. */
#define ACT_BW_F32_VEC(NAME, EXPR)                                                           \
  TS_VECTOR_V4 static void NAME##_row(float *o, const float *gp, const float *xp, int64_t n) { \
    _Pragma("omp simd")                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                      \
      const float x = xp[i], g = gp[i];                                                    \
      o[i] = (EXPR);                                                                       \
    }                                                                                      \
  }                                                                                        \
  static void NAME##_f32(char **d, const int64_t *s, int64_t n, void *vctx) {              \
    (void)vctx;                                                                            \
    if (s[0] == sizeof(float) && s[1] == sizeof(float) && s[2] == sizeof(float)) {         \
      NAME##_row((float *)d[0], (const float *)d[1], (const float *)d[2], n);              \
      return;                                                                              \
    }                                                                                      \
    /* strided: through buffers into the same row function, so a view's values */         \
    /* are the contiguous tensor's to the bit (FMA rounds differently) */                  \
    float gb_[256], xb_[256];                                                              \
    for (int64_t i0 = 0; i0 < n; i0 += 256) {                                              \
      int64_t m = n - i0 < 256 ? n - i0 : 256;                                             \
      for (int64_t i = 0; i < m; i++)                                                      \
        gb_[i] = *(const float *)(d[1] + (i0 + i) * s[1]), xb_[i] = *(const float *)(d[2] + (i0 + i) * s[2]); \
      NAME##_row(gb_, gb_, xb_, m);                                                        \
      for (int64_t i = 0; i < m; i++) *(float *)(d[0] + (i0 + i) * s[0]) = gb_[i];         \
    }                                                                                      \
  }                                                                                        \
  ACT_LOOP(NAME##_f64, double, 2, EXPR)

/* beta p0, threshold p1 */
ACT(softplus, 1, x * p0 > p1 ? x : log1p(exp(x * p0)) / p0)
ACT(softplus_bw, 2, x * p0 > p1 ? g : softplus_grad(g, exp(x * p0)))
/* alpha p0 */
ACT(elu, 1, x <= 0 ? expm1(x) * p0 : x)
ACT(elu_bw, 2, x <= 0 ? g * p0 * exp(x) : g)
/* min_val p0, max_val p1; NaN passes through, as torch's clamp */
ACT(hardtanh, 1, x != x ? x : fmin(fmax(x, p0), p1))
ACT(hardtanh_bw, 2, x <= p0 || x >= p1 ? 0 : g)
ACT(log_sigmoid, 1, fmin(x, (__typeof__(x))0) - log1p(exp(-fabs(x))))
ACT(log_sigmoid_bw, 2, log_sigmoid_grad(g, x))
ACT(mish, 1, x * tanh(log1p(exp(x))))
ACT(mish_bw, 2, mish_grad(g, x))
/* exact, and the tanh approximation (the call's f[0] 1): one loop each */
ACT_BW_F32_VEC(gelu_bw, gelu_grad(g, x))
ACT_BW_F32_VEC(gelu_tanh_bw, gelu_tanh_grad(g, x))

static ts_status run(const ts_call *c, ts_loop f32, ts_loop f64) {
  ts_tensor *ops[3] = {c->out[0], c->in[0], c->nin > 1 ? c->in[1] : NULL};
  ts_loop_ctx ctx = {.f = {c->f[0], c->f[1]}};
  ts_iter it;
  ts_iter_init(&it, c->nin + 1, ops);
  return ts_iter_run(&it, c->out[0]->dtype == TS_FLOAT32 ? f32 : f64, &ctx);
}

#define KERNEL(NAME)                                                            \
  static ts_status k_##NAME(const ts_call *c) { return run(c, NAME##_f32, NAME##_f64); }
KERNEL(softplus) KERNEL(softplus_bw) KERNEL(elu) KERNEL(elu_bw) KERNEL(hardtanh) KERNEL(hardtanh_bw)
KERNEL(log_sigmoid) KERNEL(log_sigmoid_bw) KERNEL(mish) KERNEL(mish_bw) KERNEL(gelu_bw) KERNEL(gelu_tanh_bw)

static ts_status k_gelu_backward(const ts_call *c) { return c->f[0] != 0 ? k_gelu_tanh_bw(c) : k_gelu_bw(c); }

void ts_cpu_register_nn_act(ts_kernel *k) {
  k[TS_OP_SOFTPLUS] = k_softplus;
  k[TS_OP_SOFTPLUS_BACKWARD] = k_softplus_bw;
  k[TS_OP_ELU] = k_elu;
  k[TS_OP_ELU_BACKWARD] = k_elu_bw;
  k[TS_OP_HARDTANH] = k_hardtanh;
  k[TS_OP_HARDTANH_BACKWARD] = k_hardtanh_bw;
  k[TS_OP_LOG_SIGMOID] = k_log_sigmoid;
  k[TS_OP_LOG_SIGMOID_BACKWARD] = k_log_sigmoid_bw;
  k[TS_OP_MISH] = k_mish;
  k[TS_OP_MISH_BACKWARD] = k_mish_bw;
  k[TS_OP_GELU_BACKWARD] = k_gelu_backward;
}
