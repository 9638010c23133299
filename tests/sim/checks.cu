// More broken CUDA code for the simulator's selftest (see selftest.cu): what
// the access checks (sim/check.cc) and the block scheduler (sim/exec.cc) must
// report: races, misaligned vector accesses, bytes outside the caching
// allocator's blocks, uninitialised shared memory, barriers and shuffles at
// different call sites. Each bad case has a twin that is right and must pass
// quietly, so a check that reports everything fails too.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void report(const char *what, cudaError_t e) {
  printf("RESULT %s %s: %s\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

// ---- races ----

// Every thread of every block adds 1 to *count.
template <bool ATOMIC> __global__ void count_up(int *count) {
  if (ATOMIC) atomicAdd(count, 1);
  else *count += 1; // a lost update on a GPU
}

// Every thread stores its index into one slot: plain stores race; stores
// marked as meeting by design (cuda/common.cuh's tsc_store_any, for a scatter
// with repeated indices) leave one of the values and do not.
template <bool ANY> __global__ void store_one_slot(int *slot) {
  int v = threadIdx.x;
  if (ANY) tsim_store_any(slot, &v, sizeof v);
  else *slot = v;
}

// Thread t writes slot t of shared memory, then reads its neighbour's.
template <bool BARRIER> __global__ void neighbour(int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = t * 10;
  if (BARRIER) __syncthreads();
  out[t] = s[(t + 1) % blockDim.x];
}

// The same through device memory, within one block: a barrier orders it.
template <bool BARRIER> __global__ void neighbour_global(int *buf, int *out) {
  int t = threadIdx.x;
  buf[t] = t;
  if (BARRIER) __syncthreads();
  out[t] = buf[(t + 1) % blockDim.x];
}

// Block b reads element b + 1, which block b + 1 writes: no barrier orders blocks.
__global__ void across_blocks(int *buf) {
  int b = blockIdx.x;
  if (threadIdx.x == 0) buf[b] = buf[b + 1] + 1;
}

// The reads of a reduction's slots, then a new value into slot 0 before the
// others have read: a write after read with the second barrier missing.
template <bool BARRIER> __global__ void reuse_slot(int *out) {
  __shared__ int s[32];
  int t = threadIdx.x;
  s[t] = t;
  __syncthreads();
  int v = s[0];
  if (BARRIER) __syncthreads();
  if (t == 0) s[0] = 100;
  out[t] = v;
}

// Lanes exchange through shared memory with __syncwarp between: ordered.
__global__ void warp_exchange_ok(int *out) {
  __shared__ int s[32];
  int t = threadIdx.x;
  s[t] = t;
  __syncwarp();
  out[t] = s[t ^ 1];
}

// ---- alignment, shared memory, call sites ----

__global__ void load_vec(const float *p, float *out) {
  float4 v = *reinterpret_cast<const float4 *>(p);
  out[0] = v.x + v.y + v.z + v.w;
}

__global__ void read_unwritten_shared(float *out) {
  __shared__ float s[32];
  if (threadIdx.x > 0) s[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0;
    for (int i = 0; i < 32; i++) sum += s[i]; // slot 0 was never written
    out[0] = sum;
  }
}

__global__ void barriers_apart(int *out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = 1;
    __syncthreads();
  } else {
    out[threadIdx.x] = 2;
    __syncthreads();
  }
}

__global__ void shuffles_apart(int *out) {
  int v = threadIdx.x;
  if (threadIdx.x & 1) v = __shfl_xor_sync(0xffffffffu, v, 1);
  else v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

__global__ void shuffle_width(int *out, int width) {
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1, width);
}

static __global__ void store_at(float *p, long i) { p[i] = 1.0f; }
static __global__ void load_at(const float *p, long i, float *out) { out[0] = p[i]; }

static int *ints(int n, int v) {
  int *d;
  cudaMalloc(&d, n * sizeof(int));
  cudaMemset(d, v, n * sizeof(int));
  return d;
}

static int get(const int *d) {
  int v = -1;
  cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost);
  return v;
}

// A block as the caching allocator marks it: [p, p + 512) of which `live` bytes are handed out.
static float *cached_block(size_t live) {
  float *seg;
  cudaMalloc(&seg, 4096);
  tsim_mark_block(seg, 4096, 0, 0); // a segment: nothing handed out
  tsim_mark_block(seg, 512, live, 0);
  return seg;
}

