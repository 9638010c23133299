/* Views: new geometry over the same storage. Each checks its arguments and
 * fails (never copies) when the geometry cannot be expressed; reshape is the
 * one that copies when it must. */
#include "ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad.h"

/* How a view's gradient flows back to its input: kind TS_GRAD_VIEW, _PERMUTE,
 * _EXPAND, _SLICE or _SELECT. */
typedef struct view_grad {
  ts_grad_kind kind;
  int64_t p[4];          /* slice: dim, start, stop, step; select: dim, index */
  const int64_t *perm;   /* permute: the permutation applied (nperm dims) */
  int nperm;
} view_grad;

/* zeros in the rows of z (fresh, contiguous) before and after region, nrows
 * whole rows of z along dim 0 */
static ts_status zero_rows_outside(ts_tensor *z, const ts_tensor *region, int64_t nrows) {
  const int64_t first = z->strides[0] ? (region->offset - z->offset) / z->strides[0] : 0, end = first + nrows;
  const int64_t from[2] = {0, end}, len[2] = {first, z->sizes[0] - end};
  ts_status st = TS_OK;
  for (int k = 0; k < 2 && !st; k++) {
    if (len[k] <= 0) continue;
    ts_tensor *part = NULL;
    st = ts_narrow(z, 0, from[k], len[k], &part);
    if (!st) st = ts_fill_(part, 0);
    ts_tensor_release(part);
  }
  return st;
}

ts_status ts_view_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  const ts_edge *e = &n->next[0];
  ts_status st = TS_OK;
  switch ((ts_grad_kind)n->i[0]) {
  case TS_GRAD_VIEW:
    return ts_reshape(g, e->ndim, e->sizes, &grads[0]);
  case TS_GRAD_PERMUTE: { /* apply the inverse permutation */
    int64_t inv[TS_MAX_DIMS];
    for (int d = 0; d < n->nlist; d++) inv[n->list[d]] = d;
    return ts_permute(g, n->nlist, inv, &grads[0]);
  }
  case TS_GRAD_EXPAND: /* the engine sums over the broadcast dims */
    ts_tensor_retain(g);
    grads[0] = g;
    return TS_OK;
  case TS_GRAD_SLICE:
  case TS_GRAD_SELECT: { /* the input's shape: g in the viewed region, zeros elsewhere */
    const bool select = n->i[0] == TS_GRAD_SELECT;
    /* rows along dim 0 on the CPU: only the rows outside the region are zeroed
     * (the output of an RNN layer, the first rows of its flat buffer, wrote 2 MiB
     * of zeros each step under its gradient); on a GPU one fill costs less than
     * the launches of two */
    const bool rows = g->device.type == TS_CPU && e->ndim > 0 && n->i[1] == 0 && (select || n->i[4] == 1);
    ts_tensor *z = NULL, *region = NULL;
    st = rows ? ts_tensor_empty(e->ndim, e->sizes, g->dtype, g->device, &z)
              : ts_full(e->ndim, e->sizes, 0, g->dtype, g->device, &z);
    if (!st)
      st = select ? ts_select(z, n->i[1], n->i[2], &region) : ts_slice(z, n->i[1], n->i[2], n->i[3], n->i[4], &region);
    if (!st && rows) st = zero_rows_outside(z, region, select ? 1 : region->sizes[0]);
    if (!st) st = ts_copy_(region, g);
    ts_tensor_release(region);
    if (st) {
      ts_tensor_release(z);
      return st;
    }
    grads[0] = z;
    return TS_OK;
  }
  default: break;
  }
  return ts_fail(TS_ERR_ARG, "unknown view kind");
}

static ts_status make_view(ts_tensor *t, int nd, const int64_t *sizes, const int64_t *strides, int64_t offset,
                           const view_grad *vg, ts_tensor **out) {
  ts_tensor *v = NULL;
  ts_status st = ts_tensor_view_of(t, nd, sizes, strides, offset, &v);
  if (st) return st;
  ts_ag_note_view(t, v); /* an in-place op on v rewrites its base's history */
  if (ts_ag_needed(1, &t) && ts_dtype_is_float(t->dtype)) {
    ts_node *n = NULL;
    st = ts_ag_record_kind(vg->kind, 1, &t, v, &n);
    if (!st) {
      n->view = true;
      for (int k = 0; k < 4; k++) n->i[k + 1] = vg->p[k];
      if (vg->nperm) {
        n->list = malloc(sizeof(int64_t) * (size_t)vg->nperm);
        if (!n->list) st = ts_fail(TS_ERR_OOM, "out of memory recording a view");
        else memcpy(n->list, vg->perm, sizeof(int64_t) * (size_t)vg->nperm), n->nlist = vg->nperm;
      }
    }
    if (st) {
      ts_tensor_release(v);
      return st;
    }
  }
  *out = v;
  return TS_OK;
}

