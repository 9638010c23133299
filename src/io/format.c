/* Tensor to text, following PyTorch's torch/_tensor_str.py step by step so
 * the output matches character for character:
 *   - the elements shown (all of them, or with summarising the first and
 *     last `edgeitems` of each dim) are scanned once to choose one format:
 *     integer-valued floats as "1.", otherwise "%.4f", or "%.4e" when the
 *     nonzero finite magnitudes span more than 1000x, exceed 1e8 or (for
 *     non-integers) go below 1e-4; the width is the widest nonzero finite
 *     value (nan, inf and zeros do not widen it, as in PyTorch);
 *   - then printed right-aligned, rows wrapped to the line width, nested
 *     brackets indented under the first "[", n-1 newlines between the
 *     (n-1)-dim slices of an n-dim tensor;
 *   - then the suffixes (device, size, dtype, grad) are added, each on a new
 *     line when it would pass the line width.
 * Only the shown elements are ever read: printing a view of 1e12 elements
 * costs the same as printing one of 100. */
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

static ts_print_options print_opts = {4, 1000.0, 3, 80, -1};

ts_print_options ts_print_options_default(void) { return (ts_print_options){4, 1000.0, 3, 80, -1}; }

void ts_print_options_get(ts_print_options *o) { *o = print_opts; }

ts_status ts_print_options_set(const ts_print_options *o) {
  if (o->precision < 0 || o->precision > 100)
    return ts_fail(TS_ERR_ARG, "set_printoptions: precision must be in [0, 100], got %d", o->precision);
  if (isnan(o->threshold))
    return ts_fail(TS_ERR_ARG, "set_printoptions: threshold must be a number (math.huge prints everything), got nan");
  if (o->edgeitems < 0)
    return ts_fail(TS_ERR_ARG, "set_printoptions: edgeitems must be >= 0, got %lld", (long long)o->edgeitems);
  if (o->linewidth < 0)
    return ts_fail(TS_ERR_ARG, "set_printoptions: linewidth must be >= 0, got %lld", (long long)o->linewidth);
  if (o->sci_mode < -1 || o->sci_mode > 1)
    return ts_fail(TS_ERR_ARG, "set_printoptions: sci_mode must be -1 (auto), 0 or 1, got %d", o->sci_mode);
  print_opts = *o;
  return TS_OK;
}

/* ---- a growing string ------------------------------------------------------ */

