// The CUDA runtime side of the backend: device queries, the current stream,
// and launch checks. No Lua here (STYLE.md, rule 3). On a machine
// with no GPU or no driver every query answers "no devices" and tensh runs as
// a CPU build.
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
extern "C" {
#include "core/activity.h"
}

extern "C" int ts_cuda_device_count(void) {
  static int cached = -1;
  if (cached >= 0) return cached;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky "no driver" error
    n = 0;
  }
  return cached = n;
}

extern "C" int ts_cuda_runtime_version(void) {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return v;
}

static bool launch_blocking(void) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("CUDA_LAUNCH_BLOCKING");
    v = e && e[0] == '1';
  }
  return v;
}

ts_status tsc_cuda_error(cudaError_t e, const char *what) {
  cudaGetLastError(); // clear a non-sticky error so the session goes on
  if (ts_status r = tsc_take_reported(e)) return r; // its message is set: a device assert, the sync debug mode
  return ts_fail(TS_ERR_BACKEND, "CUDA error in %s: %s (%s)%s", what, cudaGetErrorString(e), cudaGetErrorName(e),
                 launch_blocking() ? "" : "; kernels run asynchronously, so the error may come from an earlier op: "
                                          "rerun with CUDA_LAUNCH_BLOCKING=1 to find it");
}

ts_status tsc_after_launch(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess && launch_blocking()) { // the setting's wait, not the program's: not counted (activity.h)
    ts_activity_quiet(1);
    e = cudaStreamSynchronize(tsc_stream());
    ts_activity_quiet(-1);
  }
  return e == cudaSuccess ? TS_OK : tsc_cuda_error(e, what);
}

int tsc_sm_count(void) {
  static int counts[64];
  int d = ts_cuda_current_device();
  if (d < 0 || d >= 64) return 1;
  if (!counts[d] && cudaDeviceGetAttribute(&counts[d], cudaDevAttrMultiProcessorCount, d) != cudaSuccess) counts[d] = 1;
  return counts[d];
}
