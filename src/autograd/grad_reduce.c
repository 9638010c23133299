/* Backward formulas of the reductions and scans. A node keeps the reduced
 * dims (node->list, wrapped; every dim for a full reduction); the gradient
 * is first brought back to the input's rank with size 1 in those dims. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grad.h"
#include "grad_util.h"

/* t (the gradient, or a saved output) reshaped to x's rank, reduced dims 1 */
static ts_tensor *keep_shape(ag_scope *s, const ts_node *n, ts_tensor *t) {
  const ts_edge *e = &n->next[0];
  int64_t sizes[TS_MAX_DIMS];
  memcpy(sizes, e->sizes, sizeof sizes);
  for (int k = 0; k < n->nlist; k++) sizes[n->list[k]] = 1;
  return ag_reshape(s, t, e->ndim, sizes);
}

static ts_tensor *expand_back(ag_scope *s, const ts_node *n, ts_tensor *g) {
  const ts_edge *e = &n->next[0];
  return ag_expand(s, keep_shape(s, n, g), e->ndim, e->sizes);
}

static double reduced_count(const ts_node *n) {
  double r = 1;
  for (int k = 0; k < n->nlist; k++) r *= (double)n->next[0].sizes[n->list[k]];
  return r;
}

/* d prod / d x_i is the product of the others: prod / x_i where no x is 0;
 * at a lone 0, the product of the non-zeros; 0 where two or more are 0 (as
 * PyTorch, which also never divides by 0). One formula of ops for every
 * backend: the product of the non-zeros and the count of zeros per group. */
static ts_tensor *prod_backward(ag_scope *s, const ts_node *n, ts_tensor *g, ts_tensor *x, ts_tensor *y) {
  ts_tensor *zero = ag_bin(s, TS_OP_EQ, x, ag_num(s, 0));
  ts_tensor *nonzero_x = ag_where(s, zero, ag_num(s, 1), x);
  ts_tensor *others = NULL, *zeros = NULL;
  if (!s->st) {
    ts_status st = ts_prod(nonzero_x, n->nlist, n->list, true, &others);
    others = ag_keep(s, st, others);
  }
  if (!s->st) {
    ts_status st = ts_sum(zero, n->nlist, n->list, true, &zeros);
    zeros = ag_keep(s, st, zeros);
  }
  const ts_edge *e = &n->next[0];
  ts_tensor *lone = ag_where(s, ag_bin(s, TS_OP_EQ, zeros, ag_num(s, 1)), others, ag_num(s, 0));
  ts_tensor *at_zero = ag_expand(s, lone, e->ndim, e->sizes);
  ts_tensor *elsewhere = AG_DIV(s, expand_back(s, n, y), nonzero_x);
  return AG_MUL(s, expand_back(s, n, g), ag_where(s, zero, at_zero, elsewhere));
}

