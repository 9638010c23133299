// CUDA kernel of GradScaler's fused check and unscale (contract in
// src/ops/ops_amp.def; the CPU reference is src/cpu/amp.c). One launch per
// tensor on the current stream, reading inv_scale from and writing found_inf
// to device memory: no host synchronisation anywhere (the scaler reads
// found_inf once per step).
#include <math.h>

#include "common.cuh"

template <typename T>
__global__ void unscale_kernel(T *x, int64_t n, const float *inv_scale, float *found_inf) {
  const float inv = *inv_scale;
  bool bad = false;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
    const float v = tsc_conv<float>::from(x[j]);
    bad |= !isfinite(v);
    x[j] = tsc_conv<T>::from(v * inv);
  }
  if (bad) atomicExch(found_inf, 1.0f); // many threads may: plain stores would race
}

template <>
__global__ void unscale_kernel<double>(double *x, int64_t n, const float *inv_scale, float *found_inf) {
  const double inv = *inv_scale;
  bool bad = false;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
    bad |= !isfinite(x[j]);
    x[j] *= inv;
  }
  if (bad) atomicExch(found_inf, 1.0f);
}

template <typename T> static ts_status launch(ts_tensor *t, const float *inv, float *found) {
  const int64_t n = ts_numel(t);
  int64_t blocks = (n + TSC_THREADS - 1) / TSC_THREADS, cap = (int64_t)tsc_sm_count() * 4;
  if (blocks > cap) blocks = cap;
  unscale_kernel<T><<<(unsigned)blocks, TSC_THREADS, 0, tsc_stream()>>>((T *)ts_data(t), n, inv, found);
  return tsc_after_launch("amp_non_finite_check_and_unscale");
}

static ts_status k_amp_unscale(const ts_call *c) {
  const float *inv = (const float *)ts_data(c->in[0]);
  float *found = (float *)ts_data(c->out[0]);
  for (int k = 1; k < c->nin; k++) {
    ts_tensor *t = c->in[k];
    ts_status st;
    switch (t->dtype) {
    case TS_FLOAT32: st = launch<float>(t, inv, found); break;
    case TS_FLOAT64: st = launch<double>(t, inv, found); break;
    case TS_FLOAT16: st = launch<__half>(t, inv, found); break;
    case TS_BFLOAT16: st = launch<__nv_bfloat16>(t, inv, found); break;
    default: st = ts_fail(TS_ERR_DTYPE, "amp_non_finite_check_and_unscale: %s tensors", ts_dtype_name(t->dtype));
    }
    if (st) return st;
  }
  return TS_OK;
}

extern "C" void tsc_register_amp(ts_kernel *k) { k[TS_OP_AMP_UNSCALE] = k_amp_unscale; }
