/* Backward formulas of the elementwise ops, and their recording. Gradients
 * come out in the compute dtype and broadcast shape; the engine sums and
 * casts them back to each input (ts_ag_reduce_to). */
#include "grad.h"

#include <math.h>
#include <string.h>

#include "grad_util.h"
#include "ops/op_nn.h"

/* ---- unary: saved[0] x (compute dtype), saved[1] the output y, as the op's
 * registry line says (GRAD in ops.def, with the node's name) ------------- */

/* The formula's operands: x and y are NULL where the op's registry line does
 * not save them (ts_op_saves), so a formula that reads one anyway fails with
 * a message naming the fix, instead of computing with NULL. */
static ts_tensor *saved_operand(ag_scope *s, ts_tensor *t, ts_op op, const char *which) {
  if (!t && !s->st)
    s->st = ts_fail(TS_ERR_UNSUPPORTED, "%s's backward reads its %s, which the GRAD column of its registry line does not save",
                    ts_ops[op].name, which);
  return t;
}
#define X saved_operand(s, x, op, "input")
#define Y saved_operand(s, y, op, "output")

static ts_tensor *unary_formula(ag_scope *s, ts_op op, const ts_node *n, ts_tensor *g, ts_tensor *x, ts_tensor *y) {
  switch (op) {
  case TS_OP_NEG: return ag_un(s, TS_OP_NEG, g);
  case TS_OP_ABS: return AG_MUL(s, g, ag_un(s, TS_OP_SIGN, X));
  case TS_OP_SIGN:
  case TS_OP_FLOOR:
  case TS_OP_CEIL:
  case TS_OP_TRUNC:
  case TS_OP_ROUND: return ag_zeros_like(s, g);
  case TS_OP_EXPM1: return AG_MUL(s, g, AG_ADD(s, Y, ag_num(s, 1)));
  case TS_OP_EXP2: return AG_MUL(s, g, AG_MUL(s, Y, ag_num(s, M_LN2)));
  case TS_OP_LOG2: return AG_DIV(s, g, AG_MUL(s, X, ag_num(s, M_LN2)));
  case TS_OP_LOG10: return AG_DIV(s, g, AG_MUL(s, X, ag_num(s, M_LN10)));
  case TS_OP_TAN: return AG_MUL(s, g, AG_ADD(s, AG_MUL(s, Y, Y), ag_num(s, 1)));
  case TS_OP_SINH: return AG_MUL(s, g, ag_un(s, TS_OP_COSH, X));
  case TS_OP_COSH: return AG_MUL(s, g, ag_un(s, TS_OP_SINH, X));
  case TS_OP_ASINH: return AG_MUL(s, g, ag_un(s, TS_OP_RSQRT, AG_ADD(s, AG_MUL(s, X, X), ag_num(s, 1))));
  case TS_OP_ACOSH: return AG_MUL(s, g, ag_un(s, TS_OP_RSQRT, AG_SUB(s, AG_MUL(s, X, X), ag_num(s, 1))));
  case TS_OP_ATANH: return AG_DIV(s, g, AG_SUB(s, ag_num(s, 1), AG_MUL(s, X, X)));
  case TS_OP_ASIN: return AG_MUL(s, g, ag_un(s, TS_OP_RSQRT, AG_SUB(s, ag_num(s, 1), AG_MUL(s, X, X))));
  case TS_OP_ACOS:
    return AG_MUL(s, g, ag_un(s, TS_OP_NEG, ag_un(s, TS_OP_RSQRT, AG_SUB(s, ag_num(s, 1), AG_MUL(s, X, X)))));
  case TS_OP_ATAN: return AG_DIV(s, g, AG_ADD(s, AG_MUL(s, X, X), ag_num(s, 1)));
  case TS_OP_ERF: /* 2/sqrt(pi) e^(-x^2) */
    return AG_MUL(s, g, AG_MUL(s, ag_un(s, TS_OP_EXP, ag_un(s, TS_OP_NEG, AG_MUL(s, X, X))), ag_num(s, M_2_SQRTPI)));
  case TS_OP_ERFINV: /* sqrt(pi)/2 e^(y^2) */
    return AG_MUL(s, g, AG_MUL(s, ag_un(s, TS_OP_EXP, AG_MUL(s, Y, Y)), ag_num(s, 0.88622692545275801365)));
  case TS_OP_SINC: { /* (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 at 0, in torch's sinc_backward's order */
    ts_tensor *px = AG_MUL(s, X, ag_num(s, M_PI)), *pxx = AG_MUL(s, AG_MUL(s, X, X), ag_num(s, M_PI));
    ts_tensor *d = AG_SUB(s, AG_MUL(s, px, ag_un(s, TS_OP_COS, px)), ag_un(s, TS_OP_SIN, px));
    return ag_where(s, ag_bin(s, TS_OP_EQ, pxx, ag_num(s, 0)), ag_num(s, 0), AG_DIV(s, AG_MUL(s, g, d), pxx));
  }
  case TS_OP_RELU:
    if (Y && !s->st && g->dtype == y->dtype && g->ndim == y->ndim &&
        !memcmp(g->sizes, y->sizes, sizeof(int64_t) * (size_t)g->ndim)) { /* one pass, no bool mask */
      ts_tensor *r = NULL;
      ts_status st = ts_threshold_backward(g, y, &r);
      return ag_keep(s, st, r);
    }
    return ag_where(s, ag_bin(s, TS_OP_LE, Y, ag_num(s, 0)), ag_num(s, 0), g); /* NaN passes g, as ATen */
  case TS_OP_EXP: return AG_MUL(s, g, Y);
  case TS_OP_LOG: return AG_DIV(s, g, X);
  case TS_OP_LOG1P: return AG_DIV(s, g, AG_ADD(s, X, ag_num(s, 1)));
  case TS_OP_SQRT: return AG_DIV(s, g, AG_MUL(s, Y, ag_num(s, 2)));
  case TS_OP_RSQRT: /* -y^3 / 2 */
    return AG_MUL(s, g, AG_MUL(s, AG_MUL(s, Y, AG_MUL(s, Y, Y)), ag_num(s, -0.5)));
  case TS_OP_SIN: return AG_MUL(s, g, ag_un(s, TS_OP_COS, X));
  case TS_OP_COS: return AG_MUL(s, g, ag_un(s, TS_OP_NEG, ag_un(s, TS_OP_SIN, X)));
  case TS_OP_TANH: return AG_MUL(s, g, AG_SUB(s, ag_num(s, 1), AG_MUL(s, Y, Y)));
  case TS_OP_SIGMOID: return AG_MUL(s, g, AG_MUL(s, Y, AG_SUB(s, ag_num(s, 1), Y)));
  case TS_OP_SILU: { /* s (1 + x (1 - s)) */
    ts_tensor *sg = ag_un(s, TS_OP_SIGMOID, X);
    return AG_MUL(s, g, AG_MUL(s, sg, AG_ADD(s, ag_num(s, 1), AG_MUL(s, X, AG_SUB(s, ag_num(s, 1), sg)))));
  }
  case TS_OP_GELU:
    if (X && !s->st && g->dtype == x->dtype && g->ndim == x->ndim &&
        !memcmp(g->sizes, x->sizes, sizeof(int64_t) * (size_t)g->ndim)) { /* one kernel, as torch's gelu_backward */
      ts_tensor *r = NULL;
      ts_status st = ts_gelu_backward(g, x, n->i[0] != 0, &r);
      return ag_keep(s, st, r);
    }
    if (n->i[0]) { /* tanh approximation, as torch's gelu_backward */
      const double beta = 0.7978845608028654, kappa = 0.044715;
      ts_tensor *x2 = AG_MUL(s, X, X);
      ts_tensor *inner = AG_MUL(s, AG_ADD(s, X, AG_MUL(s, AG_MUL(s, x2, X), ag_num(s, kappa))), ag_num(s, beta));
      ts_tensor *t = ag_un(s, TS_OP_TANH, inner);
      ts_tensor *left = AG_MUL(s, AG_ADD(s, t, ag_num(s, 1)), ag_num(s, 0.5));
      ts_tensor *right = AG_MUL(s, AG_MUL(s, AG_MUL(s, X, ag_num(s, 0.5)), AG_SUB(s, ag_num(s, 1), AG_MUL(s, t, t))),
                                AG_ADD(s, AG_MUL(s, x2, ag_num(s, 3 * kappa * beta)), ag_num(s, beta)));
      return AG_MUL(s, g, AG_ADD(s, left, right));
    } else { /* Phi(x) + x phi(x), with Phi(x) = gelu(x) / x (1/2 at 0) */
      ts_tensor *zero = ag_bin(s, TS_OP_EQ, X, ag_num(s, 0));
      ts_tensor *safe_x = ag_where(s, zero, ag_num(s, 1), X);
      ts_tensor *cdf = ag_where(s, zero, ag_num(s, 0.5), AG_DIV(s, Y, safe_x));
      ts_tensor *pdf = AG_MUL(s, ag_un(s, TS_OP_EXP, AG_MUL(s, AG_MUL(s, X, X), ag_num(s, -0.5))),
                              ag_num(s, 0.3989422804014327));
      return AG_MUL(s, g, AG_ADD(s, cdf, AG_MUL(s, X, pdf)));
    }
  case TS_OP_RECIPROCAL: return AG_MUL(s, g, ag_un(s, TS_OP_NEG, AG_MUL(s, Y, Y)));
  case TS_OP_CLAMP: { /* pass where min <= x <= max, as torch */
    ts_tensor *pass = NULL;
    if (n->i[0] & 1) pass = ag_bin(s, TS_OP_GE, X, ag_num(s, n->f[0]));
    if (n->i[0] & 2) {
      ts_tensor *hi = ag_bin(s, TS_OP_LE, X, ag_num(s, n->f[1]));
      pass = pass ? ag_bin(s, TS_OP_LOGICAL_AND, pass, hi) : hi;
    }
    return ag_where(s, pass, g, ag_num(s, 0));
  }
  case TS_OP_POW_SCALAR: {
    double p = n->f[0];
    if (p == 0) return ag_zeros_like(s, g);
    ts_tensor *xp = NULL;
    if (X && !s->st) {
      double fp[4] = {p - 1};
      ts_status st = ts_unary_p(TS_OP_POW_SCALAR, x, NULL, fp, &xp);
      xp = ag_keep(s, st, xp);
    }
    return AG_MUL(s, g, AG_MUL(s, xp, ag_num(s, p)));
  }
  default:
    if (!s->st) s->st = ts_fail(TS_ERR_UNSUPPORTED, "%s has no backward formula", ts_ops[op].name);
    return NULL;
  }
}

