/* CPU kernel of GradScaler's fused check and unscale (src/ops/ops_amp.def). */
#include <math.h>

#include "cpu.h"

#define UNSCALE_LOOP(T, LOAD, STORE)                                                   \
  do {                                                                                 \
    T *x = ts_data(t);                                                                 \
    _Pragma("omp parallel for schedule(static) reduction(|: bad) if (n > TS_PARALLEL_GRAIN)") \
    for (int64_t j = 0; j < n; j++) {                                                  \
      double v = LOAD(x[j]);                                                           \
      bad |= !isfinite(v);                                                             \
      x[j] = STORE(v * inv);                                                           \
    }                                                                                  \
  } while (0)

#define ID(v) (v)
#define TO_F32(v) ((float)(v))
#define TO_HALF(v) ts_float_to_half((float)(v))
#define TO_BF16(v) ts_float_to_bf16((float)(v))

static ts_status k_amp_unscale(const ts_call *c) {
  const double inv = *(const float *)ts_data(c->in[0]);
  int bad = 0;
  for (int k = 1; k < c->nin; k++) {
    ts_tensor *t = c->in[k];
    const int64_t n = ts_numel(t);
    switch (t->dtype) {
    case TS_FLOAT32: UNSCALE_LOOP(float, ID, TO_F32); break;
    case TS_FLOAT64: UNSCALE_LOOP(double, ID, ID); break;
    case TS_FLOAT16: UNSCALE_LOOP(uint16_t, ts_half_to_float, TO_HALF); break;
    case TS_BFLOAT16: UNSCALE_LOOP(uint16_t, ts_bf16_to_float, TO_BF16); break;
    default: return ts_fail(TS_ERR_DTYPE, "amp_non_finite_check_and_unscale: %s tensors", ts_dtype_name(t->dtype));
    }
  }
  if (bad) *(float *)ts_data(c->out[0]) = 1.0f;
  return TS_OK;
}

void ts_cpu_register_amp(ts_kernel *k) { k[TS_OP_AMP_UNSCALE] = k_amp_unscale; }
