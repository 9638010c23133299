/* Vectorisable float math for hot loops. glibc's expf is a call per element,
 * which keeps a loop scalar (softmax ran at a tenth of PyTorch's speed); this
 * one is straight-line code the compiler turns into SSE/AVX lanes.
 * Cephes' expf: range reduction by ln 2, a degree-6 polynomial; at most
 * 2 ulp from the true value over the whole range (tests/lua check 1e-6). */
#ifndef TENSH_VMATH_H
#define TENSH_VMATH_H

#include <stdint.h>
#include <string.h>

static inline float ts_expf(float x) {
  const float hi = 88.3762626647949f, lo = -87.3365447505531f; /* beyond: inf / 0 */
  float xc = x > hi ? hi : x < lo ? lo : x;
  xc = xc != xc ? 0.0f : xc; /* NaN: compute anything defined, the last line returns NaN */
  /* n = round(x / ln 2) by the 1.5 * 2^23 trick: no libm call, so it vectorises */
  float fx = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - fx * 0.693359375f;
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
  y *= scale;
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

#endif
