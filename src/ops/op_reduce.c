/* The op layer for reductions and scans: dims wrapped and checked, dtype
 * rules, output allocation, and the reshapes that let a kernel reduce exactly
 * one dim (ops_reduce.def): several dims are permuted to the end and merged,
 * everything is flattened. Also equal/isclose/allclose, built from ops. */
#include "ops.h"
#include "autograd/autocast.h"
#include "autograd/grad.h"

#include <math.h>
#include <string.h>

/* How one reduction runs: the kernel's input and dim, and the result's shape. */
typedef struct rplan {
  ts_tensor *src;                   /* retained: x, or x reshaped so one dim holds every reduced element */
  int dim;                          /* the dim of src to reduce */
  int64_t R;                        /* elements per output */
  int first_empty;                  /* a reduced dim of x with size 0, or -1 */
  int nd;                           /* the result's rank */
  int64_t sizes[TS_MAX_DIMS];       /* the result's shape */
} rplan;

/* Permutation putting x's dims in order of decreasing stride: a transposed
 * dense tensor becomes contiguous, so flattening it needs no copy. */
static void stride_order(const ts_tensor *x, int64_t *perm) {
  for (int d = 0; d < x->ndim; d++) perm[d] = d;
  for (int i = 1; i < x->ndim; i++) /* insertion sort: stable, rank <= 8 */
    for (int j = i; j > 0 && x->strides[perm[j]] > x->strides[perm[j - 1]]; j--) {
      int64_t t = perm[j];
      perm[j] = perm[j - 1], perm[j - 1] = t;
    }
}

/* ordered: the reduced elements must stay in index order (argmax returns
 * positions); otherwise a reduction over everything may visit them in memory order. */
static ts_status plan_init(const char *fn, ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, bool ordered,
                           rplan *p) {
  bool red[TS_MAX_DIMS] = {false};
  int nred = 0;
  if (ndims > TS_MAX_DIMS) return ts_fail(TS_ERR_ARG, "%s: at most %d dims can be reduced, got %d", fn, TS_MAX_DIMS, ndims);
  for (int i = 0; i < ndims; i++) {
    int d;
    ts_status st = ts_wrap_dim(fn, dims[i], x->ndim, &d);
    if (st) return st;
    if (x->ndim == 0) continue;
    if (red[d]) return ts_fail(TS_ERR_ARG, "%s: dim %d appears multiple times in the list of dims", fn, d);
    red[d] = true, nred++;
  }
  bool all = ndims == 0 || nred == x->ndim;
  p->nd = 0;
  p->R = 1;
  p->first_empty = -1;
  for (int d = 0; d < x->ndim; d++) {
    bool r = all || red[d];
    if (r) {
      p->R *= x->sizes[d];
      if (x->sizes[d] == 0 && p->first_empty < 0) p->first_empty = d;
    }
    if (!r) p->sizes[p->nd++] = x->sizes[d];
    else if (keepdim) p->sizes[p->nd++] = 1;
  }
  ts_status st;
  if (all) { /* flatten (a view unless the layout forbids it) */
    ts_tensor *src = x, *perm = NULL;
    if (!ordered && x->ndim > 1 && !ts_is_contiguous(x)) {
      int64_t order[TS_MAX_DIMS];
      stride_order(x, order);
      if ((st = ts_permute(x, x->ndim, order, &perm))) return st;
      src = perm;
    }
    int64_t n = ts_numel(x);
    st = ts_reshape(src, 1, &n, &p->src);
    if (perm) ts_tensor_release(perm);
    p->dim = 0;
    return st;
  }
  if (nred == 1) {
    for (int d = 0; d < x->ndim; d++)
      if (red[d]) p->dim = d;
    ts_tensor_retain(x);
    p->src = x;
    return TS_OK;
  }
  /* several dims: kept dims first, then the reduced ones merged into one */
  int64_t order[TS_MAX_DIMS], shape[TS_MAX_DIMS];
  int k = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!red[d]) order[k] = d, shape[k++] = x->sizes[d];
  int nkept = k;
  for (int d = 0; d < x->ndim; d++)
    if (red[d]) order[k++] = d;
  shape[nkept] = p->R;
  ts_tensor *perm;
  if ((st = ts_permute(x, x->ndim, order, &perm))) return st;
  st = ts_reshape(perm, nkept + 1, shape, &p->src);
  ts_tensor_release(perm);
  p->dim = nkept;
  return st;
}

