/* Device backends as the core sees them: the interface a backend fills in
 * (its kernels, allocator and copies) and the table of backends, which the
 * core fills itself (backend.c): a C program linking the core gets the CPU
 * and, in a CUDA build, the CUDA backend without the Lua binding. */
#ifndef TENSH_BACKEND_H
#define TENSH_BACKEND_H

#include "tensh.h"

struct ts_call; /* one kernel invocation: ops/ops.h */
typedef ts_status (*ts_kernel)(const struct ts_call *c);

/* A backend: one kernel slot per op, its allocator, and its copies. */
typedef struct ts_backend {
  const char *name;
  ts_kernel *kernels; /* TS_OP_COUNT slots in ops/ops.def's order */
  const ts_allocator *allocator;
  /* devices other than the CPU; NULL on the CPU */
  ts_status (*prepare)(ts_device dev); /* makes dev current before a kernel runs on it */
  /* n bytes between a device of this backend and the CPU, or two of its devices;
   * non_blocking copies are ordered on the current stream and may return early */
  ts_status (*copy_bytes)(void *dst, ts_device dd, const void *src, ts_device sd, size_t n, bool non_blocking);
  /* an event on dev's current stream, for a host storage a non-blocking copy uses */
  ts_status (*copy_pending)(ts_device dev, uintptr_t *event);
  /* waits for and frees an event copy_pending made (ts_storage_sync) */
  ts_status (*pending_wait)(uintptr_t event);
  int (*current_device)(void);
  int device_count;
  const ts_allocator *host_allocator; /* page-locked host memory, for pin_memory */
} ts_backend;

/* The started backends; NULL where not built, not available or not started yet. */
extern ts_backend *ts_backends[TS_DEVICE_TYPE_COUNT];
/* The backend of device type t, started on first use (CUDA asks the driver:
 * ~70 ms without a GPU, so start-up stays fast for CPU work); NULL when
 * unavailable. */
ts_backend *ts_backend_get(ts_device_type t);
/* "cuda" (index -1) becomes the current device; an ordinal past the last
 * device, or a device type this build or machine lacks, is an error. */
ts_status ts_device_resolve(ts_device *d);

/* The backends' starters, which set ts_backends[type] when the device is there
 * (src/cpu/backend.c, cuda/backend.cu). */
void ts_cpu_backend_init(void);
void ts_cuda_backend_init(void);

#endif
