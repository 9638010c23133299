// CUDA reductions over one dim (contracts in src/ops/ops_reduce.def; the CPU
// engine, src/cpu/reduce.c, is the reference): SUM (and mean), PROD, MAX and
// MIN (with indices), VAR (and std), NORM, ALL, ANY, LOGSUMEXP. Scans and
// softmax live in scan.cu and softmax.cu; this file registers them all.
//
// One engine serves every op: an op is a small struct (identity, per-element
// add, merge of two partial states, shuffle, store), and two kernels map
// threads onto the lines of tsr_lines:
//   row:    a group of G threads (1..512, a power of two) per line, reading
//           along the reduced dim (128-bit loads when it is contiguous),
//           combined by warp shuffles and, past one warp, shared memory;
//   column: threads over neighbouring lines (coalesced when lines are
//           adjacent in memory, e.g. reducing dim 0 of a row-major matrix),
//           BY threads per line splitting the reduced dim, combined in
//           shared memory.
// When there are too few lines to fill the GPU and the reduced dim is long,
// it is split across blocks (grid.y); the partial states go to a temporary
// and a finish kernel merges each line's partials in order. Nothing here
// synchronises the host.
//
// Accuracy: float32, float16 and bfloat16 sums, norms and logsumexp
// accumulate in float, float64 in double, integers in int64 (wrapping); each
// thread keeps 4 independent accumulators and threads combine in trees, so no
// float chain is longer than a few hundred adds. Products and variances
// accumulate in double for every float dtype, as the CPU (a float product
// overflows where the double one does not; variance cancels).
#include "reduce.cuh"

#include <limits>
#include <type_traits>