static const view_grad VG_AS_RESHAPE = {TS_GRAD_VIEW, {0}, NULL, 0};

/* Resolves one -1 in sizes against numel; checks the total matches. */
static ts_status infer_sizes(const char *fn, const ts_tensor *t, int nd, const int64_t *in, int64_t *sizes) {
  int64_t numel = ts_numel(t), known = 1;
  int infer = -1;
  if (nd > TS_MAX_DIMS) return ts_fail(TS_ERR_ARG, "%s: tensors have at most %d dims, got %d", fn, TS_MAX_DIMS, nd);
  for (int i = 0; i < nd; i++) {
    sizes[i] = in[i];
    if (in[i] == -1) {
      if (infer >= 0) return ts_fail(TS_ERR_ARG, "%s: only one dimension can be inferred (-1)", fn);
      infer = i;
    } else if (in[i] < 0) {
      return ts_fail(TS_ERR_ARG, "%s: invalid size %lld in dim %d", fn, (long long)in[i], i);
    } else if (ts_mul_overflow(known, in[i], &known)) {
      return TS_ERR_OVERFLOW;
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) goto bad;
    sizes[infer] = numel / known;
  } else if (known != numel) {
    goto bad;
  }
  return TS_OK;
bad:;
  char a[256], b[256];
  ts_shape_str(nd, in, a, sizeof a);
  ts_shape_str(t->ndim, t->sizes, b, sizeof b);
  return ts_fail(TS_ERR_SHAPE, "%s: shape %s is invalid for input of size %lld (shape %s)", fn, a, (long long)numel, b);
}

/* Strides for viewing t as `sizes` without a copy, if possible (torch's computeStride). */
static bool view_strides(const ts_tensor *t, int nd, const int64_t *sizes, int64_t *strides) {
  int64_t numel = ts_numel(t);
  if (numel == 0 || t->ndim == 0) {
    ts_contiguous_strides(nd, sizes, strides);
    return true;
  }
  int view_d = nd - 1;
  int64_t chunk_base_stride = t->strides[t->ndim - 1], tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->sizes[d];
    if (d == 0 || (t->sizes[d - 1] != 1 && t->strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = t->strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

ts_status ts_view(ts_tensor *t, int nd, const int64_t *in, ts_tensor **out) {
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS];
  ts_status st = infer_sizes("view", t, nd, in, sizes);
  if (st) return st;
  if (!view_strides(t, nd, sizes, strides))
    return ts_fail(TS_ERR_SHAPE, "view: size is not compatible with the input's size and stride (at least one "
                   "dimension spans across two contiguous subspaces); use reshape() instead");
  return make_view(t, nd, sizes, strides, t->offset, &VG_AS_RESHAPE, out);
}

ts_status ts_reshape(ts_tensor *t, int nd, const int64_t *in, ts_tensor **out) {
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS];
  ts_status st = infer_sizes("reshape", t, nd, in, sizes);
  if (st) return st;
  if (view_strides(t, nd, sizes, strides)) return make_view(t, nd, sizes, strides, t->offset, &VG_AS_RESHAPE, out);
  ts_tensor *c;
  if ((st = ts_contiguous(t, &c))) return st;
  ts_contiguous_strides(nd, sizes, strides);
  st = make_view(c, nd, sizes, strides, c->offset, &VG_AS_RESHAPE, out);
  ts_tensor_release(c);
  return st;
}

ts_status ts_transpose(ts_tensor *t, int64_t d0, int64_t d1, ts_tensor **out) {
  int a, b;
  ts_status st = ts_wrap_dim("transpose", d0, t->ndim, &a);
  if (st || (st = ts_wrap_dim("transpose", d1, t->ndim, &b))) return st;
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS];
  memcpy(sizes, t->sizes, sizeof sizes);
  memcpy(strides, t->strides, sizeof strides);
  if (t->ndim > 0) {
    sizes[a] = t->sizes[b], sizes[b] = t->sizes[a];
    strides[a] = t->strides[b], strides[b] = t->strides[a];
  }
  int64_t perm[TS_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) perm[d] = d == a ? b : d == b ? a : d;
  view_grad vg = {TS_GRAD_PERMUTE, {0}, perm, t->ndim};
  return make_view(t, t->ndim, sizes, strides, t->offset, &vg, out);
}

