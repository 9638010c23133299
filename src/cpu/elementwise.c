/* CPU elementwise kernels: unary, binary, comparisons, where, lerp.
 * Each loop is instantiated per dtype from one expression; float16 and
 * bfloat16 compute in float. The op layer has already broadcast and cast the
 * inputs, so every loop sees operands of one storage type. */
#include "cpu.h"

#include <tgmath.h>

#include "vmath.h"
#include "core/erfinv.h"
#include "core/int_maths.h"

/* exp, tanh and erf in the compute type: the vectorisable ones for float
 * (and the half types, which compute in float), libm's for double */
#define EXP TS_VEXP
#define TANH TS_VTANH
#define ERF TS_VERF

/* x: the input, in compute type `ct`; ctx: the ts_loop_ctx. */
#define LOOP1(NAME, S, C, LD, ST, EXPR)                                                   \
  static void NAME(char **d, const int64_t *s, int64_t n, void *vctx) {                  \
    typedef C ct;                                                                        \
    ts_loop_ctx *ctx = vctx;                                                             \
    /* parameters read once: through ctx they could alias the output and */              \
    /* would keep the loop from vectorising */                                           \
    const ct p0_ = ctx ? (ct)ctx->f[0] : (ct)0, p1_ = ctx ? (ct)ctx->f[1] : (ct)0;      \
    const int64_t flags_ = ctx ? ctx->i[0] : 0;                                          \
    (void)ctx, (void)p0_, (void)p1_, (void)flags_;                                       \
    char *o = d[0];                                                                      \
    const char *a = d[1];                                                                \
    if (s[0] == sizeof(S) && s[1] == sizeof(S)) {                                        \
      S *po = (S *)o;                                                                    \
      const S *pa = (const S *)a;                                                        \
      _Pragma("omp simd")                                                                \
      for (int64_t i = 0; i < n; i++) {                                                  \
        ct x = (ct)LD(pa + i, S);                                                        \
        ST(po + i, S, (EXPR));                                                           \
      }                                                                                  \
    } else {                                                                             \
      for (int64_t i = 0; i < n; i++) {                                                  \
        ct x = (ct)LD(a + i * s[1], S);                                                  \
        ST(o + i * s[0], S, (EXPR));                                                     \
      }                                                                                  \
    }                                                                                    \
  }

/* a, b: the inputs in compute type `ct`; OS: the output storage type. */
#define LOOP2(NAME, S, OS, C, LD, ST, EXPR)                                               \
  static void NAME(char **d, const int64_t *s, int64_t n, void *vctx) {                  \
    typedef C ct;                                                                        \
    ts_loop_ctx *ctx = vctx;                                                             \
    const ct alpha_ = ctx ? (ct)ctx->f[0] : (ct)1; /* read once (see LOOP1) */          \
    (void)ctx, (void)alpha_;                                                             \
    char *o = d[0];                                                                      \
    const char *pa_ = d[1], *pb_ = d[2];                                                 \
    if (s[0] == sizeof(OS) && s[1] == sizeof(S) && s[2] == sizeof(S)) {                  \
      OS *po = (OS *)o;                                                                  \
      const S *x = (const S *)pa_, *y = (const S *)pb_;                                  \
      for (int64_t i = 0; i < n; i++) {                                                  \
        ct a = (ct)LD(x + i, S), b = (ct)LD(y + i, S);                                   \
        ST(po + i, OS, (EXPR));                                                          \
      }                                                                                  \
    } else if (s[0] == sizeof(OS) && s[1] == sizeof(S) && s[2] == 0) {                   \
      OS *po = (OS *)o;                                                                  \
      const S *x = (const S *)pa_;                                                       \
      const ct b = (ct)LD(pb_, S);                                                       \
      for (int64_t i = 0; i < n; i++) {                                                  \
        ct a = (ct)LD(x + i, S);                                                         \
        ST(po + i, OS, (EXPR));                                                          \
      }                                                                                  \
    } else {                                                                             \
      for (int64_t i = 0; i < n; i++) {                                                  \
        ct a = (ct)LD(pa_ + i * s[1], S), b = (ct)LD(pb_ + i * s[2], S);                 \
        ST(o + i * s[0], OS, (EXPR));                                                    \
      }                                                                                  \
    }                                                                                    \
  }

