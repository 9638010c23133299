// CUDA kernels of the elementwise family: unary, binary and comparison ops,
// WHERE, LERP and THRESHOLD_BACKWARD, on the machinery of loops.cuh.
// src/cpu/elementwise.c is the spec: the same compute types (float for
// float16/bfloat16, int64 for every integer type and bool), the same formulas (round half to even, NaN through
// clamp/maximum, Python's signs for floor_divide and remainder, C's for fmod), the same
// errors (integer division by zero, integers to negative integer powers),
// found here through a device flag read back after the launch.
//
// The op layer has broadcast and cast the inputs (ops.h): every input has
// out's shape and the compute dtype; comparisons write bool.
#include <math.h>

#include "loops.cuh"
#include "core/erfinv.h"
// Integer pow, floor division, remainder... as the CPU's (core/int_maths.h).
// Many threads may meet an error and store the same code: tsc_store_any's
// stores that meet by design (an atomicExch here made the int8 kernels spill).
#define TS_INT_ERROR(err, code) ((err) ? tsc_store_any((int *)(err), (code)) : (void)0)
#define TS_INT_HD __device__ __attribute__((always_inline))
#include "core/int_maths.h"

namespace {

// ---- math on the compute type (float or double), no contraction ----------
#define TSC_M1(NAME, FF, DF)                                               \
  __device__ __forceinline__ float NAME(float x) { return FF(x); }        \
  __device__ __forceinline__ double NAME(double x) { return DF(x); }
TSC_M1(m_floor, floorf, floor)
TSC_M1(m_ceil, ceilf, ceil)
TSC_M1(m_rint, rintf, rint) // half to even (nearbyint under the default rounding)
TSC_M1(m_fabs, fabsf, fabs)
TSC_M1(m_exp, expf, exp)
TSC_M1(m_log, logf, log)
TSC_M1(m_log1p, log1pf, log1p)
TSC_M1(m_sqrt, sqrtf, sqrt)
TSC_M1(m_sin, sinf, sin)
TSC_M1(m_cos, cosf, cos)
TSC_M1(m_tanh, tanhf, tanh)
TSC_M1(m_erf, erff, erf)
TSC_M1(m_trunc, truncf, trunc)
TSC_M1(m_expm1, expm1f, expm1)
TSC_M1(m_exp2, exp2f, exp2)
TSC_M1(m_log2, log2f, log2)
TSC_M1(m_log10, log10f, log10)
TSC_M1(m_tan, tanf, tan)
TSC_M1(m_sinh, sinhf, sinh)
TSC_M1(m_cosh, coshf, cosh)
TSC_M1(m_asinh, asinhf, asinh)
TSC_M1(m_acosh, acoshf, acosh)
TSC_M1(m_atanh, atanhf, atanh)
TSC_M1(m_asin, asinf, asin)
TSC_M1(m_acos, acosf, acos)
TSC_M1(m_atan, atanf, atan)
#undef TSC_M1
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float m_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double m_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float m_atan2(float a, float b) { return atan2f(a, b); }
__device__ __forceinline__ double m_atan2(double a, double b) { return atan2(a, b); }
__device__ __forceinline__ float m_copysign(float a, float b) { return copysignf(a, b); }
__device__ __forceinline__ double m_copysign(double a, double b) { return copysign(a, b); }
// Rounded products and sums the compiler may not fuse into an FMA: the CPU
// build (ISO C, no FMA contraction) rounds each, and these give its bits.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }

template <typename C> constexpr bool is_int_v = std::is_integral<C>::value;

// torch's div_floor for floats (the CPU's FFLOORDIV): from a - fmod(a, b), so
// floor_divide(inf, 2) is NaN and floor(7.0 / 0.7) is 9, as Python's //
template <typename C> __device__ __forceinline__ C ffloordiv(C a, C b) {
  if (b == 0) return a / b;
  C m = m_fmod(a, b), d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
  if (d == 0) return m_copysign((C)0, a / b);
  C q = m_floor(d);
  return d - q > (C)0.5 ? q + 1 : q;
}

// ---- unary functors (C: the compute type) ----------------------------------
struct f_neg {
  template <typename C> __device__ C operator()(C x) const {
    if constexpr (is_int_v<C>) return (C)(0 - (uint64_t)x); // wraps at the minimum
    else return -x;
  }
};
struct f_abs {
  template <typename C> __device__ C operator()(C x) const {
    if constexpr (is_int_v<C>) return x < 0 ? (C)(0 - (uint64_t)x) : x;
    else return m_fabs(x);
  }
};
struct f_sign { // (0 < x) - (x < 0) as PyTorch 1.13: NaN and -0 give +0; bool: x itself
  template <typename C> __device__ C operator()(C x) const { return (C)((x > (C)0) - (x < (C)0)); }
};
struct f_ident { // floor, ceil and round of integers
  template <typename C> __device__ C operator()(C x) const { return x; }
};
struct f_floor { template <typename C> __device__ C operator()(C x) const { return m_floor(x); } };
struct f_ceil { template <typename C> __device__ C operator()(C x) const { return m_ceil(x); } };
struct f_round { // decimals d (i[0]) with p = 10^|d| (f[0]), as the CPU's ROUND_EXPR
  int64_t d;
  double p;
  template <typename C> __device__ C operator()(C x) const {
    C pc = (C)p;
    return d == 0 ? m_rint(x) : d > 0 ? m_rint(x * pc) / pc : m_rint(x / pc) * pc;
  }
};
struct f_trunc { template <typename C> __device__ C operator()(C x) const { return m_trunc(x); } };
template <bool IS_BOOL> struct f_bitnot { // integers: ~x; bool (computed as int64 0 or 1): not
  template <typename C> __device__ C operator()(C x) const {
    if constexpr (IS_BOOL) return (C)(x == 0);
    else return (C)~x;
  }
};
#define TSC_F1(NAME, M) \
  struct NAME { template <typename C> __device__ C operator()(C x) const { return M(x); } };
TSC_F1(f_expm1, m_expm1)
TSC_F1(f_exp2, m_exp2)
TSC_F1(f_log2, m_log2)
TSC_F1(f_log10, m_log10)
TSC_F1(f_tan, m_tan)
TSC_F1(f_sinh, m_sinh)
TSC_F1(f_cosh, m_cosh)
TSC_F1(f_asinh, m_asinh)
TSC_F1(f_acosh, m_acosh)
TSC_F1(f_atanh, m_atanh)
TSC_F1(f_asin, m_asin)
TSC_F1(f_acos, m_acos)
TSC_F1(f_atan, m_atan)
TSC_F1(f_erf, m_erf)
#undef TSC_F1
struct f_erfinv { template <typename C> __device__ C operator()(C x) const { return (C)ts_erfinv((double)x); } };
struct f_sinc { // sin(pi x) / (pi x), 1 at 0, as the CPU and PyTorch
  template <typename C> __device__ C operator()(C x) const {
    C px = (C)3.14159265358979323846 * x;
    return x == (C)0 ? (C)1 : m_sin(px) / px;
  }
};
struct f_relu { template <typename C> __device__ C operator()(C x) const { return x < 0 ? (C)0 : x; } };
struct f_exp { template <typename C> __device__ C operator()(C x) const { return m_exp(x); } };
struct f_log { template <typename C> __device__ C operator()(C x) const { return m_log(x); } };
struct f_log1p { template <typename C> __device__ C operator()(C x) const { return m_log1p(x); } };
struct f_sqrt { template <typename C> __device__ C operator()(C x) const { return m_sqrt(x); } };
// 1/sqrt(x), two roundings as the CPU (rsqrtf is not correctly rounded)
struct f_rsqrt { template <typename C> __device__ C operator()(C x) const { return (C)1 / m_sqrt(x); } };
struct f_sin { template <typename C> __device__ C operator()(C x) const { return m_sin(x); } };
struct f_cos { template <typename C> __device__ C operator()(C x) const { return m_cos(x); } };
struct f_tanh { template <typename C> __device__ C operator()(C x) const { return m_tanh(x); } };
struct f_sigmoid { template <typename C> __device__ C operator()(C x) const { return (C)1 / ((C)1 + m_exp(-x)); } };
struct f_silu { template <typename C> __device__ C operator()(C x) const { return x / ((C)1 + m_exp(-x)); } };
struct f_reciprocal { template <typename C> __device__ C operator()(C x) const { return (C)1 / x; } };
struct f_gelu {
  bool approx; // i[0] == 1: the tanh approximation
  template <typename C> __device__ C operator()(C x) const {
    if (approx) {
      C inner = mul_rn((C)0.7978845608028654, add_rn(x, mul_rn(mul_rn(mul_rn((C)0.044715, x), x), x)));
      return mul_rn(mul_rn((C)0.5, x), add_rn((C)1, m_tanh(inner)));
    }
    return mul_rn(mul_rn((C)0.5, x), add_rn((C)1, m_erf(mul_rn(x, (C)0.7071067811865476))));
  }
};
// Integers compare with their bounds in int64, as the CPU: an int8 clamped
// to [-1000, 1000] is unchanged, to [200, 300] becomes (int8)200.
template <typename C> using clamp_t = std::conditional_t<is_int_v<C>, int64_t, C>;
template <typename C> struct f_clamp {
  int64_t flags; // bit 1: lo; bit 2: hi
  clamp_t<C> lo, hi;
  // min(max(x, lo), hi): lo > hi gives hi (PyTorch), NaN x stays NaN, as the CPU
  __device__ C operator()(C x) const {
    clamp_t<C> y = ((flags & 1) && x < lo) ? lo : (clamp_t<C>)x;
    return (C)(((flags & 2) && y > hi) ? hi : y);
  }
};
template <typename C> struct f_pow_scalar {
  C p; // the exponent: (C)f[0]; integers: (int64_t)f[0]
  int *err;
  __device__ C operator()(C x) const {
    if constexpr (is_int_v<C>) return ts_ipow(x, p, err);
    else return p == (C)2 ? x * x : m_pow(x, p); // x*x is pow's correctly rounded value
  }
};
struct f_logical_not { template <typename C> __device__ bool operator()(C x) const { return !(x != (C)0); } };

// ---- binary functors ---------------------------------------------------------
template <typename C> struct f_add { // a + alpha*b
  C alpha;
  __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) return (C)((uint64_t)a + (uint64_t)alpha * (uint64_t)b);
    else return add_rn(a, mul_rn(alpha, b));
  }
};
template <typename C> struct f_sub { // a - alpha*b
  C alpha;
  __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) return (C)((uint64_t)a - (uint64_t)alpha * (uint64_t)b);
    else return sub_rn(a, mul_rn(alpha, b));
  }
};
struct f_add1 { // alpha 1, the common case
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) return (C)((uint64_t)a + (uint64_t)b);
    else return a + b;
  }
};
struct f_mul {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) return (C)((uint64_t)a * (uint64_t)b);
    else return a * b;
  }
};
struct f_div { template <typename C> __device__ C operator()(C a, C b) const { return a / b; } };
struct f_floordiv {
  int *err;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) return ts_ifloordiv(a, b, err);
    else return ffloordiv(a, b);
  }
};
struct f_remainder {
  int *err;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) {
      return ts_iremainder(a, b, err);
    } else {
      C r = m_fmod(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
  }
};
struct f_fmod {
  int *err;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) return ts_ifmod(a, b, err);
    else return m_fmod(a, b);
  }
};
struct f_truncdiv {
  int *err;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) return ts_itruncdiv(a, b, err);
    else return m_trunc(a / b);
  }
};
struct f_atan2 { template <typename C> __device__ C operator()(C a, C b) const { return m_atan2(a, b); } };
struct f_copysign { template <typename C> __device__ C operator()(C a, C b) const { return m_copysign(a, b); } };
struct f_bitand { template <typename C> __device__ C operator()(C a, C b) const { return a & b; } };
struct f_bitor { template <typename C> __device__ C operator()(C a, C b) const { return a | b; } };
struct f_bitxor { template <typename C> __device__ C operator()(C a, C b) const { return a ^ b; } };
struct f_pow {
  int *err;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (is_int_v<C>) return ts_ipow(a, b, err);
    else return m_pow(a, b);
  }
};
struct f_maximum { // NaN wins
  template <typename C> __device__ C operator()(C a, C b) const { return a != a ? a : b != b ? b : a > b ? a : b; }
};
struct f_minimum {
  template <typename C> __device__ C operator()(C a, C b) const { return a != a ? a : b != b ? b : a < b ? a : b; }
};
struct f_or { template <typename C> __device__ C operator()(C a, C b) const { return a || b; } };  // bool add, maximum
struct f_and { template <typename C> __device__ C operator()(C a, C b) const { return a && b; } }; // bool mul, minimum