#undef X
#undef Y

static ts_status unary_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *x = NULL, *y = NULL;
  ts_status st = TS_OK;
  if (n->saved[0] || n->released) st = ts_ag_saved(n, 0, &x);
  if (!st && (n->saved[1] || n->released)) st = ts_ag_saved(n, 1, &y);
  if (st) return st;
  ag_scope s = {.st = TS_OK};
  ts_tensor *r = unary_formula(&s, (ts_op)n->i[5], n, g, x, y);
  grads[0] = ag_end(&s, r);
  return s.st;
}

ts_status ts_ag_unary(ts_op op, ts_tensor *x, ts_tensor *xc, ts_tensor *y, const int64_t *ip, const double *fp) {
  ts_op_kind k = ts_ops[op].kind;
  if (k == TS_KIND_UNARY_BOOL || !ts_dtype_is_float(y->dtype)) return TS_OK; /* not differentiable */
  if (!ts_ops[op].grad_fn) return ts_fail(TS_ERR_UNSUPPORTED, "%s has no backward (no GRAD in its registry line)", ts_ops[op].name);
  ts_node *n;
  /* round with decimals is torch's round.decimals, a second overload */
  const char *name = op == TS_OP_ROUND && ip && ip[0] ? "RoundBackward1" : ts_ops[op].grad_fn;
  ts_status st = ts_ag_record(name, unary_backward, 1, &x, y, &n);
  if (st) return st;
  n->i[5] = op;
  for (int j = 0; j < 4; j++) {
    if (ip) n->i[j] = ip[j];
    if (fp) n->f[j] = fp[j];
  }
  /* save only what the formula reads, as the registry line says (ts_op_saves:
   * y = x:exp(); y:add_(1) is fine for exp's formula, which reads y) */
  ts_op_saves saves = ts_ops[op].saves;
  if (saves == TS_SAVES_INPUT || saves == TS_SAVES_BOTH) ts_ag_save(n, 0, xc);
  if (saves == TS_SAVES_OUTPUT || saves == TS_SAVES_BOTH) ts_ag_save(n, 1, y);
  return TS_OK;
}

