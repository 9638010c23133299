/* In-place ops in the autograd graph, as PyTorch records them (autograd.h,
 * "in-place ops"): the checks, the rebasing of a tensor's history onto the
 * op's node, and for views the base's CopySlices and the view's
 * AsStridedBackward0, with their formulas. */
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "ops/ops.h"

/* ---- geometry: a base and a view of its storage, kept in node->list ---- */

enum { GEO_LEN = 2 + 2 * TS_MAX_DIMS }; /* ndim, offset, sizes, strides */

typedef struct geo {
  int ndim;
  int64_t offset; /* in elements, from the start of the storage */
  const int64_t *sizes, *strides;
} geo;

static void geo_put(int64_t *g, const ts_tensor *t) {
  memset(g, 0, sizeof(int64_t) * GEO_LEN);
  g[0] = t->ndim;
  g[1] = t->offset;
  memcpy(g + 2, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
  memcpy(g + 2 + TS_MAX_DIMS, t->strides, sizeof(int64_t) * (size_t)t->ndim);
}

static geo geo_get(const int64_t *g) { return (geo){(int)g[0], g[1], g + 2, g + 2 + TS_MAX_DIMS}; }

/* The base's geometry then the view's, for a node to own (NULL when out of memory). */
static int64_t *geometry(const ts_tensor *base, const ts_tensor *view) {
  int64_t *g = malloc(sizeof(int64_t) * 2 * GEO_LEN);
  if (!g) return NULL;
  geo_put(g, base);
  geo_put(g + GEO_LEN, view);
  return g;
}

/* Whether no two elements of a geometry share memory (a sufficient test:
 * each stride, in increasing order, passes everything the smaller ones reach). */
static bool no_overlap(geo v) {
  int64_t sz[TS_MAX_DIMS], st[TS_MAX_DIMS];
  int m = 0;
  for (int d = 0; d < v.ndim; d++) {
    if (v.sizes[d] == 0) return true;
    if (v.sizes[d] == 1) continue;
    int k = m++;
    for (; k > 0 && st[k - 1] > v.strides[d]; k--) sz[k] = sz[k - 1], st[k] = st[k - 1];
    sz[k] = v.sizes[d], st[k] = v.strides[d];
  }
  int64_t reach = 0;
  for (int k = 0; k < m; k++) {
    if (st[k] <= reach) return false;
    reach += (sz[k] - 1) * st[k];
  }
  return true;
}

/* Elements of storage a geometry spans from its first one. */
static int64_t extent(geo b) {
  int64_t n = 1;
  for (int d = 0; d < b.ndim; d++) {
    if (b.sizes[d] == 0) return 0;
    n += (b.sizes[d] - 1) * b.strides[d];
  }
  return n;
}

/* The first storage element either geometry reaches: the buffers below start there. */
static int64_t first_offset(geo b, geo v) { return b.offset < v.offset ? b.offset : v.offset; }

/* A zero buffer laid out as the storage from the first element the base or
 * the view reaches (the view is the base's, or for as_strided any geometry
 * over its input's storage), seen as the base (*bview) and as the view
 * (*region). */
static ts_status base_buffer(const ts_tensor *like, const int64_t *list, ts_tensor **buf, ts_tensor **bview,
                             ts_tensor **region) {
  geo b = geo_get(list), v = geo_get(list + GEO_LEN);
  int64_t first = first_offset(b, v);
  int64_t nb = b.offset - first + extent(b), nv = v.offset - first + extent(v);
  int64_t n = nb > nv ? nb : nv;
  *buf = *bview = *region = NULL;
  ts_status st = ts_full(1, &n, 0, like->dtype, like->device, buf);
  if (!st) st = ts_tensor_view_of(*buf, b.ndim, b.sizes, b.strides, b.offset - first, bview);
  if (!st) st = ts_tensor_view_of(*buf, v.ndim, v.sizes, v.strides, v.offset - first, region);
  return st;
}

/* Storage offsets (from the first element the base or the view reaches) of
 * every element of geometry `which` (the base's at list, the view's at
 * list + GEO_LEN), as an int64 tensor of its shape on dev. */
static ts_status view_offsets(const int64_t *list, const int64_t *which, ts_device dev, ts_tensor **out) {
  geo v = geo_get(which);
  int64_t first = first_offset(geo_get(list), geo_get(list + GEO_LEN));
  ts_tensor *acc = NULL;
  ts_status st = ts_full(0, NULL, (double)(v.offset - first), TS_INT64, dev, &acc);
  for (int d = 0; d < v.ndim && !st; d++) {
    ts_tensor *r = NULL, *rs = NULL, *sum = NULL;
    int64_t shape[TS_MAX_DIMS];
    for (int k = 0; k < v.ndim; k++) shape[k] = k == d ? v.sizes[d] : 1;
    if (v.strides[d] == 0) st = ts_full(1, &v.sizes[d], 0, TS_INT64, dev, &r);
    else st = ts_arange_int(0, v.sizes[d] * v.strides[d], v.strides[d], TS_INT64, dev, &r);
    if (!st) st = ts_reshape(r, v.ndim, shape, &rs);
    if (!st) st = ts_binary(TS_OP_ADD, acc, rs, &sum);
    ts_tensor_release(r);
    ts_tensor_release(rs);
    ts_tensor_release(acc);
    acc = sum;
  }
  if (st) {
    ts_tensor_release(acc);
    return st;
  }
  *out = acc;
  return TS_OK;
}

/* The elements of geometry `which` (g's shape) added into *buf at their
 * storage offsets, summing where they share memory (an expanded view). */
static ts_status add_overlapping(ts_tensor **buf, const int64_t *list, const int64_t *which, ts_tensor *g) {
  int64_t minus1 = -1;
  ts_tensor *off = NULL, *flat_off = NULL, *flat_g = NULL, *r = NULL;
  ts_status st = view_offsets(list, which, g->device, &off);
  if (!st) st = ts_reshape(off, 1, &minus1, &flat_off);
  if (!st) st = ts_reshape(g, 1, &minus1, &flat_g);
  if (!st) st = ts_scatter(*buf, 0, flat_off, flat_g, true, &r);
  ts_tensor_release(off);
  ts_tensor_release(flat_off);
  ts_tensor_release(flat_g);
  if (st) return st;
  ts_tensor_release(*buf);
  *buf = r;
  return TS_OK;
}

/* Where the base's elements share memory (as_strided of an expanded
 * input), each of them gets an equal share of that memory's gradient, as
 * PyTorch's as_strided_backward divides: *buf /= how many base elements
 * sit on each storage element (0 / 0 only where the base does not reach). */
static ts_status share_overlapping(ts_tensor **buf, const int64_t *list) {
  ts_tensor *count = NULL, *ones = NULL, *r = NULL;
  geo b = geo_get(list);
  ts_status st = ts_full(1, &(*buf)->sizes[0], 0, (*buf)->dtype, (*buf)->device, &count);
  if (!st) st = ts_full(b.ndim, b.sizes, 1, (*buf)->dtype, (*buf)->device, &ones);
  if (!st) st = add_overlapping(&count, list, list, ones);
  if (!st) st = ts_binary(TS_OP_DIV, *buf, count, &r);
  ts_tensor_release(count);
  ts_tensor_release(ones);
  if (st) return st;
  ts_tensor_release(*buf);
  *buf = r;
  return TS_OK;
}

/* AsStridedBackward0: the view's gradient placed where the view sits in the
 * storage (summed where its elements share memory), read back through the
 * base's geometry. */
ts_status ts_as_strided_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *buf, *bview, *region;
  geo b = geo_get(n->list);
  bool moved = false; /* buf was replaced: bview must be cut from the new one */
  ts_status st = base_buffer(g, n->list, &buf, &bview, &region);
  if (!st) {
    if (no_overlap(geo_get(n->list + GEO_LEN))) st = ts_copy_(region, g);
    else if (!(st = add_overlapping(&buf, n->list, n->list + GEO_LEN, g))) moved = true;
  }
  if (!st && !no_overlap(b) && !(st = share_overlapping(&buf, n->list))) moved = true;
  if (!st && moved) {
    ts_tensor_release(bview);
    bview = NULL;
    st = ts_tensor_view_of(buf, b.ndim, b.sizes, b.strides, b.offset - first_offset(b, geo_get(n->list + GEO_LEN)),
                           &bview);
  }
  if (!st) st = ts_contiguous(bview, &grads[0]);
  ts_tensor_release(buf);
  ts_tensor_release(bview);
  ts_tensor_release(region);
  return st;
}

