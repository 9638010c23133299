/* CPU reduction and scan kernels (contracts in ops_reduce.def).
 *
 * One engine serves every op. The reduced dim is cut out of the input and the
 * other dims are coalesced into "lines": a reduction makes one output element
 * per line, a scan one output line per line. Lines are processed in tiles of
 * up to TILE_W neighbours, and a tile's elements are staged BLOCK rows at a
 * time into a per-thread buffer of doubles (float inputs, all/any) or int64
 * (integer sums, products and extremes). Staging turns every stride pattern
 * (rows, columns of a row-major tensor, transposed views) into contiguous
 * arithmetic, and lets one loop per op serve all eight dtypes.
 *
 * Each reduction is a small state: made from one block, merged in order into
 * its chunk (CHUNK rows), chunks merged in order into the line. The blocks and
 * chunks depend only on the shape, so a line reduced by one thread or split
 * across many (few long lines: the reduce-over-everything case) gives the
 * same bits.
 *
 * Accuracy: float16, bfloat16, float32 and float64 all accumulate in double;
 * sums use 8 partial sums per block, then one running sum per chunk and line. */
#include "cpu.h"
#include "vmath.h"
#include "core/loop_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define BLOCK 256       /* rows of one line staged at a time */
#define TILE_W 16       /* neighbouring lines staged together */
#define CHUNK_BLOCKS 64 /* blocks per chunk: the unit of parallel work inside one long line */
#define CHUNK ((int64_t)BLOCK * CHUNK_BLOCKS)

typedef union stage {
  double d[TILE_W * BLOCK]; /* line j of the tile at [j * BLOCK] */
  int64_t i[TILE_W * BLOCK];
} stage;

/* A partial reduction. Which fields mean what depends on the op. */
typedef struct rstate {
  double a;    /* sum, product, extreme, mean (var), max (logsumexp), norm accumulator */
  double b;    /* M2 (var), sum of exp(x - shift(a)) (logsumexp) */
  int64_t n;   /* elements seen */
  int64_t ia;  /* integer sum/product/extreme; the flag of all/any */
  int64_t idx; /* row of the extreme (max/min) */
} rstate;

/* One kernel call, digested. Operand 0 is the input, 1 and 2 the outputs. */
typedef struct kx {
  ts_op op;
  bool ints;    /* stage as int64 */
  bool expf32;  /* exponentials in float: the result is float32 or narrower, and expf is much faster */
  double p;     /* f[0] */
  int64_t flag; /* i[1] */
  int nops;
  char *base[3];
  ts_dtype dt[3];
  int nd;                          /* line dims after coalescing, innermost last, >= 1 */
  int64_t sizes[TS_MAX_DIMS];      /* line dims */
  int64_t st[3][TS_MAX_DIMS];      /* element strides of each operand along the line dims */
  int64_t R, rs, ors;              /* reduced size; in's and out[0]'s strides along it (ors: scans) */
  int64_t nlines;
} kx;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static void kx_init(kx *k, const ts_call *c) {
  const ts_tensor *in = c->in[0];
  const ts_tensor *ops[3] = {in, c->out[0], c->out[1]};
  int d = (int)c->i[0];
  bool scan = ts_ops[c->op].kind == TS_KIND_SCAN;
  k->op = c->op;
  k->ints = !ts_dtype_is_float(in->dtype) &&
            (c->op == TS_OP_SUM || c->op == TS_OP_PROD || c->op == TS_OP_MAX || c->op == TS_OP_MIN ||
             c->op == TS_OP_CUMSUM);
  k->expf32 = in->dtype != TS_FLOAT64;
  k->p = c->f[0];
  k->flag = c->i[1];
  k->nops = c->out[1] ? 3 : 2;
  for (int o = 0; o < k->nops; o++) k->base[o] = ts_data(ops[o]), k->dt[o] = ops[o]->dtype;
  k->R = in->ndim ? in->sizes[d] : 1;
  k->rs = in->ndim ? in->strides[d] : 0;
  k->ors = scan && in->ndim ? c->out[0]->strides[d] : 0;
  ts_loop_plan p; /* the line dims: every dim but d */
  ts_loop_plan_init(&p, k->nops, ops, d);
  k->nd = p.ndim;
  for (int q = 0; q < p.ndim; q++) {
    k->sizes[q] = p.sizes[q];
    for (int o = 0; o < 3; o++) k->st[o][q] = o < k->nops ? p.strides[o][q] : 0;
  }
  k->nlines = 1;
  for (int q = 0; q < k->nd; q++) k->nlines *= k->sizes[q];
}

