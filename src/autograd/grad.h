/* Recording of autograd nodes by the op layer: each op-layer function calls
 * its ts_ag_* after computing its output, when ts_ag_needed() says an input
 * requires grad. The formulas are in grad_*.c. */
#ifndef TENSH_GRAD_H
#define TENSH_GRAD_H

#include "autograd.h"
#include "ops/ops.h"

/* the node kinds of grad_kinds.def: TS_GRAD_VIEW, ..., TS_GRAD_SOFTMAX, ... */
typedef enum {
#define G(kind, name, backward) TS_GRAD_##kind,
#include "grad_kinds.def"
#undef G
  TS_GRAD_COUNT
} ts_grad_kind;

/* the families' backward functions named by grad_kinds.def */
#define G(kind, name, backward) ts_status backward(ts_node *n, ts_tensor *grad, ts_tensor **grads);
#include "grad_kinds.def"
#undef G

/* ts_ag_record for a kind of grad_kinds.def: its name and backward, and
 * node->i[0] = kind for the backward to read */
ts_status ts_ag_record_kind(ts_grad_kind kind, int nin, ts_tensor *const *in, ts_tensor *out, ts_node **node);

/* elementwise (grad_elementwise.c); xc/ac/bc: the inputs in the compute dtype */
ts_status ts_ag_unary(ts_op op, ts_tensor *x, ts_tensor *xc, ts_tensor *y, const int64_t *ip, const double *fp);
ts_status ts_ag_binary(ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor *ac, ts_tensor *bc, ts_tensor *y,
                       double alpha);
ts_status ts_ag_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b, ts_tensor *y);
ts_status ts_ag_lerp(ts_tensor *a, ts_tensor *b, ts_tensor *w, ts_tensor *y);
/* clamp with tensor bounds (lo or hi NULL when absent) */
ts_status ts_ag_clamp_tensor(ts_tensor *x, ts_tensor *lo, ts_tensor *hi, ts_tensor *y);
/* y = x up to dtype or layout (casts, clone, contiguous) */
ts_status ts_ag_identity(const char *name, ts_tensor *x, ts_tensor *y);

/* reductions and scans (grad_reduce.c): kind one of TS_GRAD_SUM ...
 * TS_GRAD_LOG_SOFTMAX (not a *_ALL kind: no dims picks it); dims as given to
 * the op (one dim for maxdim and scans); param: the correction (var, std) or
 * p (norm) */
ts_status ts_ag_reduce(ts_grad_kind kind, ts_tensor *x, int ndims, const int64_t *dims, ts_tensor *y,
                       ts_tensor *indices, double param);

/* matrix products (grad_linalg.c); name as torch's: "MmBackward0", ... */
ts_status ts_ag_matmul(const char *name, ts_tensor *a, ts_tensor *b, ts_tensor *y);
ts_status ts_ag_addmm(ts_tensor *bias, ts_tensor *a, ts_tensor *b, double beta, double alpha, ts_tensor *y);

/* joining and indexing (grad_index.c): kind one of TS_GRAD_CAT ...
 * TS_GRAD_SCATTER (grad_kinds.def says what index is); flag 1 for a
 * scatter that adds; dim wrapped */
ts_status ts_ag_index(ts_grad_kind kind, int nin, ts_tensor *const *in, ts_tensor *y, int64_t dim, ts_tensor *index,
                      int64_t flag);

/* ops that overwrite values (grad_inplace.c): kind one of TS_GRAD_COPY ...
 * TS_GRAD_INDEX_PUT; y == in[0] for the in-place form (autograd.h); saved:
 * the mask or index, or NULL */
ts_status ts_ag_overwrite(ts_grad_kind kind, int nin, ts_tensor *const *in, ts_tensor *y, ts_tensor *saved);

/* neural-network ops (grad_nn.c): the nodes call op_nn_*.c's backward functions */
ts_status ts_ag_conv(bool is_1d, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv2d_params *p, ts_tensor *y);
ts_status ts_ag_max_pool2d(ts_tensor *x, ts_tensor *indices, ts_tensor *y);
ts_status ts_ag_avg_pool2d(ts_tensor *x, const ts_pool2d_params *p, ts_tensor *y);
ts_status ts_ag_adaptive_avg_pool2d(ts_tensor *x, ts_tensor *y);
ts_status ts_ag_batch_norm(ts_tensor *x, ts_tensor *w, ts_tensor *b, bool training, ts_tensor *mean, ts_tensor *invstd,
                           ts_tensor *y);
ts_status ts_ag_layer_norm(ts_tensor *x, int nd, const int64_t *shape, ts_tensor *w, ts_tensor *b, ts_tensor *mean,
                           ts_tensor *rstd, ts_tensor *y);
ts_status ts_ag_embedding(ts_tensor *w, ts_tensor *indices, const int64_t *padding_idx, ts_tensor *y);
ts_status ts_ag_activation(ts_activation a, ts_tensor *x, const double p[2], ts_tensor *y);
ts_status ts_ag_group_norm(ts_tensor *x, int64_t G, ts_tensor *w, ts_tensor *b, ts_tensor *mean, ts_tensor *rstd,
                           ts_tensor *y);
ts_status ts_ag_upsample(ts_tensor *x, const ts_upsample_params *p, ts_tensor *y);
ts_status ts_ag_adaptive_max_pool2d(ts_tensor *x, ts_tensor *indices, ts_tensor *y);

#endif
