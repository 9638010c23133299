// CUDA kernels of the random family (being written; see the CUDA issue).
#include "common.cuh"

extern "C" void tsc_register_random(ts_kernel *k) { (void)k; }
