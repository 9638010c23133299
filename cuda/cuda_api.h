/* The C face of the CUDA backend: what src/ may call. Status codes and plain
 * values only; no CUDA types leak out. */
#ifndef TENSH_CUDA_API_H
#define TENSH_CUDA_API_H

#ifdef __cplusplus
extern "C" {
#endif

int ts_cuda_device_count(void);    /* 0 without a GPU or driver, never an error */
int ts_cuda_runtime_version(void); /* e.g. 13000 */

#ifdef __cplusplus
}
#endif

#endif