/* Runs op per the plan into a new out[0] of dtype dt (and int64 indices when
 * indices is not NULL), then views both in the result's shape. */
static ts_status plan_run(ts_op op, rplan *p, ts_dtype dt, int64_t flag, double fp, ts_tensor **out,
                          ts_tensor **indices) {
  ts_tensor *src = p->src, *o = NULL, *ix = NULL, *vo = NULL, *vi = NULL;
  int64_t shape[TS_MAX_DIMS];
  memcpy(shape, src->sizes, sizeof(int64_t) * (size_t)src->ndim);
  shape[p->dim] = 1;
  ts_status st = ts_tensor_empty(src->ndim, shape, dt, src->device, &o);
  if (!st && indices) st = ts_tensor_empty(src->ndim, shape, TS_INT64, src->device, &ix);
  if (!st) {
    ts_call c = {.op = op, .nin = 1, .in = &src, .out = {o, ix}, .i = {p->dim, flag}, .f = {fp}};
    st = ts_dispatch(&c);
  }
  if (!st) st = ts_view(o, p->nd, p->sizes, &vo);
  if (!st && indices) st = ts_view(ix, p->nd, p->sizes, &vi);
  if (o) ts_tensor_release(o);
  if (ix) ts_tensor_release(ix);
  if (st) {
    if (vo) ts_tensor_release(vo);
    return st;
  }
  *out = vo;
  if (indices) *indices = vi;
  return TS_OK;
}

static ts_status reduce(ts_op op, const char *fn, ts_tensor *x, int ndims, const int64_t *dims, bool keepdim,
                        ts_dtype dt, int64_t flag, double fp, ts_tensor **out) {
  rplan p;
  ts_status st = plan_init(fn, x, ndims, dims, keepdim, false, &p);
  if (st) return st;
  st = plan_run(op, &p, dt, flag, fp, out, NULL);
  ts_tensor_release(p.src);
  return st;
}

static ts_status need_float(const char *fn, const ts_tensor *x, const char *hint) {
  if (ts_dtype_is_float(x->dtype)) return TS_OK;
  return ts_fail(TS_ERR_DTYPE, "%s: expected a floating point tensor, got %s%s; convert first, e.g. x:float()", fn,
                 ts_dtype_name(x->dtype), hint);
}

/* integers and bool sum to int64, as torch */
static ts_dtype sum_dtype(ts_dtype d) { return ts_dtype_is_float(d) ? d : TS_INT64; }

static ts_status sum_impl(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  return reduce(TS_OP_SUM, "sum", x, ndims, dims, keepdim, sum_dtype(x->dtype), 0, 0, out);
}

static ts_status prod_impl(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  return reduce(TS_OP_PROD, "prod", x, ndims, dims, keepdim, sum_dtype(x->dtype), 0, 0, out);
}

static ts_status mean_impl(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  if (!ts_dtype_is_float(x->dtype))
    return ts_fail(TS_ERR_DTYPE,
                   "mean: could not infer output dtype. Input dtype must be a floating point dtype, got %s; "
                   "convert first, e.g. x:float():mean(), or pass {dtype = \"float32\"}",
                   ts_dtype_name(x->dtype));
  return reduce(TS_OP_SUM, "mean", x, ndims, dims, keepdim, x->dtype, 1, 0, out);
}

