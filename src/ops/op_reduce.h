/* The op layer's reductions and scans (included by ops.h).
 *
 * Reductions take a list of dims: ndims 0 (dims may be NULL) reduces over
 * every element. Dims may be negative; a 0-dim input accepts 0 and -1.
 * keepdim keeps the reduced dims with size 1. Result dtypes follow torch:
 * sums and products of integers and bool are int64, all/any are bool,
 * indices are int64, mean/var/std/norm need floating-point inputs. */
#ifndef TENSH_OP_REDUCE_H
#define TENSH_OP_REDUCE_H

ts_status ts_sum(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out);
ts_status ts_mean(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out);
ts_status ts_prod(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out);
/* correction: 1 for the unbiased estimate (Bessel's), 0 for the population one */
ts_status ts_var(ts_tensor *x, int ndims, const int64_t *dims, double correction, bool keepdim, ts_tensor **out);
ts_status ts_std(ts_tensor *x, int ndims, const int64_t *dims, double correction, bool keepdim, ts_tensor **out);
/* p >= 0, or +-INFINITY for the max/min of |x| (torch.linalg.vector_norm) */
ts_status ts_norm(ts_tensor *x, double p, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out);
ts_status ts_all(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out);
ts_status ts_any(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out);
ts_status ts_logsumexp(ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out);
/* op TS_OP_MAX or TS_OP_MIN: the values only, over any dims (torch.amax/amin, and x:max()) */
ts_status ts_amax(ts_op op, ts_tensor *x, int ndims, const int64_t *dims, bool keepdim, ts_tensor **out);
/* op TS_OP_MAX or TS_OP_MIN over one dim: values and int64 indices (first
 * occurrence on ties). Both are set only on success. */
ts_status ts_max_dim(ts_op op, ts_tensor *x, int64_t dim, bool keepdim, ts_tensor **values, ts_tensor **indices);
/* argmax (TS_OP_MAX) / argmin (TS_OP_MIN); dim NULL: index into the flattened tensor */
ts_status ts_argmax(ts_op op, ts_tensor *x, const int64_t *dim, bool keepdim, ts_tensor **out);

/* scans along one dim: out has x's shape */
ts_status ts_cumsum(ts_tensor *x, int64_t dim, ts_tensor **out);
ts_status ts_softmax(ts_tensor *x, int64_t dim, ts_tensor **out);
ts_status ts_log_softmax(ts_tensor *x, int64_t dim, ts_tensor **out);

/* comparisons of whole tensors */
ts_status ts_equal(ts_tensor *a, ts_tensor *b, bool *out); /* same shape and values */
/* |a - b| <= atol + rtol * |b| elementwise (broadcast), or both NaN when equal_nan */
ts_status ts_isclose(ts_tensor *a, ts_tensor *b, double rtol, double atol, bool equal_nan, ts_tensor **out);
ts_status ts_allclose(ts_tensor *a, ts_tensor *b, double rtol, double atol, bool equal_nan, bool *out);

#endif
