/* CPU linalg kernels: the batched matrix product BMM (contract in
 * ops_linalg.def). float32/float64 go to OpenBLAS GEMM, reading transposed
 * operands through its trans flags and leading dims, so `a:t()` costs no copy.
 * float16/bfloat16 convert one batch entry to float32, GEMM, and convert back.
 * Everything else (integers, K = 0, layouts BLAS cannot read, sizes past
 * BLAS's int) takes a blocked loop; integer products accumulate in uint64 and
 * wrap like torch's, without signed-overflow UB.
 *
 * The batch loop around GEMM is serial on purpose: OpenBLAS threads each GEMM
 * itself, and calling it from inside an OpenMP region would put its threads
 * on top of ours. Only the blocked loop uses OpenMP, and it never calls BLAS. */
#include "cpu.h"

#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

/* ---- the blocked loop --------------------------------------------------- */

#define JB 64 /* output columns per block: the accumulators stay in registers/L1 */

/* A (B,M,K) @ Bm (B,K,N) into O (B,M,N), strides in elements, any layout.
 * CV converts alpha/beta to the accumulator type (through int64 for integers:
 * a negative double to uint64 is UB). beta 0: O is not read. */
#define GEMM_LOOP(NAME, S, ACC, LD, ST, CV)                                                          \
  static void NAME(const ts_tensor *A, const ts_tensor *Bm, ts_tensor *O, double alpha_, double beta_) { \
    const int64_t nb = O->sizes[0], M = O->sizes[1], N = O->sizes[2], K = A->sizes[2];             \
    const S *pa = ts_data(A), *pb = ts_data(Bm);                                                     \
    S *po = ts_data(O);                                                                              \
    const int64_t *sa = A->strides, *sb = Bm->strides, *so = O->strides;                             \
    const ACC alpha = CV(alpha_), beta = CV(beta_);                                                  \
    const int64_t rows = nb * M;                                                                     \
    const int par = rows > 1 && (double)rows * (double)N * (double)(K + 1) > 1e6 && !omp_in_parallel(); \
    _Pragma("omp parallel for schedule(static) if (par)")                                           \
    for (int64_t r = 0; r < rows; r++) {                                                             \
      const int64_t bi = r / M, i = r % M;                                                           \
      const S *arow = pa + bi * sa[0] + i * sa[1];                                                   \
      const S *bmat = pb + bi * sb[0];                                                               \
      S *orow = po + bi * so[0] + i * so[1];                                                         \
      ACC acc[JB];                                                                                   \
      for (int64_t j0 = 0; j0 < N; j0 += JB) {                                                       \
        const int64_t jn = N - j0 < JB ? N - j0 : JB;                                                \
        for (int64_t j = 0; j < jn; j++) acc[j] = 0;                                                 \
        for (int64_t k = 0; k < K; k++) {                                                            \
          const ACC av = (ACC)LD(arow + k * sa[2], S);                                               \
          const S *brow = bmat + k * sb[1] + j0 * sb[2];                                             \
          for (int64_t j = 0; j < jn; j++) acc[j] += av * (ACC)LD(brow + j * sb[2], S);              \
        }                                                                                            \
        for (int64_t j = 0; j < jn; j++) {                                                           \
          S *q = orow + (j0 + j) * so[2];                                                            \
          ACC v = alpha * acc[j];                                                                    \
          if (beta_ != 0) v += beta * (ACC)LD(q, S);                                                 \
          ST(q, S, v);                                                                               \
        }                                                                                            \
      }                                                                                              \
    }                                                                                                \
  }

#define CV_F(x) (x)
#define CV_I(x) ((uint64_t)(int64_t)(x))

GEMM_LOOP(loop_f32, float, double, TS_LD_SAME, TS_ST_SAME, CV_F)
GEMM_LOOP(loop_f64, double, double, TS_LD_SAME, TS_ST_SAME, CV_F)
GEMM_LOOP(loop_f16, uint16_t, float, TS_LD_F16, TS_ST_F16, (float)CV_F)
GEMM_LOOP(loop_bf16, uint16_t, float, TS_LD_BF16, TS_ST_BF16, (float)CV_F)
GEMM_LOOP(loop_i64, int64_t, uint64_t, TS_LD_SAME, TS_ST_SAME, CV_I)
GEMM_LOOP(loop_i32, int32_t, uint64_t, TS_LD_SAME, TS_ST_SAME, CV_I)
GEMM_LOOP(loop_i16, int16_t, uint64_t, TS_LD_SAME, TS_ST_SAME, CV_I)
GEMM_LOOP(loop_i8, int8_t, uint64_t, TS_LD_SAME, TS_ST_SAME, CV_I)
GEMM_LOOP(loop_u8, uint8_t, uint64_t, TS_LD_SAME, TS_ST_SAME, CV_I)

