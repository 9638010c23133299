/* PNG encoder and decoder (see png.h), after the PNG specification (ISO/IEC
 * 15948): chunks of {u32 length, 4-byte type, data, u32 CRC-32 of type and
 * data}, big-endian; IHDR, then PLTE, then the zlib stream of the filtered
 * rows split over IDAT chunks, then IEND. Each row starts with its filter
 * byte (0 none, 1 sub, 2 up, 3 average, 4 Paeth), the filters working on
 * bytes, `bpp` bytes (one pixel, at least 1) apart. */
#include "png.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const uint8_t SIGNATURE[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static int paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

/* ---- encoding ------------------------------------------------------------ */

/* A growing output buffer; `oom` is sticky and checked at the end. */
typedef struct buf {
  uint8_t *p;
  size_t len, cap;
  bool oom;
} buf;

static uint8_t *buf_reserve(buf *b, size_t n) {
  if (b->oom) return NULL;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n) {
      if (cap > SIZE_MAX / 2) return b->oom = true, NULL;
      cap *= 2;
    }
    uint8_t *q = realloc(b->p, cap);
    if (!q) return b->oom = true, NULL;
    b->p = q, b->cap = cap;
  }
  return b->p + b->len;
}

static void chunk(buf *b, const char *type, const uint8_t *data, size_t n) {
  uint8_t *p = buf_reserve(b, n + 12);
  if (!p) return;
  put_be32(p, (uint32_t)n);
  memcpy(p + 4, type, 4);
  if (n) memcpy(p + 8, data, n);
  put_be32(p + 8 + n, (uint32_t)crc32(0, p + 4, (uInt)n + 4)); /* of the type and data just written */
  b->len += n + 12;
}

/* Row y filtered with filter f into out (without the filter byte). */
static void filter_row(int f, const uint8_t *row, const uint8_t *prev, size_t n, int bpp, uint8_t *out) {
  for (size_t i = 0; i < n; i++) {
    int a = i >= (size_t)bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0, c = prev && i >= (size_t)bpp ? prev[i - bpp] : 0;
    int pred = f == 0 ? 0 : f == 1 ? a : f == 2 ? b : f == 3 ? (a + b) / 2 : paeth(a, b, c);
    out[i] = (uint8_t)(row[i] - pred);
  }
}

