/* safetensors files: an atomic writer and a bounds-checked reader (the
 * format is described in safetensors.h). The header JSON is written by hand
 * (a fixed, small shape that must match the reference byte for byte) and
 * parsed with cJSON (string escapes, surrogate pairs and nesting limits are
 * where hand-written parsers go wrong). Nothing in a file is trusted: every
 * length, offset and shape is checked before it sizes a read or an allocation. */
#include "safetensors.h"

#include "ops/ops.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The format is little-endian and tensor bytes are copied as they are. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c copies tensor bytes as they are: big-endian hosts need a byte swap here"
#endif

static const struct { ts_dtype dt; const char *code; } dtype_codes[] = {
    {TS_FLOAT64, "F64"}, {TS_FLOAT32, "F32"}, {TS_FLOAT16, "F16"}, {TS_BFLOAT16, "BF16"},
    {TS_INT64, "I64"},   {TS_INT32, "I32"},   {TS_INT16, "I16"}, {TS_INT8, "I8"}, {TS_UINT8, "U8"},   {TS_BOOL, "BOOL"},
};
#define NCODES (int)(sizeof dtype_codes / sizeof *dtype_codes)

const char *ts_safetensors_dtype_code(ts_dtype dt) {
  for (int i = 0; i < NCODES; i++)
    if (dtype_codes[i].dt == dt) return dtype_codes[i].code;
  return "?";
}

bool ts_safetensors_dtype_parse(const char *code, ts_dtype *out) {
  for (int i = 0; i < NCODES; i++)
    if (strcmp(dtype_codes[i].code, code) == 0) return *out = dtype_codes[i].dt, true;
  return false;
}

bool ts_utf8_valid(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || i + len > n) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    /* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += len;
  }
  return true;
}

/* ---- writing ------------------------------------------------------------ */

/* A growing byte buffer; `failed` sticks after the first allocation failure. */
typedef struct sbuf {
  char *p;
  size_t len, cap;
  bool failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->failed = true;
      return;
    }
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string as serde_json writes it: \" \\ \b \f \n \r \t, other control
 * characters as \u00xx (lowercase hex), every other byte as it is. */
static void sb_json_string(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    switch (*c) {
    case '"': sb_put(b, "\\\"", 2); break;
    case '\\': sb_put(b, "\\\\", 2); break;
    case '\b': sb_put(b, "\\b", 2); break;
    case '\f': sb_put(b, "\\f", 2); break;
    case '\n': sb_put(b, "\\n", 2); break;
    case '\r': sb_put(b, "\\r", 2); break;
    case '\t': sb_put(b, "\\t", 2); break;
    default:
      if (*c < 0x20) sb_printf(b, "\\u%04x", *c);
      else sb_put(b, (const char *)c, 1);
    }
  }
  sb_put(b, "\"", 1);
}

typedef struct order_ctx {
  const char *const *names;
  ts_tensor *const *tensors;
} order_ctx;
static _Thread_local order_ctx sort_ctx; /* qsort has no context argument in C11 */

/* larger items first (keeps every tensor aligned to its item size), then by name */
static int by_layout(const void *a, const void *b) {
  int i = *(const int *)a, j = *(const int *)b;
  size_t si = ts_dtype_size(sort_ctx.tensors[i]->dtype), sj = ts_dtype_size(sort_ctx.tensors[j]->dtype);
  if (si != sj) return si > sj ? -1 : 1;
  return strcmp(sort_ctx.names[i], sort_ctx.names[j]);
}

static int by_name(const void *a, const void *b) {
  return strcmp(sort_ctx.names[*(const int *)a], sort_ctx.names[*(const int *)b]);
}

