// Convolution through cuDNN's legacy API: the TS_KIND_LIBRARY kernels
// CONV2D_FORWARD, CONV2D_BACKWARD_INPUT and CONV2D_BACKWARD_WEIGHT (contracts
// in src/ops/ops_nn.def), float32 and float64. Whatever this file declines
// (TS_ERR_UNSUPPORTED: no library, a shape cuDNN refuses, no workspace) the
// op layer composes from im2col and GEMM, overwriting the outputs (and zeroing
// grad_weight before accumulating into it), so declining is safe at any point.
//
// libcudnn is loaded on first use with dlopen, as cuBLAS is (cublas_loader.cu:
// start-up time, and a binary that runs where the library is missing), into a
// table of function pointers. The table's names are not the library's, so
// tensh (linked with -Wl,-E) exports no cudnn* symbol that could interpose on
// the calls cuDNN's sub-libraries make to each other.
//
// Algorithm choice follows torch.backends.cudnn: heuristics by default (the
// first candidate whose workspace can be allocated), cudnnFind*AlgorithmEx
// once per shape with benchmark on; deterministic keeps only algorithms cuDNN
// reports deterministic; allow_tf32 off restricts float32 to FMA kernels. The
// candidates are cached per (op, shapes, parameters, dtype, device, flags).
//
// Built without cuDNN's headers (no TSC_HAVE_CUDNN), this file only keeps the
// flags and answers version 0; it registers no kernel.
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>

#include "common.cuh"

// ---- torch.backends.cudnn flags ----------------------------------------------

static std::atomic<bool> flag_benchmark{false}, flag_deterministic{false}, flag_tf32{true};

extern "C" ts_cudnn_flags ts_cuda_cudnn_get_flags(void) {
  ts_cudnn_flags f;
  f.benchmark = flag_benchmark.load();
  f.deterministic = flag_deterministic.load();
  f.allow_tf32 = flag_tf32.load();
  return f;
}

extern "C" void ts_cuda_cudnn_set_flags(ts_cudnn_flags f) {
  flag_benchmark.store(f.benchmark);
  flag_deterministic.store(f.deterministic);
  flag_tf32.store(f.allow_tf32);
}

#ifndef TSC_HAVE_CUDNN

extern "C" int ts_cuda_cudnn_version(void) { return 0; }
void tsc_register_cudnn(ts_kernel *k) { (void)k; }

#else // TSC_HAVE_CUDNN

#include <cudnn.h>
#include <dlfcn.h>
#include <pthread.h>

#include <mutex>
#include <unordered_map>

#define TSC_STR2(x) #x
#define TSC_STR(x) TSC_STR2(x)
#ifndef TSC_MAX_DEVICES
#define TSC_MAX_DEVICES 64
#endif

// ---- the library, loaded on first use -----------------------------------------

#define TSC_CUDNN_FUNCS(X)                                                                                        \
  X(GetVersion) X(GetErrorString) X(Create) X(Destroy) X(SetStream) X(CreateTensorDescriptor)                     \
  X(DestroyTensorDescriptor) X(SetTensor4dDescriptorEx) X(CreateFilterDescriptor) X(DestroyFilterDescriptor)      \
  X(SetFilter4dDescriptor) X(CreateConvolutionDescriptor) X(DestroyConvolutionDescriptor)                         \
  X(SetConvolution2dDescriptor) X(SetConvolutionGroupCount) X(SetConvolutionMathType)                             \
  X(GetConvolution2dForwardOutputDim) X(GetConvolutionForwardAlgorithm_v7) X(FindConvolutionForwardAlgorithmEx)   \
  X(GetConvolutionForwardWorkspaceSize) X(ConvolutionForward) X(AddTensor)                                        \
  X(GetConvolutionBackwardDataAlgorithm_v7) X(FindConvolutionBackwardDataAlgorithmEx)                             \
  X(GetConvolutionBackwardDataWorkspaceSize) X(ConvolutionBackwardData) X(GetConvolutionBackwardFilterAlgorithm_v7) \
  X(FindConvolutionBackwardFilterAlgorithmEx) X(GetConvolutionBackwardFilterWorkspaceSize)                        \
  X(ConvolutionBackwardFilter) X(ConvolutionBackwardBias)