/* Pointers to the first line of tile t (tiles cut the innermost line dim in
 * pieces of TILE_W) and the tile's width. */
static int tile_ptrs(const kx *k, int64_t t, int64_t w_max, char **ptr) {
  int nd = k->nd;
  int64_t n0 = k->sizes[nd - 1], pieces = (n0 + w_max - 1) / w_max;
  int64_t outer = t / pieces, j0 = (t % pieces) * w_max;
  int64_t off[3];
  for (int o = 0; o < k->nops; o++) off[o] = j0 * k->st[o][nd - 1];
  for (int q = nd - 2; q >= 0; q--) {
    int64_t iq = outer % k->sizes[q];
    outer /= k->sizes[q];
    for (int o = 0; o < k->nops; o++) off[o] += iq * k->st[o][q];
  }
  for (int o = 0; o < k->nops; o++) ptr[o] = k->base[o] + off[o] * (int64_t)ts_dtype_size(k->dt[o]);
  return (int)min64(w_max, n0 - j0);
}

static int64_t tile_count(const kx *k, int64_t w_max) {
  int64_t n0 = k->sizes[k->nd - 1];
  return n0 == 0 ? 0 : k->nlines / n0 * ((n0 + w_max - 1) / w_max);
}

/* ---- staging: w lines of len rows, line stride ks and row stride rs (elements) ---- */

#define ID(v) (v)
#define GATHER(T, CONV, DST)                                                                   \
  do {                                                                                         \
    const T *s_ = (const T *)src;                                                              \
    if (w == 1 && rs == 1) {                                                                   \
      for (int64_t r = 0; r < len; r++) DST[r] = CONV(s_[r]);                                  \
    } else if (ks == 1) { /* columns of a row-major tile: read rows across the lines */        \
      for (int64_t r = 0; r < len; r++)                                                        \
        for (int j = 0; j < w; j++) DST[j * BLOCK + r] = CONV(s_[r * rs + j]);                 \
    } else {                                                                                   \
      for (int j = 0; j < w; j++)                                                              \
        for (int64_t r = 0; r < len; r++) DST[j * BLOCK + r] = CONV(s_[j * ks + r * rs]);      \
    }                                                                                          \
  } while (0)

static void gather_d(ts_dtype dt, const char *src, int64_t ks, int64_t rs, int w, int64_t len, double *dst) {
  switch (dt) {
  case TS_FLOAT32: GATHER(float, ID, dst); break;
  case TS_FLOAT64: GATHER(double, ID, dst); break;
  case TS_FLOAT16: GATHER(uint16_t, ts_half_to_float, dst); break;
  case TS_BFLOAT16: GATHER(uint16_t, ts_bf16_to_float, dst); break;
  case TS_INT64: GATHER(int64_t, (double), dst); break;
  case TS_INT32: GATHER(int32_t, ID, dst); break;
  case TS_INT16: GATHER(int16_t, ID, dst); break;
  case TS_INT8: GATHER(int8_t, ID, dst); break;
  case TS_UINT8: case TS_BOOL: GATHER(uint8_t, ID, dst); break;
  default: break;
  }
}

static void gather_i(ts_dtype dt, const char *src, int64_t ks, int64_t rs, int w, int64_t len, int64_t *dst) {
  switch (dt) {
  case TS_INT64: GATHER(int64_t, ID, dst); break;
  case TS_INT32: GATHER(int32_t, ID, dst); break;
  case TS_INT16: GATHER(int16_t, ID, dst); break;
  case TS_INT8: GATHER(int8_t, ID, dst); break;
  default: GATHER(uint8_t, ID, dst); break; /* uint8, bool */
  }
}

