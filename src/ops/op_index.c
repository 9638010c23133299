/* The op layer for joining, indexing and sorting: every shape, dtype, device
 * and dim check, output allocation, then the kernels of ops_index.def.
 * Several ops are composites: stack is cat of unsqueezed views, index_select
 * and x[idx] are gather with an index view expanded by stride 0, x[idx] = v
 * is scatter, one_hot is topk + scatter. Views built here for one kernel call
 * are stack structs (no refcount, no allocation) that die with the call. */
#include "ops.h"
#include "autograd/grad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

/* Re-raises a kernel's index error with the op's name in front. */
static ts_status named(const char *fn, ts_status st) {
  if (st != TS_ERR_INDEX) return st;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", ts_last_error());
  return ts_fail(st, "%s: %s", fn, msg);
}

/* t as a stack struct with at least one dim: a 0-dim tensor becomes (1,). */
static ts_tensor lift(const ts_tensor *t) {
  ts_tensor v = *t;
  if (v.ndim == 0) v.ndim = 1, v.sizes[0] = 1, v.strides[0] = 1;
  if (t->ndim == 0 && t->device.type == TS_CPU) v.is_wrapped_number = true; /* a host scalar for ts_dispatch's guard */
  return v;
}

static ts_status check_index_dtype(const char *fn, const ts_tensor *index) {
  if (index->dtype == TS_INT64) return TS_OK;
  return ts_fail(TS_ERR_DTYPE, "%s: expected dtype int64 for index, got %s (convert with index:long())", fn,
                 ts_dtype_name(index->dtype));
}

/* Strict: a 0-dim CPU tensor is no scalar here (x and its indices or mask) */
/* b on a's device, or a scalar: a Lua number or a 0-dim CPU tensor (as the
 * elementwise ops; the kernels copy its one value to the device). */
static ts_status check_devices(const char *fn, ts_tensor *a, ts_tensor *b) {
  if (ts_device_eq(a->device, b->device) || b->is_wrapped_number || (b->ndim == 0 && b->device.type == TS_CPU))
    return TS_OK;
  return ts_fail_devices(fn, a->device, b->device);
}

/* The one element of t (any shape of one element, e.g. topk's (1,)). */
static ts_status read_i64(ts_tensor *t, int64_t *v) {
  if (t->device.type == TS_CPU) return *v = ts_load_i64(ts_data(t), t->dtype), TS_OK;
  ts_tensor *h;
  ts_status st = ts_tensor_empty(t->ndim, t->sizes, TS_INT64, TS_DEVICE_CPU, &h);
  if (st) return st;
  if (!(st = ts_copy_(h, t))) *v = *(int64_t *)ts_data(h);
  ts_tensor_release(h);
  return st;
}

/* Number of non-zeros of t (which may be a stack view with stride-0 dims). */
static ts_status count_nonzero(ts_tensor *t, int64_t *n) {
  ts_tensor *cnt;
  ts_status st = ts_tensor_empty(0, NULL, TS_INT64, t->device, &cnt);
  if (st) return st;
  ts_call c = {.op = TS_OP_NONZERO, .nin = 1, .in = &t, .out = {cnt}, .i = {1}};
  if (!(st = ts_dispatch(&c))) st = read_i64(cnt, n);
  ts_tensor_release(cnt);
  return st;
}

