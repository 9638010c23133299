// CUDA linalg kernels: the batched matrix product BMM (contract in
// src/ops/ops_linalg.def; the CPU reference is src/cpu/linalg.c).
//
// float32/float64/float16/bfloat16 go to cuBLAS: row-major matrices are
// column-major transposes, so C = A B is computed as C^T = B^T A^T, with
// transposed operands read through the trans flags and batch stride 0 for
// broadcast batches (strided batched GEMM allows it). float16/bfloat16 try
// cuBLASLt first (tensor cores, float accumulation, a workspace), then fall
// back to cublasGemmStridedBatchedEx. A matrix cuBLAS cannot read (no unit
// stride in its last two dims, which the op layer leaves for the half types)
// is packed into a contiguous temporary first; an output it cannot write is
// computed in a temporary and copied back.
//
// Integers (wrapping, as the CPU's uint64 accumulation), K = 0 and sizes past
// cuBLAS's int take a tiled kernel that reads any strides.
//
// GEMM_BIAS and GEMM_BGRAD (a Linear layer's forward, and its weight and bias
// gradients) are one cuBLASLt call each with the bias in the epilogue, for
// float32 (TF32 when allowed), float16 and bfloat16; where cuBLASLt declines
// they return TS_ERR_UNSUPPORTED and the op layer copies and sums as before.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <limits.h>
#include <mutex>
#include <type_traits>

#include "common.cuh"

// ---- cuBLAS state: one handle of each kind per device --------------------

#define TSC_MAX_DEVICES 64
#define TSC_WS_STREAMS 8 // streams per device with a cached workspace

// cuBLAS may use a workspace per call; two streams must not share one
// (PyTorch keys its workspaces by (handle, stream) for the same reason), so
// each stream that runs GEMMs gets its own, cached for the process. Past
// TSC_WS_STREAMS streams a stream-ordered temporary is used per call.
struct blas_ws {
  cudaStream_t stream;
  void *ptr;
};

struct blas_dev {
  std::mutex mu; // held for a whole GEMM: the handles are shared by threads
  cublasHandle_t h;
  cublasLtHandle_t lt;
  size_t ws_size;
  blas_ws ws[TSC_WS_STREAMS];
  int nws;
};

static blas_dev g_blas[TSC_MAX_DEVICES];

static const char *blas_status_name(cublasStatus_t s) {
  const char *n = cublasGetStatusName(s);
  return n ? n : "unknown cuBLAS status";
}

static ts_status blas_fail(cublasStatus_t s, const char *what) {
  return ts_fail(TS_ERR_BACKEND, "cuBLAS error in bmm: %s (%s)", blas_status_name(s), what);
}

