/* Vectorisable float math for hot loops. glibc's expf is a call per element,
 * which keeps a loop scalar (softmax ran at a tenth of PyTorch's speed); this
 * one is straight-line code the compiler turns into SSE/AVX lanes.
 * Cephes' expf: range reduction by ln 2, a degree-6 polynomial; at most
 * 2 ulp from the true value over the whole range (tests/lua check 1e-6). */
#ifndef TENSH_VMATH_H
#define TENSH_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A row function in eight lanes with fused multiply-adds where the CPU has
 * them (x86-64-v3: AVX2 and FMA), and in sixteen where it has AVX-512
 * (x86-64-v4), contracted as the vector code allows: the baseline x86-64
 * build runs these functions in four SSE lanes without FMA. AVX-512 also
 * selects through mask registers where AVX2 spends a blend on each of the
 * range checks: an LSTM cell's forward (five exp/tanh an element), 45 ->
 * 28-32 us a (32, 256) step on this machine's AMD EPYC (Zen 4), which runs
 * 512-bit operations at the 256-bit rate. */
#define TS_VECTOR_V4 \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("fp-contract=fast")))

/* e^x for x in [-87.33, 88.37] and not NaN: the core of ts_expf, for
 * callers whose arguments are in range by construction (no clamps, no NaN
 * checks: a third of the instructions) */
static inline float ts_expf_in_range(float x) {
  /* n = round(x / ln 2) by the 1.5 * 2^23 trick: no libm call, so it vectorises */
  float fx = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)fx + 127) << 23; /* 2^n; n in [-126, 128) here */
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

static inline float ts_expf(float x) {
  const float hi = 88.3762626647949f, lo = -87.3365447505531f; /* beyond: inf / 0 */
  float xc = x > hi ? hi : x < lo ? lo : x;
  xc = xc != xc ? 0.0f : xc; /* NaN: compute anything defined, the last line returns NaN */
  float y = ts_expf_in_range(xc);
  y = x > hi ? __builtin_inff() : y;
  y = x < lo ? 0.0f : y;
  return x != x ? x : y; /* NaN in, NaN out */
}

/* Cephes' tanhf: an odd polynomial below |x| = 0.625 (where 1 - 2/(e^2x + 1)
 * would cancel), the exponential form above; both computed, one selected,
 * so the loop stays branch-free. */
static inline float ts_tanhf(float x) {
  float ax = x < 0 ? -x : x;
  float z = x * x;
  float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                  1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
  float big = 1.0f - 2.0f / (ts_expf(2.0f * ax) + 1.0f);
  big = x < 0 ? -big : big;
  small = x == 0 ? x : small; /* the polynomial gives +0 for -0: keep the sign, as libm and PyTorch */
  return ax < 0.625f ? small : big;
}

/* erf in float lanes (glibc's erff is a call per element: exact GELU spent
 * 13 % of a GPT step in it). Two pieces, both computed, one selected:
 * - |x| < 0.921875: x + x P(x^2), P of degree 5 (erf is odd and ~1.128 x);
 *   the sum is taken at 8x and scaled back, so a subnormal x keeps its bits
 *   through the product;
 * - above: 1 - exp(-Q(|x|)), Q a degree-6 polynomial in |x| - 1 for
 *   -log erfc on [0.921875, 4]; |x| is clamped to 4, where erf rounds to 1
 *   (erfc(4) = 1.5e-8 is below half an ulp of 1), which also covers inf.
 * P and Q: minimax fits (Lawson's iteration in 40-digit arithmetic,
 * scripts/fit_erff.py), Q's error weighted by erfc, as the result's is.
 * Over all 2^32 floats, at most 1.44 ulp from the float64 erf (1.22 with
 * FMA); tests/lua/test_erf.lua checks a dense grid to 2. */
static inline float ts_erff(float x) {
  float a = __builtin_fabsf(x);
  float t = x * x;
  float p = -6.013390375e-04f;
  p = p * t + 4.997999873e-03f;
  p = p * t + -2.677023038e-02f;
  p = p * t + 1.128192693e-01f;
  p = p * t + -3.761250675e-01f;
  p = p * t + 1.283791512e-01f;
  float x8 = 8.0f * x;
  float small = (x8 * p + x8) * 0.125f;
  /* a < 4 ? a : 4 is one min instruction; a NaN becomes 4 here and takes the small path below */
  float u = (a < 4.0f ? a : 4.0f) - 1.0f;
  float q = -1.947377168e-04f;
  q = q * u + 1.863203943e-03f;
  q = q * u + -9.944423102e-03f;
  q = q * u + 4.153463244e-02f;
  q = q * u + 8.431090713e-01f;
  q = q * u + 2.638967752e+00f;
  q = q * u + 1.849605560e+00f;
  /* q is in [0, 18] for every u in [-1, 3]: exp's range checks are not needed */
  float big = __builtin_copysignf(1.0f - ts_expf_in_range(-q), x);
  /* a NaN compares false and keeps small, which is NaN */
  return a >= 0.921875f ? big : small;
}

/* exp, tanh and erf by the argument's type: in float the straight-line
 * versions above, which vectorise; libm's in double */
#define TS_VEXP(x) _Generic((x), float: ts_expf, default: exp)(x)
#define TS_VTANH(x) _Generic((x), float: ts_tanhf, default: tanh)(x)
#define TS_VERF(x) _Generic((x), float: ts_erff, default: erf)(x)

#endif
