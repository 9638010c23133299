/* CPU kernels for joining, indexing and sorting (contracts in ops_index.def).
 * Most of these move whole elements without looking at them, so they copy
 * bytes by element size and serve every dtype; only scatter-add, sort and
 * unique read values. Every index read from a tensor is bounds-checked here:
 * a bad one ends the kernel with TS_ERR_INDEX, never an out-of-bounds access. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline void copy_elem(char *dst, const char *src, size_t es) {
  switch (es) { /* constant sizes compile to single moves */
  case 1: memcpy(dst, src, 1); break;
  case 2: memcpy(dst, src, 2); break;
  case 4: memcpy(dst, src, 4); break;
  default: memcpy(dst, src, 8); break;
  }
}

static inline bool elem_nonzero(const char *p, ts_dtype dt) {
  switch (dt) {
  case TS_FLOAT32: return *(const float *)p != 0;
  case TS_FLOAT64: return *(const double *)p != 0;
  case TS_FLOAT16: return ts_half_to_float(*(const uint16_t *)p) != 0; /* -0.0 is zero */
  case TS_BFLOAT16: return ts_bf16_to_float(*(const uint16_t *)p) != 0;
  case TS_INT64: return *(const int64_t *)p != 0;
  case TS_INT32: return *(const int32_t *)p != 0;
  case TS_INT16: return *(const int16_t *)p != 0;
  default: return *(const uint8_t *)p != 0; /* int8, uint8, bool */
  }
}

/* dst += src in dtype dt; integers wrap as in torch, bool adds as logical or. */
static inline void add_elem(char *dst, const char *src, ts_dtype dt) {
  switch (dt) {
  case TS_FLOAT32: *(float *)dst += *(const float *)src; break;
  case TS_FLOAT64: *(double *)dst += *(const double *)src; break;
  case TS_FLOAT16:
    *(uint16_t *)dst = ts_float_to_half(ts_half_to_float(*(uint16_t *)dst) + ts_half_to_float(*(const uint16_t *)src));
    break;
  case TS_BFLOAT16:
    *(uint16_t *)dst = ts_float_to_bf16(ts_bf16_to_float(*(uint16_t *)dst) + ts_bf16_to_float(*(const uint16_t *)src));
    break;
  case TS_INT64: *(int64_t *)dst = (int64_t)((uint64_t) * (int64_t *)dst + (uint64_t) * (const int64_t *)src); break;
  case TS_INT32: *(int32_t *)dst = (int32_t)((uint32_t) * (int32_t *)dst + (uint32_t) * (const int32_t *)src); break;
  case TS_INT16: *(int16_t *)dst = (int16_t)((uint16_t) * (int16_t *)dst + (uint16_t) * (const int16_t *)src); break;
  case TS_INT8: *(int8_t *)dst = (int8_t)((uint8_t) * (int8_t *)dst + (uint8_t) * (const int8_t *)src); break;
  case TS_UINT8: *(uint8_t *)dst = (uint8_t)(*(uint8_t *)dst + *(const uint8_t *)src); break;
  default: *(uint8_t *)dst = *(uint8_t *)dst || *(const uint8_t *)src; break;
  }
}

/* ts_iter_run on one thread, in row-major order: for loops whose result
 * depends on order (running counters) or that write through indices
 * (duplicate indices would race). */
static void run_serial(const ts_iter *it, ts_loop fn, void *ctx) {
  if (it->numel == 0) return;
  int nd = it->ndim;
  int64_t idx[TS_MAX_DIMS] = {0}, inner[TS_ITER_MAX_OPS];
  for (int k = 0; k < it->nops; k++) inner[k] = it->strides[k][nd - 1];
  int64_t rows = it->numel / it->sizes[nd - 1];
  for (int64_t r = 0; r < rows; r++) {
    char *p[TS_ITER_MAX_OPS];
    for (int k = 0; k < it->nops; k++) {
      p[k] = it->data[k];
      for (int d = 0; d < nd - 1; d++) p[k] += idx[d] * it->strides[k][d];
    }
    fn(p, inner, it->sizes[nd - 1], ctx);
    for (int d = nd - 2; d >= 0; d--) {
      if (++idx[d] < it->sizes[d]) break;
      idx[d] = 0;
    }
  }
}

