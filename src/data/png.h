/* PNG images over zlib, without libpng: the encoder save_image, add_image
 * and the Jupyter kernel use, and the decoder behind read_image.
 *
 * The decoder reads what other tools write: gray, gray + alpha, RGB, RGBA
 * and palette images at every bit depth PNG allows (1, 2, 4, 8, 16; 16-bit
 * samples are scaled to 8 bits, low depths expanded as libpng does), all
 * five row filters, Adam7 interlacing, and a palette's tRNS transparency. A
 * file that is not a PNG, is truncated, or fails a CRC or zlib's checksum is
 * an error that says so; no input makes it read or write out of bounds.
 * Plain C; the Lua binding is src/lua/limage.c. */
#ifndef TENSH_PNG_H
#define TENSH_PNG_H

#include "core/tensh.h"

/* torchvision.io.ImageReadMode: the channels read_image returns */
typedef enum ts_png_mode {
  TS_PNG_UNCHANGED,  /* as stored: 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA; a palette as RGB (RGBA with tRNS) */
  TS_PNG_GRAY,       /* 1: colour as libpng's rgb_to_gray (0.2989, 0.587, 0.1141, truncated) */
  TS_PNG_GRAY_ALPHA, /* 2: alpha 255 where the file has none */
  TS_PNG_RGB,        /* 3: gray repeated, alpha dropped */
  TS_PNG_RGB_ALPHA,  /* 4 */
} ts_png_mode;

#define TS_PNG_MAX_BYTES ((int64_t)1 << 32) /* decoded pixels larger than 4 GiB are refused */

/* Encodes h rows of w pixels of c interleaved 8-bit channels (1 gray,
 * 2 gray + alpha, 3 RGB, 4 RGBA) as a PNG, each row with the filter that
 * compresses best (libpng's heuristic) and zlib at `level` (0-9, -1 for
 * zlib's default). *out is malloc'd (free it). */
ts_status ts_png_encode(const uint8_t *pixels, int64_t h, int64_t w, int c, int level, uint8_t **out, size_t *len);

/* Decodes the PNG in data[0, len) into a new uint8 (C, H, W) CPU tensor;
 * `name` (a path, or the caller's name) starts every error message. */
ts_status ts_png_decode(const uint8_t *data, size_t len, ts_png_mode mode, const char *name, ts_tensor **out);

/* The same on files. */
ts_status ts_png_read_file(const char *path, ts_png_mode mode, ts_tensor **out);
ts_status ts_png_write_file(const char *path, const uint8_t *pixels, int64_t h, int64_t w, int c, int level);

#endif
