/* Integer pow, floor division, remainder, fmod and truncating division as
 * torch computes them, for the CPU's and CUDA's elementwise kernels: wrapping
 * through uint64 (never C's undefined behaviour: INT64_MIN / -1, overflowing
 * powers), a negative power of an integer and a zero divisor reported
 * through err (1: negative power, 2: division by zero) and 0 returned.
 *
 * How err is set is the includer's: the CPU writes a plain int (the default
 * below); a CUDA file defines TS_INT_ERROR before including this, since many
 * threads may report at once (cuda/elementwise.cu: tsc_store_any, a device
 * function, so it also makes these TS_INT_HD = __device__). err is
 * volatile for the CPU's loop context, whose OpenMP threads share it. */
#ifndef TENSH_INT_MATHS_H
#define TENSH_INT_MATHS_H

#include <stdint.h>

#include "hd.h"

#ifndef TS_INT_ERROR
#define TS_INT_ERROR(err, code) (*(err) = (code))
#endif
#ifndef TS_INT_HD
#define TS_INT_HD TS_HD
#endif

static inline TS_INT_HD int64_t ts_ipow(int64_t b, int64_t e, volatile int *err) {
  if (e < 0) {
    if (b == 1) return 1;
    if (b == -1) return (e & 1) ? -1 : 1;
    TS_INT_ERROR(err, 1);
    return 0;
  }
  uint64_t r = 1, x = (uint64_t)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return (int64_t)r;
}

static inline TS_INT_HD int64_t ts_ifloordiv(int64_t a, int64_t b, volatile int *err) {
  if (b == 0) return TS_INT_ERROR(err, 2), 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

/* the divisor's sign (Python's %, torch.remainder) */
static inline TS_INT_HD int64_t ts_iremainder(int64_t a, int64_t b, volatile int *err) {
  if (b == 0) return TS_INT_ERROR(err, 2), 0;
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* the dividend's sign (C's %, torch.fmod) */
static inline TS_INT_HD int64_t ts_ifmod(int64_t a, int64_t b, volatile int *err) {
  if (b == 0) return TS_INT_ERROR(err, 2), 0;
  return b == -1 ? 0 : a % b; /* INT64_MIN % -1 traps in C */
}

static inline TS_INT_HD int64_t ts_itruncdiv(int64_t a, int64_t b, volatile int *err) {
  if (b == 0) return TS_INT_ERROR(err, 2), 0;
  return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}

#endif