// dnn.F is cudnnF, with the header's signature.
struct cudnn_api {
#define X(f) decltype(&cudnn##f) f;
  TSC_CUDNN_FUNCS(X)
#undef X
};

static cudnn_api dnn;
static bool dnn_loaded;
static pthread_once_t dnn_once = PTHREAD_ONCE_INIT;

// One candidate file: every function found and the major version the headers
// were built for, else it is closed again (a half-fitting library left open
// would answer a later dlopen of the same soname).
static bool try_open(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return dlerror(), false;
  cudnn_api a;
  bool ok = true;
#define X(f) ok = ok && (a.f = reinterpret_cast<decltype(a.f)>(dlsym(h, "cudnn" #f))) != nullptr;
  TSC_CUDNN_FUNCS(X)
#undef X
  if (ok && a.GetVersion() / 10000 != CUDNN_MAJOR) ok = false;
  if (!ok) {
    dlclose(h);
    dlerror();
    return false;
  }
  dnn = a;
  return true;
}

// TENSH_CUDNN_LIB (a path), then the soname from the loader's paths, then the
// toolkit tensh was built with. libcudnn loads its sub-libraries (cnn, ops,
// graph, engines) itself, from its own directory.
static void load_library(void) {
  const char *env = getenv("TENSH_CUDNN_LIB");
  const char *soname = "libcudnn.so." TSC_STR(CUDNN_MAJOR);
  bool ok = env && *env && try_open(env);
  if (!ok) ok = try_open(soname);
#ifdef TSC_CUDA_LIB_DIR
  if (!ok) ok = try_open(TSC_CUDA_LIB_DIR "/libcudnn.so." TSC_STR(CUDNN_MAJOR));
#endif
  dnn_loaded = ok;
}

static bool loaded(void) {
  pthread_once(&dnn_once, load_library);
  return dnn_loaded;
}

extern "C" int ts_cuda_cudnn_version(void) { return loaded() ? (int)dnn.GetVersion() : 0; }

// ---- one handle per device ------------------------------------------------------

struct dnn_dev {
  std::mutex mu; // held for a whole call: the handle, its stream and the cache's workspace use
  cudnnHandle_t h = nullptr;
  bool broken = false; // cudnnCreate failed once (an unsupported GPU or driver): decline for good
};
static dnn_dev g_dev[TSC_MAX_DEVICES];

// ---- the problem --------------------------------------------------------------

enum conv_dir { FWD, BWD_DATA, BWD_FILTER };

// One call in cuDNN's terms: x (N, C, H, W), y (N, O, Ho, Wo), filter w (O, Cg, kh, kw),
// bias b (O) or NULL. Which are inputs depends on the direction: forward reads x, w, b
// and writes y; backward data reads y (grad_out), w and writes x (grad_input); backward
// filter reads x, y and writes w (grad_weight) and b (grad_bias).
struct conv_prob {
  conv_dir dir;
  ts_dtype dt;
  cudnnDataType_t cdt;
  size_t esize;
  int64_t N, C, H, W, O, Cg, kh, kw, Ho, Wo, G;
  int ph, pw, sh, sw, dh, dw;
  char *x, *y, *w, *b;     // device addresses
  int64_t x_bytes, y_bytes; // bytes per sample of x and y
};

static bool fits_int(int64_t v) { return v > 0 && v <= INT32_MAX; }