static ts_status var_std(const char *fn, ts_tensor *x, int ndims, const int64_t *dims, double correction,
                         bool keepdim, int64_t take_sqrt, ts_tensor **out) {
  ts_status st = need_float(fn, x, " (std and var only support floating point dtypes)");
  if (st) return st;
  if (isnan(correction)) return ts_fail(TS_ERR_ARG, "%s: correction must be a number, got nan", fn);
  return reduce(TS_OP_VAR, fn, x, ndims, dims, keepdim, x->dtype, take_sqrt, correction, out);
}

static ts_status var_impl(ts_tensor *x, int ndims, const int64_t *dims, double correction, bool keepdim, ts_tensor **out) {
  return var_std("var", x, ndims, dims, correction, keepdim, 0, out);
}

static ts_status std_impl(ts_tensor *x, int ndims, const int64_t *dims, double correction, bool keepdim, ts_tensor **out) {
  return var_std("std", x, ndims, dims, correction, keepdim, 1, out);
}

static ts_status norm_impl(ts_tensor *x, double p, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  ts_status st = need_float("norm", x, "");
  if (st) return st;
  if (isnan(p)) return ts_fail(TS_ERR_ARG, "norm: p must be a number, got nan");
  rplan pl;
  if ((st = plan_init("norm", x, ndims, dims, keepdim, false, &pl))) return st;
  if (pl.R == 0 && (isinf(p) || p < 0))
    st = ts_fail(TS_ERR_ARG, "norm: cannot compute the %g norm on an empty tensor because the operation does not "
                 "have an identity", p);
  if (!st) st = plan_run(TS_OP_NORM, &pl, x->dtype, 0, p, out, NULL);
  ts_tensor_release(pl.src);
  return st;
}

ts_status ts_all(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  return reduce(TS_OP_ALL, "all", x, ndims, dims, keepdim, TS_BOOL, 0, 0, out);
}

ts_status ts_any(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  return reduce(TS_OP_ANY, "any", x, ndims, dims, keepdim, TS_BOOL, 0, 0, out);
}

static ts_status logsumexp_impl(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  /* integers give the default float dtype, as torch */
  ts_dtype dt = ts_dtype_is_float(x->dtype) ? x->dtype : TS_DEFAULT_DTYPE;
  return reduce(TS_OP_LOGSUMEXP, "logsumexp", x, ndims, dims, keepdim, dt, 0, 0, out);
}

/* max/min/argmax have no identity: an empty reduction is an error, as torch */
static ts_status check_nonempty(const char *fn, const ts_tensor *x, const rplan *p, bool all) {
  if (p->R != 0) return TS_OK;
  if (all)
    return ts_fail(TS_ERR_ARG, "%s: expected reduction dim to be specified for input.numel() == 0; "
                   "specify the reduction dim, e.g. x:%s(0)", fn, fn);
  char s[256];
  ts_shape_str(x->ndim, x->sizes, s, sizeof s);
  return ts_fail(TS_ERR_ARG, "%s: expected reduction dim %d to have non-zero size (input shape %s)", fn,
                 p->first_empty, s);
}

static const char *extreme_name(ts_op op, bool arg) {
  if (arg) return op == TS_OP_MAX ? "argmax" : "argmin";
  return op == TS_OP_MAX ? "max" : "min";
}

static ts_status amax_impl(ts_op op, ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  const char *fn = ndims == 0 ? extreme_name(op, false) : op == TS_OP_MAX ? "amax" : "amin"; /* x:max() or x:amax(dims) */
  rplan p;
  ts_status st = plan_init(fn, x, ndims, dims, keepdim, false, &p);
  if (st) return st;
  if (!(st = check_nonempty(fn, x, &p, ndims == 0))) st = plan_run(op, &p, x->dtype, 0, 0, out, NULL);
  ts_tensor_release(p.src);
  return st;
}

