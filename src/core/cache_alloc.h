/* The caching device allocator: PyTorch's CUDACachingAllocator design in
 * plain C over an injected raw allocator (cudaMalloc/cudaFree and events for
 * CUDA, a fake over malloc in tests/c/test_cache_alloc.c).
 *
 * Sizes are rounded up to 512 bytes. Requests <= 1 MiB come from the small
 * pool, carved from 2 MiB segments; larger ones from the large pool: requests
 * under 10 MiB get 20 MiB segments, bigger ones a segment rounded up to 2 MiB.
 * A free block is found by best fit in a set ordered by (stream, size,
 * address), split when the rest is worth keeping, and merged with its free
 * neighbours when freed. A block is reused only on the stream it was
 * allocated on; ts_cache_record_stream() marks it used on another stream, and
 * its free then waits for events recorded on those streams.
 *
 * Every public function takes the cache's mutex (tensors may be freed from
 * data-loader threads). The raw functions are called under that mutex and
 * must never call back into the cache. */
#ifndef TENSH_CACHE_ALLOC_H
#define TENSH_CACHE_ALLOC_H

#include "tensh.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ts_cache_raw {          /* the injected device: cudaMalloc etc. or a fake */
  void *(*malloc)(void *ctx, size_t n);             /* NULL on failure */
  void (*free)(void *ctx, void *p);
  void *(*event_record)(void *ctx, uintptr_t stream); /* an event recorded on stream now; NULL on failure */
  bool (*event_done)(void *ctx, void *ev);          /* non-blocking query */
  void (*event_wait)(void *ctx, void *ev);          /* blocks until done (for OOM retry / empty_cache) */
  void (*event_destroy)(void *ctx, void *ev);
  void *ctx;
  /* Optional (NULL: none), for a device that checks accesses (the simulated
   * one), as AddressSanitizer's poisoning interface: [p, p + size) is one
   * block whose first `live` bytes are handed out; live == 0: it is free
   * (cached), or a new segment not carved yet. `stream` is the block's: a
   * block freed now may still be used by work queued there before. */
  void (*mark)(void *ctx, void *p, size_t size, size_t live, uintptr_t stream);
} ts_cache_raw;

typedef struct ts_cache ts_cache;

/* caching false: every block is its own raw allocation, returned to raw as
 * soon as it is free (after its record_stream events); stats still kept.
 * NULL if the host is out of memory. */
ts_cache *ts_cache_new(ts_cache_raw raw, bool caching);
void ts_cache_destroy(ts_cache *c);    /* frees all segments, live blocks included (teardown) */
/* false when TENSH_NO_CUDA_CACHING is set to anything but "" or "0" */
bool ts_cache_env_caching(void);

/* A block of at least n bytes (n == 0 is treated as 1: a unique 512-byte
 * block) usable on stream, or NULL: out of device memory after releasing the
 * cache and retrying (ts_cache_last_oom() and ts_cache_oom_message() then
 * describe it), or out of host memory for the block header. */
void *ts_cache_alloc(ts_cache *c, size_t n, uintptr_t stream);
void ts_cache_free(ts_cache *c, void *p);               /* p from ts_cache_alloc; NULL and unknown pointers ignored */
/* p is used on stream too: its free waits for the work queued there until
 * then. TS_ERR_ARG if p is not a live block, TS_ERR_OOM without host memory. */
ts_status ts_cache_record_stream(ts_cache *c, void *p, uintptr_t stream);
void ts_cache_empty(ts_cache *c);                       /* release wholly-free segments to raw (waits pending events) */
/* Bounds on what a caching cache holds idle (both SIZE_MAX, no bound, until
 * set; the CPU's instance sets them from the environment, src/cpu/cache.c):
 * a segment larger than max_segment goes back to raw as soon as it is wholly
 * free, as glibc unmaps a chunk above its mmap threshold; and when wholly
 * free segments hold more than idle_limit bytes, the longest idle ones go
 * back until they do not. Blocks inside partly used segments stay cached:
 * only whole segments can be released. Applies to what is idle now too. */
void ts_cache_set_idle_limits(ts_cache *c, size_t max_segment, size_t idle_limit);
size_t ts_cache_idle_bytes(ts_cache *c);                /* bytes in wholly free segments */
size_t ts_cache_block_size(ts_cache *c, void *p);       /* rounded size of a live block, 0 if unknown */

