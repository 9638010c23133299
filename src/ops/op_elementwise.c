/* The op layer for elementwise ops: type promotion, broadcasting, device
 * checks, output allocation, then one kernel call. Broadcast inputs are
 * stack views (no allocation, no refcount) that live only for the call. */
#include "ops.h"
#include "autograd/autocast.h"
#include "autograd/grad.h"

#include <math.h>
#include <string.h>

/* A stack view of t expanded to (nd, sizes): stride 0 where t has size 1. */
static void broadcast_view(const ts_tensor *t, int nd, const int64_t *sizes, ts_tensor *v) {
  *v = *t;
  v->ndim = nd;
  /* a 0-dim CPU operand beside device tensors is a scalar (the kernels read
   * its one value on the host): broadcast, it must stay one for the device
   * guard in ts_dispatch, which sees only this view */
  if (t->ndim == 0 && t->device.type == TS_CPU) v->is_wrapped_number = true;
  int off = nd - t->ndim;
  for (int d = 0; d < nd; d++) {
    int64_t ts = d < off ? 1 : t->sizes[d - off];
    v->sizes[d] = sizes[d];
    v->strides[d] = (ts == 1 && sizes[d] != 1) || d < off ? 0 : t->strides[d - off];
  }
}

/* torch.can_cast: no float into an integer, no non-bool into bool. */
static bool can_cast(ts_dtype from, ts_dtype to) {
  if (ts_dtype_is_float(from) && !ts_dtype_is_float(to)) return false;
  if (from != TS_BOOL && to == TS_BOOL) return false;
  return true;
}

/* Holds operands cast to the compute dtype; releases what it made. */
typedef struct cast_set {
  ts_tensor *made[4];
  ts_scalar_box boxes[4];
  int n;
} cast_set;

static void cast_set_free(cast_set *cs) {
  for (int i = 0; i < cs->n; i++) ts_tensor_release(cs->made[i]);
}

/* Returns t in dtype dt: t itself, a converted wrapped number, or a new tensor. */
static ts_status cast_operand(cast_set *cs, int k, ts_tensor *t, ts_dtype dt, ts_tensor **out) {
  if (t->dtype == dt) return *out = t, TS_OK;
  if (t->is_wrapped_number) { /* convert the value itself: no kernel, no allocation */
    ts_scalar_box *b = &cs->boxes[k];
    const void *p = ts_data(t);
    if (ts_dtype_is_float(t->dtype)) ts_scalar_wrap_double(b, ts_load_f64(p, t->dtype));
    else ts_scalar_wrap_int(b, ts_load_i64(p, t->dtype));
    void *q = &b->v;
    if (ts_dtype_is_float(t->dtype)) ts_store_f64(q, dt, b->v.f);
    else ts_store_i64(q, dt, b->v.i);
    b->t.dtype = dt;
    return *out = &b->t, TS_OK;
  }

  ts_tensor *c;
  ts_status st = ts_to_dtype(t, dt, &c);
  if (st) return st;
  cs->made[cs->n++] = c;
  *out = c;
  return TS_OK;
}

static const char *op_name(ts_op op) { return ts_ops[op].name; }

static bool is_bitwise(ts_op op) {
  return op == TS_OP_BITWISE_AND || op == TS_OP_BITWISE_OR || op == TS_OP_BITWISE_XOR || op == TS_OP_BITWISE_NOT;
}

/* Bitwise ops take integers and bool only, as PyTorch's ("not implemented for 'Float'"). */
static ts_status check_bitwise(ts_op op, ts_dtype dt) {
  if (!is_bitwise(op) || !ts_dtype_is_float(dt)) return TS_OK;
  return ts_fail(TS_ERR_DTYPE, "%s: expected integer or bool tensors, got %s", op_name(op), ts_dtype_name(dt));
}

/* Where the result lives: the first operand that is not a CPU scalar. */
static ts_device result_device(int n, ts_tensor *const *ts) {
  for (int i = 0; i < n; i++)
    if (!ts[i]->is_wrapped_number && !(ts[i]->ndim == 0 && ts[i]->device.type == TS_CPU)) return ts[i]->device;
  return ts[0]->device;
}