static ts_status max_dim_impl(ts_op op, ts_tensor *x, int64_t dim, bool keepdim, ts_tensor **values, ts_tensor **indices) {
  const char *fn = extreme_name(op, false);
  rplan p;
  ts_status st = plan_init(fn, x, 1, &dim, keepdim, true, &p);
  if (st) return st;
  if (!(st = check_nonempty(fn, x, &p, false))) st = plan_run(op, &p, x->dtype, 0, 0, values, indices);
  ts_tensor_release(p.src);
  return st;
}

ts_status ts_argmax(ts_op op, ts_tensor *x, const int64_t *dim, bool keepdim, ts_tensor **out) {
  const char *fn = extreme_name(op, true);
  rplan p;
  ts_status st = plan_init(fn, x, dim ? 1 : 0, dim, keepdim, true, &p);
  if (st) return st;
  ts_tensor *values = NULL;
  if (!(st = check_nonempty(fn, x, &p, dim == NULL))) st = plan_run(op, &p, x->dtype, 0, 0, &values, out);
  if (values) ts_tensor_release(values);
  ts_tensor_release(p.src);
  return st;
}

/* ---- scans ---------------------------------------------------------------------- */

static ts_status scan(ts_op op, ts_tensor *x, int64_t dim, ts_dtype dt, ts_tensor **out) {
  int d;
  ts_status st = ts_wrap_dim(ts_ops[op].name, dim, x->ndim, &d);
  if (st) return st;
  ts_tensor *src = x, *flat = NULL, *r = NULL;
  if (x->ndim == 0) { /* a 0-dim input scans as one element */
    int64_t one = 1;
    if ((st = ts_reshape(x, 1, &one, &flat))) return st;
    src = flat;
  }
  if (!(st = ts_tensor_empty(src->ndim, src->sizes, dt, src->device, &r))) {
    ts_call c = {.op = op, .nin = 1, .in = &src, .out = {r}, .i = {d}};
    st = ts_dispatch(&c);
  }
  if (!st && flat) {
    ts_tensor *v;
    int64_t none[1];
    if (!(st = ts_view(r, 0, none, &v))) {
      ts_tensor_release(r);
      r = v;
    }
  }
  if (flat) ts_tensor_release(flat);
  if (st) {
    if (r) ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

static ts_status cumsum_impl(ts_tensor *x, int64_t dim, ts_tensor **out) {
  return scan(TS_OP_CUMSUM, x, dim, sum_dtype(x->dtype), out);
}

static ts_status softmax_impl(ts_tensor *x, int64_t dim, ts_tensor **out) {
  ts_status st = need_float("softmax", x, " (or pass {dtype = \"float32\"})");
  return st ? st : scan(TS_OP_SOFTMAX, x, dim, x->dtype, out);
}

static ts_status log_softmax_impl(ts_tensor *x, int64_t dim, ts_tensor **out) {
  ts_status st = need_float("log_softmax", x, " (or pass {dtype = \"float32\"})");
  return st ? st : scan(TS_OP_LOG_SOFTMAX, x, dim, x->dtype, out);
}

/* ---- whole-tensor comparisons ---------------------------------------------------- */

/* The value of a one-element bool tensor, wherever it lives. */
static ts_status read_bool(ts_tensor *t, bool *out) {
  ts_tensor *c = t;
  ts_status st = TS_OK;
  if (t->device.type != TS_CPU) {
    if ((st = ts_tensor_empty(t->ndim, t->sizes, t->dtype, TS_DEVICE_CPU, &c))) return st;
    st = ts_copy_(c, t);
  }
  if (!st) *out = ts_load_i64(ts_data(c), TS_BOOL) != 0;
  if (c != t) ts_tensor_release(c);
  return st;
}

/* Reduces a bool tensor with all() and reads the answer. */
static ts_status all_true(ts_tensor *t, bool *out) {
  ts_tensor *a;
  ts_status st = ts_all(t, 0, NULL, false, &a);
  if (st) return st;
  st = read_bool(a, out);
  ts_tensor_release(a);
  return st;
}

ts_status ts_equal(ts_tensor *a, ts_tensor *b, bool *out) {
  ts_tensor *ab[2] = {a, b};
  ts_status st = ts_check_same_device("equal", 2, ab);
  if (st) return st;
  if (a->ndim != b->ndim || memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) != 0)
    return *out = false, TS_OK;
  ts_tensor *eq;
  if ((st = ts_binary(TS_OP_EQ, a, b, &eq))) return st;
  st = all_true(eq, out);
  ts_tensor_release(eq);
  return st;
}

ts_status ts_isclose(ts_tensor *a, ts_tensor *b, double rtol, double atol, bool equal_nan, ts_tensor **out) {
  if (!(rtol >= 0)) return ts_fail(TS_ERR_ARG, "isclose: rtol must be greater than or equal to zero, got %g", rtol);
  if (!(atol >= 0)) return ts_fail(TS_ERR_ARG, "isclose: atol must be greater than or equal to zero, got %g", atol);
  ts_tensor *ab[2] = {a, b};
  ts_dtype dt = ts_result_type(2, ab);
  if (!ts_dtype_is_float(dt)) dt = TS_FLOAT64; /* exact for integers up to 2^53 */
  /* close = (a == b) | (isfinite(|a - b|) & |a - b| <= atol + rtol * |b|) [| (isnan(a) & isnan(b))],
   * as PyTorch: only equal infinities are close (inf - inf is NaN, 1 - inf is inf) */
  enum { A, B, D, AD, BA, TOL, LE0, FIN, LE, EQ, NA, NB, NN, C1, NT };
  ts_tensor *t[NT] = {NULL};
  ts_scalar_box box;
  ts_status st = ts_to_dtype(a, dt, &t[A]);
  if (!st) st = ts_to_dtype(b, dt, &t[B]);
  if (!st) st = ts_binary(TS_OP_SUB, t[A], t[B], &t[D]);
  if (!st) st = ts_unary(TS_OP_ABS, t[D], &t[AD]);
  if (!st) st = ts_unary(TS_OP_ABS, t[B], &t[BA]);
  if (!st) st = ts_add_scaled(ts_scalar_wrap_double(&box, atol), t[BA], rtol, &t[TOL]);
  if (!st) st = ts_binary(TS_OP_LE, t[AD], t[TOL], &t[LE0]);
  if (!st) st = ts_binary(TS_OP_LT, t[AD], ts_scalar_wrap_double(&box, INFINITY), &t[FIN]); /* NaN: false */
  if (!st) st = ts_binary(TS_OP_LOGICAL_AND, t[LE0], t[FIN], &t[LE]);
  if (!st) st = ts_binary(TS_OP_EQ, t[A], t[B], &t[EQ]);
  if (!st) st = ts_binary(TS_OP_LOGICAL_OR, t[LE], t[EQ], &t[C1]);
  ts_tensor *r = t[C1];
  if (!st && equal_nan) {
    if (!(st = ts_binary(TS_OP_NE, t[A], t[A], &t[NA])) && !(st = ts_binary(TS_OP_NE, t[B], t[B], &t[NB])) &&
        !(st = ts_binary(TS_OP_LOGICAL_AND, t[NA], t[NB], &t[NN])))
      st = ts_binary(TS_OP_LOGICAL_OR, t[C1], t[NN], &r);
  }
  if (!st) {
    if (r == t[C1]) t[C1] = NULL; /* handed to the caller */
    *out = r;
  }
  for (int i = 0; i < NT; i++)
    if (t[i]) ts_tensor_release(t[i]);
  return st;
}

ts_status ts_allclose(ts_tensor *a, ts_tensor *b, double rtol, double atol, bool equal_nan, bool *out) {
  ts_tensor *c;
  ts_status st = ts_isclose(a, b, rtol, atol, equal_nan, &c);
  if (st) return st;
  st = all_true(c, out);
  ts_tensor_release(c);
  return st;
}

/* ---- autograd: the public reductions run their kernels with grad mode off
 * (no nodes for the internal views), then record one node (grad_reduce.c) ---- */

#define RECORDED(call, kind, ndims, dims, param)                                         \
  TS_AG_OFF(prev);                                                                       \
  ts_status st = call;                                                                   \
  TS_AG_RESTORE(prev);                                                                   \
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_reduce(kind, x, ndims, dims, *out, NULL, param); \
  return st

ts_status ts_sum(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_SUM, .t = {x}, .i = {ndims, keepdim}, .p = {dims}, .out = {out});
  RECORDED(sum_impl(x, ndims, dims, keepdim, out), TS_GRAD_SUM, ndims, dims, 0);
}

