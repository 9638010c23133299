/* The inverse error function, for the CPU kernels and the CUDA ones alike
 * (C's libm has none, and the simulated device runs host code): the same
 * bits on both. A rational first guess (Pavlis's erfinv.m, which PyTorch's
 * calc_erfinv also starts from), then two Newton steps on erf(x) - y, all
 * in double. erfinv(+-1) = +-inf, |y| > 1 and NaN give NaN. */
#ifndef TENSH_ERFINV_H
#define TENSH_ERFINV_H

#include <math.h>

#ifdef __CUDACC__
#define TS_ERFINV_FN static __host__ __device__ inline
#else
#define TS_ERFINV_FN static inline
#endif

TS_ERFINV_FN double ts_erfinv(double y) {
  const double a0 = 0.886226899, a1 = -1.645349621, a2 = 0.914624893, a3 = -0.140543331;
  const double b0 = -2.118377725, b1 = 1.442710462, b2 = -0.329097515, b3 = 0.012229801;
  const double c0 = -1.970840454, c1 = -1.624906493, c2 = 3.429567803, c3 = 1.641345311;
  const double d0 = 3.543889200, d1 = 1.637067800;
  const double two_over_sqrt_pi = 1.1283791670955126;
  double ya = fabs(y), x;
  if (ya > 1) return NAN;
  if (ya == 1) return copysign(INFINITY, y);
  if (ya <= 0.7) { /* the central range */
    double z = y * y;
    x = y * (((a3 * z + a2) * z + a1) * z + a0) / ((((b3 * z + b2) * z + b1) * z + b0) * z + 1);
  } else { /* the tails, where y is near +-1 (NaN comes here and stays NaN) */
    double z = sqrt(-log((1 - ya) / 2));
    x = copysign(((c3 * z + c2) * z + c1) * z + c0, y) / ((d1 * z + d0) * z + 1);
  }
  x -= (erf(x) - y) / (two_over_sqrt_pi * exp(-x * x));
  x -= (erf(x) - y) / (two_over_sqrt_pi * exp(-x * x));
  return x;
}

#endif
