/* Philox draws for many consecutive counters at once, for the CPU kernels that
 * draw per element (rand, dropout masks). The same values as ts_philox
 * (src/core/philox.h, which the CUDA kernels share): a call of ts_philox per
 * counter does not vectorise and costs ~13 ns a draw, and the compiler's own
 * vectorisation of the rounds spent most of its time shuffling 64-bit
 * products (~2.4 ns a word); the AVX2 rounds below run 8 counters a vector,
 * two vectors at a time, and the AVX-512 ones 16. Each includer gets its own
 * copies. */
#ifndef TENSH_PHILOX_SIMD_H
#define TENSH_PHILOX_SIMD_H

#include <stdint.h>

#include "core/philox.h"

/* the scalar reference: u[4 * g + l] = lane l of ts_philox(seed, base + g) */
static inline void ts_philox_lanes_scalar(uint64_t seed, uint64_t base, int64_t n, uint32_t *restrict u) {
  for (int64_t g = 0; g < n; g++) {
    ts_u32x4 r = ts_philox(seed, base + (uint64_t)g);
    u[4 * g] = r.v[0], u[4 * g + 1] = r.v[1], u[4 * g + 2] = r.v[2], u[4 * g + 3] = r.v[3];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TS_PHILOX_AVX2 __attribute__((target("avx2"), unused))

/* (hi, lo) of the 32 x 32-bit products m * x in 8 lanes: vpmuludq multiplies
 * the even lanes, so the odd ones are shifted down for a second multiply */
TS_PHILOX_AVX2 static inline __m256i ts_philox_mulhilo8(__m256i m, __m256i x, __m256i *hi) {
  __m256i ev = _mm256_mul_epu32(x, m), od = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA);
  return _mm256_blend_epi32(ev, _mm256_slli_epi64(od, 32), 0xAA);
}

/* words c0..c3 of 8 counters (one vector per word) into u[4 * g + l]: a 4 x 8
 * transpose */
TS_PHILOX_AVX2 static inline void ts_philox_store8(uint32_t *u, __m256i c0, __m256i c1, __m256i c2, __m256i c3) {
  __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
  __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
  __m256i g04 = _mm256_unpacklo_epi64(t0, t2), g15 = _mm256_unpackhi_epi64(t0, t2);
  __m256i g26 = _mm256_unpacklo_epi64(t1, t3), g37 = _mm256_unpackhi_epi64(t1, t3);
  _mm256_storeu_si256((__m256i *)u, _mm256_permute2x128_si256(g04, g15, 0x20));
  _mm256_storeu_si256((__m256i *)(u + 8), _mm256_permute2x128_si256(g26, g37, 0x20));
  _mm256_storeu_si256((__m256i *)(u + 16), _mm256_permute2x128_si256(g04, g15, 0x31));
  _mm256_storeu_si256((__m256i *)(u + 24), _mm256_permute2x128_si256(g26, g37, 0x31));
}

/* one Philox round for the 8 counters of (c0, c1, c2, c3) */
#define TS_PHILOX_ROUND8(c0, c1, c2, c3, k0, k1)                                                                      \
  do {                                                                                                                \
    __m256i hi0_, hi1_, lo0_ = ts_philox_mulhilo8(m0, c0, &hi0_), lo1_ = ts_philox_mulhilo8(m1, c2, &hi1_);           \
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1_, c1), k0);                                                            \
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0_, c3), k1);                                                            \
    c1 = lo1_, c3 = lo0_;                                                                                             \
  } while (0)

