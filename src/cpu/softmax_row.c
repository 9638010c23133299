/* One float32 row of softmax or log_softmax, contiguous (the last dim of a
 * dense tensor: attention scores, logits): three passes over a row that sits
 * in L1, the max, the exponentials and their sum, then the scaling (softmax)
 * or the subtraction (log_softmax). The exponential is the cost; on x86-64
 * with AVX2 and FMA it runs in eight lanes with fused multiply-adds
 * (PyTorch's CPU build runs its Sleef exp in AVX2 too), elsewhere the
 * portable loop below, which the compiler vectorises without FMA (the
 * project compiles as ISO C, so it may not contract a * b + c).
 *
 * A max pass and then an exp pass, not one pass keeping a running max and
 * rescaling the sum: the row is in L1, so the extra read costs a compare per
 * eight elements, where the rescaling costs a second exp per element.
 * log_softmax is (x - max) - log(sum), in that order, as PyTorch computes
 * it: at x = 1000, x - (max + log sum) lost 3e-5 to the rounding of max + log sum. */
#include "cpu.h"
#include "vmath.h"

#include <math.h>
#include <stdbool.h>

/* The row's shift: its max, NaN when it holds a NaN (the whole row is then
 * NaN, as torch's), 0 when it is all -inf (exp gives 0s, the sum 0, and the
 * row NaN, as torch's -inf - -inf). */
static float shift_of(float m, bool nan) {
  if (nan) return __builtin_nanf("");
  return m == -__builtin_inff() ? 0.0f : m;
}

/* log_softmax from the shift and the sum of exp(x - shift); softmax scales y in place. */
static void finish_row(const float *x, float *y, int64_t R, bool logsm, float shift, float sum, int64_t from) {
  if (logsm) {
    float lsum = logf(sum);
    for (int64_t i = from; i < R; i++) y[i] = (x[i] - shift) - lsum;
  } else {
    float inv = 1.0f / sum;
    for (int64_t i = from; i < R; i++) y[i] *= inv;
  }
}

/* The portable row: eight independent lanes let the compiler vectorise the
 * max and the sum without reassociating one float accumulator, which it may not do. */
__attribute__((target_clones("avx2", "default"))) static void row_portable(const float *x, float *y, int64_t R,
                                                                            bool logsm) {
  float ml[8], sl[8] = {0};
  int nanl[8] = {0};
  for (int q = 0; q < 8; q++) ml[q] = -__builtin_inff();
  int64_t body = R & ~(int64_t)7;
  for (int64_t i = 0; i < body; i += 8)
    for (int q = 0; q < 8; q++) {
      float v = x[i + q];
      nanl[q] |= v != v;
      ml[q] = v > ml[q] ? v : ml[q];
    }
  for (int64_t i = body; i < R; i++) {
    nanl[0] |= x[i] != x[i];
    ml[0] = x[i] > ml[0] ? x[i] : ml[0];
  }
  float m = ml[0];
  int nan = nanl[0];
  for (int q = 1; q < 8; q++) m = ml[q] > m ? ml[q] : m, nan |= nanl[q];
  float shift = shift_of(m, nan);
  if (logsm) {
    for (int64_t i = 0; i < body; i += 8)
      for (int q = 0; q < 8; q++) sl[q] += ts_expf(x[i + q] - shift);
  } else {
    for (int64_t i = 0; i < body; i += 8)
      for (int q = 0; q < 8; q++) {
        float e = ts_expf(x[i + q] - shift);
        y[i + q] = e;
        sl[q] += e;
      }
  }
  for (int64_t i = body; i < R; i++) {
    float e = ts_expf(x[i] - shift);
    if (!logsm) y[i] = e;
    sl[0] += e;
  }
  float sum = ((sl[0] + sl[1]) + (sl[2] + sl[3])) + ((sl[4] + sl[5]) + (sl[6] + sl[7]));
  finish_row(x, y, R, logsm, shift, sum, 0);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2_FMA __attribute__((target("avx2,fma")))

/* exp in eight lanes for arguments in [-inf, 0] (x - max of a row without
 * NaN): ts_expf's Cephes reduction and polynomial with fused multiply-adds
 * (within 2 ulp as it is). Below ln(2^-126) the answer is 0, as torch's
 * flush of those denormals within its tolerance; exp(-inf) is exactly 0. */
AVX2_FMA static inline __m256 exp8_nonpositive(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365447505531f);
  __m256 xc = _mm256_max_ps(x, lo);
  __m256i n = _mm256_cvtps_epi32(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f))); /* round to nearest */
  __m256 fx = _mm256_cvtepi32_ps(n);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  y = _mm256_mul_ps(y, scale);
  return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_GE_OQ)); /* below lo (and -inf): 0 */
}

AVX2_FMA static float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

AVX2_FMA static void row_avx2(const float *x, float *y, int64_t R, bool logsm) {
  int64_t body = R & ~(int64_t)15, i;
  /* the max, and whether a NaN is there (vmaxps drops a NaN in its first operand) */
  __m256 m0 = _mm256_set1_ps(-__builtin_inff()), m1 = m0, un = _mm256_setzero_ps();
  for (i = 0; i < body; i += 16) {
    __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    m0 = _mm256_max_ps(a, m0), m1 = _mm256_max_ps(b, m1);
    un = _mm256_or_ps(un, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  __m256 mv = _mm256_max_ps(m0, m1);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  float m = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  bool nan = _mm256_movemask_ps(un) != 0;
  for (; i < R; i++) {
    nan |= x[i] != x[i];
    m = x[i] > m ? x[i] : m;
  }
  float shift = shift_of(m, nan);
  if (nan) { /* the whole row is NaN */
    for (i = 0; i < R; i++) y[i] = shift;
    return;
  }
  const __m256 vs = _mm256_set1_ps(shift);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  for (i = 0; i < body; i += 16) {
    __m256 e0 = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
    __m256 e1 = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vs));
    if (!logsm) _mm256_storeu_ps(y + i, e0), _mm256_storeu_ps(y + i + 8, e1);
    s0 = _mm256_add_ps(s0, e0), s1 = _mm256_add_ps(s1, e1);
  }
  float sum = hsum8(_mm256_add_ps(s0, s1));
  for (; i < R; i++) {
    float e = ts_expf(x[i] - shift);
    if (!logsm) y[i] = e;
    sum += e;
  }
  if (logsm) {
    const __m256 vl = _mm256_set1_ps(logf(sum));
    for (i = 0; i < body; i += 16) {
      _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs), vl));
      _mm256_storeu_ps(y + i + 8, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vs), vl));
    }
  } else {
    const __m256 vi = _mm256_set1_ps(1.0f / sum);
    for (i = 0; i < body; i += 16) {
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vi));
      _mm256_storeu_ps(y + i + 8, _mm256_mul_ps(_mm256_loadu_ps(y + i + 8), vi));
    }
  }
  finish_row(x, y, R, logsm, shift, sum, body);
}
#endif

void ts_cpu_softmax_row_f32(const float *x, float *y, int64_t R, bool logsm) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    row_avx2(x, y, R, logsm);
    return;
  }
#endif
  row_portable(x, y, R, logsm);
}
