/* The op layer for the activations with kernels of their own (contracts in
 * op_nn.h): softplus, elu, hardtanh, log_sigmoid and mish, each one kernel
 * forward and one backward (ops_nn.def) over x with any strides, and GELU's
 * backward (its forward is a unary op). float16 and
 * bfloat16 are computed in float32 and rounded once at the end, as PyTorch's
 * opmath does. The backward reads x (not the result), as PyTorch's does. */
#include "op_nn_common.h"

static const struct {
  const char *name;
  ts_op fwd, bwd;
} acts[] = {
    [TS_ACT_SOFTPLUS] = {"softplus", TS_OP_SOFTPLUS, TS_OP_SOFTPLUS_BACKWARD},
    [TS_ACT_ELU] = {"elu", TS_OP_ELU, TS_OP_ELU_BACKWARD},
    [TS_ACT_HARDTANH] = {"hardtanh", TS_OP_HARDTANH, TS_OP_HARDTANH_BACKWARD},
    [TS_ACT_LOG_SIGMOID] = {"log_sigmoid", TS_OP_LOG_SIGMOID, TS_OP_LOG_SIGMOID_BACKWARD},
    [TS_ACT_MISH] = {"mish", TS_OP_MISH, TS_OP_MISH_BACKWARD},
};

static ts_status check_act(ts_activation a) {
  if ((unsigned)a > TS_ACT_MISH) return ts_fail(TS_ERR_ARG, "unknown activation %d", (int)a);
  return TS_OK;
}

/* One kernel over n inputs of x's shape (the first n of in, any strides), written to a new
 * contiguous tensor in the compute dtype, then cast to dt. */
static ts_status run_act(ts_op op, int n, ts_tensor **in, const double *p, ts_dtype dt, ts_tensor **out) {
  ts_status st;
  tmps k = {.n = 0};
  ts_tensor **r = tmp(&k);
  const ts_tensor *x = in[n - 1];
  TRY(ts_tensor_empty(x->ndim, x->sizes, in[0]->dtype, x->device, r));
  if (ts_numel(x) > 0) {
    ts_call c = {.op = op, .nin = n, .in = in, .out = {*r}, .f = {p ? p[0] : 0, p ? p[1] : 0}};
    TRY(ts_dispatch(&c));
  }
  TRY(ts_to_dtype(*r, dt, out));
done:
  tmps_free(&k);
  return st;
}

static ts_status act_impl(ts_activation a, ts_tensor *x, const double *p, ts_tensor **out) {
  ts_status st = check_float(acts[a].name, "input", x);
  if (st) return st;
  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k);
  TRY(to_compute(x, xc));
  TRY(run_act(acts[a].fwd, 1, xc, p, x->dtype, out));
done:
  tmps_free(&k);
  return st;
}

/* the backward kernel bwd over go and x, checked and computed in the compute dtype */
static ts_status backward_impl(const char *name, ts_op bwd, ts_tensor *go, ts_tensor *x, const double p[2],
                               ts_tensor **gx) {
  char fn[64];
  snprintf(fn, sizeof fn, "%s_backward", name);
  ts_status st;
  if ((st = check_float(fn, "input", x)) || (st = check_float(fn, "grad_output", go))) return st;
  if (go->ndim != x->ndim || memcmp(go->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim))
    return ts_fail(TS_ERR_SHAPE, "%s: grad_output has shape %s but the input has shape %s", fn, shape_of(go).s,
                   shape_of(x).s);
  ts_tensor *both[2] = {go, x};
  if ((st = ts_check_same_device(fn, 2, both))) return st;
  const ts_dtype cd = compute_dtype(x->dtype);
  tmps k = {.n = 0};
  ts_tensor **gc = tmp(&k), **xc = tmp(&k);
  TRY(ts_to_dtype(go, cd, gc));
  TRY(ts_to_dtype(x, cd, xc));
  {
    ts_tensor *in[2] = {*gc, *xc};
    TRY(run_act(bwd, 2, in, p, x->dtype, gx));
  }
done:
  tmps_free(&k);
  return st;
}

ts_status ts_activation_backward(ts_activation a, ts_tensor *go, ts_tensor *x, const double p[2], ts_tensor **gx) {
  ts_status st = check_act(a);
  return st ? st : backward_impl(acts[a].name, acts[a].bwd, go, x, p, gx);
}

ts_status ts_gelu_backward(ts_tensor *go, ts_tensor *x, bool tanh_approximation, ts_tensor **gx) {
  const double p[2] = {tanh_approximation ? 1 : 0, 0};
  return backward_impl("gelu", TS_OP_GELU_BACKWARD, go, x, p, gx);
}

/* ---- autograd: one node that calls the backward above (grad_nn.c) ---- */

ts_status ts_activation_forward(ts_activation a, ts_tensor *x, const double p[2], ts_tensor **out) {
  ts_status st = check_act(a);
  if (st) return st;
  TS_AG_OFF(prev);
  st = act_impl(a, x, p, out);
  TS_AG_RESTORE(prev);
  if (!st && ts_ag_needed(1, &x)) st = ts_ag_activation(a, x, p, *out);
  return st;
}