typedef struct ts_cache_stat { int64_t current, peak, allocated, freed; } ts_cache_stat;
enum { TS_POOL_ALL, TS_POOL_SMALL, TS_POOL_LARGE, TS_POOL_COUNT };
typedef struct ts_cache_stats {
  ts_cache_stat allocation[TS_POOL_COUNT];          /* live blocks handed out (counts) */
  ts_cache_stat segment[TS_POOL_COUNT];             /* segments from raw (counts) */
  ts_cache_stat active[TS_POOL_COUNT];              /* blocks allocated or awaiting events */
  ts_cache_stat inactive_split[TS_POOL_COUNT];      /* free blocks inside partly-used segments */
  ts_cache_stat allocated_bytes[TS_POOL_COUNT];     /* rounded bytes handed out */
  ts_cache_stat reserved_bytes[TS_POOL_COUNT];      /* bytes in segments */
  ts_cache_stat active_bytes[TS_POOL_COUNT];
  ts_cache_stat inactive_split_bytes[TS_POOL_COUNT];
  ts_cache_stat requested_bytes[TS_POOL_COUNT];     /* bytes asked for (unrounded) */
  int64_t num_alloc_retries, num_ooms, num_device_alloc, num_device_free;
  size_t largest_free_block;                        /* computed at query time */
} ts_cache_stats;
void ts_cache_get_stats(ts_cache *c, ts_cache_stats *out);
/* the two numbers the binding polls often (GC stepping); O(1) */
void ts_cache_usage(ts_cache *c, size_t *allocated, size_t *reserved);
void ts_cache_reset_peak(ts_cache *c);   /* peaks := currents */
void ts_cache_reset_accumulated(ts_cache *c); /* allocated/freed counters and num_* := 0 */
/* Visits each stat as PyTorch's memory_stats key ("allocated_bytes.all.current", ...,
 * "num_alloc_retries"); the binding builds the Lua table from it. */
void ts_cache_stats_foreach(const ts_cache_stats *s, void (*fn)(void *ud, const char *key, int64_t v), void *ud);
/* PyTorch-like memory_summary text into buf (a readable table: rows for allocated memory,
 * active memory, requested memory, GPU reserved memory, non-releasable memory, allocations,
 * active allocs, GPU reserved segments, non-releasable allocs; columns Cur Usage / Peak
 * Usage / Tot Alloc / Tot Freed, split by large/small pool), with the device name in the title.
 * Always NUL-terminated when n > 0; cut short if buf is too small. */
void ts_cache_summary(const ts_cache_stats *s, const char *device_name, char *buf, size_t n);

/* The state when the last allocation failed (zeros if none has). */
typedef struct ts_cache_oom {
  size_t requested;      /* bytes asked for (unrounded) */
  size_t allocated;      /* bytes held by live blocks */
  size_t reserved;       /* bytes in segments, after the cache was released */
  size_t largest_free;   /* largest free cached block */
  uintptr_t stream;
} ts_cache_oom;
bool ts_cache_last_oom(ts_cache *c, ts_cache_oom *out);   /* false if no allocation has failed */
/* "CUDA out of memory: tried to allocate 2.00 GiB on cuda:0 (79.1 GiB total, 1.2 GiB free);
 * tensors hold 70.0 GiB, the cache 5.0 GiB more (largest free block 512 MiB). Drop
 * references, call cuda.empty_cache(), or use a smaller batch."
 * The tensors and cache figures are the cache's state now (call it right
 * after the failed ts_cache_alloc). */
void ts_cache_oom_message(ts_cache *c, size_t requested, const char *device_name,
                          size_t total, size_t free_bytes, char *buf, size_t n);
/* "2.00 GiB", "512.00 MiB", "17 B": the human sizes used above */
void ts_format_bytes(size_t n, char *buf, size_t len);

/* For tests: checks every internal invariant (segments tile exactly, no two
 * free neighbours, free sets ordered and complete, the pointer map, every
 * stat recomputed from the blocks). true if all hold; otherwise the first
 * broken one is described in why. */
bool ts_cache_check(ts_cache *c, char *why, size_t n);

/* The CPU's instance (src/cpu/cache.c): buffers above TS_CPU_CACHE_MIN bytes
 * come from it; ts_cpu_cache() is NULL only if the host had no memory for
 * its header. */
#define TS_CPU_CACHE_MIN 512
ts_cache *ts_cpu_cache(void);
void *ts_cpu_cache_alloc(size_t n);
void ts_cpu_cache_free(void *p);

#endif