namespace {

constexpr int NSLOT = 4; // independent accumulators per thread
constexpr int64_t ONE_PASS_ROWS = 4096; // column reductions this short run in one launch (128 rows a thread)
constexpr int64_t MAX_CHUNK = (int64_t)1 << 30; // rows of one split at most: the kernels count them in int

template <typename T> using fop_t = std::conditional_t<std::is_same<T, double>::value, double, float>;

// ---- ops ---------------------------------------------------------------------
// Each op: S (mergeable state), A (a thread's accumulator), ident(), init()
// (an empty A), add(A, x, row), finish(A) -> S, merge(S, S later or parallel),
// shfl(S, offset, width), store(S, out0, off0, out1, off1).

__device__ __forceinline__ int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
__device__ __forceinline__ int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

template <typename T> struct SumOp {
  static constexpr bool ints = !tsc_is_float<T>::value;
  using F = std::conditional_t<ints, int64_t, fop_t<T>>;
  struct S { F v; };
  using A = S;
  ts_dtype odt;
  bool mean;
  int64_t R;
  __device__ S ident() const { return {F(0)}; }
  __device__ A init() const { return {F(0)}; }
  __device__ void add(A &a, T x, int64_t) const {
    if constexpr (ints) a.v = wrap_add(a.v, (int64_t)x);
    else a.v += tsc_cast<F>(x);
  }
  __device__ S finish(const A &a) const { return a; }
  __device__ void merge(S &a, const S &b) const {
    if constexpr (ints) a.v = wrap_add(a.v, b.v);
    else a.v += b.v;
  }
  __device__ S shfl(const S &s, int o, int w) const { return {tsr_shfl_down(s.v, o, w)}; }
  __device__ void store(const S &s, char *o0, int64_t off0, int64_t *, int64_t) const {
    char *p = o0 + off0 * tsr_esize(odt);
    if constexpr (ints) tsr_store_i64(p, odt, s.v); // the CPU ignores the mean flag for integers
    else tsr_store_f64(p, odt, mean ? (double)s.v / (double)R : (double)s.v);
  }
};

template <typename T> struct ProdOp {
  static constexpr bool ints = !tsc_is_float<T>::value;
  using F = std::conditional_t<ints, int64_t, double>;
  struct S { F v; };
  using A = S;
  ts_dtype odt;
  __device__ S ident() const { return {F(1)}; }
  __device__ A init() const { return {F(1)}; }
  __device__ void add(A &a, T x, int64_t) const {
    if constexpr (ints) a.v = wrap_mul(a.v, (int64_t)x);
    else a.v *= tsc_cast<double>(x);
  }
  __device__ S finish(const A &a) const { return a; }
  __device__ void merge(S &a, const S &b) const {
    if constexpr (ints) a.v = wrap_mul(a.v, b.v);
    else a.v *= b.v;
  }
  __device__ S shfl(const S &s, int o, int w) const { return {tsr_shfl_down(s.v, o, w)}; }
  __device__ void store(const S &s, char *o0, int64_t off0, int64_t *, int64_t) const {
    char *p = o0 + off0 * tsr_esize(odt);
    if constexpr (ints) tsr_store_i64(p, odt, s.v);
    else tsr_store_f64(p, odt, s.v);
  }
};

// MAX (mx) and MIN: the value and its row; a NaN beats every number, ties
// (NaN with NaN too) go to the smaller row, which is what the CPU's in-order
// "first stays" gives, whatever order the partial states merge in. Integers
// up to 32 bits compare as int: int64 values doubled the registers of the
// four accumulators, and the row kernel of 8-bit and bool inputs spilled.
template <typename T> struct ExtOp {
  static constexpr bool ints = !tsc_is_float<T>::value;
  using F = std::conditional_t<ints, std::conditional_t<(sizeof(T) < 8), int, int64_t>, tsc_opmath_t<T>>;
  struct S { F v; int64_t i; };
  using A = S;
  ts_dtype odt;
  bool mx;
  __device__ S ident() const {
    if constexpr (ints) return {mx ? std::numeric_limits<F>::min() : std::numeric_limits<F>::max(), INT64_MAX};
    else return {mx ? -F(INFINITY) : F(INFINITY), INT64_MAX};
  }
  __device__ A init() const { return ident(); }
  __device__ bool better(const S &a, F bv, int64_t bi) const { // does (bv, bi) replace a?
    if constexpr (!ints) {
      bool an = a.v != a.v, bn = bv != bv;
      if (an || bn) return bn && (!an || bi < a.i);
    }
    if (mx ? bv > a.v : bv < a.v) return true;
    return bv == a.v && bi < a.i;
  }
  __device__ void add(A &a, T x, int64_t r) const {
    F v;
    if constexpr (ints) v = (F)x;
    else v = tsc_cast<F>(x);
    if (better(a, v, r)) a.v = v, a.i = r;
  }
  __device__ S finish(const A &a) const { return a; }
  __device__ void merge(S &a, const S &b) const {
    if (better(a, b.v, b.i)) a = b;
  }
  __device__ S shfl(const S &s, int o, int w) const { return {tsr_shfl_down(s.v, o, w), tsr_shfl_down(s.i, o, w)}; }
  __device__ void store(const S &s, char *o0, int64_t off0, int64_t *o1, int64_t off1) const {
    char *p = o0 + off0 * tsr_esize(odt);
    if constexpr (ints) tsr_store_i64(p, odt, s.v);
    else tsr_store_f64(p, odt, (double)s.v);
    if (o1) o1[off1] = s.i;
  }
};

// VAR in double for every dtype. A thread sums x - k and (x - k)^2 with k its
// first element (no division per element; the shift bounds the cancellation
// by the thread's own count), turns that into (n, mean, M2) once, and states
// merge by Chan's formula, as the CPU's blocks do.
template <typename T> struct VarOp {
  struct S { double n, mean, m2; };
  struct A { double k, s1, s2, n; };
  ts_dtype odt;
  double correction;
  bool take_sqrt;
  __device__ S ident() const { return {0, 0, 0}; }
  __device__ A init() const { return {0, 0, 0, 0}; }
  __device__ void add(A &a, T x, int64_t) const {
    double v = tsc_cast<double>(x);
    if (a.n == 0) a.k = v;
    double d = v - a.k;
    a.s1 += d;
    a.s2 += d * d;
    a.n += 1;
  }
  __device__ S finish(const A &a) const {
    if (a.n == 0) return ident();
    double mean = a.s1 / a.n, m2 = a.s2 - a.s1 * mean;
    return {a.n, a.k + mean, m2 < 0 ? 0 : m2};
  }
  __device__ void merge(S &a, const S &b) const {
    if (b.n == 0) return;
    if (a.n == 0) {
      a = b;
      return;
    }
    double n = a.n + b.n, delta = b.mean - a.mean;
    a.mean += delta * (b.n / n);
    a.m2 += b.m2 + delta * delta * (a.n * b.n / n);
    a.n = n;
  }
  __device__ S shfl(const S &s, int o, int w) const {
    return {tsr_shfl_down(s.n, o, w), tsr_shfl_down(s.mean, o, w), tsr_shfl_down(s.m2, o, w)};
  }
  __device__ void store(const S &s, char *o0, int64_t off0, int64_t *, int64_t) const {
    double dof = s.n - correction;
    double v = s.m2 / (dof > 0 ? dof : 0); // as torch: inf or NaN when the correction leaves no freedom
    if (take_sqrt) v = sqrt(v);
    tsr_store_f64(o0 + off0 * tsr_esize(odt), odt, v);
  }
};

enum { P_INF, P_NEGINF, P_ZERO, P_ONE, P_TWO, P_GEN };

// NORM: P2 is the 2-norm's fast path; other p choose at run time.
template <typename T, bool P2> struct NormOp {
  using F = tsc_opmath_t<T>;
  struct S { F a; };
  using A = S;
  ts_dtype odt;
  int pk;
  F pf;
  double p;
  __device__ S ident() const { return {pk == P_NEGINF ? F(INFINITY) : F(0)}; }
  __device__ A init() const { return ident(); }
  __device__ void add(A &s, T x_, int64_t) const {
    F x = tsc_cast<F>(x_);
    if constexpr (P2) {
      s.a += x * x;
    } else {
      F ax = fabs(x);
      switch (pk) {
      case P_INF: if (tsr_beats_max(ax, s.a)) s.a = ax; break;
      case P_NEGINF: if (ax < s.a || (ax != ax && s.a == s.a)) s.a = ax; break;
      case P_ZERO: s.a += x != F(0) ? F(1) : F(0); break;
      case P_ONE: s.a += ax; break;
      case P_TWO: s.a += x * x; break;
      default: s.a += pow(ax, pf); break;
      }
    }
  }
  __device__ S finish(const A &a) const { return a; }
  __device__ void merge(S &s, const S &t) const {
    if (!P2 && pk == P_INF) {
      if (tsr_beats_max(t.a, s.a)) s.a = t.a;
    } else if (!P2 && pk == P_NEGINF) {
      if (t.a < s.a || (t.a != t.a && s.a == s.a)) s.a = t.a;
    } else {
      s.a += t.a;
    }
  }
  __device__ S shfl(const S &s, int o, int w) const { return {tsr_shfl_down(s.a, o, w)}; }
  __device__ void store(const S &s, char *o0, int64_t off0, int64_t *, int64_t) const {
    double v = (double)s.a;
    if (pk == P_TWO) v = sqrt(v);
    else if (pk == P_GEN) v = pow(v, 1 / p);
    tsr_store_f64(o0 + off0 * tsr_esize(odt), odt, v);
  }
};

template <typename T> __device__ __forceinline__ bool nonzero(T x) { return x != T(0); }
__device__ __forceinline__ bool nonzero(__half x) { return __half2float(x) != 0.0f; }
__device__ __forceinline__ bool nonzero(__nv_bfloat16 x) { return __bfloat162float(x) != 0.0f; }

// ALL (all) and ANY; a NaN is nonzero.
template <typename T> struct AllAnyOp {
  struct S { int v; };
  using A = S;
  ts_dtype odt;
  bool all;
  __device__ S ident() const { return {all ? 1 : 0}; }
  __device__ A init() const { return ident(); }
  __device__ void add(A &a, T x, int64_t) const {
    int nz = nonzero(x);
    a.v = all ? (a.v & nz) : (a.v | nz);
  }
  __device__ S finish(const A &a) const { return a; }
  __device__ void merge(S &a, const S &b) const { a.v = all ? (a.v & b.v) : (a.v | b.v); }
  __device__ S shfl(const S &s, int o, int w) const { return {tsr_shfl_down(s.v, o, w)}; }
  __device__ void store(const S &s, char *o0, int64_t off0, int64_t *, int64_t) const {
    tsr_store_i64(o0 + off0 * tsr_esize(odt), odt, s.v != 0);
  }
};

// LOGSUMEXP: exponentials in float unless the input is float64, as the CPU.
template <typename T> struct LseOp {
  using F = fop_t<T>;
  struct S { F m, s; };
  using A = S;
  ts_dtype odt;
  __device__ S ident() const { return {-F(INFINITY), F(0)}; }
  __device__ A init() const { return ident(); }
  __device__ void add(A &a, T x, int64_t) const {
    F v;
    if constexpr (tsc_is_float<T>::value) v = tsc_cast<F>(x);
    else v = (F)(double)x; // integers staged through double, as the CPU
    tsr_lse_add(a.m, a.s, v);
  }
  __device__ S finish(const A &a) const { return a; }
  __device__ void merge(S &a, const S &b) const { tsr_lse_merge(a.m, a.s, b.m, b.s); }
  __device__ S shfl(const S &s, int o, int w) const { return {tsr_shfl_down(s.m, o, w), tsr_shfl_down(s.s, o, w)}; }
  __device__ void store(const S &s, char *o0, int64_t off0, int64_t *, int64_t) const {
    tsr_store_f64(o0 + off0 * tsr_esize(odt), odt, log((double)s.s) + (double)tsr_sh(s.m));
  }
};

// ---- the engine ----------------------------------------------------------------

// Merges the 32-lane (or narrower, w lanes) segments of a warp: lane 0 of each
// segment ends with the segment's state, merged lower lanes first.
template <class Op, class S>
__device__ __forceinline__ S warp_reduce(const Op &op, S s, int w) {
  int lane = threadIdx.x & 31;
  for (int o = w >> 1; o > 0; o >>= 1) {
    S t = op.shfl(s, o, w);
    if ((lane & (w - 1)) + o < w) op.merge(s, t);
  }
  return s;
}

// Merges each group of G consecutive threads (G a power of two); thread 0 of
// the group gets the result. Every thread of the block must call it (it may
// synchronise); sm holds one state per warp.
template <class Op, class S>
__device__ __forceinline__ S group_reduce(const Op &op, S s, int G, S *sm) {
  s = warp_reduce(op, s, G < 32 ? G : 32);
  if (G > 32) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = G >> 5;
    if (lane == 0) sm[warp] = s;
    __syncthreads();
    if ((int)(threadIdx.x % G) < 32) { // the group's first warp: `warp` is the group's first
      s = lane < nw ? sm[warp + lane] : op.ident();
      s = warp_reduce(op, s, nw);
    }
    __syncthreads(); // sm is reused by the next line
  }
  return s;
}