/* Checks the inputs, fills order (n) with the data layout and builds the header. */
static ts_status build_header(int n, const char *const *names, ts_tensor *const *tensors, int nmeta,
                              const char *const *meta_keys, const char *const *meta_values, int *order,
                              char **out, size_t *len) {
  for (int i = 0; i < n; i++) {
    if (!ts_utf8_valid(names[i], strlen(names[i])))
      return ts_fail(TS_ERR_ARG, "torch.save: tensor name '%s' is not valid UTF-8 (safetensors headers are JSON)",
                     names[i]);
    if (strcmp(names[i], "__metadata__") == 0)
      return ts_fail(TS_ERR_ARG, "torch.save: '__metadata__' is reserved by the safetensors format; rename the "
                     "tensor");
    if (tensors[i]->device.type != TS_CPU)
      return ts_fail(TS_ERR_DEVICE, "torch.save: tensor '%s' is not on the CPU; copy it with :cpu() first", names[i]);
  }
  for (int i = 0; i < nmeta; i++)
    if (!ts_utf8_valid(meta_keys[i], strlen(meta_keys[i])) ||
        !ts_utf8_valid(meta_values[i], strlen(meta_values[i])))
      return ts_fail(TS_ERR_ARG, "torch.save: metadata '%s' is not valid UTF-8", meta_keys[i]);
  sort_ctx = (order_ctx){names, tensors};
  for (int i = 0; i < n; i++) order[i] = i;
  qsort(order, (size_t)n, sizeof *order, by_name);
  for (int i = 1; i < n; i++)
    if (strcmp(names[order[i - 1]], names[order[i]]) == 0)
      return ts_fail(TS_ERR_ARG, "torch.save: two tensors are named '%s'; names in a file must be distinct",
                     names[order[i]]);
  qsort(order, (size_t)n, sizeof *order, by_layout);

  /* the reference's layout: __metadata__ first, then the tensors in data order */
  sbuf b = {0};
  sb_puts(&b, "{");
  if (nmeta > 0) {
    sb_puts(&b, "\"__metadata__\":{");
    for (int i = 0; i < nmeta; i++) {
      if (i) sb_puts(&b, ",");
      sb_json_string(&b, meta_keys[i]);
      sb_puts(&b, ":");
      sb_json_string(&b, meta_values[i]);
    }
    sb_puts(&b, "}");
  }
  int64_t offset = 0;
  for (int k = 0; k < n; k++) {
    ts_tensor *t = tensors[order[k]];
    int64_t nbytes, end;
    ts_status st = ts_mul_overflow(ts_numel(t), (int64_t)ts_dtype_size(t->dtype), &nbytes);
    if (!st && __builtin_add_overflow(offset, nbytes, &end))
      st = ts_fail(TS_ERR_OVERFLOW, "torch.save: the tensors' total size overflows int64");
    if (st) {
      free(b.p);
      return st;
    }
    if (k || nmeta > 0) sb_puts(&b, ",");
    sb_json_string(&b, names[order[k]]);
    sb_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", ts_safetensors_dtype_code(t->dtype));
    for (int d = 0; d < t->ndim; d++) sb_printf(&b, d ? ",%lld" : "%lld", (long long)t->sizes[d]);
    sb_printf(&b, "],\"data_offsets\":[%lld,%lld]}", (long long)offset, (long long)end);
    offset = end;
  }
  sb_puts(&b, "}");
  while (!b.failed && b.len % 8) sb_puts(&b, " ");
  if (b.failed) {
    free(b.p);
    return ts_fail(TS_ERR_OOM, "torch.save: out of memory building the file header");
  }
  *out = b.p;
  *len = b.len;
  return TS_OK;
}

ts_status ts_safetensors_header(int n, const char *const *names, ts_tensor *const *tensors, int nmeta,
                                const char *const *meta_keys, const char *const *meta_values, char **out,
                                size_t *len) {
  int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!order) return ts_fail(TS_ERR_OOM, "torch.save: out of memory");
  ts_status st = build_header(n, names, tensors, nmeta, meta_keys, meta_values, order, out, len);
  free(order);
  return st;
}

static ts_status write_fail(const char *path, const char *what, int err) {
  return ts_fail(TS_ERR_IO, "torch.save: cannot %s '%s': %s", what, path, strerror(err));
}

static ts_status write_all(FILE *f, const char *path, const void *p, size_t n) {
  if (n && fwrite(p, 1, n, f) != n) return write_fail(path, "write", errno ? errno : EIO);
  return TS_OK;
}

/* Writes everything after the temp file is open; the caller cleans up. */
static ts_status write_body(FILE *f, const char *path, int n, ts_tensor *const *tensors, const int *order,
                            const char *header, size_t hlen) {
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
  ts_status st = write_all(f, path, len8, 8);
  if (!st) st = write_all(f, path, header, hlen);
  for (int k = 0; k < n && !st; k++) {
    ts_tensor *t = tensors[order[k]], *c = NULL;
    if ((st = ts_check_interrupt())) break;
    /* logical values: a strided view is gathered into a contiguous copy first */
    if ((st = ts_contiguous(t, &c))) break;
    if (!(st = ts_host_ready(c))) /* a non-blocking copy may still be landing in it */
      st = write_all(f, path, ts_data(c), (size_t)ts_numel(c) * ts_dtype_size(c->dtype));
    ts_tensor_release(c);
  }
  if (!st && fflush(f) != 0) st = write_fail(path, "write", errno);
  if (!st && fsync(fileno(f)) != 0) st = write_fail(path, "sync", errno);
  return st;
}

