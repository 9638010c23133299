/* The strided-loop planner every backend shares (host code, C and C++):
 * operands of one shape (ops[0]'s; a broadcast input carries stride 0) are
 * walked in as few dims as possible. Size-1 dims are dropped and neighbours
 * merged where every operand is contiguous across them, so a contiguous
 * tensor is one loop of numel elements. Used by the CPU iterator
 * (cpu/iter.c), the CPU and CUDA reductions (cpu/reduce.c, cuda/reduce.cuh:
 * the same lines in the same order on both) and CUDA's strided offsets
 * (cuda/common.cuh). Inline: it runs on every op, 1-element ones included. */
#ifndef TENSH_LOOP_PLAN_H
#define TENSH_LOOP_PLAN_H

#include "tensh.h"

#define TS_LOOP_MAX_OPS 4

typedef struct ts_loop_plan {
  int ndim;                                       /* >= 1; innermost last */
  int64_t sizes[TS_MAX_DIMS];
  int64_t strides[TS_LOOP_MAX_OPS][TS_MAX_DIMS];  /* in elements of each operand */
} ts_loop_plan;

/* Plans ops[0..nops) over ops[0]'s shape without dim skip (the reduced dim
 * of a reduction or scan; -1 for none). When nothing is left (one element,
 * or only the skipped dim) the plan is one dim of size 1 with strides 0. */
static inline void ts_loop_plan_init(ts_loop_plan *p, int nops, const ts_tensor *const *ops, int skip) {
  const ts_tensor *t0 = ops[0];
  int nd = 0;
  for (int d = 0; d < t0->ndim; d++) {
    if (d == skip || t0->sizes[d] == 1) continue;
    int64_t size = t0->sizes[d];
    if (nd > 0) {
      bool merge = true;
      for (int k = 0; k < nops && merge; k++) merge = p->strides[k][nd - 1] == ops[k]->strides[d] * size;
      if (merge) {
        p->sizes[nd - 1] *= size;
        for (int k = 0; k < nops; k++) p->strides[k][nd - 1] = ops[k]->strides[d];
        continue;
      }
    }
    p->sizes[nd] = size;
    for (int k = 0; k < nops; k++) p->strides[k][nd] = ops[k]->strides[d];
    nd++;
  }
  if (nd == 0) {
    p->sizes[0] = 1;
    for (int k = 0; k < nops; k++) p->strides[k][0] = 0;
    nd = 1;
  }
  p->ndim = nd;
}

#endif
