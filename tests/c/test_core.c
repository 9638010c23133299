/* Core invariants: the registry has no gaps, promotion follows torch, half
 * conversions round correctly, views, overflow checks, Philox. */
#include "test.h"
#include "core/half.h"
#include "core/philox.h"
#ifdef TS_HAVE_CUDA
#include "core/cuda_api.h"
#endif

#include <math.h>
#include <pthread.h>
#include <string.h>

void test_registry_complete(void) {
  for (int op = 0; op < TS_OP_COUNT; op++) {
    if (!ts_backends[TS_CPU]->kernels[op] && ts_ops[op].kind != TS_KIND_LIBRARY) {
      char m[128];
      snprintf(m, sizeof m, "op '%s' has no CPU kernel", ts_ops[op].name);
      t_fail(__FILE__, __LINE__, m);
    }
  }
#ifdef TS_HAVE_CUDA
  /* the CUDA table as the backend registers it, whether or not a GPU is here */
  ts_kernel cuda[TS_OP_COUNT] = {0};
  ts_cuda_kernel_table(cuda);
  for (int op = 0; op < TS_OP_COUNT; op++) {
    if (!cuda[op] && ts_ops[op].kind != TS_KIND_LIBRARY) {
      char m[128];
      snprintf(m, sizeof m, "op '%s' has no CUDA kernel", ts_ops[op].name);
      t_fail(__FILE__, __LINE__, m);
    }
  }
#endif
}

void test_promotion(void) {
  CHECK(ts_promote(TS_INT32, TS_FLOAT16) == TS_FLOAT16);
  CHECK(ts_promote(TS_FLOAT16, TS_BFLOAT16) == TS_FLOAT32);
  CHECK(ts_promote(TS_UINT8, TS_BOOL) == TS_UINT8);
  CHECK(ts_promote(TS_INT64, TS_INT32) == TS_INT64);
  CHECK(ts_promote(TS_UINT8, TS_INT8) == TS_INT16);  /* torch: the smallest type holding both */
  CHECK(ts_promote(TS_INT8, TS_BOOL) == TS_INT8);
  CHECK(ts_promote(TS_INT16, TS_UINT8) == TS_INT16);
  CHECK(ts_promote(TS_INT16, TS_INT32) == TS_INT32);
  CHECK(ts_promote(TS_INT8, TS_BFLOAT16) == TS_BFLOAT16);
  ts_tensor *a;
  int64_t sz[1] = {3};
  CHECK_OK(ts_tensor_empty(1, sz, TS_INT32, TS_DEVICE_CPU, &a));
  ts_scalar_box b;
  ts_tensor *ops[2] = {a, ts_scalar_wrap_double(&b, 2.5)};
  CHECK(ts_result_type(2, ops) == TS_FLOAT32); /* int tensor + Lua float -> default float */
  ops[1] = ts_scalar_wrap_int(&b, 2);
  CHECK(ts_result_type(2, ops) == TS_INT32);   /* int tensor + Lua integer keeps int32 */
  ts_tensor_release(a);
}

void test_half_roundtrip(void) {
  /* every float16 bit pattern survives float16 -> float -> float16 */
  for (uint32_t h = 0; h < 65536; h++) {
    float f = ts_half_to_float((uint16_t)h);
    if (f != f) continue;
    if (ts_float_to_half(f) != h) {
      char m[64];
      snprintf(m, sizeof m, "half 0x%04x round trip gave 0x%04x", h, ts_float_to_half(f));
      t_fail(__FILE__, __LINE__, m);
      return;
    }
  }
  CHECK(ts_half_to_float(0x3c00) == 1.0f);
  CHECK(ts_float_to_half(65520.0f) == 0x7c00);          /* rounds to inf */
  CHECK(ts_float_to_half(1.0f + 1.0f / 2048) == 0x3c00); /* tie to even */
  CHECK(ts_bf16_to_float(ts_float_to_bf16(3.140625f)) == 3.140625f);
  CHECK(ts_float_to_bf16(1.0f + 1.0f / 256) == 0x3f80); /* tie to even */
}

void test_view_strides(void) {
  ts_tensor *a, *t, *v;
  int64_t sz[3] = {2, 3, 4};
  CHECK_OK(ts_tensor_empty(3, sz, TS_FLOAT32, TS_DEVICE_CPU, &a));
  CHECK_OK(ts_transpose(a, 0, 2, &t));
  CHECK(t->sizes[0] == 4 && t->strides[0] == 1 && t->strides[2] == 12);
  CHECK(!ts_is_contiguous(t));
  int64_t flat[1] = {24};
  CHECK(ts_view(t, 1, flat, &v) == TS_ERR_SHAPE); /* needs a copy */
  CHECK(strstr(ts_last_error(), "reshape") != NULL);
  CHECK_OK(ts_reshape(t, 1, flat, &v));
  CHECK(ts_is_contiguous(v) && v->storage != a->storage);
  ts_tensor_release(v);
  int64_t two[2] = {6, -1};
  CHECK_OK(ts_view(a, 2, two, &v));
  CHECK(v->sizes[1] == 4 && v->storage == a->storage);
  ts_tensor_release(v);
  ts_tensor_release(t);
  ts_tensor_release(a);
}