#define SCATTER(T, CONV, SRC)                                                                  \
  do {                                                                                         \
    T *d_ = (T *)dst;                                                                          \
    if (w == 1 && rs == 1) {                                                                   \
      for (int64_t r = 0; r < len; r++) d_[r] = CONV(SRC[r]);                                  \
    } else if (ks == 1) {                                                                      \
      for (int64_t r = 0; r < len; r++)                                                        \
        for (int j = 0; j < w; j++) d_[r * rs + j] = CONV(SRC[j * BLOCK + r]);                 \
    } else {                                                                                   \
      for (int j = 0; j < w; j++)                                                              \
        for (int64_t r = 0; r < len; r++) d_[j * ks + r * rs] = CONV(SRC[j * BLOCK + r]);      \
    }                                                                                          \
  } while (0)
#define TO_F16(v) ts_float_to_half((float)(v))
#define TO_BF16(v) ts_float_to_bf16((float)(v))

/* Scans write floats into their input's float dtype, integers into int64. */
static void scatter_d(ts_dtype dt, char *dst, int64_t ks, int64_t rs, int w, int64_t len, const double *src) {
  switch (dt) {
  case TS_FLOAT32: SCATTER(float, (float), src); break;
  case TS_FLOAT64: SCATTER(double, ID, src); break;
  case TS_FLOAT16: SCATTER(uint16_t, TO_F16, src); break;
  case TS_BFLOAT16: SCATTER(uint16_t, TO_BF16, src); break;
  default: break;
  }
}

static void scatter_i(char *dst, int64_t ks, int64_t rs, int w, int64_t len, const int64_t *src) {
  SCATTER(int64_t, ID, src);
}

/* ---- op states ------------------------------------------------------------------- */

static bool lse_op(ts_op op) { return op == TS_OP_LOGSUMEXP || op == TS_OP_SOFTMAX || op == TS_OP_LOG_SOFTMAX; }
/* logsumexp shifts by the max unless it is infinite, as torch (so all -inf gives -inf, not NaN) */
static double lse_shift(double m) { return isinf(m) ? 0 : m; }

static rstate state_init(const kx *k) {
  rstate s = {0};
  if (k->op == TS_OP_PROD) s.a = 1, s.ia = 1;
  if (k->op == TS_OP_ALL) s.ia = 1;
  if (lse_op(k->op)) s.a = -INFINITY;
  if (k->op == TS_OP_NORM && k->p == -INFINITY) s.a = INFINITY;
  return s;
}

/* Sum with 8 independent partial sums: breaks the add latency chain and
 * shortens error growth. */
