/* The op layer of fused scaled dot-product attention (included by ops.h):
 * softmax(q k^T * scale + mask) v in one op per backend, which never holds the
 * (L, S) score matrix of a whole batch: blocks of queries meet blocks of keys
 * under an online softmax; the backward recomputes the blocks from the saved
 * log-sum-exp of each query's scores (flash attention's scheme). */
#ifndef TENSH_OP_ATTENTION_H
#define TENSH_OP_ATTENTION_H

#include "core/philox.h"

/* q (B, L, E), k (B, S, E), v (B, S, Ev), or 4-D (B, H, L, E) ...: any strides (read in
 * place when the last dim's stride is 1), float32 or float64 (one dtype, one device);
 * mask NULL or additive, of q's dtype, broadcastable to (B, L, S) / (B, H, L, S) (its
 * gradient is not computed: a constant); dropout_p in [0, 1) drawn from the global
 * generator; causal: query i sees keys j <= i; scale multiplies q k^T. Out o (B, L, Ev) /
 * (B, H, L, Ev), laid out in memory as (B, L, H, Ev) when q's heads are closer than its
 * rows (q from a projection's (B, L, H, E) features), so o:transpose(1, 2) is contiguous.
 * Recorded for autograd as one node. */
ts_status ts_sdpa(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask, double dropout_p, bool causal,
                  double scale, ts_tensor **out);

/* Dropout of score (b, i, j), the same on every backend: each query row owns
 * ceil(S/4) Philox counters from the op's offset, four uniforms per counter;
 * the score is kept when its uniform is >= p. */
static inline TS_HD int64_t ts_sdpa_row_counters(int64_t S) { return (S + 3) / 4; }
static inline TS_HD bool ts_sdpa_keep(uint64_t seed, uint64_t offset, int64_t row, int64_t S, int64_t j, float p) {
  ts_u32x4 r = ts_philox(seed, offset + (uint64_t)(row * ts_sdpa_row_counters(S) + j / 4));
  return ts_uniform_f32(r.v[j & 3]) >= p;
}

#endif
