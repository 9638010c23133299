/* Formatting tensors as text, the way PyTorch's torch/_tensor_str.py does:
 * one shared number format for all shown elements, right-aligned to a common
 * width, "..." summaries of large tensors, lines wrapped at a line width, and
 * dtype/device/requires_grad suffixes. The print options are process-wide,
 * like torch.set_printoptions. */
#ifndef TENSH_FORMAT_H
#define TENSH_FORMAT_H

#include "core/tensh.h"

typedef struct ts_print_options {
  int precision;     /* digits after the point of floats, 0..100 */
  double threshold;  /* tensors with more elements than this are summarised (may be inf) */
  int64_t edgeitems; /* items shown at each edge of each summarised dim, >= 0 */
  int64_t linewidth; /* characters per line before wrapping, >= 0 */
  int sci_mode;      /* -1: chosen from the values; 0: never; 1: always */
} ts_print_options;

/* PyTorch's "default" profile: precision 4, threshold 1000, edgeitems 3,
 * linewidth 80, sci_mode chosen from the values. */
ts_print_options ts_print_options_default(void);
void ts_print_options_get(ts_print_options *o);
/* Checks every field and sets them all, or fails and changes nothing. */
ts_status ts_print_options_set(const ts_print_options *o);

/* t as PyTorch's repr would show it: "tensor([1., 2.], dtype=torch.float64)".
 * grad_fn_name (NULL when t has no grad_fn) gives the suffix grad_fn=<Name>
 * in place of requires_grad=True. On success *out is a NUL-terminated string
 * from malloc (the caller frees it) and *len its length. Reads only the
 * elements shown, so a summarised tensor of any size prints at once. A tensor
 * on a device whose values cannot be copied to the CPU prints its size,
 * dtype and device with a note in place of the values. */
ts_status ts_tensor_format(ts_tensor *t, const char *grad_fn_name, char **out, size_t *len);

#endif