// One thread's share of rows [r0, r1) of a line starting at p: rows r0 + k,
// r0 + k + G, ... (k the thread's rank in its group); with a contiguous dim,
// 128-bit vectors k, k + G, ... after an unaligned head, then a tail.
template <class Op, typename T>
__device__ __forceinline__ typename Op::S thread_rows(const Op &op, const T *__restrict__ p, int64_t rs, int64_t r0,
                                                       int64_t r1, int k, int G) {
  typename Op::A a[NSLOT];
#pragma unroll
  for (int j = 0; j < NSLOT; j++) a[j] = op.init();
  if (rs == 1) {
    // counts in int: a chunk has at most MAX_CHUNK rows (run()), and `#pragma
    // unroll 2` over an int64 count divided by a 64-bit routine call for the
    // trip count, which made kernels spill
    constexpr int V = tsr_vw<T>::value;
    const T *q = p + r0;
    int n = (int)(r1 - r0), head = (int)tsr_head(q);
    if (head > n) head = n;
    for (int j = k; j < head; j += G) op.add(a[0], q[j], r0 + j); // head < V <= 16 rows
    int nv = (n - head) / V;
    const tsr_vec<T, V> *vq = (const tsr_vec<T, V> *)(q + head);
#pragma unroll 2
    for (int c = k; c < nv; c += G) {
      tsr_vec<T, V> w = vq[c];
      int64_t rb = r0 + head + (int64_t)c * V;
#pragma unroll
      for (int v = 0; v < V; v++) op.add(a[v % NSLOT], w.v[v], rb + v);
    }
    for (int j = head + nv * V + k; j < n; j += G) op.add(a[1 % NSLOT], q[j], r0 + j);
  } else {
    int64_t r = r0 + k, step = G;
    for (; r + 3 * step < r1; r += 4 * step) {
      T x0 = p[r * rs], x1 = p[(r + step) * rs], x2 = p[(r + 2 * step) * rs], x3 = p[(r + 3 * step) * rs];
      op.add(a[0], x0, r);
      op.add(a[1], x1, r + step);
      op.add(a[2], x2, r + 2 * step);
      op.add(a[3], x3, r + 3 * step);
    }
    for (; r < r1; r += step) op.add(a[0], p[r * rs], r);
  }
  typename Op::S s = op.finish(a[0]);
#pragma unroll
  for (int j = 1; j < NSLOT; j++) op.merge(s, op.finish(a[j]));
  return s;
}

