/* The CPU elementwise iterator (see iter.h). */
#include "iter.h"

#include "core/loop_plan.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void ts_iter_init(ts_iter *it, int nops, ts_tensor *const *ops) {
  const ts_tensor *t0 = ops[0];
  it->nops = nops;
  it->numel = ts_numel(t0);
  for (int k = 0; k < nops; k++) it->data[k] = ts_data(ops[k]);
  if (it->numel == 0) { /* nothing to visit; huge sizes of an empty tensor could overflow stride products */
    it->ndim = 1;
    it->sizes[0] = 0;
    for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
    return;
  }
  ts_loop_plan p; /* in elements; the iterator walks bytes */
  ts_loop_plan_init(&p, nops, (const ts_tensor *const *)ops, -1);
  it->ndim = p.ndim;
  for (int d = 0; d < p.ndim; d++) {
    it->sizes[d] = p.sizes[d];
    for (int k = 0; k < nops; k++) it->strides[k][d] = p.strides[k][d] * (int64_t)ts_dtype_size(ops[k]->dtype);
  }
}

/* Runs elements [begin, end) of the iteration space. */
static void run_range(const ts_iter *it, ts_loop fn, void *ctx, int64_t begin, int64_t end) {
  int nd = it->ndim, nops = it->nops;
  int64_t idx[TS_MAX_DIMS], rem = begin;
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = rem % it->sizes[d];
    rem /= it->sizes[d];
  }
  int64_t inner[TS_ITER_MAX_OPS];
  for (int k = 0; k < nops; k++) inner[k] = it->strides[k][nd - 1];
  int64_t pos = begin;
  while (pos < end) {
    char *ptr[TS_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) {
      char *p = it->data[k];
      for (int d = 0; d < nd; d++) p += idx[d] * it->strides[k][d];
      ptr[k] = p;
    }
    int64_t n = it->sizes[nd - 1] - idx[nd - 1];
    if (n > end - pos) n = end - pos;
    fn(ptr, inner, n, ctx);
    pos += n;
    idx[nd - 1] += n;
    for (int d = nd - 1; d > 0 && idx[d] == it->sizes[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

ts_status ts_iter_run(const ts_iter *it, ts_loop fn, void *ctx) {
  int64_t n = it->numel;
  if (n == 0) return TS_OK;
  if (n < TS_PARALLEL_GRAIN) {
    run_range(it, fn, ctx, 0, n);
    return TS_OK;
  }
  /* chunks small enough to poll Ctrl-C between them, large enough to stream */
  const int64_t chunk = 1 << 18;
  int64_t nchunks = (n + chunk - 1) / chunk;
  volatile int stop = 0;
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (int64_t c = 0; c < nchunks; c++) {
    if (stop) continue;
    if (ts_interrupt_flag) { stop = 1; continue; }
    int64_t b = c * chunk, e = b + chunk < n ? b + chunk : n;
    run_range(it, fn, ctx, b, e);
  }
  return stop ? ts_check_interrupt() : TS_OK;
}