void test_overflow(void) {
  ts_tensor *a = NULL;
  int64_t sz[3] = {1ll << 40, 1ll << 40, 1ll << 40};
  CHECK(ts_tensor_empty(3, sz, TS_FLOAT32, TS_DEVICE_CPU, &a) == TS_ERR_OVERFLOW);
  CHECK(a == NULL);
  int64_t sz2[1] = {-2};
  CHECK(ts_tensor_empty(1, sz2, TS_FLOAT32, TS_DEVICE_CPU, &a) == TS_ERR_ARG);
}

void test_philox_known(void) {
  /* Known-answer test from the Random123 distribution (philox4x32_10, zero key and counter). */
  ts_u32x4 r = ts_philox(0, 0);
  CHECK(r.v[0] == 0x6627e8d5u && r.v[1] == 0xe169c58du && r.v[2] == 0xbc57ac4cu && r.v[3] == 0x9b00dbd8u);
}

/* The iterator must visit every element exactly once with the right
 * addresses, whatever the strides: checked by copying a strided source
 * (transposed, sliced, broadcast) and comparing with index arithmetic. */
void test_iter_strided_copy(void) {
  int64_t sz[3] = {3, 5, 7};
  ts_tensor *src, *perm, *dst, *sliced;
  CHECK_OK(ts_tensor_empty(3, sz, TS_INT64, TS_DEVICE_CPU, &src));
  int64_t *p = ts_data(src);
  for (int64_t i = 0; i < 105; i++) p[i] = i;
  int64_t dims[3] = {2, 0, 1};
  CHECK_OK(ts_permute(src, 3, dims, &perm));            /* (7, 3, 5) */
  CHECK_OK(ts_slice(perm, 2, 1, 5, 2, &sliced));        /* (7, 3, 2): j = 1, 3 */
  CHECK_OK(ts_contiguous(sliced, &dst));
  int64_t *q = ts_data(dst);
  int bad = 0;
  for (int a = 0; a < 7; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 2; c++)
        if (q[(a * 3 + b) * 2 + c] != b * 35 + (1 + 2 * c) * 7 + a) bad++;
  CHECK(bad == 0);
  ts_tensor_release(dst);
  /* broadcast: a (5, 1) column expanded to (5, 4) */
  int64_t col[2] = {5, 1}, wide[2] = {5, 4};
  ts_tensor *c5, *e, *ec;
  CHECK_OK(ts_tensor_empty(2, col, TS_FLOAT64, TS_DEVICE_CPU, &c5));
  for (int i = 0; i < 5; i++) ((double *)ts_data(c5))[i] = i + 0.5;
  CHECK_OK(ts_expand(c5, 2, wide, &e));
  CHECK_OK(ts_contiguous(e, &ec));
  for (int i = 0; i < 20; i++) CHECK(((double *)ts_data(ec))[i] == i / 4 + 0.5);
  ts_tensor_release(ec);
  ts_tensor_release(e);
  ts_tensor_release(c5);
  ts_tensor_release(sliced);
  ts_tensor_release(perm);
  ts_tensor_release(src);
}

/* Large enough for the parallel path (several chunks), with a cast. */
void test_iter_parallel_cast(void) {
  int64_t n = 3 * (1 << 18) + 17;
  ts_tensor *a, *b;
  CHECK_OK(ts_tensor_empty(1, &n, TS_INT32, TS_DEVICE_CPU, &a));
  int32_t *p = ts_data(a);
  for (int64_t i = 0; i < n; i++) p[i] = (int32_t)(i - n / 2);
  CHECK_OK(ts_to_dtype(a, TS_FLOAT64, &b));
  const double *q = ts_data(b);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += q[i] != (double)(i - n / 2);
  CHECK(bad == 0);
  ts_tensor_release(b);
  ts_tensor_release(a);
}

/* Tensor headers freed on a thread join that thread's free list
 * (src/core/mempool.c); when the thread exits, the list goes back to malloc.
 * A DataLoader worker whose allocations failed used to lose 320 bytes each. */
static void *make_and_drop_tensors(void *arg) {
  int *failures = arg;
  for (int i = 0; i < 100; i++) {
    int64_t sizes[2] = {INT64_C(1) << 40, INT64_C(1) << 20}; /* 2^60 floats: refused */
    ts_tensor *t = NULL;
    if (ts_tensor_empty(2, sizes, TS_FLOAT32, TS_DEVICE_CPU, &t) != TS_OK) (*failures)++;
    else ts_tensor_release(t);
    int64_t n = 3;
    if (ts_tensor_empty(1, &n, TS_FLOAT32, TS_DEVICE_CPU, &t) == TS_OK) ts_tensor_release(t);
  }
  return NULL;
}