#define TSC_CMP(NAME, EXPR) \
  struct NAME { template <typename C> __device__ bool operator()(C a, C b) const { return EXPR; } };
TSC_CMP(f_eq, a == b)
TSC_CMP(f_ne, a != b)
TSC_CMP(f_lt, a < b)
TSC_CMP(f_le, a <= b)
TSC_CMP(f_gt, a > b)
TSC_CMP(f_ge, a >= b)
TSC_CMP(f_land, a != 0 && b != 0)
TSC_CMP(f_lor, a != 0 || b != 0)
#undef TSC_CMP

// ---- dispatch -------------------------------------------------------------------
enum { DF = 1, DI = 2, DB = 4 }; // floating, integer, bool storage types

template <typename S> constexpr int dclass() {
  return tsc_is_float<S>::value ? DF : std::is_same<S, bool>::value ? DB : DI;
}

// Calls g(S{}) for the storage type of dt when its class is in SETS; the
// other types are never instantiated.
template <int SETS, typename G> ts_status by_dtype(const ts_call *c, ts_dtype dt, G &&g) {
  return tsc_dispatch(dt, [&](auto tag) -> ts_status {
    using S = decltype(tag);
    if constexpr ((SETS & dclass<S>()) != 0) return g(tag);
    else return ts_fail(TS_ERR_DTYPE, "%s is not implemented for %s on cuda", ts_ops[c->op].name, ts_dtype_name(dt));
  });
}

