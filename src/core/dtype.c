/* dtypes: names, sizes, categories and torch's promotion lattice. */
#include "tensh.h"
#include "dtype_store.h"
#include "half.h"

#include <string.h>

const uint8_t ts_dtype_sizes[TS_DTYPE_COUNT] = {4, 8, 2, 2, 8, 4, 1, 1, 1, 2};

static const char *const names[TS_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool", "int8", "int16"};

const char *ts_dtype_name(ts_dtype d) { return (unsigned)d < TS_DTYPE_COUNT ? names[d] : "?"; }

ts_status ts_dtype_from_name(const char *s, ts_dtype *out) {
  static const struct { const char *alias; ts_dtype d; } aliases[] = {
      {"float", TS_FLOAT32}, {"double", TS_FLOAT64}, {"half", TS_FLOAT16}, {"long", TS_INT64},
      {"int", TS_INT32},     {"byte", TS_UINT8},     {"bf16", TS_BFLOAT16}, {"fp16", TS_FLOAT16},
      {"fp32", TS_FLOAT32},  {"fp64", TS_FLOAT64}, {"short", TS_INT16}};
  if (strncmp(s, "torch.", 6) == 0) s += 6;
  for (int i = 0; i < TS_DTYPE_COUNT; i++)
    if (strcmp(s, names[i]) == 0) return *out = (ts_dtype)i, TS_OK;
  for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
    if (strcmp(s, aliases[i].alias) == 0) return *out = aliases[i].d, TS_OK;
  return ts_fail(TS_ERR_DTYPE,
                 "unknown dtype '%s' (expected float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8 or bool)", s);
}

bool ts_dtype_is_float(ts_dtype d) {
  return d == TS_FLOAT32 || d == TS_FLOAT64 || d == TS_FLOAT16 || d == TS_BFLOAT16;
}

bool ts_dtype_is_int(ts_dtype d) {
  return d == TS_INT64 || d == TS_INT32 || d == TS_INT16 || d == TS_INT8 || d == TS_UINT8;
}

/* torch.promote_types restricted to our dtypes. Order of the lattice:
 * bool < {uint8, int8} < int16 < int32 < int64 < {float16, bfloat16} < float32 < float64;
 * uint8 with int8 gives int16 (the smallest type holding both ranges), and
 * float16 with bfloat16 gives float32. */
ts_dtype ts_promote(ts_dtype a, ts_dtype b) {
  static const int rank[TS_DTYPE_COUNT] = {
      [TS_BOOL] = 0, [TS_UINT8] = 1, [TS_INT8] = 1, [TS_INT16] = 2, [TS_INT32] = 3, [TS_INT64] = 4,
      [TS_FLOAT16] = 5, [TS_BFLOAT16] = 5, [TS_FLOAT32] = 6, [TS_FLOAT64] = 7};
  if (a == b) return a;
  if ((a == TS_FLOAT16 && b == TS_BFLOAT16) || (a == TS_BFLOAT16 && b == TS_FLOAT16)) return TS_FLOAT32;
  if ((a == TS_UINT8 && b == TS_INT8) || (a == TS_INT8 && b == TS_UINT8)) return TS_INT16;
  return rank[a] >= rank[b] ? a : b;
}

/* Element access by dtype, for code that is not performance critical. */
double ts_load_f64(const void *p, ts_dtype dt) {
  switch (dt) {
  case TS_FLOAT32: return *(const float *)p;
  case TS_FLOAT64: return *(const double *)p;
  case TS_FLOAT16: return ts_half_to_float(*(const uint16_t *)p);
  case TS_BFLOAT16: return ts_bf16_to_float(*(const uint16_t *)p);
  case TS_INT64: return (double)*(const int64_t *)p;
  case TS_INT32: return *(const int32_t *)p;
  case TS_INT16: return *(const int16_t *)p;
  case TS_INT8: return *(const int8_t *)p;
  case TS_UINT8: return *(const uint8_t *)p;
  case TS_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

void ts_store_f64(void *p, ts_dtype dt, double v) { ts_store_f64_as(p, dt, v); }

int64_t ts_load_i64(const void *p, ts_dtype dt) {
  switch (dt) {
  case TS_INT64: return *(const int64_t *)p;
  case TS_INT32: return *(const int32_t *)p;
  case TS_INT16: return *(const int16_t *)p;
  case TS_INT8: return *(const int8_t *)p;
  case TS_UINT8: return *(const uint8_t *)p;
  case TS_BOOL: return *(const uint8_t *)p != 0;
  default: return (int64_t)ts_load_f64(p, dt);
  }
}

void ts_store_i64(void *p, ts_dtype dt, int64_t v) { ts_store_i64_as(p, dt, v); }
