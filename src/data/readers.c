/* Dataset file readers: IDX (MNIST, Fashion-MNIST) and the CIFAR-10 binary
 * batches, read through zlib so that `.gz` and plain files both work. Every
 * error names the file and what is wrong with it: a corrupt or truncated
 * download must not become a silently short dataset. */
#include "data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* gzerror's message starts with the path; the callers name the file already */
static const char *gz_message(gzFile f, const char *path, int *code) {
  const char *msg = gzerror(f, code);
  size_t n = strlen(path);
  if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
  return msg;
}

/* Reads up to n bytes (gzread takes an unsigned count: chunks of 1 GiB).
 * Returns the bytes read, or -1 with the error left by ts_fail. */
static int64_t gz_read_all(gzFile f, const char *path, void *buf, int64_t n) {
  int64_t got = 0;
  while (got < n) {
    int64_t want = n - got > (1 << 30) ? (1 << 30) : n - got;
    int r = gzread(f, (char *)buf + got, (unsigned)want);
    if (r < 0) {
      int code;
      const char *msg = gz_message(f, path, &code);
      ts_fail(TS_ERR_IO, "%s: corrupt file (%s); delete it and fetch it again", path, msg);
      return -1;
    }
    if (r == 0) break;
    got += r;
  }
  /* zlib reports a gzip stream cut short only as an error state after EOF */
  int code;
  const char *msg = gz_message(f, path, &code);
  if (code != Z_OK && code != Z_BUF_ERROR) {
    ts_fail(TS_ERR_IO, "%s: corrupt file (%s); delete it and fetch it again", path, msg);
    return -1;
  }
  if (code == Z_BUF_ERROR) {
    ts_fail(TS_ERR_IO, "%s: truncated gzip stream (%s); delete it and fetch it again", path, msg);
    return -1;
  }
  return got;
}

static ts_status open_file(const char *path, gzFile *f) {
  errno = 0;
  *f = gzopen(path, "rb");
  if (!*f) return ts_fail(TS_ERR_IO, "%s: cannot open (%s)", path, errno ? strerror(errno) : "out of memory");
  return TS_OK;
}

/* True when the stream has no bytes left (the size matched the header). */
static ts_status expect_eof(gzFile f, const char *path, const char *what) {
  char extra[256];
  int64_t r = gz_read_all(f, path, extra, sizeof extra);
  if (r < 0) return TS_ERR_IO;
  if (r > 0) return ts_fail(TS_ERR_IO, "%s: corrupt file: more bytes than %s says; delete it and fetch it again", path, what);
  return TS_OK;
}

ts_status ts_data_read_idx(const char *path, int ndim, ts_tensor **out) {
  gzFile f;
  ts_status st = open_file(path, &f);
  if (st) return st;
  unsigned char head[4 + 4 * TS_MAX_DIMS];
  int64_t sizes[TS_MAX_DIMS], n = 1;
  ts_tensor *t = NULL;
  int64_t r = gz_read_all(f, path, head, 4);
  if (r < 0) goto fail;
  if (r < 4) {
    st = ts_fail(TS_ERR_IO, "%s: truncated: %lld bytes, shorter than an IDX header", path, (long long)r);
    goto done;
  }
  /* magic: two zero bytes, the element type (0x08: unsigned byte), the rank */
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] != ndim) {
    st = ts_fail(TS_ERR_IO, "%s: not an IDX file of bytes with %d dims (magic 0x%02x%02x%02x%02x, expected 0x000008%02x)",
                 path, ndim, head[0], head[1], head[2], head[3], ndim);
    goto done;
  }
  r = gz_read_all(f, path, head + 4, 4 * (int64_t)ndim);
  if (r < 0) goto fail;
  if (r < 4 * ndim) {
    st = ts_fail(TS_ERR_IO, "%s: truncated inside the IDX header", path);
    goto done;
  }
  for (int d = 0; d < ndim; d++) {
    const unsigned char *p = head + 4 + 4 * d;
    uint32_t v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    if (v > INT32_MAX || (d > 0 && v == 0)) {
      st = ts_fail(TS_ERR_IO, "%s: corrupt IDX header: dim %d is %u", path, d, v);
      goto done;
    }
    sizes[d] = v;
    if ((st = ts_mul_overflow(n, sizes[d], &n))) goto done;
  }
  if ((st = ts_tensor_empty(ndim, sizes, TS_UINT8, TS_DEVICE_CPU, &t))) {
    char shape[128], msg[512];
    ts_shape_str(ndim, sizes, shape, sizeof shape);
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    st = ts_fail(st, "%s: the header says %s, which cannot be loaded (%s); is the file corrupt?", path, shape, msg);
    goto done;
  }
  r = gz_read_all(f, path, ts_data(t), n);
  if (r < 0) goto fail;
  if (r < n) {
    char shape[128];
    ts_shape_str(ndim, sizes, shape, sizeof shape);
    st = ts_fail(TS_ERR_IO, "%s: truncated: the header says %s (%lld bytes of data) but the file holds %lld; "
                 "delete it and fetch it again", path, shape, (long long)n, (long long)r);
    goto done;
  }
  if ((st = expect_eof(f, path, "its IDX header"))) goto done;
  gzclose(f);
  *out = t;
  return TS_OK;
