/* Autograd coverage of the registry: every elementwise op of a float kind
 * records a node whose backward runs (no "has no backward formula"), and
 * non-differentiable ones (comparisons, logical) leave no history. The
 * values of the formulas are checked in tests/lua/test_autograd.lua. */
#include "test.h"
#include "autograd/autograd.h"
#include "ops/op_loss.h"

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
    if (!strncmp(ts_ops[op].name, "bitwise_", 8)) continue; /* integers and bool only: nothing to differentiate */
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

/* ---- every registry op: differentiable through a recorded op-layer call, or
 * explicitly not (creation, integer/bool results, kernels that only serve
 * other ops' forward or backward). An op in neither list fails the test, so
 * a new op forces the decision. ---- */

typedef ts_status (*diff_probe)(ts_tensor *x, ts_tensor **y); /* x: (2, 3, 4, 4) float64, requires grad */

static ts_status p_copy(ts_tensor *x, ts_tensor **y) { return ts_clone(x, y); }
static ts_status p_sum(ts_tensor *x, ts_tensor **y) { return ts_sum(x, 0, NULL, false, y); }
static ts_status p_prod(ts_tensor *x, ts_tensor **y) { return ts_prod(x, 0, NULL, false, y); }
static ts_status p_max(ts_tensor *x, ts_tensor **y) { return ts_amax(TS_OP_MAX, x, 0, NULL, false, y); }
static ts_status p_min(ts_tensor *x, ts_tensor **y) { return ts_amax(TS_OP_MIN, x, 0, NULL, false, y); }
static ts_status p_var(ts_tensor *x, ts_tensor **y) { return ts_var(x, 0, NULL, 1, false, y); }
static ts_status p_norm(ts_tensor *x, ts_tensor **y) { return ts_norm(x, 2, 0, NULL, false, y); }
static ts_status p_lse(ts_tensor *x, ts_tensor **y) { return ts_logsumexp(x, 0, NULL, false, y); }
static ts_status p_cumsum(ts_tensor *x, ts_tensor **y) { return ts_cumsum(x, 1, y); }
static ts_status p_softmax(ts_tensor *x, ts_tensor **y) { return ts_softmax(x, 1, y); }
static ts_status p_log_softmax(ts_tensor *x, ts_tensor **y) { return ts_log_softmax(x, 1, y); }
static ts_status p_bmm(ts_tensor *x, ts_tensor **y) { return ts_matmul(x, x, y); }
/* a Linear layer on x's rows (24, 4): weight (4, 4) and bias (4) taken from x too; the
 * library kernel gemm_bias computes it on CUDA, the composed copy + bmm here */