/* CopySlices: the base's gradient, except on the view's part, which goes
 * through the in-place op's formula (its input 0 was the view's old value;
 * its other inputs are CopySlices' edges 1...). */
ts_status ts_copy_slices_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_node *op = n->inner;
  ts_tensor *buf, *bview, *region, *slice = NULL;
  ts_tensor *stack_ig[8], **ig = op->nin <= 8 ? stack_ig : calloc((size_t)op->nin, sizeof *ig);
  if (!ig) return ts_fail(TS_ERR_OOM, "backward: out of memory");
  memset(ig, 0, sizeof *ig * (size_t)op->nin);
  ts_status st = base_buffer(g, n->list, &buf, &bview, &region);
  if (!st) st = ts_copy_(bview, g);
  if (!st) st = ts_clone(region, &slice);
  if (!st) st = op->backward(op, slice, ig);
  if (!st && ig[0]) { /* the gradient of the view's old value */
    ts_tensor *r = NULL;
    st = ts_ag_reduce_to(ig[0], &op->next[0], &r);
    if (!st) st = ts_copy_(region, r);
    ts_tensor_release(r);
  } else if (!st) { /* the old value did not matter (or needed no gradient) */
    st = ts_fill_(region, 0);
  }
  if (!st && (n->next[0].fn || n->next[0].leaf)) st = ts_contiguous(bview, &grads[0]);
  for (int k = 1; k < op->nin; k++) {
    if (!st) grads[k] = ig[k];
    else ts_tensor_release(ig[k]);
    ig[k] = NULL;
  }
  ts_tensor_release(ig[0]);
  if (ig != stack_ig) free(ig);
  ts_tensor_release(slice);
  ts_tensor_release(buf);
  ts_tensor_release(bview);
  ts_tensor_release(region);
  return st;
}