/* ---- binary: saved[0] a, saved[1] b (compute dtype), saved[2] y -------- */

static ts_status binary_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *a = NULL, *b = NULL, *y = NULL;
  ts_status st = TS_OK;
  for (int k = 0; k < 3 && !st; k++) /* only what was saved (see ts_ag_binary) */
    if (n->saved[k] || n->released) st = ts_ag_saved(n, k, k == 0 ? &a : k == 1 ? &b : &y);
  if (st) return st;
  ts_op op = (ts_op)n->i[5];
  double alpha = n->f[0];
  bool wa = ag_wants(n, 0), wb = ag_wants(n, 1);
  ag_scope s = {.st = TS_OK};
  ts_tensor *ga = NULL, *gb = NULL;
  switch (op) {
  case TS_OP_ADD:
  case TS_OP_SUB: {
    double sb = op == TS_OP_SUB ? -alpha : alpha;
    if (wa) ga = g;
    if (wb) gb = sb == 1 ? g : AG_MUL(&s, g, ag_num(&s, sb));
    break;
  }
  case TS_OP_MUL:
    if (wa) ga = AG_MUL(&s, g, b);
    if (wb) gb = AG_MUL(&s, g, a);
    break;
  case TS_OP_DIV:
    if (wa) ga = AG_DIV(&s, g, b);
    if (wb) gb = ag_un(&s, TS_OP_NEG, AG_DIV(&s, AG_MUL(&s, g, y), b)); /* -g a / b^2 = -g y / b */
    break;
  case TS_OP_POW: /* torch masks the b == 0 and a == 0 cases to 0 */
    if (wa) {
      ts_tensor *d = AG_MUL(&s, b, ag_bin(&s, TS_OP_POW, a, AG_SUB(&s, b, ag_num(&s, 1))));
      ga = AG_MUL(&s, g, ag_where(&s, ag_bin(&s, TS_OP_EQ, b, ag_num(&s, 0)), ag_num(&s, 0), d));
    }
    if (wb) {
      ts_tensor *d = AG_MUL(&s, y, ag_un(&s, TS_OP_LOG, a));
      ts_tensor *mask = ag_bin(&s, TS_OP_LOGICAL_AND, ag_bin(&s, TS_OP_EQ, a, ag_num(&s, 0)),
                               ag_bin(&s, TS_OP_GE, b, ag_num(&s, 0)));
      gb = AG_MUL(&s, g, ag_where(&s, mask, ag_num(&s, 0), d));
    }
    break;
  case TS_OP_MAXIMUM:
  case TS_OP_MINIMUM: { /* ties split the gradient in half, as torch */
    ts_op lose = op == TS_OP_MAXIMUM ? TS_OP_LT : TS_OP_GT;
    ts_tensor *half = AG_MUL(&s, g, ag_num(&s, 0.5)), *eq = ag_bin(&s, TS_OP_EQ, a, b);
    ts_tensor *split = ag_where(&s, eq, half, g);
    if (wa) ga = ag_where(&s, ag_bin(&s, lose, a, b), ag_num(&s, 0), split);
    if (wb) gb = ag_where(&s, ag_bin(&s, lose, b, a), ag_num(&s, 0), split);
    break;
  }
  case TS_OP_REMAINDER:
    if (wa) ga = g;
    if (wb) gb = ag_un(&s, TS_OP_NEG, AG_MUL(&s, g, ag_bin(&s, TS_OP_FLOOR_DIVIDE, a, b)));
    break;
  case TS_OP_FMOD: /* a - trunc(a / b) b */
    if (wa) ga = g;
    if (wb) gb = ag_un(&s, TS_OP_NEG, AG_MUL(&s, g, ag_bin(&s, TS_OP_DIV_TRUNC, a, b)));
    break;
  case TS_OP_ATAN2: { /* (b, -a) / (a^2 + b^2) */
    ts_tensor *r2 = AG_ADD(&s, AG_MUL(&s, a, a), AG_MUL(&s, b, b));
    if (wa) ga = AG_DIV(&s, AG_MUL(&s, g, b), r2);
    if (wb) gb = AG_DIV(&s, AG_MUL(&s, g, ag_un(&s, TS_OP_NEG, a)), r2);
    break;
  }
  case TS_OP_COPYSIGN: /* y / a, 0 where a is 0; b gets none (zeros), as torch */
    if (wa) {
      ts_tensor *zero = ag_bin(&s, TS_OP_EQ, a, ag_num(&s, 0));
      ga = AG_MUL(&s, g, ag_where(&s, zero, ag_num(&s, 0), AG_DIV(&s, y, a)));
    }
    if (wb) gb = ag_zeros_like(&s, g);
    break;
  case TS_OP_FLOOR_DIVIDE:
  case TS_OP_DIV_TRUNC:
    if (wa) ga = ag_zeros_like(&s, g);
    if (wb) gb = ag_zeros_like(&s, g);
    break;
  default:
    s.st = ts_fail(TS_ERR_UNSUPPORTED, "%s has no backward formula", ts_ops[op].name);
  }
  grads[0] = ag_end_keep(&s, ga);
  grads[1] = ag_end_keep(&s, gb);
  ag_end(&s, NULL);
  return s.st;
}