static ts_status p_addmm(ts_tensor *x, ts_tensor **y) {
  ts_tensor *r = NULL, *w = NULL, *wt = NULL, *b = NULL;
  int64_t rs[2] = {24, 4};
  ts_status st = ts_reshape(x, 2, rs, &r);
  if (!st) st = ts_narrow(r, 0, 0, 4, &w);
  if (!st) st = ts_transpose(w, 0, 1, &wt);
  if (!st) st = ts_select(r, 0, 5, &b);
  if (!st) st = ts_addmm(b, r, wt, 1, 1, y);
  ts_tensor *all[4] = {r, w, wt, b};
  for (int i = 0; i < 4; i++)
    if (all[i]) ts_tensor_release(all[i]);
  return st;
}
static ts_status p_cat(ts_tensor *x, ts_tensor **y) {
  ts_tensor *two[2] = {x, x};
  return ts_cat(2, two, 1, y);
}
static ts_status p_gather(ts_tensor *x, ts_tensor **y) {
  ts_tensor *idx = NULL;
  ts_status st = ts_full(x->ndim, x->sizes, 1, TS_INT64, TS_DEVICE_CPU, &idx);
  if (!st) st = ts_gather(x, 1, idx, y);
  ts_tensor_release(idx);
  return st;
}
static ts_status p_scatter(ts_tensor *x, ts_tensor **y) {
  ts_tensor *idx = NULL;
  ts_status st = ts_full(x->ndim, x->sizes, 0, TS_INT64, TS_DEVICE_CPU, &idx);
  if (!st) st = ts_scatter(x, 1, idx, x, true, y);
  ts_tensor_release(idx);
  return st;
}
static ts_status p_masked(ts_tensor *x, ts_tensor **y) {
  ts_tensor *mask = NULL;
  ts_status st = ts_full(x->ndim, x->sizes, 1, TS_BOOL, TS_DEVICE_CPU, &mask);
  if (!st) st = ts_masked_select(x, mask, y);
  ts_tensor_release(mask);
  return st;
}
static ts_status p_sort(ts_tensor *x, ts_tensor **y) {
  ts_tensor *idx = NULL;
  ts_status st = ts_sort(x, -1, false, y, &idx);
  ts_tensor_release(idx);
  return st;
}
static ts_status p_topk(ts_tensor *x, ts_tensor **y) {
  ts_tensor *idx = NULL;
  ts_status st = ts_topk(x, 2, -1, true, y, &idx);
  ts_tensor_release(idx);
  return st;
}
static ts_status p_where(ts_tensor *x, ts_tensor **y) {
  ts_tensor *c = NULL;
  ts_status st = ts_binary(TS_OP_GT, x, x, &c);
  if (!st) st = ts_where(c, x, x, y);
  ts_tensor_release(c);
  return st;
}
static ts_status p_lerp(ts_tensor *x, ts_tensor **y) { return ts_lerp(x, x, x, y); }
static const ts_conv2d_params conv_p = {{1, 1}, {1, 1}, {1, 1}, 3};
static ts_status p_conv(ts_tensor *x, ts_tensor **y) { /* depthwise: groups = C */
  ts_tensor *w = NULL;
  int64_t ws[4] = {3, 1, 3, 3};
  ts_status st = ts_full(4, ws, 0.5, TS_FLOAT64, TS_DEVICE_CPU, &w);
  if (!st) st = ts_conv2d(x, w, NULL, &conv_p, y);
  ts_tensor_release(w);
  return st;
}
static ts_status p_conv_dense(ts_tensor *x, ts_tensor **y) { /* im2col forward, col2im backward */
  ts_tensor *w = NULL;
  int64_t ws[4] = {2, 3, 3, 3};
  ts_conv2d_params p = conv_p;
  p.groups = 1;
  ts_status st = ts_full(4, ws, 0.5, TS_FLOAT64, TS_DEVICE_CPU, &w);
  if (!st) st = ts_conv2d(x, w, NULL, &p, y);
  ts_tensor_release(w);
  return st;
}
static const ts_pool2d_params pool_p = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true};
static ts_status p_maxpool(ts_tensor *x, ts_tensor **y) { return ts_max_pool2d(x, &pool_p, y, NULL); }
static ts_status p_avgpool(ts_tensor *x, ts_tensor **y) { return ts_avg_pool2d(x, &pool_p, y); }
static ts_status p_adaptive(ts_tensor *x, ts_tensor **y) { return ts_adaptive_avg_pool2d(x, 2, 2, y); }
static ts_status p_bn(ts_tensor *x, ts_tensor **y) {
  return ts_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5, y, NULL, NULL);
}
/* layer norm over x's last dim (4) */
static ts_status p_ln(ts_tensor *x, ts_tensor **y) {
  const int64_t shape[1] = {4};
  return ts_layer_norm(x, 1, shape, NULL, NULL, 1e-5, y, NULL, NULL);
}

/* the recurrent cells through one layer's recurrence: x (2, 3, 4, 4) as the input
 * projection (L 2, N 3, 16 features), weight_hh all 0.1 */
