/* The op layer of mixed precision (GradScaler's fused check). */
#ifndef TENSH_OP_AMP_H
#define TENSH_OP_AMP_H

#include "ops.h"

/* torch._amp_foreach_non_finite_check_and_unscale_: every tensor of ts[0..n)
 * (floating, on found_inf's device) is multiplied by inv_scale in place, and
 * found_inf (one float32 element) becomes 1 if any held an inf or NaN. One
 * kernel call per device, no host synchronisation: the caller reads
 * found_inf once. */
ts_status ts_amp_unscale_(int n, ts_tensor *const *ts, ts_tensor *found_inf, ts_tensor *inv_scale);

#endif