const char *op_name(const ts_call *c) { return ts_ops[c->op].name; }

// out (S) = f(in[0] (S)), computed in tsc_ew_t<S>
template <typename S, typename F> ts_status unary(const ts_call *c, F f) {
  return tsc_elementwise<S, S>(op_name(c), c->out[0], c->in, tsc_make_via<S, tsc_ew_t<S>>(f));
}
// out (O) = f(in[0] (S), in[1] (S)): O is S, or bool for comparisons
template <typename O, typename S, typename F> ts_status binary(const ts_call *c, F f) {
  return tsc_elementwise<O, S, S>(op_name(c), c->out[0], c->in, tsc_make_via<O, tsc_ew_t<S>>(f));
}

// The value of input k when it is a host scalar (a Lua number): lets the
// launcher skip the error flag when the scalar rules the error out.
template <typename S> bool host_value(const ts_call *c, int k, tsc_ew_t<S> *v) {
  if (c->in[k]->device.type == TS_CUDA) return false;
  S s;
  memcpy(&s, ts_data(c->in[k]), sizeof s);
  *v = tsc_cvt<tsc_ew_t<S>>(s);
  return true;
}

ts_status flag_error(const ts_call *c, int code) {
  if (code == 1) return ts_fail(TS_ERR_ARG, "%s: integers to negative integer powers are not allowed", op_name(c));
  if (code == 2) return ts_fail(TS_ERR_ARG, "%s: integer division by zero", op_name(c));
  return TS_OK;
}