/* ---- views and their bases ---- */

void ts_ag_note_view(ts_tensor *t, ts_tensor *v) {
  if (!ts_grad_enabled() || !ts_dtype_is_float(t->dtype)) return;
  ts_tensor *b = t->base ? t->base : t;
  if (b->self != b) return; /* a stack copy lives for one call: nothing may keep it */
  ts_tensor_retain(b);
  v->base = b;
}

/* v's history through AsStridedBackward0 of x's current one: a view's of
 * its base (x = v->base), or as_strided's of its input */
ts_status ts_ag_as_strided(ts_tensor *x, ts_tensor *v) {
  int64_t *g = geometry(x, v);
  if (!g) return ts_fail(TS_ERR_OOM, "out of memory recording a view");
  ts_node *n = NULL;
  ts_status st = ts_ag_record("AsStridedBackward0", ts_as_strided_backward, 1, &x, v, &n);
  if (st) {
    free(g);
    return st;
  }
  n->view = true;
  n->list = g;
  n->nlist = 2 * GEO_LEN;
  return TS_OK;
}

/* the base's history a view's was built on: past its chain of view nodes */
static const ts_node *view_root(const ts_node *n) {
  while (n && n->view) n = n->next[0].fn;
  return n;
}

void ts_ag_refresh(ts_tensor *t) {
  ts_tensor *b = t->base;
  if (!b || !b->grad_fn || view_root(t->grad_fn) == b->grad_fn) return;
  ts_ag_as_strided(t->base, t); /* out of memory: the old history stays, as good as it was */
}

/* ---- in-place ops ---- */

ts_status ts_ag_check_inplace(const char *fn, ts_tensor *x) {
  if (!ts_grad_enabled()) return TS_OK;
  if (x->base) ts_ag_refresh(x);
  ts_tensor *b = x->base;
  if (b && b->requires_grad && !b->grad_fn)
    return ts_fail(TS_ERR_ARG, "%s: a view of a leaf Variable that requires grad is being used in an in-place "
                   "operation. Change the leaf inside torch.no_grad() (as optimizers do), or clone() it first", fn);
  if (!b && x->requires_grad && !x->grad_fn)
    return ts_fail(TS_ERR_ARG, "%s: a leaf Variable that requires grad is being used in an in-place operation. "
                   "Change it inside torch.no_grad() (as optimizers do), or use the out-of-place op", fn);
  return TS_OK;
}

/* The base b takes CopySlices over op (x's in-place node); x then reads b's
 * new history through AsStridedBackward0. */
static ts_status copy_slices(ts_tensor *b, ts_tensor *x, ts_node *op) {
  int64_t *g = geometry(b, x);
  ts_tensor *stack_in[8] = {NULL}, **in = op->nin <= 8 ? stack_in : calloc((size_t)op->nin, sizeof *in);
  if (!g || !in) {
    free(g);
    if (in != stack_in) free(in);
    ts_node_release(op);
    return ts_fail(TS_ERR_OOM, "out of memory recording an in-place op");
  }
  in[0] = b; /* the other edges are op's own, copied below */
  ts_node *cs = NULL;
  ts_status st = ts_ag_record("CopySlices", ts_copy_slices_backward, op->nin, in, b, &cs);
  if (in != stack_in) free(in);
  if (st) {
    free(g);
    ts_node_release(op);
    return st;
  }
  for (int k = 1; k < op->nin; k++) {
    cs->next[k] = op->next[k];
    if (cs->next[k].fn) ts_node_retain(cs->next[k].fn);
    if (cs->next[k].leaf) ts_tensor_retain(cs->next[k].leaf);
  }
  cs->inner = op;
  cs->list = g;
  cs->nlist = 2 * GEO_LEN;
  return ts_ag_as_strided(x->base, x);
}

ts_status ts_ag_inplace_history(ts_tensor *x, ts_node *n) {
  x->storage->inplace_version = x->storage->version;
  x->storage->inplace_fn = x->base ? "CopySlices" : n->name;
  if (x->base) return copy_slices(x->base, x, n);
  if (x->grad_fn) ts_node_release(x->grad_fn);
  x->grad_fn = n;
  x->requires_grad = true;
  return TS_OK;
}

ts_status ts_ag_rebase(ts_tensor *x, ts_tensor *r) {
  if (!r->grad_fn) return TS_OK;
  ts_node_retain(r->grad_fn);
  return ts_ag_inplace_history(x, r->grad_fn);
}