// Stores line's state: to its partial slot (part[line * nsplit + y]) when the
// reduced dim is split, else to the outputs, whose offsets are computed here:
// kept live across the line's loop from its start, they made kernels spill.
template <class Op>
__device__ __forceinline__ void store_line(const Op &op, const tsr_lines &g, int64_t line, const typename Op::S &s,
                                           typename Op::S *part, char *out0, int64_t *out1) {
  if (part) {
    part[line * gridDim.y + blockIdx.y] = s;
    return;
  }
  int64_t off[3];
  tsr_line_offsets<3>(g, line, off);
  op.store(s, out0, off[1], out1, off[2]);
}

// Row kernels: groups of G threads per line, blockDim.x / G lines per block;
// grid.y splits the reduced dim in chunks (partials to part[line * nsplit + y]).
// sm: one state per warp.
template <class Op, typename T>
__device__ __forceinline__ void row_lines(const Op &op, const tsr_lines &g, const T *__restrict__ x, char *out0,
                                          int64_t *out1, int G, int64_t chunk, typename Op::S *part,
                                          typename Op::S *sm) {
  using S = typename Op::S;
  int k = threadIdx.x % G, lpb = blockDim.x / G;
  int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < g.R ? r0 + chunk : g.R;
  // blocks stride over their first lines (no block count: it divides in 64 bits, a routine call)
  for (int64_t first = (int64_t)blockIdx.x * lpb; first < g.nlines; first += (int64_t)gridDim.x * lpb) {
    int64_t line = first + threadIdx.x / G;
    S s = op.ident();
    if (line < g.nlines) {
      int64_t off[1];
      tsr_line_offsets<1>(g, line, off);
      s = thread_rows(op, x + off[0], g.rs, r0, r1, k, G);
    }
    s = group_reduce(op, s, G, sm);
    if (k == 0 && line < g.nlines) store_line(op, g, line, s, part, out0, out1);
  }
}

