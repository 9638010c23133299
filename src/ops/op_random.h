/* Random draws beyond the registry's plain ones (ops.h has rand, randn,
 * randint, randperm). Kept out of ops.h, which every CUDA file includes. */
#ifndef TENSH_OP_RANDOM_H
#define TENSH_OP_RANDOM_H

#include "ops/ops.h"

/* RAND's i[2]: 0 draws uniforms in [f[0], f[1]); TS_RAND_KEEP stores f[1]
 * where the uniform in [0, 1), in the output's dtype, is >= f[0], else 0 */
enum { TS_RAND_UNIFORM = 0, TS_RAND_KEEP = 1 };

/* dropout's keep factors in one kernel: a tensor like x, 1 / (1 - p) where
 * the element's draw u >= p, else 0; the bits of
 * rand_like(x):ge(p):to(x.dtype):mul_(1 / (1 - p)) from the same state */
ts_status ts_dropout_mask(const ts_tensor *x, double p, ts_tensor **out);

#endif
