/* Device activity counters, the sync debug mode, and the profiler's events
 * for them: see activity.h. */
#include "activity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler.h"

static int64_t n_launches, n_syncs, n_memcpys, n_memsets; /* atomics: launches come from any thread */
static int sync_mode = -1;                               /* -1: TENSH_SYNC_CHECK not read yet */
static _Thread_local int quiet;
void (*ts_sync_warn_hook)(const char *api);

static void bump(int64_t *n) { __atomic_add_fetch(n, 1, __ATOMIC_RELAXED); }

void ts_activity_read(ts_activity_counts *out) {
  out->launches = __atomic_load_n(&n_launches, __ATOMIC_RELAXED);
  out->syncs = __atomic_load_n(&n_syncs, __ATOMIC_RELAXED);
  out->memcpys = __atomic_load_n(&n_memcpys, __ATOMIC_RELAXED);
  out->memsets = __atomic_load_n(&n_memsets, __ATOMIC_RELAXED);
}

bool ts_activity_timed(void) { return ts_prof_device_recording(); }

void ts_activity_quiet(int delta) { quiet += delta; }
bool ts_activity_is_quiet(void) { return quiet > 0; }

void ts_note_launch(const char *api, const char *kernel, const uint32_t grid[3], const uint32_t block[3], int device,
                    uintptr_t stream, int64_t t0, int64_t t1) {
  bump(&n_launches);
  if (!ts_prof_device_recording()) return;
  ts_prof_device_info info = {.device_kind = TS_PROF_KERNEL, .what = kernel, .stream = stream};
  memcpy(info.grid, grid, sizeof info.grid);
  memcpy(info.block, block, sizeof info.block);
  ts_prof_device(api, device, t0, t1, &info);
}

void ts_note_copy(const char *api, const char *what, bool memset, int64_t bytes, int device, uintptr_t stream,
                  int64_t t0, int64_t t1) {
  bump(memset ? &n_memsets : &n_memcpys);
  if (!ts_prof_device_recording()) return;
  ts_prof_device_info info = {.device_kind = memset ? TS_PROF_MEMSET : TS_PROF_MEMCPY, .what = what,
                              .stream = stream, .bytes = bytes};
  ts_prof_device(api, device, t0, t1, &info);
}

static int mode_from_env(void) {
  const char *e = getenv("TENSH_SYNC_CHECK");
  if (!e || !*e || !strcmp(e, "0") || !strcmp(e, "default")) return 0;
  if (!strcmp(e, "2") || !strcmp(e, "error")) return 2;
  return 1; /* 1, "warn", or anything else that asks for checking */
}

int ts_get_sync_debug_mode(void) {
  int m = __atomic_load_n(&sync_mode, __ATOMIC_RELAXED);
  if (m < 0) {
    m = mode_from_env();
    __atomic_store_n(&sync_mode, m, __ATOMIC_RELAXED);
  }
  return m;
}

void ts_set_sync_debug_mode(int mode) { __atomic_store_n(&sync_mode, mode < 0 ? 0 : mode > 2 ? 2 : mode, __ATOMIC_RELAXED); }

ts_status ts_note_sync(const char *api, int device, uintptr_t stream, int64_t t0, int64_t t1) {
  if (quiet) return TS_OK;
  bump(&n_syncs);
  if (ts_prof_device_recording()) {
    ts_prof_device_info info = {.device_kind = TS_PROF_RUNTIME, .stream = stream, .sync = true};
    ts_prof_device(api, device, t0, t1, &info);
  }
  switch (ts_get_sync_debug_mode()) {
  case 1:
    if (ts_sync_warn_hook) ts_sync_warn_hook(api);
    else fprintf(stderr, "UserWarning: called a synchronizing CUDA operation (%s)\n", api);
    return TS_OK;
  case 2:
    return ts_fail(TS_ERR_BACKEND,
                   "called a synchronizing CUDA operation (%s) while cuda.set_sync_debug_mode(\"error\") is set", api);
  default: return TS_OK;
  }
}