// The blocks per SM the row kernel keeps are given: left out, ptxas picks the
// register count of an occupancy step itself and spills to reach it (8 to 52
// bytes in some 30 instantiations). Two blocks of 512 threads (64 registers)
// for most ops; the ops of row_wide need more and keep one, as they had.
template <class Op> struct row_wide : std::false_type {};
template <typename T> struct row_wide<VarOp<T>> : std::true_type {};  // four double accumulators
template <> struct row_wide<NormOp<double, false>> : std::true_type {}; // pow and the run-time p in double
template <> struct row_wide<LseOp<double>> : std::true_type {};         // exp and log in double
template <typename T> struct row_wide<ProdOp<T>> : std::bool_constant<(sizeof(T) == 1)> {}; // 16 64-bit products a vector

template <class Op, typename T>
__global__ void __launch_bounds__(512, 2) reduce_row_k(Op op, tsr_lines g, const T *__restrict__ x, char *out0,
                                                       int64_t *out1, int G, int64_t chunk, typename Op::S *part) {
  __shared__ typename Op::S sm[512 / 32];
  row_lines(op, g, x, out0, out1, G, chunk, part, sm);
}

template <class Op, typename T>
__global__ void __launch_bounds__(512, 1) reduce_row_wide_k(Op op, tsr_lines g, const T *__restrict__ x, char *out0,
                                                            int64_t *out1, int G, int64_t chunk, typename Op::S *part) {
  __shared__ typename Op::S sm[512 / 32];
  row_lines(op, g, x, out0, out1, G, chunk, part, sm);
}