#define BLAS_CHECK(call)                                 \
  do {                                                   \
    cublasStatus_t tsc_bs_ = (call);                     \
    if (tsc_bs_ != CUBLAS_STATUS_SUCCESS) return blas_fail(tsc_bs_, #call); \
  } while (0)

// The current device's state with its handles created; d->mu must be held.
static ts_status blas_ready(blas_dev *d, int dev) {
  if (!d->ws_size) {
    int major = 0;
    TSC_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    d->ws_size = major >= 9 ? (size_t)32 << 20 : (size_t)8 << 20; // PyTorch's defaults: 32 MiB on Hopper
  }
  if (!d->h) BLAS_CHECK(cublasCreate(&d->h));
  if (!d->lt) BLAS_CHECK(cublasLtCreate(&d->lt));
  return TS_OK;
}

// The workspace of stream s on this device: cached, or a temporary (*temp set,
// the caller frees it after its launches). d->mu must be held.
static ts_status blas_workspace(blas_dev *d, cudaStream_t s, void **ws, bool *temp) {
  *temp = false;
  for (int i = 0; i < d->nws; i++)
    if (d->ws[i].stream == s) return *ws = d->ws[i].ptr, TS_OK;
  if (d->nws < TSC_WS_STREAMS) {
    void *p = NULL;
    // a stream's first product may come inside a CUDA graph's capture: the
    // workspace is kept for the stream's life, never freed under the graph,
    // so its cudaMalloc is allowed there (relaxed, as PyTorch allocates it)
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaMalloc(&p, d->ws_size);
    cudaThreadExchangeStreamCaptureMode(&mode);
    TSC_CHECK(e);
    d->ws[d->nws].stream = s, d->ws[d->nws].ptr = p, d->nws++;
    return *ws = p, TS_OK;
  }
  ts_status st;
  *ws = tsc_temp_alloc(d->ws_size, &st);
  *temp = st == TS_OK;
  return st;
}

// ---- the plan ----------------------------------------------------------------

// One operand as cuBLAS reads it: `col` when the buffer holds the logical
// matrix column-major (unit row stride), else its transpose; leading dim ld,
// batch stride bs, both in elements.
struct blas_mat {
  const char *p;
  int64_t bs;
  int ld;
  bool col;
};

template <typename T> struct blas_type;
template <> struct blas_type<float> { static constexpr cudaDataType_t v = CUDA_R_32F; };
template <> struct blas_type<double> { static constexpr cudaDataType_t v = CUDA_R_64F; };
template <> struct blas_type<__half> { static constexpr cudaDataType_t v = CUDA_R_16F; };
template <> struct blas_type<__nv_bfloat16> { static constexpr cudaDataType_t v = CUDA_R_16BF; };

// Largest power of two (<= 256) dividing the address of every batch entry.
static uint32_t alignment_of(const void *p, int64_t batch_stride_bytes, int64_t nb) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  if (nb > 1) a |= (uint64_t)batch_stride_bytes;
  uint32_t al = 1;
  while (al < 256 && !(a & al)) al <<= 1;
  return al;
}

// The column-major problem cuBLAS solves: C' (m, n) = op(X) (m, k) op(Y) (k, n).
struct gemm_args {
  cublasOperation_t tx, ty;
  int m, n, k;
  const blas_mat *x, *y;
  blas_mat *c;
  int64_t nb; // batch entries
};

static gemm_args plan(const blas_mat *a, const blas_mat *b, blas_mat *c, int64_t M, int64_t N, int64_t K, int64_t nb) {
  gemm_args g;
  g.k = (int)K, g.nb = nb, g.c = c;
  if (c->col) { // C column-major: C = A B
    g.m = (int)M, g.n = (int)N, g.x = a, g.y = b;
    g.tx = a->col ? CUBLAS_OP_N : CUBLAS_OP_T;
    g.ty = b->col ? CUBLAS_OP_N : CUBLAS_OP_T;
  } else { // C row-major is C^T column-major: C^T = B^T A^T
    g.m = (int)N, g.n = (int)M, g.x = b, g.y = a;
    g.tx = b->col ? CUBLAS_OP_T : CUBLAS_OP_N;
    g.ty = a->col ? CUBLAS_OP_T : CUBLAS_OP_N;
  }
  return g;
}

// cuBLAS's batch count is an int and its grids have limits of their own:
// huge batches go in slices of at most this many entries, one call each.
#define BATCH_SLICE 65535

template <typename T>
static ts_status gemm_blas(blas_dev *d, const gemm_args &g, double alpha, double beta, void *ws, size_t ws_size) {
  constexpr cudaDataType_t ty = blas_type<T>::v;
  const bool f64 = ty == CUDA_R_64F;
  cublasComputeType_t ct = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  if (ty == CUDA_R_32F && ts_get_float32_matmul_precision() != TS_MATMUL_HIGHEST) ct = CUBLAS_COMPUTE_32F_FAST_TF32;
  const float fa = (float)alpha, fb = (float)beta;
  const void *pa = f64 ? (const void *)&alpha : (const void *)&fa, *pb = f64 ? (const void *)&beta : (const void *)&fb;
  BLAS_CHECK(cublasSetStream(d->h, tsc_stream()));
  BLAS_CHECK(cublasSetWorkspace(d->h, ws, ws_size)); // after SetStream, which resets it
  BLAS_CHECK(cublasGemmStridedBatchedEx(d->h, g.tx, g.ty, g.m, g.n, g.k, pa, g.x->p, ty, g.x->ld, g.x->bs, g.y->p, ty,
                                        g.y->ld, g.y->bs, pb, (void *)g.c->p, ty, g.c->ld, g.c->bs, (int)g.nb, ct,
                                        CUBLAS_GEMM_DEFAULT));
  return TS_OK;
}

