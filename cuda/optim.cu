// CUDA optimizer kernels: the fused Adam/AdamW, SGD and RMSprop steps
// (contracts in src/ops/ops_optim.def; the CPU reference is src/cpu/optim.c).
//
// One launch updates every parameter of the group (a multi-tensor apply):
// the host builds a table of the group's tensors (up to five pointers per
// parameter, its size, dtype, the first block of each) and passes it as the
// kernel's argument, as PyTorch's multi_tensor_apply does (no copy, nothing
// for the host to wait on); each thread block finds its parameter by binary
// search and updates one chunk of it. A table holds MT_TABLE parameters:
// larger groups take a launch per MT_TABLE parameters. Parameters may mix float32 and
// float64 (each parameter's tensors share one dtype); the branch is uniform
// per block. The arithmetic is the CPU's, in double, element by element: one
// functor per optimizer maps a parameter's five slots in place.
#include <math.h>
#include <string.h>

#include "common.cuh"

#define MT_CHUNK 16384 // elements per block: 256 threads x 4 wide x 16 steps
#define MT_SLOTS 5     // tensors per parameter at most; slot 1 is the grad (read only)
#define MT_TABLE 48    // parameters per launch: 48 entries of 80 bytes fit CUDA's 4 KiB of kernel arguments

// One parameter: its tensors, all contiguous, of n elements; an unused slot is NULL.
struct mt_entry {
  void *t[MT_SLOTS];
  const float *step; // a capturable Adam's step count, read on the device; NULL otherwise
  int64_t n;
  int64_t first_block; // blocks of the earlier entries
  int f64;             // float64 (else float32)
  int vec;             // every pointer 16-byte aligned: 128-bit accesses
  int flag;            // per parameter, for the functor (SGD: the buffer is fresh)
};

template <typename T, int V> struct alignas(sizeof(T) * V) avec {
  T v[V];
};

// Elements [lo, hi) of entry e: load the used slots, op(x, flag) per
// element, store every used slot but the grad's. The vector path needs lo
// (a multiple of the chunk) and the pointers aligned; a tail shorter than V
// goes one by one. The slot loops unroll, so x and r stay in registers.
template <typename T, class Op> __device__ void mt_chunk(const Op &op, const mt_entry &e, int64_t lo, int64_t hi) {
  constexpr int V = 16 / sizeof(T);
  int64_t i = lo;
  if (e.vec) {
    const int64_t nv = (hi - lo) / V;
    for (int64_t k = threadIdx.x; k < nv; k += blockDim.x) {
      const int64_t j = lo + k * V;
      avec<T, V> r[MT_SLOTS];
#pragma unroll
      for (int s = 0; s < MT_SLOTS; s++)
        if (e.t[s]) r[s] = *(const avec<T, V> *)((const T *)e.t[s] + j);
        else {
#pragma unroll
          for (int q = 0; q < V; q++) r[s].v[q] = T(0);
        }
#pragma unroll
      for (int q = 0; q < V; q++) {
        T x[MT_SLOTS];
#pragma unroll
        for (int s = 0; s < MT_SLOTS; s++) x[s] = r[s].v[q];
        op(x, e.flag);
#pragma unroll
        for (int s = 0; s < MT_SLOTS; s++) r[s].v[q] = x[s];
      }
#pragma unroll
      for (int s = 0; s < MT_SLOTS; s++)
        if (s != 1 && e.t[s]) *(avec<T, V> *)((T *)e.t[s] + j) = r[s];
    }
    i = lo + nv * V;
  }
  for (int64_t j = i + threadIdx.x; j < hi; j += blockDim.x) {
    T x[MT_SLOTS];
#pragma unroll
    for (int s = 0; s < MT_SLOTS; s++) x[s] = e.t[s] ? ((const T *)e.t[s])[j] : T(0);
    op(x, e.flag);
#pragma unroll
    for (int s = 0; s < MT_SLOTS; s++)
      if (s != 1 && e.t[s]) ((T *)e.t[s])[j] = x[s];
  }
}