/* After the rename the new file is in place and whole; syncing the directory
 * makes the rename itself durable. Some file systems refuse to fsync a
 * directory (EINVAL): the data is safe all the same, so failures are ignored. */
static void sync_parent_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(dir);
}

/* Saves write <path>.tmp.<pid> and rename it over path; a save killed
 * midway (kill -9) leaves its temporary behind. The next save of the same
 * path removes those whose process is gone (checked with kill(pid, 0) on
 * this machine), so they do not pile up. */
static void remove_stale_temps(const char *path) {
  const char *slash = strrchr(path, '/');
  char dir[4096];
  const char *base = slash ? slash + 1 : path;
  int dlen = slash ? (int)(slash - path) : 1;
  if (dlen >= (int)sizeof dir) return;
  snprintf(dir, sizeof dir, "%.*s", dlen, slash ? (slash == path ? "/" : path) : ".");
  DIR *d = opendir(dir);
  if (!d) return;
  size_t blen = strlen(base);
  for (struct dirent *e; (e = readdir(d));) {
    const char *name = e->d_name;
    if (strncmp(name, base, blen) || strncmp(name + blen, ".tmp.", 5)) continue;
    char *end;
    long pid = strtol(name + blen + 5, &end, 10);
    if (*end || pid <= 0 || pid == (long)getpid() || !(kill((pid_t)pid, 0) != 0 && errno == ESRCH)) continue;
    char full[8192];
    snprintf(full, sizeof full, "%s/%s", dir, name);
    unlink(full);
  }
  closedir(d);
}

ts_status ts_safetensors_save(const char *path, int n, const char *const *names, ts_tensor *const *tensors,
                              int nmeta, const char *const *meta_keys, const char *const *meta_values) {
  int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!order) return ts_fail(TS_ERR_OOM, "torch.save: out of memory");
  char *header = NULL;
  size_t hlen = 0;
  ts_status st = build_header(n, names, tensors, nmeta, meta_keys, meta_values, order, &header, &hlen);
  if (st) {
    free(order);
    return st;
  }
  size_t tlen = strlen(path) + 32;
  char *tmp = malloc(tlen);
  if (!tmp) {
    free(header);
    free(order);
    return ts_fail(TS_ERR_OOM, "torch.save: out of memory");
  }
  snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
  remove_stale_temps(path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    st = write_fail(path, "write", errno);
  } else {
    FILE *f = fdopen(fd, "wb");
    if (!f) {
      st = write_fail(path, "write", errno);
      close(fd);
    } else {
      st = write_body(f, path, n, tensors, order, header, hlen);
      if (fclose(f) != 0 && !st) st = write_fail(path, "write", errno);
    }
    if (!st && rename(tmp, path) != 0) st = write_fail(path, "replace", errno);
    if (st) unlink(tmp);
    else sync_parent_dir(path);
  }
  free(tmp);
  free(header);
  free(order);
  return st;
}

/* ---- reading ------------------------------------------------------------ */