/* Writes the computed result r into out (same shape), casting when allowed. */
static ts_status finish_out(const char *fn, ts_tensor *r, ts_tensor *out) {
  if (!can_cast(r->dtype, out->dtype))
    return ts_fail(TS_ERR_DTYPE, "%s: result type %s can't be cast to the desired output type %s", fn,
                   ts_dtype_name(r->dtype), ts_dtype_name(out->dtype));
  return ts_copy_(out, r);
}

static ts_status check_out_shape(const char *fn, int nd, const int64_t *sizes, const ts_tensor *out) {
  if (nd == out->ndim && memcmp(sizes, out->sizes, sizeof(int64_t) * (size_t)nd) == 0) return TS_OK;
  char a[256], b[256];
  ts_shape_str(nd, sizes, a, sizeof a);
  ts_shape_str(out->ndim, out->sizes, b, sizeof b);
  return ts_fail(TS_ERR_SHAPE, "%s: output with shape %s doesn't match the broadcast shape %s", fn, b, a);
}

/* The compute dtype of a unary op, or an error for dtypes it refuses. */
static ts_status unary_dtype(ts_op op, ts_dtype in, bool params_fractional, ts_dtype *compute, ts_dtype *result) {
  ts_op_kind kind = ts_ops[op].kind;
  if (kind == TS_KIND_UNARY_BOOL) return *compute = in, *result = TS_BOOL, TS_OK;
  if (kind == TS_KIND_UNARY_FLOAT || (params_fractional && !ts_dtype_is_float(in)))
    in = ts_dtype_is_float(in) ? in : TS_DEFAULT_DTYPE;
  if (in == TS_BOOL && op != TS_OP_SIGN && op != TS_OP_BITWISE_NOT)
    return ts_fail(TS_ERR_DTYPE, "%s is not supported for bool tensors; convert first, e.g. t:to(\"int64\")",
                   op_name(op));
  *compute = *result = in;
  return TS_OK;
}

/* Writes an out-of-place result r into out and, when r has history, gives
 * out that history (in-place ops on tensors in the autograd graph). */
static ts_status write_out(const char *fn, ts_tensor *r, ts_tensor *out) {
  ts_status st = check_out_shape(fn, r->ndim, r->sizes, out);
  if (st) return st;
  TS_AG_OFF(prev);
  st = finish_out(fn, r, out);
  TS_AG_RESTORE(prev);
  if (!st && r->grad_fn) st = ts_ag_rebase(out, r);
  return st;
}

/* For an in-place op on x that autograd follows: a recorded clone of x, so
 * the formula's saved input is not the storage the op overwrites. */
static ts_status inplace_input(const char *fn, ts_tensor *x, ts_tensor *out, bool track, ts_tensor **xin) {
  ts_status st = ts_ag_check_inplace(fn, out);
  if (st) return st;
  if (track && x == out) return ts_clone(x, xin);
  ts_tensor_retain(x);
  *xin = x;
  return TS_OK;
}

/* An op that writes into an existing tensor counts one version, as torch's
 * _version does, whatever copies it made on the way (write_out's copy_ bumps
 * too); saved tensors compare versions (autograd.c). */
static ts_status wrote_once(ts_tensor *out, uint32_t before, ts_status st) {
  if (!st) out->storage->version = before + 1;
  return st;
}

/* What a unary op refuses before any dtype logic: bitwise_not of floats, and
 * round(x, {decimals}) of integers (PyTorch has no integer kernel for it). */
static ts_status check_unary_input(ts_op op, const ts_tensor *x, const int64_t *ip) {
  ts_status st = check_bitwise(op, x->dtype);
  if (st || op != TS_OP_ROUND || !ip || ip[0] == 0 || ts_dtype_is_float(x->dtype)) return st;
  return ts_fail(TS_ERR_DTYPE, "round: decimals is only supported for floating-point tensors, got %s",
                 ts_dtype_name(x->dtype));
}