// A 4x4 float16 product through cuBLASLt on a, b, c (column-major, ld 4)
// with every alignment preference 16: what it says at each step.
static void lt_product(const char *what, const __half *a, const __half *b, __half *c) {
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t l;
  cublasLtMatrixLayoutCreate(&l, CUDA_R_16F, 4, 4, 4);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  uint32_t sixteen = 16;
  cublasLtMatmulPreferenceAttributes_t attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (auto at : attrs) cublasLtMatmulPreferenceSetAttribute(pref, at, &sixteen, sizeof sixteen);
  cublasLtMatmulHeuristicResult_t res;
  int n = -1;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, l, l, l, l, pref, 1, &res, &n);
  printf("RESULT %s heuristic %s returned=%d\n", what, cublasGetStatusName(st), n);
  if (st != CUBLAS_STATUS_SUCCESS || n < 1) return;
  float one = 1, zero = 0;
  st = cublasLtMatmul(h, op, &one, a, l, b, l, &zero, c, l, c, l, &res.algo, NULL, 0, 0);
  printf("RESULT %s matmul %s\n", what, cublasGetStatusName(st));
  if (st == CUBLAS_STATUS_INVALID_VALUE) printf("RESULT %s why: %s\n", what, cudaGetErrorString(cudaErrorInvalidValue));
  report(what, cudaDeviceSynchronize());
}

// D = A B + bias through cuBLASLt's epilogue `epi` (float32, 4x4): A the
// identity, B all twos, so D's row i is 2 + bias[i]. The heuristic sees the
// bias 64-byte aligned; `moved` bytes later is where the product then reads it.
static void lt_bias(const char *what, uint32_t epi, size_t moved) {
  float hm[64] = {0}, *m;
  for (int i = 0; i < 4; i++) hm[i * 5] = 1;       // A at 0: the identity
  for (int i = 16; i < 32; i++) hm[i] = 2;         // B at 16: twos; D at 32
  for (int i = 0; i < 5; i++) hm[48 + i] = i + 1;  // the bias at 48: 1, 2, 3, 4
  cudaMalloc(&m, sizeof hm);
  cudaMemcpy(m, hm, sizeof hm, cudaMemcpyHostToDevice);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const void *bias = m + 48;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  cublasLtMatrixLayout_t l;
  cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 4, 4);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulHeuristicResult_t res;
  int n = -1;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, l, l, l, l, pref, 1, &res, &n);
  printf("RESULT %s heuristic %s returned=%d\n", what, cublasGetStatusName(st), n);
  if (st != CUBLAS_STATUS_SUCCESS || n < 1) return;
  bias = (const char *)bias + moved;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  float one = 1, zero = 0;
  st = cublasLtMatmul(h, op, &one, m, l, m + 16, l, &zero, m + 32, l, m + 32, l, &res.algo, NULL, 0, 0);
  printf("RESULT %s matmul %s\n", what, cublasGetStatusName(st));
  report(what, cudaDeviceSynchronize());
  if (st == CUBLAS_STATUS_SUCCESS && cudaMemcpy(hm, m, sizeof hm, cudaMemcpyDeviceToHost) == cudaSuccess)
    printf("RESULT %s d=%g,%g,%g,%g\n", what, hm[32], hm[33], hm[34], hm[35]);
}