typedef void (*gemm_loop)(const ts_tensor *, const ts_tensor *, ts_tensor *, double, double);
static const gemm_loop loops[TS_DTYPE_COUNT] = {
    [TS_FLOAT32] = loop_f32, [TS_FLOAT64] = loop_f64, [TS_FLOAT16] = loop_f16, [TS_BFLOAT16] = loop_bf16,
    [TS_INT64] = loop_i64,   [TS_INT32] = loop_i32,   [TS_INT16] = loop_i16, [TS_INT8] = loop_i8,
    [TS_UINT8] = loop_u8,
};

/* ---- BLAS --------------------------------------------------------------- */

/* One GEMM per batch entry, the same geometry for all. swap: the output is
 * column-major, so we compute O^T = Bm^T A^T into it as a row-major matrix. */
typedef struct gemm_plan {
  bool swap, ta, tb;
  int m, n, k, lda, ldb, ldo;
} gemm_plan;

static bool plan_gemm(const ts_tensor *A, const ts_tensor *Bm, const ts_tensor *O, gemm_plan *p) {
  int64_t M = O->sizes[1], N = O->sizes[2], K = A->sizes[2];
  /* (rows, cols, rs, cs) of A, Bm, O */
  int64_t a[4] = {M, K, A->strides[1], A->strides[2]}, b[4] = {K, N, Bm->strides[1], Bm->strides[2]};
  int64_t o[4] = {M, N, O->strides[1], O->strides[2]};
  bool ot;
  if (!ts_blas_layout(o[0], o[1], o[2], o[3], &ot, &p->ldo)) return false;
  p->swap = ot;
  if (ot) { /* transpose everything: A' = Bm^T (N,K), B' = A^T (K,M), O' = O^T (N,M) */
    int64_t na[4] = {b[1], b[0], b[3], b[2]}, nbb[4] = {a[1], a[0], a[3], a[2]};
    for (int i = 0; i < 4; i++) a[i] = na[i], b[i] = nbb[i];
    int64_t t = o[0];
    o[0] = o[1], o[1] = t, t = o[2], o[2] = o[3], o[3] = t;
    if (!ts_blas_layout(o[0], o[1], o[2], o[3], &ot, &p->ldo) || ot) return false;
  }
  if (!ts_blas_layout(a[0], a[1], a[2], a[3], &p->ta, &p->lda)) return false;
  if (!ts_blas_layout(b[0], b[1], b[2], b[3], &p->tb, &p->ldb)) return false;
  if (K > INT_MAX) return false;
  p->m = (int)o[0], p->n = (int)o[1], p->k = (int)K;
  return true;
}

#define TR(t) ((t) ? CblasTrans : CblasNoTrans)

/* A weight gradient's shape: O (m, n) = A^T B with A read transposed, m at
 * least twice n and k at least twice m (dW = dY^T X of a Linear or an RNN
 * over many rows). OpenBLAS packs A's wide side with its transposing copy,
 * slow on long k; O^T = B^T A into scratch, then transposed into O by
 * OpenBLAS's omatcopy, is 4-9 % faster at 1 thread (1024 x 256 x 2048:
 * 11.37 -> 10.44 ms with the transpose; it loses below these ratios). */
static bool swap_pays(const gemm_plan *p, double beta) {
  return p->ta && !p->tb && beta == 0 && p->m >= 2 * p->n && p->k >= 2 * p->m;
}

static ts_status gemm_blas(const ts_tensor *A, const ts_tensor *Bm, ts_tensor *O, const gemm_plan *p, double alpha,
                           double beta) {
  size_t es = ts_dtype_size(O->dtype);
  float *ot = O->dtype == TS_FLOAT32 && swap_pays(p, beta) ? malloc(sizeof(float) * (size_t)p->m * (size_t)p->n) : NULL;
  for (int64_t bi = 0; bi < O->sizes[0]; bi++) {
    const char *pa = (const char *)ts_data(A) + bi * A->strides[0] * (int64_t)es;
    const char *pb = (const char *)ts_data(Bm) + bi * Bm->strides[0] * (int64_t)es;
    char *po = (char *)ts_data(O) + bi * O->strides[0] * (int64_t)es;
    if (p->swap) {
      const char *t = pa;
      pa = pb, pb = t;
    }
    if (ot) { /* ta, !tb: O^T (n, m) = B^T A */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p->n, p->m, p->k, (float)alpha, (const float *)pb, p->ldb,
                  (const float *)pa, p->lda, 0.0f, ot, p->m);
      cblas_somatcopy(CblasRowMajor, CblasTrans, p->n, p->m, 1.0f, ot, p->m, (float *)po, p->ldo);
    } else if (O->dtype == TS_FLOAT32)
      cblas_sgemm(CblasRowMajor, TR(p->ta), TR(p->tb), p->m, p->n, p->k, (float)alpha, (const float *)pa, p->lda,
                  (const float *)pb, p->ldb, (float)beta, (float *)po, p->ldo);
    else
      cblas_dgemm(CblasRowMajor, TR(p->ta), TR(p->tb), p->m, p->n, p->k, alpha, (const double *)pa, p->lda,
                  (const double *)pb, p->ldb, beta, (double *)po, p->ldo);
    ts_status st = ts_check_interrupt();
    if (st) {
      free(ot);
      return st;
    }
  }
  free(ot);
  return TS_OK;
}