/* A new contiguous copy of t (t may be a stack view). */
static ts_status materialize(ts_tensor *t, ts_dtype dt, ts_tensor **out) {
  ts_tensor *r;
  ts_status st = ts_tensor_empty(t->ndim, t->sizes, dt, t->device, &r);
  if (st) return st;
  if ((st = ts_copy_(r, t))) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

/* t broadcast to (nd, sizes) as a stack view; fails naming fn when it can't. */
static ts_status expand_view(const char *fn, const ts_tensor *t, int nd, const int64_t *sizes, ts_tensor *v) {
  int off = nd - t->ndim;
  bool ok = off >= 0;
  for (int d = 0; ok && d < t->ndim; d++) ok = t->sizes[d] == 1 || t->sizes[d] == sizes[d + off];
  if (!ok) {
    char a[256], b[256];
    ts_shape_str(t->ndim, t->sizes, a, sizeof a);
    ts_shape_str(nd, sizes, b, sizeof b);
    return ts_fail(TS_ERR_SHAPE, "%s: shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape %s",
                   fn, a, b);
  }
  *v = *t;
  v->ndim = nd;
  for (int d = 0; d < nd; d++) {
    v->sizes[d] = sizes[d];
    v->strides[d] = d < off || t->sizes[d - off] == 1 ? 0 : t->strides[d - off];
  }
  return TS_OK;
}

/* ---- cat and stack ------------------------------------------------------ */

static ts_status cat_impl(int n, ts_tensor *const *ts, int64_t dim, ts_tensor **out) {
  if (n <= 0) return ts_fail(TS_ERR_ARG, "cat: expected a non-empty list of tensors");
  ts_status st = ts_check_same_device("cat", n, ts);
  if (st) return st;
  ts_dtype dt = ts[0]->dtype;
  const ts_tensor *ref = NULL; /* the first input that is not a legacy empty (0,) */
  for (int k = 0; k < n; k++) {
    if (ts[k]->ndim == 0)
      return ts_fail(TS_ERR_SHAPE, "cat: zero-dimensional tensor (at position %d) cannot be concatenated; use stack, "
                     "or unsqueeze it first", k);
    dt = ts_promote(dt, ts[k]->dtype);
    if (!ref && !(ts[k]->ndim == 1 && ts[k]->sizes[0] == 0)) ref = ts[k];
  }
  if (!ref) { /* only empty inputs: an empty result */
    int64_t zero = 0;
    int d;
    if ((st = ts_wrap_dim("cat", dim, 1, &d))) return st;
    return ts_tensor_empty(1, &zero, dt, ts[0]->device, out);
  }
  int d;
  if ((st = ts_wrap_dim("cat", dim, ref->ndim, &d))) return st;
  int64_t sizes[TS_MAX_DIMS];
  memcpy(sizes, ref->sizes, sizeof sizes);
  sizes[d] = 0;
  ts_tensor **in = malloc(sizeof(ts_tensor *) * (size_t)n);
  bool *made = calloc((size_t)n, sizeof(bool));
  int nin = 0;
  if (!in || !made) {
    st = ts_fail(TS_ERR_OOM, "cat: out of memory");
    goto done;
  }
  for (int k = 0; k < n; k++) {
    ts_tensor *t = ts[k];
    if (t->ndim == 1 && t->sizes[0] == 0) continue;
    if (t->ndim != ref->ndim) {
      st = ts_fail(TS_ERR_SHAPE, "cat: tensors must have the same number of dimensions: got %d and %d (tensor number %d "
                   "in the list)", ref->ndim, t->ndim, k);
      goto done;
    }
    for (int j = 0; j < t->ndim; j++)
      if (j != d && t->sizes[j] != ref->sizes[j]) {
        st = ts_fail(TS_ERR_SHAPE, "cat: sizes of tensors must match except in dimension %d. Expected size %lld but got "
                     "size %lld for tensor number %d in the list", d, (long long)ref->sizes[j], (long long)t->sizes[j], k);
        goto done;
      }
    if (__builtin_add_overflow(sizes[d], t->sizes[d], &sizes[d])) {
      st = ts_fail(TS_ERR_OVERFLOW, "cat: the joined size overflows 64 bits");
      goto done;
    }
  }
  for (int k = 0; k < n; k++) {
    ts_tensor *t = ts[k];
    if (t->ndim == 1 && t->sizes[0] == 0) continue;
    if (t->dtype == dt) in[nin] = t;
    else if ((st = ts_to_dtype(t, dt, &in[nin]))) goto done;
    else made[nin] = true;
    nin++;
  }
  ts_tensor *r;
  if ((st = ts_tensor_empty(ref->ndim, sizes, dt, ref->device, &r))) goto done;
  ts_call c = {.op = TS_OP_CAT, .nin = nin, .in = in, .out = {r}, .i = {d}};
  if ((st = ts_dispatch(&c))) ts_tensor_release(r);
  else *out = r;
done:
  for (int k = 0; k < nin; k++)
    if (made[k]) ts_tensor_release(in[k]);
  free(in);
  free(made);
  return st;
}

static ts_status stack_impl(int n, ts_tensor *const *ts, int64_t dim, ts_tensor **out) {
  if (n <= 0) return ts_fail(TS_ERR_ARG, "stack: expected a non-empty list of tensors");
  const ts_tensor *t0 = ts[0];
  for (int k = 1; k < n; k++)
    if (ts[k]->ndim != t0->ndim || memcmp(ts[k]->sizes, t0->sizes, sizeof(int64_t) * (size_t)t0->ndim) != 0) {
      char a[256], b[256];
      ts_shape_str(t0->ndim, t0->sizes, a, sizeof a);
      ts_shape_str(ts[k]->ndim, ts[k]->sizes, b, sizeof b);
      return ts_fail(TS_ERR_SHAPE, "stack: expects each tensor to be equal size, but got %s at entry 0 and %s at entry %d",
                     a, b, k);
    }
  if (t0->ndim + 1 > TS_MAX_DIMS) return ts_fail(TS_ERR_ARG, "stack: the result would have more than %d dims", TS_MAX_DIMS);
  int d;
  ts_status st = ts_wrap_dim("stack", dim, t0->ndim + 1, &d);
  if (st) return st;
  /* each input unsqueezed at d as a stack view; cat never retains its inputs */
  ts_tensor *views = malloc(sizeof(ts_tensor) * (size_t)n), **ptrs = malloc(sizeof(ts_tensor *) * (size_t)n);
  if (!views || !ptrs) {
    free(views);
    free(ptrs);
    return ts_fail(TS_ERR_OOM, "stack: out of memory");
  }
  for (int k = 0; k < n; k++) {
    ts_tensor *v = &views[k];
    *v = *ts[k];
    for (int j = t0->ndim; j > d; j--) v->sizes[j] = v->sizes[j - 1], v->strides[j] = v->strides[j - 1];
    v->sizes[d] = 1;
    v->strides[d] = 1;
    v->ndim = t0->ndim + 1;
    v->is_wrapped_number = false;
    ptrs[k] = v;
  }
  st = ts_cat(n, ptrs, d, out);
  free(views);
  free(ptrs);
  return st;
}

/* ---- gather, scatter, index_select -------------------------------------- */

/* Runs GATHER: out (allocated with out_nd/out_sizes) from x along dim d with
 * index view iv (kernel geometry: xv, iv and the out view share a rank). */
static ts_status run_gather(const char *fn, ts_tensor *xv, int d, ts_tensor *iv, bool wrap, int out_nd,
                            const int64_t *out_sizes, ts_tensor **out) {
  ts_tensor *r;
  ts_status st = ts_tensor_empty(out_nd, out_sizes, xv->dtype, xv->device, &r);
  if (st) return st;
  ts_tensor rv = *r; /* r in the kernel's geometry: contiguous, so any split of its shape is a view */
  rv.ndim = iv->ndim;
  memcpy(rv.sizes, iv->sizes, sizeof rv.sizes);
  ts_contiguous_strides(rv.ndim, rv.sizes, rv.strides);
  ts_tensor *in[2] = {xv, iv};
  ts_call c = {.op = TS_OP_GATHER, .nin = 2, .in = in, .out = {&rv}, .i = {d, wrap}};
  if ((st = ts_dispatch(&c))) {
    ts_tensor_release(r);
    return fn ? named(fn, st) : st;
  }
  *out = r;
  return TS_OK;
}

/* The checks torch makes on gather/scatter: same rank as t, index no larger
 * than t outside dim d (all_dims: in every dim, as for scatter's src). */
static ts_status check_index_shape(const char *fn, const ts_tensor *t, const ts_tensor *index, int d, const char *what,
                                   bool all_dims) {
  if (index->ndim != t->ndim && !(index->ndim <= 1 && t->ndim <= 1))
    return ts_fail(TS_ERR_SHAPE, "%s: index tensor must have the same number of dimensions as %s tensor (got %d and %d)",
                   fn, what, index->ndim, t->ndim);
  ts_tensor a = lift(t), b = lift(index);
  for (int k = 0; k < a.ndim; k++)
    if (b.sizes[k] > a.sizes[k] && (k != d || all_dims)) {
      char x[256], y[256];
      ts_shape_str(index->ndim, index->sizes, x, sizeof x);
      ts_shape_str(t->ndim, t->sizes, y, sizeof y);
      return ts_fail(TS_ERR_SHAPE, "%s: size does not match at dimension %d: expected index %s to be no larger than %s %s%s",
                     fn, k, x, what, y, all_dims ? "" : " apart from dimension of the index");
    }
  return TS_OK;
}

static ts_status gather_impl(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor **out) {
  int d;
  ts_status st = check_index_dtype("gather", index);
  if (st || (st = check_devices("gather", x, index)) || (st = ts_wrap_dim("gather", dim, x->ndim, &d))) return st;
  if ((st = check_index_shape("gather", x, index, d, "input", false))) return st;
  ts_tensor xv = lift(x), iv = lift(index);
  return run_gather("gather", &xv, d, &iv, false, index->ndim, index->sizes, out);
}

/* Scatters src (a tensor in x's dtype, or a value) into x in place. */
static ts_status scatter_values(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor *src, bool add) {
  const char *fn = add ? "scatter_add" : "scatter";
  int d;
  ts_status st = check_index_dtype(fn, index);
  if (st || (st = check_devices(fn, x, index)) || (st = ts_wrap_dim(fn, dim, x->ndim, &d))) return st;
  if ((st = check_index_shape(fn, x, index, d, "self", false))) return st;
  ts_tensor *val = NULL, sv;
  if (src->is_wrapped_number) { /* the value form: one element on x's device, seen with stride 0 */
    if (!ts_dtype_is_float(x->dtype) && ts_dtype_is_float(src->dtype))
      return ts_fail(TS_ERR_DTYPE, "%s: a fractional value can't be scattered into a %s tensor", fn,
                     ts_dtype_name(x->dtype));
    if ((st = ts_full(0, NULL, ts_load_f64(ts_data(src), src->dtype), x->dtype, x->device, &val))) return st;
    sv = *val;
    ts_tensor iv = lift(index);
    sv.ndim = iv.ndim;
    for (int k = 0; k < sv.ndim; k++) sv.sizes[k] = iv.sizes[k], sv.strides[k] = 0;
  } else {
    if (src->dtype != x->dtype)
      return ts_fail(TS_ERR_DTYPE, "%s: expected self.dtype to be equal to src.dtype, got %s and %s (convert src with "
                     "src:to(\"%s\"))", fn, ts_dtype_name(x->dtype), ts_dtype_name(src->dtype), ts_dtype_name(x->dtype));
    if ((st = check_devices(fn, x, src)) || (st = check_index_shape(fn, src, index, d, "src", true))) return st;
    sv = lift(src);
  }
  ts_tensor xv = lift(x), iv = lift(index), *in[2] = {&iv, &sv};
  ts_call c = {.op = TS_OP_SCATTER, .nin = 2, .in = in, .out = {&xv}, .i = {d, add, 0}};
  st = named(fn, ts_dispatch(&c));
  x->storage->version++;
  ts_tensor_release(val);
  return st;
}

/* torch's node for a scatter: ScatterBackward1 for a number, ScatterAddBackward0 adding */
static ts_grad_kind scatter_kind(const ts_tensor *src, bool add) {
  return add ? TS_GRAD_SCATTER_ADD : src->is_wrapped_number ? TS_GRAD_SCATTER_VALUE : TS_GRAD_SCATTER;
}

/* In the autograd graph when x or src is (a leaf that requires grad refused):
 * x takes ScatterBackward0 / ScatterAddBackward0 as its history. */
ts_status ts_scatter_(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor *src, bool add) {
  const char *fn = add ? "scatter_add_" : "scatter_";
  ts_tensor *in[2] = {x, src};
  bool track = ts_ag_needed(2, in) && ts_dtype_is_float(x->dtype);
  ts_status st = track ? ts_ag_check_inplace(fn, x) : TS_OK;
  if (st) return st;
  TS_AG_OFF(prev);
  st = scatter_values(x, dim, index, src, add);
  TS_AG_RESTORE(prev);
  int d;
  if (!st && track && ts_wrap_dim(fn, dim, x->ndim, &d) == TS_OK)
    st = ts_ag_index(scatter_kind(src, add), src->is_wrapped_number ? 1 : 2, in, x, d, index, add);
  return st;
}

static ts_status scatter_impl(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor *src, bool add, ts_tensor **out) {
  ts_tensor *r;
  ts_status st = ts_clone(x, &r);
  if (st) return st;
  if ((st = ts_scatter_(r, dim, index, src, add))) {
    ts_tensor_release(r);
    return st;
  }
  r->storage->version = 0; /* a new tensor: the writes that made it are no in-place changes */
  *out = r;
  return TS_OK;
}

static ts_status index_select_impl(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor **out) {
  int d;
  if (index->dtype != TS_INT64) /* int32 was converted by ts_index_select */
    return ts_fail(TS_ERR_DTYPE, "index_select: expected dtype int64 for index, got %s (int32 works too; convert "
                   "with index:long())", ts_dtype_name(index->dtype));
  ts_status st;
  if ((st = check_devices("index_select", x, index)) || (st = ts_wrap_dim("index_select", dim, x->ndim, &d)))
    return st;
  if (index->ndim > 1)
    return ts_fail(TS_ERR_SHAPE, "index_select: index must be a 0-dim or 1-D tensor, got %d dims", index->ndim);
  ts_tensor xv = lift(x), iv = lift(index), ev = iv;
  int64_t m = iv.sizes[0];
  ev.ndim = xv.ndim; /* the index expanded over x's other dims with stride 0 */
  for (int k = 0; k < xv.ndim; k++) ev.sizes[k] = xv.sizes[k], ev.strides[k] = 0;
  ev.sizes[d] = m;
  ev.strides[d] = iv.strides[0];
  return run_gather("index_select", &xv, d, &ev, false, xv.ndim, ev.sizes, out);
}

/* ---- masks, nonzero ------------------------------------------------------ */

static ts_status masked_select_impl(ts_tensor *x, ts_tensor *mask, ts_tensor **out) {
  if (mask->dtype != TS_BOOL)
    return ts_fail(TS_ERR_DTYPE, "masked_select: expected a bool mask, got %s (use a comparison or mask:bool())",
                   ts_dtype_name(mask->dtype));
  int nd;
  int64_t sizes[TS_MAX_DIMS], n;
  ts_status st = check_devices("masked_select", x, mask);
  if (st || (st = ts_broadcast_shapes("masked_select", x->ndim, x->sizes, mask->ndim, mask->sizes, &nd, sizes))) return st;
  ts_tensor xv, mv;
  expand_view("masked_select", x, nd, sizes, &xv); /* cannot fail: nd, sizes is their broadcast */
  expand_view("masked_select", mask, nd, sizes, &mv);
  if ((st = count_nonzero(&mv, &n))) return st;
  ts_tensor *r;
  if ((st = ts_tensor_empty(1, &n, x->dtype, x->device, &r))) return st;
  ts_tensor *in[2] = {&xv, &mv};
  ts_call c = {.op = TS_OP_MASKED_SELECT, .nin = 2, .in = in, .out = {r}};
  if ((st = ts_dispatch(&c))) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

ts_status ts_nonzero(ts_tensor *x, ts_tensor **out) {
  int64_t n;
  ts_status st = count_nonzero(x, &n);
  if (st) return st;
  int64_t sizes[2] = {n, x->ndim};
  ts_tensor *r;
  if ((st = ts_tensor_empty(2, sizes, TS_INT64, x->device, &r))) return st;
  ts_call c = {.op = TS_OP_NONZERO, .nin = 1, .in = &x, .out = {r}, .i = {0}};
  if ((st = ts_dispatch(&c))) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

/* ---- sort, topk, unique, one_hot ------------------------------------------ */

static ts_status run_sort(ts_op op, ts_tensor *x, int d, int64_t k, bool desc, ts_tensor **values, ts_tensor **indices) {
  int64_t sizes[TS_MAX_DIMS];
  memcpy(sizes, x->sizes, sizeof sizes);
  if (x->ndim) sizes[d] = k;
  ts_tensor *v = NULL, *ix = NULL;
  ts_status st = ts_tensor_empty(x->ndim, sizes, x->dtype, x->device, &v);
  if (!st) st = ts_tensor_empty(x->ndim, sizes, TS_INT64, x->device, &ix);
  if (!st) {
    ts_tensor xv = lift(x), vv = lift(v), iv = lift(ix);
    ts_call c = {.op = op, .nin = 1, .in = (ts_tensor *[]){&xv}, .out = {&vv, &iv}, .i = {d, desc}};
    st = ts_dispatch(&c);
  }
  if (st) {
    ts_tensor_release(v);
    ts_tensor_release(ix);
    return st;
  }
  *values = v;
  *indices = ix;
  return TS_OK;
}

static ts_status sort_impl(ts_tensor *x, int64_t dim, bool descending, ts_tensor **values, ts_tensor **indices) {
  int d;
  ts_status st = ts_wrap_dim("sort", dim, x->ndim, &d);
  if (st) return st;
  return run_sort(TS_OP_SORT, x, d, x->ndim ? x->sizes[d] : 1, descending, values, indices);
}

static ts_status topk_impl(ts_tensor *x, int64_t k, int64_t dim, bool largest, ts_tensor **values, ts_tensor **indices) {
  int d;
  ts_status st = ts_wrap_dim("topk", dim, x->ndim, &d);
  if (st) return st;
  int64_t n = x->ndim ? x->sizes[d] : 1;
  if (k < 0 || k > n)
    return ts_fail(TS_ERR_INDEX, "topk: k (%lld) is out of range for dimension %d of size %lld (expected 0 <= k <= %lld)",
                   (long long)k, d, (long long)n, (long long)n);
  return run_sort(TS_OP_TOPK, x, d, k, largest, values, indices);
}

ts_status ts_unique(ts_tensor *x, ts_tensor **values, ts_tensor **inverse, ts_tensor **counts) {
  int64_t n = ts_numel(x), minus1 = -1, u = 0;
  ts_tensor *flat = NULL, *sv = NULL, *sp = NULL, *v = NULL, *inv = NULL, *cnt = NULL, *cntt = NULL;
  ts_status st = ts_reshape(x, 1, &minus1, &flat);
  if (!st) st = ts_sort(flat, 0, false, &sv, &sp);
  if (!st) st = ts_tensor_empty(0, NULL, TS_INT64, x->device, &cntt);
  if (!st) {
    ts_tensor *in[2] = {sv, sp};
    ts_call c = {.op = TS_OP_UNIQUE, .nin = 2, .in = in, .out = {cntt}, .i = {1}};
    if (!(st = ts_dispatch(&c))) st = read_i64(cntt, &u);
  }
  if (!st) st = ts_tensor_empty(1, &u, x->dtype, x->device, &v);
  if (!st && inverse) st = ts_tensor_empty(1, &n, TS_INT64, x->device, &inv);
  if (!st && counts) st = ts_tensor_empty(1, &u, TS_INT64, x->device, &cnt);
  if (!st) {
    ts_tensor *in[2] = {sv, sp};
    ts_call c = {.op = TS_OP_UNIQUE, .nin = 2, .in = in, .out = {v, inv, cnt}, .i = {0}};
    st = ts_dispatch(&c);
  }
  if (!st && inverse) { /* inverse has x's shape */
    ts_tensor *shaped;
    if (!(st = ts_view(inv, x->ndim, x->sizes, &shaped))) {
      ts_tensor_release(inv);
      inv = shaped;
    }
  }
  ts_tensor_release(flat);
  ts_tensor_release(sv);
  ts_tensor_release(sp);
  ts_tensor_release(cntt);
  if (st) {
    ts_tensor_release(v);
    ts_tensor_release(inv);
    ts_tensor_release(cnt);
    return st;
  }
  *values = v;
  if (inverse) *inverse = inv;
  if (counts) *counts = cnt;
  return TS_OK;
}

/* The smallest or largest element of x (numel > 0), read on the host. */
static ts_status extreme_i64(ts_tensor *x, bool largest, int64_t *out) {
  int64_t minus1 = -1;
  ts_tensor *flat = NULL, *v = NULL, *ix = NULL;
  ts_status st = ts_reshape(x, 1, &minus1, &flat);
  if (!st) st = ts_topk(flat, 1, 0, largest, &v, &ix);
  if (!st) st = read_i64(v, out);
  ts_tensor_release(flat);
  ts_tensor_release(v);
  ts_tensor_release(ix);
  return st;
}

ts_status ts_one_hot(ts_tensor *x, int64_t num_classes, ts_tensor **out) {
  if (x->dtype != TS_INT64)
    return ts_fail(TS_ERR_DTYPE, "one_hot: expected an int64 tensor of class indices, got %s (convert with t:long())",
                   ts_dtype_name(x->dtype));
  if (num_classes < -1) return ts_fail(TS_ERR_ARG, "one_hot: num_classes must be -1 or non-negative, got %lld", (long long)num_classes);
  if (x->ndim + 1 > TS_MAX_DIMS) return ts_fail(TS_ERR_ARG, "one_hot: the result would have more than %d dims", TS_MAX_DIMS);
  ts_status st;
  if (ts_numel(x) == 0) {
    if (num_classes == -1)
      return ts_fail(TS_ERR_ARG, "one_hot: can not infer the number of classes from an empty tensor; pass num_classes");
  } else {
    int64_t lo, hi;
    if ((st = extreme_i64(x, false, &lo)) || (st = extreme_i64(x, true, &hi))) return st;
    if (lo < 0) return ts_fail(TS_ERR_INDEX, "one_hot: class values must be non-negative, got %lld", (long long)lo);
    if (num_classes == -1 && hi == INT64_MAX)
      return ts_fail(TS_ERR_INDEX, "one_hot: class value %lld is too large to infer the number of classes from",
                     (long long)hi);
    if (num_classes == -1) num_classes = hi + 1;
    else if (hi >= num_classes)
      return ts_fail(TS_ERR_INDEX, "one_hot: class values must be smaller than num_classes (%lld), got %lld",
                     (long long)num_classes, (long long)hi);
  }
  int64_t sizes[TS_MAX_DIMS];
  memcpy(sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
  sizes[x->ndim] = num_classes;
  ts_tensor *r;
  if ((st = ts_full(x->ndim + 1, sizes, 0, TS_INT64, x->device, &r))) return st;
  ts_tensor iv = *x; /* x unsqueezed at the end */
  iv.ndim = x->ndim + 1;
  iv.sizes[x->ndim] = 1;
  iv.strides[x->ndim] = 1;
  ts_scalar_box one;
  if ((st = ts_scatter_(r, -1, &iv, ts_scalar_wrap_int(&one, 1), false))) {
    ts_tensor_release(r);
    return st;
  }
  r->storage->version = 0; /* a new tensor: the writes that made it are no in-place changes */
  *out = r;
  return TS_OK;
}

/* ---- advanced indexing ------------------------------------------------------ */

/* For x[index] with an integer index (shape I) on x (n0, rest...): the
 * kernel geometry of rank I.ndim + x.ndim - 1 (at least 1) in which x gets
 * leading size-1 dims with stride 0, the index gets trailing stride-0 dims,
 * and dim (the last of I's) is where the index picks. */
typedef struct adv_geom {
  ts_tensor xv, iv;
  int dim, nd;
  int64_t sizes[TS_MAX_DIMS]; /* I + rest: the indexing result's shape */
  int res_nd;
} adv_geom;

static ts_status adv_geometry(ts_tensor *x, ts_tensor *index, adv_geom *g) {
  if (x->ndim == 0) return ts_fail(TS_ERR_INDEX, "too many indices for tensor of dimension 0");
  int ni = index->ndim, lead = ni > 0 ? ni : 1;
  g->res_nd = ni + x->ndim - 1;
  g->nd = lead + x->ndim - 1;
  if (g->nd > TS_MAX_DIMS)
    return ts_fail(TS_ERR_ARG, "index: the result would have more than %d dims", TS_MAX_DIMS);
  g->dim = lead - 1;
  ts_tensor iv = lift(index);
  g->xv = *x;
  g->iv = iv;
  g->xv.ndim = g->iv.ndim = g->nd;
  for (int k = 0; k < g->nd; k++) {
    bool in_lead = k < lead;
    g->iv.sizes[k] = in_lead ? iv.sizes[k] : x->sizes[k - lead + 1];
    g->iv.strides[k] = in_lead ? iv.strides[k] : 0;
    g->xv.sizes[k] = in_lead ? (k == g->dim ? x->sizes[0] : 1) : x->sizes[k - lead + 1];
    g->xv.strides[k] = in_lead ? (k == g->dim ? x->strides[0] : 0) : x->strides[k - lead + 1];
  }
  memcpy(g->sizes, index->sizes, sizeof(int64_t) * (size_t)ni);
  memcpy(g->sizes + ni, x->sizes + 1, sizeof(int64_t) * (size_t)(x->ndim - 1));
  return TS_OK;
}

/* For x[mask]: checks mask (shape M) covers x's leading dims; mv is the mask
 * expanded over x's shape; res (count,) + x.shape[M.ndim:]. */
static ts_status mask_geometry(ts_tensor *x, ts_tensor *mask, ts_tensor *mv, int *res_nd, int64_t *res) {
  if (mask->ndim > x->ndim)
    return ts_fail(TS_ERR_INDEX, "too many indices for tensor of dimension %d (got a mask of dimension %d)", x->ndim,
                   mask->ndim);
  for (int k = 0; k < mask->ndim; k++)
    if (mask->sizes[k] != x->sizes[k])
      return ts_fail(TS_ERR_INDEX, "the shape of the mask (%lld) at index %d does not match the shape of the indexed "
                     "tensor (%lld) at index %d", (long long)mask->sizes[k], k, (long long)x->sizes[k], k);
  if (x->ndim - mask->ndim + 1 > TS_MAX_DIMS)
    return ts_fail(TS_ERR_ARG, "index: the result would have more than %d dims", TS_MAX_DIMS);
  *mv = *mask;
  mv->ndim = x->ndim;
  for (int k = 0; k < x->ndim; k++) {
    mv->sizes[k] = x->sizes[k];
    mv->strides[k] = k < mask->ndim ? mask->strides[k] : 0;
  }
  int64_t n;
  ts_status st = count_nonzero(mask, &n);
  if (st) return st;
  res[0] = n;
  *res_nd = 1 + x->ndim - mask->ndim;
  memcpy(res + 1, x->sizes + mask->ndim, sizeof(int64_t) * (size_t)(x->ndim - mask->ndim));
  return TS_OK;
}

/* An int32 index becomes int64; other non-bool dtypes are refused. */
static ts_status index_as_i64(ts_tensor *index, ts_tensor **out) {
  if (index->dtype == TS_INT64 || index->dtype == TS_BOOL) {
    ts_tensor_retain(index);
    return *out = index, TS_OK;
  }
  if (index->dtype == TS_INT32) return ts_to_dtype(index, TS_INT64, out);
  return ts_fail(TS_ERR_DTYPE, "index: tensors used as indices must be int64, int32 or bool tensors, got %s",
                 ts_dtype_name(index->dtype));
}

static ts_status index_get_impl(ts_tensor *x, ts_tensor *index, ts_tensor **out) {
  ts_tensor *ix;
  ts_status st = check_devices("index", x, index);
  if (st || (st = index_as_i64(index, &ix))) return st;
  if (ix->dtype == TS_BOOL) {
    ts_tensor mv, *r;
    int nd;
    int64_t sizes[TS_MAX_DIMS];
    if (!(st = mask_geometry(x, ix, &mv, &nd, sizes)) && !(st = ts_tensor_empty(nd, sizes, x->dtype, x->device, &r))) {
      ts_tensor *in[2] = {x, &mv};
      ts_call c = {.op = TS_OP_MASKED_SELECT, .nin = 2, .in = in, .out = {r}};
      if ((st = ts_dispatch(&c))) ts_tensor_release(r);
      else *out = r;
    }
  } else {
    adv_geom g;
    if (!(st = adv_geometry(x, ix, &g))) st = run_gather(NULL, &g.xv, g.dim, &g.iv, true, g.res_nd, g.sizes, out);
  }
  ts_tensor_release(ix);
  return st;
}

/* value as a tensor in x's dtype on x's device: a new reference. */
static ts_status value_tensor(ts_tensor *x, ts_tensor *value, ts_tensor **out) {
  if (value->is_wrapped_number) {
    if (!ts_dtype_is_float(x->dtype) && ts_dtype_is_float(value->dtype))
      return ts_fail(TS_ERR_DTYPE, "index_put_: a fractional value can't be stored in a %s tensor",
                     ts_dtype_name(x->dtype));
    return ts_full(0, NULL, ts_load_f64(ts_data(value), value->dtype), x->dtype, x->device, out);
  }
  if (value->ndim == 0 && value->device.type == TS_CPU) /* a CPU scalar is welcome on any device */
    return ts_to_device(value, x->device, x->dtype, false, out);
  ts_status st = check_devices("index_put_", x, value);
  if (st) return st;
  return ts_to_dtype(value, x->dtype, out);
}

/* x[index] = value; ix is index as int64 (or the bool mask) */
static ts_status index_put_values(ts_tensor *x, ts_tensor *ix, ts_tensor *value) {
  ts_tensor *val = NULL, *src = NULL;
  ts_status st;
  if ((st = value_tensor(x, value, &val))) goto done;
  if (ix->dtype == TS_BOOL) {
    ts_tensor mv, vv;
    int nd;
    int64_t sizes[TS_MAX_DIMS];
    if ((st = mask_geometry(x, ix, &mv, &nd, sizes))) goto done;
    bool fill = val->ndim == 0; /* masked_fill: one value for every selected element */
    if (!fill) {
      if ((st = expand_view("index_put_", val, nd, sizes, &vv)) || (st = materialize(&vv, x->dtype, &src))) goto done;
    }
    ts_tensor *in[2] = {&mv, fill ? val : src};
    ts_call c = {.op = TS_OP_MASKED_SCATTER, .nin = 2, .in = in, .out = {x}, .i = {fill}};
    st = ts_dispatch(&c);
  } else {
    adv_geom g;
    ts_tensor vv, res;
    if ((st = adv_geometry(x, ix, &g))) goto done;
    if ((st = expand_view("index_put_", val, g.res_nd, g.sizes, &vv))) goto done;
    res = vv; /* the value in the kernel's geometry (an index of 0 dims adds a leading 1) */
    res.ndim = g.nd;
    if (g.nd != g.res_nd) {
      memmove(res.sizes + 1, vv.sizes, sizeof(int64_t) * (size_t)vv.ndim);
      memmove(res.strides + 1, vv.strides, sizeof(int64_t) * (size_t)vv.ndim);
      res.sizes[0] = 1, res.strides[0] = 0;
    }
    ts_tensor *in[2] = {&g.iv, &res};
    ts_call c = {.op = TS_OP_SCATTER, .nin = 2, .in = in, .out = {&g.xv}, .i = {g.dim, 0, 1}};
    st = ts_dispatch(&c);
  }
  x->storage->version++;
done:
  ts_tensor_release(val);
  ts_tensor_release(src);
  return st;
}

/* In the autograd graph when x or a tensor value is: x takes
 * IndexPutBackward0 (the value gets the gradient of the places it went to). */
ts_status ts_index_put_(ts_tensor *x, ts_tensor *index, ts_tensor *value) {
  ts_tensor *ix = NULL, *in[2] = {x, value};
  ts_status st = check_devices("index_put_", x, index);
  if (st || (st = index_as_i64(index, &ix))) return st;
  bool track = ts_ag_needed(2, in) && ts_dtype_is_float(x->dtype);
  if (track) st = ts_ag_check_inplace("index_put_", x);
  if (!st) {
    TS_AG_OFF(prev);
    st = index_put_values(x, ix, value);
    TS_AG_RESTORE(prev);
  }
  if (!st && track) st = ts_ag_overwrite(TS_GRAD_INDEX_PUT, 2, in, x, ix);
  ts_tensor_release(ix);
  return st;
}

/* ---- masked_fill ---- */

/* The checks masked_fill(_) makes: a bool mask on x's device (or a CPU
 * scalar), a value that is a number or a 0-dim tensor. */
static ts_status check_masked_fill(const char *fn, ts_tensor *x, ts_tensor *mask, ts_tensor *value) {
  if (mask->dtype != TS_BOOL)
    return ts_fail(TS_ERR_DTYPE, "%s: mask must be a bool tensor, got %s (use a comparison or mask:bool())", fn,
                   ts_dtype_name(mask->dtype));
  if (!value->is_wrapped_number && value->ndim != 0)
    return ts_fail(TS_ERR_ARG, "%s: only supports a 0-dimensional value tensor, but got tensor with %d dimension(s)",
                   fn, value->ndim);
  return check_devices(fn, x, mask);
}

/* torch's node: MaskedFillBackward0 for a number, 1 for a 0-dim tensor */
static ts_grad_kind masked_fill_kind(const ts_tensor *value) {
  return value->is_wrapped_number ? TS_GRAD_MASKED_FILL : TS_GRAD_MASKED_FILL_TENSOR;
}

/* where(mask, value, x) in x's dtype, into out (x's shape) or a new tensor; not recorded */
static ts_status masked_fill_values(ts_tensor *x, ts_tensor *mask, ts_tensor *value, ts_tensor *out, ts_tensor **r) {
  ts_tensor *w = NULL;
  TS_AG_OFF(prev);
  ts_status st = ts_where(mask, value, x, &w);
  if (!st && !out) st = ts_tensor_empty(w->ndim, w->sizes, x->dtype, x->device, r);
  if (!st) st = ts_copy_(out ? out : *r, w);
  TS_AG_RESTORE(prev);
  ts_tensor_release(w);
  return st;
}

ts_status ts_masked_fill_(ts_tensor *x, ts_tensor *mask, ts_tensor *value) {
  const char *fn = "masked_fill_";
  ts_status st = check_masked_fill(fn, x, mask, value);
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  if (st || (st = ts_broadcast_shapes(fn, x->ndim, x->sizes, mask->ndim, mask->sizes, &nd, sizes))) return st;
  if (nd != x->ndim || memcmp(sizes, x->sizes, sizeof(int64_t) * (size_t)nd) != 0) {
    char a[256], b[256];
    ts_shape_str(mask->ndim, mask->sizes, a, sizeof a);
    ts_shape_str(x->ndim, x->sizes, b, sizeof b);
    return ts_fail(TS_ERR_SHAPE, "%s: the mask of shape %s cannot be broadcast to the tensor's shape %s", fn, a, b);
  }
  ts_tensor *in[2] = {x, value};
  bool track = ts_ag_needed(2, in) && ts_dtype_is_float(x->dtype);
  if (track && (st = ts_ag_check_inplace(fn, x))) return st;
  if ((st = ts_check_internal_overlap(fn, x)) || (st = masked_fill_values(x, mask, value, x, NULL))) return st;
  return track ? ts_ag_overwrite(masked_fill_kind(value), value->is_wrapped_number ? 1 : 2, in, x, mask) : TS_OK;
}

ts_status ts_masked_fill(ts_tensor *x, ts_tensor *mask, ts_tensor *value, ts_tensor **out) {
  ts_status st = check_masked_fill("masked_fill", x, mask, value);
  ts_tensor *r = NULL, *in[2] = {x, value};
  if (st || (st = masked_fill_values(x, mask, value, NULL, &r))) return st;
  if (ts_ag_needed(2, in) &&
      (st = ts_ag_overwrite(masked_fill_kind(value), value->is_wrapped_number ? 1 : 2, in, r, mask))) {
    ts_tensor_release(r);
    return st;
  }
  r->storage->version = 0; /* a new tensor: the copy that made it is no in-place change */
  *out = r;
  return TS_OK;
}

/* ---- autograd: each op records one node (grad_index.c) ---- */

ts_status ts_cat(int n, ts_tensor *const *ts, int64_t dim, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = cat_impl(n, ts, dim, out);
  TS_AG_RESTORE(prev);
  int d;
  if (!st && ts_ag_needed(n, ts) && ts_wrap_dim("cat", dim, (*out)->ndim, &d) == TS_OK)
    st = ts_ag_index(TS_GRAD_CAT, n, ts, *out, d, NULL, 0);
  return st;
}

ts_status ts_stack(int n, ts_tensor *const *ts, int64_t dim, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = stack_impl(n, ts, dim, out);
  TS_AG_RESTORE(prev);
  int d;
  if (!st && ts_ag_needed(n, ts) && ts_wrap_dim("stack", dim, (*out)->ndim, &d) == TS_OK)
    st = ts_ag_index(TS_GRAD_STACK, n, ts, *out, d, NULL, 0);
  return st;
}

ts_status ts_gather(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = gather_impl(x, dim, index, out);
  TS_AG_RESTORE(prev);
  int d;
  if (!st && ts_ag_needed(1, &x) && ts_wrap_dim("gather", dim, x->ndim, &d) == TS_OK)
    st = ts_ag_index(TS_GRAD_GATHER, 1, &x, *out, d, index, 0);
  return st;
}

ts_status ts_scatter(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor *src, bool add, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = scatter_impl(x, dim, index, src, add, out);
  TS_AG_RESTORE(prev);
  ts_tensor *in[2] = {x, src};
  int d;
  if (!st && ts_ag_needed(2, in) && ts_wrap_dim("scatter", dim, x->ndim, &d) == TS_OK)
    st = ts_ag_index(scatter_kind(src, add), src->is_wrapped_number ? 1 : 2, in, *out, d, index, add);
  return st;
}

ts_status ts_index_select(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_tensor *ix = NULL, *i64 = NULL;
  ts_status st = TS_OK;
  if (index->dtype == TS_INT32) { /* PyTorch takes int32 indices here too: the kernels read int64 */
    if ((st = ts_to_dtype(index, TS_INT64, &i64))) {
      TS_AG_RESTORE(prev);
      return st;
    }
    index = i64;
  }
  st = index_select_impl(x, dim, index, out);
  int d;
  if (!st && prev && x->requires_grad && ts_wrap_dim("index_select", dim, x->ndim, &d) == TS_OK &&
      !(st = ts_to_dtype(index, TS_INT64, &ix))) {
    TS_AG_RESTORE(prev);
    st = ts_ag_index(TS_GRAD_INDEX_SELECT, 1, &x, *out, d, ix, 0);
  }
  TS_AG_RESTORE(prev);
  ts_tensor_release(ix);
  ts_tensor_release(i64);
  return st;
}

ts_status ts_masked_select(ts_tensor *x, ts_tensor *mask, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = masked_select_impl(x, mask, out);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_index(TS_GRAD_MASKED, 1, &x, *out, 0, mask, 0);
  return st;
}

ts_status ts_sort(ts_tensor *x, int64_t dim, bool descending, ts_tensor **values, ts_tensor **indices) {
  TS_AG_OFF(prev);
  ts_status st = sort_impl(x, dim, descending, values, indices);
  TS_AG_RESTORE(prev);
  int d;
  if (!st && ts_ag_needed(1, &x) && ts_wrap_dim("sort", dim, x->ndim, &d) == TS_OK)
    st = ts_ag_index(TS_GRAD_SORT, 1, &x, *values, d, *indices, 0);
  return st;
}

ts_status ts_topk(ts_tensor *x, int64_t k, int64_t dim, bool largest, ts_tensor **values, ts_tensor **indices) {
  TS_AG_OFF(prev);
  ts_status st = topk_impl(x, k, dim, largest, values, indices);
  TS_AG_RESTORE(prev);
  int d;
  if (!st && ts_ag_needed(1, &x) && ts_wrap_dim("topk", dim, x->ndim, &d) == TS_OK)
    st = ts_ag_index(TS_GRAD_SORT, 1, &x, *values, d, *indices, 0);
  return st;
}

ts_status ts_index_get(ts_tensor *x, ts_tensor *index, ts_tensor **out) {
  TS_AG_OFF(prev);
  ts_status st = index_get_impl(x, index, out);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x))
    st = ts_ag_index(index->dtype == TS_BOOL ? TS_GRAD_MASKED : TS_GRAD_INDEX_GET, 1, &x, *out, 0, index, 0);
  return st;
}
