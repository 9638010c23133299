// CUDA kernels of the index family (being written; see the CUDA issue).
#include "common.cuh"

extern "C" void tsc_register_index(ts_kernel *k) { (void)k; }