ts_status ts_permute(ts_tensor *t, int nd, const int64_t *dims, ts_tensor **out) {
  if (nd != t->ndim)
    return ts_fail(TS_ERR_ARG, "permute: number of dims don't match (tensor has %d, permutation has %d)", t->ndim, nd);
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS], perm[TS_MAX_DIMS];
  bool seen[TS_MAX_DIMS] = {false};
  for (int i = 0; i < nd; i++) {
    int d;
    ts_status st = ts_wrap_dim("permute", dims[i], nd, &d);
    if (st) return st;
    if (seen[d]) return ts_fail(TS_ERR_ARG, "permute: dim %d appears more than once", d);
    seen[d] = true;
    sizes[i] = t->sizes[d];
    strides[i] = t->strides[d];
    perm[i] = d;
  }
  view_grad vg = {TS_GRAD_PERMUTE, {0}, perm, nd};
  return make_view(t, nd, sizes, strides, t->offset, &vg, out);
}

ts_status ts_squeeze(ts_tensor *t, const int64_t *dim, ts_tensor **out) {
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS];
  int nd = 0, only = -1;
  if (dim) {
    ts_status st = ts_wrap_dim("squeeze", *dim, t->ndim, &only);
    if (st) return st;
  }
  for (int d = 0; d < t->ndim; d++) {
    bool drop = t->sizes[d] == 1 && (only < 0 || only == d);
    if (!drop) sizes[nd] = t->sizes[d], strides[nd++] = t->strides[d];
  }
  return make_view(t, nd, sizes, strides, t->offset, &VG_AS_RESHAPE, out);
}

ts_status ts_unsqueeze(ts_tensor *t, int64_t dim, ts_tensor **out) {
  int d;
  if (t->ndim >= TS_MAX_DIMS) return ts_fail(TS_ERR_ARG, "unsqueeze: tensors have at most %d dims", TS_MAX_DIMS);
  ts_status st = ts_wrap_dim("unsqueeze", dim, t->ndim + 1, &d);
  if (st) return st;
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS];
  for (int i = 0, j = 0; i <= t->ndim; i++) {
    if (i == d) {
      sizes[i] = 1;
      strides[i] = d < t->ndim ? t->strides[d] * t->sizes[d] : 1;
    } else {
      sizes[i] = t->sizes[j], strides[i] = t->strides[j];
      j++;
    }
  }
  return make_view(t, t->ndim + 1, sizes, strides, t->offset, &VG_AS_RESHAPE, out);
}

ts_status ts_expand(ts_tensor *t, int nd, const int64_t *in, ts_tensor **out) {
  if (nd < t->ndim || nd > TS_MAX_DIMS) {
    char a[256];
    ts_shape_str(t->ndim, t->sizes, a, sizeof a);
    return ts_fail(TS_ERR_SHAPE, "expand: the number of sizes provided (%d) must be at least the tensor's rank (%d, "
                   "shape %s)", nd, t->ndim, a);
  }
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS];
  int off = nd - t->ndim;
  for (int d = 0; d < nd; d++) {
    int64_t have = d < off ? 1 : t->sizes[d - off];
    int64_t want = in[d] == -1 && d >= off ? have : in[d];
    if (want < 0) return ts_fail(TS_ERR_ARG, "expand: invalid size %lld in dim %d", (long long)in[d], d);
    if (have != want && have != 1)
      return ts_fail(TS_ERR_SHAPE, "expand: the expanded size (%lld) must match the existing size (%lld) at "
                     "non-singleton dimension %d", (long long)want, (long long)have, d);
    sizes[d] = want;
    strides[d] = d < off || (have == 1 && want != 1) ? 0 : t->strides[d - off];
  }
  int64_t n;
  if (ts_shape_numel(nd, sizes, &n)) {
    char why[256];
    snprintf(why, sizeof why, "%s", ts_last_error()); /* not formatted into itself */
    return ts_fail(TS_ERR_OVERFLOW, "expand: %s", why);
  }
  static const view_grad vg = {TS_GRAD_EXPAND, {0}, NULL, 0};
  return make_view(t, nd, sizes, strides, t->offset, &vg, out);
}

ts_status ts_broadcast_to(ts_tensor *t, int nd, const int64_t *sizes, ts_tensor **out) {
  return ts_expand(t, nd, sizes, out);
}