fail:
  st = TS_ERR_IO;
done:
  gzclose(f);
  ts_tensor_release(t);
  return st;
}

#define CIFAR_RECORD 3073 /* 1 label byte + 3 * 32 * 32 pixels, channel-major */

/* Appends the records of one CIFAR file to a growing byte buffer. */
static ts_status read_cifar_file(const char *path, unsigned char **buf, int64_t *len, int64_t *cap) {
  gzFile f;
  ts_status st = open_file(path, &f);
  if (st) return st;
  int64_t start = *len;
  for (;;) {
    if (*cap - *len < CIFAR_RECORD * 1024) {
      int64_t ncap = *cap ? *cap * 2 : (int64_t)CIFAR_RECORD * 10000;
      unsigned char *nb = realloc(*buf, (size_t)ncap);
      if (!nb) {
        gzclose(f);
        return ts_fail(TS_ERR_OOM, "out of memory reading %s", path);
      }
      *buf = nb, *cap = ncap;
    }
    int64_t r = gz_read_all(f, path, *buf + *len, *cap - *len);
    if (r < 0) {
      gzclose(f);
      return TS_ERR_IO;
    }
    *len += r;
    if (r < *cap - (*len - r)) break; /* short read: end of file */
  }
  gzclose(f);
  int64_t size = *len - start;
  if (size == 0 || size % CIFAR_RECORD != 0)
    return ts_fail(TS_ERR_IO, "%s: truncated or corrupt: %lld bytes is not a whole number of %d-byte records "
                   "(1 label byte + 3072 pixel bytes); delete it and fetch it again", path, (long long)size, CIFAR_RECORD);
  for (int64_t k = 0; k < size / CIFAR_RECORD; k++) {
    unsigned label = (*buf)[start + k * CIFAR_RECORD];
    if (label > 9)
      return ts_fail(TS_ERR_IO, "%s: corrupt: record %lld has label %u, expected 0..9 (is this the CIFAR-10 binary "
                     "version?)", path, (long long)k, label);
  }
  return TS_OK;
}

ts_status ts_data_read_cifar(int nfiles, const char *const *paths, ts_tensor **images, ts_tensor **labels) {
  unsigned char *buf = NULL;
  int64_t len = 0, cap = 0;
  ts_status st = TS_OK;
  for (int i = 0; i < nfiles && !st; i++) st = read_cifar_file(paths[i], &buf, &len, &cap);
  ts_tensor *x = NULL, *y = NULL;
  int64_t n = len / CIFAR_RECORD, xs[4] = {n, 3, 32, 32};
  if (!st && !(st = ts_tensor_empty(4, xs, TS_UINT8, TS_DEVICE_CPU, &x)) &&
      !(st = ts_tensor_empty(1, &n, TS_INT64, TS_DEVICE_CPU, &y))) {
    unsigned char *px = ts_data(x);
    int64_t *lab = ts_data(y);
    for (int64_t k = 0; k < n; k++) {
      lab[k] = buf[k * CIFAR_RECORD];
      memcpy(px + k * 3072, buf + k * CIFAR_RECORD + 1, 3072);
    }
  }
  free(buf);
  if (st) {
    ts_tensor_release(x);
    ts_tensor_release(y);
    return st;
  }
  *images = x, *labels = y;
  return TS_OK;
}

ts_status ts_data_gzip_write(const char *path, const void *data, size_t n) {
  errno = 0;
  gzFile f = gzopen(path, "wb");
  if (!f) return ts_fail(TS_ERR_IO, "%s: cannot open for writing (%s)", path, errno ? strerror(errno) : "out of memory");
  size_t done = 0;
  while (done < n) {
    unsigned chunk = n - done > (1u << 30) ? (1u << 30) : (unsigned)(n - done);
    if (gzwrite(f, (const char *)data + done, chunk) != (int)chunk) {
      int code;
      ts_status st = ts_fail(TS_ERR_IO, "%s: write failed (%s)", path, gzerror(f, &code));
      gzclose(f);
      return st;
    }
    done += chunk;
  }
  if (gzclose(f) != Z_OK) return ts_fail(TS_ERR_IO, "%s: write failed on close", path);
  return TS_OK;
}