static ts_status p_rnn_mode(ts_rnn_mode mode, int64_t G, ts_tensor *x, ts_tensor **y) {
  const int64_t H = 16 / G, gh = G * H; /* the GRU uses 15 of the 16 features */
  int64_t s3[3] = {2, 3, 16}, ws[2] = {gh, H};
  ts_tensor *v = NULL, *xp = NULL, *w = NULL, *hn = NULL, *cn = NULL;
  ts_status st = ts_view(x, 3, s3, &v);
  if (!st) st = ts_narrow(v, 2, 0, gh, &xp);
  if (!st) st = ts_full(2, ws, 0.1, TS_FLOAT64, TS_DEVICE_CPU, &w);
  if (!st) st = ts_rnn_layer(mode, xp, false, NULL, NULL, w, NULL, NULL, false, NULL, y, &hn, &cn);
  ts_tensor_release(v), ts_tensor_release(xp), ts_tensor_release(w), ts_tensor_release(hn), ts_tensor_release(cn);
  return st;
}
static ts_status p_lstm(ts_tensor *x, ts_tensor **y) { return p_rnn_mode(TS_RNN_LSTM, 4, x, y); }
static ts_status p_gru(ts_tensor *x, ts_tensor **y) { return p_rnn_mode(TS_RNN_GRU, 3, x, y); }
static ts_status p_rnn(ts_tensor *x, ts_tensor **y) { return p_rnn_mode(TS_RNN_TANH, 1, x, y); }
/* fused attention with x (2, 3, 4, 4) as query, key and value (6 batches of 4 x 4), causal */
static ts_status p_sdpa(ts_tensor *x, ts_tensor **y) {
  int64_t s3[3] = {6, 4, 4};
  ts_tensor *v = NULL;
  ts_status st = ts_view(x, 3, s3, &v);
  if (!st) st = ts_sdpa(v, v, v, NULL, 0, true, 0.5, y);
  ts_tensor_release(v);
  return st;
}

/* issue 21's ops: the activations (beta 1, threshold 20; alpha 1; [-1, 1]), group norm
 * over 3 groups of one channel, interpolation to 5 x 7, adaptive max pooling to 3 x 3 */
static const double act_p[2] = {1, 20}, ht_p[2] = {-1, 1};
static ts_status p_softplus(ts_tensor *x, ts_tensor **y) { return ts_activation_forward(TS_ACT_SOFTPLUS, x, act_p, y); }
static ts_status p_elu(ts_tensor *x, ts_tensor **y) { return ts_activation_forward(TS_ACT_ELU, x, act_p, y); }
static ts_status p_hardtanh(ts_tensor *x, ts_tensor **y) { return ts_activation_forward(TS_ACT_HARDTANH, x, ht_p, y); }
static ts_status p_log_sigmoid(ts_tensor *x, ts_tensor **y) {
  return ts_activation_forward(TS_ACT_LOG_SIGMOID, x, NULL, y);
}
static ts_status p_mish(ts_tensor *x, ts_tensor **y) { return ts_activation_forward(TS_ACT_MISH, x, NULL, y); }
static ts_status p_gn(ts_tensor *x, ts_tensor **y) { return ts_group_norm(x, 3, NULL, NULL, 1e-5, y, NULL, NULL); }
static ts_status p_upsample(bool linear, ts_tensor *x, ts_tensor **y) {
  const ts_upsample_params p = {.linear = linear, .nd = 2, .size = {5, 7}};
  return ts_upsample(x, &p, y);
}
static ts_status p_nearest(ts_tensor *x, ts_tensor **y) { return p_upsample(false, x, y); }
static ts_status p_bilinear(ts_tensor *x, ts_tensor **y) { return p_upsample(true, x, y); }
static ts_status p_adaptive_max(ts_tensor *x, ts_tensor **y) {
  ts_tensor *idx = NULL;
  ts_status st = ts_adaptive_max_pool2d(x, 3, 3, y, &idx);
  ts_tensor_release(idx);
  return st;
}

/* cross_entropy over x (2, 3, 4, 4) as (N 2, C 3, 4 x 4), every target class 1 */
static ts_status p_nll(ts_tensor *x, ts_tensor **y) {
  ts_tensor *t = NULL;
  int64_t ts3[3] = {2, 4, 4};
  ts_status st = ts_full(3, ts3, 1, TS_INT64, TS_DEVICE_CPU, &t);
  if (!st) st = ts_nll_loss(x, t, NULL, -100, TS_REDUCTION_MEAN, 0.1, true, y);
  ts_tensor_release(t);
  return st;
}

