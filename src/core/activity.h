/* Device activity: what a device backend asks of its device, counted for
 * tests and benchmarks and recorded by the profiler. The CUDA backend reports
 * every kernel launch, host synchronisation, copy and fill from its one choke
 * point per kind (cuda/activity.cu: the linker's --wrap of the runtime's
 * calls; the simulated device's launch observer). The counters are always on
 * (one atomic add each); the events exist while a profiler records device
 * activity (src/core/profiler.h). A host synchronisation is also checked against
 * the sync debug mode (torch.cuda.set_sync_debug_mode). No CUDA here. */
#ifndef TENSH_ACTIVITY_H
#define TENSH_ACTIVITY_H

#include <stdbool.h>
#include <stdint.h>

#include "tensh.h"

/* Since the process started, over every device and thread. */
typedef struct ts_activity_counts {
  int64_t launches; /* kernels queued (library kernels where the library's calls are seen) */
  int64_t syncs;    /* times the host waited for a device (stream, event, device synchronisation) */
  int64_t memcpys, memsets;
} ts_activity_counts;
void ts_activity_read(ts_activity_counts *out);

/* A kernel launch queued on `stream` of `device` by the runtime call `api`
 * ("cudaLaunchKernel", or the library call that launched it) that ran from
 * t0 to t1 (ts_monotonic_ns; 0, 0 when not timed: see ts_activity_timed).
 * `kernel` stays valid (static or interned). */
void ts_note_launch(const char *api, const char *kernel, const uint32_t grid[3], const uint32_t block[3], int device,
                    uintptr_t stream, int64_t t0, int64_t t1);
/* A copy ("Memcpy HtoD", ...) or fill ("Memset") of `bytes`, queued by `api`. */
void ts_note_copy(const char *api, const char *what, bool memset, int64_t bytes, int device, uintptr_t stream,
                  int64_t t0, int64_t t1);
/* A host synchronisation (`api`: "cudaStreamSynchronize", "cudaDeviceSynchronize",
 * "cudaEventSynchronize", "cudaMemcpy") that waited from t0 to t1. In sync
 * debug mode "warn" it warns; in "error" it fails (TS_ERR_BACKEND, the message
 * names api): the wait has happened either way. */
ts_status ts_note_sync(const char *api, int device, uintptr_t stream, int64_t t0, int64_t t1);
/* Whether the notes above want times (a profiler records device activity). */
bool ts_activity_timed(void);

/* torch.cuda.set_sync_debug_mode: 0 "default" (silent), 1 "warn", 2 "error".
 * TENSH_SYNC_CHECK=1 (or "warn") / 2 (or "error") sets it at start-up. */
void ts_set_sync_debug_mode(int mode);
int ts_get_sync_debug_mode(void);
/* Where "warn" mode's warning goes (the binding layer adds the Lua line);
 * NULL: stderr. */
extern void (*ts_sync_warn_hook)(const char *api);

/* Synchronisations made by tools, not by the program (the profiler waiting
 * for its own timings, CUDA_LAUNCH_BLOCKING's wait after each launch):
 * between ts_activity_quiet(+1) and (-1) on a thread they are neither
 * counted, recorded nor checked by the sync debug mode (a device assert is
 * still reported). */
void ts_activity_quiet(int delta);
bool ts_activity_is_quiet(void);

#endif