typedef struct strbuf {
  char *p;
  size_t len, cap;
  bool oom; /* set once; later appends do nothing and the caller reports it */
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static void sb_str(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_rep(strbuf *b, char c, int64_t n) {
  char chunk[64];
  memset(chunk, c, sizeof chunk);
  for (; n > 0; n -= (int64_t)sizeof chunk) sb_add(b, chunk, n < (int64_t)sizeof chunk ? (size_t)n : sizeof chunk);
}

/* ---- which elements are shown, and where they are read --------------------- */

/* Dim d shows indices [0, head[d]) and [tail[d], sizes[d]); a summarised dim
 * has head < tail, a dim shown whole has head == tail == size. Element i of
 * dim d is read at base + (i >= tail[d] ? i - shift[d] : i) * strides[d]:
 * shift is 0 when reading the tensor itself, tail - head when reading a
 * compact CPU copy of the shown elements (tensors on other devices). */
typedef struct plan {
  int ndim;
  int64_t sizes[TS_MAX_DIMS];
  int64_t head[TS_MAX_DIMS], tail[TS_MAX_DIMS], shift[TS_MAX_DIMS];
  int64_t strides[TS_MAX_DIMS]; /* in elements */
  const char *base;             /* element (0, ..., 0) */
  ts_dtype dtype;
  size_t esize;
  bool summarize;
} plan;

static int64_t phys(const plan *p, int d, int64_t i) { return i >= p->tail[d] ? i - p->shift[d] : i; }

typedef void (*visit_fn)(void *ctx, const char *elem);

/* Calls fn on every shown element, in row-major order. */
static void walk(const plan *p, int d, int64_t off, visit_fn fn, void *ctx) {
  if (d == p->ndim) {
    fn(ctx, p->base + off * (int64_t)p->esize);
    return;
  }
  for (int64_t i = 0; i < p->head[d]; i++) walk(p, d + 1, off + phys(p, d, i) * p->strides[d], fn, ctx);
  for (int64_t i = p->tail[d]; i < p->sizes[d]; i++) walk(p, d + 1, off + phys(p, d, i) * p->strides[d], fn, ctx);
}

/* Copies the shown elements of t (on another device) into a compact CPU
 * tensor, one block per combination of head/tail ranges (at most 2^ndim),
 * so only they cross the bus. */
static ts_status gather_cpu(ts_tensor *t, const plan *p, ts_tensor **out) {
  int nd = t->ndim;
  int64_t csizes[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) csizes[d] = p->head[d] + (p->sizes[d] - p->tail[d]);
  ts_tensor *c;
  ts_status st = ts_tensor_empty(nd, csizes, t->dtype, TS_DEVICE_CPU, &c);
  if (st) return st;
  for (unsigned mask = 0; mask < (1u << nd); mask++) {
    int64_t bsizes[TS_MAX_DIMS], soff = t->offset, doff = c->offset;
    bool empty = false;
    for (int d = 0; d < nd; d++) {
      bool tail = mask & (1u << d);
      int64_t start = tail ? p->tail[d] : 0;
      bsizes[d] = tail ? p->sizes[d] - p->tail[d] : p->head[d];
      if (bsizes[d] == 0) empty = true;
      soff += start * t->strides[d];
      doff += (tail ? p->head[d] : 0) * c->strides[d];
    }
    if (empty) continue;
    ts_tensor *sv = NULL, *dv = NULL;
    if (!(st = ts_tensor_view_of(t, nd, bsizes, t->strides, soff, &sv)) &&
        !(st = ts_tensor_view_of(c, nd, bsizes, c->strides, doff, &dv)))
      st = ts_copy_(dv, sv);
    ts_tensor_release(sv);
    ts_tensor_release(dv);
    if (st) {
      ts_tensor_release(c);
      return st;
    }
  }
  *out = c;
  return TS_OK;
}

/* ---- the shared element format (PyTorch's _Formatter) ------------------------ */

#define VALUE_CHARS 512 /* "%.100f" of the largest double is 411 characters */

typedef struct formatter {
  ts_dtype dtype;
  bool floating;
  bool int_mode; /* floats: every nonzero finite shown value is an integer */
  bool sci_mode;
  int precision;
  int64_t max_width;
  /* scan state over the nonzero finite values */
  bool any;
  double amin, amax;
} formatter;

/* Writes one value without padding; returns its length. */
static int value_str(const formatter *f, const char *elem, char *buf) {
  if (f->dtype == TS_BOOL) return snprintf(buf, VALUE_CHARS, "%s", ts_load_i64(elem, f->dtype) ? "True" : "False");
  if (!f->floating) return snprintf(buf, VALUE_CHARS, "%lld", (long long)ts_load_i64(elem, f->dtype));
  double v = ts_load_f64(elem, f->dtype);
  if (isnan(v)) return snprintf(buf, VALUE_CHARS, "nan"); /* never "-nan", as Python */
  if (f->sci_mode) return snprintf(buf, VALUE_CHARS, "%.*e", f->precision, v);
  if (f->int_mode) return snprintf(buf, VALUE_CHARS, isinf(v) ? "%.0f" : "%.0f.", v);
  return snprintf(buf, VALUE_CHARS, "%.*f", f->precision, v);
}

static void scan_range(void *ctx, const char *elem) {
  formatter *f = ctx;
  double v = ts_load_f64(elem, f->dtype);
  if (!isfinite(v) || v == 0) return;
  double a = fabs(v);
  if (!f->any || a < f->amin) f->amin = a;
  if (!f->any || a > f->amax) f->amax = a;
  f->any = true;
  if (v != ceil(v)) f->int_mode = false;
}

static void scan_width(void *ctx, const char *elem) {
  formatter *f = ctx;
  if (f->floating) {
    double v = ts_load_f64(elem, f->dtype);
    if (!isfinite(v) || v == 0) return;
  }
  char buf[VALUE_CHARS];
  int64_t w = value_str(f, elem, buf);
  if (w > f->max_width) f->max_width = w;
}

static void formatter_init(formatter *f, const plan *p) {
  *f = (formatter){.dtype = p->dtype, .floating = ts_dtype_is_float(p->dtype), .int_mode = true,
                   .precision = print_opts.precision, .max_width = 1};
  if (!f->floating) {
    walk(p, 0, 0, scan_width, f);
    return;
  }
  walk(p, 0, 0, scan_range, f);
  if (!f->any) return; /* only zeros, nan and inf: PyTorch keeps the defaults, sci_mode option included */
  bool wide = f->amax / f->amin > 1000.0 || f->amax > 1.0e8;
  f->sci_mode = f->int_mode ? wide : wide || f->amin < 1.0e-4;
  walk(p, 0, 0, scan_width, f); /* an int_mode value_str already carries its "." */
  /* PyTorch forces the option after measuring, so the width may not fit the
   * forced format; int_mode stays what the values say (sci wins over it) */
  if (print_opts.sci_mode >= 0) f->sci_mode = print_opts.sci_mode;
}

/* ---- layout (PyTorch's _tensor_str_with_formatter and _vector_str) ------------ */

typedef struct emitter {
  const plan *p;
  const formatter *f;
  strbuf *b;
} emitter;

static void emit_value(const emitter *e, const char *elem) {
  char buf[VALUE_CHARS];
  int n = value_str(e->f, elem, buf);
  sb_rep(e->b, ' ', e->f->max_width - n);
  sb_add(e->b, buf, (size_t)n);
}

static const char *elem_at(const plan *p, int d, int64_t off, int64_t i) {
  return p->base + (off + phys(p, d, i) * p->strides[d]) * (int64_t)p->esize;
}

/* One row: `per_line` items a line, continuation lines under the first item. */
static void emit_vector(const emitter *e, int d, int64_t off, int64_t indent) {
  const plan *p = e->p;
  strbuf *b = e->b;
  sb_str(b, "[");
  if (p->summarize && print_opts.edgeitems == 0) {
    sb_str(b, "...]");
    return;
  }
  int64_t room = print_opts.linewidth - indent, per_line = room / (e->f->max_width + 2);
  if (per_line < 1) per_line = 1;
  int64_t k = 0;
#define SEP()                                   \
  do {                                          \
    if (k > 0 && k % per_line == 0) {           \
      sb_str(b, ",\n");                         \
      sb_rep(b, ' ', indent + 1);               \
    } else if (k > 0) {                         \
      sb_str(b, ", ");                          \
    }                                           \
    k++;                                        \
  } while (0)
  for (int64_t i = 0; i < p->head[d]; i++) {
    SEP();
    emit_value(e, elem_at(p, d, off, i));
  }
  if (p->head[d] < p->tail[d]) {
    SEP();
    sb_str(b, " ..."); /* an item of its own, not padded */
  }
  for (int64_t i = p->tail[d]; i < p->sizes[d]; i++) {
    SEP();
    emit_value(e, elem_at(p, d, off, i));
  }
#undef SEP
  sb_str(b, "]");
}

/* The sub-tensor at dim d (element offset off), its "[" at column indent. */
static void emit_tensor(const emitter *e, int d, int64_t off, int64_t indent) {
  const plan *p = e->p;
  int dim = p->ndim - d;
  if (dim == 0) {
    emit_value(e, p->base + off * (int64_t)p->esize);
    return;
  }
  if (dim == 1) {
    emit_vector(e, d, off, indent);
    return;
  }
  strbuf *b = e->b;
  int64_t k = 0;
  /* slices of an n-dim tensor are n-1 newlines apart: a blank line between matrices */
#define SEP()                        \
  do {                               \
    if (k++ > 0) {                   \
      sb_str(b, ",");                \
      sb_rep(b, '\n', dim - 1);      \
      sb_rep(b, ' ', indent + 1);    \
    }                                \
  } while (0)
  sb_str(b, "[");
  for (int64_t i = 0; i < p->head[d]; i++) {
    SEP();
    emit_tensor(e, d + 1, off + phys(p, d, i) * p->strides[d], indent + 1);
  }
  if (p->head[d] < p->tail[d]) {
    SEP();
    sb_str(b, "...");
  }
  for (int64_t i = p->tail[d]; i < p->sizes[d]; i++) {
    SEP();
    emit_tensor(e, d + 1, off + phys(p, d, i) * p->strides[d], indent + 1);
  }
#undef SEP
  sb_str(b, "]");
}

/* The values of a non-empty t, after the prefix. Fails only when t's values
 * cannot be brought to the CPU. */
static ts_status tensor_str(ts_tensor *t, int64_t indent, strbuf *b) {
  plan p = {.ndim = t->ndim, .dtype = t->dtype, .esize = ts_dtype_size(t->dtype)};
  p.summarize = (double)ts_numel(t) > print_opts.threshold;
  int64_t e = print_opts.edgeitems;
  for (int d = 0; d < t->ndim; d++) {
    int64_t n = t->sizes[d];
    p.sizes[d] = n;
    bool cut = p.summarize && n - e > e; /* n > 2e without overflow */
    p.head[d] = cut ? e : n;
    p.tail[d] = cut ? n - e : n;
  }
  ts_tensor *copy = NULL;
  if (t->device.type == TS_CPU) {
    p.base = ts_data(t);
    memcpy(p.strides, t->strides, sizeof p.strides);
  } else {
    ts_status st = gather_cpu(t, &p, &copy);
    if (st) return st;
    p.base = ts_data(copy);
    memcpy(p.strides, copy->strides, sizeof p.strides);
    for (int d = 0; d < t->ndim; d++) p.shift[d] = p.tail[d] - p.head[d];
  }
  formatter f;
  formatter_init(&f, &p);
  emitter em = {&p, &f, b};
  emit_tensor(&em, 0, 0, indent);
  ts_tensor_release(copy);
  return TS_OK;
}

/* PyTorch's _add_suffixes: ", s" on the same line while it fits. */
static void add_suffixes(strbuf *b, char (*suffixes)[288], int n, int64_t indent) {
  const char *nl = memrchr(b->p ? b->p : "", '\n', b->len);
  /* PyTorch counts len - rfind("\n") + 1, two more than the last line holds */
  int64_t last = (int64_t)b->len - (nl ? (int64_t)(nl - b->p) : -1) + 1;
  for (int i = 0; i < n; i++) {
    int64_t len = (int64_t)strlen(suffixes[i]);
    if (last + len + 2 > print_opts.linewidth) {
      sb_str(b, ",\n");
      sb_rep(b, ' ', indent);
      last = indent + len;
    } else {
      sb_str(b, ", ");
      last += len + 2;
    }
    sb_str(b, suffixes[i]);
  }
  sb_str(b, ")");
}

ts_status ts_tensor_format(ts_tensor *t, const char *grad_fn_name, char **out, size_t *len) {
  static const char prefix[] = "tensor(";
  const int64_t indent = sizeof prefix - 1;
  char suffixes[5][288]; /* the longest is a size of 8 dims of 20 digits */
  int ns = 0;
  char shape[256], dev[32];
  ts_shape_str(t->ndim, t->sizes, shape, sizeof shape);
  ts_device_str(t->device, dev, sizeof dev);
  const char *dtype = ts_dtype_name(t->dtype);
  strbuf b = {0};
  sb_str(&b, prefix);

  if (t->device.type != TS_CPU) snprintf(suffixes[ns++], sizeof suffixes[0], "device='%s'", dev);
  if (ts_numel(t) == 0) {
    /* no values to tell the dtype by, so any but the default is named */
    if (t->ndim != 1) snprintf(suffixes[ns++], sizeof suffixes[0], "size=%s", shape);
    if (t->dtype != TS_DEFAULT_DTYPE) snprintf(suffixes[ns++], sizeof suffixes[0], "dtype=torch.%s", dtype);
    sb_str(&b, "[]");
  } else if (tensor_str(t, indent, &b) == TS_OK) {
    if (print_opts.edgeitems == 0) snprintf(suffixes[ns++], sizeof suffixes[0], "size=%s", shape);
    if (t->dtype != TS_FLOAT32 && t->dtype != TS_INT64 && t->dtype != TS_BOOL)
      snprintf(suffixes[ns++], sizeof suffixes[0], "dtype=torch.%s", dtype);
  } else {
    /* the values live where this build cannot read them: say what the tensor is */
    b.len = indent;
    if (b.p) b.p[b.len] = 0;
    sb_str(&b, "<values not readable here: ");
    sb_str(&b, ts_last_error());
    sb_str(&b, ">");
    snprintf(suffixes[ns++], sizeof suffixes[0], "size=%s", shape);
    snprintf(suffixes[ns++], sizeof suffixes[0], "dtype=torch.%s", dtype);
  }
  if (grad_fn_name) snprintf(suffixes[ns++], sizeof suffixes[0], "grad_fn=<%.200s>", grad_fn_name);
  else if (t->requires_grad) snprintf(suffixes[ns++], sizeof suffixes[0], "requires_grad=True");
  add_suffixes(&b, suffixes, ns, indent);

  if (b.oom) {
    free(b.p);
    return ts_fail(TS_ERR_OOM, "print: out of memory formatting a tensor of shape %s; "
                   "torch.set_printoptions({threshold = 1000}) summarises large tensors", shape);
  }
  *out = b.p;
  *len = b.len;
  return TS_OK;
}
