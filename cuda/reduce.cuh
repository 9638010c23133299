// What the reduce family's files share (reduce.cu, scan.cu, softmax.cu): the
// "lines" view of a one-dim reduction or scan, the same as the CPU engine's
// (src/cpu/reduce.c): the reduced dim i[0] is cut out, the other dims are
// coalesced into lines; a reduction makes one output element per line, a scan
// one output line per line. Also warp shuffles of any state, stores through a
// runtime dtype, and the logsumexp state that logsumexp and softmax share.
#pragma once

#include "common.cuh"
#include "core/dtype_store.h"

#include <math.h>

#define TSR_FULL 0xffffffffu

// The lines of one call. Operands: 0 the input, 1 out[0], 2 out[1] (the
// indices of max/min; strides 0 when absent).
struct tsr_lines {
  int nd;                          // line dims after coalescing, innermost last, >= 1
  int64_t sizes[TS_MAX_DIMS];      // line dims
  uint64_t magic[TS_MAX_DIMS];     // division by sizes[d] as a multiply-high and a shift (tsr_line_offsets)
  int shift[TS_MAX_DIMS];
  int64_t st[3][TS_MAX_DIMS];      // element strides of each operand along the line dims
  int64_t nlines;
  int64_t R, rs, ors;              // reduced size; in's and out[0]'s strides along it (ors: scans)
};

// Fills g from c as kx_init does on the CPU (same coalescing, so the same
// lines in the same order).
static inline void tsr_lines_init(tsr_lines *g, const ts_call *c) {
  const ts_tensor *in = c->in[0];
  const ts_tensor *ops[3] = {in, c->out[0], c->out[1]};
  int nops = c->out[1] ? 3 : 2;
  int d = (int)c->i[0];
  bool scan = ts_ops[c->op].kind == TS_KIND_SCAN;
  *g = tsr_lines{};
  g->R = in->ndim ? in->sizes[d] : 1;
  g->rs = in->ndim ? in->strides[d] : 0;
  g->ors = scan && in->ndim ? c->out[0]->strides[d] : 0;
  ts_loop_plan p; // the line dims: every dim but d
  ts_loop_plan_init(&p, nops, ops, d);
  g->nd = p.ndim;
  for (int q = 0; q < p.ndim; q++) {
    g->sizes[q] = p.sizes[q];
    for (int o = 0; o < nops; o++) g->st[o][q] = p.strides[o][q];
  }
  g->nlines = 1;
  for (int q = 0; q < g->nd; q++) g->nlines *= g->sizes[q];
  for (int q = 1; q < g->nd; q++) { // Granlund-Montgomery, as tsc_make_geom32 in 64 bits
    // an empty line dim has no lines; 1 keeps the division below defined (it trapped on the host)
    uint64_t div = g->sizes[q] ? (uint64_t)g->sizes[q] : 1;
    int sh = 0;
    while (sh < 63 && ((uint64_t)1 << sh) < div) sh++;
    g->shift[q] = sh;
    g->magic[q] = (uint64_t)(((unsigned __int128)1 << 64) * (((uint64_t)1 << sh) - div) / div + 1);
  }
}

// The input stride of the innermost line dim: how far apart neighbouring
// lines start. A reduction reads "across lines" (threads over lines,
// coalesced) when this is smaller than the reduced dim's stride.
static inline int64_t tsr_line_stride(const tsr_lines *g) { return g->nlines > 1 ? g->st[0][g->nd - 1] : 0; }

// Element offsets of line `line` in the first N operands. Fixed-bound loops
// keep the indexing into g's arrays static (g lives in kernel parameters);
// the outermost dim takes the quotient without a division, so the common
// one-dim case divides nothing. The others divide by a multiply-high and a
// shift (exact for line < 2^63): a 64-bit `/` is a call to a division
// routine, and the values live across it spilled in a dozen kernels.
template <int N>
__device__ __forceinline__ void tsr_line_offsets(const tsr_lines &g, int64_t line, int64_t off[N]) {
#pragma unroll
  for (int k = 0; k < N; k++) off[k] = 0;
#pragma unroll
  for (int d = TS_MAX_DIMS - 1; d >= 1; d--) {
    if (d < g.nd) {
      uint64_t l = (uint64_t)line;
      int64_t q = (int64_t)((__umul64hi(l, g.magic[d]) + l) >> g.shift[d]);
      int64_t r = line - q * g.sizes[d];
#pragma unroll
      for (int k = 0; k < N; k++) off[k] += r * g.st[k][d];
      line = q;
    }
  }
#pragma unroll
  for (int k = 0; k < N; k++) off[k] += line * g.st[k][0];
}

// for (i = i0; i < end; i += step) body(i), unrolled U times by hand:
// `#pragma unroll U` over a runtime step computes its trip count with a 64-bit
// division, a call to a routine, and the values live across that call spilled.
template <int U, class Body>
__device__ __forceinline__ void tsr_strided_for(int64_t i, int64_t end, int64_t step, Body body) {
#pragma unroll 1
  for (; i + (U - 1) * step < end; i += U * step) {
#pragma unroll
    for (int u = 0; u < U; u++) body(i + u * step);
  }
#pragma unroll 1
  for (; i < end; i += step) body(i);
}

static inline int64_t tsr_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int tsr_pow2_at_least(int64_t n, int cap) { // smallest power of two >= n, at most cap
  int p = 1;
  while (p < cap && p < n) p <<= 1;
  return p;
}

