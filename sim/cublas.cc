// cuBLAS and cuBLASLt as the simulated device provides them: the calls
// cuda/linalg.cu makes, with their argument checks (sizes, leading
// dimensions, every batch entry inside its allocation), computed on the CPU
// with OpenBLAS in stream order. float16, bfloat16 and TF32 run through
// float32 with their inputs rounded to the type first, so results match a
// GPU's to the accumulation order. Replaces cuda/cublas_loader.cu, which
// loads the real libraries, in the simulated build.
//
// The rules the real libraries leave undefined are checked: an output that
// overlaps an input (cuBLAS computes in place only C == D in cuBLASLt), an
// operand not aligned to its element, and in cuBLASLt an operand less
// aligned than the preference the algorithm was chosen under said
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), and a bias vector less aligned
// than its pointer was when the heuristic read it. Of the epilogues, BIAS,
// BGRADA and BGRADB are emulated (a vector of D's type, one batch entry); the
// heuristic finds no algorithm for the others, nor for compute and data types
// outside float32 accumulation (float32, TF32, float16, bfloat16) and float64
// without an epilogue. TENSH_SIM_LT_DECLINE=1 makes
// cuBLASLt find no algorithm for any matmul, as it may for a shape or
// alignment it has no kernel for, so the caller's fallback runs.
#include "sim.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cblas.h>
#include <stdio.h>

#include <vector>

using namespace tsim;

struct cublasContext {
  cudaStream_t stream = 0;
};
struct cublasLtContext {};
struct lt_pref {
  uint32_t align[4] = {256, 256, 256, 256}; // A, B, C, D: cuBLASLt's defaults
};
struct lt_desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const char *bias = nullptr; // CUBLASLT_MATMUL_DESC_BIAS_POINTER: the bias, or where a bias gradient goes
  int32_t bias_type = -1;     // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE; -1: D's type
  int64_t bias_batch_stride = 0;
};
struct lt_layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld, batch_stride = 0;
  int32_t batch = 1;
};

static size_t elem_size(cudaDataType t) {
  switch (t) {
  case CUDA_R_64F: return 8;
  case CUDA_R_32F: return 4;
  case CUDA_R_16F: case CUDA_R_16BF: return 2;
  default: return 0;
  }
}

static float load(cudaDataType t, const char *p, bool tf32) {
  float v;
  switch (t) {
  case CUDA_R_16F: v = __half2float(*(const __half *)p); break;
  case CUDA_R_16BF: v = __bfloat162float(*(const __nv_bfloat16 *)p); break;
  default: v = *(const float *)p;
  }
  if (tf32) { // round to TF32's 10 mantissa bits (nearest, ties away), as the tensor cores read float32
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&v, &u, 4);
  }
  return v;
}

static void store(cudaDataType t, char *p, float v) {
  switch (t) {
  case CUDA_R_16F: *(__half *)p = __float2half_rn(v); break;
  case CUDA_R_16BF: *(__nv_bfloat16 *)p = __float2bfloat16_rn(v); break;
  default: *(float *)p = v;
  }
}

// What cuBLASLt's epilogue adds, as emulated: nothing, a bias added to every
// column of D (CUBLASLT_EPILOGUE_BIAS), or a bias gradient: op(A)'s rows
// (BGRADA, length m) or op(B)'s columns (BGRADB, length n) summed over k into
// a vector of D's type. The other epilogues (ReLU, GELU, their aux outputs)
// are not emulated: the heuristic declines them.
struct lt_epi {
  uint32_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const char *vec = nullptr;
  cudaDataType type = CUDA_R_32F; // the vector's (D's)
};

static bool epi_known(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_BGRADA ||
         e == CUBLASLT_EPILOGUE_BGRADB;
}

// One column-major matrix as cuBLAS reads it.
struct mat {
  const char *p;
  cudaDataType type;
  int64_t rows, cols, ld, bs; // stored shape, leading dim, batch stride (elements)
};

