/* Memory overlap between the tensor an op writes and the ones it reads, as
 * PyTorch's assert_no_internal_overlap / assert_no_partial_overlap judge it:
 * a written tensor in which two elements share memory (an expanded view),
 * or an input that overlaps the output without being the output itself
 * (b:copy_(b:t()), a:add_(a:t()), a[{{1, 10}}]:copy_(a[{{0, 9}}])), would
 * give a result that depends on the kernel's order: an error says so. Only
 * layouts that are certain are judged; others (PyTorch's "too hard") pass. */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Every element its own address and no gaps: strides, sorted, are the
 * running products of the sizes (size-1 dims aside). */
static bool dense_no_overlap(const ts_tensor *t) {
  int order[TS_MAX_DIMS], n = 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] != 1) order[n++] = d;
  for (int i = 1; i < n; i++) /* insertion sort by stride: a handful of dims */
    for (int j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
      int tmp = order[j];
      order[j] = order[j - 1], order[j - 1] = tmp;
    }
  int64_t expected = 1;
  for (int i = 0; i < n; i++) {
    if (t->strides[order[i]] != expected) return false;
    expected *= t->sizes[order[i]];
  }
  return true;
}

ts_status ts_check_internal_overlap(const char *fn, const ts_tensor *t) {
  if (ts_numel(t) <= 1 || dense_no_overlap(t)) return TS_OK;
  for (int d = 0; d < t->ndim; d++)
    if (t->strides[d] == 0 && t->sizes[d] > 1)
      return ts_fail(TS_ERR_ARG, "%s: unsupported operation: more than one element of the written-to tensor refers to "
                     "a single memory location (an expanded view); clone() the tensor before writing to it", fn);
  return TS_OK;
}

ts_status ts_check_partial_overlap(const char *fn, const ts_tensor *out, const ts_tensor *in) {
  if (out == in || out->storage != in->storage || ts_numel(out) == 0 || ts_numel(in) == 0) return TS_OK;
  if (!dense_no_overlap(out) || !dense_no_overlap(in)) return TS_OK;
  const char *a = ts_data(out), *b = ts_data(in);
  const char *a_end = a + ts_numel(out) * (int64_t)ts_dtype_size(out->dtype);
  const char *b_end = b + ts_numel(in) * (int64_t)ts_dtype_size(in->dtype);
  if (a_end <= b || b_end <= a) return TS_OK;
  if (a == b && a_end == b_end && out->ndim == in->ndim &&
      memcmp(out->strides, in->strides, sizeof(int64_t) * (size_t)out->ndim) == 0)
    return TS_OK; /* the same elements: an element-wise op reads each before it writes it */
  return ts_fail(TS_ERR_ARG, "%s: unsupported operation: some elements of the input tensor and the written-to tensor "
                 "refer to a single memory location; clone() the input first", fn);
}