static ts_status unary_out_impl(ts_op op, ts_tensor *x, const int64_t *ip, const double *fp, ts_tensor *out) {
  ts_tensor *xin = NULL, *r = NULL;
  ts_op_kind kind = ts_ops[op].kind;
  ts_status st0 = check_unary_input(op, x, ip);
  if (st0) return st0;
  st0 = ts_check_internal_overlap(op_name(op), out);
  if (st0 || (st0 = ts_check_partial_overlap(op_name(op), out, x))) return st0;
  if (out == x && !(ts_grad_enabled() && x->requires_grad) &&
      (kind == TS_KIND_UNARY || (kind == TS_KIND_UNARY_FLOAT && ts_dtype_is_float(x->dtype)))) {
    /* the plain in-place case: the kernel writes over its input element by element */
    bool fractional = op == TS_OP_POW_SCALAR && fp && fp[0] != floor(fp[0]);
    if (op == TS_OP_CLAMP && ip && fp)
      for (int k = 0; k < 2; k++) fractional |= ((ip[0] >> k) & 1) && fp[k] != floor(fp[k]);
    if (ts_dtype_is_float(x->dtype) || (!fractional && x->dtype != TS_BOOL)) {
      ts_call c = {.op = op, .nin = 1, .in = &x, .out = {x}};
      if (ip) memcpy(c.i, ip, sizeof c.i);
      if (fp) memcpy(c.f, fp, sizeof c.f);
      return ts_dispatch(&c);
    }
  }
  ts_status st = inplace_input(op_name(op), x, out, ts_ag_needed(1, &x), &xin);
  if (st) return st;
  st = ts_unary_p(op, xin, ip, fp, &r);
  ts_tensor_release(xin);
  if (st) return st;
  st = write_out(op_name(op), r, out);
  ts_tensor_release(r);
  return st;
}

