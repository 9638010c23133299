// cuBLAS and cuBLASLt, loaded on first use instead of linked: their
// initialisers cost ~60 ms at every start-up, GPU or not, and tensh must start
// in milliseconds for CPU work. Each function linalg.cu calls is defined here
// with its header's signature and forwards to the library's own symbol
// (dlopen'ed once, found with dlsym on that library's handle). Without the
// libraries, every call returns CUBLAS_STATUS_NOT_INITIALIZED, which linalg.cu
// reports as a cuBLAS error: matmul fails on CUDA with a message, nothing else.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define TSC_STR2(x) #x
#define TSC_STR(x) TSC_STR2(x)

static void *blas_lib, *blaslt_lib;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

// The soname the headers were built for (the same major version at run
// time), from the loader's paths, else from the toolkit tensh was built with.
static void *open_lib(const char *soname, int flags) {
  void *h = dlopen(soname, flags);
#ifdef TSC_CUDA_LIB_DIR
  if (!h) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", TSC_CUDA_LIB_DIR, soname);
    h = dlopen(path, flags);
  }
#endif
  return h;
}

static void load_libraries(void) {
  blaslt_lib = open_lib("libcublasLt.so." TSC_STR(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_GLOBAL);
  blas_lib = open_lib("libcublas.so." TSC_STR(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_LOCAL);
  if (!blas_lib || !blaslt_lib)
    fprintf(stderr, "tensh: cuBLAS could not be loaded (%s): matmul on CUDA is unavailable\n", dlerror());
}

static void *symbol(bool lt, const char *name) {
  pthread_once(&load_once, load_libraries);
  void *lib = lt ? blaslt_lib : blas_lib;
  return lib ? dlsym(lib, name) : NULL;
}

#define TSC_FORWARD(LT, NAME, PARAMS, ARGS)                          \
  cublasStatus_t CUBLASWINAPI NAME PARAMS {                          \
    using fn_t = cublasStatus_t(CUBLASWINAPI *) PARAMS;              \
    static fn_t real = (fn_t)symbol(LT, #NAME);                      \
    return real ? real ARGS : CUBLAS_STATUS_NOT_INITIALIZED;         \
  }

TSC_FORWARD(false, cublasCreate_v2, (cublasHandle_t *h), (h))
TSC_FORWARD(false, cublasSetStream_v2, (cublasHandle_t h, cudaStream_t s), (h, s))
TSC_FORWARD(false, cublasSetWorkspace_v2, (cublasHandle_t h, void *w, size_t n), (h, w, n))
TSC_FORWARD(false, cublasGemmStridedBatchedEx,
            (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
             const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA, const void *B,
             cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C, cudaDataType Ctype,
             int ldc, long long int strideC, int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo),
            (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype,
             ldc, strideC, batchCount, computeType, algo))

TSC_FORWARD(true, cublasLtCreate, (cublasLtHandle_t *h), (h))
TSC_FORWARD(true, cublasLtMatmul,
            (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A, cublasLtMatrixLayout_t Ad,
             const void *B, cublasLtMatrixLayout_t Bd, const void *beta, const void *C, cublasLtMatrixLayout_t Cd,
             void *D, cublasLtMatrixLayout_t Dd, const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn,
             cudaStream_t s),
            (h, desc, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wsn, s))
TSC_FORWARD(true, cublasLtMatmulAlgoGetHeuristic,
            (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Ad, cublasLtMatrixLayout_t Bd,
             cublasLtMatrixLayout_t Cd, cublasLtMatrixLayout_t Dd, cublasLtMatmulPreference_t pref, int requested,
             cublasLtMatmulHeuristicResult_t results[], int *returned),
            (h, desc, Ad, Bd, Cd, Dd, pref, requested, results, returned))
TSC_FORWARD(true, cublasLtMatmulDescCreate, (cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t s),
            (d, c, s))
TSC_FORWARD(true, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t d), (d))
TSC_FORWARD(true, cublasLtMatmulDescSetAttribute,
            (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *buf, size_t n), (d, a, buf, n))
TSC_FORWARD(true, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t *p), (p))
TSC_FORWARD(true, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t p), (p))
TSC_FORWARD(true, cublasLtMatmulPreferenceSetAttribute,
            (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void *buf, size_t n),
            (p, a, buf, n))
TSC_FORWARD(true, cublasLtMatrixLayoutCreate,
            (cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows, uint64_t cols, int64_t ld),
            (l, t, rows, cols, ld))
TSC_FORWARD(true, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t l), (l))
TSC_FORWARD(true, cublasLtMatrixLayoutSetAttribute,
            (cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, const void *buf, size_t n), (l, a, buf, n))

const char *CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  using fn_t = const char *(CUBLASWINAPI *)(cublasStatus_t);
  static fn_t real = (fn_t)symbol(false, "cublasGetStatusName");
  if (real) return real(status);
  return status == CUBLAS_STATUS_NOT_INITIALIZED ? "CUBLAS_STATUS_NOT_INITIALIZED (cuBLAS could not be loaded)"
                                                 : "cuBLAS status (library not loaded)";
}
