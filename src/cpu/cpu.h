/* CPU backend internals: kernel registration per op family, and typed
 * element access shared by the kernel files. */
#ifndef TENSH_CPU_H
#define TENSH_CPU_H

#include "core/half.h"
#include "ops/ops.h"
#include "iter.h"

/* Each family file fills its slots of the CPU kernel table. */
void ts_cpu_register_elementwise(ts_kernel *k);
void ts_cpu_register_copy(ts_kernel *k);
void ts_cpu_register_random(ts_kernel *k);
void ts_cpu_register_reduce(ts_kernel *k);
void ts_cpu_register_linalg(ts_kernel *k);
/* BMM with i[0] a reuse token (gemm_reused.c): false when it does not apply */
bool ts_cpu_gemm_reused_b(const ts_tensor *A, const ts_tensor *B, ts_tensor *O, double alpha, double beta,
                          int64_t token);
void ts_cpu_register_index(ts_kernel *k);
void ts_cpu_register_optim(ts_kernel *k);
void ts_cpu_register_amp(ts_kernel *k);
void ts_cpu_register_nn(ts_kernel *k);
void ts_cpu_register_rnn(ts_kernel *k);
void ts_cpu_register_attention(ts_kernel *k);
void ts_cpu_register_loss(ts_kernel *k);
void ts_cpu_register_dnnl(ts_kernel *k); /* none without oneDNN */

/* softmax (log_softmax when logsm) of one contiguous float32 row of R
 * elements; y may be x (softmax_row.c) */
void ts_cpu_softmax_row_f32(const float *x, float *y, int64_t R, bool logsm);

/* Parameters handed to loops through the iterator's ctx. err is set (never
 * cleared) by a loop that meets an input it cannot compute, such as integer
 * division by zero. */
typedef struct ts_loop_ctx {
  double f[4];
  int64_t i[4];
  volatile int err;
} ts_loop_ctx;

/* The loop bodies of the kernel files are instantiated once per dtype
 * through these storage/compute pairs. */
#define TS_LD_SAME(p, S) (*(const S *)(p))
#define TS_ST_SAME(p, S, v) (*(S *)(p) = (S)(v))
#define TS_LD_F16(p, S) ts_half_to_float(*(const uint16_t *)(p))
#define TS_ST_F16(p, S, v) (*(uint16_t *)(p) = ts_float_to_half((float)(v)))
#define TS_LD_BF16(p, S) ts_bf16_to_float(*(const uint16_t *)(p))
#define TS_ST_BF16(p, S, v) (*(uint16_t *)(p) = ts_float_to_bf16((float)(v)))

#endif