/* ---- cat ---------------------------------------------------------------- */

static void copy_loop(char **d, const int64_t *s, int64_t n, void *ctx) {
  size_t es = *(const size_t *)ctx;
  if (s[0] == (int64_t)es && s[1] == (int64_t)es) { /* both rows dense (a cat of rows: attention's q, k, v gradients) */
    memcpy(d[0], d[1], (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; i++) copy_elem(d[0] + i * s[0], d[1] + i * s[1], es);
}

static ts_status k_cat(const ts_call *c) {
  ts_tensor *out = c->out[0];
  int dim = (int)c->i[0];
  size_t es = ts_dtype_size(out->dtype);
  int64_t pos = 0;
  for (int k = 0; k < c->nin; k++) {
    ts_tensor *in = c->in[k], part = *out; /* part: out's slice that in fills */
    part.sizes[dim] = in->sizes[dim];
    part.offset = out->offset + pos * out->strides[dim];
    pos += in->sizes[dim];
    if (ts_numel(in) == 0) continue;
    ts_tensor *ops[2] = {&part, in};
    ts_iter it;
    ts_iter_init(&it, 2, ops);
    ts_status st = ts_iter_run(&it, copy_loop, &es);
    if (st) return st;
  }
  return TS_OK;
}

/* ---- gather and scatter -------------------------------------------------- */

typedef struct idx_ctx {
  size_t es;
  ts_dtype dtype;
  int64_t size;   /* the indexed dim's size: valid indices are [0, size) */
  int64_t stride; /* the indexed dim's stride, in bytes */
  int wrap;       /* negative indices count from the end */
  volatile int err;
  int64_t bad;    /* one offending index (any, when several threads find one) */
} idx_ctx;

static inline bool fix_index(idx_ctx *x, int64_t *j) {
  int64_t v = *j;
  if (v < 0 && x->wrap) v += x->size;
  if (v < 0 || v >= x->size) {
    x->bad = *j;
    x->err = 1;
    return false;
  }
  *j = v;
  return true;
}

/* d: out, index, source (a view of in[0] with stride 0 along dim) */
static void gather_loop(char **d, const int64_t *s, int64_t n, void *vctx) {
  idx_ctx *x = vctx;
  if (s[1] == 0) { /* one index for the whole run (index_select's rows: x:index_select(0, batch)) */
    int64_t j = *(const int64_t *)d[1];
    if (!fix_index(x, &j)) return;
    const char *src = d[2] + j * x->stride;
    if (s[0] == (int64_t)x->es && s[2] == (int64_t)x->es) memcpy(d[0], src, (size_t)n * x->es);
    else
      for (int64_t i = 0; i < n; i++) copy_elem(d[0] + i * s[0], src + i * s[2], x->es);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t j = *(const int64_t *)(d[1] + i * s[1]);
    if (fix_index(x, &j)) copy_elem(d[0] + i * s[0], d[2] + i * s[2] + j * x->stride, x->es);
  }
}

/* d: destination (a view of out with stride 0 along dim), index, source */
static void scatter_loop(char **d, const int64_t *s, int64_t n, void *vctx) {
  idx_ctx *x = vctx;
  for (int64_t i = 0; i < n; i++) {
    int64_t j = *(const int64_t *)(d[1] + i * s[1]);
    if (fix_index(x, &j)) copy_elem(d[0] + i * s[0] + j * x->stride, d[2] + i * s[2], x->es);
  }
}

static void scatter_add_loop(char **d, const int64_t *s, int64_t n, void *vctx) {
  idx_ctx *x = vctx;
  /* one index for a dense run (embedding_backward's rows: r[idx[j]] += g[j]):
   * a loop the compiler vectorises, where the element loop spent 1.1 ms of
   * the LSTM bench's step on 2048 rows of 256 */
  if (s[1] == 0 && s[0] == s[2] && s[0] == (int64_t)x->es && (x->dtype == TS_FLOAT32 || x->dtype == TS_FLOAT64)) {
    int64_t j = *(const int64_t *)d[1];
    if (!fix_index(x, &j)) return;
    char *o = d[0] + j * x->stride;
    if (x->dtype == TS_FLOAT32)
      for (int64_t i = 0; i < n; i++) ((float *)o)[i] += ((const float *)d[2])[i];
    else
      for (int64_t i = 0; i < n; i++) ((double *)o)[i] += ((const double *)d[2])[i];
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t j = *(const int64_t *)(d[1] + i * s[1]);
    if (fix_index(x, &j)) add_elem(d[0] + i * s[0] + j * x->stride, d[2] + i * s[2], x->dtype);
  }
}

static ts_status index_error(const idx_ctx *x, int dim) {
  return ts_fail(TS_ERR_INDEX, "index %lld is out of bounds for dimension %d with size %lld", (long long)x->bad, dim,
                 (long long)x->size);
}

static ts_status k_gather(const ts_call *c) {
  ts_tensor *out = c->out[0], *src = c->in[0], *index = c->in[1];
  int dim = (int)c->i[0];
  idx_ctx x = {.es = ts_dtype_size(src->dtype), .dtype = src->dtype, .size = src->sizes[dim],
               .stride = src->strides[dim] * (int64_t)ts_dtype_size(src->dtype), .wrap = (int)c->i[1]};
  ts_tensor v = *src; /* src walked over out's positions; the index supplies the offset along dim */
  memcpy(v.sizes, out->sizes, sizeof v.sizes);
  v.strides[dim] = 0;
  ts_tensor *ops[3] = {out, index, &v};
  ts_iter it;
  ts_iter_init(&it, 3, ops);
  ts_status st = ts_iter_run(&it, gather_loop, &x);
  if (st) return st;
  return x.err ? index_error(&x, dim) : TS_OK;
}

static ts_status k_scatter(const ts_call *c) {
  ts_tensor *out = c->out[0], *index = c->in[0], *src = c->in[1];
  int dim = (int)c->i[0];
  idx_ctx x = {.es = ts_dtype_size(out->dtype), .dtype = out->dtype, .size = out->sizes[dim],
               .stride = out->strides[dim] * (int64_t)ts_dtype_size(out->dtype), .wrap = (int)c->i[2]};
  ts_tensor dst = *out, sv = *src; /* both walked over the index's positions */
  memcpy(dst.sizes, index->sizes, sizeof dst.sizes);
  dst.strides[dim] = 0;
  memcpy(sv.sizes, index->sizes, sizeof sv.sizes);
  ts_tensor *ops[3] = {&dst, index, &sv};
  ts_iter it;
  ts_iter_init(&it, 3, ops);
  run_serial(&it, c->i[1] ? scatter_add_loop : scatter_loop, &x); /* serial: duplicate indices must not race */
  return x.err ? index_error(&x, dim) : TS_OK;
}

/* ---- masks ------------------------------------------------------------- */

typedef struct mask_ctx {
  size_t es;
  int64_t step;   /* bytes from one element of flat to the next: 0 repeats one value */
  char *flat;     /* the contiguous side: masked_select's output, masked_scatter's source */
  int64_t count;  /* elements of flat used so far */
  int64_t limit;  /* elements flat holds */
} mask_ctx;

/* d: x, mask */
static void masked_select_loop(char **d, const int64_t *s, int64_t n, void *vctx) {
  mask_ctx *m = vctx;
  for (int64_t i = 0; i < n; i++)
    if (*(const uint8_t *)(d[1] + i * s[1])) {
      if (m->count < m->limit) copy_elem(m->flat + m->count * m->step, d[0] + i * s[0], m->es);
      m->count++;
    }
}

/* d: out, mask */
static void masked_scatter_loop(char **d, const int64_t *s, int64_t n, void *vctx) {
  mask_ctx *m = vctx;
  for (int64_t i = 0; i < n; i++)
    if (*(const uint8_t *)(d[1] + i * s[1])) {
      if (m->count < m->limit) copy_elem(d[0] + i * s[0], m->flat + m->count * m->step, m->es);
      m->count++;
    }
}

static ts_status k_masked_select(const ts_call *c) {
  ts_tensor *out = c->out[0];
  mask_ctx m = {ts_dtype_size(out->dtype), (int64_t)ts_dtype_size(out->dtype), ts_data(out), 0, ts_numel(out)};
  ts_iter it;
  ts_iter_init(&it, 2, c->in);
  run_serial(&it, masked_select_loop, &m);
  if (m.count != m.limit)
    return ts_fail(TS_ERR_SHAPE, "masked_select: mask selects %lld elements but the output holds %lld",
                   (long long)m.count, (long long)m.limit);
  return TS_OK;
}

static ts_status k_masked_scatter(const ts_call *c) {
  ts_tensor *out = c->out[0], *src = c->in[1];
  bool fill = c->i[0] != 0;
  mask_ctx m = {ts_dtype_size(out->dtype), fill ? 0 : (int64_t)ts_dtype_size(out->dtype), ts_data(src), 0,
                fill ? INT64_MAX : ts_numel(src)};
  ts_tensor *ops[2] = {out, c->in[0]};
  ts_iter it;
  ts_iter_init(&it, 2, ops);
  run_serial(&it, masked_scatter_loop, &m);
  if (m.count > m.limit)
    return ts_fail(TS_ERR_SHAPE, "masked_scatter: mask selects %lld elements but the source has only %lld",
                   (long long)m.count, (long long)m.limit);
  return TS_OK;
}

/* ---- nonzero ------------------------------------------------------------ */

static void count_loop(char **d, const int64_t *s, int64_t n, void *vctx) {
  ts_loop_ctx *ctx = vctx;
  ts_dtype dt = (ts_dtype)ctx->i[0];
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) k += elem_nonzero(d[0] + i * s[0], dt);
  ctx->i[1] += k;
}

static ts_status k_nonzero(const ts_call *c) {
  ts_tensor *x = c->in[0], *out = c->out[0];
  if (c->i[0]) { /* count */
    ts_loop_ctx ctx = {.i = {x->dtype, 0}};
    ts_iter it;
    ts_iter_init(&it, 1, &x);
    run_serial(&it, count_loop, &ctx);
    *(int64_t *)ts_data(out) = ctx.i[1];
    return TS_OK;
  }
  int nd = x->ndim;
  int64_t n = ts_numel(x), row = 0, off = 0, idx[TS_MAX_DIMS] = {0};
  size_t es = ts_dtype_size(x->dtype);
  const char *base = ts_data(x);
  int64_t *o = ts_data(out); /* (limit, nd), contiguous */
  for (int64_t e = 0; e < n; e++) {
    if (elem_nonzero(base + off * (int64_t)es, x->dtype)) {
      if (row < out->sizes[0])
        for (int d = 0; d < nd; d++) o[row * nd + d] = idx[d];
      row++;
    }
    for (int d = nd - 1; d >= 0; d--) {
      off += x->strides[d];
      if (++idx[d] < x->sizes[d]) break;
      off -= x->strides[d] * x->sizes[d];
      idx[d] = 0;
    }
  }
  if (row != out->sizes[0])
    return ts_fail(TS_ERR_SHAPE, "nonzero: found %lld non-zeros but the output holds %lld", (long long)row,
                   (long long)out->sizes[0]);
  return TS_OK;
}

/* ---- sort and topk ------------------------------------------------------ */

/* Keys are read exactly: floats of every width fit a double, integers an int64. */
typedef struct fkey { double k; int64_t i; } fkey;
typedef struct ikey { int64_t k; int64_t i; } ikey;

/* NaN sorts as the largest value, as in torch. */
#define F_ASC(a, b) (!isnan((a).k) && (isnan((b).k) || (a).k < (b).k))
#define F_DESC(a, b) ((isnan((a).k) && !isnan((b).k)) || (a).k > (b).k)
#define I_ASC(a, b) ((a).k < (b).k)
#define I_DESC(a, b) ((a).k > (b).k)

/* Bottom-up merge sort of v[0..n) with scratch tmp[0..n); stable: on ties
 * the left run goes first. Returns the array holding the result. */
#define MERGESORT(NAME, K, BEFORE)                                            \
  static K *NAME(K *v, K *tmp, int64_t n) {                                   \
    for (int64_t w = 1; w < n; w *= 2) {                                      \
      for (int64_t lo = 0; lo < n; lo += 2 * w) {                             \
        int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n; \
        int64_t a = lo, b = mid, o = lo;                                      \
        while (a < mid && b < hi) tmp[o++] = BEFORE(v[b], v[a]) ? v[b++] : v[a++]; \
        while (a < mid) tmp[o++] = v[a++];                                    \
        while (b < hi) tmp[o++] = v[b++];                                     \
      }                                                                       \
      K *t = v;                                                               \
      v = tmp;                                                                \
      tmp = t;                                                                \
    }                                                                         \
    return v;                                                                 \
  }
MERGESORT(sort_f_asc, fkey, F_ASC)
MERGESORT(sort_f_desc, fkey, F_DESC)
MERGESORT(sort_i_asc, ikey, I_ASC)
MERGESORT(sort_i_desc, ikey, I_DESC)

/* One sort over rows along dim: x (..., n, ...) -> the first k of the sorted
 * order into vals and inds (..., k, ...). Rows run in parallel. */
static ts_status k_sort(const ts_call *c) {
  ts_tensor *x = c->in[0], *vals = c->out[0], *inds = c->out[1];
  int dim = (int)c->i[0], desc = (int)c->i[1], nd = x->ndim;
  int64_t n = x->sizes[dim], k = vals->sizes[dim];
  if (n == 0 || ts_numel(vals) == 0) return TS_OK;
  int64_t rows = ts_numel(x) / n;
  ts_dtype dt = x->dtype;
  bool is_float = ts_dtype_is_float(dt);
  size_t es = ts_dtype_size(dt), ks = is_float ? sizeof(fkey) : sizeof(ikey);
  volatile int oom = 0;
#pragma omp parallel if (rows > 1 && rows * n > TS_PARALLEL_GRAIN)
  {
    char *buf = malloc(2 * (size_t)n * ks);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
      if (!buf) {
        oom = 1;
        continue;
      }
      int64_t rem = r, xo = 0, vo = 0, io = 0; /* element offsets of this row */
      for (int d = nd - 1; d >= 0; d--) {
        if (d == dim) continue;
        int64_t j = rem % x->sizes[d];
        rem /= x->sizes[d];
        xo += j * x->strides[d], vo += j * vals->strides[d], io += j * inds->strides[d];
      }
      const char *xb = (const char *)ts_data(x) + xo * (int64_t)es;
      int64_t xs = x->strides[dim] * (int64_t)es;
      char *vb = (char *)ts_data(vals) + vo * (int64_t)es;
      int64_t *ib = (int64_t *)ts_data(inds) + io;
      if (is_float) {
        fkey *v = (fkey *)buf;
        for (int64_t j = 0; j < n; j++) v[j] = (fkey){ts_load_f64(xb + j * xs, dt), j};
        v = desc ? sort_f_desc(v, v + n, n) : sort_f_asc(v, v + n, n);
        for (int64_t j = 0; j < k; j++) {
          copy_elem(vb + j * vals->strides[dim] * (int64_t)es, xb + v[j].i * xs, es);
          ib[j * inds->strides[dim]] = v[j].i;
        }
      } else {
        ikey *v = (ikey *)buf;
        for (int64_t j = 0; j < n; j++) v[j] = (ikey){ts_load_i64(xb + j * xs, dt), j};
        v = desc ? sort_i_desc(v, v + n, n) : sort_i_asc(v, v + n, n);
        for (int64_t j = 0; j < k; j++) {
          copy_elem(vb + j * vals->strides[dim] * (int64_t)es, xb + v[j].i * xs, es);
          ib[j * inds->strides[dim]] = v[j].i;
        }
      }
    }
    free(buf);
  }
  if (oom) return ts_fail(TS_ERR_OOM, "%s: out of memory for a row of %lld elements", ts_ops[c->op].name, (long long)n);
  return TS_OK;
}

