/* CPU optimizer kernels: the fused Adam/AdamW step over all the parameters
 * of a group (see ops_optim.def). Computes in double per element and stores
 * in the parameter's dtype, in the order PyTorch's single-tensor Adam uses. */
#include <math.h>
#include <string.h>

#include "cpu.h"

#define ADAM_LOOP(T)                                                                                  \
  do {                                                                                                \
    T *p = ts_data(t[0]), *m = ts_data(t[2]), *v = ts_data(t[3]), *vm = per > 4 ? ts_data(t[4]) : NULL; \
    const T *g = ts_data(t[1]);                                                                       \
    _Pragma("omp parallel for schedule(static) if (n > TS_PARALLEL_GRAIN)")                           \
    for (int64_t j = 0; j < n; j++) {                                                                 \
      double gj = maximize ? -(double)g[j] : (double)g[j], pj = p[j];                                 \
      if (wd != 0) {                                                                                  \
        if (decoupled) pj *= 1 - lr * wd;                                                             \
        else gj += wd * pj;                                                                           \
      }                                                                                               \
      double mj = (double)m[j] * b1 + (1 - b1) * gj, vj = (double)v[j] * b2 + (1 - b2) * gj * gj;    \
      m[j] = (T)mj, v[j] = (T)vj;                                                                     \
      double vv = vj;                                                                                 \
      if (vm) {                                                                                       \
        vv = (double)vm[j] > vj ? (double)vm[j] : vj;                                                 \
        vm[j] = (T)vv;                                                                                \
      }                                                                                               \
      p[j] = (T)(pj - step_size * mj / (sqrt(vv) / bc2_sqrt + eps));                                  \
    }                                                                                                 \
  } while (0)

static ts_status k_adam_step(const ts_call *c) {
  double lr = c->f[0], b1 = c->f[1], b2 = c->f[2], eps = c->f[3], wd;
  memcpy(&wd, &c->i[3], sizeof wd);
  bool amsgrad = c->i[0] & 1, maximize = c->i[0] & 2, decoupled = c->i[0] & 4;
  (void)amsgrad;
  int per = (int)c->i[1];
  double step = (double)c->i[2];
  double step_size = lr / (1 - pow(b1, step)), bc2_sqrt = sqrt(1 - pow(b2, step));
  for (int k = 0; k + per <= c->nin; k += per) {
    ts_tensor *const *t = c->in + k;
    int64_t n = ts_numel(t[0]);
    if (t[0]->dtype == TS_FLOAT32) ADAM_LOOP(float);
    else ADAM_LOOP(double);
    t[0]->storage->version++;
  }
  return TS_OK;
}

void ts_cpu_register_optim(ts_kernel *k) { k[TS_OP_ADAM_STEP] = k_adam_step; }
