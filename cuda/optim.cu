// CUDA optimizer kernels: the fused Adam/AdamW step (contract in
// src/ops_optim.def; the CPU reference is src/cpu/optim.c).
//
// One launch updates every parameter of the group (a multi-tensor apply):
// the host builds a table of the group's tensors (pointers, sizes, dtype,
// the first block of each), copies it to the device with one async copy,
// and each thread block finds its tensor by binary search and updates one
// chunk of it. Parameters may mix float32 and float64 (each parameter's
// tensors share one dtype); the branch is uniform per block. The arithmetic
// is the CPU's, in double, element by element.
#include <math.h>
#include <string.h>

#include <vector>

#include "common.cuh"

#define ADAM_CHUNK 16384 // elements per block: 256 threads x 4 wide x 16 steps

// One parameter: its tensors, all contiguous, of n elements.
struct adam_entry {
  void *p, *g, *m, *v, *vm; // vm NULL without amsgrad
  int64_t n;
  int64_t first_block; // blocks of the earlier entries
  int f64;             // float64 (else float32)
  int vec;             // every pointer 16-byte aligned: 128-bit accesses
};

struct adam_hyper {
  double b1, b2, eps, wd, lr, step_size, bc2_sqrt;
  bool maximize, decoupled;
};

// One element, as the CPU's ADAM_LOOP body (double arithmetic, stores in T).
template <typename T>
__device__ __forceinline__ void adam_one(const adam_hyper &h, T &p, T g, T &m, T &v, T *vm) {
  double gj = h.maximize ? -(double)g : (double)g, pj = (double)p;
  if (h.wd != 0) {
    if (h.decoupled) pj *= 1 - h.lr * h.wd;
    else gj += h.wd * pj;
  }
  const double mj = (double)m * h.b1 + (1 - h.b1) * gj, vj = (double)v * h.b2 + (1 - h.b2) * gj * gj;
  m = (T)mj, v = (T)vj;
  double vv = vj;
  if (vm) {
    vv = (double)*vm > vj ? (double)*vm : vj;
    *vm = (T)vv;
  }
  p = (T)(pj - h.step_size * mj / (sqrt(vv) / h.bc2_sqrt + h.eps));
}

template <typename T, int V> struct alignas(sizeof(T) * V) avec {
  T v[V];
};

// Elements [lo, hi) of entry e. The vector path needs lo (a multiple of the
// chunk) and the pointers aligned; a tail shorter than V goes one by one.
template <typename T> __device__ void adam_chunk(const adam_hyper &h, const adam_entry &e, int64_t lo, int64_t hi) {
  T *p = (T *)e.p, *m = (T *)e.m, *v = (T *)e.v, *vm = (T *)e.vm;
  const T *g = (const T *)e.g;
  constexpr int V = 16 / sizeof(T);
  int64_t i = lo;
  if (e.vec) {
    const int64_t nv = (hi - lo) / V;
    for (int64_t k = threadIdx.x; k < nv; k += blockDim.x) {
      const int64_t j = lo + k * V;
      avec<T, V> pp = *(avec<T, V> *)(p + j), gg = *(const avec<T, V> *)(g + j), mm = *(avec<T, V> *)(m + j),
                 vv = *(avec<T, V> *)(v + j), ww;
      if (vm) ww = *(avec<T, V> *)(vm + j);
#pragma unroll
      for (int q = 0; q < V; q++) adam_one<T>(h, pp.v[q], gg.v[q], mm.v[q], vv.v[q], vm ? &ww.v[q] : NULL);
      *(avec<T, V> *)(p + j) = pp, *(avec<T, V> *)(m + j) = mm, *(avec<T, V> *)(v + j) = vv;
      if (vm) *(avec<T, V> *)(vm + j) = ww;
    }
    i = lo + nv * V;
  }
  for (int64_t j = i + threadIdx.x; j < hi; j += blockDim.x) adam_one<T>(h, p[j], g[j], m[j], v[j], vm ? vm + j : NULL);
}

__global__ void adam_kernel(const adam_entry *__restrict__ ents, int nent, int64_t total_blocks, adam_hyper h) {
  for (int64_t vb = blockIdx.x; vb < total_blocks; vb += gridDim.x) {
    int lo = 0, hi = nent - 1; // the last entry whose first_block <= vb
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (ents[mid].first_block <= vb) lo = mid;
      else hi = mid - 1;
    }
    const adam_entry e = ents[lo];
    const int64_t start = (vb - e.first_block) * ADAM_CHUNK, end = min(start + (int64_t)ADAM_CHUNK, e.n);
    if (e.f64) adam_chunk<double>(h, e, start, end);
    else adam_chunk<float>(h, e, start, end);
  }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static ts_status k_adam_step(const ts_call *c) {
  adam_hyper h;
  double lr = c->f[0], wd;
  memcpy(&wd, &c->i[3], sizeof wd);
  h.lr = lr, h.b1 = c->f[1], h.b2 = c->f[2], h.eps = c->f[3], h.wd = wd;
  h.maximize = c->i[0] & 2, h.decoupled = c->i[0] & 4;
  const int per = (int)c->i[1];
  const double step = (double)c->i[2];
  h.step_size = lr / (1 - pow(h.b1, step)), h.bc2_sqrt = sqrt(1 - pow(h.b2, step));

  // the table: empty parameters left out, so every entry owns >= 1 block
  std::vector<adam_entry> ents;
  int64_t blocks = 0;
  for (int k = 0; k + per <= c->nin; k += per) {
    ts_tensor *const *t = c->in + k;
    const int64_t n = ts_numel(t[0]);
    if (n == 0) continue;
    adam_entry e;
    e.p = ts_data(t[0]), e.g = ts_data(t[1]), e.m = ts_data(t[2]), e.v = ts_data(t[3]);
    e.vm = per > 4 ? ts_data(t[4]) : NULL;
    e.n = n, e.first_block = blocks, e.f64 = t[0]->dtype == TS_FLOAT64;
    e.vec = aligned16(e.p) && aligned16(e.g) && aligned16(e.m) && aligned16(e.v) && (!e.vm || aligned16(e.vm));
    blocks += (n + ADAM_CHUNK - 1) / ADAM_CHUNK;
    try {
      ents.push_back(e);
    } catch (...) { // no exception crosses the C boundary
      return ts_fail(TS_ERR_OOM, "adam_step: out of memory for the parameter table");
    }
  }
  if (!ents.empty()) {
    ts_status st;
    const size_t bytes = ents.size() * sizeof(adam_entry);
    adam_entry *dev = (adam_entry *)tsc_temp_alloc(bytes, &st);
    if (st) return st;
    // pageable source: the copy stages it before returning, so the vector may go
    cudaError_t e = cudaMemcpyAsync(dev, ents.data(), bytes, cudaMemcpyHostToDevice, tsc_stream());
    if (e != cudaSuccess) {
      tsc_temp_free(dev);
      return tsc_cuda_error(e, "adam_step (parameter table)");
    }
    const unsigned grid = (unsigned)(blocks < INT32_MAX ? blocks : INT32_MAX);
    adam_kernel<<<grid, TSC_THREADS, 0, tsc_stream()>>>(dev, (int)ents.size(), blocks, h);
    st = tsc_after_launch("adam_step");
    tsc_temp_free(dev);
    if (st) return st;
  }
  for (int k = 0; k + per <= c->nin; k += per) c->in[k]->storage->version++;
  return TS_OK;
}

extern "C" void tsc_register_optim(ts_kernel *k) { k[TS_OP_ADAM_STEP] = k_adam_step; }
