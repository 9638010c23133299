/* The profiler's recorder (torch.profiler): timed, nested events for every
 * dispatched kernel, every autograd backward node and every user scope
 * (record_function), with input shapes and the bytes allocated; with device
 * activity on, also every device kernel launch, copy, fill and host
 * synchronisation the backend makes (src/core/activity.h notes them). Off, the
 * dispatch and the backward loop each test one flag and nothing else. Events
 * are recorded on the thread that started the profiler only (Lua's); other
 * threads' ops are not seen. */
#ifndef TENSH_PROFILER_H
#define TENSH_PROFILER_H

#include <stdbool.h>
#include <stdint.h>

#include "tensh.h"

/* OP, BACKWARD, USER: host regions that nest. The rest are device activity
 * (children of the region open when they happened): RUNTIME a call into the
 * device runtime ("cudaLaunchKernel", "cudaStreamSynchronize"...), KERNEL the
 * kernel a launch queued, MEMCPY and MEMSET the copies and fills queued. */
typedef enum ts_prof_kind {
  TS_PROF_OP,
  TS_PROF_BACKWARD,
  TS_PROF_USER,
  TS_PROF_RUNTIME,
  TS_PROF_KERNEL,
  TS_PROF_MEMCPY,
  TS_PROF_MEMSET
} ts_prof_kind;

typedef struct ts_prof_event {
  const char *name;        /* static (op and node names) or owned (user scopes: see owned_name) */
  char *owned_name;
  ts_prof_kind kind;
  int8_t device_type;      /* where the op ran (ts_device_type); the CPU for scopes */
  int8_t device_index;
  int parent;              /* index of the enclosing event, -1 at the top */
  int64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
  int64_t child_ns;        /* time spent in direct children */
  int64_t cpu_mem, dev_mem; /* net bytes allocated (CPU, device) since the previous event ended, children included */
  int64_t child_cpu_mem, child_dev_mem;
  uintptr_t dev_start, dev_end; /* device timing handles (see ts_prof_device_timer) or 0 */
  char shapes[112];        /* "[[2, 3], [3]]" when shapes are recorded, else "" */
  char stack[128];         /* the caller's source lines when stacks are recorded, else "" */
  /* device activity: a kernel's grid and block, the stream (0: the default), the bytes of a
   * copy or fill, the index of the RUNTIME event that queued it (-1: none), whether a RUNTIME
   * event waited for the device (a synchronisation) */
  uint32_t grid[3], block[3];
  uintptr_t stream;
  int64_t bytes;
  int correlation;
  bool sync;
} ts_prof_event;

/* Device timing (CUDA events on the op's stream), set by the binding layer,
 * which may call the CUDA backend: record() returns a handle or 0. */
typedef struct ts_prof_device_timer {
  uintptr_t (*record)(ts_device dev);
  double (*elapsed_ms)(uintptr_t start, uintptr_t end); /* waits for both; <0 if unknown */
  void (*release)(uintptr_t h);
} ts_prof_device_timer;

typedef struct ts_prof_options {
  bool record_shapes;
  bool profile_memory;
  bool device_timing;      /* time device ops with the timer below as well */
  bool device_activity;    /* record launches, copies and synchronisations (src/core/activity.h) */
  const ts_prof_device_timer *timer;
  /* with_stack: writes where the op was called from (set by the binding, which knows Lua's stack) */
  void (*stack)(char *buf, size_t n);
} ts_prof_options;

/* Bit set in ts_dispatch_observed while a profiler records (the counting bit is ops.h's). */
#define TS_OBSERVE_PROFILE 2

ts_status ts_prof_start(ts_prof_options opt); /* TS_ERR_ARG when one is already running */
/* Stops recording; the events stay readable until the next start or ts_prof_clear. */
void ts_prof_stop(void);
bool ts_prof_running(void);
bool ts_prof_recording_here(void); /* running, and on this thread */
/* At most this many events are kept (about 350 MB); later ones are counted as dropped. */
#define TS_PROF_MAX_EVENTS (1 << 20)
int ts_prof_count(void);
int64_t ts_prof_dropped(void);
const ts_prof_event *ts_prof_events(void);
void ts_prof_clear(void);

/* An event around a region: begin returns its index (-1 when not recording
 * here or out of memory: end ignores -1). Shapes come from the tensors given. */
int ts_prof_begin(const char *name, ts_prof_kind kind, ts_device dev, int n, ts_tensor *const *ts);
int ts_prof_begin_owned(char *name, ts_prof_kind kind); /* takes name (malloc'ed) */
void ts_prof_end(int idx);

/* Device activity, from src/core/activity.c: a RUNTIME event named `api` over
 * [t0, t1] (ts_monotonic_ns) and, unless device_kind is RUNTIME, the
 * KERNEL/MEMCPY/MEMSET event it queued, named `what`, which starts with it.
 * Names are static (kernel names interned by the backend). Recorded only
 * while device activity is recorded here. */
typedef struct ts_prof_device_info {
  ts_prof_kind device_kind; /* TS_PROF_RUNTIME: the call only */
  const char *what;
  uint32_t grid[3], block[3];
  uintptr_t stream;
  int64_t bytes;
  bool sync;
} ts_prof_device_info;
bool ts_prof_device_recording(void);
void ts_prof_device(const char *api, int device, int64_t t0, int64_t t1, const ts_prof_device_info *info);

int64_t ts_monotonic_ns(void);

#endif