/* ---- unique ------------------------------------------------------------- */

/* Equal as values: NaN differs from everything (each NaN is its own value,
 * as in torch's sort-based unique), -0.0 equals 0.0. */
static inline bool same_value(const char *a, const char *b, ts_dtype dt) {
  if (ts_dtype_is_float(dt)) return ts_load_f64(a, dt) == ts_load_f64(b, dt);
  return ts_load_i64(a, dt) == ts_load_i64(b, dt);
}

static ts_status k_unique(const ts_call *c) {
  ts_tensor *sorted = c->in[0], *pos = c->in[1];
  ts_dtype dt = sorted->dtype;
  size_t es = ts_dtype_size(dt);
  int64_t n = sorted->sizes[0], ss = sorted->strides[0] * (int64_t)es, ps = pos->strides[0];
  const char *v = ts_data(sorted);
  const int64_t *p = ts_data(pos);
  if (c->i[0]) {
    int64_t u = n > 0;
    for (int64_t j = 1; j < n; j++) u += !same_value(v + j * ss, v + (j - 1) * ss, dt);
    *(int64_t *)ts_data(c->out[0]) = u;
    return TS_OK;
  }
  ts_tensor *vals = c->out[0], *inv = c->out[1], *counts = c->out[2];
  int64_t u = vals->sizes[0], g = -1;
  for (int64_t j = 0; j < n; j++) {
    if (j == 0 || !same_value(v + j * ss, v + (j - 1) * ss, dt)) {
      if (++g >= u) return ts_fail(TS_ERR_SHAPE, "unique: more distinct values than the output holds");
      copy_elem((char *)ts_data(vals) + g * vals->strides[0] * (int64_t)es, v + j * ss, es);
      if (counts) ((int64_t *)ts_data(counts))[g * counts->strides[0]] = 0;
    }
    if (counts) ((int64_t *)ts_data(counts))[g * counts->strides[0]]++;
    if (inv) {
      int64_t at = p[j * ps];
      if (at < 0 || at >= n) return ts_fail(TS_ERR_INDEX, "unique: position %lld out of range", (long long)at);
      ((int64_t *)ts_data(inv))[at * inv->strides[0]] = g;
    }
  }
  return TS_OK;
}

void ts_cpu_register_index(ts_kernel *k) {
  k[TS_OP_CAT] = k_cat;
  k[TS_OP_GATHER] = k_gather;
  k[TS_OP_SCATTER] = k_scatter;
  k[TS_OP_MASKED_SELECT] = k_masked_select;
  k[TS_OP_MASKED_SCATTER] = k_masked_scatter;
  k[TS_OP_NONZERO] = k_nonzero;
  k[TS_OP_SORT] = k_sort;
  k[TS_OP_TOPK] = k_sort;
  k[TS_OP_UNIQUE] = k_unique;
}