ts_status ts_png_encode(const uint8_t *pixels, int64_t h, int64_t w, int c, int level, uint8_t **out, size_t *len) {
  static const uint8_t color_type[5] = {0, 0, 4, 2, 6};
  if (c < 1 || c > 4) return ts_fail(TS_ERR_ARG, "PNG: an image has 1 to 4 channels, got %d", c);
  if (h < 1 || w < 1 || h > 0x7fffffff || w > 0x7fffffff)
    return ts_fail(TS_ERR_ARG, "PNG: an image is 1 to 2^31-1 pixels high and wide, got %lld x %lld", (long long)h, (long long)w);
  if (level < -1 || level > 9) return ts_fail(TS_ERR_ARG, "PNG: compression level must be in [0, 9] (or -1), got %d", level);
  int64_t rowbytes, raw;
  if (ts_mul_overflow(w, c, &rowbytes) || ts_mul_overflow(rowbytes + 1, h, &raw) || raw > TS_PNG_MAX_BYTES)
    return ts_fail(TS_ERR_ARG, "PNG: a %lld x %lld image of %d channels is too large (at most %lld bytes)", (long long)h,
                   (long long)w, c, (long long)TS_PNG_MAX_BYTES);
  /* the filtered rows: for each, the filter whose bytes as signed values sum smallest */
  uint8_t *filtered = malloc((size_t)raw), *trial = malloc((size_t)rowbytes);
  if (!filtered || !trial) {
    free(filtered), free(trial);
    return ts_fail(TS_ERR_OOM, "PNG: out of memory encoding a %lld x %lld image", (long long)h, (long long)w);
  }
  for (int64_t y = 0; y < h; y++) {
    const uint8_t *row = pixels + y * rowbytes, *prev = y ? row - rowbytes : NULL;
    uint8_t *dst = filtered + y * (rowbytes + 1);
    uint64_t best = UINT64_MAX;
    for (int f = 0; f < 5; f++) {
      filter_row(f, row, prev, (size_t)rowbytes, c, trial);
      uint64_t sum = 0;
      for (int64_t i = 0; i < rowbytes; i++) sum += (uint64_t)abs((int8_t)trial[i]);
      if (sum < best) {
        best = sum;
        dst[0] = (uint8_t)f;
        memcpy(dst + 1, trial, (size_t)rowbytes);
      }
    }
  }
  free(trial);
  z_stream z = {0};
  if (deflateInit(&z, level) != Z_OK) {
    free(filtered);
    return ts_fail(TS_ERR_OOM, "PNG: cannot start zlib (out of memory)");
  }
  buf b = {0};
  uint8_t *p = buf_reserve(&b, 8);
  if (p) memcpy(p, SIGNATURE, 8), b.len = 8;
  uint8_t ihdr[13];
  put_be32(ihdr, (uint32_t)w);
  put_be32(ihdr + 4, (uint32_t)h);
  ihdr[8] = 8, ihdr[9] = color_type[c], ihdr[10] = ihdr[11] = ihdr[12] = 0;
  chunk(&b, "IHDR", ihdr, 13);
  /* the zlib stream in IDAT chunks of up to 1 MiB */
  enum { IDAT_MAX = 1 << 20 };
  uint8_t *idat = malloc(IDAT_MAX);
  int64_t fed = 0;
  int zr = Z_OK;
  while (idat && zr != Z_STREAM_END) {
    z.next_out = idat, z.avail_out = IDAT_MAX;
    while (z.avail_out > 0 && zr != Z_STREAM_END) {
      if (z.avail_in == 0 && fed < raw) {
        int64_t n = raw - fed > (1 << 30) ? (1 << 30) : raw - fed;
        z.next_in = filtered + fed, z.avail_in = (uInt)n;
        fed += n;
      }
      zr = deflate(&z, fed == raw ? Z_FINISH : Z_NO_FLUSH);
      if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) break;
    }
    if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) break;
    chunk(&b, "IDAT", idat, IDAT_MAX - z.avail_out);
  }
  deflateEnd(&z);
  free(idat), free(filtered);
  chunk(&b, "IEND", NULL, 0);
  if (!idat || b.oom || zr != Z_STREAM_END) {
    free(b.p);
    return ts_fail(TS_ERR_OOM, "PNG: out of memory encoding a %lld x %lld image", (long long)h, (long long)w);
  }
  *out = b.p, *len = b.len;
  return TS_OK;
}

ts_status ts_png_write_file(const char *path, const uint8_t *pixels, int64_t h, int64_t w, int c, int level) {
  uint8_t *png;
  size_t n;
  ts_status st = ts_png_encode(pixels, h, w, c, level, &png, &n);
  if (st) return st;
  errno = 0;
  FILE *f = fopen(path, "wb");
  if (!f) {
    st = ts_fail(TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    free(png);
    return st;
  }
  bool ok = fwrite(png, 1, n, f) == n;
  int e = errno;
  ok = (fclose(f) == 0) && ok;
  if (!e) e = errno;
  free(png);
  if (!ok) return ts_fail(TS_ERR_IO, "cannot write '%s': %s", path, e ? strerror(e) : "write error");
  return TS_OK;
}

/* ---- decoding ------------------------------------------------------------ */

typedef struct png_head {
  uint32_t w, h;
  int depth, ctype, interlace;
  int channels; /* samples per pixel as stored: 1 gray or palette, 2, 3, 4 */
  int npal;     /* palette entries */
  uint8_t pal[256][4];
  bool trns;    /* the palette has alpha values */
} png_head;

static ts_status bad(const char *name, const char *what) {
  return ts_fail(TS_ERR_IO, "%s: corrupt or unsupported PNG: %s", name, what);
}

static ts_status read_ihdr(const char *name, const uint8_t *d, uint32_t n, png_head *hd) {
  if (n != 13) return bad(name, "IHDR is not 13 bytes");
  hd->w = be32(d), hd->h = be32(d + 4);
  hd->depth = d[8], hd->ctype = d[9], hd->interlace = d[12];
  if (hd->w == 0 || hd->h == 0 || hd->w > 0x7fffffff || hd->h > 0x7fffffff)
    return ts_fail(TS_ERR_IO, "%s: corrupt PNG: the image is %u x %u pixels", name, hd->h, hd->w);
  if (d[10] != 0 || d[11] != 0) return bad(name, "unknown compression or filter method in IHDR");
  if (hd->interlace > 1) return bad(name, "unknown interlace method in IHDR");
  int dp = hd->depth;
  switch (hd->ctype) {
  case 0: hd->channels = 1; if (dp != 1 && dp != 2 && dp != 4 && dp != 8 && dp != 16) goto depth; break;
  case 2: hd->channels = 3; if (dp != 8 && dp != 16) goto depth; break;
  case 3: hd->channels = 1; if (dp != 1 && dp != 2 && dp != 4 && dp != 8) goto depth; break;
  case 4: hd->channels = 2; if (dp != 8 && dp != 16) goto depth; break;
  case 6: hd->channels = 4; if (dp != 8 && dp != 16) goto depth; break;
  default: return ts_fail(TS_ERR_IO, "%s: corrupt PNG: unknown colour type %d", name, hd->ctype);
  }
  return TS_OK;
depth:
  return ts_fail(TS_ERR_IO, "%s: corrupt PNG: bit depth %d is not allowed with colour type %d", name, dp, hd->ctype);
}

/* Adam7's passes: start and step of x and y; the whole image is pass 0 of 1 */
static const int A7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};