// Fills p from the call; false for anything cuDNN is not asked to do here.
static bool describe(const ts_call *c, conv_dir dir, conv_prob *p) {
  ts_tensor *xt, *yt, *wt, *bt;
  if (dir == FWD) xt = c->in[0], wt = c->in[1], yt = c->out[0], bt = c->nin > 2 ? c->in[2] : nullptr;
  else if (dir == BWD_DATA) yt = c->in[0], wt = c->in[1], xt = c->out[0], bt = nullptr;
  else yt = c->in[0], xt = c->in[1], wt = c->out[0], bt = c->out[1];
  if (!xt || !yt || !wt) return false;
  const ts_dtype dt = xt->dtype;
  if ((dt != TS_FLOAT32 && dt != TS_FLOAT64) || yt->dtype != dt || wt->dtype != dt || (bt && bt->dtype != dt)) return false;
  if (xt->ndim != 4 || yt->ndim != 4 || wt->ndim != 4 || (bt && bt->ndim != 1)) return false;
  // cuDNN refuses empty tensors: the op layer's composed path handles them
  if (ts_numel(xt) == 0 || ts_numel(yt) == 0 || ts_numel(wt) == 0 || (bt && ts_numel(bt) == 0)) return false;
  // descriptors take packed strides (size-1 dims may carry any stride)
  if (!ts_is_contiguous(xt) || !ts_is_contiguous(yt) || !ts_is_contiguous(wt) || (bt && !ts_is_contiguous(bt)))
    return false;
  p->dir = dir, p->dt = dt;
  p->cdt = dt == TS_FLOAT32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
  p->esize = ts_dtype_size(dt);
  p->N = xt->sizes[0], p->C = xt->sizes[1], p->H = xt->sizes[2], p->W = xt->sizes[3];
  p->O = yt->sizes[1], p->Ho = yt->sizes[2], p->Wo = yt->sizes[3];
  p->Cg = wt->sizes[1], p->kh = wt->sizes[2], p->kw = wt->sizes[3];
  p->G = c->i[3];
  if (yt->sizes[0] != p->N || wt->sizes[0] != p->O || (bt && bt->sizes[0] != p->O)) return false;
  if (p->G < 1 || p->C != p->Cg * p->G || p->O % p->G) return false;
  const int64_t sh = ts_unpack_h(c->i[0]), sw = ts_unpack_w(c->i[0]);
  const int64_t ph = ts_unpack_h(c->i[1]), pw = ts_unpack_w(c->i[1]);
  const int64_t dh = ts_unpack_h(c->i[2]), dw = ts_unpack_w(c->i[2]);
  if (!fits_int(sh) || !fits_int(sw) || !fits_int(dh) || !fits_int(dw) || ph < 0 || pw < 0 || ph > INT32_MAX ||
      pw > INT32_MAX)
    return false;
  p->sh = (int)sh, p->sw = (int)sw, p->ph = (int)ph, p->pw = (int)pw, p->dh = (int)dh, p->dw = (int)dw;
  // cuDNN indexes in int: every tensor of one call under 2^31 elements (the batch is
  // split below when x or y is larger)
  const int64_t xs = p->C * p->H * p->W, ys = p->O * p->Ho * p->Wo; // per sample, no overflow: numel fit
  if (xs > INT32_MAX || ys > INT32_MAX || ts_numel(wt) > INT32_MAX) return false;
  p->x_bytes = xs * (int64_t)p->esize, p->y_bytes = ys * (int64_t)p->esize;
  p->x = (char *)ts_data(xt), p->y = (char *)ts_data(yt), p->w = (char *)ts_data(wt);
  p->b = bt ? (char *)ts_data(bt) : nullptr;
  return true;
}

// ---- descriptors of one chunk of n samples ---------------------------------------

struct conv_desc {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  conv_desc() = default;
  conv_desc(const conv_desc &) = delete;
  conv_desc &operator=(const conv_desc &) = delete;
  ~conv_desc() {
    if (x) dnn.DestroyTensorDescriptor(x);
    if (y) dnn.DestroyTensorDescriptor(y);
    if (b) dnn.DestroyTensorDescriptor(b);
    if (w) dnn.DestroyFilterDescriptor(w);
    if (conv) dnn.DestroyConvolutionDescriptor(conv);
  }
};

static cudnnStatus_t set_packed4d(cudnnTensorDescriptor_t d, cudnnDataType_t t, int64_t n, int64_t c, int64_t h,
                                  int64_t w) {
  return dnn.SetTensor4dDescriptorEx(d, t, (int)n, (int)c, (int)h, (int)w, (int)(c * h * w), (int)(h * w), (int)w, 1);
}

