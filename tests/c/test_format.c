/* The formatter's path for tensors on other devices, which Lua cannot reach
 * yet (no CUDA backend): a CPU tensor relabelled as a CUDA one. Without a
 * CUDA backend it must print a note; with the CPU backend standing in for
 * CUDA, the shown elements are gathered to a compact CPU copy and must print
 * exactly as the CPU tensor does. */
#include "test.h"
#include "io/format.h"

#include <stdlib.h>
#include <string.h>

static void check_str(ts_tensor *t, const char *want, int line) {
  char *s = NULL;
  size_t n = 0;
  ts_status st = ts_tensor_format(t, NULL, &s, &n);
  if (st != TS_OK) {
    t_fail(__FILE__, line, ts_last_error());
    return;
  }
  if (strlen(s) != n || strcmp(s, want) != 0) {
    char m[4096];
    snprintf(m, sizeof m, "expected\n%s\ngot\n%s", want, s);
    t_fail(__FILE__, line, m);
  }
  free(s);
}

/* A view of t that claims to live on cuda:0 (its storage stays on the CPU). */
static ts_tensor *as_cuda(ts_tensor *t) {
  ts_tensor *v = NULL;
  CHECK_OK(ts_tensor_view_of(t, t->ndim, t->sizes, t->strides, t->offset, &v));
  if (v) v->device = (ts_device){TS_CUDA, 0};
  return v;
}

static ts_tensor *arange(int ndim, const int64_t *sizes, ts_dtype dt) {
  ts_tensor *t = NULL;
  CHECK_OK(ts_tensor_empty(ndim, sizes, dt, TS_DEVICE_CPU, &t));
  for (int64_t i = 0, n = ts_numel(t); t && i < n; i++)
    ts_store_f64((char *)ts_data(t) + i * (int64_t)ts_dtype_size(dt), dt, (double)i);
  return t;
}

/* The CPU backend standing in for one CUDA device: host memory, memcpy copies. */
static ts_status fake_copy(void *dst, ts_device dd, const void *src, ts_device sd, size_t n, bool non_blocking) {
  (void)dd, (void)sd, (void)non_blocking;
  memcpy(dst, src, n);
  return TS_OK;
}
static int fake_current(void) { return 0; }

void test_format_device(void) {
  if (ts_backends[TS_CUDA]) return; /* a real CUDA backend: the Lua tests cover it */
  int64_t sz[2] = {2, 3};
  ts_tensor *a = arange(2, sz, TS_FLOAT32), *c = a ? as_cuda(a) : NULL;
  if (!c) return;
  check_str(c, "tensor(<values not readable here: copy_: device not available in this build>,\n"
               "       device='cuda:0', size=(2, 3), dtype=torch.float32)", __LINE__);
  ts_tensor_release(c);
  ts_tensor_release(a);

  /* the CPU backend stands in for CUDA: the gathered copy prints as the original */
  static ts_backend fake;
  fake = *ts_backends[TS_CPU];
  fake.copy_bytes = fake_copy, fake.current_device = fake_current, fake.device_count = 1;
  ts_backends[TS_CUDA] = &fake;
  int64_t big[3] = {20, 3, 100}; /* summarised: dims 0 and 2 cut, dim 1 whole */
  ts_tensor *b = arange(3, big, TS_INT32), *bt = NULL;
  CHECK_OK(ts_transpose(b, 0, 2, &bt)); /* (100, 3, 20), non-contiguous */
  ts_tensor *cb = as_cuda(bt);
  char *want = NULL, *got = NULL;
  size_t nw = 0, ng = 0;
  CHECK_OK(ts_tensor_format(bt, NULL, &want, &nw));
  CHECK_OK(ts_tensor_format(cb, NULL, &got, &ng));
  if (want && got) {
    CHECK(strstr(want, "  ...,") != NULL);
    /* the same values; the device suffix comes first and pushes dtype to a new line */
    const char *wsuf = ", dtype=torch.int32)", *gsuf = ", device='cuda:0',\n       dtype=torch.int32)";
    size_t wl = strlen(want) - strlen(wsuf), gl = strlen(got) - strlen(gsuf);
    CHECK(strcmp(want + wl, wsuf) == 0);
    CHECK(strcmp(got + gl, gsuf) == 0);
    if (wl != gl || memcmp(want, got, wl) != 0) {
      char m[16384];
      snprintf(m, sizeof m, "gathered copy printed\n%s\ninstead of\n%s", got, want);
      t_fail(__FILE__, __LINE__, m);
    }
  }
  free(want);
  free(got);
  int64_t one = 1; /* a 0-dim tensor through the gather */
  ts_tensor *s = arange(1, &one, TS_FLOAT64), *s0 = NULL, *cs;
  CHECK_OK(ts_squeeze(s, NULL, &s0));
  if (s0 && (cs = as_cuda(s0))) {
    check_str(cs, "tensor(0., device='cuda:0', dtype=torch.float64)", __LINE__);
    ts_tensor_release(cs);
  }
  ts_backends[TS_CUDA] = NULL;
  ts_tensor_release(s0);
  ts_tensor_release(s);
  ts_tensor_release(cb);
  ts_tensor_release(bt);
  ts_tensor_release(b);
}

void test_format_options(void) {
  ts_print_options o, before;
  ts_print_options_get(&before);
  o = before;
  o.edgeitems = -1;
  CHECK(ts_print_options_set(&o) == TS_ERR_ARG);
  CHECK(strstr(ts_last_error(), "edgeitems must be >= 0") != NULL);
  ts_print_options_get(&o);
  CHECK(memcmp(&o, &before, sizeof o) == 0);
  o.precision = 101;
  CHECK(ts_print_options_set(&o) == TS_ERR_ARG);
  o = ts_print_options_default();
  CHECK(o.precision == 4 && o.threshold == 1000 && o.edgeitems == 3 && o.linewidth == 80 && o.sci_mode == -1);
}
