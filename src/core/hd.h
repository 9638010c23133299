/* TS_HD: a function both compilers build, for the host (C, the CPU backend)
 * and for CUDA kernels (nvcc, and the simulated device's C++), so maths both
 * backends share is written once (philox.h, int_maths.h, dtype_store.h). */
#ifndef TENSH_HD_H
#define TENSH_HD_H

#ifdef __CUDACC__
#define TS_HD __host__ __device__
#else
#define TS_HD
#endif

#endif