// Runs launch(err) with err a device flag when `need`, else nullptr; reads
// the flag back (a host sync) and turns it into the CPU's error.
template <typename L> ts_status with_flag(const ts_call *c, bool need, L &&launch) {
  if (!need) return launch((int *)nullptr);
  tsc_flag flag;
  ts_status st = flag.init();
  if (st) return st;
  if ((st = launch(flag.d))) return st;
  int code;
  if ((st = flag.read(&code))) return st;
  return flag_error(c, code);
}

ts_status k_unary(const ts_call *c) {
  ts_dtype dt = c->in[0]->dtype;
  switch (c->op) {
  case TS_OP_NEG: return by_dtype<DF | DI>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_neg{}); });
  case TS_OP_ABS: return by_dtype<DF | DI>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_abs{}); });
  case TS_OP_SIGN: return by_dtype<DF | DI | DB>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_sign{}); });
  case TS_OP_RELU: return by_dtype<DF | DI>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_relu{}); });
  case TS_OP_FLOOR:
  case TS_OP_CEIL:
  case TS_OP_ROUND:
  case TS_OP_TRUNC:
    if (ts_dtype_is_int(dt)) return by_dtype<DI>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_ident{}); });
    return by_dtype<DF>(c, dt, [&](auto t) {
      using S = decltype(t);
      switch (c->op) {
      case TS_OP_FLOOR: return unary<S>(c, f_floor{});
      case TS_OP_CEIL: return unary<S>(c, f_ceil{});
      case TS_OP_TRUNC: return unary<S>(c, f_trunc{});
      default: return unary<S>(c, f_round{c->i[0], c->f[0]});
      }
    });
  case TS_OP_BITWISE_NOT:
    return by_dtype<DI | DB>(c, dt, [&](auto t) {
      using S = decltype(t);
      return unary<S>(c, f_bitnot<std::is_same<S, bool>::value>{});
    });
  case TS_OP_EXPM1: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_expm1{}); });
  case TS_OP_EXP2: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_exp2{}); });
  case TS_OP_LOG2: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_log2{}); });
  case TS_OP_LOG10: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_log10{}); });
  case TS_OP_TAN: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_tan{}); });
  case TS_OP_SINH: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_sinh{}); });
  case TS_OP_COSH: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_cosh{}); });
  case TS_OP_ASINH: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_asinh{}); });
  case TS_OP_ACOSH: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_acosh{}); });
  case TS_OP_ATANH: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_atanh{}); });
  case TS_OP_ASIN: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_asin{}); });
  case TS_OP_ACOS: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_acos{}); });
  case TS_OP_ATAN: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_atan{}); });
  case TS_OP_ERF: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_erf{}); });
  case TS_OP_ERFINV: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_erfinv{}); });
  case TS_OP_SINC: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_sinc{}); });
  case TS_OP_EXP: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_exp{}); });
  case TS_OP_LOG: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_log{}); });
  case TS_OP_LOG1P: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_log1p{}); });
  case TS_OP_SQRT: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_sqrt{}); });
  case TS_OP_RSQRT: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_rsqrt{}); });
  case TS_OP_SIN: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_sin{}); });
  case TS_OP_COS: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_cos{}); });
  case TS_OP_TANH: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_tanh{}); });
  case TS_OP_SIGMOID: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_sigmoid{}); });
  case TS_OP_SILU: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_silu{}); });
  case TS_OP_RECIPROCAL: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_reciprocal{}); });
  case TS_OP_GELU: return by_dtype<DF>(c, dt, [&](auto t) { return unary<decltype(t)>(c, f_gelu{c->i[0] != 0}); });
  case TS_OP_CLAMP:
    return by_dtype<DF | DI>(c, dt, [&](auto t) {
      using C = tsc_ew_t<decltype(t)>;
      return unary<decltype(t)>(c, f_clamp<C>{c->i[0], (clamp_t<C>)c->f[0], (clamp_t<C>)c->f[1]});
    });
  case TS_OP_POW_SCALAR:
    return by_dtype<DF | DI>(c, dt, [&](auto t) {
      using S = decltype(t);
      using C = tsc_ew_t<S>;
      // integers: only a negative exponent can fail (and only for bases other than +-1)
      return with_flag(c, is_int_v<C> && c->f[0] < 0, [&](int *err) { return unary<S>(c, f_pow_scalar<C>{(C)c->f[0], err}); });
    });
  case TS_OP_LOGICAL_NOT:
    return by_dtype<DF | DI | DB>(c, dt, [&](auto t) {
      using S = decltype(t);
      return tsc_elementwise<bool, S>(op_name(c), c->out[0], c->in, tsc_make_via<bool, tsc_ew_t<S>>(f_logical_not{}));
    });
  default: return ts_fail(TS_ERR_UNSUPPORTED, "%s: not an elementwise op", op_name(c));
  }
}