TS_PHILOX_AVX2 static void ts_philox_lanes_avx2(uint64_t seed, uint64_t base, int64_t n, uint32_t *restrict u) {
  const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), eight = _mm256_set1_epi32(8);
  __m256i k0[10], k1[10];
  for (int r = 0; r < 10; r++) {
    k0[r] = _mm256_set1_epi32((int)((uint32_t)seed + (uint32_t)r * 0x9E3779B9u));
    k1[r] = _mm256_set1_epi32((int)((uint32_t)(seed >> 32) + (uint32_t)r * 0xBB67AE85u));
  }
  int64_t g = 0;
  /* 16 counters as two independent chains: one chain's multiplies wait on
   * its previous round's, the other's fill the gaps. Lanes share the high
   * word of the counter, so the low word must not wrap inside the 16. */
  for (; n - g >= 16 && (uint32_t)(base + (uint64_t)g) <= 0xFFFFFFF0u; g += 16) {
    const uint64_t ctr = base + (uint64_t)g;
    __m256i a0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)ctr), lane), b0 = _mm256_add_epi32(a0, eight);
    __m256i a1 = _mm256_set1_epi32((int)(uint32_t)(ctr >> 32)), b1 = a1;
    __m256i a2 = _mm256_setzero_si256(), a3 = a2, b2 = a2, b3 = a2;
    for (int r = 0; r < 10; r++) {
      TS_PHILOX_ROUND8(a0, a1, a2, a3, k0[r], k1[r]);
      TS_PHILOX_ROUND8(b0, b1, b2, b3, k0[r], k1[r]);
    }
    ts_philox_store8(u + 4 * g, a0, a1, a2, a3);
    ts_philox_store8(u + 4 * g + 32, b0, b1, b2, b3);
  }
  for (; n - g >= 8 && (uint32_t)(base + (uint64_t)g) <= 0xFFFFFFF8u; g += 8) {
    const uint64_t ctr = base + (uint64_t)g;
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)ctr), lane);
    __m256i c1 = _mm256_set1_epi32((int)(uint32_t)(ctr >> 32)), c2 = _mm256_setzero_si256(), c3 = c2;
    for (int r = 0; r < 10; r++) TS_PHILOX_ROUND8(c0, c1, c2, c3, k0[r], k1[r]);
    ts_philox_store8(u + 4 * g, c0, c1, c2, c3);
  }
  /* fewer than 8 left, or a wrap of the low word ahead: one counter at a
   * time up to the next vector's start */
  if (g < n) {
    int64_t m = n - g < 8 ? n - g : 8;
    ts_philox_lanes_scalar(seed, base + (uint64_t)g, m, u + 4 * g);
    if (g + m < n) ts_philox_lanes_avx2(seed, base + (uint64_t)(g + m), n - g - m, u + 4 * (g + m));
  }
}
#undef TS_PHILOX_ROUND8

/* The same in 16 lanes (AVX-512F), ~1.4x the AVX2 rounds on a Zen 4. What
 * is left after its blocks (fewer than 16 counters, or a wrap of the low
 * word ahead) goes to the AVX2 rounds, so that a machine with AVX-512 runs
 * and tests both. */
#define TS_PHILOX_AVX512 __attribute__((target("avx512f"), unused))

TS_PHILOX_AVX512 static inline __m512i ts_philox_mulhilo16(__m512i m, __m512i x, __m512i *hi) {
  __m512i ev = _mm512_mul_epu32(x, m), od = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(ev, 32), od);
  return _mm512_mask_blend_epi32(0xAAAA, ev, _mm512_slli_epi64(od, 32));
}

/* words c0..c3 of 16 counters into u[4 * g + l]: the 4 x 4 transposes of
 * ts_philox_store8 in each 128-bit lane, then the lanes put in counter order */
TS_PHILOX_AVX512 static inline void ts_philox_store16(uint32_t *u, __m512i c0, __m512i c1, __m512i c2, __m512i c3) {
  __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  /* lane k of each: counters 4k, 4k + 1, 4k + 2, 4k + 3 */
  __m512i n0 = _mm512_unpacklo_epi64(t0, t2), n1 = _mm512_unpackhi_epi64(t0, t2);
  __m512i n2 = _mm512_unpacklo_epi64(t1, t3), n3 = _mm512_unpackhi_epi64(t1, t3);
  __m512i x0 = _mm512_shuffle_i32x4(n0, n1, 0x44), x1 = _mm512_shuffle_i32x4(n2, n3, 0x44); /* 0 4 1 5, 2 6 3 7 */
  __m512i x2 = _mm512_shuffle_i32x4(n0, n1, 0xEE), x3 = _mm512_shuffle_i32x4(n2, n3, 0xEE); /* 8 12 9 13, 10 14 11 15 */
  _mm512_storeu_si512(u, _mm512_shuffle_i32x4(x0, x1, 0x88));
  _mm512_storeu_si512(u + 16, _mm512_shuffle_i32x4(x0, x1, 0xDD));
  _mm512_storeu_si512(u + 32, _mm512_shuffle_i32x4(x2, x3, 0x88));
  _mm512_storeu_si512(u + 48, _mm512_shuffle_i32x4(x2, x3, 0xDD));
}