ts_status ts_ag_binary(ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor *ac, ts_tensor *bc, ts_tensor *y,
                       double alpha) {
  if (ts_ops[op].kind == TS_KIND_COMPARE || !ts_dtype_is_float(y->dtype)) return TS_OK;
  if (!ts_ops[op].grad_fn) return ts_fail(TS_ERR_UNSUPPORTED, "%s has no backward (no GRAD in its registry line)", ts_ops[op].name);
  ts_tensor *ab[2] = {a, b};
  ts_node *n;
  ts_status st = ts_ag_record(ts_ops[op].grad_fn, binary_backward, 2, ab, y, &n);
  if (st) return st;
  n->i[5] = op;
  n->f[0] = alpha;
  /* save only what the formulas below will read (ts_op_saves in ops/ops.h says why) */
  bool ga_w = a->requires_grad, gb_w = b->requires_grad;
  bool both = op == TS_OP_POW || op == TS_OP_MAXIMUM || op == TS_OP_MINIMUM || op == TS_OP_REMAINDER ||
              op == TS_OP_FMOD || op == TS_OP_ATAN2;
  bool copysign_a = op == TS_OP_COPYSIGN && ga_w;
  if (both || (op == TS_OP_MUL && gb_w) || copysign_a) ts_ag_save(n, 0, ac);
  if (both || op == TS_OP_DIV || (op == TS_OP_MUL && ga_w)) ts_ag_save(n, 1, bc);
  if (((op == TS_OP_DIV || op == TS_OP_POW) && gb_w) || copysign_a) ts_ag_save(n, 2, y);
  return TS_OK;
}