// The bytes the stored matrices of all batch entries span: [*lo, *lo + *n).
static void mat_span(const mat &m, int64_t nb, const char **lo, size_t *n) {
  *lo = m.p, *n = 0;
  if (m.rows == 0 || m.cols == 0 || nb == 0) return;
  int64_t first = 0, last = (m.cols - 1) * m.ld + m.rows; // element range of entry 0
  if (m.bs >= 0) last += (nb - 1) * m.bs;
  else first += (nb - 1) * m.bs;
  size_t es = elem_size(m.type);
  *lo = m.p + first * (int64_t)es, *n = (size_t)(last - first) * es;
}

// When the call runs: each matrix inside a live block of the caching allocator.
static bool blocks_ok(const mat *ms, int count, int64_t nb, const char *what) {
  for (int i = 0; i < count; i++) {
    const char *lo;
    size_t n;
    mat_span(ms[i], nb, &lo, &n);
    if (n && check_block_range(lo, n, what)) return false;
  }
  return true;
}

// The stored matrix of each batch entry must lie in one device allocation.
static bool mat_ok(const mat &m, int64_t nb, const char *what) {
  if (m.ld < (m.rows > 1 ? m.rows : 1)) {
    fail(cudaErrorInvalidValue, false, "%s: leading dimension %lld is less than its %lld rows", what,
         (long long)m.ld, (long long)m.rows);
    return false;
  }
  const char *lo;
  size_t n;
  mat_span(m, nb, &lo, &n);
  return !n || check_device_range(lo, n, -1, what) == cudaSuccess;
}

// An operand not aligned to its element size: CUDA's misaligned address in the library's kernel.
static bool aligned_to(const char *p, size_t align, const char *what) {
  if (!((uintptr_t)p & (align - 1))) return true;
  fail(cudaErrorMisalignedAddress, true, "%s at 0x%lx is not aligned to %zu bytes", what, (unsigned long)p, align);
  return false;
}

// The output's bytes must not overlap an input's (an in-place product is undefined).
static bool apart(const mat &out, const mat &in, int64_t nb, const char *what) {
  const char *o, *i;
  size_t on, in_n;
  mat_span(out, nb, &o, &on);
  mat_span(in, nb, &i, &in_n);
  if (!on || !in_n || o + on <= i || i + in_n <= o) return true;
  fail(cudaErrorInvalidValue, false, "%s: the output [0x%lx, +%zu) overlaps an input [0x%lx, +%zu)", what,
       (unsigned long)o, on, (unsigned long)i, in_n);
  return false;
}

// The epilogue's bias gradient of one batch entry: op(A)'s rows (BGRADA) or
// op(B)'s columns (BGRADB) summed over k in float, as read (not TF32-rounded).
static void bias_grad_host(const lt_epi &e, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const mat &A,
                           const char *a, const mat &B, const char *bb) {
  const bool on_a = e.kind == CUBLASLT_EPILOGUE_BGRADA;
  const mat &X = on_a ? A : B;
  const char *x = on_a ? a : bb;
  const bool tr = on_a ? ta : tb;
  const int64_t len = on_a ? m : n;
  const size_t es = elem_size(X.type);
  for (int64_t v = 0; v < len; v++) {
    // op(A) (m x k): element (v, kk) is stored at (v, kk), or at (kk, v) when A is transposed;
    // op(B) (k x n): element (kk, v) is stored at (kk, v), or at (v, kk) when B is transposed
    float acc = 0;
    for (int64_t kk = 0; kk < k; kk++) {
      const bool at_vk = on_a ? !tr : tr;
      int64_t off = at_vk ? v + kk * X.ld : kk + v * X.ld;
      acc += load(X.type, x + off * (int64_t)es, false);
    }
    store(e.type, (char *)e.vec + v * (int64_t)elem_size(e.type), acc);
  }
}

