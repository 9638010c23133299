/* CPU copy with dtype conversion (every pair of dtypes), fill, arange and
 * linspace. Conversions follow C casts, as torch does; float to bool is
 * `x != 0`; float16 and bfloat16 round to nearest even. */
#include "cpu.h"

#include <string.h>

/* One loop per (source, destination) pair. */
#define CVT(NAME, SS, LD, DS, ST, C)                                                    \
  static void NAME(char **d, const int64_t *s, int64_t n, void *ctx) {                 \
    (void)ctx;                                                                         \
    if (s[0] == sizeof(DS) && s[1] == sizeof(SS)) {                                    \
      DS *o = (DS *)d[0];                                                              \
      const SS *a = (const SS *)d[1];                                                  \
      for (int64_t i = 0; i < n; i++) ST(o + i, DS, (C)LD(a + i, SS));                 \
    } else {                                                                           \
      for (int64_t i = 0; i < n; i++) ST(d[0] + i * s[0], DS, (C)LD(d[1] + i * s[1], SS)); \
    }                                                                                  \
  }

#define ST_BOOLV(p, S, v) (*(uint8_t *)(p) = (uint8_t)((v) != 0))
#define LD_BOOLV(p, S) (*(const uint8_t *)(p) != 0)

/* Sources, each with its storage type, load, and compute type. */
#define FOR_DST(SRC, SS, LD, C)                                         \
  CVT(cvt_##SRC##_f32, SS, LD, float, TS_ST_SAME, C)                    \
  CVT(cvt_##SRC##_f64, SS, LD, double, TS_ST_SAME, C)                   \
  CVT(cvt_##SRC##_f16, SS, LD, uint16_t, TS_ST_F16, C)                  \
  CVT(cvt_##SRC##_bf16, SS, LD, uint16_t, TS_ST_BF16, C)                \
  CVT(cvt_##SRC##_i64, SS, LD, int64_t, TS_ST_SAME, C)                  \
  CVT(cvt_##SRC##_i32, SS, LD, int32_t, TS_ST_SAME, C)                  \
  CVT(cvt_##SRC##_u8, SS, LD, uint8_t, TS_ST_SAME, C)                   \
  CVT(cvt_##SRC##_b, SS, LD, uint8_t, ST_BOOLV, C)                      \
  CVT(cvt_##SRC##_i8, SS, LD, int8_t, TS_ST_SAME, C)                    \
  CVT(cvt_##SRC##_i16, SS, LD, int16_t, TS_ST_SAME, C)

FOR_DST(f32, float, TS_LD_SAME, float)
FOR_DST(f64, double, TS_LD_SAME, double)
FOR_DST(f16, uint16_t, TS_LD_F16, float)
FOR_DST(bf16, uint16_t, TS_LD_BF16, float)
FOR_DST(i64, int64_t, TS_LD_SAME, int64_t)
FOR_DST(i32, int32_t, TS_LD_SAME, int64_t)
FOR_DST(u8, uint8_t, TS_LD_SAME, int64_t)
FOR_DST(b, uint8_t, LD_BOOLV, int64_t)
FOR_DST(i8, int8_t, TS_LD_SAME, int64_t)
FOR_DST(i16, int16_t, TS_LD_SAME, int64_t)

#define ROW(SRC)                                                                          \
  {cvt_##SRC##_f32, cvt_##SRC##_f64, cvt_##SRC##_f16, cvt_##SRC##_bf16, cvt_##SRC##_i64, \
   cvt_##SRC##_i32, cvt_##SRC##_u8,  cvt_##SRC##_b,    cvt_##SRC##_i8,   cvt_##SRC##_i16}
/* [source][destination], in ts_dtype order */
static const ts_loop cvt[TS_DTYPE_COUNT][TS_DTYPE_COUNT] = {ROW(f32), ROW(f64), ROW(f16), ROW(bf16),
                                                             ROW(i64), ROW(i32), ROW(u8),  ROW(b),
                                                             ROW(i8),  ROW(i16)};

/* Same dtype: byte copies, memcpy when both sides are dense. */
static void copy_bytes(char **d, const int64_t *s, int64_t n, void *ctx) {
  size_t w = *(size_t *)ctx;
  if (s[0] == (int64_t)w && s[1] == (int64_t)w) {
    memcpy(d[0], d[1], (size_t)n * w);
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy(d[0] + i * s[0], d[1] + i * s[1], w);
}

static ts_status k_copy(const ts_call *c) {
  ts_tensor *ops[2] = {c->out[0], c->in[0]};
  ts_iter it;
  ts_iter_init(&it, 2, ops);
  ts_dtype sd = c->in[0]->dtype, dd = c->out[0]->dtype;
  if (sd == dd) {
    size_t w = ts_dtype_size(dd);
    return ts_iter_run(&it, copy_bytes, &w);
  }
  return ts_iter_run(&it, cvt[sd][dd], NULL);
}

/* fill: the value is converted once into the destination's bytes;
 * ctx holds those bytes, then their width in byte 8. */
static void fill_bytes(char **d, const int64_t *s, int64_t n, void *ctx) {
  const char *v = ctx;
  size_t w = (size_t)(unsigned char)v[8];
  if (s[0] == 8 && w == 8) for (int64_t i = 0; i < n; i++) memcpy(d[0] + 8 * i, v, 8);
  else if (s[0] == 4 && w == 4) for (int64_t i = 0; i < n; i++) memcpy(d[0] + 4 * i, v, 4);
  else for (int64_t i = 0; i < n; i++) memcpy(d[0] + i * s[0], v, w);
}

static ts_status k_fill(const ts_call *c) {
  ts_tensor *out = c->out[0];
  char v[9] = {0};
  if (ts_dtype_is_int(out->dtype) && c->i[0]) ts_store_i64(v, out->dtype, c->i[1]); /* exact int64 */
  else ts_store_f64(v, out->dtype, c->f[0]);
  v[8] = (char)ts_dtype_size(out->dtype);
  ts_iter it;
  ts_iter_init(&it, 1, &out);
  return ts_iter_run(&it, fill_bytes, v);
}

/* arange and linspace fill a fresh contiguous 1-d output. */
static ts_status k_arange(const ts_call *c) {
  ts_tensor *out = c->out[0];
  char *p = ts_data(out);
  size_t w = ts_dtype_size(out->dtype);
  int64_t n = ts_numel(out);
  if (c->i[0]) { /* integer start and step: exact */
    for (int64_t i = 0; i < n; i++) ts_store_i64(p + i * (int64_t)w, out->dtype, c->i[1] + i * c->i[2]);
  } else {
    for (int64_t i = 0; i < n; i++) ts_store_f64(p + i * (int64_t)w, out->dtype, c->f[0] + (double)i * c->f[1]);
  }
  return TS_OK;
}

static ts_status k_linspace(const ts_call *c) {
  ts_tensor *out = c->out[0];
  char *p = ts_data(out);
  size_t w = ts_dtype_size(out->dtype);
  int64_t n = ts_numel(out);
  double start = c->f[0], end = c->f[1], step = n > 1 ? (end - start) / (double)(n - 1) : 0;
  for (int64_t i = 0; i < n; i++) {
    double v = n == 1 ? start : i < n / 2 ? start + step * (double)i : end - step * (double)(n - 1 - i);
    ts_store_f64(p + i * (int64_t)w, out->dtype, v);
  }
  return TS_OK;
}

void ts_cpu_register_copy(ts_kernel *k) {
  k[TS_OP_COPY] = k_copy;
  k[TS_OP_FILL] = k_fill;
  k[TS_OP_ARANGE] = k_arange;
  k[TS_OP_LINSPACE] = k_linspace;
}