ts_status ts_mean(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  RECORDED(mean_impl(x, ndims, dims, keepdim, out), TS_GRAD_MEAN, ndims, dims, 0);
}

ts_status ts_prod(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_PROD, .t = {x}, .i = {ndims, keepdim}, .p = {dims}, .out = {out});
  RECORDED(prod_impl(x, ndims, dims, keepdim, out), TS_GRAD_PROD, ndims, dims, 0);
}

ts_status ts_logsumexp(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  RECORDED(logsumexp_impl(x, ndims, dims, keepdim, out), TS_GRAD_LOGSUMEXP, ndims, dims, 0);
}

ts_status ts_var(ts_tensor *x, int ndims, const int64_t *dims, double correction, bool keepdim, ts_tensor **out) {
  RECORDED(var_impl(x, ndims, dims, correction, keepdim, out), TS_GRAD_VAR, ndims, dims, correction);
}

ts_status ts_std(ts_tensor *x, int ndims, const int64_t *dims, double correction, bool keepdim, ts_tensor **out) {
  RECORDED(std_impl(x, ndims, dims, correction, keepdim, out), TS_GRAD_STD, ndims, dims, correction);
}

ts_status ts_norm(ts_tensor *x, double p, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_NORM, .t = {x}, .f = {p}, .i = {ndims, keepdim}, .p = {dims}, .out = {out});
  RECORDED(norm_impl(x, p, ndims, dims, keepdim, out), TS_GRAD_NORM, ndims, dims, p);
}

