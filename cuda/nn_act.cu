// CUDA kernels of the activations with kernels of their own (contracts in
// src/ops/ops_nn.def; the CPU reference is src/cpu/nn_act.c): softplus, elu,
// hardtanh, log_sigmoid, mish and their backward passes, as functors over
// loops.cuh's elementwise machinery (any strides, float32 or float64).
#include <math.h>

#include "loops.cuh"

namespace {

// The formulas of src/cpu/nn_act.c, in T. p0, p1: the call's f[0], f[1].
struct f_softplus { // beta p0, threshold p1
  template <typename T> __device__ T operator()(T x, T p0, T p1) const {
    return x * p0 > p1 ? x : log1p(exp(x * p0)) / p0;
  }
};
struct f_softplus_bw {
  template <typename T> __device__ T operator()(T g, T x, T p0, T p1) const {
    if (x * p0 > p1) return g;
    const T z = exp(x * p0);
    return g * z / (z + (T)1);
  }
};
struct f_elu { // alpha p0
  template <typename T> __device__ T operator()(T x, T p0, T) const { return x <= (T)0 ? expm1(x) * p0 : x; }
};
struct f_elu_bw {
  template <typename T> __device__ T operator()(T g, T x, T p0, T) const { return x <= (T)0 ? g * p0 * exp(x) : g; }
};
struct f_hardtanh { // min_val p0, max_val p1; NaN passes through
  template <typename T> __device__ T operator()(T x, T p0, T p1) const { return x != x ? x : fmin(fmax(x, p0), p1); }
};
struct f_hardtanh_bw {
  template <typename T> __device__ T operator()(T g, T x, T p0, T p1) const {
    return x <= p0 || x >= p1 ? (T)0 : g;
  }
};
struct f_log_sigmoid {
  template <typename T> __device__ T operator()(T x, T, T) const { return fmin(x, (T)0) - log1p(exp(-fabs(x))); }
};
struct f_log_sigmoid_bw {
  template <typename T> __device__ T operator()(T g, T x, T, T) const {
    const T z = exp(-fabs(x));
    return g * ((x < (T)0 ? (T)1 : (T)0) - (x < (T)0 ? (T)1 : (T)-1) * (z / ((T)1 + z)));
  }
};
struct f_mish {
  template <typename T> __device__ T operator()(T x, T, T) const { return x * tanh(log1p(exp(x))); }
};
struct f_mish_bw {
  template <typename T> __device__ T operator()(T g, T x, T, T) const {
    const T t = tanh(log1p(exp(x))), s = (T)1 / ((T)1 + exp(-x));
    return g * (t + x * s * ((T)1 - t * t));
  }
};

struct f_gelu_bw { // p0 1: the tanh approximation (PyTorch's GeluKernel formulas, as the CPU's)
  template <typename T> __device__ T operator()(T g, T x, T p0, T) const {
    if (p0 != (T)0) {
      const T beta = (T)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = (T)0.044715;
      const T x2 = x * x, t = tanh(beta * (x + kappa * x2 * x));
      return g * ((T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * beta * ((T)1 + (T)3 * kappa * x2));
    }
    const T cdf = (T)0.5 * ((T)1 + erf(x * (T)M_SQRT1_2));
    const T pdf = exp((T)-0.5 * x * x) * (T)(M_2_SQRTPI * M_SQRT1_2 * 0.5);
    return g * (cdf + x * pdf);
  }
};

// Binds the parameters: forward (x) and backward (g, x) forms of a formula.
template <typename T, typename F> struct with_params1 {
  F f;
  T p0, p1;
  __device__ T operator()(T x) const { return f(x, p0, p1); }
};
template <typename T, typename F> struct with_params2 {
  F f;
  T p0, p1;
  __device__ T operator()(T g, T x) const { return f(g, x, p0, p1); }
};

// forward formulas take (x, p0, p1), backward ones (g, x, p0, p1)
template <typename F> ts_status forward(const ts_call *c) {
  if (c->out[0]->dtype == TS_FLOAT32)
    return tsc_elementwise<float, float>(ts_ops[c->op].name, c->out[0], c->in,
                                         with_params1<float, F>{F{}, (float)c->f[0], (float)c->f[1]});
  return tsc_elementwise<double, double>(ts_ops[c->op].name, c->out[0], c->in,
                                         with_params1<double, F>{F{}, c->f[0], c->f[1]});
}
template <typename F> ts_status backward(const ts_call *c) {
  if (c->out[0]->dtype == TS_FLOAT32)
    return tsc_elementwise<float, float, float>(ts_ops[c->op].name, c->out[0], c->in,
                                                with_params2<float, F>{F{}, (float)c->f[0], (float)c->f[1]});
  return tsc_elementwise<double, double, double>(ts_ops[c->op].name, c->out[0], c->in,
                                                 with_params2<double, F>{F{}, c->f[0], c->f[1]});
}

} // namespace

void tsc_register_nn_act(ts_kernel *k) {
  k[TS_OP_SOFTPLUS] = forward<f_softplus>;
  k[TS_OP_SOFTPLUS_BACKWARD] = backward<f_softplus_bw>;
  k[TS_OP_ELU] = forward<f_elu>;
  k[TS_OP_ELU_BACKWARD] = backward<f_elu_bw>;
  k[TS_OP_HARDTANH] = forward<f_hardtanh>;
  k[TS_OP_HARDTANH_BACKWARD] = backward<f_hardtanh_bw>;
  k[TS_OP_LOG_SIGMOID] = forward<f_log_sigmoid>;
  k[TS_OP_LOG_SIGMOID_BACKWARD] = backward<f_log_sigmoid_bw>;
  k[TS_OP_MISH] = forward<f_mish>;
  k[TS_OP_MISH_BACKWARD] = backward<f_mish_bw>;
  k[TS_OP_GELU_BACKWARD] = backward<f_gelu_bw>;
}
