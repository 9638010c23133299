/* float32 GEMMs with few rows against a right-hand matrix that the caller
 * uses again unchanged: the recurrent layers' step GEMMs (src/ops/op_rnn.c),
 * 64 or so per sequence with the same W_hh. OpenBLAS packs W_hh (1 MiB at
 * hidden 256) into its panel layout on every call, a fifth of a 32-row
 * step GEMM's time; here it is packed once per token (the op layer's
 * promise, BMM's i[0], that B's values do not change between calls with
 * that token) and each call runs an AVX2/FMA micro-kernel over the packed
 * panels: 4 rows x 24 columns of C in 12 registers, A's elements broadcast
 * from its rows. Alone, 32 x 256 x 1024 (the LSTM bench's forward step):
 * 205 -> 165 us; 32 x 1024 x 256 (its backward step): 188 -> 159 us. In the
 * LSTM's forward, 222 -> 169 us a step GEMM.
 *
 * Taken when: float32, one batch entry, a token, at most MAX_ROWS rows, A
 * and C row-major (unit column stride), B's rows or columns contiguous, an
 * x86-64 CPU with AVX2 and FMA; otherwise the caller's BLAS path runs.
 * Two packed matrices are kept (an LSTM with projections alternates W_hh and
 * W_hr), the least recently used replaced, under a lock that a second thread
 * finding it held simply skips. */
#include <cblas.h>
#include <immintrin.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

#define NR 24         /* columns of a packed panel: three 8-float registers */
#define MR 4          /* rows of C a micro-kernel call computes */
#define MAX_ROWS 128  /* beyond, OpenBLAS's packing is spread over enough rows */
#define MAX_PACKED ((size_t)32 << 20)

#define SLOTS 2
typedef struct slot {
  int64_t token;
  const float *b;
  int64_t K, N, rs, cs;
  float *packed; /* panels of NR columns, (K, NR) each, zero-padded past N */
  size_t cap;
  uint64_t used; /* when last used, for the replacement */
} slot;
static slot slots[SLOTS];
static uint64_t uses;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* the columns of B in panel p: NR, fewer in the last */
static inline int64_t panel_cols(int64_t N, int64_t p) { return N - p * NR < NR ? N - p * NR : NR; }

/* B (K, N) with element strides rs, cs into panels, the last one's columns
 * past N zero. Each way reads along B's unit stride where it has one; in
 * the LSTM step (1 MiB W_hh, 4 packs a step) the element loops took 1.2 % */
static void pack(const float *b, int64_t K, int64_t N, int64_t rs, int64_t cs, float *out) {
  const int64_t panels = (N + NR - 1) / NR;
  if (N % NR) memset(out + (panels - 1) * K * NR, 0, sizeof(float) * (size_t)(K * NR));
  if (cs == 1) { /* rows contiguous: each row once, a piece into every panel */
    for (int64_t k = 0; k < K; k++)
      for (int64_t p = 0; p < panels; p++)
        memcpy(out + (p * K + k) * NR, b + k * rs + p * NR, sizeof(float) * (size_t)panel_cols(N, p));
  } else { /* columns contiguous (W_hh seen transposed): a panel is a block of W's rows, transposed */
    for (int64_t p = 0; p < panels; p++) {
      int nc = (int)panel_cols(N, p);
      cblas_somatcopy(CblasRowMajor, CblasTrans, nc, (int)K, 1.0f, b + p * NR * cs, (int)cs, out + p * K * NR, NR);
    }
  }
}

/* the layouts pack() reads: rows contiguous, or columns contiguous as a
 * row-major matrix within omatcopy's int */
static bool packable(int64_t K, int64_t rs, int64_t cs) {
  return cs == 1 || (rs == 1 && cs >= K && cs <= INT_MAX);
}

/* C rows [0, R) (R <= MR), columns [0, nc) of one panel: C = alpha A P + beta C
 * (beta 0: C is not read). Rows past R repeat the last row's pointer and
 * are not stored. */
