/* Backward formulas of joining and indexing: gradients are routed back to
 * the positions the values came from (narrow for cat, select for stack,
 * scatter-add for gather, index_select, tensor indexing and sort). */
#include <string.h>

#include "grad.h"
#include "grad_util.h"

/* zeros of the input's shape with g added at index along dim */
static ts_tensor *scatter_add_into_zeros(ag_scope *s, const ts_edge *e, ts_tensor *g, int64_t dim, ts_tensor *index) {
  if (s->st || !g || !index) return NULL;
  ts_tensor *z = NULL, *r = NULL;
  ts_status st = ts_full(e->ndim, e->sizes, 0, g->dtype, g->device, &z);
  z = ag_keep(s, st, z);
  if (s->st) return NULL;
  ts_status st_ = ts_scatter(z, dim, index, g, true, &r);
  return ag_keep(s, st_, r);
}

/* index (n) viewed along dim of a shape like g's and expanded to it */
static ts_tensor *expand_index(ag_scope *s, ts_tensor *index, ts_tensor *g, int64_t dim) {
  int64_t sizes[TS_MAX_DIMS];
  for (int d = 0; d < g->ndim; d++) sizes[d] = d == dim ? g->sizes[d] : 1;
  return ag_expand(s, ag_reshape(s, index, g->ndim, sizes), g->ndim, g->sizes);
}

/* scatter's src may be larger than its index: the elements past the
 * index's extent were not used, and get 0 (PyTorch raises there) */
static ts_tensor *fit_to_src(ag_scope *s, ts_tensor *r, const ts_edge *src) {
  if (r->ndim != src->ndim || !memcmp(r->sizes, src->sizes, sizeof(int64_t) * (size_t)r->ndim)) return r;
  ts_tensor *z = NULL, *part = NULL;
  ts_status st = ts_full(src->ndim, src->sizes, 0, r->dtype, r->device, &z);
  z = ag_keep(s, st, z);
  part = z;
  for (int d = 0; d < r->ndim && !s->st; d++) {
    ts_tensor *next = NULL;
    st = ts_narrow(part, d, 0, r->sizes[d], &next);
    part = ag_keep(s, st, next);
  }
  if (!s->st) s->st = ts_copy_(part, r);
  return s->st ? NULL : z;
}

