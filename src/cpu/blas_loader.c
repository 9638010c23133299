/* OpenBLAS, opened on first use instead of linked: its loading resolves
 * ~14,000 symbol relocations (its per-CPU kernel tables), 1.5 ms of every
 * start-up whether a matmul runs or not. Each function tensh calls is
 * defined here with cblas.h's signature and forwards to the library's own
 * symbol, found once with dlsym on its handle (as cuda/cublas_loader.cu does
 * for cuBLAS). The forwarders are hidden: exported from the executable, they
 * would take OpenBLAS's own calls to these names while it is still loading.
 *
 * OpenBLAS chooses its kernels when it loads; on a CPU model it has no table
 * for (some VMs) it falls back to its generic Prescott kernels, 2-3x slower.
 * Then, unless the user set OPENBLAS_CORETYPE, it is closed and opened again
 * with the core type that fits the CPU's instructions (the shell used to
 * restart itself for that, when OpenBLAS loaded with it). */
#include "core/tensh.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#ifndef TS_BLAS_LIB
#define TS_BLAS_LIB "libopenblas.so.0"
#endif
#define HIDDEN __attribute__((visibility("hidden")))

static struct {
  void (*sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                const float *, blasint, const float *, blasint, float, float *, blasint);
  void (*dgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, double,
                const double *, blasint, const double *, blasint, double, double *, blasint);
  void (*somatcopy)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, blasint, blasint, float, const float *, blasint, float *,
                    blasint);
  char *(*get_corename)(void);
  int (*get_num_threads)(void);
  void (*set_num_threads)(int);
} blas;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void *open_blas(void) {
  void *h = dlopen(TS_BLAS_LIB, RTLD_NOW | RTLD_LOCAL);
  return h ? h : dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
}

/* The OPENBLAS_CORETYPE that fits this CPU when OpenBLAS fell back to its
 * generic kernels (core "Prescott"), else NULL. */
static const char *better_coretype(const char *core) {
  if (!core || strcasecmp(core, "prescott") != 0) return NULL;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return NULL;
}

static void load(void) {
  void *h = open_blas();
  if (h && !getenv("OPENBLAS_CORETYPE")) {
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    const char *better = better_coretype(corename ? corename() : NULL);
    if (better) { /* its kernels are chosen as it loads: load it again, told which */
      dlclose(h);
      setenv("OPENBLAS_CORETYPE", better, 1);
      h = open_blas();
    }
  }
  if (!h) {
    fprintf(stderr, "tensh: OpenBLAS could not be loaded (%s); matrix products need it\n", dlerror());
    abort(); /* as the dynamic linker stopped tensh when OpenBLAS was linked */
  }
  *(void **)&blas.sgemm = dlsym(h, "cblas_sgemm");
  *(void **)&blas.dgemm = dlsym(h, "cblas_dgemm");
  *(void **)&blas.somatcopy = dlsym(h, "cblas_somatcopy");
  *(void **)&blas.get_corename = dlsym(h, "openblas_get_corename");
  *(void **)&blas.get_num_threads = dlsym(h, "openblas_get_num_threads");
  *(void **)&blas.set_num_threads = dlsym(h, "openblas_set_num_threads");
  if (!blas.sgemm || !blas.dgemm || !blas.somatcopy || !blas.get_corename || !blas.get_num_threads || !blas.set_num_threads) {
    fprintf(stderr, "tensh: %s lacks a function tensh calls (%s)\n", TS_BLAS_LIB, dlerror());
    abort();
  }
}

static inline void loaded(void) { pthread_once(&load_once, load); }

/* cblas_sgemm and cblas_dgemm: the signature of cblas.h, T the element type */
#define FORWARD_GEMM(NAME, T, FIELD)                                                                              \
  HIDDEN void NAME(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,                  \
                   OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n,     \
                   OPENBLAS_CONST blasint k, OPENBLAS_CONST T alpha, OPENBLAS_CONST T *a, OPENBLAS_CONST blasint lda, \
                   OPENBLAS_CONST T *b, OPENBLAS_CONST blasint ldb, OPENBLAS_CONST T beta, T *c,                  \
                   OPENBLAS_CONST blasint ldc) {                                                                  \
    loaded();                                                                                                     \
    blas.FIELD(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                                      \
  }
FORWARD_GEMM(cblas_sgemm, float, sgemm)
FORWARD_GEMM(cblas_dgemm, double, dgemm)

/* OpenBLAS's out-of-place transpose (its extension to CBLAS) */
HIDDEN void cblas_somatcopy(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE trans,
                            OPENBLAS_CONST blasint rows, OPENBLAS_CONST blasint cols, OPENBLAS_CONST float alpha,
                            OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, float *b,
                            OPENBLAS_CONST blasint ldb) {
  loaded();
  blas.somatcopy(order, trans, rows, cols, alpha, a, lda, b, ldb);
}

HIDDEN char *openblas_get_corename(void) {
  loaded();
  return blas.get_corename();
}

HIDDEN int openblas_get_num_threads(void) {
  loaded();
  return blas.get_num_threads();
}

HIDDEN void openblas_set_num_threads(int n) {
  loaded();
  blas.set_num_threads(n);
}
