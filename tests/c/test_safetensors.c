/* The safetensors core (src/io/safetensors.c) without Lua: the exact header
 * bytes the writer produces, the parser's answer to each kind of corrupt
 * header, JSON escapes both ways, and a file round trip with a strided tensor. */
#include "test.h"
#include "io/safetensors.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ts_tensor *filled(int ndim, const int64_t *sizes, ts_dtype dt, double start) {
  ts_tensor *t = NULL;
  CHECK_OK(ts_tensor_empty(ndim, sizes, dt, TS_DEVICE_CPU, &t));
  if (!t) return NULL;
  int64_t n = ts_numel(t);
  for (int64_t i = 0; i < n; i++)
    ts_store_f64((char *)ts_data(t) + i * (int64_t)ts_dtype_size(dt), dt, start + (double)i);
  return t;
}

static void check_eq_str(const char *got, size_t n, const char *want, int line) {
  if (n != strlen(want) || memcmp(got, want, n) != 0) {
    char m[2048];
    snprintf(m, sizeof m, "expected\n[%s]\ngot\n[%.*s]", want, (int)n, got);
    t_fail(__FILE__, line, m);
  }
}

/* The reference layout, written out by hand: __metadata__ first; tensors by
 * item size (8-byte F64, then the 4-byte ones by name), compact JSON, spaces
 * to a multiple of 8. */
void test_safetensors_header_bytes(void) {
  int64_t s23[2] = {2, 3}, s1[1] = {1}, s0[1] = {0};
  ts_tensor *ts[4] = {filled(2, s23, TS_FLOAT32, 0), filled(1, s1, TS_FLOAT64, 0), filled(0, NULL, TS_INT32, 7),
                      filled(1, s0, TS_BOOL, 0)};
  const char *names[4] = {"w", "b\"q", "a\n\x01", "e"};
  const char *mk[1] = {"k"}, *mv[1] = {"v\\"};
  char *h = NULL;
  size_t n = 0;
  CHECK_OK(ts_safetensors_header(4, names, ts, 1, mk, mv, &h, &n));
  const char *want = "{\"__metadata__\":{\"k\":\"v\\\\\"},"
                     "\"b\\\"q\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                     "\"a\\n\\u0001\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[8,12]},"
                     "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[12,36]},"
                     "\"e\":{\"dtype\":\"BOOL\",\"shape\":[0],\"data_offsets\":[36,36]}}";
  char padded[1024];
  snprintf(padded, sizeof padded, "%s%.*s", want, (int)((8 - strlen(want) % 8) % 8), "        ");
  CHECK(n % 8 == 0);
  if (h) check_eq_str(h, n, padded, __LINE__);
  /* and it parses back to the same entries */
  ts_safetensors *sf = NULL;
  CHECK_OK(ts_safetensors_parse("mem", h, n, 36, &sf));
  if (sf) {
    CHECK(sf->n == 4 && sf->nmeta == 1);
    CHECK(strcmp(sf->meta_keys[0], "k") == 0 && strcmp(sf->meta_values[0], "v\\") == 0);
    CHECK(strcmp(sf->entries[0].name, "b\"q") == 0 && sf->entries[0].dtype == TS_FLOAT64);
    CHECK(strcmp(sf->entries[1].name, "a\n\x01") == 0 && sf->entries[1].ndim == 0);
    CHECK(sf->entries[2].ndim == 2 && sf->entries[2].sizes[1] == 3 && sf->entries[2].end == 36);
    CHECK(strcmp(sf->entries[3].name, "e") == 0 && sf->entries[3].begin == 36);
  }
  ts_safetensors_close(sf);
  free(h);
  /* no tensors, no metadata: "{}" and six spaces */
  CHECK_OK(ts_safetensors_header(0, NULL, NULL, 0, NULL, NULL, &h, &n));
  if (h) check_eq_str(h, n, "{}      ", __LINE__);
  free(h);
  for (int i = 0; i < 4; i++) ts_tensor_release(ts[i]);
}