ts_status ts_index_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ag_scope s = {.st = TS_OK};
  int64_t dim = n->i[1];
  ts_tensor *idx = NULL;
  ts_status st = TS_OK;
  if (n->i[0] != TS_GRAD_CAT && n->i[0] != TS_GRAD_STACK) st = ts_ag_saved(n, 0, &idx);
  if (st) return st;
  switch (n->i[0]) {
  case TS_GRAD_CAT: { /* each input gets its slice of g along dim */
    int64_t off = 0;
    for (int k = 0; k < n->nin && !s.st; k++) {
      const ts_edge *e = &n->next[k];
      if (e->ndim == 1 && e->sizes[0] == 0 && g->ndim != 1) continue; /* skipped (0,) input */
      int64_t len = e->sizes[dim];
      if (ag_wants(n, k)) {
        ts_tensor *r = NULL;
        st = ts_narrow(g, dim, off, len, &r);
        grads[k] = ag_end_keep(&s, ag_keep(&s, st, r));
      }
      off += len;
    }
    break;
  }
  case TS_GRAD_STACK:
    for (int k = 0; k < n->nin && !s.st; k++)
      if (ag_wants(n, k)) {
        ts_tensor *r = NULL;
        st = ts_select(g, dim, k, &r);
        grads[k] = ag_end_keep(&s, ag_keep(&s, st, r));
      }
    break;
  case TS_GRAD_GATHER: grads[0] = ag_end_keep(&s, scatter_add_into_zeros(&s, &n->next[0], g, dim, idx)); break;
  case TS_GRAD_INDEX_SELECT:
    grads[0] = ag_end_keep(&s, scatter_add_into_zeros(&s, &n->next[0], g, dim, expand_index(&s, idx, g, dim)));
    break;
  case TS_GRAD_INDEX_GET: { /* x[idx]: rows of x picked by idx (any shape, negatives wrapped) */
    const ts_edge *e = &n->next[0];
    int64_t rows = 1;
    for (int d = 0; d < idx->ndim; d++) rows *= idx->sizes[d];
    int64_t gshape[TS_MAX_DIMS];
    gshape[0] = rows;
    for (int d = 1; d < e->ndim; d++) gshape[d] = e->sizes[d];
    ts_tensor *g2 = ag_reshape(&s, g, e->ndim, gshape), *flat = ag_reshape(&s, idx, 1, &rows);
    ts_tensor *wrapped = ag_where(&s, ag_bin(&s, TS_OP_LT, flat, ag_num(&s, 0)),
                                  AG_ADD(&s, flat, ag_num(&s, (double)e->sizes[0])), flat);
    ts_tensor *w64 = NULL;
    if (!s.st) st = ts_to_dtype(wrapped, TS_INT64, &w64), w64 = ag_keep(&s, st, w64);
    grads[0] = ag_end_keep(&s, scatter_add_into_zeros(&s, e, g2, 0, g2 ? expand_index(&s, w64, g2, 0) : NULL));
    break;
  }
  case TS_GRAD_MASKED: { /* x[mask] / masked_select: g goes back to the selected places, in order */
    const ts_edge *e = &n->next[0];
    int nd = e->ndim;
    int64_t sizes[TS_MAX_DIMS];
    if (!s.st) st = ts_broadcast_shapes("masked_select", e->ndim, e->sizes, idx->ndim, idx->sizes, &nd, sizes);
    if (st) s.st = st;
    ts_tensor *z = NULL, *mask = ag_expand(&s, idx, nd, sizes);
    if (!s.st) st = ts_full(nd, sizes, 0, g->dtype, g->device, &z), z = ag_keep(&s, st, z);
    if (!s.st) s.st = ts_index_put_(z, mask, g);
    grads[0] = ag_end_keep(&s, z);
    break;
  }
  case TS_GRAD_SORT: { /* values came from indices along dim: no duplicates */
    ts_tensor *z = NULL, *r = NULL;
    const ts_edge *e = &n->next[0];
    if (!s.st) st = ts_full(e->ndim, e->sizes, 0, g->dtype, g->device, &z), z = ag_keep(&s, st, z);
    if (!s.st) st = ts_scatter(z, dim, idx, g, false, &r), r = ag_keep(&s, st, r);
    grads[0] = ag_end_keep(&s, r);
    break;
  }
  case TS_GRAD_SCATTER:
  case TS_GRAD_SCATTER_ADD:
  case TS_GRAD_SCATTER_VALUE: { /* y = x with src written (or added) at index */
    bool add = n->i[2];
    if (ag_wants(n, 0)) {
      if (add) {
        grads[0] = ag_end_keep(&s, g);
      } else { /* overwritten places get no gradient */
        ts_tensor *r = NULL, *zsrc = NULL;
        if (!s.st) st = ts_full(idx->ndim, idx->sizes, 0, g->dtype, g->device, &zsrc), zsrc = ag_keep(&s, st, zsrc);
        if (!s.st) st = ts_scatter(g, dim, idx, zsrc, false, &r), r = ag_keep(&s, st, r);
        grads[0] = ag_end_keep(&s, r);
      }
    }
    if (n->nin > 1 && ag_wants(n, 1)) {
      ts_tensor *r = NULL;
      if (!s.st) st = ts_gather(g, dim, idx, &r), r = ag_keep(&s, st, r);
      grads[1] = ag_end_keep(&s, r ? fit_to_src(&s, r, &n->next[1]) : NULL);
    }
    break;
  }
  }
  return ag_end_grads(&s, n->nin, grads);
}

ts_status ts_ag_index(ts_grad_kind kind, int nin, ts_tensor *const *in, ts_tensor *y, int64_t dim, ts_tensor *index,
                      int64_t flag) {
  if (!ts_dtype_is_float(y->dtype)) return TS_OK;
  ts_node *n;
  ts_status st = ts_ag_record_kind(kind, nin, in, y, &n);
  if (st) return st;
  n->i[1] = dim;
  n->i[2] = flag;
  if (index) ts_ag_save(n, 0, index);
  return TS_OK;
}