// A launch's parameters, passed by value.
struct mt_table {
  mt_entry e[MT_TABLE];
  int n;
};

// The entry of table block vb and the chunk [*lo, *hi) it owns.
__device__ __forceinline__ const mt_entry &mt_find(const mt_table &tab, int64_t vb, int64_t *lo, int64_t *hi) {
  int a = 0, b = tab.n - 1;
  while (a < b) {
    const int mid = (a + b + 1) / 2;
    if (tab.e[mid].first_block <= vb) a = mid;
    else b = mid - 1;
  }
  const mt_entry &e = tab.e[a];
  *lo = (vb - e.first_block) * MT_CHUNK, *hi = min(*lo + (int64_t)MT_CHUNK, e.n);
  return e;
}

// The functor for entry e: op itself, unless it reads something per entry
// on the device (a capturable Adam's step: an overload below).
template <class Op> __device__ __forceinline__ Op entry_op(const Op &op, const mt_entry &) { return op; }
struct adam_op;
__device__ adam_op entry_op(const adam_op &op, const mt_entry &e);

template <class Op> __global__ void mt_kernel(const mt_table tab, int64_t total_blocks, Op op) {
  for (int64_t vb = blockIdx.x; vb < total_blocks; vb += gridDim.x) {
    int64_t start, end;
    const mt_entry e = mt_find(tab, vb, &start, &end);
    const Op eop = entry_op(op, e);
    if (e.f64) mt_chunk<double>(eop, e, start, end);
    else mt_chunk<float>(eop, e, start, end);
  }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static unsigned mt_grid(int64_t blocks) { return (unsigned)(blocks < INT32_MAX ? blocks : INT32_MAX); }

// The tables for c's parameters (c->i[1] tensors each, placed in slots by
// slot_of[0..per); slot -1: the tensor is the entry's step): launch(table,
// its blocks, the blocks of the tables before it) for each. flag_below:
// parameters with an index below it get flag 1. Empty parameters are left
// out, so every entry owns >= 1 block.
template <class Launch>
static ts_status mt_tables(const ts_call *c, const int *slot_of, int64_t flag_below, const Launch &launch) {
  const int per = (int)c->i[1];
  mt_table tab;
  memset(&tab, 0, sizeof tab);
  int64_t blocks = 0, before = 0;
  for (int k = 0; k + per <= c->nin; k += per) {
    ts_tensor *const *t = c->in + k;
    const int64_t n = ts_numel(t[0]);
    if (n == 0) continue;
    if (tab.n == MT_TABLE) { // full: launch it, start the next
      ts_status st = launch(tab, blocks, before);
      if (st) return st;
      tab.n = 0, before += blocks, blocks = 0;
    }
    mt_entry &e = tab.e[tab.n++];
    memset(&e, 0, sizeof e);
    e.vec = 1;
    for (int j = 0; j < per; j++) {
      if (slot_of[j] < 0) {
        e.step = (const float *)ts_data(t[j]);
        continue;
      }
      e.t[slot_of[j]] = ts_data(t[j]);
      e.vec &= aligned16(e.t[slot_of[j]]);
    }
    e.n = n, e.first_block = blocks, e.f64 = t[0]->dtype == TS_FLOAT64, e.flag = k / per < flag_below;
    blocks += (n + MT_CHUNK - 1) / MT_CHUNK;
  }
  return tab.n ? launch(tab, blocks, before) : TS_OK;
}

// op over every element of c's parameters: a launch per table
template <class Op>
static ts_status mt_apply(const ts_call *c, const char *what, const int *slot_of, int64_t flag_below, const Op &op) {
  return mt_tables(c, slot_of, flag_below, [&](const mt_table &tab, int64_t blocks, int64_t) {
    mt_kernel<Op><<<mt_grid(blocks), TSC_THREADS, 0, tsc_stream()>>>(tab, blocks, op);
    return tsc_after_launch(what);
  });
}


// ---- Adam / AdamW: slots param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq -------

struct adam_op {
  double b1, b2, eps, wd, lr, step_size, bc2_sqrt;
  bool amsgrad, maximize, decoupled;
  // As the CPU's ADAM_LOOP body (double arithmetic, stores in T).
  template <typename T> __device__ __forceinline__ void operator()(T (&x)[MT_SLOTS], int) const {
    double gj = maximize ? -(double)x[1] : (double)x[1], pj = (double)x[0];
    if (wd != 0) {
      if (decoupled) pj *= 1 - lr * wd;
      else gj += wd * pj;
    }
    const double mj = (double)x[2] * b1 + (1 - b1) * gj, vj = (double)x[3] * b2 + (1 - b2) * gj * gj;
    x[2] = (T)mj, x[3] = (T)vj;
    double vv = vj;
    if (amsgrad) {
      vv = (double)x[4] > vj ? (double)x[4] : vj;
      x[4] = (T)vv;
    }
    x[0] = (T)(pj - step_size * mj / (sqrt(vv) / bc2_sqrt + eps));
  }
};

// A capturable step: the bias corrections from the entry's count on the
// device (the count after this step: step_increment ran before), in double
// as the host computes them for a count it holds, so both give equal weights.
__device__ adam_op entry_op(const adam_op &op, const mt_entry &e) {
  if (!e.step) return op;
  adam_op o = op;
  const double step = (double)*e.step;
  o.step_size = op.lr / (1 - pow(op.b1, step)), o.bc2_sqrt = sqrt(1 - pow(op.b2, step));
  return o;
}

// Adds 1 to each of n step counts (a capturable step's torch._foreach_add_(steps, 1)).
#define STEP_LIST 480 // counts per launch: 480 pointers fit the 4 KiB of kernel arguments
struct step_list {
  float *s[STEP_LIST];
  int n;
};

__global__ void step_increment(const step_list l) {
  for (int i = threadIdx.x; i < l.n; i += blockDim.x) l.s[i][0] += 1.0f;
}

// The steps of c's parameters (the last of each one's c->i[1] tensors) counted on:
// one launch per STEP_LIST of them, ordered before the update that reads them.
static ts_status increment_steps(const ts_call *c) {
  const int per = (int)c->i[1];
  step_list l;
  l.n = 0;
  for (int k = 0; k + per <= c->nin; k += per) {
    l.s[l.n++] = (float *)ts_data(c->in[k + per - 1]);
    if (l.n == STEP_LIST || k + 2 * per > c->nin) {
      step_increment<<<1, TSC_THREADS, 0, tsc_stream()>>>(l);
      ts_status st = tsc_after_launch("adam_step (the step counts)");
      if (st) return st;
      l.n = 0;
    }
  }
  return TS_OK;
}

static ts_status k_adam_step(const ts_call *c) {
  adam_op h;
  double lr = c->f[0], wd;
  memcpy(&wd, &c->i[3], sizeof wd);
  h.lr = lr, h.b1 = c->f[1], h.b2 = c->f[2], h.eps = c->f[3], h.wd = wd;
  h.amsgrad = c->i[0] & 1, h.maximize = c->i[0] & 2, h.decoupled = c->i[0] & 4;
  const bool capturable = c->i[0] & 8;
  const double step = (double)c->i[2];
  h.step_size = lr / (1 - pow(h.b1, step)), h.bc2_sqrt = sqrt(1 - pow(h.b2, step));
  // capturable: the last tensor of each parameter is its step count, read per entry (slot -1)
  const int slots[] = {0, 1, 2, 3, h.amsgrad ? 4 : -1, -1};
  if (capturable) {
    ts_status st = increment_steps(c);
    if (st) return st;
  }
  return mt_apply(c, "adam_step", slots, 0, h);
}

// ---- SGD: slots param, grad, momentum_buffer; flag: the buffer is fresh ----------

struct sgd_op {
  double lr, mom, damp, wd;
  bool has_buf, nesterov, maximize;
  // As the CPU's SGD_LOOP body.
  template <typename T> __device__ __forceinline__ void operator()(T (&x)[MT_SLOTS], int fresh) const {
    const double pj = (double)x[0];
    double d = maximize ? -(double)x[1] : (double)x[1];
    if (wd != 0) d += wd * pj;
    if (has_buf) {
      const T bs = (T)(fresh ? d : (double)x[2] * mom + (1 - damp) * d);
      x[2] = bs;
      d = nesterov ? d + mom * (double)bs : (double)bs;
    }
    x[0] = (T)(pj - lr * d);
  }
};

static ts_status k_sgd_step(const ts_call *c) {
  sgd_op h;
  h.lr = c->f[0], h.mom = c->f[1], h.damp = c->f[2], h.wd = c->f[3];
  h.has_buf = c->i[1] > 2, h.nesterov = c->i[0] & 1, h.maximize = c->i[0] & 2;
  static const int slots[] = {0, 1, 2};
  return mt_apply(c, "sgd_step", slots, c->i[2], h);
}

// ---- RMSprop: slots param, grad, square_avg, momentum_buffer, grad_avg -----------

struct rmsprop_op {
  double lr, alpha, eps, wd, mom;
  bool has_buf, centered, maximize;
  // As the CPU's RMSPROP_LOOP body (lerp as torch.lerp).
  template <typename T> __device__ __forceinline__ void operator()(T (&x)[MT_SLOTS], int) const {
    const double pj = (double)x[0];
    double d = maximize ? -(double)x[1] : (double)x[1];
    if (wd != 0) d += wd * pj;
    const T sqs = (T)((double)x[2] * alpha + (1 - alpha) * (d * d));
    x[2] = sqs;
    double avg;
    if (centered) {
      const double a = (double)x[4], w = 1 - alpha;
      const T gas = (T)(fabs(w) < 0.5 ? a + w * (d - a) : d - (d - a) * (1 - w));
      x[4] = gas;
      avg = sqrt((double)sqs - (double)gas * (double)gas);
    } else {
      avg = sqrt((double)sqs);
    }
    avg += eps;
    if (has_buf) {
      const T bs = (T)((double)x[3] * mom + d / avg);
      x[3] = bs;
      x[0] = (T)(pj - lr * (double)bs);
    } else {
      x[0] = (T)(pj - lr * (d / avg));
    }
  }
};

static ts_status k_rmsprop_step(const ts_call *c) {
  rmsprop_op h;
  h.lr = c->f[0], h.alpha = c->f[1], h.eps = c->f[2], h.wd = c->f[3];
  memcpy(&h.mom, &c->i[2], sizeof h.mom);
  h.has_buf = h.mom > 0, h.centered = c->i[0] & 1, h.maximize = c->i[0] & 2;
  // the op's layout packs the optional tensors; the functor wants fixed slots
  int slots[MT_SLOTS] = {0, 1, 2, 3, 4};
  if (h.centered && !h.has_buf) slots[3] = 4;
  return mt_apply(c, "rmsprop_step", slots, 0, h);
}

// ---- clip_grad_norm_: every gradient's norm at once, then the scale -----------------
// Launch 1, a table at a time: each block's chunk reduced to one partial (the
// sum of squares, or the largest |g|) at its block's index over all tables.
// Launch 2, one block: the partials in a fixed order give the total norm and
// the coefficient, in the dtype's arithmetic as the CPU's. Launch 3, a table
// at a time: every gradient times the coefficient, read on the device.

__device__ __forceinline__ double nan_max(double a, double b) { return a != a ? a : (b != b || b > a) ? b : a; }
__device__ __forceinline__ double norm_add(double acc, double v, bool inf) { return inf ? nan_max(acc, v) : acc + v; }

// s[0] <- s[0..blockDim.x) combined in a fixed tree order
__device__ void block_combine(double *s, bool inf) {
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] = norm_add(s[threadIdx.x], s[threadIdx.x + w], inf);
    __syncthreads();
  }
}