// What cuBLASLt does after the product (cublasLtEpilogue_t): nothing, add a
// bias vector to every column of the column-major D (BIAS), or write op(X)'s
// rows (BGRADA) / op(Y)'s columns (BGRADB) summed over k to a vector, which
// is a Linear layer's bias gradient taken inside its weight-gradient GEMM.
// The vector has D's type and is contiguous.
struct lt_epilogue {
  cublasLtEpilogue_t kind;
  const void *vec;
};
static const lt_epilogue no_epilogue = {CUBLASLT_EPILOGUE_DEFAULT, NULL};

// float16/bfloat16 (and float32 with an epilogue) through cuBLASLt. Returns
// false, having launched nothing, where cuBLASLt declines (no algorithm, a
// status other than success): the caller falls back to a path without it.
template <typename T>
static bool gemm_lt(blas_dev *d, const gemm_args &g, double alpha, double beta, void *ws, size_t ws_size,
                    const lt_epilogue &epi = no_epilogue) {
  constexpr cudaDataType_t ty = blas_type<T>::v;
  if (ty == CUDA_R_64F) return false; // float64 is not sent to cuBLASLt
  const float fa = (float)alpha, fb = (float)beta;
  cublasComputeType_t ct = CUBLAS_COMPUTE_32F; // float accumulation, float alpha and beta
  if (ty == CUDA_R_32F && ts_get_float32_matmul_precision() != TS_MATMUL_HIGHEST) ct = CUBLAS_COMPUTE_32F_FAST_TF32;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t lx = NULL, ly = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  bool ok = cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
  int32_t tx = g.tx, tyy = g.ty;
  ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tx, sizeof tx) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tyy, sizeof tyy) == CUBLAS_STATUS_SUCCESS;
  if (epi.kind != CUBLASLT_EPILOGUE_DEFAULT) {
    // set before the heuristic, which reads the vector's address for its alignment
    uint32_t e = epi.kind;
    ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epi.vec, sizeof epi.vec) ==
                   CUBLAS_STATUS_SUCCESS;
  }
  const int32_t cnt = (int32_t)g.nb;
  // the stored (pre-op) shapes: op N reads (rows, cols) as given, op T the transpose
  const bool nx = g.tx == CUBLAS_OP_N, ny = g.ty == CUBLAS_OP_N;
  cublasLtMatrixLayout_t *lay[3] = {&lx, &ly, &lc};
  const uint64_t rows[3] = {(uint64_t)(nx ? g.m : g.k), (uint64_t)(ny ? g.k : g.n), (uint64_t)g.m};
  const uint64_t cols[3] = {(uint64_t)(nx ? g.k : g.m), (uint64_t)(ny ? g.n : g.k), (uint64_t)g.n};
  const blas_mat *mats[3] = {g.x, g.y, g.c};
  for (int i = 0; i < 3 && ok; i++) {
    int64_t bs = mats[i]->bs;
    ok = cublasLtMatrixLayoutCreate(lay[i], ty, rows[i], cols[i], mats[i]->ld) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutSetAttribute(*lay[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &cnt, sizeof cnt) ==
                   CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutSetAttribute(*lay[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &bs,
                                                sizeof bs) == CUBLAS_STATUS_SUCCESS;
  }
  uint64_t wsb = ws_size;
  ok = ok && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) ==
                 CUBLAS_STATUS_SUCCESS;
  const int64_t es = (int64_t)sizeof(T);
  const uint32_t al[4] = {alignment_of(g.x->p, g.x->bs * es, g.nb), alignment_of(g.y->p, g.y->bs * es, g.nb),
                          alignment_of(g.c->p, g.c->bs * es, g.nb), alignment_of(g.c->p, g.c->bs * es, g.nb)};
  const cublasLtMatmulPreferenceAttributes_t pa[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4 && ok; i++)
    ok = cublasLtMatmulPreferenceSetAttribute(pref, pa[i], &al[i], sizeof al[i]) == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulHeuristicResult_t res;
  int nres = 0;
  ok = ok && cublasLtMatmulAlgoGetHeuristic(d->lt, op, lx, ly, lc, lc, pref, 1, &res, &nres) == CUBLAS_STATUS_SUCCESS &&
       nres > 0;
  // beta 0: C is not read (the epilogue skips the source), so NaN in out does not leak
  ok = ok && cublasLtMatmul(d->lt, op, &fa, g.x->p, lx, g.y->p, ly, &fb, g.c->p, lc, (void *)g.c->p, lc, &res.algo, ws,
                            ws_size, tsc_stream()) == CUBLAS_STATUS_SUCCESS;
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (ly) cublasLtMatrixLayoutDestroy(ly);
  if (lx) cublasLtMatrixLayoutDestroy(lx);
  if (op) cublasLtMatmulDescDestroy(op);
  return ok;
}