ts_status ts_slice(ts_tensor *t, int64_t dim, int64_t start, int64_t stop, int64_t step, ts_tensor **out) {
  int d;
  if (t->ndim == 0) return ts_fail(TS_ERR_INDEX, "slice: cannot slice a 0-dim tensor");
  ts_status st = ts_wrap_dim("slice", dim, t->ndim, &d);
  if (st) return st;
  if (step <= 0) return ts_fail(TS_ERR_ARG, "slice: step must be positive, got %lld", (long long)step);
  int64_t n = t->sizes[d];
  /* Python's clamping: out-of-range bounds are clipped, never an error */
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  start = start < 0 ? 0 : start > n ? n : start;
  stop = stop < start ? start : stop > n ? n : stop;
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS];
  memcpy(sizes, t->sizes, sizeof sizes);
  memcpy(strides, t->strides, sizeof strides);
  sizes[d] = stop == start ? 0 : (stop - start - 1) / step + 1; /* no stop - start + step: it can overflow */
  if (sizes[d] > 1 && __builtin_mul_overflow(t->strides[d], step, &strides[d]))
    return ts_fail(TS_ERR_OVERFLOW, "slice: step %lld times the stride %lld overflows 64 bits", (long long)step,
                   (long long)t->strides[d]);
  view_grad vg = {TS_GRAD_SLICE, {d, start, stop, step}, NULL, 0};
  return make_view(t, t->ndim, sizes, strides, t->offset + start * t->strides[d], &vg, out);
}

ts_status ts_narrow(ts_tensor *t, int64_t dim, int64_t start, int64_t length, ts_tensor **out) {
  int d;
  if (t->ndim == 0) return ts_fail(TS_ERR_INDEX, "narrow: cannot narrow a 0-dim tensor");
  ts_status st = ts_wrap_dim("narrow", dim, t->ndim, &d);
  if (st) return st;
  int64_t n = t->sizes[d];
  if (start < 0) start += n;
  if (start < 0 || start > n || length < 0 || length > n - start)
    return ts_fail(TS_ERR_INDEX, "narrow: start (%lld) + length (%lld) exceeds dimension size (%lld)",
                   (long long)start, (long long)length, (long long)n);
  return ts_slice(t, d, start, start + length, 1, out);
}

ts_status ts_select(ts_tensor *t, int64_t dim, int64_t index, ts_tensor **out) {
  int d;
  if (t->ndim == 0) return ts_fail(TS_ERR_INDEX, "select: cannot index a 0-dim tensor");
  ts_status st = ts_wrap_dim("select", dim, t->ndim, &d);
  if (st) return st;
  int64_t n = t->sizes[d];
  if (index < -n || index >= n)
    return ts_fail(TS_ERR_INDEX, "index %lld is out of bounds for dimension %d with size %lld", (long long)index, d,
                   (long long)n);
  if (index < 0) index += n;
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS];
  for (int i = 0, j = 0; i < t->ndim; i++)
    if (i != d) sizes[j] = t->sizes[i], strides[j++] = t->strides[i];
  view_grad vg = {TS_GRAD_SELECT, {d, index, 0, 0}, NULL, 0};
  return make_view(t, t->ndim - 1, sizes, strides, t->offset + index * t->strides[d], &vg, out);
}

ts_status ts_flatten(ts_tensor *t, int64_t start, int64_t end, ts_tensor **out) {
  int s, e;
  ts_status st = ts_wrap_dim("flatten", start, t->ndim, &s);
  if (st || (st = ts_wrap_dim("flatten", end, t->ndim, &e))) return st;
  if (s > e) return ts_fail(TS_ERR_ARG, "flatten: start_dim (%d) cannot come after end_dim (%d)", s, e);
  if (t->ndim == 0) {
    int64_t one = 1;
    return ts_reshape(t, 1, &one, out);
  }
  int64_t sizes[TS_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < s; d++) sizes[nd++] = t->sizes[d];
  int64_t m = 1;
  for (int d = s; d <= e; d++) m *= t->sizes[d];
  sizes[nd++] = m;
  for (int d = e + 1; d < t->ndim; d++) sizes[nd++] = t->sizes[d];
  return ts_reshape(t, nd, sizes, out);
}

