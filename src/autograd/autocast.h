/* Automatic mixed precision (torch.autocast): per thread and per device
 * type, a region's ops in autocast.def, and the elementwise ops with an
 * AUTOCAST column in the registry (src/ops/ops.def), run on inputs cast to
 * the region's low-precision dtype or to float32. The casts are ordinary recorded ops
 * (ToCopyBackward0), so the backward pass runs in the dtypes the forward
 * chose and the gradients reach float32 weights in float32.
 *
 * The hook is one branch at the start of each listed op-layer function,
 * taken only while some thread has a region open; then this thread's
 * ts_autocast_mask decides, which is 0 while a listed op runs on its cast
 * inputs (the ops it is built from are not cast a second time) and during
 * backward. */
#ifndef TENSH_AUTOCAST_H
#define TENSH_AUTOCAST_H

#include <stdatomic.h>

#include "core/tensh.h"
#include "ops/ops.h" /* ts_autocast_policy, and the registry's elementwise policies */

/* What autocast runs: an op-layer function of autocast.def (TS_AC_MATMUL...),
 * or TS_AC_COUNT + k for the elementwise kernel op k of the registry
 * (ts_autocast_of_op). */
typedef enum ts_autocast_op {
#define A(e, n, cuda, cpu, call) TS_AC_##e,
#include "autocast.def"
#undef A
  TS_AC_COUNT
} ts_autocast_op;

/* How many threads have a region open: the hook's one load and branch. */
extern _Atomic int ts_autocast_threads;
/* bit t: autocast is on for device type t on this thread (0 while suspended) */
extern _Thread_local unsigned ts_autocast_mask;

/* A listed op's arguments, packed by its TS_AUTOCAST line. */
typedef struct ts_autocast_call {
  ts_tensor *t[4];       /* the tensors autocast may cast (NULL: none) */
  ts_tensor **out[3];
  const void *p[2];
  double f[2];
  int64_t i[2];
} ts_autocast_call;

/* Runs op (a ts_autocast_op, or -1 for none) on c's tensors cast as
 * its policy says for the device type of the first of them, with autocast
 * suspended meanwhile (the ops it is built from are not cast again). */
ts_status ts_autocast_run(int op, const ts_autocast_call *c);

/* Casts *args[0..n) (NULL entries skipped) as op's policy says, replacing
 * them with new references that the caller releases (*nmade of them, in
 * made[]). For ops run from Lua (the losses). */
ts_status ts_autocast_cast(int op, int n, ts_tensor **const *args, ts_tensor **made, int *nmade);

/* The ts_autocast_op of a kernel op of ops.def whose registry line has an
 * AUTOCAST column (elementwise ops), or -1. */
int ts_autocast_of_op(int kernel_op);

/* Whether some thread has a region open (a relaxed load: a plain mov). */
static inline bool ts_autocast_any(void) {
  return __builtin_expect(atomic_load_explicit(&ts_autocast_threads, memory_order_relaxed) != 0, 0);
}

/* The first line of a listed out-of-place op-layer function, e.g.
 * `TS_AUTOCAST(TS_AC_MM, .t = {a, b}, .out = {out});`: with no region open
 * on any thread it is one load and a branch not taken; the arguments are
 * packed only in the branch. TS_AUTOCAST_WHEN adds a condition tested only
 * there (elementwise functions: whether their kernel op is listed). */
#define TS_AUTOCAST_WHEN(cond, op, ...)                                              \
  do {                                                                               \
    if (ts_autocast_any() && ts_autocast_mask && (cond))                             \
      return ts_autocast_run(op, &(const ts_autocast_call){__VA_ARGS__});            \
  } while (0)
#define TS_AUTOCAST(op, ...) TS_AUTOCAST_WHEN(true, op, __VA_ARGS__)

/* ---- regions (torch.autocast's enter and exit) -------------------------- */

typedef struct ts_autocast_state {
  bool enabled;
  ts_dtype dtype;
  bool cache_enabled;
} ts_autocast_state;

/* The state of device type t on this thread. */
ts_autocast_state ts_autocast_get(ts_device_type t);
/* Opens a region on t with state s; *prev receives what to restore. */
void ts_autocast_enter(ts_device_type t, ts_autocast_state s, ts_autocast_state *prev);
/* Closes it: restores prev; the outermost exit empties the cast cache. */
void ts_autocast_exit(ts_device_type t, ts_autocast_state prev);
/* Drops the cached casts of this thread (torch.clear_autocast_cache). */
void ts_autocast_clear_cache(void);
/* Suspends autocast on this thread (backward, which runs in the forward's
 * dtypes); returns what ts_autocast_resume restores. */
unsigned ts_autocast_suspend(void);
void ts_autocast_resume(unsigned saved);

#endif
