/* Checks and derivations the op layer makes on operands before dispatch:
 * torch's result type and "all tensors on one device". */
#include "ops.h"

/* torch's three-tier result type: dimensioned tensors, then 0-dim tensors,
 * then wrapped numbers; a lower tier only matters when its category
 * (bool < integer < float) is higher. */
enum { CAT_BOOL, CAT_INT, CAT_FLOAT };
static int category(ts_dtype d) { return d == TS_BOOL ? CAT_BOOL : ts_dtype_is_float(d) ? CAT_FLOAT : CAT_INT; }

static int combine(int higher, int lower) { /* dtypes, -1 for none */
  if (higher < 0) return lower;
  if (lower < 0) return higher;
  if (category(lower) > category(higher)) return ts_promote(higher, lower);
  return higher;
}

ts_dtype ts_result_type(int n, ts_tensor *const *ts) {
  int tier[3] = {-1, -1, -1};
  for (int i = 0; i < n; i++) {
    const ts_tensor *t = ts[i];
    int k = t->is_wrapped_number ? 2 : t->ndim == 0 ? 1 : 0;
    ts_dtype d = t->dtype;
    if (k == 2 && d == TS_FLOAT64) d = TS_DEFAULT_DTYPE; /* a Lua float counts as the default dtype */
    tier[k] = tier[k] < 0 ? (int)d : (int)ts_promote((ts_dtype)tier[k], d);
  }
  int r = combine(tier[0], combine(tier[1], tier[2]));
  return r < 0 ? TS_DEFAULT_DTYPE : (ts_dtype)r;
}

ts_status ts_fail_devices(const char *fn, ts_device a, ts_device b) {
  char sa[32], sb[32];
  ts_device_str(a, sa, sizeof sa);
  ts_device_str(b, sb, sizeof sb);
  return ts_fail(TS_ERR_DEVICE, "%s: expected all tensors on the same device, got %s and %s", fn, sa, sb);
}

ts_status ts_check_same_device(const char *fn, int n, ts_tensor *const *ts) {
  const ts_tensor *ref = NULL;
  for (int i = 0; i < n; i++) {
    const ts_tensor *t = ts[i];
    if (t->is_wrapped_number || (t->ndim == 0 && t->device.type == TS_CPU)) continue;
    if (!ref) ref = t;
    else if (!ts_device_eq(ref->device, t->device)) return ts_fail_devices(fn, ref->device, t->device);
  }
  return TS_OK;
}