ts_status ts_unflatten(ts_tensor *t, int64_t dim, int n, const int64_t *in, ts_tensor **out) {
  int d;
  ts_status st = ts_wrap_dim("unflatten", dim, t->ndim, &d);
  if (st) return st;
  if (n < 1 || t->ndim - 1 + n > TS_MAX_DIMS)
    return ts_fail(TS_ERR_ARG, "unflatten: sizes must be non-empty and keep the rank at most %d", TS_MAX_DIMS);
  int64_t sizes[TS_MAX_DIMS], known = 1;
  int nd = 0, infer = -1;
  for (int i = 0; i < d; i++) sizes[nd++] = t->sizes[i];
  for (int i = 0; i < n; i++) {
    if (in[i] == -1) {
      if (infer >= 0) return ts_fail(TS_ERR_ARG, "unflatten: only one dimension can be inferred (-1)");
      infer = nd;
    } else {
      known *= in[i];
    }
    sizes[nd++] = in[i];
  }
  if (infer >= 0) sizes[infer] = known ? t->sizes[d] / known : 0;
  int64_t prod = 1;
  for (int i = d; i < d + n; i++) prod *= sizes[i];
  if (prod != t->sizes[d])
    return ts_fail(TS_ERR_SHAPE, "unflatten: provided sizes don't multiply up to the size of dim %d (%lld)", d,
                   (long long)t->sizes[d]);
  for (int i = d + 1; i < t->ndim; i++) sizes[nd++] = t->sizes[i];
  return ts_view(t, nd, sizes, out);
}

/* "[3, 3]", as PyTorch lists sizes and strides in its messages */
static const char *int_list(char *buf, size_t cap, int n, const int64_t *v) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < n && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
  return buf;
}

ts_status ts_as_strided(ts_tensor *t, int nd, const int64_t *sizes, const int64_t *strides,
                        const int64_t *storage_offset, ts_tensor **out) {
  char sz[256], sd[256];
  if (nd > TS_MAX_DIMS) return ts_fail(TS_ERR_ARG, "as_strided: tensors have at most %d dims, got %d", TS_MAX_DIMS, nd);
  int64_t offset = storage_offset ? *storage_offset : t->offset, numel = 1;
  if (offset < 0) return ts_fail(TS_ERR_ARG, "as_strided: invalid storage offset %lld", (long long)offset);
  /* the last element's offset + 1: the storage elements the view needs (none when it is empty) */
  int64_t need = 1;
  bool empty = false;
  for (int d = 0; d < nd; d++) {
    if (sizes[d] < 0)
      return ts_fail(TS_ERR_ARG, "as_strided: sizes must be non-negative, got %s", int_list(sz, sizeof sz, nd, sizes));
    if (strides[d] < 0)
      return ts_fail(TS_ERR_ARG, "as_strided: negative strides are not supported, got strides %s",
                     int_list(sd, sizeof sd, nd, strides));
    empty = empty || sizes[d] == 0;
    if (__builtin_mul_overflow(numel, sizes[d], &numel))
      return ts_fail(TS_ERR_OVERFLOW, "as_strided: sizes %s hold more than 2^63 elements",
                     int_list(sz, sizeof sz, nd, sizes));
  }
  int64_t elem = (int64_t)ts_dtype_size(t->dtype), have = (int64_t)t->storage->nbytes / elem;
  for (int d = 0; d < nd && !empty; d++) {
    int64_t span;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &span) || __builtin_add_overflow(need, span, &need))
      return ts_fail(TS_ERR_OVERFLOW, "as_strided: the storage size for sizes %s and strides %s overflows 64 bits",
                     int_list(sz, sizeof sz, nd, sizes), int_list(sd, sizeof sd, nd, strides));
  }
  if (!empty && (__builtin_add_overflow(need, offset, &need) || need > have))
    return ts_fail(TS_ERR_INDEX,
                   "as_strided: sizes %s, strides %s and storage offset %lld need a storage of %lld elements, but the "
                   "tensor's storage has %lld (out of bounds)",
                   int_list(sz, sizeof sz, nd, sizes), int_list(sd, sizeof sd, nd, strides), (long long)offset,
                   (long long)need, (long long)have);
  ts_tensor *v = NULL;
  ts_status st = ts_tensor_view_of(t, nd, sizes, strides, offset, &v);
  if (st) return st;
  ts_ag_note_view(t, v); /* an in-place op on v rewrites its base's history */
  if (ts_ag_needed(1, &t) && ts_dtype_is_float(t->dtype) && (st = ts_ag_as_strided(t, v))) {
    ts_tensor_release(v);
    return st;
  }
  *out = v;
  return TS_OK;
}
