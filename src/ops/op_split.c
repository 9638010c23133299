/* split, split_with_sizes, chunk and unbind: views of the input, one per
 * piece, whose nodes form one group (autograd.h's ts_ag_group) so the
 * backward writes every piece's gradient into the input's in one cat (or
 * stack), with zeros where a piece got none, as PyTorch's split_backward
 * and unbind_backward do. One zero-filled SliceBackward0 per piece and the
 * adds joining them cost three launches per piece instead. */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/grad.h"

/* The group's pieces under one SplitBackward0 / SplitWithSizesBackward0 /
 * UnbindBackward0: each piece's node makes it a member. */
static ts_status record_group(ts_grad_kind kind, ts_tensor *x, int d, int n, const int64_t *lens, ts_tensor **pieces) {
  ts_ag_group *g = ts_ag_group_new(n, lens);
  if (!g) return TS_ERR_OOM;
  ts_status st = TS_OK;
  for (int k = 0; k < n && !st; k++) {
    ts_node *node = NULL;
    st = ts_ag_record_kind(kind, 1, &x, pieces[k], &node);
    if (st) break;
    node->view = true; /* the piece is a view of x: in-place ops on it rewrite x's history */
    node->i[1] = d;
    ts_ag_group_join(g, node, k);
  }
  ts_ag_group_release(g);
  return st;
}

/* pieces[0..n) of x along d: narrow (lens[k] long) or select (unbind) views */
static ts_status split_views(ts_grad_kind kind, ts_tensor *x, int d, int n, const int64_t *lens, ts_tensor **pieces) {
  TS_AG_OFF(prev); /* the views record no SliceBackward0 of their own */
  ts_status st = TS_OK;
  int64_t start = 0;
  for (int k = 0; k < n && !st; k++) {
    st = kind == TS_GRAD_UNBIND ? ts_select(x, d, k, &pieces[k]) : ts_narrow(x, d, start, lens[k], &pieces[k]);
    start += lens[k];
  }
  TS_AG_RESTORE(prev);
  for (int k = 0; k < n && !st; k++) ts_ag_note_view(x, pieces[k]); /* in grad mode only, as every view */
  if (!st && n > 0 && ts_ag_needed(1, &x) && ts_dtype_is_float(x->dtype)) st = record_group(kind, x, d, n, lens, pieces);
  if (st)
    for (int k = 0; k < n; k++) {
      ts_tensor_release(pieces[k]);
      pieces[k] = NULL;
    }
  return st;
}

ts_status ts_split_with_sizes(ts_tensor *x, int64_t dim, int n, const int64_t *lens, bool with_sizes,
                              ts_tensor **pieces) {
  int d;
  if (x->ndim == 0) return ts_fail(TS_ERR_INDEX, "split: cannot split a 0-dim tensor");
  ts_status st = ts_wrap_dim("split", dim, x->ndim, &d);
  if (st) return st;
  int64_t sum = 0;
  for (int k = 0; k < n; k++)
    if (lens[k] < 0 || __builtin_add_overflow(sum, lens[k], &sum))
      return ts_fail(TS_ERR_ARG, "split: bad split size %lld at position %d", (long long)lens[k], k);
  if (sum != x->sizes[d])
    return ts_fail(TS_ERR_ARG, "split: split_sizes must sum exactly to %lld (the input's size in dimension %d), but "
                   "they sum to %lld", (long long)x->sizes[d], d, (long long)sum);
  return split_views(with_sizes ? TS_GRAD_SPLIT_WITH_SIZES : TS_GRAD_SPLIT, x, d, n, lens, pieces);
}

ts_status ts_unbind(ts_tensor *x, int64_t dim, ts_tensor **pieces) {
  int d;
  if (x->ndim == 0) return ts_fail(TS_ERR_INDEX, "unbind: dimension specified as 0 but tensor has no dimensions");
  ts_status st = ts_wrap_dim("unbind", dim, x->ndim, &d);
  if (st) return st;
  if (x->sizes[d] > INT32_MAX) return ts_fail(TS_ERR_ARG, "unbind: too many pieces (%lld)", (long long)x->sizes[d]);
  int n = (int)x->sizes[d];
  int64_t *ones = malloc(sizeof *ones * (size_t)(n > 0 ? n : 1));
  if (!ones) return ts_fail(TS_ERR_OOM, "unbind: out of memory");
  for (int k = 0; k < n; k++) ones[k] = 1;
  st = split_views(TS_GRAD_UNBIND, x, d, n, ones, pieces);
  free(ones);
  return st;
}

/* The group's backward, run once by the first member the engine reaches:
 * every piece's gradient (zeros of its shape where none came) joined along
 * the dim, into the input's gradient. */
ts_status ts_split_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_ag_group *grp = n->group;
  const ts_edge *e = &n->next[0];
  int d = (int)n->i[1];
  bool unbind = n->i[0] == TS_GRAD_UNBIND;
  ts_tensor **parts = calloc((size_t)grp->n, sizeof *parts);
  if (!parts) return ts_fail(TS_ERR_OOM, "%s: out of memory", n->name);
  ts_status st = TS_OK;
  for (int k = 0; k < grp->n && !st; k++) {
    if (grp->grads[k]) {
      ts_tensor_retain(parts[k] = grp->grads[k]);
      continue;
    }
    int64_t sizes[TS_MAX_DIMS];
    int nd = 0;
    for (int j = 0; j < e->ndim; j++)
      if (j != d) sizes[nd++] = e->sizes[j];
      else if (!unbind) sizes[nd++] = grp->lens[k];
    st = ts_full(nd, sizes, 0, g->dtype, g->device, &parts[k]);
  }
  if (!st) st = unbind ? ts_stack(grp->n, parts, d, &grads[0]) : ts_cat(grp->n, parts, d, &grads[0]);
  for (int k = 0; k < grp->n; k++) ts_tensor_release(parts[k]);
  free(parts);
  return st;
}