/* float16/bfloat16: each batch entry converted to contiguous float32, one
 * sgemm, then rounded back once (torch's CPU half matmul also accumulates in
 * float). Returns false, having written nothing, when the buffers cannot be
 * allocated or the sizes pass BLAS's int; the caller falls back to the loop. */
static bool gemm_half(const ts_tensor *A, const ts_tensor *Bm, ts_tensor *O, double alpha, double beta,
                      ts_status *st) {
  const int64_t nb = O->sizes[0], M = O->sizes[1], N = O->sizes[2], K = A->sizes[2];
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX || M * K > INT_MAX || K * N > INT_MAX || M * N > INT_MAX) return false;
  const bool bf = O->dtype == TS_BFLOAT16;
  float *fa = malloc(sizeof(float) * (size_t)(M * K)), *fb = malloc(sizeof(float) * (size_t)(K * N));
  float *fo = malloc(sizeof(float) * (size_t)(M * N));
  bool ok = fa && fb && fo;
  *st = TS_OK;
  for (int64_t bi = 0; ok && bi < nb && !*st; bi++) {
    const uint16_t *pa = (const uint16_t *)ts_data(A) + bi * A->strides[0];
    const uint16_t *pb = (const uint16_t *)ts_data(Bm) + bi * Bm->strides[0];
    uint16_t *po = (uint16_t *)ts_data(O) + bi * O->strides[0];
#define LOADF(x) (bf ? ts_bf16_to_float(x) : ts_half_to_float(x))
    for (int64_t i = 0; i < M; i++)
      for (int64_t k = 0; k < K; k++) fa[i * K + k] = LOADF(pa[i * A->strides[1] + k * A->strides[2]]);
    for (int64_t k = 0; k < K; k++)
      for (int64_t j = 0; j < N; j++) fb[k * N + j] = LOADF(pb[k * Bm->strides[1] + j * Bm->strides[2]]);
    if (beta != 0)
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) fo[i * N + j] = LOADF(po[i * O->strides[1] + j * O->strides[2]]);
#undef LOADF
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, (float)alpha, fa, (int)K, fb,
                (int)N, (float)beta, fo, (int)N);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        float v = fo[i * N + j];
        po[i * O->strides[1] + j * O->strides[2]] = bf ? ts_float_to_bf16(v) : ts_float_to_half(v);
      }
    *st = ts_check_interrupt();
  }
  free(fa), free(fb), free(fo);
  return ok;
}

/* ---- the kernel --------------------------------------------------------- */

static ts_status k_bmm(const ts_call *c) {
  const ts_tensor *A = c->in[0], *Bm = c->in[1];
  ts_tensor *O = c->out[0];
  const ts_dtype dt = O->dtype;
  const double alpha = c->f[0], beta = c->f[1];
  if (!loops[dt]) return ts_fail(TS_ERR_DTYPE, "bmm is not implemented for %s tensors", ts_dtype_name(dt));
  if (O->sizes[0] == 0 || O->sizes[1] == 0 || O->sizes[2] == 0) return TS_OK;
  if (A->sizes[2] > 0) { /* K = 0 is beta*O: BLAS implementations differ there, the loop does not */
    /* i[0]: the op layer's token for a B it passes again unchanged (the recurrent layers' W_hh) */
    if (c->i[0] && ts_cpu_gemm_reused_b(A, Bm, O, alpha, beta, c->i[0])) return ts_check_interrupt();
    gemm_plan p;
    if ((dt == TS_FLOAT32 || dt == TS_FLOAT64) && plan_gemm(A, Bm, O, &p)) return gemm_blas(A, Bm, O, &p, alpha, beta);
    ts_status st;
    if ((dt == TS_FLOAT16 || dt == TS_BFLOAT16) && gemm_half(A, Bm, O, alpha, beta, &st)) return st;
  }
  loops[dt](A, Bm, O, alpha, beta);
  return ts_check_interrupt();
}

void ts_cpu_register_linalg(ts_kernel *k) { k[TS_OP_BMM] = k_bmm; }