static ts_status bad(const ts_safetensors *sf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ts_status bad(const ts_safetensors *sf, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ts_fail(TS_ERR_IO, "torch.load: '%s': %s", sf->path, msg);
}

void ts_safetensors_close(ts_safetensors *sf) {
  if (!sf) return;
  if (sf->f) fclose(sf->f);
  for (int i = 0; i < sf->n; i++) free(sf->entries[i].name);
  for (int i = 0; i < sf->nmeta; i++) free(sf->meta_keys[i]), free(sf->meta_values[i]);
  free(sf->entries);
  free(sf->meta_keys);
  free(sf->meta_values);
  free(sf->path);
  free(sf);
}

/* A JSON number that is an exact non-negative integer (doubles hold every
 * integer up to 2^53, beyond which a value read from JSON cannot be trusted). */
static bool json_index(const cJSON *v, int64_t *out) {
  if (!cJSON_IsNumber(v)) return false;
  double d = v->valuedouble;
  if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return false;
  *out = (int64_t)d;
  return true;
}

static ts_status parse_entry(ts_safetensors *sf, const cJSON *item, ts_safetensors_entry *e) {
  const char *name = item->string;
  if (!cJSON_IsObject(item)) return bad(sf, "tensor '%s': expected an object with dtype, shape and data_offsets", name);
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
  if (!cJSON_IsString(dt)) return bad(sf, "tensor '%s': missing or non-string \"dtype\"", name);
  if (!ts_safetensors_dtype_parse(dt->valuestring, &e->dtype))
    return bad(sf, "tensor '%s': unsupported dtype '%s' (tensh reads F64, F32, F16, BF16, I64, I32, U8, BOOL)",
               name, dt->valuestring);
  if (!cJSON_IsArray(shape)) return bad(sf, "tensor '%s': missing or non-list \"shape\"", name);
  int nd = cJSON_GetArraySize(shape);
  if (nd > TS_MAX_DIMS) return bad(sf, "tensor '%s' has %d dims; tensh supports at most %d", name, nd, TS_MAX_DIMS);
  e->ndim = 0;
  for (const cJSON *s = shape->child; s; s = s->next) {
    if (!json_index(s, &e->sizes[e->ndim]))
      return bad(sf, "tensor '%s': shape entries must be non-negative integers", name);
    e->ndim++;
  }
  int64_t numel, nbytes;
  if (ts_shape_numel(e->ndim, e->sizes, &numel) ||
      ts_mul_overflow(numel, (int64_t)ts_dtype_size(e->dtype), &nbytes))
    return bad(sf, "tensor '%s': the shape's element count overflows int64", name);
  if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_index(offs->child, &e->begin) ||
      !json_index(offs->child->next, &e->end))
    return bad(sf, "tensor '%s': \"data_offsets\" must be a list of two non-negative integers", name);
  if (e->end < e->begin)
    return bad(sf, "tensor '%s': data_offsets [%lld, %lld] end before they begin (end < begin)", name, (long long)e->begin,
               (long long)e->end);
  if (e->end - e->begin != nbytes)
    return bad(sf, "tensor '%s': data_offsets [%lld, %lld] hold %lld bytes, but a %s tensor of %lld elements needs %lld",
               name, (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin), dt->valuestring,
               (long long)numel, (long long)nbytes);
  if (e->end > sf->data_size)
    return bad(sf, "file is truncated: tensor '%s' ends at data byte %lld, but the file holds %lld bytes of data",
               name, (long long)e->end, (long long)sf->data_size);
  if (!(e->name = strdup(name))) return ts_fail(TS_ERR_OOM, "torch.load: out of memory");
  return TS_OK;
}

static int entry_by_name(const void *a, const void *b) {
  return strcmp(((const ts_safetensors_entry *)a)->name, ((const ts_safetensors_entry *)b)->name);
}

