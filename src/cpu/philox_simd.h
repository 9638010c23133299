/* Philox draws for many consecutive counters at once, for the CPU kernels that
 * draw one per element (rand, dropout masks). The same values as ts_philox
 * (src/core/philox.h, which the CUDA kernels share), with the rounds written out so
 * that the counters run in vector lanes: a call of ts_philox per counter does
 * not vectorise and costs ~13 ns a draw. Each includer gets its own clones. */
#ifndef TENSH_PHILOX_SIMD_H
#define TENSH_PHILOX_SIMD_H

#include <stdint.h>

/* u[4 * g + l] = lane l of ts_philox(seed, base + g), for g < n: the order in
 * which the kernels use them (element 4 * g + l takes lane l of counter g) */
__attribute__((target_clones("avx2", "default"), unused)) static void
ts_philox_lanes(uint64_t seed, uint64_t base, int64_t n, uint32_t *restrict u) {
  const uint32_t s0 = (uint32_t)seed, s1 = (uint32_t)(seed >> 32);
#pragma omp simd
  for (int64_t g = 0; g < n; g++) {
    const uint64_t ctr = base + (uint64_t)g;
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0, k0 = s0, k1 = s1;
#pragma GCC unroll 10
    for (int r = 0; r < 10; r++) {
      const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
      const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
      c1 = (uint32_t)p1, c3 = (uint32_t)p0, c0 = n0, c2 = n2;
      k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    u[4 * g] = c0, u[4 * g + 1] = c1, u[4 * g + 2] = c2, u[4 * g + 3] = c3;
  }
}

#endif
