/* A strided multi-operand loop for CPU kernels, after NumPy's inner loops.
 * All operands share operand 0's shape (broadcast inputs carry stride 0).
 * Dims are coalesced where every operand allows, so a contiguous tensor is
 * one inner loop of numel elements. Strides here are in bytes. */
#ifndef TENSH_CPU_ITER_H
#define TENSH_CPU_ITER_H

#include "core/tensh.h"

#define TS_ITER_MAX_OPS 4 /* at most TS_LOOP_MAX_OPS (loop_plan.h) */

typedef struct ts_iter {
  int ndim; /* after coalescing; innermost last; at least 1 */
  int nops;
  int64_t numel;
  int64_t sizes[TS_MAX_DIMS];
  int64_t strides[TS_ITER_MAX_OPS][TS_MAX_DIMS];
  char *data[TS_ITER_MAX_OPS];
} ts_iter;

/* data[k] points at element i of operand k; strides[k] is its inner byte stride. */
typedef void (*ts_loop)(char **data, const int64_t *strides, int64_t n, void *ctx);

void ts_iter_init(ts_iter *it, int nops, ts_tensor *const *ops);
/* Runs fn over every element, in parallel (OpenMP) when numel is large.
 * Returns TS_ERR_INTERRUPTED if Ctrl-C was pressed during a long loop. */
ts_status ts_iter_run(const ts_iter *it, ts_loop fn, void *ctx);

/* Below this many elements a kernel runs on one thread: starting a parallel
 * region costs more than it saves. */
#define TS_PARALLEL_GRAIN 32768

#endif