void test_autograd_registry_all(void) {
  static const struct { const char *op; diff_probe probe; } diff[] = {
      {"copy", p_copy}, {"sum", p_sum}, {"prod", p_prod}, {"max", p_max}, {"min", p_min}, {"var", p_var},
      {"norm", p_norm}, {"logsumexp", p_lse}, {"cumsum", p_cumsum}, {"softmax", p_softmax},
      {"log_softmax", p_log_softmax}, {"bmm", p_bmm}, {"gemm_bias", p_addmm}, {"cat", p_cat}, {"gather", p_gather}, {"scatter", p_scatter},
      {"masked_select", p_masked}, {"sort", p_sort}, {"topk", p_topk}, {"where", p_where}, {"lerp", p_lerp},
      {"im2col", p_conv_dense}, {"col2im", p_conv_dense}, {"conv2d_forward", p_conv_dense}, {"conv2d_depthwise", p_conv},
      {"max_pool2d", p_maxpool}, {"avg_pool2d", p_avgpool}, {"adaptive_avg_pool2d", p_adaptive},
      {"batch_norm_stats", p_bn}, {"batch_norm_elemt", p_bn}, {"lstm_cell", p_lstm}, {"gru_cell", p_gru},
      {"rnn_cell", p_rnn}, {"sdpa_forward", p_sdpa}, {"layer_norm", p_ln},
      {"softplus", p_softplus}, {"elu", p_elu}, {"hardtanh", p_hardtanh}, {"log_sigmoid", p_log_sigmoid},
      {"mish", p_mish}, {"group_norm", p_gn}, {"upsample_nearest2d", p_nearest}, {"upsample_bilinear2d", p_bilinear},
      {"adaptive_max_pool2d", p_adaptive_max},
      {"nll_loss", p_nll}};
  /* not differentiable: creation and random fills, integer/bool results, data-dependent
   * index ops, kernels that only compute other ops' gradients, the optimizer step */
  static const char *const none[] = {
      "fill", "arange", "linspace", "rand", "randn", "randint", "randperm", "all", "any", "nonzero", "unique",
      "masked_scatter", "conv2d_depthwise_backward", "avg_pool2d_backward", "adaptive_avg_pool2d_backward",
      "batch_norm_backward_reduce", "batch_norm_backward_elemt", "max_pool2d_backward", "adam_step", "sgd_step",
      "rmsprop_step", "conv2d_backward_input", "conv2d_backward_weight", "amp_non_finite_check_and_unscale",
      "lstm_cell_backward", "gru_cell_backward", "rnn_cell_backward", "sdpa_backward", "layer_norm_backward",
      "threshold_backward", "softplus_backward", "elu_backward", "hardtanh_backward", "log_sigmoid_backward",
      "mish_backward", "group_norm_backward", "upsample_nearest2d_backward", "upsample_bilinear2d_backward",
      "nll_loss_backward", "clip_grad_norm", "check_range", "foreach_zero", "gelu_backward", "gemm_bgrad"};
  for (int op = 0; op < TS_OP_COUNT; op++) {
    ts_op_kind k = ts_ops[op].kind;
    if (k == TS_KIND_UNARY || k == TS_KIND_UNARY_FLOAT || k == TS_KIND_UNARY_BOOL || k == TS_KIND_BINARY ||
        k == TS_KIND_BINARY_FLOAT || k == TS_KIND_COMPARE)
      continue; /* test_autograd_registry_elementwise */
    const char *name = ts_ops[op].name;
    bool listed = false;
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) listed |= strcmp(none[i], name) == 0;
    char m[256];
    for (size_t i = 0; i < sizeof diff / sizeof *diff && !listed; i++) {
      if (strcmp(diff[i].op, name) != 0) continue;
      listed = true;
      ts_tensor *x = NULL, *y = NULL, *s = NULL;
      int64_t xs[4] = {2, 3, 4, 4};
      ts_status st = ts_full(4, xs, 0.3, TS_FLOAT64, TS_DEVICE_CPU, &x);
      if (!st) {
        x->requires_grad = true;
        st = diff[i].probe(x, &y);
      }
      if (!st && !y->grad_fn) st = ts_fail(TS_ERR_ARG, "no autograd node recorded");
      if (!st) st = ts_sum(y, 0, NULL, false, &s);
      if (!st) st = ts_backward(s, NULL, false);
      if (!st && !x->grad) st = ts_fail(TS_ERR_ARG, "no gradient reached the input");
      if (st) {
        snprintf(m, sizeof m, "op '%s': %s", name, ts_last_error());
        t_fail(__FILE__, __LINE__, m);
      }
      ts_tensor_release(s);
      ts_tensor_release(y);
      ts_tensor_release(x);
    }
    if (!listed) {
      snprintf(m, sizeof m, "op '%s' is neither covered by an autograd probe nor listed as not differentiable", name);
      t_fail(__FILE__, __LINE__, m);
    }
  }
}