/* Output stores for comparisons: a bool byte. */
#define ST_BOOL(p, OS, v) (*(uint8_t *)(p) = (uint8_t)((v) != 0))

/* A float32 loop whose unit-stride rows run in a function cloned for
 * x86-64-v3 and -v4 (vmath.h), for the expressions heavy enough to gain
 * from eight or sixteen lanes and FMA (erf, GELU: ~30 operations an
 * element). EXPR reads x and flags_ only; the row function takes in == out. */
#define LOOP1_F32_VEC(NAME, EXPR)                                                          \
  TS_VECTOR_V4 static void NAME##_row(float *po, const float *pa, int64_t n, int64_t flags_) { \
    typedef float ct;                                                                    \
    (void)flags_;                                                                        \
    _Pragma("omp simd")                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                    \
      ct x = pa[i];                                                                      \
      po[i] = (EXPR);                                                                    \
    }                                                                                    \
  }                                                                                      \
  static void NAME(char **d, const int64_t *s, int64_t n, void *vctx) {                  \
    const ts_loop_ctx *ctx = vctx;                                                       \
    const int64_t flags_ = ctx ? ctx->i[0] : 0;                                          \
    if (s[0] == sizeof(float) && s[1] == sizeof(float)) {                                \
      NAME##_row((float *)d[0], (const float *)d[1], n, flags_);                         \
      return;                                                                            \
    }                                                                                    \
    /* strided: through a buffer into the same row function, so a view's */             \
    /* values are the contiguous tensor's to the bit (FMA rounds differently) */         \
    float buf_[256];                                                                     \
    for (int64_t i0 = 0; i0 < n; i0 += 256) {                                            \
      int64_t m = n - i0 < 256 ? n - i0 : 256;                                           \
      for (int64_t i = 0; i < m; i++) buf_[i] = *(const float *)(d[1] + (i0 + i) * s[1]); \
      NAME##_row(buf_, buf_, m, flags_);                                                 \
      for (int64_t i = 0; i < m; i++) *(float *)(d[0] + (i0 + i) * s[0]) = buf_[i];      \
    }                                                                                    \
  }