template <typename T> __device__ double chunk_norm(const T *g, int64_t lo, int64_t hi, bool inf) {
  double acc = 0;
  for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
    const double a = fabs((double)g[j]);
    acc = norm_add(acc, inf ? a : a * a, inf);
  }
  return acc;
}

__global__ void __launch_bounds__(TSC_THREADS)
    clip_partials(const mt_table tab, int64_t blocks, int64_t before, bool inf, double *partial) {
  __shared__ double s[TSC_THREADS];
  for (int64_t vb = blockIdx.x; vb < blocks; vb += gridDim.x) {
    int64_t lo, hi;
    const mt_entry &e = mt_find(tab, vb, &lo, &hi);
    s[threadIdx.x] = e.f64 ? chunk_norm((const double *)e.t[0], lo, hi, inf) : chunk_norm((const float *)e.t[0], lo, hi, inf);
    block_combine(s, inf);
    if (threadIdx.x == 0) partial[before + vb] = s[0];
    __syncthreads();
  }
}

template <typename T>
__global__ void __launch_bounds__(TSC_THREADS)
    clip_total(const double *partial, int64_t np, bool inf, double max_norm, T *total, double *coef) {
  __shared__ double s[TSC_THREADS];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < np; i += blockDim.x) acc = norm_add(acc, partial[i], inf);
  s[threadIdx.x] = acc;
  block_combine(s, inf);
  if (threadIdx.x == 0) {
    const T tot = (T)(inf ? s[0] : sqrt(s[0])), d = tot + (T)1e-6;
    T c = (T)max_norm / d;
    if (c > (T)1) c = (T)1;
    *total = tot, *coef = (double)c;
  }
}