// Column kernel: BX neighbouring lines per block (threadIdx.x % BX), BY
// threads per line (threadIdx.x / BX) taking rows ty, ty + BY, ... of the
// block's chunk; BX and BY are powers of two.
template <class Op, typename T>
__device__ __forceinline__ void col_lines(const Op &op, const tsr_lines &g, const T *__restrict__ x, char *out0,
                                          int64_t *out1, int BX, int64_t chunk, typename Op::S *part,
                                          typename Op::S *sm) {
  using S = typename Op::S;
  using A = typename Op::A;
  int tx = threadIdx.x % BX, ty = threadIdx.x / BX, BY = blockDim.x / BX;
  int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < g.R ? r0 + chunk : g.R;
  int64_t rs = g.rs;
  for (int64_t first = (int64_t)blockIdx.x * BX; first < g.nlines; first += (int64_t)gridDim.x * BX) {
    int64_t line = first + tx;
    S s = op.ident();
    if (line < g.nlines) {
      int64_t off[1];
      tsr_line_offsets<1>(g, line, off);
      A a[NSLOT];
#pragma unroll
      for (int j = 0; j < NSLOT; j++) a[j] = op.init();
      // rows counted in int from the chunk's first (at most MAX_CHUNK, run()),
      // read through a pointer that steps: fewer live 64-bit values
      const int n = (int)(r1 - r0);
      const int64_t step = BY * rs;
      const T *p = x + off[0] + (r0 + ty) * rs;
      int r = ty;
      for (; r + 3 * BY < n; r += 4 * BY, p += 4 * step) {
        T x0 = p[0], x1 = p[step], x2 = p[2 * step], x3 = p[3 * step];
        op.add(a[0], x0, r0 + r);
        op.add(a[1], x1, r0 + r + BY);
        op.add(a[2], x2, r0 + r + 2 * BY);
        op.add(a[3], x3, r0 + r + 3 * BY);
      }
      for (; r < n; r += BY, p += step) op.add(a[0], *p, r0 + r);
      s = op.finish(a[0]);
#pragma unroll
      for (int j = 1; j < NSLOT; j++) op.merge(s, op.finish(a[j]));
    }
    if (BY > 1) {
      sm[threadIdx.x] = s;
      __syncthreads();
      for (int h = BY >> 1; h > 0; h >>= 1) {
        if (ty < h) {
          op.merge(s, sm[threadIdx.x + h * BX]);
          sm[threadIdx.x] = s;
        }
        __syncthreads();
      }
    }
    if (ty == 0 && line < g.nlines) store_line(op, g, line, s, part, out0, out1);
  }
}

// As the row kernels, the column kernels give their blocks per SM (left to
// ptxas, they spilled 16 to 48 bytes to reach an occupancy step): six of 256
// threads (40 registers) for sums, products, all/any and float logsumexp; the
// ops of col_wide keep three.
template <class Op> struct col_wide : std::false_type {};
template <typename T> struct col_wide<ExtOp<T>> : std::true_type {};     // value and row, four of them
template <typename T, bool P2> struct col_wide<NormOp<T, P2>> : std::true_type {};
template <typename T> struct col_wide<VarOp<T>> : std::true_type {};
template <> struct col_wide<LseOp<double>> : std::true_type {};

template <class Op, typename T>
__global__ void __launch_bounds__(256, 6) reduce_col_k(Op op, tsr_lines g, const T *__restrict__ x, char *out0,
                                                       int64_t *out1, int BX, int64_t chunk, typename Op::S *part) {
  __shared__ typename Op::S sm[256];
  col_lines(op, g, x, out0, out1, BX, chunk, part, sm);
}

template <class Op, typename T>
__global__ void __launch_bounds__(256, 3) reduce_col_wide_k(Op op, tsr_lines g, const T *__restrict__ x, char *out0,
                                                            int64_t *out1, int BX, int64_t chunk, typename Op::S *part) {
  __shared__ typename Op::S sm[256];
  col_lines(op, g, x, out0, out1, BX, chunk, part, sm);
}