/* Instantiation over dtype groups. F: float types; I: integer types; B: bool. */
#define U_F_NOT32(OP, EXPR)                                          \
  LOOP1(OP##_f64, double, double, TS_LD_SAME, TS_ST_SAME, EXPR)      \
  LOOP1(OP##_f16, uint16_t, float, TS_LD_F16, TS_ST_F16, EXPR)       \
  LOOP1(OP##_bf16, uint16_t, float, TS_LD_BF16, TS_ST_BF16, EXPR)
#define U_F(OP, EXPR) LOOP1(OP##_f32, float, float, TS_LD_SAME, TS_ST_SAME, EXPR) U_F_NOT32(OP, EXPR)
#define U_F_VEC(OP, EXPR) LOOP1_F32_VEC(OP##_f32, EXPR) U_F_NOT32(OP, EXPR)
#define U_I(OP, EXPR)                                                \
  LOOP1(OP##_i64, int64_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)    \
  LOOP1(OP##_i32, int32_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)    \
  LOOP1(OP##_i16, int16_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)    \
  LOOP1(OP##_i8, int8_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)      \
  LOOP1(OP##_u8, uint8_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)
#define U_B(OP, EXPR) LOOP1(OP##_b, uint8_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)

#define B_F(OP, OS, ST, EXPR)                                          \
  LOOP2(OP##_f32, float, OS, float, TS_LD_SAME, ST, EXPR)              \
  LOOP2(OP##_f64, double, OS, double, TS_LD_SAME, ST, EXPR)            \
  LOOP2(OP##_f16, uint16_t, OS, float, TS_LD_F16, ST, EXPR)            \
  LOOP2(OP##_bf16, uint16_t, OS, float, TS_LD_BF16, ST, EXPR)
#define B_I(OP, OS, ST, EXPR)                                          \
  LOOP2(OP##_i64, int64_t, OS, int64_t, TS_LD_SAME, ST, EXPR)          \
  LOOP2(OP##_i32, int32_t, OS, int64_t, TS_LD_SAME, ST, EXPR)          \
  LOOP2(OP##_i16, int16_t, OS, int64_t, TS_LD_SAME, ST, EXPR)          \
  LOOP2(OP##_i8, int8_t, OS, int64_t, TS_LD_SAME, ST, EXPR)            \
  LOOP2(OP##_u8, uint8_t, OS, int64_t, TS_LD_SAME, ST, EXPR)
#define B_B(OP, OS, ST, EXPR) LOOP2(OP##_b, uint8_t, OS, int64_t, TS_LD_SAME, ST, EXPR)

/* Same-typed outputs: the float stores pick their own storage type. */
#define B_F_SAME(OP, EXPR)                                                   \
  LOOP2(OP##_f32, float, float, float, TS_LD_SAME, TS_ST_SAME, EXPR)         \
  LOOP2(OP##_f64, double, double, double, TS_LD_SAME, TS_ST_SAME, EXPR)      \
  LOOP2(OP##_f16, uint16_t, uint16_t, float, TS_LD_F16, TS_ST_F16, EXPR)     \
  LOOP2(OP##_bf16, uint16_t, uint16_t, float, TS_LD_BF16, TS_ST_BF16, EXPR)
#define B_I_SAME(OP, EXPR)                                                   \
  LOOP2(OP##_i64, int64_t, int64_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)   \
  LOOP2(OP##_i32, int32_t, int32_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)   \
  LOOP2(OP##_i16, int16_t, int16_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)   \
  LOOP2(OP##_i8, int8_t, int8_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)      \
  LOOP2(OP##_u8, uint8_t, uint8_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)
#define B_B_SAME(OP, EXPR) LOOP2(OP##_b, uint8_t, uint8_t, int64_t, TS_LD_SAME, TS_ST_SAME, EXPR)

/* ---- helpers used inside expressions ---- */

#define FREMAINDER(a, b) ({ ct r_ = fmod(a, b); (r_ != 0 && ((r_ < 0) != (b < 0))) ? r_ + b : r_; })
/* torch's div_floor for floats: the quotient of a - fmod(a, b), corrected by
 * one where fmod's sign differs from b's, so floor(7.0 / 0.7) is 9 (as
 * Python's //) and floor_divide(inf, 2) is NaN, as in PyTorch */
#define FFLOORDIV(a, b)                                                       \
  ({                                                                          \
    ct q_;                                                                    \
    if (b == 0) {                                                             \
      q_ = a / b;                                                             \
    } else {                                                                  \
      ct m_ = fmod(a, b), d_ = (a - m_) / b;                                  \
      if (m_ != 0 && ((b < 0) != (m_ < 0))) d_ -= 1;                          \
      if (d_ != 0) {                                                          \
        q_ = floor(d_);                                                       \
        if (d_ - q_ > (ct)0.5) q_ += 1;                                       \
      } else {                                                                \
        q_ = copysign((ct)0, a / b);                                          \
      }                                                                       \
    }                                                                         \
    q_;                                                                       \
  })
#define FMAX_NAN(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))
#define FMIN_NAN(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) < (b) ? (a) : (b))
/* GELU exact and with the tanh approximation (the call's i[0] 1): two loops,
 * so neither computes the other's formula in its lanes */
#define GELU_EXPR ((ct)0.5 * x * (1 + ERF(x * (ct)0.7071067811865476)))
#define GELU_TANH_EXPR ((ct)0.5 * x * (1 + TANH((ct)0.7978845608028654 * (x + (ct)0.044715 * x * x * x))))
/* min(max(x, lo), hi): with lo > hi every element is hi, as PyTorch; NaN stays */
#define CLAMP_EXPR(LO, HI) \
  ({ ct lo_ = ((flags_ & 1) && x < (LO)) ? (LO) : x; ((flags_ & 2) && lo_ > (HI)) ? (HI) : lo_; })
/* round(x, {decimals = d}) as torch: p0_ is 10^|d|, scaled, rounded half to even, scaled back */
#define ROUND_EXPR \
  (flags_ == 0 ? nearbyint(x) : flags_ > 0 ? nearbyint(x * p0_) / p0_ : nearbyint(x / p0_) * p0_)

/* ---- unary ---- */
/* integer negation through uint64: wraps at the minimum, as torch, instead of UB */
U_F(neg, -x)               U_I(neg, (int64_t)(0 - (uint64_t)x))
U_F(abs, fabs(x))          U_I(abs, x < 0 ? (int64_t)(0 - (uint64_t)x) : x)
/* (0 < x) - (x < 0), as PyTorch 1.13: NaN and -0 give +0 */
U_F(sign, (ct)((x > 0) - (x < 0))) U_I(sign, (x > 0) - (x < 0)) U_B(sign, x)
U_F(floor, floor(x))       U_I(floor, x)
U_F(ceil, ceil(x))         U_I(ceil, x)
U_F(round, ROUND_EXPR)     U_I(round, x)
U_F(trunc, trunc(x))       U_I(trunc, x)
U_F(relu, x < 0 ? (ct)0 : x) U_I(relu, x < 0 ? 0 : x)
U_F(exp, EXP(x))
U_F(log, log(x))
U_F(log1p, log1p(x))
U_F(sqrt, sqrt(x))
U_F(rsqrt, (ct)1 / sqrt(x))
U_F(sin, sin(x))
U_F(cos, cos(x))
U_F(tanh, TANH(x))
U_F(sigmoid, (ct)1 / ((ct)1 + EXP(-x)))
U_F_VEC(gelu, GELU_EXPR)
U_F_VEC(gelu_tanh, GELU_TANH_EXPR)
U_F(silu, x / ((ct)1 + EXP(-x)))
U_F(reciprocal, (ct)1 / x)
U_F(clamp, CLAMP_EXPR(p0_, p1_))
U_I(clamp, CLAMP_EXPR(p0_, p1_))
U_F(pow_scalar, pow(x, p0_))
U_I(pow_scalar, ts_ipow(x, (int64_t)ctx->f[0], &ctx->err))
U_I(bitnot, ~x) U_B(bitnot, !x)
U_F(expm1, expm1(x))
U_F(exp2, exp2(x))
U_F(log2, log2(x))
U_F(log10, log10(x))
U_F(tan, tan(x))
U_F(sinh, sinh(x))
U_F(cosh, cosh(x))
U_F(asinh, asinh(x))
U_F(acosh, acosh(x))
U_F(atanh, atanh(x))
U_F(asin, asin(x))
U_F(acos, acos(x))
U_F(atan, atan(x))
U_F_VEC(erf, ERF(x))
U_F(erfinv, (ct)ts_erfinv((double)x))
/* sin(pi x) / (pi x) with pi x rounded to the compute type, as PyTorch's kernel */
U_F(sinc, x == 0 ? (ct)1 : ({ ct px_ = (ct)M_PI * x; sin(px_) / px_; }))

/* logical_not reads any dtype and writes bool: its loops are two-typed */
#define LNOT(NAME, S, LD)                                                              \
  static void NAME(char **d, const int64_t *s, int64_t n, void *ctx) {                \
    (void)ctx;                                                                        \
    for (int64_t i = 0; i < n; i++) *(uint8_t *)(d[0] + i * s[0]) = !LD(d[1] + i * s[1], S); \
  }
LNOT(lnot_f32, float, TS_LD_SAME) LNOT(lnot_f64, double, TS_LD_SAME)
LNOT(lnot_f16, uint16_t, TS_LD_F16) LNOT(lnot_bf16, uint16_t, TS_LD_BF16)
LNOT(lnot_i64, int64_t, TS_LD_SAME) LNOT(lnot_i32, int32_t, TS_LD_SAME)
LNOT(lnot_i16, int16_t, TS_LD_SAME) LNOT(lnot_i8, int8_t, TS_LD_SAME)
LNOT(lnot_u8, uint8_t, TS_LD_SAME) LNOT(lnot_b, uint8_t, TS_LD_SAME)

/* ---- binary ---- */
B_F_SAME(add, a + alpha_ * b)   B_I_SAME(add, (int64_t)((uint64_t)a + (uint64_t)(alpha_ * b)))
B_B_SAME(add, a || b)
B_F_SAME(add1, a + b)                  B_I_SAME(add1, (int64_t)((uint64_t)a + (uint64_t)b))
B_F_SAME(sub, a - alpha_ * b)   B_I_SAME(sub, (int64_t)((uint64_t)a - (uint64_t)(alpha_ * b)))
B_F_SAME(mul, a * b)                   B_I_SAME(mul, (int64_t)((uint64_t)a * (uint64_t)b)) B_B_SAME(mul, a && b)
B_F_SAME(div, a / b)
B_F_SAME(floordiv, FFLOORDIV(a, b))    B_I_SAME(floordiv, ts_ifloordiv(a, b, &ctx->err))
B_F_SAME(remainder, FREMAINDER(a, b))  B_I_SAME(remainder, ts_iremainder(a, b, &ctx->err))
B_F_SAME(pow, pow(a, b))               B_I_SAME(pow, ts_ipow(a, b, &ctx->err))
B_F_SAME(maximum, FMAX_NAN(a, b))      B_I_SAME(maximum, a > b ? a : b) B_B_SAME(maximum, a || b)
B_F_SAME(minimum, FMIN_NAN(a, b))      B_I_SAME(minimum, a < b ? a : b) B_B_SAME(minimum, a && b)
B_F_SAME(fmod, fmod(a, b))             B_I_SAME(fmod, ts_ifmod(a, b, &ctx->err))
B_F_SAME(truncdiv, trunc(a / b))       B_I_SAME(truncdiv, ts_itruncdiv(a, b, &ctx->err))
B_I_SAME(bitand, a & b) B_B_SAME(bitand, a & b)
B_I_SAME(bitor, a | b)  B_B_SAME(bitor, a | b)
B_I_SAME(bitxor, a ^ b) B_B_SAME(bitxor, a ^ b)
B_F_SAME(atan2, atan2(a, b))
B_F_SAME(copysign, copysign(a, b))

#define CMP(OP, EXPR) B_F(OP, uint8_t, ST_BOOL, EXPR) B_I(OP, uint8_t, ST_BOOL, EXPR) B_B(OP, uint8_t, ST_BOOL, EXPR)
CMP(eq, a == b) CMP(ne, a != b) CMP(lt, a < b) CMP(le, a <= b) CMP(gt, a > b) CMP(ge, a >= b)
CMP(land, a != 0 && b != 0) CMP(lor, a != 0 || b != 0)

/* ---- the loop table ---- */

static ts_loop loops[TS_OP_COUNT][TS_DTYPE_COUNT];
static ts_loop add1_loops[TS_DTYPE_COUNT]; /* add with alpha 1: the common case, kept tight */
static ts_loop gelu_tanh_loops[TS_DTYPE_COUNT];

#define SET_F(TAB, OP) \
  TAB[TS_FLOAT32] = OP##_f32, TAB[TS_FLOAT64] = OP##_f64, TAB[TS_FLOAT16] = OP##_f16, TAB[TS_BFLOAT16] = OP##_bf16
#define SET_I(TAB, OP)                                                                          \
  TAB[TS_INT64] = OP##_i64, TAB[TS_INT32] = OP##_i32, TAB[TS_INT16] = OP##_i16, TAB[TS_INT8] = OP##_i8, \
  TAB[TS_UINT8] = OP##_u8
#define SET_FI(TAB, OP) SET_F(TAB, OP), SET_I(TAB, OP)
#define SET_FIB(TAB, OP) SET_FI(TAB, OP), TAB[TS_BOOL] = OP##_b
#define SET_IB(TAB, OP) SET_I(TAB, OP), TAB[TS_BOOL] = OP##_b

static void init_loops(void) {
  SET_FI(loops[TS_OP_NEG], neg);
  SET_FI(loops[TS_OP_ABS], abs);
  SET_FIB(loops[TS_OP_SIGN], sign);
  SET_FI(loops[TS_OP_FLOOR], floor);
  SET_FI(loops[TS_OP_CEIL], ceil);
  SET_FI(loops[TS_OP_ROUND], round);
  SET_FI(loops[TS_OP_TRUNC], trunc);
  SET_IB(loops[TS_OP_BITWISE_NOT], bitnot);
  SET_F(loops[TS_OP_EXPM1], expm1);
  SET_F(loops[TS_OP_EXP2], exp2);
  SET_F(loops[TS_OP_LOG2], log2);
  SET_F(loops[TS_OP_LOG10], log10);
  SET_F(loops[TS_OP_TAN], tan);
  SET_F(loops[TS_OP_SINH], sinh);
  SET_F(loops[TS_OP_COSH], cosh);
  SET_F(loops[TS_OP_ASINH], asinh);
  SET_F(loops[TS_OP_ACOSH], acosh);
  SET_F(loops[TS_OP_ATANH], atanh);
  SET_F(loops[TS_OP_ASIN], asin);
  SET_F(loops[TS_OP_ACOS], acos);
  SET_F(loops[TS_OP_ATAN], atan);
  SET_F(loops[TS_OP_ERF], erf);
  SET_F(loops[TS_OP_ERFINV], erfinv);
  SET_F(loops[TS_OP_SINC], sinc);
  SET_FI(loops[TS_OP_RELU], relu);
  SET_F(loops[TS_OP_EXP], exp);
  SET_F(loops[TS_OP_LOG], log);
  SET_F(loops[TS_OP_LOG1P], log1p);
  SET_F(loops[TS_OP_SQRT], sqrt);
  SET_F(loops[TS_OP_RSQRT], rsqrt);
  SET_F(loops[TS_OP_SIN], sin);
  SET_F(loops[TS_OP_COS], cos);
  SET_F(loops[TS_OP_TANH], tanh);
  SET_F(loops[TS_OP_SIGMOID], sigmoid);
  SET_F(loops[TS_OP_GELU], gelu);
  SET_F(gelu_tanh_loops, gelu_tanh);
  SET_F(loops[TS_OP_SILU], silu);
  SET_F(loops[TS_OP_RECIPROCAL], reciprocal);
  SET_FI(loops[TS_OP_CLAMP], clamp);
  SET_FI(loops[TS_OP_POW_SCALAR], pow_scalar);
  SET_FIB(loops[TS_OP_LOGICAL_NOT], lnot);
  SET_FIB(loops[TS_OP_ADD], add);
  SET_FI(add1_loops, add1);
  add1_loops[TS_BOOL] = add_b;
  SET_FI(loops[TS_OP_SUB], sub);
  SET_FIB(loops[TS_OP_MUL], mul);
  SET_F(loops[TS_OP_DIV], div);
  SET_FI(loops[TS_OP_FLOOR_DIVIDE], floordiv);
  SET_FI(loops[TS_OP_REMAINDER], remainder);
  SET_FI(loops[TS_OP_POW], pow);
  SET_FIB(loops[TS_OP_MAXIMUM], maximum);
  SET_FIB(loops[TS_OP_MINIMUM], minimum);
  SET_FI(loops[TS_OP_FMOD], fmod);
  SET_FI(loops[TS_OP_DIV_TRUNC], truncdiv);
  SET_IB(loops[TS_OP_BITWISE_AND], bitand);
  SET_IB(loops[TS_OP_BITWISE_OR], bitor);
  SET_IB(loops[TS_OP_BITWISE_XOR], bitxor);
  SET_F(loops[TS_OP_ATAN2], atan2);
  SET_F(loops[TS_OP_COPYSIGN], copysign);
  SET_FIB(loops[TS_OP_EQ], eq);
  SET_FIB(loops[TS_OP_NE], ne);
  SET_FIB(loops[TS_OP_LT], lt);
  SET_FIB(loops[TS_OP_LE], le);
  SET_FIB(loops[TS_OP_GT], gt);
  SET_FIB(loops[TS_OP_GE], ge);
  SET_FIB(loops[TS_OP_LOGICAL_AND], land);
  SET_FIB(loops[TS_OP_LOGICAL_OR], lor);
}

/* The dtype the loop is chosen by: the inputs' (comparisons write bool). */
static ts_status run_loop(const ts_call *c, ts_loop fn) {
  ts_dtype dt = c->in[0]->dtype;
  if (!fn) return ts_fail(TS_ERR_DTYPE, "%s is not implemented for %s", ts_ops[c->op].name, ts_dtype_name(dt));
  ts_tensor *ops[TS_ITER_MAX_OPS] = {c->out[0]};
  for (int k = 0; k < c->nin; k++) ops[k + 1] = c->in[k];
  ts_loop_ctx ctx = {.err = 0};
  for (int k = 0; k < 4; k++) ctx.f[k] = c->f[k], ctx.i[k] = c->i[k];
  int64_t n = ts_numel(c->out[0]);
  bool dense = n < TS_PARALLEL_GRAIN;
  for (int k = 0; k <= c->nin && dense; k++) dense = ts_is_contiguous(ops[k]);
  if (dense) { /* small and contiguous: one inner loop, no iterator set-up */
    char *data[TS_ITER_MAX_OPS];
    int64_t strides[TS_ITER_MAX_OPS];
    for (int k = 0; k <= c->nin; k++) data[k] = ts_data(ops[k]), strides[k] = (int64_t)ts_dtype_size(ops[k]->dtype);
    if (n > 0) fn(data, strides, n, &ctx);
  } else {
    ts_iter it;
    ts_iter_init(&it, c->nin + 1, ops);
    ts_status st = ts_iter_run(&it, fn, &ctx);
    if (st) return st;
  }
  if (ctx.err == 1) return ts_fail(TS_ERR_ARG, "%s: integers to negative integer powers are not allowed", ts_ops[c->op].name);
  if (ctx.err == 2) return ts_fail(TS_ERR_ARG, "%s: integer division by zero", ts_ops[c->op].name);
  return TS_OK;
}

static ts_status k_elementwise(const ts_call *c) {
  ts_dtype dt = c->in[0]->dtype;
  ts_loop fn = loops[c->op][dt];
  if (c->op == TS_OP_ADD && c->f[0] == 1) fn = add1_loops[dt];
  if (c->op == TS_OP_GELU && c->i[0]) fn = gelu_tanh_loops[dt];
  return run_loop(c, fn);
}

/* where(cond, a, b): a and b share a dtype; the loop copies bytes. A unit-stride
 * cond and out with a and b each unit-stride or a broadcast scalar (ReLU's backward
 * is where(y > 0, g, 0)) take branch-free loops the compiler vectorises: both
 * values are loaded, then selected. */
#define WHERE_LOOP(NAME, S)                                                             \
  static void NAME(char **d, const int64_t *s, int64_t n, void *ctx) {                 \
    (void)ctx;                                                                         \
    if (s[0] == sizeof(S) && s[1] == 1 && (s[2] == sizeof(S) || s[2] == 0) &&           \
        (s[3] == sizeof(S) || s[3] == 0)) {                                            \
      S *restrict o = (S *)d[0];                                                       \
      const uint8_t *restrict m = (const uint8_t *)d[1];                               \
      const S *restrict a = (const S *)d[2], *restrict b = (const S *)d[3];            \
      if (s[2] && s[3])                                                                \
        for (int64_t i = 0; i < n; i++) { S av = a[i], bv = b[i]; o[i] = m[i] ? av : bv; } \
      else if (s[2]) {                                                                 \
        const S bv = *b;                                                               \
        for (int64_t i = 0; i < n; i++) { S av = a[i]; o[i] = m[i] ? av : bv; }        \
      } else if (s[3]) {                                                               \
        const S av = *a;                                                               \
        for (int64_t i = 0; i < n; i++) { S bv = b[i]; o[i] = m[i] ? av : bv; }        \
      } else {                                                                         \
        const S av = *a, bv = *b;                                                      \
        for (int64_t i = 0; i < n; i++) o[i] = m[i] ? av : bv;                         \
      }                                                                                \
      return;                                                                          \
    }                                                                                  \
    for (int64_t i = 0; i < n; i++)                                                    \
      *(S *)(d[0] + i * s[0]) = *(const uint8_t *)(d[1] + i * s[1]) ? *(const S *)(d[2] + i * s[2]) \
                                                                    : *(const S *)(d[3] + i * s[3]); \
  }
WHERE_LOOP(where8, uint64_t) WHERE_LOOP(where4, uint32_t) WHERE_LOOP(where2, uint16_t) WHERE_LOOP(where1, uint8_t)

static ts_status k_where(const ts_call *c) {
  static const ts_loop by_size[9] = {[1] = where1, [2] = where2, [4] = where4, [8] = where8};
  ts_tensor *ops[4] = {c->out[0], c->in[0], c->in[1], c->in[2]};
  ts_iter it;
  ts_iter_init(&it, 4, ops);
  return ts_iter_run(&it, by_size[ts_dtype_size(c->out[0]->dtype)], NULL);
}

/* lerp: start + w*(end-start), from the nearer end for precision (as torch). */
#define LERP_LOOP(NAME, S, C, LD, ST)                                                    \
  static void NAME(char **d, const int64_t *s, int64_t n, void *ctx) {                  \
    (void)ctx;                                                                          \
    for (int64_t i = 0; i < n; i++) {                                                   \
      C a = LD(d[1] + i * s[1], S), b = LD(d[2] + i * s[2], S), w = LD(d[3] + i * s[3], S); \
      C r = fabs(w) < (C)0.5 ? a + w * (b - a) : b - (b - a) * ((C)1 - w);                \
      ST(d[0] + i * s[0], S, r);                                                        \
    }                                                                                   \
  }
LERP_LOOP(lerp_f32, float, float, TS_LD_SAME, TS_ST_SAME)
LERP_LOOP(lerp_f64, double, double, TS_LD_SAME, TS_ST_SAME)
LERP_LOOP(lerp_f16, uint16_t, float, TS_LD_F16, TS_ST_F16)
LERP_LOOP(lerp_bf16, uint16_t, float, TS_LD_BF16, TS_ST_BF16)

static ts_status k_lerp(const ts_call *c) {
  static ts_loop lerp_loops[TS_DTYPE_COUNT];
  SET_F(lerp_loops, lerp);
  ts_tensor *ops[4] = {c->out[0], c->in[0], c->in[1], c->in[2]};
  ts_iter it;
  ts_iter_init(&it, 4, ops);
  return ts_iter_run(&it, lerp_loops[c->out[0]->dtype], NULL);
}

/* threshold_backward: out = y <= 0 ? 0 : g (operands out, g, y), so a NaN
 * passes the gradient, as ATen's threshold_backward. Unit strides
 * take a loop the compiler vectorises (a compare and a mask); half types
 * compare y in float and move g's bits. */
#define THRESHOLD_BW_LOOP(NAME, S, LD)                                                   \
  static void NAME(char **d, const int64_t *s, int64_t n, void *ctx) {                  \
    (void)ctx;                                                                          \
    if (s[0] == sizeof(S) && s[1] == sizeof(S) && s[2] == sizeof(S)) {                   \
      S *restrict o = (S *)d[0];                                                        \
      const S *restrict g = (const S *)d[1], *restrict y = (const S *)d[2];             \
      for (int64_t i = 0; i < n; i++) { S gv = g[i]; o[i] = LD(y + i, S) <= 0 ? (S)0 : gv; } \
      return;                                                                           \
    }                                                                                   \
    for (int64_t i = 0; i < n; i++)                                                     \
      *(S *)(d[0] + i * s[0]) = LD(d[2] + i * s[2], S) <= 0 ? (S)0 : *(const S *)(d[1] + i * s[1]); \
  }
THRESHOLD_BW_LOOP(threshold_bw_f32, float, TS_LD_SAME)
THRESHOLD_BW_LOOP(threshold_bw_f64, double, TS_LD_SAME)
THRESHOLD_BW_LOOP(threshold_bw_f16, uint16_t, TS_LD_F16)
THRESHOLD_BW_LOOP(threshold_bw_bf16, uint16_t, TS_LD_BF16)

static ts_status k_threshold_backward(const ts_call *c) {
  ts_dtype dt = c->out[0]->dtype;
  ts_loop fn = dt == TS_FLOAT32 ? threshold_bw_f32 : dt == TS_FLOAT64 ? threshold_bw_f64
             : dt == TS_FLOAT16 ? threshold_bw_f16 : dt == TS_BFLOAT16 ? threshold_bw_bf16 : NULL;
  if (!fn) return ts_fail(TS_ERR_DTYPE, "threshold_backward: unexpected dtype %s", ts_dtype_name(dt));
  ts_tensor *ops[3] = {c->out[0], c->in[0], c->in[1]};
  int64_t n = ts_numel(c->out[0]);
  if (n < TS_PARALLEL_GRAIN && ts_is_contiguous(ops[0]) && ts_is_contiguous(ops[1]) && ts_is_contiguous(ops[2])) {
    char *data[3] = {ts_data(ops[0]), ts_data(ops[1]), ts_data(ops[2])};
    int64_t w = (int64_t)ts_dtype_size(dt), strides[3] = {w, w, w};
    if (n > 0) fn(data, strides, n, NULL);
    return TS_OK;
  }
  ts_iter it;
  ts_iter_init(&it, 3, ops);
  return ts_iter_run(&it, fn, NULL);
}

void ts_cpu_register_elementwise(ts_kernel *k) {
  init_loops();
  for (int op = 0; op < TS_OP_COUNT; op++) {
    ts_op_kind kind = ts_ops[op].kind;
    if (kind == TS_KIND_UNARY || kind == TS_KIND_UNARY_FLOAT || kind == TS_KIND_UNARY_BOOL ||
        kind == TS_KIND_BINARY || kind == TS_KIND_BINARY_FLOAT || kind == TS_KIND_COMPARE)
      k[op] = k_elementwise;
  }
  k[TS_OP_WHERE] = k_where;
  k[TS_OP_LERP] = k_lerp;
  k[TS_OP_THRESHOLD_BACKWARD] = k_threshold_backward;
}
