/* The CPU's caching allocator: the device allocator's logic (cache_alloc.c:
 * size classes, best fit, split and merge, statistics) over anonymous
 * mappings, for every CPU buffer above TS_CPU_CACHE_MIN bytes.
 *
 * Why: a training step allocates the same multi-megabyte outputs and
 * gradients every step. From malloc each is a fresh mapping (or heap top that
 * glibc trims back to the kernel), so every page is faulted in and zeroed
 * again each step (a fifth of seed 003's step went to page faults). Kept
 * here, the same pages serve step after step. It also keeps a DataLoader
 * flat: batches allocated on worker threads and freed on the main thread go
 * back to one cache instead of to per-thread malloc arenas that fragment
 * (MALLOC_ARENA_MAX=2 made that grow without bound).
 *
 * What it holds idle is bounded, so memory a program dropped comes back
 * without torch.cpu.empty_cache() (100 cycles of a 200 MB tensor left 400 MiB
 * mapped): a segment above TENSH_CPU_CACHE_MAX_BLOCK (default 32 MiB,
 * glibc's largest mmap threshold) is unmapped as soon as it is free, as
 * malloc would, and when wholly free segments hold more than the idle limit
 * the longest idle are unmapped. The limit is TENSH_CPU_CACHE_LIMIT when set;
 * by default the most the cache has had mapped at once, at least 256 MiB and
 * at most an eighth of the machine's memory: a Transformer step that maps
 * ~450 MiB and ends with 50 MiB live had its 16 MiB segments unmapped at
 * the end of each step under a fixed 256 MiB and faulted in (and zeroed by
 * the kernel) again in the next, 13 % of its time. A training step's buffers
 * below those sizes are reused step after step.
 * Memory also goes back when a mapping fails (the cache releases its wholly
 * free segments and retries) and on torch.cpu.empty_cache().
 * TENSH_NO_CPU_CACHING=1 turns caching off: each buffer is then malloc'd and
 * freed at once, as before (statistics still kept). One stream (0); the
 * cache's mutex is the only lock, held for a treap lookup. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/cache_alloc.h"

/* Under ASan the cache's memory would hide overruns and uses after free from
 * it (ASan sees only malloc's blocks): a mapping starts poisoned, a block is
 * unpoisoned for exactly the bytes asked for (its rounding stays poisoned, so
 * a one-past-the-end write is caught) and poisoned again when freed; a mapping
 * is unpoisoned before munmap, since the address may serve a stack next. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define CACHE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define CACHE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CACHE_POISON(p, n) ((void)(p), (void)(n))
#define CACHE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* the sizes of the live mappings, for munmap (the raw interface passes none);
 * only touched under the cache's mutex, and there are few segments */
typedef struct mapping { void *p; size_t n; } mapping;
typedef struct raw_ctx {
  bool caching;
  mapping *maps;
  size_t nmaps, cap;
  size_t mapped, mapped_peak; /* bytes mapped now, and the most at once */
} raw_ctx;

static void *raw_malloc(void *ctx, size_t n) {
  raw_ctx *r = ctx;
  if (!r->caching) return aligned_alloc(64, (n + 63) & ~(size_t)63);
  if (r->nmaps == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 64;
    mapping *m = realloc(r->maps, cap * sizeof *m);
    if (!m) return NULL;
    r->maps = m, r->cap = cap;
  }
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
  if (n >= 4 * 1024 * 1024) madvise(p, n, MADV_HUGEPAGE); /* fewer faults and TLB misses; only a hint */
#endif
  r->maps[r->nmaps++] = (mapping){p, n};
  r->mapped += n;
  /* read outside the cache's lock by ts_cpu_cache_alloc: one word, written here only */
  if (r->mapped > r->mapped_peak) __atomic_store_n(&r->mapped_peak, r->mapped, __ATOMIC_RELAXED);
  CACHE_POISON(p, n);
  return p;
}

static void raw_free(void *ctx, void *p) {
  raw_ctx *r = ctx;
  if (!r->caching) return free(p);
  for (size_t i = 0; i < r->nmaps; i++)
    if (r->maps[i].p == p) {
      CACHE_UNPOISON(p, r->maps[i].n);
      munmap(p, r->maps[i].n);
      r->mapped -= r->maps[i].n;
      r->maps[i] = r->maps[--r->nmaps];
      return;
    }
}

