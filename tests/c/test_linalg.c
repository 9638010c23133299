/* The BMM kernel's contract on layouts the op layer never produces (the op
 * layer always hands it a fresh row-major out): a column-major out (GEMM on
 * the transposed problem), an out BLAS cannot write (the blocked loop), and
 * beta reading the old out, for every dtype family. */
#include "test.h"

#include <math.h>

/* (B, R, C) view of t with strides given per dim */
static ts_tensor *view3(ts_tensor *t, int64_t b, int64_t r, int64_t c, int64_t sb, int64_t sr, int64_t sc) {
  int64_t sizes[3] = {b, r, c}, strides[3] = {sb, sr, sc};
  ts_tensor *v = NULL;
  CHECK_OK(ts_tensor_view_of(t, 3, sizes, strides, 0, &v));
  return v;
}

static double at(const ts_tensor *t, int64_t b, int64_t i, int64_t j) {
  const char *p = (const char *)ts_data(t) +
                  (b * t->strides[0] + i * t->strides[1] + j * t->strides[2]) * (int64_t)ts_dtype_size(t->dtype);
  return ts_load_f64(p, t->dtype);
}

static void check_layout(ts_dtype dt, int64_t osb, int64_t osr, int64_t osc) {
  enum { B = 2, M = 3, K = 4, N = 5 };
  int64_t sa[3] = {B, M, K}, sb[3] = {B, K, N}, so[1] = {B * M * N * 2};
  ts_tensor *a, *b, *buf;
  CHECK_OK(ts_tensor_empty(3, sa, dt, TS_DEVICE_CPU, &a));
  CHECK_OK(ts_tensor_empty(3, sb, dt, TS_DEVICE_CPU, &b));
  CHECK_OK(ts_tensor_empty(1, so, dt, TS_DEVICE_CPU, &buf));
  size_t es = ts_dtype_size(dt);
  for (int64_t i = 0; i < B * M * K; i++) ts_store_f64((char *)ts_data(a) + i * (int64_t)es, dt, (double)(i % 7) - 3);
  for (int64_t i = 0; i < B * K * N; i++) ts_store_f64((char *)ts_data(b) + i * (int64_t)es, dt, (double)(i % 5) - 2);
  for (int64_t i = 0; i < so[0]; i++) ts_store_f64((char *)ts_data(buf) + i * (int64_t)es, dt, (double)(i % 3));
  ts_tensor *o = view3(buf, B, M, N, osb, osr, osc);
  double old[B][M][N];
  for (int64_t x = 0; x < B; x++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) old[x][i][j] = at(o, x, i, j);
  ts_tensor *in[2] = {a, b};
  ts_call c = {.op = TS_OP_BMM, .nin = 2, .in = in, .out = {o}, .f = {2, -1}};
  CHECK_OK(ts_dispatch(&c));
  for (int64_t x = 0; x < B; x++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += at(a, x, i, k) * at(b, x, k, j);
        double want = 2 * s - old[x][i][j], got = at(o, x, i, j);
        if (fabs(got - want) > 1e-9 * (1 + fabs(want))) {
          char m[160];
          snprintf(m, sizeof m, "%s out strides (%lld, %lld, %lld) [%lld][%lld][%lld]: want %g, got %g",
                   ts_dtype_name(dt), (long long)osb, (long long)osr, (long long)osc, (long long)x, (long long)i,
                   (long long)j, want, got);
          t_fail(__FILE__, __LINE__, m);
          goto out;
        }
      }
out:
  ts_tensor_release(o);
  ts_tensor_release(a);
  ts_tensor_release(b);
  ts_tensor_release(buf);
}

void test_bmm_out_layouts(void) {
  const ts_dtype dts[] = {TS_FLOAT32, TS_FLOAT64, TS_FLOAT16, TS_BFLOAT16, TS_INT64, TS_INT32};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    check_layout(dts[d], 15, 5, 1);  /* row-major */
    check_layout(dts[d], 15, 1, 3);  /* column-major: GEMM computes out^T */
    check_layout(dts[d], 30, 10, 2); /* no unit stride: the blocked loop */
  }
}