// ---- the strided kernels -------------------------------------------------------

// dst (B, R, C) <- src (B, R, C), any strides: packing an operand cuBLAS cannot
// read, and copying a temporary result back into out.
template <typename T>
__global__ void copy3_kernel(const T *__restrict__ src, int64_t s0, int64_t s1, int64_t s2, T *__restrict__ dst,
                             int64_t d0, int64_t d1, int64_t d2, int64_t R, int64_t C, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = i % C, t = i / C, r = t % R, b = t / R;
    dst[b * d0 + r * d1 + c * d2] = src[b * s0 + r * s1 + c * s2];
  }
}

template <typename T>
static ts_status copy3(const T *src, const int64_t *ss, T *dst, const int64_t *ds, int64_t B, int64_t R, int64_t C) {
  int64_t n = B * R * C;
  if (n == 0) return TS_OK;
  copy3_kernel<T><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(src, ss[0], ss[1], ss[2], dst, ds[0], ds[1], ds[2],
                                                                    R, C, n);
  TSC_LAUNCH_CHECK("bmm (strided copy)");
  return TS_OK;
}

// The accumulator of the tiled kernel, as the CPU loop's: double for float32
// and float64, float for the half types, uint64 for integers (wrapping).
template <typename T> struct gemm_acc { using type = double; };
template <> struct gemm_acc<__half> { using type = float; };
template <> struct gemm_acc<__nv_bfloat16> { using type = float; };
template <> struct gemm_acc<int64_t> { using type = uint64_t; };
template <> struct gemm_acc<int32_t> { using type = uint64_t; };
template <> struct gemm_acc<int16_t> { using type = uint64_t; };
template <> struct gemm_acc<int8_t> { using type = uint64_t; };
template <> struct gemm_acc<uint8_t> { using type = uint64_t; };

#define TILE 16