// The math type a call starts from: FMA only for float32 without TF32 (as PyTorch).
static cudnnMathType_t base_math(const conv_prob *p, bool tf32) {
  return p->dt == TS_FLOAT32 && !tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

// false: cuDNN refuses the geometry (the caller declines)
static bool make_desc(const conv_prob *p, int64_t n, cudnnMathType_t math, conv_desc *d) {
  const cudnnStatus_t ok = CUDNN_STATUS_SUCCESS;
  if (dnn.CreateTensorDescriptor(&d->x) != ok || dnn.CreateTensorDescriptor(&d->y) != ok ||
      dnn.CreateFilterDescriptor(&d->w) != ok || dnn.CreateConvolutionDescriptor(&d->conv) != ok)
    return false;
  if (set_packed4d(d->x, p->cdt, n, p->C, p->H, p->W) != ok || set_packed4d(d->y, p->cdt, n, p->O, p->Ho, p->Wo) != ok)
    return false;
  if (dnn.SetFilter4dDescriptor(d->w, p->cdt, CUDNN_TENSOR_NCHW, (int)p->O, (int)p->Cg, (int)p->kh, (int)p->kw) != ok)
    return false;
  if (dnn.SetConvolution2dDescriptor(d->conv, p->ph, p->pw, p->sh, p->sw, p->dh, p->dw, CUDNN_CROSS_CORRELATION,
                                     p->cdt) != ok ||
      dnn.SetConvolutionGroupCount(d->conv, (int)p->G) != ok || dnn.SetConvolutionMathType(d->conv, math) != ok)
    return false;
  if (p->b) {
    if (dnn.CreateTensorDescriptor(&d->b) != ok || set_packed4d(d->b, p->cdt, 1, p->O, 1, 1) != ok) return false;
  }
  // cuDNN's idea of the output must be the op layer's
  int on = 0, oc = 0, oh = 0, ow = 0;
  if (dnn.GetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &on, &oc, &oh, &ow) != ok) return false;
  return on == n && oc == p->O && oh == p->Ho && ow == p->Wo;
}

// ---- algorithm candidates, cached per shape ----------------------------------------

#define TSC_MAX_ALGOS 8 // >= every CUDNN_CONVOLUTION_*_ALGO_COUNT

struct candidate {
  int algo;
  cudnnMathType_t math;
  size_t ws; // workspace bytes
};
struct algo_list {
  int n = 0;
  candidate c[TSC_MAX_ALGOS];
};

struct algo_key {
  int32_t v[24]; // see key_of; unused entries 0
  bool operator==(const algo_key &o) const { return memcmp(v, o.v, sizeof v) == 0; }
};
struct algo_key_hash {
  size_t operator()(const algo_key &k) const {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (int i = 0; i < 24; i++) h = (h ^ (uint32_t)k.v[i]) * 1099511628211ull;
    return (size_t)h;
  }
};

static std::mutex cache_mu; // taken inside a device's mutex, never the other way round
static std::unordered_map<algo_key, algo_list, algo_key_hash> cache;

static algo_key key_of(const conv_prob *p, int64_t n, int dev, const ts_cudnn_flags &f) {
  algo_key k;
  memset(&k, 0, sizeof k);
  int32_t *v = k.v;
  v[0] = p->dir, v[1] = p->dt, v[2] = dev, v[3] = f.allow_tf32, v[4] = f.deterministic, v[5] = f.benchmark;
  v[6] = (int32_t)n, v[7] = (int32_t)p->C, v[8] = (int32_t)p->H, v[9] = (int32_t)p->W, v[10] = (int32_t)p->O;
  v[11] = (int32_t)p->kh, v[12] = (int32_t)p->kw, v[13] = (int32_t)p->Ho, v[14] = (int32_t)p->Wo;
  v[15] = (int32_t)p->G, v[16] = p->ph, v[17] = p->pw, v[18] = p->sh, v[19] = p->sw, v[20] = p->dh, v[21] = p->dw;
  return k;
}