static int64_t pass_size(int64_t n, int start, int step) { return n > start ? (n - start + step - 1) / step : 0; }

static int64_t row_bytes(const png_head *hd, int64_t w) { return (w * hd->channels * hd->depth + 7) / 8; }

/* Sample i of an unfiltered row, scaled to 8 bits unless it is a palette index. */
static int sample(const png_head *hd, const uint8_t *row, int64_t i) {
  switch (hd->depth) {
  case 8: return row[i];
  case 16: {
    unsigned v = (unsigned)row[2 * i] << 8 | row[2 * i + 1];
    return (int)((v * 255u + 32767u) / 65535u); /* round(v * 255 / 65535) */
  }
  default: {
    int per = 8 / hd->depth, shift = 8 - hd->depth * (int)(i % per + 1);
    int v = (row[i / per] >> shift) & ((1 << hd->depth) - 1);
    return hd->ctype == 3 ? v : v * 255 / ((1 << hd->depth) - 1);
  }
  }
}

/* Unfilters the rows of one pass in place; raw holds (1 + rb) bytes per row. */
static ts_status unfilter(const char *name, uint8_t *raw, int64_t rows, int64_t rb, int bpp) {
  for (int64_t y = 0; y < rows; y++) {
    uint8_t *r = raw + y * (rb + 1), *row = r + 1;
    const uint8_t *prev = y ? r - rb : NULL; /* the previous row's bytes, after its filter byte */
    int f = r[0];
    if (f > 4) return ts_fail(TS_ERR_IO, "%s: corrupt PNG: row %lld has filter type %d (0 to 4 exist)", name, (long long)y, f);
    for (int64_t i = 0; i < rb; i++) {
      int a = i >= bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0, c = prev && i >= bpp ? prev[i - bpp] : 0;
      int pred = f == 0 ? 0 : f == 1 ? a : f == 2 ? b : f == 3 ? (a + b) / 2 : paeth(a, b, c);
      row[i] = (uint8_t)(row[i] + pred);
    }
  }
  return TS_OK;
}

/* Pixels as stored, 8 bits a sample: cc = 1 to 4 channels (a palette image
 * expanded to RGB, or RGBA when it has tRNS), interleaved, into px. */
