/* The op layer's linalg functions (included by ops.h): matrix products in
 * torch's shapes, all computed by the one batched kernel TS_OP_BMM. Each
 * returns a new tensor in *out; operands must share dtype and device. */
#ifndef TENSH_OP_LINALG_H
#define TENSH_OP_LINALG_H

#include <limits.h>

/* torch.matmul: dot, mv, mm, and batched products with broadcast batch dims;
 * a 1-D operand gets a 1 prepended (a) or appended (b) that the result drops. */
ts_status ts_matmul(ts_tensor *a, ts_tensor *b, ts_tensor **out);
ts_status ts_mm(ts_tensor *a, ts_tensor *b, ts_tensor **out);    /* (M,K) @ (K,N) -> (M,N) */
ts_status ts_bmm(ts_tensor *a, ts_tensor *b, ts_tensor **out);   /* (B,M,K) @ (B,K,N) -> (B,M,N) */
ts_status ts_mv(ts_tensor *a, ts_tensor *v, ts_tensor **out);    /* (M,K) @ (K) -> (M) */
ts_status ts_dot(ts_tensor *a, ts_tensor *b, ts_tensor **out);   /* (K) . (K) -> 0-dim */
/* beta*bias + alpha*(a @ b); bias broadcasts to (M,N); with beta 0 bias is not read. */
ts_status ts_addmm(ts_tensor *bias, ts_tensor *a, ts_tensor *b, double beta, double alpha, ts_tensor **out);
/* out = a @ b (2-D) and *sums = the sums over k of a (which 0: a's rows, length M) or of b
 * (which 1: b's columns, length N): a Linear layer's weight and bias gradients, from one
 * GEMM whose epilogue sums (cuBLASLt's BGRADB / BGRADA) where the backend has one, else
 * from the product and a sum. No autograd: for backward formulas. */
ts_status ts_mm_ksum(ts_tensor *a, ts_tensor *b, int which, ts_tensor **out, ts_tensor **sums);
ts_status ts_outer(ts_tensor *a, ts_tensor *b, ts_tensor **out); /* (M) x (N) -> (M,N), promotes dtypes */

/* torch.set_float32_matmul_precision: "highest" (0, full float32), "high" (1, TF32
 * tensor cores allowed), "medium" (2, bfloat16 passes allowed; run as TF32). Read by
 * GPU GEMM kernels; the CPU always computes in full float32. */
typedef enum ts_matmul_precision { TS_MATMUL_HIGHEST, TS_MATMUL_HIGH, TS_MATMUL_MEDIUM } ts_matmul_precision;
void ts_set_float32_matmul_precision(ts_matmul_precision p);
ts_matmul_precision ts_get_float32_matmul_precision(void);

/* Whether BLAS can read the matrix (rows, cols) with element strides (rs, cs)
 * without a copy: row-major (*trans false) or as the transpose of a row-major
 * matrix (*trans true), with leading dim *ld. Shared by the op layer (which
 * copies when this fails) and the CPU kernel, so the two always agree. */
static inline bool ts_blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans, int *ld) {
  if (rows > INT_MAX || cols > INT_MAX) return false;
  int64_t r1 = rows > 1 ? rows : 1, c1 = cols > 1 ? cols : 1;
  if ((cols == 1 || cs == 1) && (rows == 1 || (rs >= c1 && rs <= INT_MAX))) {
    *trans = false, *ld = (int)(rows == 1 ? c1 : rs);
    return true;
  }
  if ((rows == 1 || rs == 1) && (cols == 1 || (cs >= r1 && cs <= INT_MAX))) {
    *trans = true, *ld = (int)(cols == 1 ? r1 : cs);
    return true;
  }
  return false;
}

#endif
