/* Helpers for writing backward formulas with op-layer calls: a scope keeps
 * every temporary and the first error, so a formula reads like the maths and
 * frees everything on the way out. All calls after an error return NULL and
 * do nothing. */
#ifndef TENSH_GRAD_UTIL_H
#define TENSH_GRAD_UTIL_H

#include "autograd.h"
#include "ops/ops.h"

#define AG_MAX_TMP 48
#define AG_MAX_SCALARS 16

typedef struct ag_scope {
  ts_tensor *tmp[AG_MAX_TMP];
  int ntmp;
  ts_scalar_box boxes[AG_MAX_SCALARS];
  int nbox;
  ts_status st;
} ag_scope;

/* Keeps r (a new reference) until ag_end; NULL when st failed. */
ts_tensor *ag_keep(ag_scope *s, ts_status st, ts_tensor *r);
/* A new reference to t (a temporary or not) for a caller, or NULL after an error. */
ts_tensor *ag_end_keep(ag_scope *s, ts_tensor *t);
/* Releases the temporaries; returns a new reference to result (or NULL). */
ts_tensor *ag_end(ag_scope *s, ts_tensor *result);
/* Releases the temporaries, and on an error the n gradients already made
 * (set to NULL); returns the scope's status: a formula's last line. */
ts_status ag_end_grads(ag_scope *s, int n, ts_tensor **grads);
/* A Lua-number-like scalar operand (low priority in type promotion). */
ts_tensor *ag_num(ag_scope *s, double v);

ts_tensor *ag_bin(ag_scope *s, ts_op op, ts_tensor *a, ts_tensor *b);
ts_tensor *ag_un(ag_scope *s, ts_op op, ts_tensor *a);
ts_tensor *ag_where(ag_scope *s, ts_tensor *c, ts_tensor *a, ts_tensor *b);
ts_tensor *ag_zeros_like(ag_scope *s, ts_tensor *t);
ts_tensor *ag_sum_dims(ag_scope *s, ts_tensor *t, int n, const int64_t *dims, bool keepdim);
/* t reshaped to (nd, sizes) (a view where possible) */
ts_tensor *ag_reshape(ag_scope *s, ts_tensor *t, int nd, const int64_t *sizes);
ts_tensor *ag_expand(ag_scope *s, ts_tensor *t, int nd, const int64_t *sizes);

#define AG_MUL(s, a, b) ag_bin(s, TS_OP_MUL, a, b)
#define AG_DIV(s, a, b) ag_bin(s, TS_OP_DIV, a, b)
#define AG_ADD(s, a, b) ag_bin(s, TS_OP_ADD, a, b)
#define AG_SUB(s, a, b) ag_bin(s, TS_OP_SUB, a, b)

/* Whether edge k of n wants a gradient (skip formulas nobody needs). */
static inline bool ag_wants(const ts_node *n, int k) { return n->next[k].fn || n->next[k].leaf; }

#endif