ts_status k_binary(const ts_call *c) {
  ts_dtype dt = c->in[0]->dtype;
  switch (c->op) {
  case TS_OP_ADD:
  case TS_OP_SUB:
    return by_dtype<DF | DI | DB>(c, dt, [&](auto t) {
      using S = decltype(t);
      using C = tsc_ew_t<S>;
      if constexpr (std::is_same<S, bool>::value) return binary<S, S>(c, f_or{}); // the op layer refuses bool sub
      else if (c->op == TS_OP_ADD && c->f[0] == 1) return binary<S, S>(c, f_add1{});
      else if (c->op == TS_OP_ADD) return binary<S, S>(c, f_add<C>{(C)c->f[0]});
      else return binary<S, S>(c, f_sub<C>{(C)c->f[0]});
    });
  case TS_OP_MUL:
    return by_dtype<DF | DI | DB>(c, dt, [&](auto t) {
      using S = decltype(t);
      if constexpr (std::is_same<S, bool>::value) return binary<S, S>(c, f_and{});
      else return binary<S, S>(c, f_mul{});
    });
  case TS_OP_DIV: return by_dtype<DF>(c, dt, [&](auto t) { return binary<decltype(t), decltype(t)>(c, f_div{}); });
  case TS_OP_FLOOR_DIVIDE:
  case TS_OP_REMAINDER:
  case TS_OP_FMOD:
  case TS_OP_DIV_TRUNC:
  case TS_OP_POW:
    return by_dtype<DF | DI>(c, dt, [&](auto t) {
      using S = decltype(t);
      using C = tsc_ew_t<S>;
      bool need = false;
      if constexpr (is_int_v<C>) {
        C b;
        bool known = host_value<S>(c, 1, &b); // x // 3, x % 3, x ^ 2: decided here, no flag, no sync
        if (c->op == TS_OP_POW) need = !known || b < 0;
        else if (known && b == 0) return flag_error(c, 2);
        else need = !known;
      }
      return with_flag(c, need, [&](int *err) {
        switch (c->op) {
        case TS_OP_FLOOR_DIVIDE: return binary<S, S>(c, f_floordiv{err});
        case TS_OP_REMAINDER: return binary<S, S>(c, f_remainder{err});
        case TS_OP_FMOD: return binary<S, S>(c, f_fmod{err});
        case TS_OP_DIV_TRUNC: return binary<S, S>(c, f_truncdiv{err});
        default: return binary<S, S>(c, f_pow{err});
        }
      });
    });
  case TS_OP_BITWISE_AND:
  case TS_OP_BITWISE_OR:
  case TS_OP_BITWISE_XOR:
    return by_dtype<DI | DB>(c, dt, [&](auto t) {
      using S = decltype(t);
      if (c->op == TS_OP_BITWISE_AND) return binary<S, S>(c, f_bitand{});
      if (c->op == TS_OP_BITWISE_OR) return binary<S, S>(c, f_bitor{});
      return binary<S, S>(c, f_bitxor{});
    });
  case TS_OP_ATAN2:
  case TS_OP_COPYSIGN:
    return by_dtype<DF>(c, dt, [&](auto t) {
      using S = decltype(t);
      return c->op == TS_OP_ATAN2 ? binary<S, S>(c, f_atan2{}) : binary<S, S>(c, f_copysign{});
    });
  case TS_OP_MAXIMUM:
  case TS_OP_MINIMUM:
    return by_dtype<DF | DI | DB>(c, dt, [&](auto t) {
      using S = decltype(t);
      bool mx = c->op == TS_OP_MAXIMUM;
      if constexpr (std::is_same<S, bool>::value) return mx ? binary<S, S>(c, f_or{}) : binary<S, S>(c, f_and{});
      else return mx ? binary<S, S>(c, f_maximum{}) : binary<S, S>(c, f_minimum{});
    });
  default: break;
  }
  return by_dtype<DF | DI | DB>(c, dt, [&](auto t) {
    using S = decltype(t);
    switch (c->op) {
    case TS_OP_EQ: return binary<bool, S>(c, f_eq{});
    case TS_OP_NE: return binary<bool, S>(c, f_ne{});
    case TS_OP_LT: return binary<bool, S>(c, f_lt{});
    case TS_OP_LE: return binary<bool, S>(c, f_le{});
    case TS_OP_GT: return binary<bool, S>(c, f_gt{});
    case TS_OP_GE: return binary<bool, S>(c, f_ge{});
    case TS_OP_LOGICAL_AND: return binary<bool, S>(c, f_land{});
    case TS_OP_LOGICAL_OR: return binary<bool, S>(c, f_lor{});
    default: return ts_fail(TS_ERR_UNSUPPORTED, "%s: not an elementwise op", op_name(c));
    }
  });
}