// D = alpha op(A) op(B) + beta C (+ the epilogue's bias) for each batch entry,
// on the host; a bias gradient epilogue writes its vector too.
static void gemm_host(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, mat A, mat B, double beta,
                      mat C, mat D, int64_t nb, bool f64, bool tf32, const lt_epi &epi = lt_epi()) {
  size_t es = elem_size(D.type);
  for (int64_t b = 0; b < nb; b++) {
    const char *a = A.p + b * A.bs * (int64_t)es, *bb = B.p + b * B.bs * (int64_t)es;
    const char *c = C.p + b * C.bs * (int64_t)es;
    char *d = (char *)D.p + b * D.bs * (int64_t)es;
    if (f64) {
      std::vector<double> out(m * n);
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) out[i + j * m] = beta != 0 ? beta * ((const double *)c)[i + j * C.ld] : 0;
      if (k > 0)
        cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                    (int)k, alpha, (const double *)a, (int)A.ld, (const double *)bb, (int)B.ld, 1.0, out.data(), (int)m);
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) ((double *)d)[i + j * D.ld] = out[i + j * m];
      continue;
    }
    // float32 through packed copies: half types widened, TF32 rounded
    std::vector<float> fa(A.rows * A.cols), fb(B.rows * B.cols), out(m * n);
    for (int64_t j = 0; j < A.cols; j++)
      for (int64_t i = 0; i < A.rows; i++) fa[i + j * A.rows] = load(A.type, a + (i + j * A.ld) * (int64_t)es, tf32);
    for (int64_t j = 0; j < B.cols; j++)
      for (int64_t i = 0; i < B.rows; i++) fb[i + j * B.rows] = load(B.type, bb + (i + j * B.ld) * (int64_t)es, tf32);
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = 0; i < m; i++)
        out[i + j * m] = beta != 0 ? (float)beta * load(C.type, c + (i + j * C.ld) * (int64_t)es, false) : 0.0f;
    if (k > 0)
      cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                  (float)alpha, fa.data(), (int)(A.rows > 0 ? A.rows : 1), fb.data(), (int)(B.rows > 0 ? B.rows : 1),
                  1.0f, out.data(), (int)(m > 0 ? m : 1));
    if (epi.kind == CUBLASLT_EPILOGUE_BIAS) // added in float before D is rounded to its type, as the epilogue does
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) out[i + j * m] += load(epi.type, epi.vec + i * (int64_t)es, false);
    if (epi.kind == CUBLASLT_EPILOGUE_BGRADA || epi.kind == CUBLASLT_EPILOGUE_BGRADB)
      bias_grad_host(epi, ta, tb, m, n, k, A, a, B, bb);
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = 0; i < m; i++) store(D.type, d + (i + j * D.ld) * (int64_t)es, out[i + j * m]);
  }
}

