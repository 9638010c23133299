// CUDA device queries: the first piece of the CUDA backend (see the CUDA
// issue for the rest). An extern "C" API of plain values and status codes;
// no Lua here (STYLE.md, rule 3). On a machine with no GPU or no driver every
// query answers "no devices" and tensh runs as a CPU build.
#include <cuda_runtime.h>

#include "cuda_api.h"

extern "C" int ts_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

extern "C" int ts_cuda_runtime_version(void) {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return v;
}