ts_status ts_reduce_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *x = NULL, *y = NULL, *idx = NULL;
  ts_status st = ts_ag_saved(n, 0, &x);
  if (!st) st = ts_ag_saved(n, 1, &y);
  if (!st && n->i[0] == TS_GRAD_MAXDIM) st = ts_ag_saved(n, 2, &idx);
  if (st) return st;
  ag_scope s = {.st = TS_OK};
  ts_tensor *gx = NULL;
  int64_t dim = n->i[1];
  switch (n->i[0]) {
  case TS_GRAD_SUM:
  case TS_GRAD_SUM_ALL: gx = expand_back(&s, n, g); break;
  case TS_GRAD_MEAN:
  case TS_GRAD_MEAN_ALL: gx = AG_DIV(&s, expand_back(&s, n, g), ag_num(&s, reduced_count(n))); break;
  case TS_GRAD_PROD:
  case TS_GRAD_PROD_ALL: gx = prod_backward(&s, n, g, x, y); break;
  case TS_GRAD_VAR:
  case TS_GRAD_STD: {
    ts_tensor *mean = NULL;
    if (!s.st) {
      ts_status e = ts_mean(x, n->nlist, n->list, true, &mean);
      mean = ag_keep(&s, e, mean);
    }
    ts_tensor *centred = AG_SUB(&s, x, mean);
    double denom = reduced_count(n) - n->f[0];
    if (n->i[0] == TS_GRAD_VAR) {
      gx = AG_MUL(&s, AG_MUL(&s, expand_back(&s, n, g), centred), ag_num(&s, 2 / denom));
    } else {
      /* g / std, 0 where std is 0 (a constant slice), as PyTorch's std_backward */
      ts_tensor *zero = ag_bin(&s, TS_OP_EQ, y, ag_num(&s, 0));
      ts_tensor *gs = keep_shape(&s, n, ag_where(&s, zero, ag_num(&s, 0), AG_DIV(&s, g, y)));
      gx = AG_MUL(&s, AG_MUL(&s, ag_expand(&s, gs, x->ndim, x->sizes), centred), ag_num(&s, 1 / denom));
    }
    break;
  }
  case TS_GRAD_NORM:
  case TS_GRAD_NORM_ALL: {
    double p = n->f[0];
    ts_tensor *gk = expand_back(&s, n, g), *yk = expand_back(&s, n, y);
    if (p == 0) {
      gx = ag_zeros_like(&s, x);
    } else if (p == 1) {
      gx = AG_MUL(&s, gk, ag_un(&s, TS_OP_SIGN, x));
    } else if (isinf(p)) { /* spread over the entries that reach the max (or min) |x| */
      ts_tensor *hit = ag_bin(&s, TS_OP_EQ, ag_un(&s, TS_OP_ABS, x), yk);
      ts_tensor *hitf = ag_where(&s, hit, ag_num(&s, 1), ag_num(&s, 0));
      ts_tensor *count = expand_back(&s, n, ag_sum_dims(&s, hitf, n->nlist, n->list, false));
      gx = AG_DIV(&s, AG_MUL(&s, AG_MUL(&s, gk, hitf), ag_un(&s, TS_OP_SIGN, x)), count);
    } else { /* x |x|^(p-2) g / ||x||^(p-1), 0 where the norm is 0 */
      ts_tensor *ax = ag_un(&s, TS_OP_ABS, x), *apow = NULL, *ypow = NULL;
      if (!s.st) {
        double e1[4] = {p - 2}, e2[4] = {p - 1};
        ts_status e = ts_unary_p(TS_OP_POW_SCALAR, ax, NULL, e1, &apow);
        apow = ag_keep(&s, e, apow);
        if (!s.st) e = ts_unary_p(TS_OP_POW_SCALAR, yk, NULL, e2, &ypow), ypow = ag_keep(&s, e, ypow);
      }
      ts_tensor *zero = ag_bin(&s, TS_OP_EQ, yk, ag_num(&s, 0));
      ts_tensor *d = AG_DIV(&s, AG_MUL(&s, AG_MUL(&s, x, apow), gk), ag_where(&s, zero, ag_num(&s, 1), ypow));
      gx = ag_where(&s, zero, ag_num(&s, 0), d);
    }
    break;
  }
  case TS_GRAD_LOGSUMEXP:
    gx = AG_MUL(&s, expand_back(&s, n, g), ag_un(&s, TS_OP_EXP, AG_SUB(&s, x, expand_back(&s, n, y))));
    break;
  case TS_GRAD_AMAX: { /* evenly among ties, as torch's amax */
    ts_tensor *hit = ag_bin(&s, TS_OP_EQ, x, expand_back(&s, n, y));
    ts_tensor *hitf = ag_where(&s, hit, ag_num(&s, 1), ag_num(&s, 0));
    ts_tensor *count = expand_back(&s, n, ag_sum_dims(&s, hitf, n->nlist, n->list, false));
    gx = AG_DIV(&s, AG_MUL(&s, expand_back(&s, n, g), hitf), count);
    break;
  }
  case TS_GRAD_MAXDIM: { /* the gradient goes to the index each value came from */
    ts_tensor *z = ag_zeros_like(&s, x), *r = NULL;
    ts_tensor *gk = keep_shape(&s, n, g), *ik = keep_shape(&s, n, idx);
    if (!s.st) {
      ts_status e = ts_scatter(z, dim, ik, gk, false, &r);
      gx = ag_keep(&s, e, r);
    }
    break;
  }
  case TS_GRAD_CUMSUM: { /* reversed cumsum: total - cumsum + g */
    ts_tensor *cs = NULL;
    if (!s.st) {
      ts_status e = ts_cumsum(g, dim, &cs);
      cs = ag_keep(&s, e, cs);
    }
    ts_tensor *total = ag_sum_dims(&s, g, 1, &dim, true);
    gx = AG_ADD(&s, AG_SUB(&s, total, cs), g);
    break;
  }
  case TS_GRAD_SOFTMAX: /* y (g - sum(g y)) */
    gx = AG_MUL(&s, y, AG_SUB(&s, g, ag_sum_dims(&s, AG_MUL(&s, g, y), 1, &dim, true)));
    break;
  case TS_GRAD_LOG_SOFTMAX: /* g - exp(y) sum(g) */
    gx = AG_SUB(&s, g, AG_MUL(&s, ag_un(&s, TS_OP_EXP, y), ag_sum_dims(&s, g, 1, &dim, true)));
    break;
  }
  grads[0] = ag_end(&s, gx);
  return s.st;
}

