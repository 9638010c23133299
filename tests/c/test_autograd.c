/* Autograd coverage of the registry: every elementwise op of a float kind
 * records a node whose backward runs (no "has no backward formula"), and
 * non-differentiable ones (comparisons, logical) leave no history. The
 * values of the formulas are checked in tests/lua/test_autograd.lua. */
#include "test.h"
#include "autograd.h"

#include <string.h>

static ts_tensor *leaf(double v) {
  ts_tensor *t = NULL;
  int64_t n = 3;
  if (ts_full(1, &n, v, TS_FLOAT64, TS_DEVICE_CPU, &t)) return NULL;
  t->requires_grad = true;
  return t;
}

void test_autograd_registry_elementwise(void) {
  for (int op = 0; op < TS_OP_COUNT; op++) {
    ts_op_kind k = ts_ops[op].kind;
    bool unary = k == TS_KIND_UNARY || k == TS_KIND_UNARY_FLOAT;
    bool binary = k == TS_KIND_BINARY || k == TS_KIND_BINARY_FLOAT;
    bool compare = k == TS_KIND_COMPARE || k == TS_KIND_UNARY_BOOL;
    if (!unary && !binary && !compare) continue;
    ts_tensor *a = leaf(0.7), *b = leaf(1.3), *y = NULL, *s = NULL;
    ts_status st;
    int64_t ip[4] = {3, 0, 0, 0};
    double fp[4] = {0.1, 2.0, 0, 0};
    if (op == TS_OP_CLAMP || op == TS_OP_POW_SCALAR) st = ts_unary_p((ts_op)op, a, ip, fp, &y);
    else if (unary || k == TS_KIND_UNARY_BOOL) st = ts_unary((ts_op)op, a, &y);
    else st = ts_binary((ts_op)op, a, b, &y);
    char m[256];
    if (st) {
      snprintf(m, sizeof m, "%s forward: %s", ts_ops[op].name, ts_last_error());
      t_fail(__FILE__, __LINE__, m);
    } else if (compare) {
      if (y->grad_fn) {
        snprintf(m, sizeof m, "%s is not differentiable but recorded %s", ts_ops[op].name, y->grad_fn->name);
        t_fail(__FILE__, __LINE__, m);
      }
    } else if (!y->grad_fn) {
      snprintf(m, sizeof m, "%s recorded no autograd node", ts_ops[op].name);
      t_fail(__FILE__, __LINE__, m);
    } else if ((st = ts_sum(y, 0, NULL, false, &s)) || (st = ts_backward(s, NULL, false))) {
      snprintf(m, sizeof m, "%s backward: %s", ts_ops[op].name, ts_last_error());
      t_fail(__FILE__, __LINE__, m);
    } else if (!a->grad || (binary && !b->grad)) {
      snprintf(m, sizeof m, "%s backward left an input without a gradient", ts_ops[op].name);
      t_fail(__FILE__, __LINE__, m);
    }
    ts_tensor_release(s);
    ts_tensor_release(y);
    ts_tensor_release(a);
    ts_tensor_release(b);
  }
}
