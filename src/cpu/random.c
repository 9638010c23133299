/* CPU random kernels over Philox: element j of the output (in row-major
 * order) draws counter offset + j, exactly as the CUDA kernels will. */
#include "cpu.h"
#include "core/philox.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

/* rand on float32 (dropout's masks draw it every training step): the loop
 * below for that one case, without the per-element op and dtype branches.
 * The same draws and the same arithmetic (no FMA), so the same bits. */
static void rand_f32_scalar(float *p, int64_t n, uint64_t seed, uint64_t off, double lo, double span) {
  for (int64_t j = 0; j < n; j++) {
    ts_u32x4 r = ts_philox(seed, off + (uint64_t)j);
    p[j] = (float)(lo + span * (double)ts_uniform_f32(r.v[0]));
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* (hi, lo) of the 32 x 32-bit products m * x in 8 lanes: vpmuludq multiplies
 * the even lanes, so the odd ones are shifted down for a second multiply */
__attribute__((target("avx2"))) static inline __m256i mulhilo8(__m256i m, __m256i x, __m256i *hi) {
  __m256i ev = _mm256_mul_epu32(x, m), od = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA);
  return _mm256_blend_epi32(ev, _mm256_slli_epi64(od, 32), 0xAA);
}

/* ts_uniform_f32 of word 0 of 8 counters (exact: 24 bits times a power of
 * two), then in double as the scalar loop: lo + span * u, rounded once to float */
__attribute__((target("avx2"))) static inline void store_uniform8(float *p, __m256i w0, __m256 scale, __m256d vlo,
                                                                  __m256d vspan) {
  __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w0, 8)), scale);
  __m256d a = _mm256_add_pd(vlo, _mm256_mul_pd(vspan, _mm256_cvtps_pd(_mm256_castps256_ps128(u))));
  __m256d b = _mm256_add_pd(vlo, _mm256_mul_pd(vspan, _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1))));
  _mm_storeu_ps(p, _mm256_cvtpd_ps(a));
  _mm_storeu_ps(p + 4, _mm256_cvtpd_ps(b));
}

/* ts_philox's word 0 for 8 consecutive counters whose high words agree
 * (c1 = hi32), 8 lanes at a time: ~4x the compiler's vectorisation of the
 * scalar loop, which spent most of its time shuffling 64-bit products */
__attribute__((target("avx2"))) static void rand_f32_avx2(float *p, int64_t n, uint64_t seed, uint64_t off, double lo,
                                                           double span) {
  const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256d vlo = _mm256_set1_pd(lo), vspan = _mm256_set1_pd(span);
  const __m256 scale = _mm256_set1_ps(1.0f / 16777216.0f);
  __m256i k0[10], k1[10];
  for (int r = 0; r < 10; r++) {
    k0[r] = _mm256_set1_epi32((int)((uint32_t)seed + (uint32_t)r * 0x9E3779B9u));
    k1[r] = _mm256_set1_epi32((int)((uint32_t)(seed >> 32) + (uint32_t)r * 0xBB67AE85u));
  }
  int64_t j = 0;
  /* 16 counters at a time as two independent chains of rounds: one chain's
   * multiplies wait on the previous round's, so a second fills the gaps
   * (1 Mi floats: 3.5 -> ~2 ms) */
  while (n - j >= 16 && (uint32_t)(off + (uint64_t)j) <= 0xFFFFFFF0u) {
    uint64_t ctr = off + (uint64_t)j;
    __m256i a0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)ctr), lane);
    __m256i b0 = _mm256_add_epi32(a0, _mm256_set1_epi32(8));
    __m256i a1 = _mm256_set1_epi32((int)(uint32_t)(ctr >> 32)), b1 = a1, a2 = _mm256_setzero_si256(), a3 = a2, b2 = a2, b3 = a2;
    for (int r = 0; r < 10; r++) {
      __m256i ha0, ha1, hb0, hb1;
      __m256i la0 = mulhilo8(m0, a0, &ha0), la1 = mulhilo8(m1, a2, &ha1);
      __m256i lb0 = mulhilo8(m0, b0, &hb0), lb1 = mulhilo8(m1, b2, &hb1);
      a0 = _mm256_xor_si256(_mm256_xor_si256(ha1, a1), k0[r]);
      a2 = _mm256_xor_si256(_mm256_xor_si256(ha0, a3), k1[r]);
      a1 = la1, a3 = la0;
      b0 = _mm256_xor_si256(_mm256_xor_si256(hb1, b1), k0[r]);
      b2 = _mm256_xor_si256(_mm256_xor_si256(hb0, b3), k1[r]);
      b1 = lb1, b3 = lb0;
    }
    store_uniform8(p + j, a0, scale, vlo, vspan);
    store_uniform8(p + j + 8, b0, scale, vlo, vspan);
    j += 16;
  }
  while (j < n) {
    uint64_t ctr = off + (uint64_t)j;
    if (n - j < 8 || (uint32_t)ctr > 0xFFFFFFF8u) { /* a tail, or the low word wraps inside the 8 */
      int64_t m = n - j < 8 ? n - j : 8;
      rand_f32_scalar(p + j, m, seed, ctr, lo, span);
      j += m;
      continue;
    }
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)ctr), lane);
    __m256i c1 = _mm256_set1_epi32((int)(uint32_t)(ctr >> 32)), c2 = _mm256_setzero_si256(), c3 = c2;
    for (int r = 0; r < 10; r++) {
      __m256i hi0, hi1;
      __m256i lo0 = mulhilo8(m0, c0, &hi0), lo1 = mulhilo8(m1, c2, &hi1);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), k0[r]);
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), k1[r]);
      c1 = lo1, c3 = lo0;
    }
    store_uniform8(p + j, c0, scale, vlo, vspan);
    j += 8;
  }
}
#endif