// Merges each line's nsplit partial states in order and stores the result;
// G (<= 32) threads per line.
template <class Op>
__global__ void __launch_bounds__(256) reduce_finish_k(Op op, tsr_lines g, const typename Op::S *part, int nsplit,
                                                       char *out0, int64_t *out1, int G) {
  using S = typename Op::S;
  int k = threadIdx.x % G, lpb = blockDim.x / G;
  for (int64_t first = (int64_t)blockIdx.x * lpb; first < g.nlines; first += (int64_t)gridDim.x * lpb) {
    int64_t line = first + threadIdx.x / G;
    S s = op.ident();
    if (line < g.nlines)
      for (int j = k; j < nsplit; j += G) op.merge(s, part[line * nsplit + j]);
    s = warp_reduce(op, s, G);
    if (k == 0 && line < g.nlines) {
      int64_t off[3];
      tsr_line_offsets<3>(g, line, off);
      op.store(s, out0, off[1], out1, off[2]);
    }
  }
}

static unsigned grid_x(int64_t nblocks) {
  const int64_t cap = 1 << 30; // grid-stride loops cover the rest
  return (unsigned)(nblocks < 1 ? 1 : nblocks > cap ? cap : nblocks);
}

// The launcher: picks row or column, the group shape and the split, launches.
template <typename T, class Op> ts_status run(const ts_call *c, const Op &op, const char *name) {
  using S = typename Op::S;
  tsr_lines g;
  tsr_lines_init(&g, c);
  if (g.nlines == 0) return TS_OK;
  const T *x = tsc_ptr<T>(c->in[0]);
  char *out0 = (char *)ts_data(c->out[0]);
  int64_t *out1 = c->out[1] ? tsc_ptr<int64_t>(c->out[1]) : nullptr;
  cudaStream_t stream = tsc_stream();
  int64_t R = g.R, ls = tsr_line_stride(&g);
  int sms = tsc_sm_count();
  // threads along lines when neighbouring lines are closer in memory than rows
  bool col = g.nlines > 1 && R > 1 && ls < g.rs;
  int G = 1, BX = 1, threads;
  int64_t nlb, target, per_split; // per_split: rows one split must keep to be worth it
  if (!col) {
    while (G < 512 && (int64_t)G * 16 < R) G <<= 1; // ~16 rows per thread
    threads = G > 256 ? G : 256;
    nlb = tsr_cdiv(g.nlines, threads / G);
    target = (int64_t)sms * (2048 / threads);
    per_split = (int64_t)G * 32;
  } else {
    int lines2 = tsr_pow2_at_least(g.nlines, 256), bxmin = lines2 < 32 ? lines2 : 32;
    int BY = 1;
    while (BY < 256 / bxmin && (int64_t)BY * 16 < R) BY <<= 1;
    BX = 256 / BY < lines2 ? 256 / BY : lines2;
    threads = BX * BY;
    nlb = tsr_cdiv(g.nlines, BX);
    target = (int64_t)sms * 8;
    per_split = (int64_t)BY * 32;
  }
  // a column reduction of a short dim (a bias gradient: the rows of a batch) in
  // one launch: narrower blocks (8 lines, 32 threads each, 32-byte rows per
  // line group) give 4x the blocks instead of splitting the rows and merging
  // the partial states in a second kernel
  if (col && nlb < target && R >= 2 * per_split && R <= ONE_PASS_ROWS && BX > 8) {
    BX = 8;
    threads = BX * (256 / BX);
    nlb = tsr_cdiv(g.nlines, BX);
    per_split = R; // no split
  }
  int64_t nsplit = 1;
  if (nlb < target && R >= 2 * per_split) {
    nsplit = tsr_cdiv(target, nlb);
    if (nsplit > R / per_split) nsplit = R / per_split;
    if (nsplit > 65535) nsplit = 65535;
  }
  if (R > MAX_CHUNK && nsplit < tsr_cdiv(R, MAX_CHUNK)) nsplit = tsr_cdiv(R, MAX_CHUNK);
  int64_t chunk = R;
  if (nsplit > 1) {
    chunk = tsr_cdiv(R, nsplit);
    nsplit = tsr_cdiv(R, chunk);
  }
  S *part = nullptr;
  if (nsplit > 1) {
    ts_status st;
    part = (S *)tsc_temp_alloc((size_t)g.nlines * (size_t)nsplit * sizeof(S), &st);
    if (!part) return st;
  }
  dim3 grid(grid_x(nlb), (unsigned)nsplit);
  if (col) {
    if constexpr (col_wide<Op>::value)
      reduce_col_wide_k<Op, T><<<grid, threads, 0, stream>>>(op, g, x, out0, out1, BX, chunk, part);
    else
      reduce_col_k<Op, T><<<grid, threads, 0, stream>>>(op, g, x, out0, out1, BX, chunk, part);
  } else if constexpr (row_wide<Op>::value) {
    reduce_row_wide_k<Op, T><<<grid, threads, 0, stream>>>(op, g, x, out0, out1, G, chunk, part);
  } else {
    reduce_row_k<Op, T><<<grid, threads, 0, stream>>>(op, g, x, out0, out1, G, chunk, part);
  }
  ts_status st = tsc_after_launch(name);
  if (!st && part) {
    int G2 = tsr_pow2_at_least(nsplit, 32);
    reduce_finish_k<Op><<<grid_x(tsr_cdiv(g.nlines, 256 / G2)), 256, 0, stream>>>(op, g, part, (int)nsplit, out0,
                                                                                   out1, G2);
    st = tsc_after_launch(name);
  }
  tsc_temp_free(part);
  return st;
}