// where(cond, a, b): a and b share out's dtype; the values are moved as bits
// of their width, so one kernel serves every dtype of that width.
struct f_where {
  template <typename U> __device__ U operator()(bool cond, U a, U b) const { return cond ? a : b; }
};

template <typename U> ts_status where_bits(const ts_call *c) {
  return tsc_elementwise<U, bool, U, U>("where", c->out[0], c->in, f_where{});
}

ts_status k_where(const ts_call *c) {
  switch (ts_dtype_size(c->out[0]->dtype)) {
  case 1: return where_bits<uint8_t>(c);
  case 2: return where_bits<uint16_t>(c);
  case 4: return where_bits<uint32_t>(c);
  case 8: return where_bits<uint64_t>(c);
  default: return ts_fail(TS_ERR_DTYPE, "where: unexpected dtype %s on cuda", ts_dtype_name(c->out[0]->dtype));
  }
}

// lerp: start + w*(end-start), from the nearer end for precision, as the CPU.
struct f_lerp {
  template <typename C> __device__ C operator()(C a, C b, C w) const {
    C d = sub_rn(b, a);
    return m_fabs(w) < (C)0.5 ? add_rn(a, mul_rn(w, d)) : sub_rn(b, mul_rn(d, sub_rn((C)1, w)));
  }
};