static void rand_f32(float *p, int64_t n, uint64_t seed, uint64_t off, double lo, double span) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2")) {
    rand_f32_avx2(p, n, seed, off, lo, span);
    return;
  }
#endif
  rand_f32_scalar(p, n, seed, off, lo, span);
}

/* out must be contiguous (the op layer allocates it so). */
static ts_status k_random(const ts_call *c) {
  ts_tensor *out = c->out[0];
  uint64_t seed = (uint64_t)c->i[0], off = (uint64_t)c->i[1];
  int64_t n = ts_numel(out);
  ts_dtype dt = out->dtype;
  char *p = ts_data(out);
  int64_t w = (int64_t)ts_dtype_size(dt);
  double lo = c->f[0], hi = c->f[1];
  if (c->op == TS_OP_RAND && dt == TS_FLOAT32) {
    float *f = (float *)p;
#pragma omp parallel if (n > TS_PARALLEL_GRAIN)
    {
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      int64_t chunk = (n + nt - 1) / nt, a = chunk * id, b = a + chunk < n ? a + chunk : n;
      if (a < b) rand_f32(f + a, b - a, seed, off + (uint64_t)a, lo, hi - lo);
    }
    return TS_OK;
  }
#pragma omp parallel for schedule(static) if (n > TS_PARALLEL_GRAIN)
  for (int64_t j = 0; j < n; j++) {
    ts_u32x4 r = ts_philox(seed, off + (uint64_t)j);
    void *q = p + j * w;
    if (c->op == TS_OP_RAND) {
      double u = dt == TS_FLOAT64 ? ts_uniform_f64(r.v[0], r.v[1]) : ts_uniform_f32(r.v[0]);
      ts_store_f64(q, dt, lo + (hi - lo) * u);
    } else if (c->op == TS_OP_RANDN) { /* Box-Muller on two uniforms in (0, 1] */
      double u1 = 1.0 - ts_uniform_f64(r.v[0], r.v[1]), u2 = ts_uniform_f64(r.v[2], r.v[3]);
      double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
      ts_store_f64(q, dt, lo + hi * z);
    } else { /* RANDINT: [i[2], i[3]) */
      uint64_t range = (uint64_t)c->i[3] - (uint64_t)c->i[2]; /* unsigned: no overflow */
      uint64_t x = ((uint64_t)r.v[0] << 32) | r.v[1];
      ts_store_i64(q, dt, (int64_t)((uint64_t)c->i[2] + x % range));
    }
  }
  return TS_OK;
}

/* randperm: sort indices by 64-bit Philox keys (ties broken by index), so a
 * GPU sort of the same keys gives the same permutation. */
typedef struct { uint64_t key; int64_t idx; } keyed;

static int cmp_keyed(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static ts_status k_randperm(const ts_call *c) {
  ts_tensor *out = c->out[0];
  int64_t n = ts_numel(out);
  keyed *k = malloc(sizeof *k * (size_t)(n ? n : 1));
  if (!k) return ts_fail(TS_ERR_OOM, "randperm: out of memory for %lld keys", (long long)n);
  for (int64_t j = 0; j < n; j++) {
    ts_u32x4 r = ts_philox((uint64_t)c->i[0], (uint64_t)c->i[1] + (uint64_t)j);
    k[j].key = ((uint64_t)r.v[0] << 32) | r.v[1];
    k[j].idx = j;
  }
  qsort(k, (size_t)n, sizeof *k, cmp_keyed);
  char *p = ts_data(out);
  int64_t w = (int64_t)ts_dtype_size(out->dtype);
  for (int64_t j = 0; j < n; j++) ts_store_i64(p + j * w, out->dtype, k[j].idx);
  free(k);
  return TS_OK;
}

void ts_cpu_register_random(ts_kernel *k) {
  k[TS_OP_RAND] = k_random;
  k[TS_OP_RANDN] = k_random;
  k[TS_OP_RANDINT] = k_random;
  k[TS_OP_RANDPERM] = k_randperm;
}
