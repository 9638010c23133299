/* The table of device backends and device resolution (backend.h). */
#include "backend.h"

ts_backend *ts_backends[TS_DEVICE_TYPE_COUNT];

/* Every backend this build has, registered here rather than by a binding. */
static void (*const starters[TS_DEVICE_TYPE_COUNT])(void) = {
    [TS_CPU] = ts_cpu_backend_init,
#ifdef TS_HAVE_CUDA
    [TS_CUDA] = ts_cuda_backend_init,
#endif
};
static bool started[TS_DEVICE_TYPE_COUNT];

ts_backend *ts_backend_get(ts_device_type t) {
  if ((unsigned)t >= TS_DEVICE_TYPE_COUNT) return NULL;
  if (!ts_backends[t] && !started[t] && starters[t]) {
    started[t] = true; /* once, whatever it finds */
    starters[t]();
  }
  return ts_backends[t];
}

ts_status ts_device_resolve(ts_device *d) {
  if (d->type == TS_CPU) return d->index = -1, TS_OK;
  ts_backend *be = ts_backend_get((ts_device_type)d->type);
  if (!be || be->device_count <= 0)
    return ts_fail(TS_ERR_DEVICE, "CUDA is not available (no GPU, driver or CUDA build: cuda.is_available() is "
                   "false); use \"cpu\"");
  if (d->index < 0) d->index = (int8_t)be->current_device();
  if (d->index >= be->device_count)
    return ts_fail(TS_ERR_DEVICE, "invalid device ordinal cuda:%d: this machine has %d CUDA device%s (cuda:0 to cuda:%d)",
                   d->index, be->device_count, be->device_count == 1 ? "" : "s", be->device_count - 1);
  return TS_OK;
}