// ---- entries -----------------------------------------------------------------

ts_status k_sum(const ts_call *c) {
  return tsc_dispatch(c->in[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    SumOp<T> op{c->out[0]->dtype, c->i[1] != 0, c->in[0]->ndim ? c->in[0]->sizes[c->i[0]] : 1};
    return run<T>(c, op, "sum");
  });
}

ts_status k_prod(const ts_call *c) {
  return tsc_dispatch(c->in[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return run<T>(c, ProdOp<T>{c->out[0]->dtype}, "prod");
  });
}

ts_status k_extreme(const ts_call *c) {
  bool mx = c->op == TS_OP_MAX;
  return tsc_dispatch(c->in[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return run<T>(c, ExtOp<T>{c->out[0]->dtype, mx}, mx ? "max" : "min");
  });
}

ts_status k_var(const ts_call *c) {
  return tsc_dispatch_float(c->in[0]->dtype, "var", [&](auto tag) {
    using T = decltype(tag);
    return run<T>(c, VarOp<T>{c->out[0]->dtype, c->f[0], c->i[1] != 0}, "var");
  });
}

ts_status k_norm(const ts_call *c) {
  double p = c->f[0];
  int pk = p == INFINITY ? P_INF : p == -INFINITY ? P_NEGINF : p == 0 ? P_ZERO : p == 1 ? P_ONE : p == 2 ? P_TWO : P_GEN;
  return tsc_dispatch_float(c->in[0]->dtype, "norm", [&](auto tag) {
    using T = decltype(tag);
    using F = tsc_opmath_t<T>;
    if (pk == P_TWO) return run<T>(c, NormOp<T, true>{c->out[0]->dtype, pk, (F)p, p}, "norm");
    return run<T>(c, NormOp<T, false>{c->out[0]->dtype, pk, (F)p, p}, "norm");
  });
}

ts_status k_all_any(const ts_call *c) {
  bool all = c->op == TS_OP_ALL;
  return tsc_dispatch(c->in[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return run<T>(c, AllAnyOp<T>{c->out[0]->dtype, all}, all ? "all" : "any");
  });
}

ts_status k_logsumexp(const ts_call *c) {
  return tsc_dispatch(c->in[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return run<T>(c, LseOp<T>{c->out[0]->dtype}, "logsumexp");
  });
}

} // namespace

extern "C" void tsc_register_reduce(ts_kernel *k) {
  k[TS_OP_SUM] = k_sum;
  k[TS_OP_PROD] = k_prod;
  k[TS_OP_MAX] = k_extreme;
  k[TS_OP_MIN] = k_extreme;
  k[TS_OP_VAR] = k_var;
  k[TS_OP_NORM] = k_norm;
  k[TS_OP_ALL] = k_all_any;
  k[TS_OP_ANY] = k_all_any;
  k[TS_OP_LOGSUMEXP] = k_logsumexp;
  k[TS_OP_CUMSUM] = tsc_cumsum;
  k[TS_OP_SOFTMAX] = tsc_softmax;
  k[TS_OP_LOG_SOFTMAX] = tsc_softmax;
}
