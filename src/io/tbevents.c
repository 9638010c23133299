/* TensorBoard event files (see tbevents.h). The protobuf messages are written
 * by hand; their field numbers follow tensorflow/core/util/event.proto,
 * framework/summary.proto, tensor.proto and tensor_shape.proto:
 *   Event        { 1 wall_time double, 2 step int64, 3 file_version string, 5 summary }
 *   Summary      { 1 value repeated Value }
 *   Value        { 1 tag, 2 simple_value float, 4 image, 5 histo, 8 tensor, 9 metadata }
 *   Image        { 1 height, 2 width, 3 colorspace (int32s), 4 encoded_image_string }
 *   Histogram    { 1 min, 2 max, 3 num, 4 sum, 5 sum_squares (doubles),
 *                  6 bucket_limit, 7 bucket (packed repeated doubles) }
 *   Metadata     { 1 plugin_data { 1 plugin_name, 2 content } }
 *   TensorProto  { 1 dtype (DT_STRING = 7), 2 tensor_shape { 2 dim { 1 size } }, 8 string_val }
 * Each Event is one TFRecord: u64 length, u32 masked crc(length), data,
 * u32 masked crc(data), all little-endian. */
#include "tbevents.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* ---- CRC32C ----------------------------------------------------------- */

static uint32_t crc_table[256];
static atomic_int crc_ready;

static void crc_init(void) {
  /* racing initialisers compute the same table, so no lock is needed */
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_table[i] = c;
  }
  atomic_store(&crc_ready, 1);
}