__attribute__((target("avx2,fma"))) static void micro(int64_t K, const float *A, int64_t lda, int64_t R,
                                                       const float *P, float *C, int64_t ldc, int64_t nc,
                                                       float alpha, float beta) {
  const float *a0 = A, *a1 = A + (R > 1 ? 1 : 0) * lda, *a2 = A + (R > 2 ? 2 : R - 1) * lda,
              *a3 = A + (R > 3 ? 3 : R - 1) * lda;
  /* C's rows are fetched while the products run (as OpenBLAS's kernels do): the
   * recurrent step's C is the gate rows the input projection wrote for all
   * steps (MiBs earlier), and the read at the end missed cache: a quarter of
   * this function's time */
  for (int64_t r = 0; r < R; r++) {
    _mm_prefetch((const char *)(C + r * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(C + r * ldc + 16), _MM_HINT_T0);
    _mm_prefetch((const char *)(C + r * ldc + nc - 1), _MM_HINT_T0);
  }
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
  __m256 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
  for (int64_t k = 0; k < K; k++) {
    const float *p = P + k * NR;
    __m256 b0 = _mm256_load_ps(p), b1 = _mm256_load_ps(p + 8), b2 = _mm256_load_ps(p + 16), a;
    a = _mm256_broadcast_ss(a0 + k);
    c00 = _mm256_fmadd_ps(a, b0, c00), c01 = _mm256_fmadd_ps(a, b1, c01), c02 = _mm256_fmadd_ps(a, b2, c02);
    a = _mm256_broadcast_ss(a1 + k);
    c10 = _mm256_fmadd_ps(a, b0, c10), c11 = _mm256_fmadd_ps(a, b1, c11), c12 = _mm256_fmadd_ps(a, b2, c12);
    a = _mm256_broadcast_ss(a2 + k);
    c20 = _mm256_fmadd_ps(a, b0, c20), c21 = _mm256_fmadd_ps(a, b1, c21), c22 = _mm256_fmadd_ps(a, b2, c22);
    a = _mm256_broadcast_ss(a3 + k);
    c30 = _mm256_fmadd_ps(a, b0, c30), c31 = _mm256_fmadd_ps(a, b1, c31), c32 = _mm256_fmadd_ps(a, b2, c32);
  }
  float t[MR][NR];
  _mm256_storeu_ps(t[0], c00), _mm256_storeu_ps(t[0] + 8, c01), _mm256_storeu_ps(t[0] + 16, c02);
  _mm256_storeu_ps(t[1], c10), _mm256_storeu_ps(t[1] + 8, c11), _mm256_storeu_ps(t[1] + 16, c12);
  _mm256_storeu_ps(t[2], c20), _mm256_storeu_ps(t[2] + 8, c21), _mm256_storeu_ps(t[2] + 16, c22);
  _mm256_storeu_ps(t[3], c30), _mm256_storeu_ps(t[3] + 8, c31), _mm256_storeu_ps(t[3] + 16, c32);
  for (int64_t r = 0; r < R; r++) {
    float *c = C + r * ldc;
    if (beta == 0)
      for (int64_t j = 0; j < nc; j++) c[j] = alpha * t[r][j];
    else
      for (int64_t j = 0; j < nc; j++) c[j] = alpha * t[r][j] + beta * c[j];
  }
}

bool ts_cpu_gemm_reused_b(const ts_tensor *A, const ts_tensor *B, ts_tensor *O, double alpha, double beta,
                          int64_t token) {
  static int cpu_ok = -1;
  if (cpu_ok < 0) cpu_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const int64_t M = O->sizes[1], N = O->sizes[2], K = A->sizes[2];
  if (!cpu_ok || token == 0 || O->dtype != TS_FLOAT32 || O->sizes[0] != 1 || M > MAX_ROWS || K == 0 ||
      A->strides[2] != 1 || O->strides[2] != 1 || !packable(K, B->strides[1], B->strides[2]))
    return false;
  size_t need = (size_t)((N + NR - 1) / NR * NR) * (size_t)K * sizeof(float);
  if (need > MAX_PACKED || pthread_mutex_trylock(&lock) != 0) return false;
  const float *b = (const float *)ts_data(B);
  const int64_t rs = B->strides[1], cs = B->strides[2];
  slot *sl = NULL;
  for (int i = 0; i < SLOTS && !sl; i++)
    if (slots[i].token == token && slots[i].b == b && slots[i].K == K && slots[i].N == N && slots[i].rs == rs &&
        slots[i].cs == cs)
      sl = &slots[i];
  if (!sl) {
    sl = &slots[0];
    for (int i = 1; i < SLOTS; i++)
      if (slots[i].used < sl->used) sl = &slots[i];
    if (need > sl->cap) {
      free(sl->packed);
      sl->packed = aligned_alloc(64, need);
      sl->cap = sl->packed ? need : 0;
      sl->token = 0;
      if (!sl->packed) {
        pthread_mutex_unlock(&lock);
        return false;
      }
    }
    pack(b, K, N, rs, cs, sl->packed);
    sl->token = token, sl->b = b, sl->K = K, sl->N = N, sl->rs = rs, sl->cs = cs;
  }
  sl->used = ++uses;
  const float *packed = sl->packed;
  const float *a = (const float *)ts_data(A);
  float *o = (float *)ts_data(O);
  const int64_t lda = A->strides[1], ldo = O->strides[1], panels = (N + NR - 1) / NR;
  const int64_t work = M * N * K; /* one panel a thread's unit; a step GEMM is ~17 MFLOP */
  _Pragma("omp parallel for schedule(static) if (work > ((int64_t)1 << 22))")
  for (int64_t p = 0; p < panels; p++) {
    const int64_t nc = panel_cols(N, p);
    for (int64_t r = 0; r < M; r += MR)
      micro(K, a + r * lda, lda, M - r < MR ? M - r : MR, packed + p * K * NR, o + r * ldo + p * NR, ldo, nc,
            (float)alpha, (float)beta);
  }
  pthread_mutex_unlock(&lock);
  return true;
}