// The math type a candidate runs with, false when the flags exclude it. float32
// without TF32 runs FMA kernels only (PyTorch expects cuDNN to report FMA there;
// a DEFAULT entry is run as FMA, which cuDNN refuses if the algorithm cannot).
static bool math_allowed(const conv_prob *p, cudnnMathType_t *m, bool tf32) {
  if (*m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false; // would round float32 to half
  if (p->dt == TS_FLOAT32 && !tf32) {
    if (*m != CUDNN_FMA_MATH && *m != CUDNN_DEFAULT_MATH) return false;
    *m = CUDNN_FMA_MATH;
  }
  return true;
}

// The usable entries of a cuDNN perf list, in its order (best first).
template <typename Perf>
static void take_perfs(const conv_prob *p, const Perf *perf, int n, const ts_cudnn_flags &f, algo_list *out) {
  out->n = 0;
  for (int i = 0; i < n && out->n < TSC_MAX_ALGOS; i++) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (f.deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    cudnnMathType_t m = perf[i].mathType;
    if (!math_allowed(p, &m, f.allow_tf32)) continue;
    out->c[out->n++] = candidate{(int)perf[i].algo, m, 0};
  }
}

static cudnnStatus_t workspace_size(cudnnHandle_t h, const conv_prob *p, const conv_desc *d, int algo, size_t *n) {
  switch (p->dir) {
  case FWD:
    return dnn.GetConvolutionForwardWorkspaceSize(h, d->x, d->w, d->conv, d->y, (cudnnConvolutionFwdAlgo_t)algo, n);
  case BWD_DATA:
    return dnn.GetConvolutionBackwardDataWorkspaceSize(h, d->w, d->y, d->conv, d->x, (cudnnConvolutionBwdDataAlgo_t)algo,
                                                       n);
  default:
    return dnn.GetConvolutionBackwardFilterWorkspaceSize(h, d->x, d->y, d->conv, d->w,
                                                         (cudnnConvolutionBwdFilterAlgo_t)algo, n);
  }
}

static int algo_count(conv_dir dir) {
  return dir == FWD        ? (int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT
         : dir == BWD_DATA ? (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                           : (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= TSC_MAX_ALGOS && CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= TSC_MAX_ALGOS &&
                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= TSC_MAX_ALGOS,
              "more cuDNN algorithms than TSC_MAX_ALGOS");

// Workspace sizes past this are cuDNN's way of saying "not this one".
#define TSC_WS_ABSURD ((size_t)1 << 48)

// cuDNN's heuristics, no device work.
static bool heuristics(cudnnHandle_t h, const conv_prob *p, const conv_desc *d, const ts_cudnn_flags &f,
                       algo_list *out) {
  int n = 0;
  cudnnStatus_t s;
  switch (p->dir) {
  case FWD: {
    cudnnConvolutionFwdAlgoPerf_t perf[TSC_MAX_ALGOS];
    s = dnn.GetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y, algo_count(FWD), &n, perf);
    if (s == CUDNN_STATUS_SUCCESS) take_perfs(p, perf, n, f, out);
    break;
  }
  case BWD_DATA: {
    cudnnConvolutionBwdDataAlgoPerf_t perf[TSC_MAX_ALGOS];
    s = dnn.GetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x, algo_count(BWD_DATA), &n, perf);
    if (s == CUDNN_STATUS_SUCCESS) take_perfs(p, perf, n, f, out);
    break;
  }
  default: {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[TSC_MAX_ALGOS];
    s = dnn.GetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w, algo_count(BWD_FILTER), &n, perf);
    if (s == CUDNN_STATUS_SUCCESS) take_perfs(p, perf, n, f, out);
    break;
  }
  }
  return s == CUDNN_STATUS_SUCCESS;
}

// cudnnFind*AlgorithmEx: times every algorithm on this chunk's buffers (it writes the
// output, which the real run overwrites), in the largest workspace that can be had.
static bool benchmark(cudnnHandle_t h, const conv_prob *p, const conv_desc *d, const ts_cudnn_flags &f, char *x,
                      char *y, algo_list *out) {
  // the workspace: the largest any algorithm asks for, else the next largest, ...
  size_t sizes[TSC_MAX_ALGOS + 1];
  int ns = 0;
  sizes[ns++] = 0;
  for (int a = 0; a < algo_count(p->dir); a++) {
    size_t n = 0;
    if (workspace_size(h, p, d, a, &n) == CUDNN_STATUS_SUCCESS && n > 0 && n < TSC_WS_ABSURD) sizes[ns++] = n;
  }
  for (int i = 1; i < ns; i++) // descending
    for (int j = i; j > 0 && sizes[j] > sizes[j - 1]; j--) {
      size_t t = sizes[j];
      sizes[j] = sizes[j - 1], sizes[j - 1] = t;
    }
  tsc_temp ws;
  size_t wsn = 0;
  for (int i = 0; i < ns; i++) {
    if (sizes[i] == 0 || ws.alloc(sizes[i]) == TS_OK) {
      wsn = sizes[i];
      break;
    }
  }
  int n = 0;
  cudnnStatus_t s;
  switch (p->dir) {
  case FWD: {
    cudnnConvolutionFwdAlgoPerf_t perf[TSC_MAX_ALGOS];
    s = dnn.FindConvolutionForwardAlgorithmEx(h, d->x, x, d->w, p->w, d->conv, d->y, y, algo_count(FWD), &n, perf,
                                              ws.p, wsn);
    if (s == CUDNN_STATUS_SUCCESS) take_perfs(p, perf, n, f, out);
    break;
  }
  case BWD_DATA: {
    cudnnConvolutionBwdDataAlgoPerf_t perf[TSC_MAX_ALGOS];
    s = dnn.FindConvolutionBackwardDataAlgorithmEx(h, d->w, p->w, d->y, y, d->conv, d->x, x, algo_count(BWD_DATA), &n,
                                                   perf, ws.p, wsn);
    if (s == CUDNN_STATUS_SUCCESS) take_perfs(p, perf, n, f, out);
    break;
  }
  default: {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[TSC_MAX_ALGOS];
    s = dnn.FindConvolutionBackwardFilterAlgorithmEx(h, d->x, x, d->y, y, d->conv, d->w, p->w, algo_count(BWD_FILTER),
                                                     &n, perf, ws.p, wsn);
    if (s == CUDNN_STATUS_SUCCESS) take_perfs(p, perf, n, f, out);
    break;
  }
  }
  return s == CUDNN_STATUS_SUCCESS;
}

// The candidates for a chunk of n samples starting at x, y: from the cache, or chosen
// now and cached (benchmarking writes the output: the op layer's fallback after a
// decline overwrites it, or zeroes grad_weight first). false: none (decline).
static bool choose(cudnnHandle_t h, const conv_prob *p, conv_desc *d, int64_t n, int dev, const ts_cudnn_flags &f,
                   char *x, char *y, algo_list *out) {
  const algo_key key = key_of(p, n, dev, f);
  {
    std::lock_guard<std::mutex> lk(cache_mu);
    auto it = cache.find(key);
    if (it != cache.end()) return *out = it->second, out->n > 0;
  }
  algo_list l;
  if (f.benchmark) {
    if (!benchmark(h, p, d, f, x, y, &l)) return false; // may be out of memory: not cached
  } else if (!heuristics(h, p, d, f, &l)) {
    l.n = 0; // a refusal of the geometry: cached, so it is asked once
  }
  // each candidate's workspace, under its own math type
  algo_list r;
  for (int i = 0; i < l.n; i++) {
    size_t ws = 0;
    if (dnn.SetConvolutionMathType(d->conv, l.c[i].math) != CUDNN_STATUS_SUCCESS) continue;
    if (workspace_size(h, p, d, l.c[i].algo, &ws) != CUDNN_STATUS_SUCCESS || ws >= TSC_WS_ABSURD) continue;
    r.c[r.n++] = candidate{l.c[i].algo, l.c[i].math, ws};
  }
  {
    std::lock_guard<std::mutex> lk(cache_mu);
    if (cache.size() >= 4096) cache.clear(); // a bound for programs that see endless shapes
    cache[key] = r;
  }
  *out = r;
  return r.n > 0;
}

// ---- running it ----------------------------------------------------------------

static ts_status dnn_fail(cudnnStatus_t s, const char *op, const char *what) {
  return ts_fail(TS_ERR_BACKEND, "cuDNN error in %s: %s (%s)", op, dnn.GetErrorString(s), what);
}

static bool out_of_memory(cudnnStatus_t s) {
  return s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED || s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
}

// A refusal at run time: try the next candidate (nothing was written). cuDNN 9 reports
// refusals by category (BAD_PARAM_* 2xxx, NOT_SUPPORTED_* 3xxx), and its own
// allocations may fail where another algorithm's would not.
static bool refused(cudnnStatus_t s) {
  const int category = (int)s / 1000;
  return category == 2 || category == 3 || out_of_memory(s);
}

// One chunk: the convolution with the first candidate that gets its workspace and runs,
// then the bias (added in forward, reduced in backward filter). beta 0 overwrites, 1
// accumulates (backward filter's later chunks). TS_ERR_UNSUPPORTED: nothing ran.
static ts_status run_chunk(cudnnHandle_t h, const conv_prob *p, const conv_desc *d, const algo_list *l, char *x,
                           char *y, bool accumulate, const char *op) {
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool dbl = p->dt == TS_FLOAT64;
  const void *one = dbl ? (const void *)&one_d : (const void *)&one_f;
  const void *beta = accumulate ? one : dbl ? (const void *)&zero_d : (const void *)&zero_f;
  bool ran = false;
  for (int i = 0; i < l->n && !ran; i++) {
    const candidate &k = l->c[i];
    tsc_temp ws;
    if (k.ws > 0 && ws.alloc(k.ws) != TS_OK) continue; // too big now: the next one
    if (dnn.SetConvolutionMathType(d->conv, k.math) != CUDNN_STATUS_SUCCESS) continue;
    cudnnStatus_t s;
    if (p->dir == FWD)
      s = dnn.ConvolutionForward(h, one, d->x, x, d->w, p->w, d->conv, (cudnnConvolutionFwdAlgo_t)k.algo, ws.p, k.ws,
                                 beta, d->y, y);
    else if (p->dir == BWD_DATA)
      s = dnn.ConvolutionBackwardData(h, one, d->w, p->w, d->y, y, d->conv, (cudnnConvolutionBwdDataAlgo_t)k.algo, ws.p,
                                      k.ws, beta, d->x, x);
    else
      s = dnn.ConvolutionBackwardFilter(h, one, d->x, x, d->y, y, d->conv, (cudnnConvolutionBwdFilterAlgo_t)k.algo,
                                        ws.p, k.ws, beta, d->w, p->w);
    if (refused(s)) continue;
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(s, op, "the convolution");
    ran = true;
  }
  if (!ran) return TS_ERR_UNSUPPORTED;
  if (p->b) {
    cudnnStatus_t s = p->dir == FWD ? dnn.AddTensor(h, one, d->b, p->b, one, d->y, y)
                                    : dnn.ConvolutionBackwardBias(h, one, d->y, y, beta, d->b, p->b);
    if (refused(s)) return TS_ERR_UNSUPPORTED;
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(s, op, p->dir == FWD ? "adding the bias" : "the bias gradient");
  }
  return TS_OK;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static ts_status conv_entry(const ts_call *c, conv_dir dir, const char *op) {
  if (!loaded()) return TS_ERR_UNSUPPORTED;
  conv_prob p;
  if (!describe(c, dir, &p)) return TS_ERR_UNSUPPORTED;
  const int dev = c->out[0]->device.index;
  if (dev < 0 || dev >= TSC_MAX_DEVICES) return TS_ERR_UNSUPPORTED;
  const ts_cudnn_flags f = ts_cuda_cudnn_get_flags();

  // Outputs come fresh from the allocator; an unaligned one (never seen) is declined.
  // Unaligned inputs (views at an odd offset) are copied to aligned scratch below.
  char **outs[2] = {dir == FWD ? &p.y : dir == BWD_DATA ? &p.x : &p.w, dir == BWD_FILTER ? &p.b : nullptr};
  for (char **o : outs)
    if (o && *o && !aligned16(*o)) return TS_ERR_UNSUPPORTED;

  // Batch chunks of nb samples keep x and y under 2^31 elements each (cuDNN's int
  // indexing) and every chunk's start 16-byte aligned.
  const int64_t per = std::max(p.x_bytes, p.y_bytes) / (int64_t)p.esize;
  int64_t nb = std::min(p.N, (int64_t)INT32_MAX / per);
  if (nb < p.N) {
    const int64_t m = std::max(16 / gcd64(p.x_bytes, 16), 16 / gcd64(p.y_bytes, 16));
    nb -= nb % m;
  }
  if (nb < 1) return TS_ERR_UNSUPPORTED;
  const int64_t rem = p.N % nb;

  dnn_dev &D = g_dev[dev];
  std::lock_guard<std::mutex> lk(D.mu);
  if (D.broken) return TS_ERR_UNSUPPORTED;
  // cuDNN runs on the calling thread's current context: this device's (the dispatcher
  // has made it current; the guard keeps tensh's own record of it in step if not)
  tsc_device_guard guard(dev);
  if (guard.st) return guard.st;
  if (!D.h) {
    cudnnStatus_t s = dnn.Create(&D.h);
    if (s != CUDNN_STATUS_SUCCESS) { // an unusable GPU, driver or library: for good, unless memory was short
      D.h = nullptr, D.broken = !out_of_memory(s);
      return TS_ERR_UNSUPPORTED;
    }
  }
  cudaStream_t stream = tsc_stream();
  cudnnStatus_t ss = dnn.SetStream(D.h, stream);
  if (ss != CUDNN_STATUS_SUCCESS) return dnn_fail(ss, op, "cudnnSetStream");

  // aligned copies of unaligned inputs (stream-ordered, freed after the launches)
  tsc_temp copies[4];
  int ncopies = 0;
  auto align_input = [&](char **ptr, int64_t bytes) -> ts_status {
    if (aligned16(*ptr)) return TS_OK;
    tsc_temp &t = copies[ncopies++];
    ts_status st = t.alloc((size_t)bytes);
    if (st) return st;
    TSC_CHECK(cudaMemcpyAsync(t.p, *ptr, (size_t)bytes, cudaMemcpyDeviceToDevice, stream));
    *ptr = (char *)t.p;
    return TS_OK;
  };
  const int64_t w_bytes = p.O * p.Cg * p.kh * p.kw * (int64_t)p.esize;
  ts_status st = TS_OK;
  if (dir != BWD_DATA && !st) st = align_input(&p.x, p.N * p.x_bytes);
  if (dir != FWD && !st) st = align_input(&p.y, p.N * p.y_bytes);
  if (dir != BWD_FILTER && !st) st = align_input(&p.w, w_bytes);
  if (dir == FWD && p.b && !st) st = align_input(&p.b, p.O * (int64_t)p.esize);
  if (st) return st;

  // Plans for the full chunk and the remainder, both chosen before anything runs. A
  // decline, even after chunks ran, leaves the op layer a whole recomputation.
  const cudnnMathType_t math = base_math(&p, f.allow_tf32);
  conv_desc dfull, drem;
  algo_list lfull, lrem;
  if (!make_desc(&p, nb, math, &dfull)) return TS_ERR_UNSUPPORTED;
  if (!choose(D.h, &p, &dfull, nb, dev, f, p.x, p.y, &lfull)) return TS_ERR_UNSUPPORTED;
  if (rem > 0) {
    const int64_t n0 = p.N - rem;
    if (!make_desc(&p, rem, math, &drem)) return TS_ERR_UNSUPPORTED;
    if (!choose(D.h, &p, &drem, rem, dev, f, p.x + n0 * p.x_bytes, p.y + n0 * p.y_bytes, &lrem))
      return TS_ERR_UNSUPPORTED;
  }
  for (int64_t n0 = 0; n0 < p.N; n0 += nb) {
    const bool last = n0 + nb > p.N;
    st = run_chunk(D.h, &p, last ? &drem : &dfull, last ? &lrem : &lfull, p.x + n0 * p.x_bytes, p.y + n0 * p.y_bytes,
                   dir == BWD_FILTER && n0 > 0, op);
    if (st) return st; // TS_ERR_UNSUPPORTED: declined, the op layer recomputes
  }
  TSC_LAUNCH_CHECK(op);
  return TS_OK;
}

static ts_status conv_forward(const ts_call *c) { return conv_entry(c, FWD, "conv2d_forward (cuDNN)"); }
static ts_status conv_backward_input(const ts_call *c) {
  return conv_entry(c, BWD_DATA, "conv2d_backward_input (cuDNN)");
}
static ts_status conv_backward_weight(const ts_call *c) {
  return conv_entry(c, BWD_FILTER, "conv2d_backward_weight (cuDNN)");
}

// Registered whenever the headers were found: whether the library loads is
// learnt at the first call, which declines when it does not.
void tsc_register_cudnn(ts_kernel *k) {
  k[TS_OP_CONV2D_FORWARD] = conv_forward;
  k[TS_OP_CONV2D_BACKWARD_INPUT] = conv_backward_input;
  k[TS_OP_CONV2D_BACKWARD_WEIGHT] = conv_backward_weight;
}

#endif // TSC_HAVE_CUDNN