ts_status ts_unary_p(ts_op op, ts_tensor *x, const int64_t *ip, const double *fp, ts_tensor **out) {
  TS_AUTOCAST_WHEN(ts_autocast_of_op(op) >= 0, ts_autocast_of_op(op), .t = {x}, .i = {op}, .p = {ip, fp}, .out = {out});
  bool fractional = false;
  if (op == TS_OP_CLAMP || op == TS_OP_POW_SCALAR)
    for (int k = 0; k < 2; k++)
      if ((op == TS_OP_POW_SCALAR ? k == 0 : (ip[0] >> k) & 1) && fp[k] != floor(fp[k])) fractional = true;
  if (op == TS_OP_POW_SCALAR && !ts_dtype_is_float(x->dtype) && fp[0] < 0 && !fractional)
    return ts_fail(TS_ERR_ARG, "pow: integers to negative integer powers are not allowed");
  ts_dtype compute = x->dtype, result = x->dtype;
  ts_status st = check_unary_input(op, x, ip);
  if (!st) st = unary_dtype(op, x->dtype, fractional, &compute, &result);
  if (st) return st;
  cast_set cs;
  cs.n = 0; /* no initialiser: zeroing the boxes costs more than a small op */
  ts_tensor *xc, *r = NULL;
  if ((st = cast_operand(&cs, 0, x, compute, &xc))) return st;
  if (!(st = ts_tensor_empty(x->ndim, x->sizes, result, x->device, &r))) {
    ts_call c = {.op = op, .nin = 1, .in = &xc, .out = {r}};
    if (ip) memcpy(c.i, ip, sizeof c.i);
    if (fp) memcpy(c.f, fp, sizeof c.f);
    st = ts_dispatch(&c);
    if (!st && ts_ag_needed(1, &x)) st = ts_ag_unary(op, x, xc, r, ip, fp);
  }
  cast_set_free(&cs);
  if (st) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

ts_status ts_unary(ts_op op, ts_tensor *x, ts_tensor **out) { return ts_unary_p(op, x, NULL, NULL, out); }
ts_status ts_unary_p_out(ts_op op, ts_tensor *x, const int64_t *ip, const double *fp, ts_tensor *out) {
  if (out->base && ts_grad_enabled()) ts_ag_refresh(out); /* a view whose base joined the graph since */
  uint32_t v = out->storage->version;
  return wrote_once(out, v, unary_out_impl(op, x, ip, fp, out));
}

ts_status ts_unary_out(ts_op op, ts_tensor *x, ts_tensor *out) { return ts_unary_p_out(op, x, NULL, NULL, out); }

static ts_status binary_impl(ts_op op, ts_tensor *a, ts_tensor *b, double alpha, ts_tensor *given, ts_tensor **out) {
  const char *fn = op_name(op);
  ts_tensor *ab[2] = {a, b};
  ts_status st = ts_check_same_device(fn, 2, ab);
  if (st) return st;
  if (given && ((st = ts_check_internal_overlap(fn, given)) || (st = ts_check_partial_overlap(fn, given, a)) ||
                (st = ts_check_partial_overlap(fn, given, b))))
    return st;
  if (given && (given->requires_grad || ts_ag_needed(2, ab)) && ts_grad_enabled()) {
    /* autograd follows this in-place op: compute out of place, then rebase */
    ts_tensor *ain = NULL, *r = NULL;
    if ((st = inplace_input(fn, a, given, true, &ain))) return st;
    st = binary_impl(op, ain, b, alpha, NULL, &r);
    ts_tensor_release(ain);
    if (st) return st;
    st = write_out(fn, r, given);
    ts_tensor_release(r);
    return st;
  }
  /* the common case, two ordinary tensors of one dtype, skips the tiers */
  bool plain = !a->is_wrapped_number && !b->is_wrapped_number && a->dtype == b->dtype;
  ts_dtype compute = plain ? a->dtype : ts_result_type(2, ab);
  ts_op_kind kind = ts_ops[op].kind;
  if (kind == TS_KIND_BINARY_FLOAT && !ts_dtype_is_float(compute)) compute = TS_DEFAULT_DTYPE;
  if (compute == TS_BOOL && (op == TS_OP_SUB || op == TS_OP_FLOOR_DIVIDE || op == TS_OP_REMAINDER || op == TS_OP_POW ||
                             op == TS_OP_FMOD || op == TS_OP_DIV_TRUNC))
    return ts_fail(TS_ERR_DTYPE, "%s is not supported for two bool tensors; convert one, e.g. t:to(\"int64\")", fn);
  if ((st = check_bitwise(op, compute))) return st;
  if (ts_dtype_is_int(compute) && alpha != floor(alpha))
    return ts_fail(TS_ERR_DTYPE, "%s: for integer tensors alpha must be an integer, got %g", fn, alpha);
  ts_dtype result = kind == TS_KIND_COMPARE ? TS_BOOL : compute;
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  bool same_shape = a->ndim == b->ndim && memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0;
  if (same_shape) {
    nd = a->ndim;
    memcpy(sizes, a->sizes, sizeof(int64_t) * (size_t)nd);
  } else if ((st = ts_broadcast_shapes(fn, a->ndim, a->sizes, b->ndim, b->sizes, &nd, sizes))) {
    return st;
  }
  if (given && (st = check_out_shape(fn, nd, sizes, given))) return st;

  cast_set cs;
  cs.n = 0; /* no initialiser: zeroing the boxes costs more than a small op */
  ts_tensor *ac, *bc, *r = NULL;
  if ((st = cast_operand(&cs, 0, a, compute, &ac)) || (st = cast_operand(&cs, 1, b, compute, &bc))) {
    cast_set_free(&cs);
    return st;
  }
  bool direct = given && given->dtype == result;
  if (direct) r = given;
  else st = ts_tensor_empty(nd, sizes, result, result_device(2, ab), &r);
  if (!st) {
    ts_tensor va, vb, *in[2] = {ac, bc};
    if (!same_shape) {
      broadcast_view(ac, nd, sizes, &va);
      broadcast_view(bc, nd, sizes, &vb);
      in[0] = &va, in[1] = &vb;
    }
    ts_call c = {.op = op, .nin = 2, .in = in, .out = {r}, .f = {alpha}};
    st = ts_dispatch(&c);
    if (!st && !given && ts_ag_needed(2, ab)) st = ts_ag_binary(op, a, b, ac, bc, r, alpha);
  }
  cast_set_free(&cs);
  if (!st && given && !direct) st = finish_out(fn, r, given);
  if (given) {
    if (!direct) ts_tensor_release(r);
    return st;
  }
  if (st) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

/* ts_binary's autocast path, out of line: with no region open the wrapper
 * stays a test and a jump (no frame), as the 1-element add wants. */
static __attribute__((noinline, cold)) ts_status binary_autocast(ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  TS_AUTOCAST_WHEN(ts_autocast_of_op(op) >= 0, ts_autocast_of_op(op), .t = {a, b}, .i = {op}, .out = {out});
  return binary_impl(op, a, b, 1, NULL, out);
}

ts_status ts_binary(ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  if (ts_autocast_any()) return binary_autocast(op, a, b, out);
  return binary_impl(op, a, b, 1, NULL, out);
}
ts_status ts_binary_out(ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor *out) {
  uint32_t v = out->storage->version;
  return wrote_once(out, v, binary_impl(op, a, b, 1, out, NULL));
}
ts_status ts_add_scaled(ts_tensor *a, ts_tensor *b, double alpha, ts_tensor **out) {
  return binary_impl(TS_OP_ADD, a, b, alpha, NULL, out);
}
ts_status ts_add_scaled_out(ts_tensor *a, ts_tensor *b, double alpha, ts_tensor *out) {
  uint32_t v = out->storage->version;
  return wrote_once(out, v, binary_impl(TS_OP_ADD, a, b, alpha, out, NULL));
}

/* Broadcasts n operands to one shape; names fn in errors. */
static ts_status broadcast_n(const char *fn, int n, ts_tensor *const *ts, int *nd, int64_t *sizes) {
  *nd = ts[0]->ndim;
  memcpy(sizes, ts[0]->sizes, sizeof(int64_t) * (size_t)*nd);
  for (int i = 1; i < n; i++) {
    int64_t tmp[TS_MAX_DIMS];
    ts_status st = ts_broadcast_shapes(fn, *nd, sizes, ts[i]->ndim, ts[i]->sizes, nd, tmp);
    if (st) return st;
    memcpy(sizes, tmp, sizeof(int64_t) * (size_t)*nd);
  }
  return TS_OK;
}

/* Shared by where and lerp: three operands, the last two (or all) cast to dt. */
static ts_status ternary(ts_op op, ts_tensor *const in3[3], int first_cast, ts_dtype dt, ts_tensor **out) {
  const char *fn = op_name(op);
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  ts_status st = ts_check_same_device(fn, 3, in3);
  if (st || (st = broadcast_n(fn, 3, in3, &nd, sizes))) return st;
  cast_set cs;
  cs.n = 0; /* no initialiser: zeroing the boxes costs more than a small op */
  ts_tensor *c[3] = {in3[0], in3[1], in3[2]}, *r = NULL;
  for (int k = first_cast; k < 3 && !st; k++) st = cast_operand(&cs, k, in3[k], dt, &c[k]);
  if (!st) st = ts_tensor_empty(nd, sizes, dt, result_device(3, in3), &r);
  if (!st) {
    ts_tensor v[3];
    for (int k = 0; k < 3; k++) broadcast_view(c[k], nd, sizes, &v[k]);
    ts_tensor *vin[3] = {&v[0], &v[1], &v[2]};
    ts_call call = {.op = op, .nin = 3, .in = vin, .out = {r}};
    st = ts_dispatch(&call);
    if (!st && ts_ag_needed(3, in3))
      st = op == TS_OP_WHERE ? ts_ag_where(in3[0], in3[1], in3[2], r) : ts_ag_lerp(c[0], c[1], c[2], r);
  }
  cast_set_free(&cs);
  if (st) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

ts_status ts_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  if (cond->dtype != TS_BOOL)
    return ts_fail(TS_ERR_DTYPE, "where: condition must be a bool tensor, got %s (use cond:bool() or a comparison)",
                   ts_dtype_name(cond->dtype));
  ts_tensor *ab[2] = {a, b}, *in3[3] = {cond, a, b};
  return ternary(TS_OP_WHERE, in3, 1, ts_result_type(2, ab), out);
}

ts_status ts_lerp(ts_tensor *start, ts_tensor *end, ts_tensor *weight, ts_tensor **out) {
  ts_tensor *in3[3] = {start, end, weight};
  ts_dtype dt = ts_result_type(3, in3);
  if (!ts_dtype_is_float(dt))
    return ts_fail(TS_ERR_DTYPE, "lerp: expected floating-point tensors, got %s", ts_dtype_name(dt));
  return ternary(TS_OP_LERP, in3, 0, dt, out);
}

/* clamp with tensor bounds, either NULL: min(max(x, lo), hi) in the operands'
 * promoted dtype, broadcast; a NaN in x or a bound gives NaN and lo > hi gives
 * hi, as PyTorch. The maximum and minimum kernels run unrecorded and one node
 * (ClampBackward0) carries PyTorch's gradients for x and both bounds. */
ts_status ts_clamp_tensor(ts_tensor *x, ts_tensor *lo, ts_tensor *hi, ts_tensor **out) {
  ts_tensor *in[3] = {x}, *made[2] = {NULL, NULL}, *xc = NULL, *m = NULL, *r = NULL;
  int n = 1;
  if (lo) in[n++] = lo;
  if (hi) in[n++] = hi;
  if (n == 1) return ts_fail(TS_ERR_ARG, "clamp: at least one of 'min' or 'max' must not be nil");
  ts_status st = ts_check_same_device("clamp", n, in);
  if (st) return st;
  ts_dtype dt = ts_result_type(n, in);
  if (dt == TS_BOOL) return ts_fail(TS_ERR_DTYPE, "clamp is not supported for bool tensors; convert first, e.g. t:to(\"int64\")");
  /* a Lua number beside a tensor bound becomes a 0-dim tensor of the result
   * dtype: the node keeps its bounds, and a number lives only for this call */
  for (int k = 1; k < n && !st; k++)
    if (in[k]->is_wrapped_number) {
      double v = ts_dtype_is_float(in[k]->dtype) ? ts_load_f64(ts_data(in[k]), in[k]->dtype)
                                                  : (double)ts_load_i64(ts_data(in[k]), in[k]->dtype);
      st = ts_full(0, NULL, v, dt, TS_DEVICE_CPU, &made[k - 1]);
      in[k] = made[k - 1];
    }
  ts_tensor *lo_t = lo ? in[1] : NULL, *hi_t = hi ? in[n - 1] : NULL;
  TS_AG_OFF(prev);
  if (!st) st = ts_to_dtype(x, dt, &xc);
  if (!st) {
    if (lo_t) st = ts_binary(TS_OP_MAXIMUM, xc, lo_t, &m);
    else ts_tensor_retain(m = xc);
  }
  if (!st) {
    if (hi_t) st = ts_binary(TS_OP_MINIMUM, m, hi_t, &r);
    else ts_tensor_retain(r = m);
  }
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(n, in)) st = ts_ag_clamp_tensor(x, lo_t, hi_t, r);
  ts_tensor_release(xc);
  ts_tensor_release(m);
  for (int k = 0; k < 2; k++) ts_tensor_release(made[k]);
  if (st) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

ts_status ts_clamp_tensor_out(ts_tensor *x, ts_tensor *lo, ts_tensor *hi, ts_tensor *out) {
  uint32_t v = out->storage->version;
  ts_tensor *xin = NULL, *r = NULL;
  ts_status st = ts_check_internal_overlap("clamp_", out);
  if (!st && lo) st = ts_check_partial_overlap("clamp_", out, lo);
  if (!st && hi) st = ts_check_partial_overlap("clamp_", out, hi);
  if (!st) st = inplace_input("clamp_", x, out, ts_ag_needed(1, &x) || (lo && lo->requires_grad) ||
                                                   (hi && hi->requires_grad), &xin);
  if (st) return st;
  st = ts_clamp_tensor(xin, lo, hi, &r);
  ts_tensor_release(xin);
  if (!st) st = write_out("clamp_", r, out);
  ts_tensor_release(r);
  return wrote_once(out, v, st);
}

/* Not recorded for autograd: backward formulas call it on gradients. */
ts_status ts_threshold_backward(ts_tensor *g, ts_tensor *y, ts_tensor **out) {
  const char *fn = op_name(TS_OP_THRESHOLD_BACKWARD);
  ts_tensor *in2[2] = {g, y};
  ts_status st = ts_check_same_device(fn, 2, in2);
  if (st) return st;
  if (g->dtype != y->dtype || !ts_dtype_is_float(g->dtype))
    return ts_fail(TS_ERR_DTYPE, "%s: expected a gradient and an output of one floating dtype, got %s and %s", fn,
                   ts_dtype_name(g->dtype), ts_dtype_name(y->dtype));
  if (g->ndim != y->ndim || memcmp(g->sizes, y->sizes, sizeof(int64_t) * (size_t)g->ndim))
    return ts_fail(TS_ERR_SHAPE, "%s: the gradient and the output differ in shape", fn);
  ts_tensor *r = NULL;
  if ((st = ts_tensor_empty(y->ndim, y->sizes, y->dtype, result_device(2, in2), &r))) return st;
  ts_call call = {.op = TS_OP_THRESHOLD_BACKWARD, .nin = 2, .in = in2, .out = {r}};
  if ((st = ts_dispatch(&call))) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}