/* ---- where, lerp -------------------------------------------------------- */

static ts_status where_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *c = NULL;
  ts_status st = ts_ag_saved(n, 0, &c);
  if (st) return st;
  ag_scope s = {.st = TS_OK};
  ts_tensor *ga = ag_wants(n, 1) ? ag_where(&s, c, g, ag_num(&s, 0)) : NULL;
  ts_tensor *gb = ag_wants(n, 2) ? ag_where(&s, c, ag_num(&s, 0), g) : NULL;
  grads[1] = ag_end_keep(&s, ga);
  grads[2] = ag_end_keep(&s, gb);
  ag_end(&s, NULL);
  return s.st;
}

ts_status ts_ag_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b, ts_tensor *y) {
  if (!ts_dtype_is_float(y->dtype)) return TS_OK;
  ts_tensor *in[3] = {cond, a, b};
  ts_node *n;
  ts_status st = ts_ag_record("WhereBackward0", where_backward, 3, in, y, &n);
  if (!st) ts_ag_save(n, 0, cond);
  return st;
}

static ts_status lerp_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *a = NULL, *b = NULL, *w = NULL;
  ts_status st = ts_ag_saved(n, 0, &a);
  if (!st) st = ts_ag_saved(n, 1, &b);
  if (!st) st = ts_ag_saved(n, 2, &w);
  if (st) return st;
  ag_scope s = {.st = TS_OK};
  ts_tensor *ga = ag_wants(n, 0) ? AG_MUL(&s, g, AG_SUB(&s, ag_num(&s, 1), w)) : NULL;
  ts_tensor *gb = ag_wants(n, 1) ? AG_MUL(&s, g, w) : NULL;
  ts_tensor *gw = ag_wants(n, 2) ? AG_MUL(&s, g, AG_SUB(&s, b, a)) : NULL;
  grads[0] = ag_end_keep(&s, ga);
  grads[1] = ag_end_keep(&s, gb);
  grads[2] = ag_end_keep(&s, gw);
  ag_end(&s, NULL);
  return s.st;
}

