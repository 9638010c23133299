/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
 * Counter-based: element j of a draw uses counter (offset + j) under key
 * seed, so any backend computes the same values in any order. Plain C that
 * also compiles as CUDA device code (TS_HD). */
#ifndef TENSH_PHILOX_H
#define TENSH_PHILOX_H

#include <stdint.h>

#include "hd.h"

typedef struct ts_u32x4 { uint32_t v[4]; } ts_u32x4;

static inline TS_HD uint32_t ts_mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

static inline TS_HD ts_u32x4 ts_philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = ts_mulhilo(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = ts_mulhilo(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  ts_u32x4 out = {{c0, c1, c2, c3}};
  return out;
}

/* uniform in [0, 1): 24 bits for float32 and narrower, 53 for float64 */
static inline TS_HD float ts_uniform_f32(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
static inline TS_HD double ts_uniform_f64(uint32_t a, uint32_t b) {
  uint64_t x = ((uint64_t)a << 21) ^ (uint64_t)b;
  return (double)(x & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

#endif
