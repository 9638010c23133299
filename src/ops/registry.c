/* The op table and backend dispatch (the operand checks every op makes are in op_checks.c). */
#include "ops.h"
#include "core/profiler.h"

#include <stdio.h>

/* the columns of a registry line after its kind (ops.def) */
#define ATEN(op) .aten = "aten::" #op
#define GRAD(node, what) .grad_fn = #node, .saves = TS_SAVES_##what
#define AUTOCAST(cuda, cpu) .autocast = {[TS_CPU] = TS_AC_##cpu, [TS_CUDA] = TS_AC_##cuda}
const ts_op_desc ts_ops[TS_OP_COUNT] = {
#define X(e, n, k, ...) [TS_OP_##e] = {n, k, __VA_ARGS__},
#include "ops.def"
#undef X
};
#undef ATEN
#undef GRAD
#undef AUTOCAST

/* Ops whose kernels on every backend accept a 0-dim CPU tensor beside
 * device tensors (read as a scalar, as PyTorch allows). */
static bool takes_cpu_scalars(ts_op op) {
  ts_op_kind k = ts_ops[op].kind;
  return (k >= TS_KIND_UNARY && k <= TS_KIND_COMPARE) || op == TS_OP_WHERE || op == TS_OP_LERP || op == TS_OP_COPY ||
         op == TS_OP_GATHER || op == TS_OP_SCATTER || op == TS_OP_MASKED_SELECT || op == TS_OP_MASKED_SCATTER;
}

/* The last guard before a kernel touches memory: an operand on another
 * device would be read through the wrong address space. */
static ts_status check_operand_devices(const ts_call *c, const ts_tensor *ref) {
  for (int i = 0; i < c->nin + TS_CALL_MAX_OUT; i++) {
    const ts_tensor *t = i < c->nin ? c->in[i] : c->out[i - c->nin];
    if (!t || ts_device_eq(t->device, ref->device)) continue;
    if (t->device.type == TS_CPU && (t->is_wrapped_number || t->ndim == 0) && i < c->nin && takes_cpu_scalars(c->op))
      continue;
    return ts_fail_devices(ts_ops[c->op].name, ref->device, t->device);
  }
  return TS_OK;
}

/* Kernel calls per device type and op, counted while the counting bit of
 * ts_dispatch_observed is set (tests use it to prove which ops a case ran),
 * and the profiler's events while its bit is set. Off, both cost the one
 * branch on ts_dispatch_observed. */
uint8_t ts_dispatch_observed;
static _Atomic int64_t dispatch_counts[TS_DEVICE_TYPE_COUNT][TS_OP_COUNT];
int64_t ts_dispatch_count(ts_device_type t, ts_op op) {
  return (unsigned)t < TS_DEVICE_TYPE_COUNT && (unsigned)op < TS_OP_COUNT ? dispatch_counts[t][op] : 0;
}
void ts_set_dispatch_counting(bool on) {
  ts_dispatch_observed = on ? ts_dispatch_observed | TS_OBSERVE_COUNT : ts_dispatch_observed & ~TS_OBSERVE_COUNT;
}

static ts_status run_kernel(const ts_call *c, const ts_tensor *ref) {
  ts_backend *be = ts_backends[ref->device.type];
  if (!be) return ts_fail(TS_ERR_DEVICE, "%s: no backend for this device in this build", ts_ops[c->op].name);
  ts_kernel k = be->kernels[c->op];
  if (!k) return ts_fail(TS_ERR_UNSUPPORTED, "%s is not implemented on %s", ts_ops[c->op].name, be->name);
  ts_status st = check_operand_devices(c, ref);
  if (st) return st;
  if (be->prepare) {
    /* a device guard, as PyTorch's ops run under: the op's device is current
     * while it runs, and the caller's is again after (the user's set_device,
     * where later tensors and ops without a device go) */
    int prev = be->current_device ? be->current_device() : -1;
    if ((st = be->prepare(ref->device)) != TS_OK) return st;
    st = k(c);
    if (prev >= 0 && prev != ref->device.index) {
      ts_status back = be->prepare((ts_device){ref->device.type, (int8_t)prev});
      if (!st) st = back;
    }
    return st;
  } else { /* the host: wait for non-blocking copies still landing in an operand */
    for (int i = 0; i < c->nin; i++)
      if (c->in[i]->storage->pending && (st = ts_storage_sync(c->in[i]->storage))) return st;
    for (int i = 0; i < TS_CALL_MAX_OUT; i++)
      if (c->out[i] && c->out[i]->storage->pending && (st = ts_storage_sync(c->out[i]->storage))) return st;
  }
  return k(c);
}

static __attribute__((noinline)) ts_status observed_dispatch(const ts_call *c, const ts_tensor *ref) {
  if (ts_dispatch_observed & TS_OBSERVE_COUNT) dispatch_counts[ref->device.type][c->op]++;
  int ev = ts_dispatch_observed & TS_OBSERVE_PROFILE
               ? ts_prof_begin(ts_ops[c->op].name, TS_PROF_OP, ref->device, c->nin, c->in)
               : -1;
  ts_status st = run_kernel(c, ref);
  ts_prof_end(ev);
  return st;
}

ts_status ts_dispatch(const ts_call *c) {
  const ts_tensor *ref = c->out[0] ? c->out[0] : c->in[0];
  if (__builtin_expect(ts_dispatch_observed != 0, 0)) return observed_dispatch(c, ref);
  return run_kernel(c, ref);
}

static bool library_kernels_off[TS_DEVICE_TYPE_COUNT];
static _Atomic int64_t library_runs[TS_DEVICE_TYPE_COUNT];

int64_t ts_library_kernel_runs(ts_device_type t) { return (unsigned)t < TS_DEVICE_TYPE_COUNT ? library_runs[t] : 0; }

void ts_set_library_kernels(ts_device_type t, bool enabled) {
  if ((unsigned)t < TS_DEVICE_TYPE_COUNT) library_kernels_off[t] = !enabled;
}

bool ts_library_kernels_enabled(ts_device_type t) { return (unsigned)t < TS_DEVICE_TYPE_COUNT && !library_kernels_off[t]; }

bool ts_library_available(ts_op op, ts_device_type t) {
  return (unsigned)t < TS_DEVICE_TYPE_COUNT && ts_backends[t] && ts_backends[t]->kernels[op] && !library_kernels_off[t];
}

ts_status ts_dispatch_library(const ts_call *c, bool *ran) {
  const ts_tensor *ref = c->out[0] ? c->out[0] : c->in[0];
  *ran = false;
  if (!ts_library_available(c->op, ref->device.type)) return TS_OK;
  ts_status st = ts_dispatch(c);
  if (st == TS_ERR_UNSUPPORTED) return TS_OK; /* declined: the caller composes the op */
  *ran = st == TS_OK;
  if (*ran) library_runs[ref->device.type]++;
  return st;
}

ts_status ts_run(ts_op op, int nin, ts_tensor *const *in, ts_tensor *out0) {
  ts_call c = {.op = op, .nin = nin, .in = in, .out = {out0}};
  return ts_dispatch(&c);
}