uint32_t ts_crc32c(uint32_t crc, const void *data, size_t n) {
  if (!atomic_load(&crc_ready)) crc_init();
  const uint8_t *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t ts_crc32c_masked(const void *data, size_t n) {
  uint32_t c = ts_crc32c(0, data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

double ts_tb_now(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static double monotonic(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- protobuf encoding ------------------------------------------------ */

/* A growing byte buffer; `oom` is sticky so a message is built without a
 * check per field and checked once when it is written. */
typedef struct pb {
  uint8_t *p;
  size_t len, cap;
  bool oom;
} pb;

enum { WIRE_VARINT = 0, WIRE_64 = 1, WIRE_LEN = 2, WIRE_32 = 5 };

static void pb_put(pb *b, const void *d, size_t n) {
  if (b->oom) return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n) {
      if (cap > SIZE_MAX / 2) { b->oom = true; return; }
      cap *= 2;
    }
    uint8_t *q = realloc(b->p, cap);
    if (!q) { b->oom = true; return; }
    b->p = q, b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, d, n);
  b->len += n;
}

static void pb_free(pb *b) { free(b->p), *b = (pb){0}; }

static void pb_varint(pb *b, uint64_t v) {
  uint8_t buf[10];
  int n = 0;
  do {
    buf[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) buf[n] |= 0x80;
    n++;
  } while (v);
  pb_put(b, buf, (size_t)n);
}

static void pb_key(pb *b, int field, int wire) { pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

static void put_le(pb *b, uint64_t v, int nbytes) {
  uint8_t buf[8];
  for (int i = 0; i < nbytes; i++) buf[i] = (uint8_t)(v >> (8 * i));
  pb_put(b, buf, (size_t)nbytes);
}

static uint64_t double_bits(double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  return u;
}

static void pb_double(pb *b, int field, double v) {
  pb_key(b, field, WIRE_64);
  put_le(b, double_bits(v), 8);
}

static void pb_float(pb *b, int field, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  pb_key(b, field, WIRE_32);
  put_le(b, u, 4);
}

static void pb_int(pb *b, int field, int64_t v) { /* int64 and enums: negative values take 10 bytes */
  pb_key(b, field, WIRE_VARINT);
  pb_varint(b, (uint64_t)v);
}

static void pb_bytes(pb *b, int field, const void *d, size_t n) {
  pb_key(b, field, WIRE_LEN);
  pb_varint(b, n);
  pb_put(b, d, n);
}

static void pb_str(pb *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* appends sub as a length-delimited field and frees it */
static void pb_msg(pb *b, int field, pb *sub) {
  if (sub->oom) b->oom = true;
  pb_bytes(b, field, sub->p, sub->len);
  pb_free(sub);
}

static void pb_packed_doubles(pb *b, int field, const double *v, int64_t n) {
  pb_key(b, field, WIRE_LEN);
  pb_varint(b, (uint64_t)n * 8);
  for (int64_t i = 0; i < n; i++) put_le(b, double_bits(v[i]), 8);
}

/* ---- the writer ------------------------------------------------------- */

typedef struct tb_child {
  char *key;         /* the add_scalars sub-run directory's name */
  ts_tb_writer *w;
} tb_child;

struct ts_tb_writer {
  FILE *f;
  char *logdir;
  char *path;        /* the event file */
  double flush_secs; /* <= 0: flush only when asked or when stdio's buffer fills */
  double last_flush; /* monotonic seconds */
  int nchildren;
  tb_child *children;
};

const char *ts_tb_writer_path(const ts_tb_writer *w) { return w->path; }
const char *ts_tb_writer_logdir(const ts_tb_writer *w) { return w->logdir; }

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* mkdir -p */
static ts_status make_dirs(const char *dir) {
  char *buf = dup_str(dir);
  if (!buf) return ts_fail(TS_ERR_OOM, "SummaryWriter: out of memory");
  for (char *p = buf + 1;; p++) {
    if (*p != '/' && *p != 0) continue;
    char c = *p;
    *p = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
      int e = errno;
      ts_status st = ts_fail(TS_ERR_IO, "SummaryWriter: cannot create directory '%s': %s", buf, strerror(e));
      free(buf);
      return st;
    }
    *p = c;
    if (!c) break;
  }
  free(buf);
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return ts_fail(TS_ERR_IO, "SummaryWriter: '%s' exists and is not a directory; choose another log_dir", dir);
  return TS_OK;
}

static ts_status write_event(ts_tb_writer *w, const char *fn, pb *ev) {
  if (ev->oom) {
    pb_free(ev);
    return ts_fail(TS_ERR_OOM, "%s: out of memory building the event", fn);
  }
  uint8_t head[12];
  uint64_t n = ev->len;
  for (int i = 0; i < 8; i++) head[i] = (uint8_t)(n >> (8 * i));
  uint32_t hc = ts_crc32c_masked(head, 8), dc = ts_crc32c_masked(ev->p, ev->len);
  uint8_t tail[4];
  for (int i = 0; i < 4; i++) head[8 + i] = (uint8_t)(hc >> (8 * i)), tail[i] = (uint8_t)(dc >> (8 * i));
  errno = 0;
  bool ok = fwrite(head, 1, 12, w->f) == 12 && fwrite(ev->p, 1, ev->len, w->f) == ev->len &&
            fwrite(tail, 1, 4, w->f) == 4;
  pb_free(ev);
  if (!ok) return ts_fail(TS_ERR_IO, "%s: cannot write '%s': %s", fn, w->path, errno ? strerror(errno) : "write error");
  if (w->flush_secs > 0 && monotonic() - w->last_flush >= w->flush_secs) {
    w->last_flush = monotonic();
    if (fflush(w->f) != 0) return ts_fail(TS_ERR_IO, "%s: cannot write '%s': %s", fn, w->path, strerror(errno));
  }
  return TS_OK;
}

/* The Event around one Summary.Value (which it frees). */
static ts_status write_value(ts_tb_writer *w, const char *fn, pb *value, int64_t step, double walltime) {
  pb summary = {0}, ev = {0};
  pb_msg(&summary, 1, value);
  pb_double(&ev, 1, walltime);
  if (step != 0) pb_int(&ev, 2, step); /* proto3 leaves zeros out */
  pb_msg(&ev, 5, &summary);
  return write_event(w, fn, &ev);
}

static void writer_free(ts_tb_writer *w) {
  if (w->f) fclose(w->f);
  free(w->logdir), free(w->path), free(w->children), free(w);
}

ts_status ts_tb_writer_open(const char *logdir, double flush_secs, ts_tb_writer **out) {
  static atomic_int counter;
  if (!logdir || !*logdir) return ts_fail(TS_ERR_ARG, "SummaryWriter: log_dir must be a non-empty path");
  ts_status st = make_dirs(logdir);
  if (st) return st;
  char host[256] = "localhost";
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = 0;
  ts_tb_writer *w = calloc(1, sizeof *w);
  size_t n = strlen(logdir) + strlen(host) + 96;
  if (!w || !(w->logdir = dup_str(logdir)) || !(w->path = malloc(n))) {
    if (w) writer_free(w);
    return ts_fail(TS_ERR_OOM, "SummaryWriter: out of memory");
  }
  double now = ts_tb_now();
  snprintf(w->path, n, "%s/events.out.tfevents.%010lld.%s.%lld.%d", logdir, (long long)now, host,
           (long long)getpid(), atomic_fetch_add(&counter, 1));
  w->f = fopen(w->path, "wb");
  if (!w->f) {
    st = ts_fail(TS_ERR_IO, "SummaryWriter: cannot create '%s': %s", w->path, strerror(errno));
    writer_free(w);
    return st;
  }
  w->flush_secs = flush_secs;
  w->last_flush = monotonic();
  pb ev = {0};
  pb_double(&ev, 1, now);
  pb_str(&ev, 3, "brain.Event:2");
  st = write_event(w, "SummaryWriter", &ev);
  /* the header goes out at once, so TensorBoard lists the run right away */
  if (!st && fflush(w->f) != 0) st = ts_fail(TS_ERR_IO, "SummaryWriter: cannot write '%s': %s", w->path, strerror(errno));
  if (st) {
    writer_free(w);
    return st;
  }
  *out = w;
  return TS_OK;
}

ts_status ts_tb_add_scalar(ts_tb_writer *w, const char *tag, double value, int64_t step, double walltime) {
  pb v = {0};
  pb_str(&v, 1, tag);
  pb_float(&v, 2, (float)value);
  return write_value(w, "add_scalar", &v, step, walltime);
}

/* The writer of add_scalars' sub-run `key`, opened on first use. */
static ts_status child_writer(ts_tb_writer *w, const char *key, ts_tb_writer **out) {
  for (int i = 0; i < w->nchildren; i++)
    if (strcmp(w->children[i].key, key) == 0) return *out = w->children[i].w, TS_OK;
  tb_child *c = realloc(w->children, sizeof *c * (size_t)(w->nchildren + 1));
  if (!c) return ts_fail(TS_ERR_OOM, "add_scalars: out of memory");
  w->children = c;
  size_t n = strlen(w->logdir) + strlen(key) + 2;
  char *dir = malloc(n), *k = dup_str(key);
  if (!dir || !k) {
    free(dir), free(k);
    return ts_fail(TS_ERR_OOM, "add_scalars: out of memory");
  }
  snprintf(dir, n, "%s/%s", w->logdir, key);
  ts_tb_writer *cw;
  ts_status st = ts_tb_writer_open(dir, w->flush_secs, &cw);
  free(dir);
  if (st) {
    free(k);
    return st;
  }
  c[w->nchildren++] = (tb_child){k, cw};
  *out = cw;
  return TS_OK;
}

ts_status ts_tb_add_scalars(ts_tb_writer *w, const char *main_tag, int n, const char *const *keys,
                            const double *values, int64_t step, double walltime) {
  for (int i = 0; i < n; i++) {
    /* logdir/<main_tag, '/' -> '_'>_<key>, as torch.utils.tensorboard names it */
    size_t len = strlen(main_tag) + strlen(keys[i]) + 2;
    char *name = malloc(len);
    if (!name) return ts_fail(TS_ERR_OOM, "add_scalars: out of memory");
    snprintf(name, len, "%s_%s", main_tag, keys[i]);
    for (size_t j = 0, m = strlen(main_tag); j < m; j++)
      if (name[j] == '/') name[j] = '_';
    ts_tb_writer *cw = NULL;
    ts_status st = child_writer(w, name, &cw);
    free(name);
    if (!st) {
      pb v = {0};
      pb_str(&v, 1, main_tag);
      pb_float(&v, 2, (float)values[i]);
      st = write_value(cw, "add_scalars", &v, step, walltime);
    }
    if (st) return st;
  }
  return TS_OK;
}

ts_status ts_tb_add_histogram(ts_tb_writer *w, const char *tag, const ts_tb_histogram *h, int64_t step,
                              double walltime) {
  pb histo = {0}, v = {0};
  pb_double(&histo, 1, h->min);
  pb_double(&histo, 2, h->max);
  pb_double(&histo, 3, h->num);
  pb_double(&histo, 4, h->sum);
  pb_double(&histo, 5, h->sum_squares);
  pb_packed_doubles(&histo, 6, h->bucket_limit, h->nbuckets);
  pb_packed_doubles(&histo, 7, h->bucket, h->nbuckets);
  pb_str(&v, 1, tag);
  pb_msg(&v, 5, &histo);
  return write_value(w, "add_histogram", &v, step, walltime);
}

ts_status ts_tb_add_text(ts_tb_writer *w, const char *tag, const char *text, size_t len, int64_t step,
                         double walltime) {
  pb plugin = {0}, meta = {0}, dim = {0}, shape = {0}, tensor = {0}, v = {0};
  /* content would be TextPluginData{version: 0}, which encodes to no bytes */
  pb_str(&plugin, 1, "text");
  pb_msg(&meta, 1, &plugin);
  pb_int(&dim, 1, 1);
  pb_msg(&shape, 2, &dim);
  pb_int(&tensor, 1, 7); /* DT_STRING */
  pb_msg(&tensor, 2, &shape);
  pb_bytes(&tensor, 8, text, len);
  size_t n = strlen(tag) + sizeof "/text_summary";
  char *full = malloc(n);
  if (!full) {
    pb_free(&meta), pb_free(&tensor);
    return ts_fail(TS_ERR_OOM, "add_text: out of memory");
  }
  snprintf(full, n, "%s/text_summary", tag);
  pb_str(&v, 1, full);
  free(full);
  pb_msg(&v, 8, &tensor);
  pb_msg(&v, 9, &meta);
  return write_value(w, "add_text", &v, step, walltime);
}

ts_status ts_tb_add_image(ts_tb_writer *w, const char *tag, const uint8_t *png, size_t len, int64_t height,
                          int64_t width, int channels, int64_t step, double walltime) {
  pb image = {0}, v = {0};
  pb_int(&image, 1, height);
  pb_int(&image, 2, width);
  pb_int(&image, 3, channels);
  pb_bytes(&image, 4, png, len);
  pb_str(&v, 1, tag);
  pb_msg(&v, 4, &image);
  return write_value(w, "add_image", &v, step, walltime);
}

ts_status ts_tb_writer_flush(ts_tb_writer *w) {
  for (int i = 0; i < w->nchildren; i++) {
    ts_status st = ts_tb_writer_flush(w->children[i].w);
    if (st) return st;
  }
  w->last_flush = monotonic();
  errno = 0;
  if (fflush(w->f) != 0 || ferror(w->f))
    return ts_fail(TS_ERR_IO, "flush: cannot write '%s': %s", w->path, errno ? strerror(errno) : "write error");
  return TS_OK;
}

ts_status ts_tb_writer_close(ts_tb_writer *w) {
  ts_status st = TS_OK;
  for (int i = 0; i < w->nchildren; i++) {
    ts_status s = ts_tb_writer_close(w->children[i].w);
    if (!st) st = s;
    free(w->children[i].key);
  }
  errno = 0;
  bool bad = fflush(w->f) != 0 || ferror(w->f);
  int e = errno;
  bad = (fclose(w->f) != 0) || bad;
  if (!e) e = errno;
  w->f = NULL;
  if (bad && !st) st = ts_fail(TS_ERR_IO, "close: cannot write '%s': %s", w->path, e ? strerror(e) : "write error");
  writer_free(w);
  return st;
}

/* ---- histograms ------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* numpy.percentile's default (linear) on sorted s */
static double percentile(const double *s, int64_t n, double q) {
  double pos = q / 100.0 * (double)(n - 1);
  int64_t lo = (int64_t)floor(pos);
  if (lo >= n - 1) return s[n - 1];
  double frac = pos - (double)lo;
  return s[lo] + frac * (s[lo + 1] - s[lo]);
}

static const char *bins_name(ts_tb_bins_kind k) {
  switch (k) {
  case TS_TB_BINS_AUTO: return "auto";
  case TS_TB_BINS_FD: return "fd";
  case TS_TB_BINS_STURGES: return "sturges";
  case TS_TB_BINS_SQRT: return "sqrt";
  default: return "?";
  }
}

/* The bin width numpy's estimators choose; 0 means one bin. */
static ts_status bin_width(const double *x, int64_t n, ts_tb_bins_kind kind, double ptp, double *out) {
  double sturges = ptp / (log2((double)n) + 1.0);
  if (kind == TS_TB_BINS_STURGES) return *out = sturges, TS_OK;
  if (kind == TS_TB_BINS_SQRT) return *out = ptp / sqrt((double)n), TS_OK;
  double *s = malloc(sizeof *s * (size_t)n);
  if (!s) return ts_fail(TS_ERR_OOM, "add_histogram: out of memory sorting %lld values", (long long)n);
  memcpy(s, x, sizeof *s * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double iqr = percentile(s, n, 75) - percentile(s, n, 25);
  free(s);
  double fd = 2.0 * iqr * pow((double)n, -1.0 / 3.0);
  if (kind == TS_TB_BINS_FD) return *out = fd, TS_OK;
  *out = fd > 0 ? fmin(fd, sturges) : sturges;
  return TS_OK;
}

/* The bin edges for bins over data in [lo, hi]; *out has *nedges entries. */
static ts_status make_edges(const double *x, int64_t n, const ts_tb_bins *bins, double lo, double hi, double **out,
                            int64_t *nedges) {
  if (bins->kind == TS_TB_BINS_TENSORFLOW) {
    /* TensorBoard's default buckets, the ones PyTorch's writer uses, closed
     * by +-DBL_MAX (as TensorFlow's own) so no value falls outside */
    int64_t k = 0;
    for (double v = 1e-12; v < 1e20; v *= 1.1) k++;
    double *e = malloc(sizeof *e * (size_t)(2 * k + 3));
    if (!e) return ts_fail(TS_ERR_OOM, "add_histogram: out of memory");
    e[0] = -DBL_MAX, e[k + 1] = 0, e[2 * k + 2] = DBL_MAX;
    int64_t i = 0;
    for (double v = 1e-12; v < 1e20; v *= 1.1, i++) e[k - i] = -v, e[k + 2 + i] = v;
    *out = e, *nedges = 2 * k + 3;
    return TS_OK;
  }
  if (bins->kind == TS_TB_BINS_EDGES) {
    if (bins->n < 2)
      return ts_fail(TS_ERR_ARG, "add_histogram: bins as edges needs at least 2 edges, got %lld", (long long)bins->n);
    if (bins->n > TS_TB_MAX_BINS + 1)
      return ts_fail(TS_ERR_ARG, "add_histogram: at most %d bins, got %lld edges", TS_TB_MAX_BINS, (long long)bins->n);
    for (int64_t i = 0; i < bins->n; i++) {
      if (!isfinite(bins->edges[i])) return ts_fail(TS_ERR_ARG, "add_histogram: bin edge %lld is not finite", (long long)i);
      if (i && bins->edges[i] < bins->edges[i - 1])
        return ts_fail(TS_ERR_ARG, "add_histogram: bin edges must increase monotonically (edge %lld is %g, after %g)",
                       (long long)i, bins->edges[i], bins->edges[i - 1]);
    }
    double *e = malloc(sizeof *e * (size_t)bins->n);
    if (!e) return ts_fail(TS_ERR_OOM, "add_histogram: out of memory");
    memcpy(e, bins->edges, sizeof *e * (size_t)bins->n);
    *out = e, *nedges = bins->n;
    return TS_OK;
  }
  /* equal-width bins over [min, max], widened to +-0.5 when they are equal */
  double ptp = hi - lo, first = lo, last = hi;
  if (first == last) first -= 0.5, last += 0.5;
  double nb;
  if (bins->kind == TS_TB_BINS_COUNT) {
    if (bins->n < 1 || bins->n > TS_TB_MAX_BINS)
      return ts_fail(TS_ERR_ARG, "add_histogram: bins must be in [1, %d], got %lld", TS_TB_MAX_BINS, (long long)bins->n);
    nb = (double)bins->n;
  } else {
    double width = 0;
    ts_status st = bin_width(x, n, bins->kind, ptp, &width);
    if (st) return st;
    nb = width > 0 ? ceil((last - first) / width) : 1;
    if (!(nb <= TS_TB_MAX_BINS))
      return ts_fail(TS_ERR_ARG, "add_histogram: bins='%s' gives %.0f bins (more than %d); pass a count such as {bins = 64}",
                     bins_name(bins->kind), nb, TS_TB_MAX_BINS);
  }
  int64_t k = (int64_t)nb;
  double *e = malloc(sizeof *e * (size_t)(k + 1));
  if (!e) return ts_fail(TS_ERR_OOM, "add_histogram: out of memory");
  double step = (last - first) / (double)k; /* numpy.linspace: start + i * step, the last edge exact */
  for (int64_t i = 0; i < k; i++) e[i] = first + (double)i * step;
  e[k] = last;
  *out = e, *nedges = k + 1;
  return TS_OK;
}

void ts_tb_histogram_free(ts_tb_histogram *h) {
  free(h->bucket_limit), free(h->bucket);
  h->bucket_limit = h->bucket = NULL;
  h->nbuckets = 0;
}

ts_status ts_tb_histogram_make(const double *x, int64_t n, const ts_tb_bins *bins, ts_tb_histogram *out) {
  if (n < 1) return ts_fail(TS_ERR_ARG, "add_histogram: the input has no elements; a histogram needs at least one value");
  double lo = x[0], hi = x[0], sum = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(x[i]))
      return ts_fail(TS_ERR_ARG, "add_histogram: values must be finite, but element %lld is %g", (long long)i, x[i]);
    lo = fmin(lo, x[i]), hi = fmax(hi, x[i]);
    sum += x[i], sq += x[i] * x[i];
  }
  double *edges = NULL;
  int64_t ne = 0;
  ts_status st = make_edges(x, n, bins, lo, hi, &edges, &ne);
  if (st) return st;
  int64_t nb = ne - 1;
  int64_t *counts = calloc((size_t)nb, sizeof *counts);
  if (!counts) {
    free(edges);
    return ts_fail(TS_ERR_OOM, "add_histogram: out of memory");
  }
  /* numpy.histogram: bin i holds [e[i], e[i+1]), the last one [e[nb-1], e[nb]];
   * values outside the edges are dropped (only given edges can miss any) */
  for (int64_t i = 0; i < n; i++) {
    double v = x[i];
    if (v < edges[0] || v > edges[nb]) continue;
    int64_t a = 0, b = nb; /* the last edge index a with e[a] <= v, below nb */
    while (b - a > 1) {
      int64_t m = a + (b - a) / 2;
      if (edges[m] <= v) a = m;
      else b = m;
    }
    counts[a]++;
  }
  int64_t first = -1, last = -1;
  for (int64_t i = 0; i < nb; i++)
    if (counts[i]) {
      if (first < 0) first = i;
      last = i;
    }
  if (first < 0) {
    st = ts_fail(TS_ERR_ARG, "add_histogram: no value lies within the bin edges [%g, %g]", edges[0], edges[nb]);
    free(edges), free(counts);
    return st;
  }
  /* PyTorch's trim: the buckets first..last, preceded by an empty one whose
   * right edge is first's left edge (TensorBoard reads right edges only) */
  int64_t m = last - first + 2;
  ts_tb_histogram h = {.min = lo, .max = hi, .num = (double)n, .sum = sum, .sum_squares = sq, .nbuckets = m};
  h.bucket_limit = malloc(sizeof(double) * (size_t)m);
  h.bucket = malloc(sizeof(double) * (size_t)m);
  if (!h.bucket_limit || !h.bucket) {
    free(edges), free(counts), ts_tb_histogram_free(&h);
    return ts_fail(TS_ERR_OOM, "add_histogram: out of memory");
  }
  for (int64_t j = 0; j < m; j++) {
    h.bucket_limit[j] = edges[first + j];
    h.bucket[j] = j == 0 ? 0 : (double)counts[first - 1 + j];
  }
  free(edges), free(counts);
  *out = h;
  return TS_OK;
}