// out (B, M, N) = alpha * a (B, M, K) @ b (B, K, N) [+ beta * out], any strides;
// one TILE x TILE output tile per block per step, tiles of a and b staged in
// shared memory. The loops over tiles are block-uniform (syncthreads inside).
template <typename T, typename ACC>
__global__ void gemm_tiled_kernel(const T *__restrict__ a, int64_t as0, int64_t as1, int64_t as2,
                                  const T *__restrict__ b, int64_t bs0, int64_t bs1, int64_t bs2, T *out, int64_t os0,
                                  int64_t os1, int64_t os2, int64_t B, int64_t M, int64_t N, int64_t K, ACC alpha,
                                  ACC beta, bool read_out) {
  __shared__ ACC ta[TILE][TILE + 1], tb[TILE][TILE + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t mt = (M + TILE - 1) / TILE, nt = (N + TILE - 1) / TILE;
  for (int64_t bz = blockIdx.z; bz < B; bz += gridDim.z)
    for (int64_t by = blockIdx.y; by < mt; by += gridDim.y)
      for (int64_t bx = blockIdx.x; bx < nt; bx += gridDim.x) {
        const int64_t row = by * TILE + ty, col = bx * TILE + tx;
        ACC acc = ACC(0);
        for (int64_t k0 = 0; k0 < K; k0 += TILE) {
          // ta[ty][tx] = a[row, k0 + tx], tb[ty][tx] = b[k0 + ty, col]
          int64_t ka = k0 + tx, kb = k0 + ty;
          ta[ty][tx] = row < M && ka < K ? tsc_cast<ACC>(a[bz * as0 + row * as1 + ka * as2]) : ACC(0);
          tb[ty][tx] = kb < K && col < N ? tsc_cast<ACC>(b[bz * bs0 + kb * bs1 + col * bs2]) : ACC(0);
          __syncthreads();
          const int kn = K - k0 < TILE ? (int)(K - k0) : TILE;
          for (int k = 0; k < kn; k++) acc += ta[ty][k] * tb[k][tx];
          __syncthreads();
        }
        if (row < M && col < N) {
          T *q = out + bz * os0 + row * os1 + col * os2;
          ACC v = alpha * acc;
          if (read_out) v += beta * tsc_cast<ACC>(*q);
          *q = tsc_cast<T>(v);
        }
      }
}

template <typename T>
static ts_status gemm_tiled(const ts_tensor *A, const ts_tensor *Bm, ts_tensor *O, double alpha, double beta) {
  using ACC = typename gemm_acc<T>::type;
  const int64_t nb = O->sizes[0], M = O->sizes[1], N = O->sizes[2], K = A->sizes[2];
  ACC al, be;
  if constexpr (tsc_is_float<T>::value) al = (ACC)alpha, be = (ACC)beta;
  else al = (ACC)(int64_t)alpha, be = (ACC)(int64_t)beta; // through int64: a negative double to uint64 is UB
  const int64_t mt = (M + TILE - 1) / TILE, nt = (N + TILE - 1) / TILE;
  dim3 grid((unsigned)(nt < 65535 ? nt : 65535), (unsigned)(mt < 65535 ? mt : 65535),
            (unsigned)(nb < 65535 ? nb : 65535));
  const int64_t *as = A->strides, *bs = Bm->strides, *os = O->strides;
  gemm_tiled_kernel<T, ACC><<<grid, dim3(TILE, TILE), 0, tsc_stream()>>>(
      tsc_ptr<T>(A), as[0], as[1], as[2], tsc_ptr<T>(Bm), bs[0], bs[1], bs[2], tsc_ptr<T>(O), os[0], os[1], os[2], nb,
      M, N, K, al, be, beta != 0);
  TSC_LAUNCH_CHECK("bmm");
  return TS_OK;
}

// ---- the cuBLAS path -------------------------------------------------------------

// A temporary freed when the scope ends (stream-ordered: after the launches
// queued before it).
struct temp_buf {
  void *p = NULL;
  ~temp_buf() { tsc_temp_free(p); }
};

// Fills m for operand t (rows, cols, strides t->strides); packs it into `tmp`
// (contiguous; one batch entry when an input's batch is broadcast) when
// cuBLAS cannot read it. is_out: the output, always packed whole, its old
// values copied only when `pack_in`.
template <typename T>
static ts_status operand(const ts_tensor *t, int64_t rows, int64_t cols, blas_mat *m, temp_buf *tmp, bool is_out,
                         bool pack_in, bool *packed) {
  bool tr;
  int ld;
  *packed = false;
  if (ts_blas_layout(rows, cols, t->strides[1], t->strides[2], &tr, &ld)) {
    m->p = (const char *)ts_data(t), m->bs = t->strides[0], m->ld = ld, m->col = tr;
    return TS_OK;
  }
  const int64_t nb = t->strides[0] == 0 && !is_out ? 1 : t->sizes[0];
  ts_status st;
  tmp->p = tsc_temp_alloc((size_t)(nb * rows * cols) * sizeof(T), &st);
  if (st) return st;
  int64_t ds[3] = {rows * cols, cols, 1};
  if (pack_in && (st = copy3<T>(tsc_ptr<T>(t), t->strides, (T *)tmp->p, ds, nb, rows, cols))) return st;
  m->p = (const char *)tmp->p, m->bs = nb < t->sizes[0] ? 0 : rows * cols, m->ld = (int)cols, m->col = false;
  *packed = true;
  return TS_OK;
}

// Runs fn(d, ws) with the current device's cuBLAS handles, under their lock,
// with the current stream's workspace (d->ws_size bytes).
template <typename F> static ts_status with_blas(F &&fn) {
  int dev = 0;
  TSC_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= TSC_MAX_DEVICES) return ts_fail(TS_ERR_DEVICE, "bmm: CUDA device %d is past %d", dev, TSC_MAX_DEVICES);
  blas_dev *d = &g_blas[dev];
  std::lock_guard<std::mutex> lock(d->mu);
  ts_status st = blas_ready(d, dev);
  void *ws = NULL;
  bool ws_temp = false;
  if (!st) st = blas_workspace(d, tsc_stream(), &ws, &ws_temp);
  if (!st) st = fn(d, ws);
  if (ws_temp) tsc_temp_free(ws);
  return st;
}