static ts_status unpack(const char *name, const png_head *hd, uint8_t *raw, uint8_t *px, int cc) {
  int bpp = (hd->channels * hd->depth + 7) / 8;
  int npass = hd->interlace ? 7 : 1;
  uint8_t *p = raw;
  for (int pass = 0; pass < npass; pass++) {
    int x0 = hd->interlace ? A7[pass][0] : 0, y0 = hd->interlace ? A7[pass][1] : 0;
    int dx = hd->interlace ? A7[pass][2] : 1, dy = hd->interlace ? A7[pass][3] : 1;
    int64_t pw = pass_size(hd->w, x0, dx), ph = pass_size(hd->h, y0, dy);
    if (pw == 0 || ph == 0) continue;
    int64_t rb = row_bytes(hd, pw);
    ts_status st = unfilter(name, p, ph, rb, bpp);
    if (st) return st;
    for (int64_t y = 0; y < ph; y++) {
      const uint8_t *row = p + y * (rb + 1) + 1;
      for (int64_t x = 0; x < pw; x++) {
        uint8_t *o = px + ((y0 + y * dy) * (int64_t)hd->w + x0 + x * dx) * cc;
        if (hd->ctype == 3) {
          int k = sample(hd, row, x);
          if (k >= hd->npal)
            return ts_fail(TS_ERR_IO, "%s: corrupt PNG: palette index %d, but the palette has %d colours", name, k, hd->npal);
          memcpy(o, hd->pal[k], (size_t)cc);
        } else {
          for (int s = 0; s < cc; s++) o[s] = (uint8_t)sample(hd, row, x * cc + s);
        }
      }
    }
    p += ph * (rb + 1);
  }
  return TS_OK;
}

/* libpng's rgb_to_gray with torchvision's coefficients 0.2989 and 0.587 in
 * 15-bit fixed point (blue gets the rest), truncated; gray pixels stay. */
static uint8_t to_gray(const uint8_t *p) {
  if (p[0] == p[1] && p[0] == p[2]) return p[0];
  return (uint8_t)((9794u * p[0] + 19234u * p[1] + 3740u * p[2]) >> 15);
}

/* The pixels (cc channels interleaved) into the (C, H, W) tensor for `mode`. */
static void convert(const uint8_t *px, int64_t n, int cc, ts_png_mode mode, uint8_t *out, int oc) {
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *p = px + i * cc;
    bool color = cc >= 3, alpha = cc == 2 || cc == 4;
    uint8_t a = alpha ? p[cc - 1] : 255, v[4];
    if (mode == TS_PNG_UNCHANGED) {
      memcpy(v, p, (size_t)cc);
    } else if (oc <= 2) {
      v[0] = color ? to_gray(p) : p[0];
      v[1] = a;
    } else {
      v[0] = p[0], v[1] = color ? p[1] : p[0], v[2] = color ? p[2] : p[0];
      v[3] = a;
    }
    for (int c = 0; c < oc; c++) out[c * n + i] = v[c];
  }
}

/* Inflates the IDAT data into raw (exactly `need` bytes: fewer is an error). */
typedef struct inflater {
  z_stream z;
  bool started, done;
  uint8_t *raw;
  int64_t need, got;
} inflater;

static ts_status feed(const char *name, inflater *in, const uint8_t *d, uint32_t n) {
  if (in->done) return TS_OK; /* data after the stream's end: ignored, as libpng does */
  in->z.next_in = (Bytef *)d, in->z.avail_in = n;
  while (in->z.avail_in > 0 && !in->done) {
    if (in->got == in->need) {
      /* the image is complete: what follows must be the stream's end (the checksum) */
      uint8_t scratch[64];
      in->z.next_out = scratch, in->z.avail_out = sizeof scratch;
      int r = inflate(&in->z, Z_NO_FLUSH);
      if (r == Z_STREAM_END || in->z.avail_out < sizeof scratch) in->done = true; /* more data than rows: ignored */
      else if (r != Z_OK && r != Z_BUF_ERROR)
        return ts_fail(TS_ERR_IO, "%s: corrupt PNG: the image data does not decompress (%s)", name, in->z.msg ? in->z.msg : "zlib error");
      continue;
    }
    int64_t room = in->need - in->got;
    in->z.next_out = in->raw + in->got, in->z.avail_out = (uInt)(room > (1 << 30) ? (1 << 30) : room);
    uInt before = in->z.avail_out;
    int r = inflate(&in->z, Z_NO_FLUSH);
    in->got += before - in->z.avail_out;
    if (r == Z_STREAM_END) in->done = true;
    else if (r != Z_OK && r != Z_BUF_ERROR)
      return ts_fail(TS_ERR_IO, "%s: corrupt PNG: the image data does not decompress (%s)", name, in->z.msg ? in->z.msg : "zlib error");
    else if (r == Z_BUF_ERROR && in->z.avail_in > 0 && in->z.avail_out > 0)
      return ts_fail(TS_ERR_IO, "%s: corrupt PNG: the image data does not decompress", name);
  }
  return TS_OK;
}