static int entry_by_offset(const void *a, const void *b) {
  const ts_safetensors_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

static ts_status parse_metadata(ts_safetensors *sf, const cJSON *meta) {
  if (sf->meta_keys) return bad(sf, "\"__metadata__\" appears twice in the header");
  if (!cJSON_IsObject(meta)) return bad(sf, "\"__metadata__\" must be an object of strings");
  int m = cJSON_GetArraySize(meta);
  sf->meta_keys = calloc((size_t)m + 1, sizeof(char *));
  sf->meta_values = calloc((size_t)m + 1, sizeof(char *));
  if (!sf->meta_keys || !sf->meta_values) return ts_fail(TS_ERR_OOM, "torch.load: out of memory");
  for (const cJSON *kv = meta->child; kv; kv = kv->next) {
    if (!cJSON_IsString(kv)) return bad(sf, "__metadata__ value '%s' is not a string", kv->string);
    sf->meta_keys[sf->nmeta] = strdup(kv->string);
    sf->meta_values[sf->nmeta] = strdup(kv->valuestring);
    if (!sf->meta_keys[sf->nmeta++] || !sf->meta_values[sf->nmeta - 1])
      return ts_fail(TS_ERR_OOM, "torch.load: out of memory");
  }
  return TS_OK;
}

static ts_status parse_root(ts_safetensors *sf, const cJSON *root) {
  int count = cJSON_GetArraySize(root);
  sf->entries = calloc((size_t)count + 1, sizeof *sf->entries);
  if (!sf->entries) return ts_fail(TS_ERR_OOM, "torch.load: out of memory");
  for (const cJSON *item = root->child; item; item = item->next) {
    ts_status st = strcmp(item->string, "__metadata__") == 0 ? parse_metadata(sf, item)
                                                             : parse_entry(sf, item, &sf->entries[sf->n]);
    if (st) return st;
    if (strcmp(item->string, "__metadata__") != 0) sf->n++;
  }
  qsort(sf->entries, (size_t)sf->n, sizeof *sf->entries, entry_by_name);
  for (int i = 1; i < sf->n; i++)
    if (strcmp(sf->entries[i - 1].name, sf->entries[i].name) == 0)
      return bad(sf, "the header names tensor '%s' twice", sf->entries[i].name);
  /* the spec: the byte buffer is indexed entirely, without gaps or overlaps */
  qsort(sf->entries, (size_t)sf->n, sizeof *sf->entries, entry_by_offset);
  int64_t pos = 0;
  for (int i = 0; i < sf->n; i++) {
    const ts_safetensors_entry *e = &sf->entries[i];
    if (e->begin < pos)
      return bad(sf, "tensor '%s' (data_offsets [%lld, %lld]) overlaps tensor '%s' (ending at %lld)", e->name,
                 (long long)e->begin, (long long)e->end, sf->entries[i - 1].name, (long long)pos);
    if (e->begin > pos)
      return bad(sf, "data bytes [%lld, %lld) belong to no tensor (before tensor '%s'); the data must be "
                 "covered contiguously", (long long)pos, (long long)e->begin, e->name);
    pos = e->end;
  }
  if (pos != sf->data_size)
    return bad(sf, "%lld bytes after the last tensor's data belong to no tensor (the file has %lld data "
               "bytes, the tensors %lld)", (long long)(sf->data_size - pos), (long long)sf->data_size, (long long)pos);
  return TS_OK;
}

/* A safetensors header is a flat object of objects: {name: {dtype, shape:
 * [dims], data_offsets: [begin, end]}, __metadata__: {str: str}}. Checked on
 * the raw text before cJSON builds a tree, so a header crafted to cost
 * memory (nesting, huge arrays) is refused before it is spent: NULL if the
 * text keeps to that form, else why not. */
static const char *header_form_error(const char *h, size_t n) {
  enum { MAX_NEST = 3, MAX_ARRAY = 64 };
  int depth = 0;
  bool in_array[MAX_NEST + 1] = {false};
  int64_t items[MAX_NEST + 1] = {0};
  for (size_t i = 0; i < n; i++) {
    char c = h[i];
    if (c == '"') { /* skip the string, escapes included */
      for (i++; i < n && h[i] != '"'; i++)
        if (h[i] == '\\') i++;
      continue;
    }
    if (c == '{' || c == '[') {
      if (++depth > MAX_NEST) return "it nests deeper than a safetensors header does (objects of objects of arrays)";
      in_array[depth] = c == '[', items[depth] = 0;
    } else if (c == '}' || c == ']') {
      if (depth > 0) depth--;
    } else if (c == ',' && depth > 0 && in_array[depth] && ++items[depth] >= MAX_ARRAY) {
      return "it holds an array longer than a tensor's shape or data_offsets can be";
    }
  }
  return NULL;
}

ts_status ts_safetensors_parse(const char *path, const char *header, size_t n, int64_t data_size,
                               ts_safetensors **out) {
  ts_safetensors *sf = calloc(1, sizeof *sf);
  if (!sf || !(sf->path = strdup(path))) {
    free(sf);
    return ts_fail(TS_ERR_OOM, "torch.load: out of memory");
  }
  sf->data_size = data_size;
  sf->data_start = 8 + (int64_t)n;
  ts_status st = TS_OK;
  const char *end = NULL;
  cJSON *root = NULL;
  if (n == 0 || header[0] != '{') {
    st = bad(sf, "not a safetensors file (the header does not start with '{')");
  } else if (memchr(header, 0, n) || memmem(header, n, "\\u0000", 6)) {
    /* cJSON's strings end at a NUL: a name "a\u0000b" would load as "a", a dtype "F32\u0000" as F32 */
    st = bad(sf, "the header holds a NUL character (a name or dtype would be cut short there)");
  } else if (header_form_error(header, n)) {
    st = bad(sf, "the header is not a safetensors header: %s", header_form_error(header, n));
  } else if (!(root = cJSON_ParseWithLengthOpts(header, n, &end, false)) || !cJSON_IsObject(root)) {
    st = root ? bad(sf, "the header is not a JSON object")
              : bad(sf, "the header is not valid JSON (near byte %lld of %zu)",
                    (long long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - header : 0), n);
  } else {
    for (const char *p = end; p < header + n && !st; p++)
      if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
        st = bad(sf, "the header has bytes after its JSON object (at byte %lld of %zu)", (long long)(p - header), n);
    if (!st) st = parse_root(sf, root);
  }
  cJSON_Delete(root);
  if (st) {
    ts_safetensors_close(sf);
    return st;
  }
  *out = sf;
  return TS_OK;
}

ts_status ts_safetensors_open(const char *path, ts_safetensors **out) {
  FILE *f = fopen(path, "rb");
  if (!f) return ts_fail(TS_ERR_IO, "torch.load: cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  ts_status st = TS_OK;
  char *header = NULL;
  uint64_t hlen = 0;
  if (fstat(fileno(f), &sb) != 0) {
    st = ts_fail(TS_ERR_IO, "torch.load: cannot open '%s': %s", path, strerror(errno));
  } else if (S_ISDIR(sb.st_mode)) {
    st = ts_fail(TS_ERR_IO, "torch.load: cannot open '%s': it is a directory, not a file", path);
  } else if (!S_ISREG(sb.st_mode)) {
    st = ts_fail(TS_ERR_IO, "torch.load: cannot open '%s': not a regular file", path);
  } else if (sb.st_size == 0) {
    st = ts_fail(TS_ERR_IO, "torch.load: '%s': the file is empty", path);
  } else if (sb.st_size < 8) {
    st = ts_fail(TS_ERR_IO, "torch.load: '%s': file too short (%lld bytes) for the 8-byte header length; not a "
                 "safetensors file, or truncated", path, (long long)sb.st_size);
  } else {
    unsigned char len8[8];
    if (fread(len8, 1, 8, f) != 8) {
      st = ts_fail(TS_ERR_IO, "torch.load: '%s': cannot read the header length", path);
    } else {
      for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
      if (hlen > TS_SAFETENSORS_MAX_HEADER)
        st = ts_fail(TS_ERR_IO, "torch.load: '%s': header length %llu is absurd (over %d bytes): not a "
                     "safetensors file, or corrupt", path, (unsigned long long)hlen, TS_SAFETENSORS_MAX_HEADER);
      else if (hlen > (uint64_t)sb.st_size - 8)
        st = ts_fail(TS_ERR_IO, "torch.load: '%s': header length %llu is larger than the rest of the file (%lld "
                     "bytes): truncated, or not a safetensors file", path, (unsigned long long)hlen,
                     (long long)sb.st_size - 8);
      else if (!(header = malloc(hlen ? hlen : 1)))
        st = ts_fail(TS_ERR_OOM, "torch.load: out of memory reading the header of '%s'", path);
      else if (fread(header, 1, hlen, f) != hlen)
        st = ts_fail(TS_ERR_IO, "torch.load: '%s': the file is truncated (cannot read its %llu-byte header)", path,
                     (unsigned long long)hlen);
    }
  }
  ts_safetensors *sf = NULL;
  if (!st) st = ts_safetensors_parse(path, header, (size_t)hlen, (int64_t)sb.st_size - 8 - (int64_t)hlen, &sf);
  free(header);
  if (st) {
    fclose(f);
    return st;
  }
  sf->f = f;
  *out = sf;
  return TS_OK;
}

ts_status ts_safetensors_read(ts_safetensors *sf, int i, ts_tensor **out) {
  if (i < 0 || i >= sf->n || !sf->f) return ts_fail(TS_ERR_ARG, "torch.load: no tensor %d in '%s'", i, sf->path);
  const ts_safetensors_entry *e = &sf->entries[i];
  ts_tensor *t = NULL;
  ts_status st = ts_tensor_empty(e->ndim, e->sizes, e->dtype, TS_DEVICE_CPU, &t);
  if (st) return st;
  size_t nbytes = (size_t)(e->end - e->begin);
  if (nbytes) {
    if (fseeko(sf->f, (off_t)(sf->data_start + e->begin), SEEK_SET) != 0) {
      st = bad(sf, "cannot seek to tensor '%s': %s", e->name, strerror(errno));
    } else if (fread(ts_data(t), 1, nbytes, sf->f) != nbytes) {
      /* the header was checked against the size at open: the file changed since */
      st = ferror(sf->f) ? bad(sf, "cannot read tensor '%s': %s", e->name, strerror(errno))
                         : bad(sf, "the file is truncated: tensor '%s' ends past its end", e->name);
    }
  }
  if (!st && e->dtype == TS_BOOL) {
    /* kernels assume bools are 0 or 1 */
    unsigned char *p = ts_data(t);
    for (size_t k = 0; k < nbytes; k++) p[k] = p[k] != 0;
  }
  if (st) {
    ts_tensor_release(t);
    return st;
  }
  *out = t;
  return TS_OK;
}
