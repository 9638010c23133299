/* The op layer's joining, indexing and sorting functions (included by ops.h).
 * Outputs are NULL-initialised pointers that receive a new tensor on success
 * only. Index tensors are int64 and count from 0; gather, scatter and
 * index_select reject negative indices, advanced indexing (ts_index_*) wraps
 * them as torch does. */
#ifndef TENSH_OP_INDEX_H
#define TENSH_OP_INDEX_H

/* joining: the inputs promote to one dtype; cat skips 1-D empty (0,) inputs */
ts_status ts_cat(int n, ts_tensor *const *ts, int64_t dim, ts_tensor **out);
ts_status ts_stack(int n, ts_tensor *const *ts, int64_t dim, ts_tensor **out);
/* x split along dim into n views pieces[0..n), lens[k] long (they sum to x's
 * size there), with one shared backward (op_split.c); with_sizes records
 * split_with_sizes (SplitWithSizesBackward0) rather than split */
ts_status ts_split_with_sizes(ts_tensor *x, int64_t dim, int n, const int64_t *lens, bool with_sizes,
                              ts_tensor **pieces);
/* x.unbind(dim): x's size along dim select views into pieces (room for that many) */
ts_status ts_unbind(ts_tensor *x, int64_t dim, ts_tensor **pieces);

/* gather/scatter along dim; index has the input's rank, src x's dtype.
 * A wrapped-number src (0-dim, from Lua) is the scatter value form. */
ts_status ts_gather(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor **out);
ts_status ts_scatter_(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor *src, bool add);
ts_status ts_scatter(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor *src, bool add, ts_tensor **out);
ts_status ts_index_select(ts_tensor *x, int64_t dim, ts_tensor *index, ts_tensor **out); /* index (n) */

/* masks and non-zeros: data-dependent output sizes */
ts_status ts_masked_select(ts_tensor *x, ts_tensor *mask, ts_tensor **out); /* broadcast; out (n) */
ts_status ts_nonzero(ts_tensor *x, ts_tensor **out);                         /* out (n, ndim) int64 */

/* sorting: stable, NaN largest; indices int64 */
ts_status ts_sort(ts_tensor *x, int64_t dim, bool descending, ts_tensor **values, ts_tensor **indices);
ts_status ts_topk(ts_tensor *x, int64_t k, int64_t dim, bool largest, ts_tensor **values, ts_tensor **indices);
/* x flattened: sorted distinct values (u); inverse (x's shape) and counts (u)
 * int64, each computed only when its pointer is non-NULL */
ts_status ts_unique(ts_tensor *x, ts_tensor **values, ts_tensor **inverse, ts_tensor **counts);
ts_status ts_one_hot(ts_tensor *x, int64_t num_classes, ts_tensor **out); /* int64 (..., C); C -1: max + 1 */

/* advanced indexing with one tensor along dim 0, as torch's x[index]:
 * int64/int32 index (shape I) -> I + x.shape[1:]; bool mask over x's
 * leading dims (shape M) -> (count,) + x.shape[M.ndim:] */
ts_status ts_index_get(ts_tensor *x, ts_tensor *index, ts_tensor **out);
/* x[index] = value: value (a tensor or wrapped number) broadcasts to the
 * indexing result's shape and is cast to x's dtype */
ts_status ts_index_put_(ts_tensor *x, ts_tensor *index, ts_tensor *value);
/* value (a number or 0-dim tensor) where the bool mask is true, in x's
 * dtype: the mask broadcasts to x's shape (in place) or with it (out of place) */
ts_status ts_masked_fill_(ts_tensor *x, ts_tensor *mask, ts_tensor *value);
ts_status ts_masked_fill(ts_tensor *x, ts_tensor *mask, ts_tensor *value, ts_tensor **out);

#endif