void test_safetensors_header_rejects(void) {
  int64_t s1[1] = {1};
  ts_tensor *t = filled(1, s1, TS_FLOAT32, 0);
  char *h = NULL;
  size_t n;
  const char *dup[2] = {"x", "x"}, *badutf[1] = {"\xff"}, *reserved[1] = {"__metadata__"};
  ts_tensor *two[2] = {t, t};
  CHECK(ts_safetensors_header(2, dup, two, 0, NULL, NULL, &h, &n) == TS_ERR_ARG);
  CHECK(strstr(ts_last_error(), "two tensors are named 'x'"));
  CHECK(ts_safetensors_header(1, badutf, two, 0, NULL, NULL, &h, &n) == TS_ERR_ARG);
  CHECK(strstr(ts_last_error(), "not valid UTF-8"));
  CHECK(ts_safetensors_header(1, reserved, two, 0, NULL, NULL, &h, &n) == TS_ERR_ARG);
  CHECK(strstr(ts_last_error(), "reserved"));
  /* UTF-8 as JSON needs it */
  CHECK(ts_utf8_valid("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10));
  CHECK(!ts_utf8_valid("\xc0\xaf", 2));         /* overlong '/' */
  CHECK(!ts_utf8_valid("\xed\xa0\x80", 3));     /* a surrogate */
  CHECK(!ts_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
  CHECK(!ts_utf8_valid("\xe2\x82", 2));         /* cut short */
  CHECK(!ts_utf8_valid("\x80", 1));              /* a lone continuation byte */
  ts_tensor_release(t);
}

/* Each corrupt header gives TS_ERR_IO and a message naming the problem. */
void test_safetensors_parse_errors(void) {
  static const struct { const char *header; int64_t data; const char *msg; } cases[] = {
      {"", 0, "does not start with '{'"},
      {" {}", 0, "does not start with '{'"},
      {"{\"a\":", 0, "not valid JSON"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, "bytes after its JSON object"},
      {"{\"a\":1}", 0, "expected an object"},
      {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "non-string \"dtype\""},
      {"{\"a\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "unsupported dtype 'U16'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,4]}}", 4, "non-list \"shape\""},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative integers"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "non-negative integers"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4, "non-negative integers"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "has 9 dims"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, "overflows"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "two non-negative integers"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4, "two non-negative integers"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "end before they begin"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "hold 4 bytes, but a F32 tensor of 2 elements needs 8"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "truncated"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "overlaps"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "belong to no tensor (before tensor 'b')"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "data bytes [0, 4) belong to no tensor"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6, "2 bytes after the last tensor"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "names tensor 'a' twice"},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "appears twice"},
      {"{\"__metadata__\":{\"k\":1}}", 0, "is not a string"},
      {"{\"__metadata__\":[]}", 0, "must be an object"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, "truncated"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ts_safetensors *sf = NULL;
    ts_status st = ts_safetensors_parse("bad.safetensors", cases[i].header, strlen(cases[i].header), cases[i].data, &sf);
    if (st != TS_ERR_IO || !strstr(ts_last_error(), cases[i].msg) || !strstr(ts_last_error(), "'bad.safetensors'")) {
      char m[1024];
      snprintf(m, sizeof m, "case %zu (%s): expected an error with '%s', got status %d: %s", i, cases[i].header,
               cases[i].msg, (int)st, st ? ts_last_error() : "(none)");
      t_fail(__FILE__, __LINE__, m);
    }
    if (!st) ts_safetensors_close(sf);
  }
  /* valid odd cases: empty object, zero-size tensors sharing an offset, trailing padding */
  const char *ok = "{\"z\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[0,0]},"
                   "\"y\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                   "\"x\":{\"dtype\":\"BOOL\",\"shape\":[0],\"data_offsets\":[2,2]}}   ";
  ts_safetensors *sf = NULL;
  CHECK_OK(ts_safetensors_parse("ok", ok, strlen(ok), 2, &sf));
  if (sf) CHECK(sf->n == 3 && strcmp(sf->entries[0].name, "z") == 0 && strcmp(sf->entries[2].name, "x") == 0);
  ts_safetensors_close(sf);
  sf = NULL;
  CHECK_OK(ts_safetensors_parse("ok", "{}", 2, 0, &sf));
  ts_safetensors_close(sf);
}

/* JSON escapes from other writers: \uXXXX, surrogate pairs, \/ */
void test_safetensors_json_escapes(void) {
  const char *h = "{\"\\ud83d\\ude00\\u00e9\\/\\t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                  "\"__metadata__\":{\"\\u0041\":\"\\\"\"}}";
  ts_safetensors *sf = NULL;
  CHECK_OK(ts_safetensors_parse("esc", h, strlen(h), 1, &sf));
  if (sf) {
    CHECK(strcmp(sf->entries[0].name, "\xf0\x9f\x98\x80\xc3\xa9/\t") == 0);
    CHECK(strcmp(sf->meta_keys[0], "A") == 0 && strcmp(sf->meta_values[0], "\"") == 0);
  }
  ts_safetensors_close(sf);
  /* a lone surrogate is not text */
  const char *lone = "{\"\\ud83d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  sf = NULL;
  CHECK(ts_safetensors_parse("esc", lone, strlen(lone), 1, &sf) == TS_ERR_IO);
  ts_safetensors_close(sf);
}

/* save -> open -> read through a real file, with a transposed (strided) tensor */
void test_safetensors_file_roundtrip(void) {
  char dir[] = "/tmp/tensh_st_XXXXXX";
  if (!mkdtemp(dir)) {
    t_fail(__FILE__, __LINE__, "mkdtemp failed");
    return;
  }
  char path[256];
  snprintf(path, sizeof path, "%s/rt.safetensors", dir);
  int64_t s23[2] = {2, 3}, s4[1] = {4};
  ts_tensor *a = filled(2, s23, TS_FLOAT32, 1), *at = NULL, *b = filled(1, s4, TS_BFLOAT16, -2);
  CHECK_OK(ts_transpose(a, 0, 1, &at));
  const char *names[2] = {"at", "b"}, *mk[1] = {"m"}, *mv[1] = {"\xc3\xa9"};
  ts_tensor *ts[2] = {at, b};
  CHECK_OK(ts_safetensors_save(path, 2, names, ts, 1, mk, mv));
  ts_safetensors *sf = NULL;
  CHECK_OK(ts_safetensors_open(path, &sf));
  if (sf) {
    CHECK(sf->n == 2 && sf->nmeta == 1 && strcmp(sf->meta_values[0], "\xc3\xa9") == 0);
    ts_tensor *r = NULL;
    CHECK_OK(ts_safetensors_read(sf, 0, &r)); /* F32 first: larger items lead */
    if (r) {
      CHECK(r->ndim == 2 && r->sizes[0] == 3 && r->sizes[1] == 2 && r->dtype == TS_FLOAT32);
      /* the logical values of a^T: r[i][j] = a[j][i] = 1 + 3j + i */
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) CHECK(((float *)ts_data(r))[i * 2 + j] == (float)(1 + 3 * j + i));
      ts_tensor_release(r);
    }
    r = NULL;
    CHECK_OK(ts_safetensors_read(sf, 1, &r));
    if (r) {
      CHECK(r->dtype == TS_BFLOAT16 && memcmp(ts_data(r), ts_data(b), 8) == 0);
      ts_tensor_release(r);
    }
    CHECK(ts_safetensors_read(sf, 2, &r) == TS_ERR_ARG);
  }
  ts_safetensors_close(sf);
  /* no temp file is left beside it */
  char tmp[300];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  CHECK(access(tmp, F_OK) != 0);
  unlink(path);
  rmdir(dir);
  ts_tensor_release(a);
  ts_tensor_release(at);
  ts_tensor_release(b);
}
