/* A double or an int64 stored as a dtype known only at run time: the switch
 * behind ts_store_f64 / ts_store_i64 (dtype.c) and CUDA's reductions, which
 * write their results this way (cuda/reduce.cuh). float16 and bfloat16 round
 * to nearest even on both sides: CUDA's intrinsics in device code, half.h's
 * bit-exact equivalents on the host. */
#ifndef TENSH_DTYPE_STORE_H
#define TENSH_DTYPE_STORE_H

#include <stdint.h>

#include "half.h"
#include "hd.h"
#include "tensh.h"

#ifdef __CUDA_ARCH__
#define TS_F2H_BITS(x) __half_as_ushort(__float2half_rn(x))
#define TS_F2BF_BITS(x) __bfloat16_as_ushort(__float2bfloat16_rn(x))
#else
#define TS_F2H_BITS(x) ts_float_to_half(x)
#define TS_F2BF_BITS(x) ts_float_to_bf16(x)
#endif

static inline TS_HD void ts_store_f64_as(void *p, ts_dtype dt, double v) {
  switch (dt) {
  case TS_FLOAT32: *(float *)p = (float)v; break;
  case TS_FLOAT64: *(double *)p = v; break;
  case TS_FLOAT16: *(uint16_t *)p = TS_F2H_BITS((float)v); break;
  case TS_BFLOAT16: *(uint16_t *)p = TS_F2BF_BITS((float)v); break;
  case TS_INT64: *(int64_t *)p = (int64_t)v; break;
  case TS_INT32: *(int32_t *)p = (int32_t)v; break;
  case TS_INT16: *(int16_t *)p = (int16_t)(int64_t)v; break;
  case TS_INT8: *(int8_t *)p = (int8_t)(int64_t)v; break;
  case TS_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
  case TS_BOOL: *(uint8_t *)p = v != 0; break;
  default: break;
  }
}

static inline TS_HD void ts_store_i64_as(void *p, ts_dtype dt, int64_t v) {
  switch (dt) {
  case TS_INT64: *(int64_t *)p = v; break;
  case TS_INT32: *(int32_t *)p = (int32_t)v; break;
  case TS_INT16: *(int16_t *)p = (int16_t)v; break;
  case TS_INT8: *(int8_t *)p = (int8_t)v; break;
  case TS_UINT8: *(uint8_t *)p = (uint8_t)v; break;
  case TS_BOOL: *(uint8_t *)p = v != 0; break;
  default: ts_store_f64_as(p, dt, (double)v); break;
  }
}

#endif