ts_status ts_amax(ts_op op, ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out) {
  RECORDED(amax_impl(op, x, ndims, dims, keepdim, out), TS_GRAD_AMAX, ndims, dims, 0);
}

ts_status ts_max_dim(ts_op op, ts_tensor *x, int64_t dim, bool keepdim, ts_tensor **values, ts_tensor **indices) {
  TS_AG_OFF(prev);
  ts_status st = max_dim_impl(op, x, dim, keepdim, values, indices);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_reduce(TS_GRAD_MAXDIM, x, 1, &dim, *values, *indices, 0);
  return st;
}

ts_status ts_cumsum(ts_tensor *x, int64_t dim, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_CUMSUM, .t = {x}, .i = {dim}, .out = {out});
  RECORDED(cumsum_impl(x, dim, out), TS_GRAD_CUMSUM, 1, &dim, 0);
}

ts_status ts_softmax(ts_tensor *x, int64_t dim, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_SOFTMAX, .t = {x}, .i = {dim}, .out = {out});
  RECORDED(softmax_impl(x, dim, out), TS_GRAD_SOFTMAX, 1, &dim, 0);
}

ts_status ts_log_softmax(ts_tensor *x, int64_t dim, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_LOG_SOFTMAX, .t = {x}, .i = {dim}, .out = {out});
  RECORDED(log_softmax_impl(x, dim, out), TS_GRAD_LOG_SOFTMAX, 1, &dim, 0);
}