// ---- vectors ----------------------------------------------------------------
// 16 bytes of T: one 128-bit load or store.
template <typename T> struct tsr_vw { static constexpr int value = 16 / (int)sizeof(T); };
template <typename T, int V> struct alignas(sizeof(T) * V) tsr_vec { T v[V]; };

// Elements of T before p reaches 16-byte alignment (p is T-aligned).
template <typename T> __device__ __forceinline__ int64_t tsr_head(const T *p) {
  return (int64_t)(((16 - ((uintptr_t)p & 15)) & 15) / sizeof(T));
}

// ---- shuffles ----------------------------------------------------------------
__device__ __forceinline__ float tsr_shfl_down(float v, int o, int w) { return __shfl_down_sync(TSR_FULL, v, o, w); }
__device__ __forceinline__ double tsr_shfl_down(double v, int o, int w) { return __shfl_down_sync(TSR_FULL, v, o, w); }
__device__ __forceinline__ int tsr_shfl_down(int v, int o, int w) { return __shfl_down_sync(TSR_FULL, v, o, w); }
__device__ __forceinline__ int64_t tsr_shfl_down(int64_t v, int o, int w) {
  return (int64_t)__shfl_down_sync(TSR_FULL, (long long)v, o, w);
}
__device__ __forceinline__ uint64_t tsr_shfl_down(uint64_t v, int o, int w) {
  return (uint64_t)__shfl_down_sync(TSR_FULL, (unsigned long long)v, o, w);
}
__device__ __forceinline__ float tsr_shfl_xor(float v, int o, int w) { return __shfl_xor_sync(TSR_FULL, v, o, w); }
__device__ __forceinline__ int tsr_shfl_xor(int v, int o, int w) { return __shfl_xor_sync(TSR_FULL, v, o, w); }
__device__ __forceinline__ double tsr_shfl_xor(double v, int o, int w) { return __shfl_xor_sync(TSR_FULL, v, o, w); }
__device__ __forceinline__ double tsr_shfl_idx(double v, int src) { return __shfl_sync(TSR_FULL, v, src); }
__device__ __forceinline__ uint64_t tsr_shfl_idx(uint64_t v, int src) {
  return (uint64_t)__shfl_sync(TSR_FULL, (unsigned long long)v, src);
}
__device__ __forceinline__ double tsr_shfl_up(double v, int o) { return __shfl_up_sync(TSR_FULL, v, o); }
__device__ __forceinline__ uint64_t tsr_shfl_up(uint64_t v, int o) {
  return (uint64_t)__shfl_up_sync(TSR_FULL, (unsigned long long)v, o);
}

// ---- stores through a runtime dtype: the host's switch (core/dtype_store.h) --
__device__ __forceinline__ int tsr_esize(ts_dtype dt) {
  switch (dt) {
  case TS_FLOAT64: case TS_INT64: return 8;
  case TS_FLOAT32: case TS_INT32: return 4;
  case TS_FLOAT16: case TS_BFLOAT16: case TS_INT16: return 2;
  default: return 1;
  }
}

__device__ __forceinline__ void tsr_store_f64(char *p, ts_dtype dt, double v) { ts_store_f64_as(p, dt, v); }
__device__ __forceinline__ void tsr_store_i64(char *p, ts_dtype dt, int64_t v) { ts_store_i64_as(p, dt, v); }

// ---- logsumexp state --------------------------------------------------------
// (m, s): s = sum of exp(x - sh(m)), sh(m) = m unless m is infinite (then 0,
// so an all -inf line gives -inf and a +inf gives +inf, as the CPU and torch).
// m is a reference, not always the max: it moves only when an element exceeds
// it by TSR_LSE_SLACK (or is NaN), so a rising sequence rescales s rarely
// (each rescale costs a rounding) while exp(x - m) stays below e^20. A NaN
// makes m NaN and everything after it NaN.
#define TSR_LSE_SLACK 20
__device__ __forceinline__ float tsr_exp(float x) { return expf(x); }
__device__ __forceinline__ double tsr_exp(double x) { return exp(x); }
template <typename F> __device__ __forceinline__ F tsr_sh(F m) { return isinf(m) ? F(0) : m; }
template <typename F> __device__ __forceinline__ bool tsr_beats_max(F v, F best) {
  return v > best || (v != v && best == best);
}

template <typename F> __device__ __forceinline__ void tsr_lse_add(F &m, F &s, F x) {
  if (x > m + F(TSR_LSE_SLACK) || (x != x && m == m)) {
    F sx = tsr_sh(x);
    s = (s == F(0) ? F(0) : s * tsr_exp(tsr_sh(m) - sx)) + tsr_exp(x - sx);
    m = x;
  } else {
    s += tsr_exp(x - tsr_sh(m));
  }
}

template <typename F> __device__ __forceinline__ void tsr_lse_merge(F &m, F &s, F bm, F bs) {
  F nm = tsr_beats_max(bm, m) ? bm : m, sn = tsr_sh(nm);
  F a = s == F(0) ? F(0) : s * tsr_exp(tsr_sh(m) - sn);
  F b = bs == F(0) ? F(0) : bs * tsr_exp(tsr_sh(bm) - sn);
  s = a + b;
  m = nm;
}

// ---- entries of scan.cu and softmax.cu ----------------------------------------
ts_status tsc_cumsum(const ts_call *c);
ts_status tsc_softmax(const ts_call *c); // SOFTMAX and LOG_SOFTMAX