#define TS_PHILOX_ROUND16(c0, c1, c2, c3, k0, k1)                                                                     \
  do {                                                                                                                \
    __m512i hi0_, hi1_, lo0_ = ts_philox_mulhilo16(m0, c0, &hi0_), lo1_ = ts_philox_mulhilo16(m1, c2, &hi1_);         \
    c0 = _mm512_ternarylogic_epi32(hi1_, c1, k0, 0x96); /* three-way xor */                                          \
    c2 = _mm512_ternarylogic_epi32(hi0_, c3, k1, 0x96);                                                               \
    c1 = lo1_, c3 = lo0_;                                                                                             \
  } while (0)

TS_PHILOX_AVX512 static void ts_philox_lanes_avx512(uint64_t seed, uint64_t base, int64_t n, uint32_t *restrict u) {
  const __m512i m0 = _mm512_set1_epi32((int)0xD2511F53u), m1 = _mm512_set1_epi32((int)0xCD9E8D57u);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i sixteen = _mm512_set1_epi32(16);
  __m512i k0[10], k1[10];
  for (int r = 0; r < 10; r++) {
    k0[r] = _mm512_set1_epi32((int)((uint32_t)seed + (uint32_t)r * 0x9E3779B9u));
    k1[r] = _mm512_set1_epi32((int)((uint32_t)(seed >> 32) + (uint32_t)r * 0xBB67AE85u));
  }
  int64_t g = 0;
  for (; n - g >= 32 && (uint32_t)(base + (uint64_t)g) <= 0xFFFFFFE0u; g += 32) { /* two chains, as the AVX2 rounds */
    const uint64_t ctr = base + (uint64_t)g;
    __m512i a0 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)ctr), lane), b0 = _mm512_add_epi32(a0, sixteen);
    __m512i a1 = _mm512_set1_epi32((int)(uint32_t)(ctr >> 32)), b1 = a1;
    __m512i a2 = _mm512_setzero_si512(), a3 = a2, b2 = a2, b3 = a2;
    for (int r = 0; r < 10; r++) {
      TS_PHILOX_ROUND16(a0, a1, a2, a3, k0[r], k1[r]);
      TS_PHILOX_ROUND16(b0, b1, b2, b3, k0[r], k1[r]);
    }
    ts_philox_store16(u + 4 * g, a0, a1, a2, a3);
    ts_philox_store16(u + 4 * g + 64, b0, b1, b2, b3);
  }
  for (; n - g >= 16 && (uint32_t)(base + (uint64_t)g) <= 0xFFFFFFF0u; g += 16) {
    const uint64_t ctr = base + (uint64_t)g;
    __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)ctr), lane);
    __m512i c1 = _mm512_set1_epi32((int)(uint32_t)(ctr >> 32)), c2 = _mm512_setzero_si512(), c3 = c2;
    for (int r = 0; r < 10; r++) TS_PHILOX_ROUND16(c0, c1, c2, c3, k0[r], k1[r]);
    ts_philox_store16(u + 4 * g, c0, c1, c2, c3);
  }
  if (g < n) ts_philox_lanes_avx2(seed, base + (uint64_t)g, n - g, u + 4 * g);
}
#undef TS_PHILOX_ROUND16
#endif

/* u[4 * g + l] = lane l of ts_philox(seed, base + g), for g < n: the order in
 * which the kernels use them (element 4 * g + l takes lane l of counter g) */
__attribute__((unused)) static void ts_philox_lanes(uint64_t seed, uint64_t base, int64_t n, uint32_t *restrict u) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) {
    ts_philox_lanes_avx512(seed, base, n, u);
    return;
  }
  if (__builtin_cpu_supports("avx2")) {
    ts_philox_lanes_avx2(seed, base, n, u);
    return;
  }
#endif
  ts_philox_lanes_scalar(seed, base, n, u);
}

#endif