/* torch names a full reduction ...Backward0 and one over dims ...Backward1 */
static ts_grad_kind full_reduction_kind(ts_grad_kind k) {
  switch (k) {
  case TS_GRAD_SUM: return TS_GRAD_SUM_ALL;
  case TS_GRAD_MEAN: return TS_GRAD_MEAN_ALL;
  case TS_GRAD_PROD: return TS_GRAD_PROD_ALL;
  case TS_GRAD_NORM: return TS_GRAD_NORM_ALL;
  default: return k;
  }
}

ts_status ts_ag_reduce(ts_grad_kind k, ts_tensor *x, int ndims, const int64_t *dims, ts_tensor *y, ts_tensor *indices,
                       double param) {
  if (!ts_dtype_is_float(y->dtype) || !ts_dtype_is_float(x->dtype)) return TS_OK;
  ts_node *n;
  ts_status st = ts_ag_record_kind(ndims == 0 ? full_reduction_kind(k) : k, 1, &x, y, &n);
  if (st) return st;
  n->f[0] = param;
  bool scan = k == TS_GRAD_CUMSUM || k == TS_GRAD_SOFTMAX || k == TS_GRAD_LOG_SOFTMAX;
  /* the reduced dims, wrapped; all of them when none are given */
  bool red[TS_MAX_DIMS] = {false};
  int nred = 0;
  for (int i = 0; i < ndims; i++) {
    int d;
    if (ts_wrap_dim("backward", dims[i], x->ndim, &d) == TS_OK && x->ndim > 0) red[d] = true;
  }
  for (int d = 0; d < x->ndim; d++)
    if (red[d] || (ndims == 0 && !scan)) nred++;
  if (scan || k == TS_GRAD_MAXDIM) {
    int d = 0;
    if (x->ndim > 0) ts_wrap_dim("backward", dims[0], x->ndim, &d);
    n->i[1] = d;
  }
  if (!scan && nred > 0) {
    n->list = malloc(sizeof(int64_t) * (size_t)nred);
    if (!n->list) return ts_fail(TS_ERR_OOM, "out of memory recording %s", n->name);
    for (int d = 0; d < x->ndim; d++)
      if (red[d] || ndims == 0) n->list[n->nlist++] = d;
  }
  ts_ag_save(n, 0, x);
  ts_ag_save(n, 1, y);
  if (indices) ts_ag_save(n, 2, indices);
  return TS_OK;
}