// Runs the named case; -1 when there is none.
int check_case(const char *c) {
  if (!strcmp(c, "lost_update") || !strcmp(c, "atomic_update")) {
    int *n = ints(1, 0);
    if (!strcmp(c, "lost_update")) count_up<false><<<4, 64>>>(n);
    else count_up<true><<<4, 64>>>(n);
    cudaError_t e = cudaDeviceSynchronize();
    report(c, e);
    if (!e) printf("RESULT %s count=%d\n", c, get(n));
  } else if (!strcmp(c, "stores_meet") || !strcmp(c, "stores_meet_any")) {
    int *s = ints(1, -1);
    if (!strcmp(c, "stores_meet")) store_one_slot<false><<<1, 64>>>(s);
    else store_one_slot<true><<<1, 64>>>(s);
    cudaError_t e = cudaDeviceSynchronize();
    report(c, e);
    if (!e) printf("RESULT %s one_of_them=%d\n", c, get(s) >= 0 && get(s) < 64);
  } else if (!strcmp(c, "shared_race") || !strcmp(c, "shared_ordered")) {
    int *o = ints(64, 0);
    if (!strcmp(c, "shared_race")) neighbour<false><<<1, 64>>>(o);
    else neighbour<true><<<1, 64>>>(o);
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "global_race") || !strcmp(c, "global_ordered")) {
    int *b = ints(64, 0), *o = ints(64, 0);
    if (!strcmp(c, "global_race")) neighbour_global<false><<<1, 64>>>(b, o);
    else neighbour_global<true><<<1, 64>>>(b, o);
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "across_blocks")) {
    int *b = ints(9, 0);
    across_blocks<<<8, 32>>>(b);
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "write_after_read") || !strcmp(c, "read_then_barrier")) {
    int *o = ints(32, 0);
    if (!strcmp(c, "write_after_read")) reuse_slot<false><<<1, 32>>>(o);
    else reuse_slot<true><<<1, 32>>>(o);
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "warp_ordered")) {
    int *o = ints(32, 0);
    warp_exchange_ok<<<1, 32>>>(o);
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "misaligned_vector") || !strcmp(c, "aligned_vector")) {
    float *p, *out;
    cudaMalloc(&p, 64 * sizeof(float));
    cudaMalloc(&out, sizeof(float));
    cudaMemset(p, 0, 64 * sizeof(float));
    load_vec<<<1, 1>>>(p + (strcmp(c, "aligned_vector") ? 1 : 4), out); // 4 bytes past a 16-byte boundary
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "unwritten_shared")) {
    float *out, v = 0;
    cudaMalloc(&out, sizeof(float));
    read_unwritten_shared<<<1, 32>>>(out);
    cudaMemcpy(&v, out, sizeof v, cudaMemcpyDeviceToHost);
    printf("RESULT unwritten_shared sum=%g\n", (double)v);
  } else if (!strcmp(c, "barriers_apart")) {
    barriers_apart<<<1, 32>>>(ints(32, 0));
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "shuffles_apart")) {
    shuffles_apart<<<1, 32>>>(ints(32, 0));
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "shuffle_width_3") || !strcmp(c, "shuffle_width_8")) {
    shuffle_width<<<1, 32>>>(ints(32, 0), strcmp(c, "shuffle_width_3") ? 8 : 3);
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "block_overrun") || !strcmp(c, "block_last_byte")) {
    float *b = cached_block(140); // 35 floats
    store_at<<<1, 1>>>(b, strcmp(c, "block_overrun") ? 34 : 35);
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "cached_block_read")) {
    float *b = cached_block(140), *out;
    cudaMalloc(&out, sizeof(float));
    tsim_mark_block(b, 512, 0, 0); // freed into the cache
    load_at<<<1, 1>>>(b, 3, out);
    report(c, cudaDeviceSynchronize());
  } else if (!strcmp(c, "reused_block")) { // handed out again: 0xff bytes, whatever was there
    float *b = cached_block(16), h[4] = {1, 2, 3, 4}, back[4];
    cudaMemcpy(b, h, sizeof h, cudaMemcpyHostToDevice);
    tsim_mark_block(b, 512, 0, 0);
    tsim_mark_block(b, 512, 16, 0);
    cudaMemcpy(back, b, sizeof back, cudaMemcpyDeviceToHost);
    unsigned u;
    memcpy(&u, &back[0], 4);
    printf("RESULT reused_block first=0x%08x\n", u);
  } else if (!strcmp(c, "copy_past_block")) {
    float *b = cached_block(140), h[64] = {0};
    report(c, cudaMemcpy(b, h, 144, cudaMemcpyHostToDevice));
  } else if (!strcmp(c, "lt_product") || !strcmp(c, "lt_misaligned") || !strcmp(c, "lt_in_place")) {
    __half *m;
    cudaMalloc(&m, 256 * sizeof(__half));
    cudaMemset(m, 0, 256 * sizeof(__half));
    if (!strcmp(c, "lt_product")) lt_product(c, m, m + 64, m + 128);
    else if (!strcmp(c, "lt_misaligned")) lt_product(c, m + 1, m + 64, m + 128); // A 2 bytes past 16
    else lt_product(c, m, m + 64, m + 8);                                         // D overlaps A
  } else if (!strcmp(c, "lt_bias")) {
    lt_bias(c, CUBLASLT_EPILOGUE_BIAS, 0);
  } else if (!strcmp(c, "lt_bias_moved")) {
    lt_bias(c, CUBLASLT_EPILOGUE_BIAS, 4); // one float on: 4-byte aligned, the heuristic saw 64
  } else if (!strcmp(c, "lt_gelu_bias")) {
    lt_bias(c, CUBLASLT_EPILOGUE_GELU_BIAS, 0);
  } else if (!strcmp(c, "gemm_in_place")) {
    float *m, one = 1, zero = 0;
    cudaMalloc(&m, 64 * sizeof(float));
    cublasHandle_t h;
    cublasCreate(&h);
    cublasStatus_t st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, m, CUDA_R_32F, 4, 0,
                                                   m + 16, CUDA_R_32F, 4, 0, &zero, m + 4, CUDA_R_32F, 4, 0, 1,
                                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    printf("RESULT gemm_in_place %s: %s\n", cublasGetStatusName(st), cudaGetErrorString(cudaErrorInvalidValue));
  } else {
    return -1;
  }
  return 0;
}