struct scale_op {
  const double *coef;
  template <typename T> __device__ __forceinline__ void operator()(T (&x)[MT_SLOTS], int) const { x[0] = x[0] * (T)*coef; }
};

static ts_status k_clip_grad_norm(const ts_call *c) {
  const bool inf = c->i[0] == 0;
  int64_t np = 0; // blocks over every table
  for (int k = 0; k < c->nin; k++) np += (ts_numel(c->in[k]) + MT_CHUNK - 1) / MT_CHUNK;
  tsc_temp scratch;
  ts_status st = scratch.alloc(sizeof(double) * (size_t)(np + 1));
  if (st) return st;
  double *coef = (double *)scratch.p, *partial = coef + 1;
  static const int slot[] = {0};
  st = mt_tables(c, slot, 0, [&](const mt_table &tab, int64_t blocks, int64_t before) {
    clip_partials<<<mt_grid(blocks), TSC_THREADS, 0, tsc_stream()>>>(tab, blocks, before, inf, partial);
    return tsc_after_launch("clip_grad_norm");
  });
  if (st) return st;
  ts_tensor *out = c->out[0];
  if (out->dtype == TS_FLOAT64)
    clip_total<double><<<1, TSC_THREADS, 0, tsc_stream()>>>(partial, np, inf, c->f[0], tsc_ptr<double>(out), coef);
  else clip_total<float><<<1, TSC_THREADS, 0, tsc_stream()>>>(partial, np, inf, c->f[0], tsc_ptr<float>(out), coef);
  TSC_LAUNCH_CHECK("clip_grad_norm");
  return mt_apply(c, "clip_grad_norm", slot, 0, scale_op{coef});
}

// ---- _foreach_zero_: every tensor of the list set to 0, a launch per table ----

struct zero_op {
  template <typename T> __device__ __forceinline__ void operator()(T (&x)[MT_SLOTS], int) const { x[0] = T(0); }
};

static ts_status k_foreach_zero(const ts_call *c) {
  static const int slot[] = {0};
  return mt_apply(c, "foreach_zero", slot, 0, zero_op{});
}

extern "C" void tsc_register_optim(ts_kernel *k) {
  k[TS_OP_CLIP_GRAD_NORM] = k_clip_grad_norm;
  k[TS_OP_FOREACH_ZERO] = k_foreach_zero;
  k[TS_OP_ADAM_STEP] = k_adam_step;
  k[TS_OP_SGD_STEP] = k_sgd_step;
  k[TS_OP_RMSPROP_STEP] = k_rmsprop_step;
}
