/* The table of autograd node kinds, generated from grad_kinds.def: a node
 * recorded by kind gets its torch name and its family's backward from here,
 * so the op layer passes an enum value and nothing matches strings. */
#include "grad.h"

static const struct {
  const char *name;
  ts_backward_fn backward;
} kinds[] = {
#define G(kind, name, backward) [TS_GRAD_##kind] = {name, backward},
#include "grad_kinds.def"
#undef G
};
_Static_assert(sizeof kinds / sizeof *kinds == TS_GRAD_COUNT, "one entry per kind of grad_kinds.def");

ts_status ts_ag_record_kind(ts_grad_kind kind, int nin, ts_tensor *const *in, ts_tensor *out, ts_node **node) {
  ts_node *n = NULL;
  ts_status st = ts_ag_record(kinds[kind].name, kinds[kind].backward, nin, in, out, &n);
  if (st) return st;
  n->i[0] = kind;
  if (node) *node = n;
  return TS_OK;
}
