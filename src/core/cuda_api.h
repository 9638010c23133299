/* The C face of the CUDA backend: what src/ may call. It is implemented in
 * cuda/ and declared here, on the core's side, so that nothing under src/
 * includes from cuda/. Status codes and plain values only; no CUDA types leak
 * out. Streams and events are opaque handles (uintptr_t); stream 0 is the
 * device's default (legacy) stream. Device arguments are CUDA ordinals; every
 * function that takes one checks it and names the valid range. Nothing here
 * fails without a GPU except by status. */
#ifndef TENSH_CUDA_API_H
#define TENSH_CUDA_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensh.h"

#ifdef __cplusplus
extern "C" {
#endif

int ts_cuda_device_count(void);    /* 0 without a GPU or driver, never an error */
int ts_cuda_runtime_version(void); /* e.g. 13000 */
int ts_cuda_driver_version(void);  /* 0 without a driver */

/* ts_cuda_backend_init, which the core calls on first use of a cuda device: core/backend.h */
/* Fills k (TS_OP_COUNT slots) with the CUDA kernels, GPU or not: the
 * registry test walks it on machines without a GPU too. */
struct ts_call;
void ts_cuda_kernel_table(ts_status (**k)(const struct ts_call *));

ts_status ts_cuda_check_device(int device); /* TS_ERR_DEVICE naming the valid range */
int ts_cuda_current_device(void);
ts_status ts_cuda_set_device(int device);
ts_status ts_cuda_synchronize(int device); /* -1: the current device */

typedef struct ts_cuda_props {
  char name[256];
  char uuid[41];                    /* "GPU-" and 36 characters (8-4-4-4-12 hex digits), NUL */
  size_t total_memory;
  int major, minor;
  int multi_processor_count;
  int l2_cache_size;
  int max_threads_per_multi_processor;
  int warp_size;
  int is_integrated;
  int pci_bus_id, pci_device_id;
} ts_cuda_props;
ts_status ts_cuda_get_properties(int device, ts_cuda_props *out);
ts_status ts_cuda_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes);
/* GPU utilisation in percent over the last sample period, as nvidia-smi
 * (NVML, loaded at run time); TS_ERR_UNSUPPORTED when NVML is missing. */
ts_status ts_cuda_utilization(int device, int *percent);
ts_status ts_cuda_can_access_peer(int device, int peer, bool *out);

/* ---- streams and events ---- */
ts_status ts_cuda_stream_create(int device, int priority, uintptr_t *out);
ts_status ts_cuda_stream_destroy(uintptr_t s);
uintptr_t ts_cuda_current_stream(int device);             /* -1: the current device */
ts_status ts_cuda_set_current_stream(int device, uintptr_t s);
ts_status ts_cuda_stream_synchronize(uintptr_t s, int device);
ts_status ts_cuda_stream_query(uintptr_t s, int device, bool *done);
/* s (on device) waits for other's work so far; other may be on another device */
ts_status ts_cuda_stream_wait_stream(uintptr_t s, int device, uintptr_t other, int other_device);
ts_status ts_cuda_event_create(int device, bool timing, bool blocking, uintptr_t *out);
ts_status ts_cuda_event_destroy(uintptr_t e);
ts_status ts_cuda_event_record(uintptr_t e, uintptr_t stream, int device);
ts_status ts_cuda_event_synchronize(uintptr_t e);
ts_status ts_cuda_event_query(uintptr_t e, bool *done);
ts_status ts_cuda_event_elapsed(uintptr_t start, uintptr_t end, float *ms);
ts_status ts_cuda_stream_wait_event(uintptr_t s, uintptr_t e, int device);

/* ---- CUDA graphs (stream capture) ---- */
/* A private memory pool: while a stream captures into it, that stream's
 * allocations come from blocks no other stream is handed, so the addresses a
 * graph was captured with stay its own while it lives. Ids are never reused. */
uint64_t ts_cuda_graph_pool_new(void);
/* Captures stream's work on device (mode 0 global, 1 thread-local, 2
 * relaxed, as cudaStreamCaptureMode) with its allocations from pool. */
ts_status ts_cuda_capture_begin(int device, uintptr_t stream, uint64_t pool, int mode);
/* Ends the capture begun on stream and instantiates it: *exec is the
 * executable graph. A capture a forbidden call invalidated fails here too. */
ts_status ts_cuda_capture_end(int device, uintptr_t stream, uintptr_t *exec);
ts_status ts_cuda_graph_launch(uintptr_t exec, int device, uintptr_t stream);
ts_status ts_cuda_graph_destroy(uintptr_t exec);
/* No graph uses pool any more: its cached blocks go back to the device. */
void ts_cuda_graph_pool_hold(void); /* a pool's first graph: empty_cache keeps the cache until its release */
ts_status ts_cuda_graph_pool_release(int device, uint64_t pool);
ts_status ts_cuda_stream_is_capturing(uintptr_t stream, int device, bool *out);
/* Random numbers in graphs (cuda/random.cu): while stream captures, its random
 * kernels read the seed and base offset from state (two uint64 of device memory
 * the graph keeps) and draw from base + (their reserved offset - start), start
 * the generator's offset when the capture began. _end says whether any did;
 * _set (before each replay, on its stream) writes the seed and base offset. */
ts_status ts_cuda_graph_rng_begin(int device, uintptr_t stream, void *state, uint64_t start);
bool ts_cuda_graph_rng_end(int device, uintptr_t stream);
ts_status ts_cuda_graph_rng_set(void *state, int device, uintptr_t stream, uint64_t seed, uint64_t offset);

/* ---- memory ---- */
/* The caching allocator's statistics and controls, per device. */
struct ts_cache_stats;
ts_status ts_cuda_memory_stats(int device, struct ts_cache_stats *out);
ts_status ts_cuda_reset_peak(int device);
ts_status ts_cuda_reset_accumulated(int device);
ts_status ts_cuda_empty_cache(void);
ts_status ts_cuda_record_stream(void *device_ptr, int device, uintptr_t stream);
ts_status ts_cuda_memory_summary(int device, char *buf, size_t n);

/* Page-locked host memory for pin_memory(); the allocator of pinned CPU
 * storages. */
extern const ts_allocator ts_cuda_pinned_allocator;

/* ---- cuDNN (torch.backends.cudnn) ---- */
/* The loaded cuDNN's version (e.g. 91900), loading libcudnn on the first call
 * (TENSH_CUDNN_LIB, then libcudnn.so.9 from the loader's paths, then the
 * toolkit's lib64); 0 when built without cuDNN's headers or when no library
 * loads. Needs no GPU. Whether convolutions use it is ts_set_library_kernels. */
int ts_cuda_cudnn_version(void);
typedef struct ts_cudnn_flags {
  bool benchmark;     /* time every algorithm once per shape instead of asking the heuristics */
  bool deterministic; /* only algorithms cuDNN reports as deterministic */
  bool allow_tf32;    /* float32 convolutions may round their inputs to TF32 (tensor cores) */
} ts_cudnn_flags;
ts_cudnn_flags ts_cuda_cudnn_get_flags(void); /* defaults: false, false, true (as PyTorch) */
void ts_cuda_cudnn_set_flags(ts_cudnn_flags f);

#ifdef __cplusplus
}
#endif

#endif