ts_status k_lerp(const ts_call *c) {
  return by_dtype<DF>(c, c->out[0]->dtype, [&](auto t) {
    using S = decltype(t);
    return tsc_elementwise<S, S, S, S>("lerp", c->out[0], c->in, tsc_make_via<S, tsc_ew_t<S>>(f_lerp{}));
  });
}

// threshold_backward (ReLU's gradient): y <= 0 ? 0 : g (a NaN passes g, as
// ATen's), compared in the compute type as the CPU does; g goes through it
// unchanged (exact for the half types), so the bits are the CPU's.
struct f_threshold_bw {
  template <typename C> __device__ C operator()(C g, C y) const { return y <= (C)0 ? (C)0 : g; }
};

ts_status k_threshold_backward(const ts_call *c) {
  return by_dtype<DF>(c, c->out[0]->dtype, [&](auto t) {
    using S = decltype(t);
    return binary<S, S>(c, f_threshold_bw{});
  });
}

} // namespace

extern "C" void tsc_register_elementwise(ts_kernel *k) {
  for (int op = 0; op < TS_OP_COUNT; op++) {
    ts_op_kind kind = ts_ops[op].kind;
    if (kind == TS_KIND_UNARY || kind == TS_KIND_UNARY_FLOAT || kind == TS_KIND_UNARY_BOOL) k[op] = k_unary;
    if (kind == TS_KIND_BINARY || kind == TS_KIND_BINARY_FLOAT || kind == TS_KIND_COMPARE) k[op] = k_binary;
  }
  k[TS_OP_WHERE] = k_where;
  k[TS_OP_LERP] = k_lerp;
  k[TS_OP_THRESHOLD_BACKWARD] = k_threshold_backward;
}
