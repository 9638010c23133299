/* The fused classification losses (ops_loss.def): cross_entropy over class
 * indices (log-softmax and the negative log-likelihood in one pass) and
 * nll_loss, each way in one kernel for the common case, with PyTorch's
 * weight, ignore_index, reduction and label_smoothing. Targets are checked
 * where the kernel runs: at once on the CPU; on a device through the
 * device-assert record, so the error comes at the next synchronisation and
 * the step itself never waits for the host. */
#ifndef TENSH_OP_LOSS_H
#define TENSH_OP_LOSS_H

#include "ops.h"

typedef enum ts_reduction { TS_REDUCTION_NONE, TS_REDUCTION_MEAN, TS_REDUCTION_SUM } ts_reduction;

/* The flags of NLL_LOSS and NLL_LOSS_BACKWARD (i[1]). */
#define TS_NLL_LOGITS 1 /* the input holds logits: cross_entropy (log-softmax fused); else log-probabilities */
#define TS_NLL_WEIGHT 2 /* a class weight (C) is given */
#define TS_NLL_REDUCE 4 /* a 0-dim result (mean or sum) */
#define TS_NLL_MEAN 8   /* divided by the total weight of the counted targets */

/* cross_entropy (logits true) or nll_loss over class indices: x (N, C, d1...)
 * or (C) with a 0-dim target; target int64 (N, d1...); weight (C) or NULL;
 * label_smoothing in [0, 1] (logits only). Float16 and bfloat16 inputs are
 * computed in float32. Differentiable in x (not in weight). */
ts_status ts_nll_loss(ts_tensor *x, ts_tensor *target, ts_tensor *weight, int64_t ignore_index, ts_reduction reduction,
                      double label_smoothing, bool logits, ts_tensor **out);

/* Checks every element of x lies in [lo, hi] for the loss `code` names
 * (TS_LOSS_ERR_BCE_INPUT): at once on the CPU, at the next synchronisation on
 * a device (CHECK_RANGE). */
ts_status ts_check_range(ts_tensor *x, double lo, double hi, int code);

/* The message of a failure a kernel reported through the device-assert
 * record (cuda/device_assert.cuh): op and code as the kernel wrote them,
 * v its values. Sets the message; returns the status to raise. */
ts_status ts_loss_device_error(ts_op op, int code, const long long v[3]);
/* The codes of NLL_LOSS, v = {target, C, ignore_index}: a class index out of
 * range in cross_entropy (logits) or nll_loss */
#define TS_LOSS_ERR_CE_TARGET 1
#define TS_LOSS_ERR_NLL_TARGET 2
/* of CHECK_RANGE, v = {the value's double bits, its index, 0}: binary_cross_entropy's input */
#define TS_LOSS_ERR_BCE_INPUT 3
/* Not losses, but reported the same way: embedding's row index out of range,
 * v = {index, rows, 0}, from GATHER (forward) or SCATTER (backward) */
#define TS_LOSS_ERR_EMBEDDING_INDEX 4
#define TS_LOSS_ERR_EMBEDDING_BACKWARD_INDEX 5

#endif