/* never called: the CPU has one stream and nothing records others */
static void *no_event(void *ctx, uintptr_t stream) { return (void)ctx, (void)stream, NULL; }
static bool event_done(void *ctx, void *ev) { return (void)ctx, (void)ev, true; }
static void event_nop(void *ctx, void *ev) { (void)ctx, (void)ev; }

#define DEFAULT_MAX_BLOCK ((size_t)32 << 20)
#define DEFAULT_IDLE_LIMIT ((size_t)256 << 20)

/* A size from the environment: bytes, or a number with K, M or G (powers of
 * 1024; "256M", "1.5G", "0"); the default, with a warning, when unreadable. */
static size_t env_size(const char *name, size_t dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  double x = strtod(v, &end);
  double unit = 1;
  switch (*end) {
  case 'k': case 'K': unit = 1024.0, end++; break;
  case 'm': case 'M': unit = 1024.0 * 1024, end++; break;
  case 'g': case 'G': unit = 1024.0 * 1024 * 1024, end++; break;
  default: break;
  }
  if (unit > 1 && (*end == 'i' || *end == 'I')) end++;
  if (*end == 'b' || *end == 'B') end++;
  if (end == v || *end || !(x >= 0) || x * unit >= 0x1p63) {
    fprintf(stderr, "tensh: %s=%s is not a size such as 256M or 1G; using %zu MiB\n", name, v, dflt >> 20);
    return dflt;
  }
  return (size_t)(x * unit);
}

static ts_cache *cpu_cache;
static raw_ctx cpu_raw;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* The idle limit: fixed when TENSH_CPU_CACHE_LIMIT is set; otherwise raised
 * to the mapped peak as it grows, up to cap (see the top) */
static struct {
  bool follows_peak;
  size_t max_block, limit, cap;
  pthread_mutex_t lock; /* orders the raises of concurrent allocations */
} idle = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void cpu_cache_init(void) {
  const char *v = getenv("TENSH_NO_CPU_CACHING");
  cpu_raw.caching = !v || !*v || strcmp(v, "0") == 0;
  ts_cache_raw raw = {raw_malloc, raw_free, no_event, event_done, event_nop, event_nop, &cpu_raw, NULL};
  cpu_cache = ts_cache_new(raw, cpu_raw.caching);
  if (!cpu_cache) return;
  const char *limit = getenv("TENSH_CPU_CACHE_LIMIT");
  idle.follows_peak = !limit || !*limit;
  idle.max_block = env_size("TENSH_CPU_CACHE_MAX_BLOCK", DEFAULT_MAX_BLOCK);
  idle.limit = env_size("TENSH_CPU_CACHE_LIMIT", DEFAULT_IDLE_LIMIT);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  idle.cap = pages > 0 && page > 0 ? (size_t)pages / 8 * (size_t)page : DEFAULT_IDLE_LIMIT;
  ts_cache_set_idle_limits(cpu_cache, idle.max_block, idle.limit);
}

ts_cache *ts_cpu_cache(void) {
  pthread_once(&cpu_once, cpu_cache_init);
  return cpu_cache;
}

/* after an allocation mapped past the limit: the limit follows the peak (a
 * raise never unmaps anything, so it can wait until the cache's lock is free) */
static void follow_peak(ts_cache *c, size_t peak) {
  pthread_mutex_lock(&idle.lock);
  size_t want = peak < idle.cap ? peak : idle.cap;
  if (want > idle.limit) {
    __atomic_store_n(&idle.limit, want, __ATOMIC_RELAXED);
    ts_cache_set_idle_limits(c, idle.max_block, want);
  }
  pthread_mutex_unlock(&idle.lock);
}

void *ts_cpu_cache_alloc(size_t n) {
  ts_cache *c = ts_cpu_cache();
  void *p = c ? ts_cache_alloc(c, n, 0) : NULL;
  if (p && cpu_raw.caching) CACHE_UNPOISON(p, n);
  if (p && idle.follows_peak) {
    size_t peak = __atomic_load_n(&cpu_raw.mapped_peak, __ATOMIC_RELAXED);
    size_t limit = __atomic_load_n(&idle.limit, __ATOMIC_RELAXED);
    if (peak > limit && limit < idle.cap) follow_peak(c, peak);
  }
  return p;
}

void ts_cpu_cache_free(void *p) {
  if (!cpu_cache) return;
  /* poisoned while still ours: once freed, another thread may take it */
  if (p && cpu_raw.caching) CACHE_POISON(p, ts_cache_block_size(cpu_cache, p));
  ts_cache_free(cpu_cache, p);
}