ts_status ts_png_decode(const uint8_t *data, size_t len, ts_png_mode mode, const char *name, ts_tensor **out) {
  if (mode < TS_PNG_UNCHANGED || mode > TS_PNG_RGB_ALPHA) return ts_fail(TS_ERR_ARG, "%s: unknown read mode %d", name, (int)mode);
  if (len < 8 || memcmp(data, SIGNATURE, 8) != 0) {
    if (len >= 8 && memcmp(data + 1, "PNG", 3) == 0)
      return ts_fail(TS_ERR_IO, "%s: corrupt PNG: its signature is damaged (a file sent as text mangles it)", name);
    return ts_fail(TS_ERR_IO, "%s: not a PNG file (it does not start with the PNG signature)", name);
  }
  png_head hd = {0};
  inflater in = {0};
  uint8_t *px = NULL;
  ts_status st = TS_OK;
  bool seen_ihdr = false, seen_idat = false, seen_end = false, idat_ended = false;
  size_t pos = 8;
  while (pos < len && !seen_end) {
    if (len - pos < 12) { st = bad(name, "the file ends inside a chunk header (truncated)"); goto done; }
    uint32_t n = be32(data + pos);
    const uint8_t *type = data + pos + 4, *d = data + pos + 8;
    if (n > 0x7fffffff) { st = bad(name, "a chunk length over 2^31 - 1"); goto done; }
    if (len - pos - 12 < n) { st = bad(name, "the file ends inside a chunk (truncated)"); goto done; }
    for (int i = 0; i < 4; i++)
      if (!((type[i] >= 'a' && type[i] <= 'z') || (type[i] >= 'A' && type[i] <= 'Z'))) {
        st = bad(name, "a chunk type that is not four letters");
        goto done;
      }
    bool critical = !(type[0] & 32);
    uint32_t crc = (uint32_t)crc32(crc32(0, type, 4), d, n);
    pos += 12 + (size_t)n;
    if (crc != be32(d + n)) {
      if (!critical) continue; /* an ancillary chunk that got damaged is skipped, as libpng does */
      st = ts_fail(TS_ERR_IO, "%s: corrupt PNG: the CRC of the %.4s chunk does not match", name, (const char *)type);
      goto done;
    }
    if (!seen_ihdr) {
      if (memcmp(type, "IHDR", 4) != 0) { st = bad(name, "the first chunk is not IHDR"); goto done; }
      if ((st = read_ihdr(name, d, n, &hd))) goto done;
      seen_ihdr = true;
      /* the filtered data of every pass: (1 + row bytes) per row of each */
      int64_t need = 0;
      for (int pass = 0; pass < (hd.interlace ? 7 : 1); pass++) {
        int64_t pw = hd.interlace ? pass_size(hd.w, A7[pass][0], A7[pass][2]) : hd.w;
        int64_t ph = hd.interlace ? pass_size(hd.h, A7[pass][1], A7[pass][3]) : hd.h;
        if (pw && ph) need += ph * (1 + row_bytes(&hd, pw));
      }
      int64_t pixels = (int64_t)hd.w * hd.h;
      if (need > TS_PNG_MAX_BYTES || pixels * 4 > TS_PNG_MAX_BYTES) {
        st = ts_fail(TS_ERR_IO, "%s: the PNG is %u x %u pixels: more than tensh decodes (at most %lld bytes)", name, hd.h, hd.w,
                     (long long)TS_PNG_MAX_BYTES);
        goto done;
      }
      in.need = need;
      if (inflateInit(&in.z) != Z_OK) { st = ts_fail(TS_ERR_OOM, "%s: cannot start zlib (out of memory)", name); goto done; }
      in.started = true;
      continue;
    }
    if (memcmp(type, "IHDR", 4) == 0) { st = bad(name, "a second IHDR"); goto done; }
    if (memcmp(type, "PLTE", 4) == 0) {
      if (seen_idat || hd.npal) { st = bad(name, "PLTE after the image data, or twice"); goto done; }
      if (n == 0 || n % 3 || n / 3 > 256) { st = bad(name, "a palette of a size that is not 1 to 256 colours"); goto done; }
      hd.npal = (int)(n / 3);
      for (int k = 0; k < hd.npal; k++) hd.pal[k][0] = d[3 * k], hd.pal[k][1] = d[3 * k + 1], hd.pal[k][2] = d[3 * k + 2];
      for (int k = 0; k < 256; k++) hd.pal[k][3] = 255;
    } else if (memcmp(type, "tRNS", 4) == 0) {
      /* a palette's alpha per entry; a gray or RGB key colour is ignored (as torchvision) */
      if (hd.ctype == 3) {
        if (n > (uint32_t)hd.npal) { st = bad(name, "tRNS has more entries than the palette"); goto done; }
        for (uint32_t k = 0; k < n; k++) hd.pal[k][3] = d[k];
        hd.trns = true;
      }
    } else if (memcmp(type, "IDAT", 4) == 0) {
      if (idat_ended) { st = bad(name, "IDAT chunks that are not consecutive"); goto done; }
      if (hd.ctype == 3 && hd.npal == 0) { st = bad(name, "a palette image without a palette (PLTE)"); goto done; }
      if (!in.raw && !(in.raw = malloc((size_t)in.need))) {
        st = ts_fail(TS_ERR_OOM, "%s: out of memory for a %u x %u image", name, hd.h, hd.w);
        goto done;
      }
      seen_idat = true;
      if ((st = feed(name, &in, d, n))) goto done;
    } else if (memcmp(type, "IEND", 4) == 0) {
      seen_end = true;
    } else if (critical) {
      st = ts_fail(TS_ERR_IO, "%s: unsupported PNG: an unknown critical chunk %.4s", name, (const char *)type);
      goto done;
    }
    if (seen_idat && memcmp(type, "IDAT", 4) != 0) idat_ended = true;
  }
  if (!seen_ihdr) { st = bad(name, "no IHDR chunk (truncated)"); goto done; }
  if (!seen_idat) { st = bad(name, "no image data (IDAT) (truncated)"); goto done; }
  if (in.got < in.need) {
    st = ts_fail(TS_ERR_IO, "%s: corrupt PNG: truncated image data (%lld of %lld bytes)", name, (long long)in.got,
                 (long long)in.need);
    goto done;
  }
  if (!in.done) { st = bad(name, "the image data's zlib stream is cut short"); goto done; }
  if (!seen_end) { st = bad(name, "no IEND chunk: the file is truncated"); goto done; }
  int cc = hd.ctype == 3 ? (hd.trns ? 4 : 3) : hd.channels;
  int oc = mode == TS_PNG_UNCHANGED ? cc : mode == TS_PNG_GRAY ? 1 : mode == TS_PNG_GRAY_ALPHA ? 2 : mode == TS_PNG_RGB ? 3 : 4;
  int64_t npx = (int64_t)hd.w * hd.h;
  if (!(px = malloc((size_t)(npx * cc)))) { st = ts_fail(TS_ERR_OOM, "%s: out of memory for a %u x %u image", name, hd.h, hd.w); goto done; }
  if ((st = unpack(name, &hd, in.raw, px, cc))) goto done;
  int64_t sizes[3] = {oc, hd.h, hd.w};
  ts_tensor *t = NULL;
  if ((st = ts_tensor_empty(3, sizes, TS_UINT8, TS_DEVICE_CPU, &t))) goto done;
  convert(px, npx, cc, mode, ts_data(t), oc);
  *out = t;
done:
  if (in.started) inflateEnd(&in.z);
  free(in.raw), free(px);
  return st;
}

ts_status ts_png_read_file(const char *path, ts_png_mode mode, ts_tensor **out) {
  errno = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return ts_fail(TS_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  uint8_t *data = NULL;
  size_t len = 0, cap = 0;
  ts_status st = TS_OK;
  for (;;) {
    if (len == cap) {
      size_t nc = cap ? 2 * cap : 65536;
      uint8_t *d = nc > cap ? realloc(data, nc) : NULL;
      if (!d) { st = ts_fail(TS_ERR_OOM, "cannot read '%s': out of memory", path); break; }
      data = d, cap = nc;
    }
    size_t r = fread(data + len, 1, cap - len, f);
    len += r;
    if (r == 0) {
      if (ferror(f)) st = ts_fail(TS_ERR_IO, "cannot read '%s': %s", path, strerror(errno ? errno : EIO));
      break;
    }
  }
  fclose(f);
  if (!st) st = ts_png_decode(data, len, mode, path, out);
  free(data);
  return st;
}