static double scalar(const void *p, bool f64) { return f64 ? *(const double *)p : (double)*(const float *)p; }

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
  *h = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *w, size_t n) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::recursive_mutex> g(lock());
  if (n && check_device_range(w, n, -1, "cublasSetWorkspace")) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m,
                                          int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                                          long long strideA, const void *B, cudaDataType Btype, int ldb,
                                          long long strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long strideC, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::recursive_mutex> g(lock());
  if (sticky_error()) return CUBLAS_STATUS_EXECUTION_FAILED;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || Atype != Ctype || Btype != Ctype || !elem_size(Ctype))
    return CUBLAS_STATUS_INVALID_VALUE;
  bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N, f64 = Ctype == CUDA_R_64F;
  if (f64 != (compute == CUBLAS_COMPUTE_64F)) return CUBLAS_STATUS_INVALID_VALUE;
  mat a{(const char *)A, Atype, ta ? k : m, ta ? m : k, lda, strideA};
  mat b{(const char *)B, Btype, tb ? n : k, tb ? k : n, ldb, strideB};
  mat c{(const char *)C, Ctype, m, n, ldc, strideC};
  if (!mat_ok(a, batch, "cublasGemmStridedBatchedEx A") || !mat_ok(b, batch, "cublasGemmStridedBatchedEx B") ||
      !mat_ok(c, batch, "cublasGemmStridedBatchedEx C") || !apart(c, a, batch, "cublasGemmStridedBatchedEx") ||
      !apart(c, b, batch, "cublasGemmStridedBatchedEx"))
    return CUBLAS_STATUS_INVALID_VALUE;
  size_t es = elem_size(Ctype);
  if (!aligned_to((const char *)A, es, "cublasGemmStridedBatchedEx A") ||
      !aligned_to((const char *)B, es, "cublasGemmStridedBatchedEx B") ||
      !aligned_to((const char *)C, es, "cublasGemmStridedBatchedEx C"))
    return CUBLAS_STATUS_EXECUTION_FAILED;
  double al = scalar(alpha, f64), be = scalar(beta, f64);
  bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  cudaError_t e = enqueue_host(h->stream, "cublasGemmStridedBatchedEx", [=] {
    const mat ms[] = {a, b, c};
    if (blocks_ok(ms, 3, batch, "cublasGemmStridedBatchedEx")) gemm_host(ta, tb, m, n, k, al, a, b, be, c, c, batch, f64, tf32);
  });
  return e ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t scale) {
  lt_desc *p = new lt_desc();
  p->compute = c, p->scale = scale;
  *d = (cublasLtMatmulDesc_t)p;
  return scale == CUDA_R_32F || scale == CUDA_R_64F ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete (lt_desc *)d;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                              const void *buf, size_t n) {
  lt_desc *p = (lt_desc *)d;
  // each attribute's size as cublasLt.h gives its type; the ones not emulated are refused
  struct {
    cublasLtMatmulDescAttributes_t a;
    size_t n;
    void *field;
  } const known[] = {{CUBLASLT_MATMUL_DESC_TRANSA, 4, &p->ta},
                     {CUBLASLT_MATMUL_DESC_TRANSB, 4, &p->tb},
                     {CUBLASLT_MATMUL_DESC_EPILOGUE, 4, &p->epilogue},
                     {CUBLASLT_MATMUL_DESC_BIAS_POINTER, sizeof(void *), &p->bias},
                     {CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, 4, &p->bias_type},
                     {CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, 8, &p->bias_batch_stride}};
  for (const auto &k : known)
    if (a == k.a) {
      if (n != k.n || !buf) return CUBLAS_STATUS_INVALID_VALUE;
      memcpy(k.field, buf, n);
      return CUBLAS_STATUS_SUCCESS;
    }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  if (!elem_size(t)) return CUBLAS_STATUS_NOT_SUPPORTED;
  lt_layout *p = new lt_layout{t, rows, cols, ld};
  *l = (cublasLtMatrixLayout_t)p;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete (lt_layout *)l;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,
                                                const void *buf, size_t n) {
  lt_layout *p = (lt_layout *)l;
  if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && n == 4) memcpy(&p->batch, buf, 4);
  else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && n == 8) memcpy(&p->batch_stride, buf, 8);
  else return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = (cublasLtMatmulPreference_t) new lt_pref();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete (lt_pref *)p;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a, const void *buf, size_t n) {
  if (n != 4 && n != 8) return CUBLAS_STATUS_INVALID_VALUE;
  static const cublasLtMatmulPreferenceAttributes_t aligns[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; i++)
    if (a == aligns[i]) {
      uint32_t v;
      if (n != 4) return CUBLAS_STATUS_INVALID_VALUE;
      memcpy(&v, buf, 4);
      if (!v || (v & (v - 1))) return CUBLAS_STATUS_INVALID_VALUE;
      ((lt_pref *)p)->align[i] = v;
    }
  return CUBLAS_STATUS_SUCCESS;
}

// What the emulated heuristic puts in an algorithm: the alignment (bytes) of
// A, B, C and D its kernel needs (what the preference promised, up to 16),
// then the bias vector's (what its pointer had when the heuristic read it, up
// to 16: cublasLt.h says routines that do not dereference the pointer, the
// heuristic among them, use its value to decide the alignment expected).
static void algo_alignments(const cublasLtMatmulAlgo_t &algo, uint32_t out[5]) { memcpy(out, algo.data, 20); }

static uint32_t pointer_alignment(const void *p) {
  uint32_t al = 1;
  while (al < 16 && !((uintptr_t)p & al)) al <<= 1;
  return al;
}

static bool epi_has_vector(uint32_t e) { return e != CUBLASLT_EPILOGUE_DEFAULT; }