template <typename T>
static ts_status bmm_blas(const ts_tensor *A, const ts_tensor *Bm, ts_tensor *O, double alpha, double beta) {
  const int64_t nb = O->sizes[0], M = O->sizes[1], N = O->sizes[2], K = A->sizes[2];
  blas_mat a, b, c;
  temp_buf ta, tb, tc;
  bool pa, pb, pc;
  ts_status st;
  if ((st = operand<T>(A, M, K, &a, &ta, false, true, &pa)) || (st = operand<T>(Bm, K, N, &b, &tb, false, true, &pb)) ||
      (st = operand<T>(O, M, N, &c, &tc, true, beta != 0, &pc)))
    return st;
  gemm_args g = plan(&a, &b, &c, M, N, K, nb);

  st = with_blas([&](blas_dev *d, void *ws) {
    ts_status r = TS_OK;
    // cuBLASLt for the half types, unless an operand is a broadcast batch (a
    // zero batch stride is documented for strided batched GEMM only)
    const bool lt = !std::is_same<T, float>::value && !std::is_same<T, double>::value &&
                    (nb == 1 || (g.x->bs != 0 && g.y->bs != 0));
    for (int64_t b0 = 0; b0 < nb && !r; b0 += BATCH_SLICE) {
      blas_mat s[3] = {*g.x, *g.y, *g.c};
      gemm_args gs = g;
      for (int i = 0; i < 3; i++) s[i].p += b0 * s[i].bs * (int64_t)sizeof(T);
      gs.x = &s[0], gs.y = &s[1], gs.c = &s[2];
      gs.nb = nb - b0 < BATCH_SLICE ? nb - b0 : BATCH_SLICE;
      if (!(lt && gemm_lt<T>(d, gs, alpha, beta, ws, d->ws_size))) r = gemm_blas<T>(d, gs, alpha, beta, ws, d->ws_size);
    }
    return r;
  });
  if (st) return st;
  TSC_LAUNCH_CHECK("bmm");
  if (pc) {
    int64_t ss[3] = {M * N, N, 1};
    if ((st = copy3<T>((const T *)tc.p, ss, tsc_ptr<T>(O), O->strides, nb, M, N))) return st;
  }
  return TS_OK;
}

// ---- products with an epilogue ------------------------------------------------------