static double sum8(const double *x, int64_t n) {
  double s[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int q = 0; q < 8; q++) s[q] += x[i + q];
  for (int q = 0; i < n; i++, q++) s[q] += x[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* sum of exp(x - shift); also writes the exponentials to e when not NULL */
static double sum_exp(const kx *k, const double *x, int64_t n, double shift, double *e) {
  double s = 0;
  if (k->expf32) {
    float sh = (float)shift;
    for (int64_t i = 0; i < n; i++) {
      double v = expf((float)x[i] - sh);
      s += v;
      if (e) e[i] = v;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      double v = exp(x[i] - shift);
      s += v;
      if (e) e[i] = v;
    }
  }
  return s;
}

/* NaN-propagating comparisons: a NaN beats every number, the first NaN stays. */
static bool beats_max(double v, double best) { return v > best || (v != v && best == best); }
static bool beats_min(double v, double best) { return v < best || (v != v && best == best); }

/* The state of one block of n >= 1 staged doubles that start at row r0. */
static void block_d(const kx *k, rstate *t, const double *x, int64_t n, int64_t r0) {
  *t = state_init(k);
  t->n = n;
  switch (k->op) {
  case TS_OP_SUM: t->a = sum8(x, n); break;
  case TS_OP_PROD: {
    double p = 1;
    for (int64_t i = 0; i < n; i++) p *= x[i];
    t->a = p;
    break;
  }
  case TS_OP_MAX: case TS_OP_MIN: {
    double best = x[0];
    int64_t bi = 0;
    bool mx = k->op == TS_OP_MAX;
    for (int64_t i = 1; i < n; i++)
      if (mx ? beats_max(x[i], best) : beats_min(x[i], best)) best = x[i], bi = i;
    t->a = best, t->idx = r0 + bi;
    break;
  }
  case TS_OP_VAR: { /* two passes within the block; blocks merge by Chan's formula */
    double m = sum8(x, n) / (double)n, s[4] = {0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (int q = 0; q < 4; q++) s[q] += (x[i + q] - m) * (x[i + q] - m);
    for (; i < n; i++) s[0] += (x[i] - m) * (x[i] - m);
    t->a = m, t->b = (s[0] + s[1]) + (s[2] + s[3]);
    break;
  }
  case TS_OP_NORM: {
    double p = k->p, acc = t->a;
    if (p == INFINITY) {
      for (int64_t i = 0; i < n; i++) if (beats_max(fabs(x[i]), acc)) acc = fabs(x[i]);
    } else if (p == -INFINITY) {
      for (int64_t i = 0; i < n; i++) if (beats_min(fabs(x[i]), acc)) acc = fabs(x[i]);
    } else if (p == 0) {
      for (int64_t i = 0; i < n; i++) acc += x[i] != 0;
    } else if (p == 1) {
      for (int64_t i = 0; i < n; i++) acc += fabs(x[i]);
    } else if (p == 2) {
      for (int64_t i = 0; i < n; i++) acc += x[i] * x[i];
    } else {
      for (int64_t i = 0; i < n; i++) acc += pow(fabs(x[i]), p);
    }
    t->a = acc;
    break;
  }
  case TS_OP_ALL:
    for (int64_t i = 0; i < n; i++)
      if (x[i] == 0) { t->ia = 0; break; }
    break;
  case TS_OP_ANY:
    for (int64_t i = 0; i < n; i++)
      if (x[i] != 0) { t->ia = 1; break; }
    break;
  default: { /* logsumexp, softmax, log_softmax */
    double m = x[0];
    for (int64_t i = 1; i < n; i++) if (beats_max(x[i], m)) m = x[i];
    t->a = m, t->b = sum_exp(k, x, n, lse_shift(m), NULL);
    break;
  }
  }
}

static void block_i(const kx *k, rstate *t, const int64_t *x, int64_t n, int64_t r0) {
  *t = state_init(k);
  t->n = n;
  switch (k->op) {
  case TS_OP_SUM: {
    uint64_t s = 0; /* unsigned: wraps like torch instead of UB */
    for (int64_t i = 0; i < n; i++) s += (uint64_t)x[i];
    t->ia = (int64_t)s;
    break;
  }
  case TS_OP_PROD: {
    uint64_t p = 1;
    for (int64_t i = 0; i < n; i++) p *= (uint64_t)x[i];
    t->ia = (int64_t)p;
    break;
  }
  default: { /* max, min */
    int64_t best = x[0], bi = 0;
    bool mx = k->op == TS_OP_MAX;
    for (int64_t i = 1; i < n; i++)
      if (mx ? x[i] > best : x[i] < best) best = x[i], bi = i;
    t->ia = best, t->idx = r0 + bi;
    break;
  }
  }
}

/* Merges t, the state of later rows, into s. */
static void merge(const kx *k, rstate *s, const rstate *t) {
  if (t->n == 0) return;
  if (s->n == 0) { /* s is still the identity: taking t is exact (and avoids 0 * inf below) */
    *s = *t;
    return;
  }
  switch (k->op) {
  case TS_OP_SUM: case TS_OP_CUMSUM:
    if (k->ints) s->ia = (int64_t)((uint64_t)s->ia + (uint64_t)t->ia);
    else s->a += t->a;
    break;
  case TS_OP_PROD:
    if (k->ints) s->ia = (int64_t)((uint64_t)s->ia * (uint64_t)t->ia);
    else s->a *= t->a;
    break;
  case TS_OP_MAX: case TS_OP_MIN: {
    bool mx = k->op == TS_OP_MAX, take;
    if (k->ints) take = mx ? t->ia > s->ia : t->ia < s->ia;
    else take = mx ? beats_max(t->a, s->a) : beats_min(t->a, s->a);
    if (take) s->a = t->a, s->ia = t->ia, s->idx = t->idx;
    break;
  }
  case TS_OP_VAR: {
    double na = (double)s->n, nb = (double)t->n, n = na + nb, delta = t->a - s->a;
    s->a += delta * nb / n;
    s->b += t->b + delta * delta * na * nb / n;
    break;
  }
  case TS_OP_NORM:
    if (k->p == INFINITY) { if (beats_max(t->a, s->a)) s->a = t->a; }
    else if (k->p == -INFINITY) { if (beats_min(t->a, s->a)) s->a = t->a; }
    else s->a += t->a;
    break;
  case TS_OP_ALL: s->ia = s->ia && t->ia; break;
  case TS_OP_ANY: s->ia = s->ia || t->ia; break;
  default: { /* logsumexp: rescale both sums to the larger max; an all -inf part (sum 0) adds nothing */
    double m = beats_max(t->a, s->a) ? t->a : s->a, sh = lse_shift(m);
    double bs = s->b == 0 ? 0 : s->b * exp(lse_shift(s->a) - sh), bt = t->b == 0 ? 0 : t->b * exp(lse_shift(t->a) - sh);
    s->b = bs + bt;
    s->a = m;
    break;
  }
  }
  s->n += t->n;
}

static double lse_value(const rstate *s) { return log(s->b) + lse_shift(s->a); }

/* Writes a line's result: value at o0 (out[0]'s dtype), index at o1 (int64) if any. */
static void store(const kx *k, const rstate *s, char *o0, char *o1) {
  ts_dtype od = k->dt[1];
  double v;
  switch (k->op) {
  case TS_OP_SUM: case TS_OP_PROD: case TS_OP_MAX: case TS_OP_MIN:
    if (k->ints) {
      ts_store_i64(o0, od, s->ia);
      if (o1) *(int64_t *)o1 = s->idx;
      return;
    }
    v = k->op == TS_OP_SUM && k->flag ? s->a / (double)k->R : s->a;
    if (o1) *(int64_t *)o1 = s->idx;
    break;
  case TS_OP_VAR: {
    double dof = (double)s->n - k->p;
    v = s->b / (dof > 0 ? dof : 0); /* as torch: inf or NaN when the correction leaves no freedom */
    if (k->flag) v = sqrt(v);
    break;
  }
  case TS_OP_NORM:
    v = s->a;
    if (k->p == 2) v = sqrt(v);
    else if (k->p != 0 && k->p != 1 && !isinf(k->p)) v = pow(v, 1 / k->p);
    break;
  case TS_OP_ALL: case TS_OP_ANY: ts_store_i64(o0, od, s->ia != 0); return;
  default: v = lse_value(s); break;
  }
  ts_store_f64(o0, od, v);
}

/* ---- drivers ------------------------------------------------------------------------ */

/* Reduces the w lines at `in` (line stride ks) over rows [r0, r1), r0 a
 * multiple of CHUNK, merging chunk by chunk into s[0..w). Returns nonzero
 * when Ctrl-C was pressed. */
static int reduce_rows(const kx *k, const char *in, int64_t ks, int w, int64_t r0, int64_t r1, rstate *s,
                       stage *sg) {
  int64_t esz = (int64_t)ts_dtype_size(k->dt[0]);
  for (int64_t c0 = r0; c0 < r1; c0 += CHUNK) {
    if (ts_interrupt_flag) return 1;
    int64_t c1 = min64(c0 + CHUNK, r1);
    rstate cs[TILE_W];
    for (int j = 0; j < w; j++) cs[j] = state_init(k);
    for (int64_t b0 = c0; b0 < c1; b0 += BLOCK) {
      int64_t len = min64(BLOCK, c1 - b0);
      const char *src = in + b0 * k->rs * esz;
      if (k->ints) gather_i(k->dt[0], src, ks, k->rs, w, len, sg->i);
      else gather_d(k->dt[0], src, ks, k->rs, w, len, sg->d);
      for (int j = 0; j < w; j++) {
        rstate t;
        if (k->ints) block_i(k, &t, sg->i + j * BLOCK, len, b0);
        else block_d(k, &t, sg->d + j * BLOCK, len, b0);
        merge(k, &cs[j], &t);
      }
    }
    for (int j = 0; j < w; j++) merge(k, &s[j], &cs[j]);
  }
  return 0;
}

static void store_tile(const kx *k, const rstate *s, char **ptr, int w) {
  int nd = k->nd;
  int64_t e1 = (int64_t)ts_dtype_size(k->dt[1]);
  for (int j = 0; j < w; j++)
    store(k, &s[j], ptr[1] + j * k->st[1][nd - 1] * e1, k->nops == 3 ? ptr[2] + j * k->st[2][nd - 1] * 8 : NULL);
}

static int max_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/* Few long lines (reducing everything, or a few rows): each line's chunks in
 * parallel, their states merged in order afterwards. */
static ts_status reduce_chunked(const kx *k) {
  int64_t nch = (k->R + CHUNK - 1) / CHUNK;
  rstate *cs = malloc((size_t)nch * sizeof *cs);
  if (!cs) return ts_fail(TS_ERR_OOM, "%s: out of memory for %lld partial results", ts_ops[k->op].name, (long long)nch);
  for (int64_t l = 0; l < k->nlines; l++) {
    char *ptr[3];
    tile_ptrs(k, l, 1, ptr);
    volatile int stop = 0;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
      if (stop) continue;
      stage sg;
      cs[c] = state_init(k);
      if (reduce_rows(k, ptr[0], 0, 1, c * CHUNK, min64(k->R, (c + 1) * CHUNK), &cs[c], &sg)) stop = 1;
    }
    if (stop) {
      free(cs);
      return ts_check_interrupt();
    }
    rstate s = state_init(k);
    for (int64_t c = 0; c < nch; c++) merge(k, &s, &cs[c]);
    store_tile(k, &s, ptr, 1);
  }
  free(cs);
  return TS_OK;
}

/* Sums (or means) of the columns of a row-major float32 matrix into a contiguous vector:
 * dim 0 of a (R, N) tensor, a Linear layer's bias gradient. The engine above would stage
 * 16 columns at a time, reading across rows; here each thread owns a block of columns and
 * adds row after row into double accumulators, so the loads run along the rows and
 * vectorise. In double, the order of a float32 column's terms does not show in the
 * rounded result, and the block split depends on the thread count only. */
#define COL_BLOCK_MAX 2048
__attribute__((target_clones("avx2", "default"))) static void sum_column_block(const float *restrict x, int64_t rs,
                                                                                int64_t R, int64_t w,
                                                                                double *restrict acc) {
  for (int64_t j = 0; j < w; j++) acc[j] = 0;
  for (int64_t r = 0; r < R; r++) {
    const float *row = x + r * rs;
    for (int64_t j = 0; j < w; j++) acc[j] += (double)row[j];
  }
}

static bool sum_columns_f32(const kx *k) {
  if (k->op != TS_OP_SUM || k->ints || k->nops != 2 || k->nd != 1 || k->st[0][0] != 1 || k->st[1][0] != 1 ||
      k->dt[0] != TS_FLOAT32 || k->dt[1] != TS_FLOAT32)
    return false;
  const int64_t N = k->sizes[0], R = k->R;
  if (N < 16 || R < 2) return false;
  const int nt = k->nlines * R >= TS_PARALLEL_GRAIN ? max_threads() : 1;
  int64_t w = ((N + nt - 1) / nt + 15) / 16 * 16;
  w = w > COL_BLOCK_MAX ? COL_BLOCK_MAX : w;
  const int64_t nblocks = (N + w - 1) / w;
  const float *x = (const float *)k->base[0];
  float *out = (float *)k->base[1];
#pragma omp parallel for schedule(static) if (nt > 1 && nblocks > 1)
  for (int64_t b = 0; b < nblocks; b++) {
    double acc[COL_BLOCK_MAX];
    const int64_t j0 = b * w, bw = min64(w, N - j0);
    sum_column_block(x + j0, k->rs, R, bw, acc);
    for (int64_t j = 0; j < bw; j++) out[j0 + j] = (float)(k->flag ? acc[j] / (double)R : acc[j]); /* mean: as store() */
  }
  return true;
}

static ts_status k_reduce(const ts_call *c) {
  kx k;
  kx_init(&k, c);
  int64_t ntiles = tile_count(&k, TILE_W);
  if (ntiles == 0) return TS_OK;
  if (sum_columns_f32(&k)) return ts_check_interrupt();
  int nthreads = max_threads();
  if (nthreads > 1 && k.R >= 2 * CHUNK && ntiles < 2 * nthreads) return reduce_chunked(&k);
  bool par = ntiles > 1 && k.nlines * k.R >= TS_PARALLEL_GRAIN;
  volatile int stop = 0;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t t = 0; t < ntiles; t++) {
    if (stop) continue;
    stage sg;
    char *ptr[3];
    int w = tile_ptrs(&k, t, TILE_W, ptr);
    rstate s[TILE_W];
    for (int j = 0; j < w; j++) s[j] = state_init(&k);
    if (reduce_rows(&k, ptr[0], k.st[0][k.nd - 1], w, 0, k.R, s, &sg)) {
      stop = 1;
      continue;
    }
    store_tile(&k, s, ptr, w);
  }
  return stop ? ts_check_interrupt() : TS_OK;
}

/* One tile of a scan. Returns nonzero when Ctrl-C was pressed. */
static int scan_tile(const kx *k, char **ptr, int w, stage *sg) {
  int nd = k->nd;
  int64_t ks = k->st[0][nd - 1], oks = k->st[1][nd - 1];
  int64_t ei = (int64_t)ts_dtype_size(k->dt[0]), eo = (int64_t)ts_dtype_size(k->dt[1]);
  if (k->op == TS_OP_CUMSUM) {
    double acc[TILE_W] = {0};
    uint64_t iacc[TILE_W] = {0};
    for (int64_t b0 = 0; b0 < k->R; b0 += BLOCK) {
      if (ts_interrupt_flag) return 1;
      int64_t len = min64(BLOCK, k->R - b0);
      const char *src = ptr[0] + b0 * k->rs * ei;
      char *dst = ptr[1] + b0 * k->ors * eo;
      if (k->ints) {
        gather_i(k->dt[0], src, ks, k->rs, w, len, sg->i);
        for (int j = 0; j < w; j++)
          for (int64_t r = 0; r < len; r++) sg->i[j * BLOCK + r] = (int64_t)(iacc[j] += (uint64_t)sg->i[j * BLOCK + r]);
        scatter_i(dst, oks, k->ors, w, len, sg->i);
      } else {
        gather_d(k->dt[0], src, ks, k->rs, w, len, sg->d);
        for (int j = 0; j < w; j++)
          for (int64_t r = 0; r < len; r++) sg->d[j * BLOCK + r] = acc[j] += sg->d[j * BLOCK + r];
        scatter_d(k->dt[1], dst, oks, k->ors, w, len, sg->d);
      }
    }
    return 0;
  }
  /* One exp per element. softmax: the max, then exp(x - max) written and
   * summed, then scaled by 1/sum in place; log_softmax: logsumexp, then x - it. */
  kx k1 = *k;
  if (k->op == TS_OP_SOFTMAX) k1.op = TS_OP_MAX;
  rstate s[TILE_W];
  for (int j = 0; j < w; j++) s[j] = state_init(&k1);
  if (reduce_rows(&k1, ptr[0], ks, w, 0, k->R, s, sg)) return 1;
  double shift[TILE_W], sum[TILE_W] = {0};
  /* unlike logsumexp, torch's softmaxes do not special-case an infinite max:
   * a +inf in a row makes the whole row NaN (inf - inf); an all -inf row too */
  for (int j = 0; j < w; j++)
    shift[j] = k->op == TS_OP_SOFTMAX ? (s[j].a == -INFINITY ? 0 : s[j].a)
                                      : (s[j].a == INFINITY ? NAN : lse_value(&s[j]));
  for (int64_t b0 = 0; b0 < k->R; b0 += BLOCK) {
    if (ts_interrupt_flag) return 1;
    int64_t len = min64(BLOCK, k->R - b0);
    gather_d(k->dt[0], ptr[0] + b0 * k->rs * ei, ks, k->rs, w, len, sg->d);
    for (int j = 0; j < w; j++) {
      double *x = sg->d + j * BLOCK;
      if (k->op == TS_OP_SOFTMAX) sum[j] += sum_exp(k, x, len, shift[j], x);
      else for (int64_t r = 0; r < len; r++) x[r] -= shift[j];
    }
    scatter_d(k->dt[1], ptr[1] + b0 * k->ors * eo, oks, k->ors, w, len, sg->d);
  }
  if (k->op == TS_OP_LOG_SOFTMAX) return 0;
  for (int j = 0; j < w; j++) sum[j] = 1 / sum[j];
  for (int64_t b0 = 0; b0 < k->R; b0 += BLOCK) {
    int64_t len = min64(BLOCK, k->R - b0);
    char *o = ptr[1] + b0 * k->ors * eo;
    gather_d(k->dt[1], o, oks, k->ors, w, len, sg->d);
    for (int j = 0; j < w; j++)
      for (int64_t r = 0; r < len; r++) sg->d[j * BLOCK + r] *= sum[j];
    scatter_d(k->dt[1], o, oks, k->ors, w, len, sg->d);
  }
  return 0;
}

/* softmax / log_softmax of float32 rows that are contiguous in the softmax
 * dim: the common case (the last dim of a dense tensor), done in float a
 * row at a time (softmax_row.c). The general engine above stages through
 * double and is several times slower here. */
static bool softmax_rows_f32(const ts_call *c, const kx *k) {
  if ((c->op != TS_OP_SOFTMAX && c->op != TS_OP_LOG_SOFTMAX) || k->dt[0] != TS_FLOAT32 || k->dt[1] != TS_FLOAT32 ||
      k->rs != 1 || k->ors != 1 || k->R == 0)
    return false;
  int64_t R = k->R, rows = k->nlines;
  bool logsm = c->op == TS_OP_LOG_SOFTMAX;
  volatile int stop = 0;
#pragma omp parallel for schedule(static) if (rows * R >= TS_PARALLEL_GRAIN && rows > 1)
  for (int64_t row = 0; row < rows; row++) {
    if (stop || (ts_interrupt_flag && (stop = 1))) continue;
    int64_t off[2] = {0, 0}, rem = row;
    for (int q = k->nd - 1; q >= 0; q--) {
      int64_t iq = rem % k->sizes[q];
      rem /= k->sizes[q];
      off[0] += iq * k->st[0][q], off[1] += iq * k->st[1][q];
    }
    ts_cpu_softmax_row_f32((const float *)k->base[0] + off[0], (float *)k->base[1] + off[1], R, logsm);
  }
  return !stop;
}

static ts_status k_scan(const ts_call *c) {
  kx k;
  kx_init(&k, c);
  if (softmax_rows_f32(c, &k)) return TS_OK;
  if (ts_interrupt_flag) return ts_check_interrupt();
  int64_t ntiles = tile_count(&k, TILE_W);
  if (ntiles == 0 || k.R == 0) return TS_OK;
  bool par = ntiles > 1 && k.nlines * k.R >= TS_PARALLEL_GRAIN;
  volatile int stop = 0;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t t = 0; t < ntiles; t++) {
    if (stop) continue;
    stage sg;
    char *ptr[3];
    int w = tile_ptrs(&k, t, TILE_W, ptr);
    if (scan_tile(&k, ptr, w, &sg)) stop = 1;
  }
  return stop ? ts_check_interrupt() : TS_OK;
}

void ts_cpu_register_reduce(ts_kernel *k) {
  for (int op = 0; op < TS_OP_COUNT; op++) {
    if (ts_ops[op].kind == TS_KIND_REDUCE) k[op] = k_reduce;
    if (ts_ops[op].kind == TS_KIND_SCAN) k[op] = k_scan;
  }
}