// The (compute, scale, matrix type) combinations emulated, as cublasLtMatmul's
// table lists them: float32 accumulation for float32 (TF32 too), float16 and
// bfloat16, scaled in float32; float64 in float64, without an epilogue.
static bool types_emulated(const lt_desc *d, const lt_layout *const ls[4]) {
  for (int i = 1; i < 4; i++)
    if (ls[i]->type != ls[0]->type) return false;
  const cudaDataType t = ls[0]->type;
  if (d->compute == CUBLAS_COMPUTE_64F) return d->scale == CUDA_R_64F && t == CUDA_R_64F && !epi_has_vector(d->epilogue);
  if (d->compute == CUBLAS_COMPUTE_32F_FAST_TF32) return d->scale == CUDA_R_32F && t == CUDA_R_32F;
  return d->compute == CUBLAS_COMPUTE_32F && d->scale == CUDA_R_32F &&
         (t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF);
}

static bool lt_declines() {
  static bool on = [] {
    const char *v = getenv("TENSH_SIM_LT_DECLINE");
    return v && !strcmp(v, "1");
  }();
  return on;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Ad,
                                              cublasLtMatrixLayout_t Bd, cublasLtMatrixLayout_t Cd,
                                              cublasLtMatrixLayout_t Dd, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int *returned) {
  if (!h || requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  if (lt_declines()) return CUBLAS_STATUS_NOT_SUPPORTED; // as cuBLASLt says when it has no algorithm
  if (!desc || !Ad || !Bd || !Cd || !Dd || !pref) return CUBLAS_STATUS_INVALID_VALUE;
  const lt_desc *dd = (const lt_desc *)desc;
  const lt_layout *ls[4] = {(const lt_layout *)Ad, (const lt_layout *)Bd, (const lt_layout *)Cd, (const lt_layout *)Dd};
  // what is not emulated has no algorithm here, so a caller's fallback runs rather than a guess
  if (!types_emulated(dd, ls) || !epi_known(dd->epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
  uint32_t need[5];
  need[4] = 0;
  if (epi_has_vector(dd->epilogue)) {
    if (!dd->bias) return CUBLAS_STATUS_INVALID_VALUE;
    // a vector of another type than D's, or one per batch entry, is not emulated
    if ((dd->bias_type != -1 && dd->bias_type != (int32_t)ls[3]->type) || ls[3]->batch != 1)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    need[4] = pointer_alignment(dd->bias);
    if (need[4] < elem_size(ls[3]->type)) return CUBLAS_STATUS_NOT_SUPPORTED; // no kernel reads split elements
  }
  memset(&results[0], 0, sizeof results[0]);
  for (int i = 0; i < 4; i++) need[i] = ((const lt_pref *)pref)->align[i] < 16 ? ((const lt_pref *)pref)->align[i] : 16;
  memcpy(results[0].algo.data, need, sizeof need);
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Ad, const void *B, cublasLtMatrixLayout_t Bd, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn, cudaStream_t s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::recursive_mutex> g(lock());
  if (sticky_error()) return CUBLAS_STATUS_EXECUTION_FAILED;
  const lt_desc *dd = (const lt_desc *)desc;
  const lt_layout *la = (const lt_layout *)Ad, *lb = (const lt_layout *)Bd, *lc = (const lt_layout *)Cd,
                  *ld = (const lt_layout *)Dd;
  bool ta = dd->ta != CUBLAS_OP_N, tb = dd->tb != CUBLAS_OP_N;
  int64_t m = (int64_t)ld->rows, n = (int64_t)ld->cols, k = (int64_t)(ta ? la->rows : la->cols);
  if ((int64_t)(ta ? la->cols : la->rows) != m || (int64_t)(tb ? lb->rows : lb->cols) != n ||
      (int64_t)(tb ? lb->cols : lb->rows) != k || lc->rows != ld->rows || lc->cols != ld->cols ||
      la->batch != ld->batch || lb->batch != ld->batch || lc->batch != ld->batch)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (wsn && check_device_range(ws, wsn, -1, "cublasLtMatmul workspace")) return CUBLAS_STATUS_INVALID_VALUE;
  int64_t nb = ld->batch;
  mat a{(const char *)A, la->type, (int64_t)la->rows, (int64_t)la->cols, la->ld, la->batch_stride};
  mat b{(const char *)B, lb->type, (int64_t)lb->rows, (int64_t)lb->cols, lb->ld, lb->batch_stride};
  mat c{(const char *)C, lc->type, (int64_t)lc->rows, (int64_t)lc->cols, lc->ld, lc->batch_stride};
  mat d{(const char *)D, ld->type, (int64_t)ld->rows, (int64_t)ld->cols, ld->ld, ld->batch_stride};
  if (!mat_ok(a, nb, "cublasLtMatmul A") || !mat_ok(b, nb, "cublasLtMatmul B") || !mat_ok(c, nb, "cublasLtMatmul C") ||
      !mat_ok(d, nb, "cublasLtMatmul D") || !apart(d, a, nb, "cublasLtMatmul") || !apart(d, b, nb, "cublasLtMatmul") ||
      ((const char *)C != (const char *)D && !apart(d, c, nb, "cublasLtMatmul")))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!algo) return CUBLAS_STATUS_INVALID_VALUE;
  const lt_layout *ls[4] = {la, lb, lc, ld};
  if (!types_emulated(dd, ls) || !epi_known(dd->epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
  // every batch entry as aligned as the algorithm was chosen for
  uint32_t need[5];
  algo_alignments(*algo, need);
  lt_epi epi;
  epi.kind = dd->epilogue, epi.vec = dd->bias, epi.type = ld->type;
  mat vec{dd->bias, ld->type, 0, 1, 1, 0}; // the epilogue's vector as a one-column matrix
  if (epi_has_vector(epi.kind)) {
    // the heuristic saw this epilogue's vector (need[4] set) for one batch entry
    if (!need[4] || nb != 1 || !dd->bias) return CUBLAS_STATUS_INVALID_VALUE;
    vec.rows = vec.ld = epi.kind == CUBLASLT_EPILOGUE_BGRADB ? n : m;
    if (!aligned_to(dd->bias, need[4] > elem_size(ld->type) ? need[4] : elem_size(ld->type), "cublasLtMatmul bias"))
      return CUBLAS_STATUS_EXECUTION_FAILED;
    if (!mat_ok(vec, 1, "cublasLtMatmul bias") || !apart(d, vec, 1, "cublasLtMatmul (bias)"))
      return CUBLAS_STATUS_INVALID_VALUE;
    // a bias gradient is an output: apart from the inputs too
    if (epi.kind != CUBLASLT_EPILOGUE_BIAS &&
        (!apart(vec, a, 1, "cublasLtMatmul bias gradient") || !apart(vec, b, 1, "cublasLtMatmul bias gradient") ||
         !apart(vec, c, 1, "cublasLtMatmul bias gradient")))
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  const mat *ms[4] = {&a, &b, &c, &d};
  static const char *names[4] = {"cublasLtMatmul A", "cublasLtMatmul B", "cublasLtMatmul C", "cublasLtMatmul D"};
  for (int i = 0; i < 4; i++) {
    size_t es = elem_size(ms[i]->type);
    for (int64_t e = 0; e < (nb > 1 ? 2 : 1); e++) // entry 0 and 1: the stride's alignment shows in the second
      if (!aligned_to(ms[i]->p + e * ms[i]->bs * (int64_t)es, need[i] > es ? need[i] : es, names[i]))
        return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  const bool f64 = dd->compute == CUBLAS_COMPUTE_64F, tf32 = dd->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  double al = scalar(alpha, f64), be = scalar(beta, f64);
  const int nm = epi_has_vector(epi.kind) ? 5 : 4;
  cudaError_t e = enqueue_host(s, "cublasLtMatmul", [=] {
    const mat ms[] = {a, b, c, d, vec};
    if (blocks_ok(ms, nm, nb, "cublasLtMatmul")) gemm_host(ta, tb, m, n, k, al, a, b, be, c, d, nb, f64, tf32, epi);
  });
  return e ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

} // extern "C"