// out (M,N) = alpha a (M,K) @ b (K,N) in one cuBLASLt call whose epilogue
// reads or writes the vector epi.vec. The TS_KIND_LIBRARY kernels below:
// TS_ERR_UNSUPPORTED, with nothing launched, where cuBLASLt declines or an
// operand would need packing (the op layer then composes the op as before).
template <typename T>
static ts_status lt_product(const ts_tensor *A, const ts_tensor *Bm, ts_tensor *O, double alpha, lt_epilogue epi) {
  const int64_t M = O->sizes[0], N = O->sizes[1], K = A->sizes[1];
  if (M <= 0 || N <= 0 || K <= 0) return TS_ERR_UNSUPPORTED; // nothing to fuse: the composed form is as cheap
  blas_mat a, b, c;
  const ts_tensor *ts[3] = {A, Bm, O};
  blas_mat *ms[3] = {&a, &b, &c};
  const int64_t rows[3] = {M, K, M}, cols[3] = {K, N, N};
  for (int i = 0; i < 3; i++) {
    bool tr;
    int ld;
    if (!ts_blas_layout(rows[i], cols[i], ts[i]->strides[0], ts[i]->strides[1], &tr, &ld)) return TS_ERR_UNSUPPORTED;
    ms[i]->p = (const char *)ts_data(ts[i]), ms[i]->bs = 0, ms[i]->ld = ld, ms[i]->col = tr;
  }
  // a row-major out is cuBLAS's column-major D^T: D's rows, along which the
  // bias runs, are out's columns (N), and out's a and b are its B and A
  if (c.col) return TS_ERR_UNSUPPORTED;
  gemm_args g = plan(&a, &b, &c, M, N, K, 1);
  bool ran = false;
  ts_status st = with_blas([&](blas_dev *d, void *ws) {
    ran = gemm_lt<T>(d, g, alpha, 0, ws, d->ws_size, epi);
    return TS_OK;
  });
  if (st) return st;
  if (!ran) return TS_ERR_UNSUPPORTED;
  TSC_LAUNCH_CHECK("addmm");
  return TS_OK;
}

static ts_status lt_kernel(const ts_call *c, lt_epilogue epi) {
  switch (c->out[0]->dtype) {
  case TS_FLOAT32: return lt_product<float>(c->in[0], c->in[1], c->out[0], c->f[0], epi);
  case TS_FLOAT16: return lt_product<__half>(c->in[0], c->in[1], c->out[0], c->f[0], epi);
  case TS_BFLOAT16: return lt_product<__nv_bfloat16>(c->in[0], c->in[1], c->out[0], c->f[0], epi);
  default: return TS_ERR_UNSUPPORTED; // float64 and integers: cuBLASLt has no epilogue for them here
  }
}

// GEMM_BIAS: a Linear layer's forward, the bias added by the epilogue
static ts_status k_gemm_bias(const ts_call *c) { return lt_kernel(c, {CUBLASLT_EPILOGUE_BIAS, ts_data(c->in[2])}); }

// GEMM_BGRAD: out[0] = in[0] @ in[1] with in[i[0]] summed over k into out[1]:
// in[0] is cuBLAS's B (BGRADB), in[1] its A (BGRADA)
static ts_status k_gemm_bgrad(const ts_call *c) {
  return lt_kernel(c, {c->i[0] == 0 ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BGRADA, ts_data(c->out[1])});
}

// ---- the kernel ------------------------------------------------------------------

static ts_status k_bmm(const ts_call *c) {
  const ts_tensor *A = c->in[0], *Bm = c->in[1];
  ts_tensor *O = c->out[0];
  const ts_dtype dt = O->dtype;
  const double alpha = c->f[0], beta = c->f[1];
  if (dt == TS_BOOL) return ts_fail(TS_ERR_DTYPE, "bmm is not implemented for %s tensors", ts_dtype_name(dt));
  const int64_t M = O->sizes[1], N = O->sizes[2], K = A->sizes[2];
  if (O->sizes[0] == 0 || M == 0 || N == 0) return TS_OK;
  return tsc_dispatch(dt, [&](auto tag) -> ts_status {
    using T = decltype(tag);
    if constexpr (std::is_same<T, bool>::value) {
      return TS_OK; // rejected above
    } else {
      // K = 0 is beta*out, which the tiled kernel does exactly as the CPU loop
      if constexpr (tsc_is_float<T>::value)
        if (K > 0 && K <= INT_MAX && M <= INT_MAX && N <= INT_MAX) return bmm_blas<T>(A, Bm, O, alpha, beta);
      return gemm_tiled<T>(A, Bm, O, alpha, beta);
    }
  });
}

extern "C" void tsc_register_linalg(ts_kernel *k) {
  k[TS_OP_BMM] = k_bmm;
  k[TS_OP_GEMM_BIAS] = k_gemm_bias;
  k[TS_OP_GEMM_BGRAD] = k_gemm_bgrad;
}