void test_small_blocks_freed_at_thread_exit(void) {
  int64_t before = ts_small_freed_at_exit();
  int failures = 0;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, make_and_drop_tensors, &failures) == 0);
  pthread_join(th, NULL);
  CHECK(failures == 100);
  /* the worker cached at least its tensor and storage headers */
  CHECK(ts_small_freed_at_exit() - before >= 2);
}

/* The creation and random ops are op-layer calls C code (the data loader) can make. */
void test_creation_ops(void) {
  ts_tensor *t = NULL;
  CHECK_OK(ts_arange_int(-2, 10, 3, TS_INT64, TS_DEVICE_CPU, &t));
  CHECK(t->ndim == 1 && t->sizes[0] == 4);
  const int64_t *iv = ts_data(t);
  for (int k = 0; k < 4; k++) CHECK(iv[k] == -2 + 3 * k);
  ts_tensor_release(t);
  /* exact past 2^53, where a double step would round */
  int64_t big = (INT64_C(1) << 60) + 1;
  CHECK_OK(ts_arange_int(big, big + 3, 1, TS_INT64, TS_DEVICE_CPU, &t));
  CHECK(((const int64_t *)ts_data(t))[2] == big + 2);
  ts_tensor_release(t);
  CHECK_OK(ts_arange(0, 1, 0.25, TS_FLOAT64, TS_DEVICE_CPU, &t));
  CHECK(t->sizes[0] == 4 && ((const double *)ts_data(t))[3] == 0.75);
  ts_tensor_release(t);
  CHECK_OK(ts_linspace(-1, 1, 5, TS_FLOAT64, TS_DEVICE_CPU, &t));
  CHECK(t->sizes[0] == 5 && ((const double *)ts_data(t))[1] == -0.5 && ((const double *)ts_data(t))[4] == 1);
  ts_tensor_release(t);
  CHECK(ts_arange(0, 1, 0, TS_FLOAT32, TS_DEVICE_CPU, &t) == TS_ERR_ARG);
  CHECK(strstr(ts_last_error(), "arange: step must be nonzero"));
  CHECK(ts_linspace(0, 1, -1, TS_FLOAT32, TS_DEVICE_CPU, &t) == TS_ERR_ARG);

  ts_manual_seed(7);
  CHECK_OK(ts_randperm(50, TS_INT64, TS_DEVICE_CPU, &t));
  bool seen[50] = {false};
  const int64_t *p = ts_data(t);
  for (int k = 0; k < 50; k++) {
    CHECK(p[k] >= 0 && p[k] < 50 && !seen[p[k]]);
    if (p[k] >= 0 && p[k] < 50) seen[p[k]] = true;
  }
  ts_tensor_release(t);
  int64_t sizes[2] = {30, 40};
  CHECK_OK(ts_randint(-3, 4, 2, sizes, TS_INT32, TS_DEVICE_CPU, &t));
  const int32_t *r = ts_data(t);
  bool lo = false, hi = false;
  for (int k = 0; k < 1200; k++) {
    CHECK(r[k] >= -3 && r[k] < 4);
    lo |= r[k] == -3, hi |= r[k] == 3;
  }
  CHECK(lo && hi);
  ts_tensor_release(t);
  CHECK(ts_randint(4, 4, 2, sizes, TS_INT64, TS_DEVICE_CPU, &t) == TS_ERR_ARG);
  CHECK(ts_rand(2, sizes, TS_INT64, TS_DEVICE_CPU, &t) == TS_ERR_DTYPE);
  CHECK(strstr(ts_last_error(), "rand: expected a floating point dtype, got int64"));

  /* the same seed replays the same draws; rand is in [0, 1), normal_ fills in place */
  ts_tensor *a = NULL, *b = NULL;
  ts_manual_seed(11);
  CHECK_OK(ts_rand(2, sizes, TS_FLOAT32, TS_DEVICE_CPU, &a));
  ts_manual_seed(11);
  CHECK_OK(ts_tensor_empty(2, sizes, TS_FLOAT32, TS_DEVICE_CPU, &b));
  CHECK_OK(ts_uniform_(b, 0, 1));
  const float *fa = ts_data(a), *fb = ts_data(b);
  for (int k = 0; k < 1200; k++) CHECK(fa[k] == fb[k] && fa[k] >= 0 && fa[k] < 1);
  uint32_t v = b->storage->version;
  CHECK_OK(ts_normal_(b, 5, 0.5));
  CHECK(b->storage->version == v + 1);
  double mean = 0;
  for (int k = 0; k < 1200; k++) mean += fb[k] / 1200.0;
  CHECK(fabs(mean - 5) < 0.1);
  ts_tensor_release(a);
  ts_tensor_release(b);
}