ts_status ts_ag_lerp(ts_tensor *a, ts_tensor *b, ts_tensor *w, ts_tensor *y) {
  ts_tensor *in[3] = {a, b, w};
  ts_node *n;
  ts_status st = ts_ag_record("LerpBackward1", lerp_backward, 3, in, y, &n);
  if (st) return st;
  for (int k = 0; k < 3; k++) ts_ag_save(n, k, in[k]);
  return TS_OK;
}

/* ---- clamp with tensor bounds: saved x, lo, hi (NULL when absent); i[0]
 * bit 1: lo given, bit 2: hi given; edges x, then lo, then hi ---------------- */

static ts_status clamp_tensor_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *x = NULL, *lo = NULL, *hi = NULL;
  bool has_lo = n->i[0] & 1, has_hi = n->i[0] & 2;
  ts_status st = ts_ag_saved(n, 0, &x);
  if (!st && has_lo) st = ts_ag_saved(n, 1, &lo);
  if (!st && has_hi) st = ts_ag_saved(n, 2, &hi);
  if (st) return st;
  int k_lo = 1, k_hi = has_lo ? 2 : 1;
  ag_scope s = {.st = TS_OK};
  ts_tensor *zero = ag_num(&s, 0), *gx = NULL, *glo = NULL, *ghi = NULL;
  if (ag_wants(n, 0)) { /* x passes where lo <= x <= hi */
    ts_tensor *in_lo = lo ? ag_bin(&s, TS_OP_GE, x, lo) : NULL, *in_hi = hi ? ag_bin(&s, TS_OP_LE, x, hi) : NULL;
    ts_tensor *pass = in_lo && in_hi ? ag_bin(&s, TS_OP_LOGICAL_AND, in_lo, in_hi) : in_lo ? in_lo : in_hi;
    gx = ag_where(&s, pass, g, zero);
  }
  if (has_lo && ag_wants(n, k_lo)) { /* lo where x < lo, unless hi is below lo (then hi wins) */
    ts_tensor *pick = ag_bin(&s, TS_OP_LT, x, lo);
    if (hi) pick = ag_bin(&s, TS_OP_LOGICAL_AND, pick, ag_bin(&s, TS_OP_LT, lo, hi));
    glo = ag_where(&s, pick, g, zero);
  }
  if (has_hi && ag_wants(n, k_hi)) { /* hi where x > hi, or everywhere hi is below lo */
    ts_tensor *pick = ag_bin(&s, TS_OP_GT, x, hi);
    if (lo) pick = ag_bin(&s, TS_OP_LOGICAL_OR, pick, ag_bin(&s, TS_OP_LT, hi, lo));
    ghi = ag_where(&s, pick, g, zero);
  }
  grads[0] = ag_end_keep(&s, gx);
  if (has_lo) grads[k_lo] = ag_end_keep(&s, glo);
  if (has_hi) grads[k_hi] = ag_end_keep(&s, ghi);
  ag_end(&s, NULL);
  return s.st;
}

ts_status ts_ag_clamp_tensor(ts_tensor *x, ts_tensor *lo, ts_tensor *hi, ts_tensor *y) {
  if (!ts_dtype_is_float(y->dtype)) return TS_OK;
  ts_tensor *in[3] = {x};
  int n = 1;
  if (lo) in[n++] = lo;
  if (hi) in[n++] = hi;
  ts_node *node;
  ts_status st = ts_ag_record("ClampBackward0", clamp_tensor_backward, n, in, y, &node);
  if (st) return st;
  node->i[0] = (lo ? 1 : 0) | (hi ? 2 : 0);
  ts_ag_save(node, 0, x);
  if (lo) ts_ag_save(node, 1, lo);
  if (hi) ts_ag_save(node, 2, hi);
  return TS_OK;
}

/* ---- identity-like: casts, clone, contiguous ----------------------------- */

static ts_status identity_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  (void)n;
  ts_tensor_retain(g);
  grads[0] = g; /* the engine casts it back to the input's dtype */
  return TS_OK;
}

ts_status ts_ag_identity(const char *name, ts_tensor *x, ts_tensor *y) {
  if (!ts_dtype_is_float(y->dtype) || !ts_dtype_is_float(x->dtype)) return TS_OK;
  return ts_ag_record(name, identity_backward, 1, &x, y, NULL);
}
