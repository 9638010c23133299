/* The caching device allocator on a fake device: raw memory from malloc
 * under a byte budget (to provoke out-of-memory), counted raw mallocs and
 * frees, and events that complete only when the test says so. Every number
 * asserted here follows from the policy in src/core/cache_alloc.h. */
#include "test.h"
#include "core/cache_alloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KB ((size_t)1024)
#define MB (1024 * KB)
#define GB (1024 * MB)

/* ---- the fake device ------------------------------------------------------ */

typedef struct fake_event {
  uintptr_t stream;
  bool done;
  struct fake_event *next;
} fake_event;

typedef struct fake_alloc {
  void *p;
  size_t n;
  struct fake_alloc *next;
} fake_alloc;

typedef struct fake {
  size_t budget, used;
  int mallocs, frees, failed;  /* raw calls; failed: mallocs refused */
  size_t last_malloc;          /* size of the last raw malloc asked for */
  fake_alloc *allocs;
  fake_event *events;          /* live (not destroyed) events */
  int recorded, destroyed, waits;
  bool fail_events;            /* event_record returns NULL */
} fake;

static void *fake_malloc(void *ctx, size_t n) {
  fake *f = ctx;
  f->last_malloc = n;
  if (f->used > f->budget || n > f->budget - f->used) { /* a test may lower the budget */
    f->failed++;
    return NULL;
  }
  fake_alloc *a = malloc(sizeof *a);
  /* cudaMalloc aligns to 256 or more; aligned_alloc wants a multiple of the
   * alignment, which n is not when caching is off (ASan's returns NULL) */
  void *p = aligned_alloc(512, (n + 511) & ~(size_t)511);
  if (!a || !p) {
    free(a);
    free(p);
    f->failed++;
    return NULL;
  }
  *a = (fake_alloc){p, n, f->allocs};
  f->allocs = a;
  f->used += n;
  f->mallocs++;
  return p;
}

static void fake_free(void *ctx, void *p) {
  fake *f = ctx;
  for (fake_alloc **a = &f->allocs; *a; a = &(*a)->next) {
    if ((*a)->p == p) {
      fake_alloc *x = *a;
      *a = x->next;
      f->used -= x->n;
      f->frees++;
      free(x->p);
      free(x);
      return;
    }
  }
  t_fail(__FILE__, __LINE__, "raw free of a pointer raw never gave");
}

static void *fake_event_record(void *ctx, uintptr_t stream) {
  fake *f = ctx;
  if (f->fail_events) return NULL;
  fake_event *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->stream = stream;
  e->next = f->events;
  f->events = e;
  f->recorded++;
  return e;
}

static bool fake_event_done(void *ctx, void *ev) { return ((fake_event *)ev)->done; }

static void fake_event_wait(void *ctx, void *ev) {
  ((fake *)ctx)->waits++;
  ((fake_event *)ev)->done = true; /* the stream caught up */
}

static void fake_event_destroy(void *ctx, void *ev) {
  fake *f = ctx;
  for (fake_event **e = &f->events; *e; e = &(*e)->next) {
    if (*e == ev) {
      *e = (*e)->next;
      free(ev);
      f->destroyed++;
      return;
    }
  }
  t_fail(__FILE__, __LINE__, "destroy of an unknown event");
}

/* the work queued on stream so far has finished */
static void fake_sync(fake *f, uintptr_t stream) {
  for (fake_event *e = f->events; e; e = e->next)
    if (e->stream == stream) e->done = true;
}

static ts_cache *fake_cache(fake *f, size_t budget, bool caching) {
  memset(f, 0, sizeof *f);
  f->budget = budget;
  ts_cache_raw raw = {fake_malloc, fake_free, fake_event_record, fake_event_done,
                      fake_event_wait, fake_event_destroy, f, NULL};
  ts_cache *c = ts_cache_new(raw, caching);
  CHECK(c != NULL);
  return c;
}

/* destroys c and checks that raw got everything back */
static void fake_done(fake *f, ts_cache *c, int line) {
  ts_cache_destroy(c);
  if (f->allocs || f->used || f->mallocs != f->frees || f->events) {
    char m[200];
    snprintf(m, sizeof m, "after destroy: %d raw mallocs, %d frees, %zu bytes held, events left: %s",
             f->mallocs, f->frees, f->used, f->events ? "yes" : "no");
    t_fail(__FILE__, line, m);
  }
}

static ts_cache_stats stats(ts_cache *c) {
  ts_cache_stats s;
  ts_cache_get_stats(c, &s);
  return s;
}

static void check_inv(ts_cache *c, int line) {
  char why[300];
  if (!ts_cache_check(c, why, sizeof why)) t_fail(__FILE__, line, why);
}

#define EQ(got, want)                                                              \
  do {                                                                             \
    long long g_ = (long long)(got), w_ = (long long)(want);                       \
    if (g_ != w_) {                                                                \
      char m_[300];                                                                \
      snprintf(m_, sizeof m_, "%s is %lld, expected %lld", #got, g_, w_);          \
      t_fail(__FILE__, __LINE__, m_);                                              \
    }                                                                              \
  } while (0)

#define STREQ(got, want)                                                           \
  do {                                                                             \
    const char *g_ = (got), *w_ = (want);                                          \
    if (strcmp(g_, w_) != 0) {                                                     \
      char m_[2000];                                                               \
      snprintf(m_, sizeof m_, "got\n  %s\nexpected\n  %s", g_, w_);                \
      t_fail(__FILE__, __LINE__, m_);                                              \
    }                                                                              \
  } while (0)

#define ADDR(p) ((uintptr_t)(p))

/* ---- cases ------------------------------------------------------------------ */

void test_cache_rounding(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *a = ts_cache_alloc(c, 1, 0), *b = ts_cache_alloc(c, 513, 0), *z = ts_cache_alloc(c, 0, 0);
  void *e = ts_cache_alloc(c, 512, 0);
  CHECK(a && b && z && e);
  EQ(ts_cache_block_size(c, a), 512);
  EQ(ts_cache_block_size(c, b), 1024);
  EQ(ts_cache_block_size(c, z), 512); /* 0 bytes: a unique 512-byte block */
  EQ(ts_cache_block_size(c, e), 512);
  EQ(ts_cache_block_size(c, (char *)a + 1), 0);
  CHECK(z != a && z != b && z != e);
  ts_cache_stats s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_ALL].current, 512 + 1024 + 512 + 512);
  EQ(s.requested_bytes[TS_POOL_ALL].current, 1 + 513 + 0 + 512);
  EQ(s.allocation[TS_POOL_SMALL].current, 4);
  check_inv(c, __LINE__);
  ts_cache_free(c, NULL); /* ignored */
  fake_done(&f, c, __LINE__);
}

void test_cache_small_pool(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  /* 4096 blocks of 512 fill one 2 MiB segment exactly, in address order */
  enum { N = 4096 };
  static void *p[N + 1];
  for (int i = 0; i < N; i++) p[i] = ts_cache_alloc(c, 100, 7);
  EQ(f.mallocs, 1);
  EQ(f.last_malloc, 2 * MB);
  bool adjacent = true;
  for (int i = 1; i < N; i++) adjacent &= ADDR(p[i]) == ADDR(p[0]) + (uintptr_t)i * 512;
  CHECK(adjacent);
  ts_cache_stats s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_SMALL].current, 2 * MB);
  EQ(s.inactive_split[TS_POOL_ALL].current, 0); /* the segment is used up */
  p[N] = ts_cache_alloc(c, 100, 7);             /* the next one needs a second segment */
  EQ(f.mallocs, 2);
  check_inv(c, __LINE__);

  /* a freed small block is reused: same pointer, no raw malloc */
  void *mid = p[1000];
  ts_cache_free(c, mid);
  void *again = ts_cache_alloc(c, 300, 7);
  CHECK(again == mid);
  EQ(f.mallocs, 2);
  for (int i = 0; i <= N; i++) ts_cache_free(c, p[i]);
  s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_ALL].current, 0);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 4 * MB); /* cached, not returned */
  EQ(f.frees, 0);
  EQ(s.largest_free_block, 2 * MB); /* each segment merged back whole */
  EQ(s.inactive_split[TS_POOL_ALL].current, 0);
  check_inv(c, __LINE__);
  fake_done(&f, c, __LINE__);
}

void test_cache_split_merge(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *a = ts_cache_alloc(c, 1000, 0); /* 1024 */
  void *b = ts_cache_alloc(c, 2000, 0); /* 2048 */
  void *d = ts_cache_alloc(c, 512, 0);  /* keeps a and b off the segment's free tail */
  CHECK(ADDR(b) == ADDR(a) + 1024 && ADDR(d) == ADDR(b) + 2048);
  ts_cache_stats s = stats(c);
  EQ(s.inactive_split[TS_POOL_SMALL].current, 1); /* the tail */
  EQ(s.inactive_split_bytes[TS_POOL_SMALL].current, 2 * MB - 3584);
  ts_cache_free(c, a);
  s = stats(c);
  EQ(s.inactive_split[TS_POOL_SMALL].current, 2);
  EQ(s.inactive_split_bytes[TS_POOL_SMALL].current, 2 * MB - 3584 + 1024);
  ts_cache_free(c, b); /* merges with a */
  s = stats(c);
  EQ(s.inactive_split[TS_POOL_SMALL].current, 2);
  EQ(s.inactive_split_bytes[TS_POOL_SMALL].current, 2 * MB - 3584 + 3072);
  check_inv(c, __LINE__);
  /* best fit: the merged 3072 block, not the big tail */
  void *ab = ts_cache_alloc(c, 3072, 0);
  CHECK(ab == a);
  EQ(ts_cache_block_size(c, ab), 3072);
  EQ(f.mallocs, 1);
  /* a smaller request splits the merged block again */
  ts_cache_free(c, ab);
  void *x = ts_cache_alloc(c, 1536, 0);
  CHECK(x == a);
  s = stats(c);
  EQ(s.inactive_split[TS_POOL_SMALL].current, 2); /* 1536 rest + tail */
  EQ(s.inactive_split_bytes[TS_POOL_SMALL].current, 2 * MB - 3584 + 1536);
  ts_cache_free(c, x);
  ts_cache_free(c, d); /* everything merges into the whole segment */
  s = stats(c);
  EQ(s.inactive_split[TS_POOL_ALL].current, 0);
  EQ(s.inactive_split_bytes[TS_POOL_ALL].current, 0);
  EQ(s.largest_free_block, 2 * MB);
  check_inv(c, __LINE__);
  void *whole = ts_cache_alloc(c, 1 * MB, 0); /* 1 MiB is still the small pool */
  CHECK(whole == a);
  EQ(f.mallocs, 1);
  ts_cache_free(c, whole);
  fake_done(&f, c, __LINE__);
}

void test_cache_large_pool(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *big = ts_cache_alloc(c, 11 * MB, 0); /* >= 10 MiB: segment rounded to 2 MiB */
  EQ(f.last_malloc, 12 * MB);
  EQ(ts_cache_block_size(c, big), 12 * MB); /* the 1 MiB rest is not split off */
  ts_cache_stats s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_LARGE].current, 12 * MB);
  EQ(s.requested_bytes[TS_POOL_LARGE].current, 11 * MB);
  EQ(s.reserved_bytes[TS_POOL_LARGE].current, 12 * MB);
  EQ(s.inactive_split[TS_POOL_LARGE].current, 0);

  void *ten = ts_cache_alloc(c, 10 * MB, 0);
  EQ(f.last_malloc, 10 * MB);
  void *odd = ts_cache_alloc(c, 10 * MB + 1, 0);
  EQ(f.last_malloc, 12 * MB);
  EQ(ts_cache_block_size(c, odd), 10 * MB + 512); /* rest 1.5 MiB > 1 MiB: split */

  void *five = ts_cache_alloc(c, 5 * MB, 0); /* < 10 MiB: a 20 MiB segment */
  EQ(f.last_malloc, 20 * MB);
  EQ(f.mallocs, 4);
  EQ(ts_cache_block_size(c, five), 5 * MB);
  void *fourteen = ts_cache_alloc(c, 14 * MB, 0); /* served by the 15 MiB rest */
  EQ(f.mallocs, 4);
  CHECK(ADDR(fourteen) == ADDR(five) + 5 * MB);
  EQ(ts_cache_block_size(c, fourteen), 15 * MB); /* a 1 MiB rest is not split off */
  s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_LARGE].current, 12 * MB + 10 * MB + 10 * MB + 512 + 5 * MB + 15 * MB);
  EQ(s.requested_bytes[TS_POOL_LARGE].current, 11 * MB + 10 * MB + 10 * MB + 1 + 5 * MB + 14 * MB);

  /* just over the small pool; on stream 0 odd's 2 MiB - 512 rest would fit */
  void *just = ts_cache_alloc(c, MB + 1, 5);
  EQ(f.last_malloc, 20 * MB);
  EQ(f.mallocs, 5);
  EQ(ts_cache_block_size(c, just), MB + 512);
  s = stats(c);
  EQ(s.allocation[TS_POOL_LARGE].current, 6);
  EQ(s.allocation[TS_POOL_SMALL].current, 0);
  check_inv(c, __LINE__);
  ts_cache_free(c, five);
  ts_cache_free(c, fourteen);
  void *again = ts_cache_alloc(c, 14 * MB, 0); /* the merged 20 MiB, split 14 + 6 */
  CHECK(again == five);
  EQ(ts_cache_block_size(c, again), 14 * MB);
  EQ(f.mallocs, 5);
  ts_cache_free(c, again);
  ts_cache_free(c, big);
  ts_cache_free(c, ten);
  ts_cache_free(c, odd);
  ts_cache_free(c, just);
  check_inv(c, __LINE__);
  fake_done(&f, c, __LINE__);
}

void test_cache_streams(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *a = ts_cache_alloc(c, 4096, 1);
  ts_cache_free(c, a);
  void *b = ts_cache_alloc(c, 4096, 2); /* stream 2 never sees stream 1's blocks */
  CHECK(b != a);
  EQ(f.mallocs, 2);
  void *a2 = ts_cache_alloc(c, 4096, 1);
  CHECK(a2 == a);
  EQ(f.mallocs, 2);
  void *b2 = ts_cache_alloc(c, 4096, 2);
  CHECK(ADDR(b2) == ADDR(b) + 4096);
  /* the same for the large pool */
  void *l1 = ts_cache_alloc(c, 30 * MB, 1);
  ts_cache_free(c, l1);
  void *l2 = ts_cache_alloc(c, 30 * MB, 2);
  CHECK(l2 != l1);
  EQ(f.mallocs, 4);
  void *l3 = ts_cache_alloc(c, 20 * MB, 1); /* stream 1's 30 MiB, split */
  CHECK(l3 == l1);
  EQ(f.mallocs, 4);
  /* and the other way round: stream 2's free 30 MiB is not stream 1's */
  ts_cache_free(c, l2);
  void *l4 = ts_cache_alloc(c, 25 * MB, 1);
  CHECK(l4 != l2);
  EQ(f.mallocs, 5);
  check_inv(c, __LINE__);
  ts_cache_free(c, a2);
  ts_cache_free(c, b);
  ts_cache_free(c, b2);
  ts_cache_free(c, l3);
  ts_cache_free(c, l4);
  fake_done(&f, c, __LINE__);
}

void test_cache_record_stream(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *p = ts_cache_alloc(c, 4096, 1);
  int dummy;
  CHECK(ts_cache_record_stream(c, &dummy, 2) == TS_ERR_ARG);
  CHECK(strstr(ts_last_error(), "not a live block") != NULL);
  CHECK_OK(ts_cache_record_stream(c, p, 1)); /* its own stream: nothing to wait for */
  CHECK_OK(ts_cache_record_stream(c, p, 2));
  CHECK_OK(ts_cache_record_stream(c, p, 2)); /* twice: one event */
  CHECK_OK(ts_cache_record_stream(c, p, 3));
  ts_cache_free(c, p);
  EQ(f.recorded, 2);
  CHECK(ts_cache_record_stream(c, p, 2) == TS_ERR_ARG); /* no longer live */
  ts_cache_stats s = stats(c);
  EQ(s.allocation[TS_POOL_ALL].current, 0);
  EQ(s.allocated_bytes[TS_POOL_ALL].current, 0);
  EQ(s.active[TS_POOL_ALL].current, 1); /* still held for the other streams */
  EQ(s.active_bytes[TS_POOL_ALL].current, 4096);
  check_inv(c, __LINE__);

  void *q = ts_cache_alloc(c, 4096, 1);
  CHECK(q != p); /* not reusable yet */
  ts_cache_free(c, q);
  fake_sync(&f, 2);
  void *r = ts_cache_alloc(c, 4096, 1);
  CHECK(r != p); /* stream 3 still pending */
  ts_cache_free(c, r);
  EQ(f.destroyed, 1);
  fake_sync(&f, 3);
  r = ts_cache_alloc(c, 4096, 1); /* events queried at allocation: now p is free */
  CHECK(r == p);
  EQ(f.destroyed, 2);
  EQ(f.waits, 0); /* never blocked */
  EQ(f.mallocs, 1);
  s = stats(c);
  EQ(s.active[TS_POOL_ALL].current, 1);
  check_inv(c, __LINE__);

  /* empty_cache waits for pending events, then releases the segment */
  CHECK_OK(ts_cache_record_stream(c, r, 5));
  ts_cache_free(c, r);
  EQ(f.recorded, 3);
  ts_cache_empty(c);
  EQ(f.waits, 1);
  EQ(f.frees, 1);
  s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 0);
  EQ(s.active[TS_POOL_ALL].current, 0);

  /* a device that cannot record events: the block is never reused (no race) */
  void *u = ts_cache_alloc(c, 4096, 1);
  CHECK_OK(ts_cache_record_stream(c, u, 2));
  f.fail_events = true;
  ts_cache_free(c, u);
  f.fail_events = false;
  void *v = ts_cache_alloc(c, 4096, 1);
  CHECK(v != u);
  ts_cache_free(c, v);
  ts_cache_empty(c); /* u's segment stays */
  s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 2 * MB);
  EQ(s.active[TS_POOL_ALL].current, 1);
  check_inv(c, __LINE__);
  fake_done(&f, c, __LINE__); /* destroy gives it back */
}

void test_cache_oom_retry(void) {
  fake f;
  ts_cache *c = fake_cache(&f, 40 * MB, true);
  void *a = ts_cache_alloc(c, 5 * MB, 0);  /* 20 MiB segment */
  void *s1 = ts_cache_alloc(c, 1000, 0);   /* 2 MiB small segment */
  ts_cache_free(c, a);
  ts_cache_free(c, s1);
  EQ(f.used, 22 * MB);
  /* 26 MiB does not fit beside the cache: the cached segments go, then it fits */
  void *b = ts_cache_alloc(c, 25 * MB + 1, 0);
  CHECK(b != NULL);
  EQ(f.last_malloc, 26 * MB);
  EQ(f.failed, 1);
  EQ(f.frees, 2);
  EQ(f.mallocs, 3);
  ts_cache_stats s = stats(c);
  EQ(s.num_alloc_retries, 1);
  EQ(s.num_ooms, 0);
  EQ(s.num_device_alloc, 3);
  EQ(s.num_device_free, 2);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 26 * MB);
  /* a block pending on an event fits after waiting: no raw malloc, no retry */
  CHECK_OK(ts_cache_record_stream(c, b, 9));
  ts_cache_free(c, b);
  void *d = ts_cache_alloc(c, 25 * MB, 0);
  CHECK(d == b);
  EQ(f.waits, 1);
  EQ(f.failed, 2);
  s = stats(c);
  EQ(s.num_alloc_retries, 1); /* found before a raw retry was needed */
  EQ(s.num_ooms, 0);
  check_inv(c, __LINE__);
  ts_cache_free(c, d);
  fake_done(&f, c, __LINE__);
}

void test_cache_oom_fail(void) {
  fake f;
  ts_cache *c = fake_cache(&f, 80 * MB, true);
  void *held = ts_cache_alloc(c, 40 * MB, 0);  /* 40 MiB segment */
  void *five = ts_cache_alloc(c, 5 * MB, 0);   /* 20 MiB segment, 15 MiB free rest */
  void *small = ts_cache_alloc(c, 512, 0);     /* 2 MiB segment, freed: wholly free */
  ts_cache_free(c, small);
  CHECK(held && five);
  EQ(f.used, 62 * MB);
  void *x = ts_cache_alloc(c, 2 * GB, 0);
  CHECK(x == NULL);
  ts_cache_stats s = stats(c);
  EQ(s.num_ooms, 1);
  EQ(s.num_alloc_retries, 1);
  EQ(f.frees, 1); /* the small segment went back before the retry */
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 60 * MB);
  EQ(s.largest_free_block, 15 * MB);
  ts_cache_oom o;
  CHECK(ts_cache_last_oom(c, &o));
  EQ(o.requested, 2 * GB);
  EQ(o.allocated, 45 * MB);
  EQ(o.reserved, 60 * MB);
  EQ(o.largest_free, 15 * MB);
  char msg[512];
  ts_cache_oom_message(c, 2 * GB, "cuda:0", (size_t)(79.1 * GB), (size_t)(1.2 * GB), msg, sizeof msg);
  STREQ(msg, "CUDA out of memory: tried to allocate 2.00 GiB on cuda:0 (79.1 GiB total, 1.2 GiB free); "
             "tensors hold 45.0 MiB, the cache 15.0 MiB more (largest free block 15 MiB). "
             "Drop references, call cuda.empty_cache(), or use a smaller batch.");
  /* the allocator stays usable, and a small buffer is cut, not overrun */
  void *y = ts_cache_alloc(c, 10 * MB, 0);
  CHECK(y != NULL);
  char tiny[12];
  ts_cache_oom_message(c, 17, "cuda:1", GB, 0, tiny, sizeof tiny);
  STREQ(tiny, "CUDA out of");
  ts_cache_oom_message(c, 17, "cuda:1", 3 * GB / 2, 0, msg, sizeof msg);
  STREQ(msg, "CUDA out of memory: tried to allocate 17 B on cuda:1 (1.5 GiB total, 0 B free); "
             "tensors hold 55.0 MiB, the cache 5.0 MiB more (largest free block 5 MiB). "
             "Drop references, call cuda.empty_cache(), or use a smaller batch.");
  /* SIZE_MAX fails cleanly */
  CHECK(ts_cache_alloc(c, (size_t)-1, 0) == NULL);
  s = stats(c);
  EQ(s.num_ooms, 2);
  check_inv(c, __LINE__);
  ts_cache_free(c, held);
  ts_cache_free(c, five);
  ts_cache_free(c, y);
  fake_done(&f, c, __LINE__);
}

void test_cache_empty(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *b = ts_cache_alloc(c, 12 * MB, 0);  /* 12 MiB, kept */
  void *a = ts_cache_alloc(c, 5 * MB, 0);   /* 20 MiB, freed: wholly free */
  void *s1 = ts_cache_alloc(c, 600, 0);     /* small segment, part kept */
  void *s2 = ts_cache_alloc(c, 600, 0);
  void *s3 = ts_cache_alloc(c, 600, 1);     /* another stream's small segment, freed */
  void *e = ts_cache_alloc(c, 30 * MB, 0);  /* freed while stream 4 may use it */
  CHECK_OK(ts_cache_record_stream(c, e, 4));
  ts_cache_free(c, a);
  ts_cache_free(c, s2);
  ts_cache_free(c, s3);
  ts_cache_free(c, e);
  EQ(f.mallocs, 5);
  ts_cache_stats s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 20 * MB + 12 * MB + 4 * MB + 30 * MB);
  ts_cache_empty(c);
  EQ(f.frees, 3); /* a's, s3's and (after waiting) e's segments; b and s1's stay */
  EQ(f.waits, 1);
  s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 12 * MB + 2 * MB);
  EQ(s.reserved_bytes[TS_POOL_SMALL].current, 2 * MB);
  EQ(s.segment[TS_POOL_ALL].current, 2);
  EQ(s.num_device_free, 3);
  EQ(s.allocated_bytes[TS_POOL_ALL].current, 12 * MB + 1024);
  check_inv(c, __LINE__);
  ts_cache_free(c, b);
  ts_cache_free(c, s1);
  ts_cache_empty(c);
  s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 0);
  EQ(f.used, 0);
  fake_done(&f, c, __LINE__);
}

void test_cache_stats(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *a = ts_cache_alloc(c, 1000, 0);    /* small 1024 */
  void *b = ts_cache_alloc(c, 3 * MB, 0);  /* large 3 MiB of 20 */
  void *d = ts_cache_alloc(c, 700, 0);     /* small 1024 */
  ts_cache_free(c, a);
  ts_cache_stats s = stats(c);
  ts_cache_stat *ab = s.allocated_bytes;
  EQ(ab[TS_POOL_SMALL].current, 1024);
  EQ(ab[TS_POOL_SMALL].peak, 2048);
  EQ(ab[TS_POOL_SMALL].allocated, 2048);
  EQ(ab[TS_POOL_SMALL].freed, 1024);
  EQ(ab[TS_POOL_LARGE].current, 3 * MB);
  EQ(ab[TS_POOL_LARGE].peak, 3 * MB);
  EQ(ab[TS_POOL_ALL].current, 3 * MB + 1024);
  EQ(ab[TS_POOL_ALL].peak, 3 * MB + 2048);
  EQ(ab[TS_POOL_ALL].allocated, 3 * MB + 2048);
  EQ(ab[TS_POOL_ALL].freed, 1024);
  EQ(s.requested_bytes[TS_POOL_ALL].current, 3 * MB + 700);
  EQ(s.requested_bytes[TS_POOL_ALL].peak, 3 * MB + 1700);
  EQ(s.allocation[TS_POOL_ALL].current, 2);
  EQ(s.allocation[TS_POOL_ALL].peak, 3);
  EQ(s.allocation[TS_POOL_ALL].allocated, 3);
  EQ(s.allocation[TS_POOL_ALL].freed, 1);
  EQ(s.segment[TS_POOL_SMALL].current, 1);
  EQ(s.segment[TS_POOL_LARGE].current, 1);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 22 * MB);
  EQ(s.active[TS_POOL_ALL].current, 2);
  EQ(s.inactive_split[TS_POOL_SMALL].current, 2); /* a's hole and the tail */
  EQ(s.inactive_split_bytes[TS_POOL_SMALL].current, 2 * MB - 1024);
  EQ(s.inactive_split[TS_POOL_LARGE].current, 1);
  EQ(s.inactive_split_bytes[TS_POOL_LARGE].current, 17 * MB);
  EQ(s.num_device_alloc, 2);
  EQ(s.largest_free_block, 17 * MB);

  ts_cache_reset_peak(c);
  s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_ALL].peak, 3 * MB + 1024);
  EQ(s.allocation[TS_POOL_ALL].peak, 2);
  EQ(s.allocated_bytes[TS_POOL_ALL].allocated, 3 * MB + 2048); /* totals untouched */
  ts_cache_free(c, b);
  s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_ALL].peak, 3 * MB + 1024);
  EQ(s.allocated_bytes[TS_POOL_LARGE].current, 0);
  EQ(s.allocated_bytes[TS_POOL_LARGE].peak, 3 * MB);
  EQ(s.allocated_bytes[TS_POOL_LARGE].freed, 3 * MB);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 22 * MB);

  ts_cache_reset_accumulated(c);
  s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_ALL].allocated, 0);
  EQ(s.allocated_bytes[TS_POOL_ALL].freed, 0);
  EQ(s.allocated_bytes[TS_POOL_ALL].current, 1024);
  EQ(s.num_device_alloc, 0);
  ts_cache_empty(c);
  s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 2 * MB);
  EQ(s.reserved_bytes[TS_POOL_ALL].peak, 22 * MB);
  EQ(s.reserved_bytes[TS_POOL_ALL].freed, 20 * MB);
  EQ(s.segment[TS_POOL_LARGE].freed, 1);
  EQ(s.num_device_free, 1);
  size_t al = 0, re = 0;
  ts_cache_usage(c, &al, &re);
  EQ(al, 1024);
  EQ(re, 2 * MB);
  check_inv(c, __LINE__);
  ts_cache_free(c, d);
  fake_done(&f, c, __LINE__);
}

typedef struct keys { int n; int64_t peak_small, retries; bool dup; char seen[200][48]; } keys;

static void visit(void *ud, const char *key, int64_t v) {
  keys *k = ud;
  for (int i = 0; i < k->n && i < 200; i++)
    if (strcmp(k->seen[i], key) == 0) k->dup = true;
  if (k->n < 200) snprintf(k->seen[k->n], sizeof k->seen[0], "%s", key);
  k->n++;
  if (strcmp(key, "allocated_bytes.small_pool.peak") == 0) k->peak_small = v;
  if (strcmp(key, "num_alloc_retries") == 0) k->retries = v;
}

void test_cache_stats_keys(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *a = ts_cache_alloc(c, 1500, 0);
  ts_cache_stats s = stats(c);
  static keys k;
  memset(&k, 0, sizeof k);
  ts_cache_stats_foreach(&s, visit, &k);
  EQ(k.n, 9 * 3 * 4 + 4);
  CHECK(!k.dup);
  EQ(k.peak_small, 1536);
  EQ(k.retries, 0);
  CHECK(strcmp(k.seen[0], "allocation.all.current") == 0);
  bool found = false;
  for (int i = 0; i < k.n; i++) found |= strcmp(k.seen[i], "inactive_split_bytes.large_pool.freed") == 0;
  CHECK(found);
  ts_cache_free(c, a);
  fake_done(&f, c, __LINE__);
}

void test_cache_no_caching(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, false);
  void *a = ts_cache_alloc(c, 100, 0);
  EQ(f.mallocs, 1);
  EQ(f.last_malloc, 100); /* exactly the bytes asked for: a guarding device sees an overrun of one byte */
  ts_cache_free(c, a);
  EQ(f.frees, 1);
  void *b = ts_cache_alloc(c, 100, 0);
  void *d = ts_cache_alloc(c, 5 * MB, 0);
  EQ(f.mallocs, 3);
  EQ(f.last_malloc, 5 * MB); /* no 20 MiB segment */
  ts_cache_stats s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_ALL].current, 100 + 5 * MB);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 100 + 5 * MB);
  EQ(s.reserved_bytes[TS_POOL_ALL].peak, 100 + 5 * MB);
  EQ(s.allocation[TS_POOL_ALL].allocated, 3);
  EQ(s.segment[TS_POOL_SMALL].current, 1);
  EQ(s.segment[TS_POOL_LARGE].current, 1);
  EQ(s.num_device_alloc, 3);
  EQ(s.num_device_free, 1);
  /* record_stream is still honoured before the memory goes back */
  CHECK_OK(ts_cache_record_stream(c, d, 3));
  ts_cache_free(c, d);
  EQ(f.frees, 1);
  fake_sync(&f, 3);
  ts_cache_free(c, b);
  void *e = ts_cache_alloc(c, 100, 0); /* processes the event: d goes back */
  EQ(f.frees, 3);
  EQ(f.mallocs, 4);
  s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 100);
  check_inv(c, __LINE__);
  ts_cache_free(c, e);
  s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 0);
  fake_done(&f, c, __LINE__);

  /* the environment switch */
  const char *old = getenv("TENSH_NO_CUDA_CACHING");
  char *saved = old ? strdup(old) : NULL;
  unsetenv("TENSH_NO_CUDA_CACHING");
  CHECK(ts_cache_env_caching());
  setenv("TENSH_NO_CUDA_CACHING", "0", 1);
  CHECK(ts_cache_env_caching());
  setenv("TENSH_NO_CUDA_CACHING", "1", 1);
  CHECK(!ts_cache_env_caching());
  if (saved) setenv("TENSH_NO_CUDA_CACHING", saved, 1);
  else unsetenv("TENSH_NO_CUDA_CACHING");
  free(saved);
}

void test_cache_summary(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  void *a = ts_cache_alloc(c, 1000, 0);
  void *b = ts_cache_alloc(c, 3 * MB, 0);
  ts_cache_stats s = stats(c);
  static char buf[8192];
  ts_cache_summary(&s, "cuda:0 (NVIDIA H100 80GB HBM3)", buf, sizeof buf);
  const char *want[] = {
      "tensh CUDA memory summary, cuda:0 (NVIDIA H100 80GB HBM3)",
      "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
      "| Allocated memory      |   3073 KiB |   3073 KiB |   3073 KiB |      0 B   |",
      "|       from large pool |   3072 KiB |   3072 KiB |   3072 KiB |      0 B   |",
      "|       from small pool |      1 KiB |      1 KiB |      1 KiB |      0 B   |",
      "| Active memory         |",
      "| Requested memory      |   3072 KiB |",
      "| GPU reserved memory   |  22528 KiB |",
      "| Non-releasable memory |  19455 KiB |",
      "| Allocations           |       2    |       2    |       2    |       0    |",
      "|       from small pool |       1    |       1    |       1    |       0    |",
      "| Active allocs         |",
      "| GPU reserved segments |       2    |",
      "| Non-releasable allocs |       2    |",
      "CUDA OOMs: 0",
      "cudaMalloc retries: 0",
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    if (!strstr(buf, want[i])) {
      char m[9000];
      snprintf(m, sizeof m, "summary lacks '%s':\n%s", want[i], buf);
      t_fail(__FILE__, __LINE__, m);
    }
  }
  /* every line is 77 characters wide */
  int lines = 0;
  bool even = true;
  for (const char *p = buf; *p; lines++) {
    const char *e = strchr(p, '\n');
    if (!e) break;
    even &= e - p == 77;
    p = e + 1;
  }
  CHECK(even);
  EQ(lines, 6 + 9 * 4 + 1);
  /* a small buffer is cut and terminated */
  char tiny[40];
  memset(tiny, 'x', sizeof tiny);
  ts_cache_summary(&s, "cuda:0", tiny, sizeof tiny);
  EQ(strlen(tiny), sizeof tiny - 1);
  ts_cache_free(c, a);
  ts_cache_free(c, b);
  fake_done(&f, c, __LINE__);
}

void test_cache_format_bytes(void) {
  char b[32];
  ts_format_bytes(17, b, sizeof b);
  STREQ(b, "17 B");
  ts_format_bytes(1023, b, sizeof b);
  STREQ(b, "1023 B");
  ts_format_bytes(1536, b, sizeof b);
  STREQ(b, "1.50 KiB");
  ts_format_bytes(512 * MB, b, sizeof b);
  STREQ(b, "512.00 MiB");
  ts_format_bytes(2 * GB, b, sizeof b);
  STREQ(b, "2.00 GiB");
  ts_format_bytes(3 * GB * 1024, b, sizeof b);
  STREQ(b, "3.00 TiB");
  ts_format_bytes(0, b, sizeof b);
  STREQ(b, "0 B");
}

/* ---- random stress ---------------------------------------------------------- */

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

typedef struct live { char *p; size_t n, size; uintptr_t stream; } live;

static int by_addr(const void *a, const void *b) {
  const live *x = a, *y = b;
  return x->p < y->p ? -1 : x->p > y->p;
}

/* sizes that hit both pools and every segment rule */
static size_t random_size(uint64_t *r) {
  switch (rnd(r) % 6) {
    case 0: return rnd(r) % 600;
    case 1: return rnd(r) % (64 * KB);
    case 2: return rnd(r) % MB + 1;
    case 3: return MB + rnd(r) % (9 * MB);
    case 4: return 10 * MB + rnd(r) % (20 * MB);
    default: return rnd(r) % (4 * KB);
  }
}

static bool no_overlap(live *l, int n, char *why, size_t wn) {
  static live sorted[512];
  memcpy(sorted, l, (size_t)n * sizeof *l);
  qsort(sorted, (size_t)n, sizeof *sorted, by_addr);
  for (int i = 1; i < n; i++)
    if (sorted[i - 1].p + sorted[i - 1].size > sorted[i].p) {
      snprintf(why, wn, "live blocks %p (+%zu) and %p overlap", (void *)sorted[i - 1].p, sorted[i - 1].size,
               (void *)sorted[i].p);
      return false;
    }
  return true;
}

void test_cache_stress(void) {
  fake f;
  ts_cache *c = fake_cache(&f, 3 * GB, true);
  enum { MAXLIVE = 512 };
  static live l[MAXLIVE];
  int n = 0, ooms = 0;
  uint64_t r = 0x1234567;
  char why[300];
  bool ok = true;
  for (int step = 0; step < 20000 && ok; step++) {
    int cap = step < 10000 ? MAXLIVE : 120; /* first roomy, then tight: OOM retries and failures */
    if (step == 10000) f.budget = 400 * MB;
    uint64_t op = rnd(&r) % 100;
    if (op < 50 && n < cap) {
      size_t want = random_size(&r);
      uintptr_t stream = 1 + rnd(&r) % 2;
      char *p = ts_cache_alloc(c, want, stream);
      if (!p) {
        ooms++;
        continue;
      }
      size_t size = ts_cache_block_size(c, p);
      if (size < want || size % 512 || (size_t)p % 512) {
        snprintf(why, sizeof why, "block %p of size %zu for %zu bytes", (void *)p, size, want);
        ok = false;
        break;
      }
      p[0] = (char)step, p[size - 1] = (char)step; /* ASan: the block lies inside raw memory */
      l[n++] = (live){p, want, size, stream};
    } else if (op < 90 && n > 0) {
      int i = (int)(rnd(&r) % (uint64_t)n);
      if (rnd(&r) % 8 == 0) CHECK_OK(ts_cache_record_stream(c, l[i].p, 1 + rnd(&r) % 3));
      ts_cache_free(c, l[i].p);
      l[i] = l[--n];
    } else if (op < 97) {
      fake_sync(&f, 1 + rnd(&r) % 3);
    } else if (op < 98) {
      ts_cache_empty(c);
    }
    if (step % 97 == 0 || step > 19900) {
      ts_cache_stats s = stats(c);
      if (!ts_cache_check(c, why, sizeof why) || !no_overlap(l, n, why, sizeof why)) ok = false;
      else if (s.reserved_bytes[TS_POOL_ALL].current < s.allocated_bytes[TS_POOL_ALL].current) {
        snprintf(why, sizeof why, "reserved below allocated");
        ok = false;
      } else if ((size_t)s.reserved_bytes[TS_POOL_ALL].current != f.used) {
        snprintf(why, sizeof why, "reserved %lld but raw holds %zu", (long long)s.reserved_bytes[TS_POOL_ALL].current,
                 f.used);
        ok = false;
      }
    }
  }
  if (!ok) t_fail(__FILE__, __LINE__, why);
  ts_cache_stats s = stats(c);
  CHECK(ooms > 0 && s.num_alloc_retries > ooms); /* tight enough to fail, and to retry with success */
  EQ(s.num_ooms, ooms);
  while (n > 0) ts_cache_free(c, l[--n].p);
  s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_ALL].current, 0);
  EQ(s.requested_bytes[TS_POOL_ALL].current, 0);
  EQ(s.allocation[TS_POOL_ALL].current, 0);
  check_inv(c, __LINE__);
  ts_cache_empty(c);
  s = stats(c);
  EQ(s.reserved_bytes[TS_POOL_ALL].current, 0);
  EQ(s.active[TS_POOL_ALL].current, 0);
  EQ(s.segment[TS_POOL_ALL].current, 0);
  EQ(f.used, 0);
  EQ(f.mallocs, f.frees);
  EQ(s.num_device_alloc, f.mallocs);
  CHECK(f.events == NULL);
  fake_done(&f, c, __LINE__);
}

/* ---- bounds on what the cache holds idle ------------------------------------ */

static bool fake_holds(const fake *f, const void *p) {
  for (const fake_alloc *a = f->allocs; a; a = a->next)
    if (a->p == p) return true;
  return false;
}

void test_cache_idle_limits(void) {
  fake f;
  ts_cache *c = fake_cache(&f, GB, true);
  ts_cache_set_idle_limits(c, 32 * MB, 64 * MB);
  /* above max_segment: back to raw as soon as it is free, every time */
  for (int i = 0; i < 3; i++) ts_cache_free(c, ts_cache_alloc(c, 100 * MB, 0));
  EQ(f.mallocs, 3);
  EQ(f.frees, 3);
  EQ(stats(c).reserved_bytes[TS_POOL_ALL].current, 0);
  /* at most max_segment: cached and reused */
  for (int i = 0; i < 3; i++) ts_cache_free(c, ts_cache_alloc(c, 30 * MB, 0));
  EQ(f.mallocs, 4);
  EQ(ts_cache_idle_bytes(c), 30 * MB);
  check_inv(c, __LINE__);
  /* three idle 30 MiB segments are over the 64 MiB limit: the longest idle goes */
  void *a = ts_cache_alloc(c, 30 * MB, 0), *b = ts_cache_alloc(c, 30 * MB, 0), *d = ts_cache_alloc(c, 30 * MB, 0);
  EQ(f.mallocs, 6);
  ts_cache_free(c, a);
  ts_cache_free(c, b);
  EQ(f.frees, 3);
  ts_cache_free(c, d);
  EQ(f.frees, 4);
  CHECK(!fake_holds(&f, a) && fake_holds(&f, b) && fake_holds(&f, d));
  EQ(ts_cache_idle_bytes(c), 60 * MB);
  EQ(stats(c).reserved_bytes[TS_POOL_ALL].current, 60 * MB);
  check_inv(c, __LINE__);
  /* a partly used segment is not idle: its free block stays whatever the limit */
  void *p = ts_cache_alloc(c, 5 * MB, 0), *q = ts_cache_alloc(c, 5 * MB, 0); /* one 20 MiB segment... */
  EQ(f.mallocs, 6);                                                         /* ...carved from b's or d's */
  EQ(ts_cache_idle_bytes(c), 30 * MB);
  ts_cache_free(c, p);
  EQ(ts_cache_idle_bytes(c), 30 * MB);
  /* new bounds apply to what is idle now */
  ts_cache_set_idle_limits(c, 32 * MB, 0);
  EQ(ts_cache_idle_bytes(c), 0);
  EQ(stats(c).reserved_bytes[TS_POOL_ALL].current, 30 * MB);
  ts_cache_free(c, q);
  EQ(stats(c).reserved_bytes[TS_POOL_ALL].current, 0);
  /* the small pool's 2 MiB segments count too */
  ts_cache_set_idle_limits(c, SIZE_MAX, 3 * MB);
  void *s1 = ts_cache_alloc(c, 600, 0), *s2 = ts_cache_alloc(c, 600, 1); /* two streams: two segments */
  ts_cache_free(c, s1);
  EQ(ts_cache_idle_bytes(c), 2 * MB);
  ts_cache_free(c, s2);
  EQ(ts_cache_idle_bytes(c), 2 * MB);
  check_inv(c, __LINE__);
  fake_done(&f, c, __LINE__);
}

/* random allocations and frees under tight bounds: the invariants (ts_cache_check
 * counts idle bytes and checks the limit) hold throughout */
void test_cache_idle_stress(void) {
  fake f;
  ts_cache *c = fake_cache(&f, 2 * GB, true);
  ts_cache_set_idle_limits(c, 16 * MB, 48 * MB);
  enum { MAXLIVE = 64 };
  live l[MAXLIVE];
  int n = 0;
  uint64_t r = 0x2605;
  char why[300];
  for (int step = 0; step < 20000; step++) {
    if (rnd(&r) % 2 == 0 && n < MAXLIVE) {
      size_t want = random_size(&r);
      char *p = ts_cache_alloc(c, want, 1 + rnd(&r) % 2);
      CHECK(p != NULL);
      l[n++] = (live){p, want, ts_cache_block_size(c, p), 0};
    } else if (n > 0) {
      int i = (int)(rnd(&r) % (uint64_t)n);
      ts_cache_free(c, l[i].p);
      l[i] = l[--n];
    }
    if (step % 101 == 0 && !ts_cache_check(c, why, sizeof why)) {
      t_fail(__FILE__, __LINE__, why);
      break;
    }
  }
  while (n > 0) ts_cache_free(c, l[--n].p);
  CHECK(ts_cache_idle_bytes(c) <= 48 * MB);
  EQ(stats(c).reserved_bytes[TS_POOL_ALL].current, ts_cache_idle_bytes(c));
  check_inv(c, __LINE__);
  fake_done(&f, c, __LINE__);
}

/* ---- threads: the mutex keeps the cache whole ------------------------------ */

typedef struct worker { ts_cache *c; uintptr_t stream; uint64_t seed; bool ok; } worker;

static void *work(void *arg) {
  worker *w = arg;
  void *held[64];
  int n = 0;
  for (int i = 0; i < 5000; i++) {
    if (n < 64 && rnd(&w->seed) % 2) {
      size_t want = rnd(&w->seed) % 3 ? rnd(&w->seed) % 8192 : rnd(&w->seed) % (12 * MB);
      char *p = ts_cache_alloc(w->c, want, w->stream);
      if (!p) continue;
      if (ts_cache_block_size(w->c, p) < want) w->ok = false;
      held[n++] = p;
    } else if (n > 0) {
      int k = (int)(rnd(&w->seed) % (uint64_t)n);
      ts_cache_free(w->c, held[k]);
      held[k] = held[--n];
    }
  }
  while (n > 0) ts_cache_free(w->c, held[--n]);
  return NULL;
}

void test_cache_threads(void) {
  fake f; /* only the cache calls it, under the cache's mutex */
  ts_cache *c = fake_cache(&f, 2 * GB, true);
  enum { T = 4 };
  pthread_t th[T];
  worker w[T];
  bool started[T];
  for (int i = 0; i < T; i++) {
    w[i] = (worker){c, (uintptr_t)(i % 2), 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1), true};
    started[i] = pthread_create(&th[i], NULL, work, &w[i]) == 0;
    if (!started[i]) work(&w[i]); /* no thread to spare: still run its share */
  }
  for (int i = 0; i < T; i++)
    if (started[i]) pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) CHECK(w[i].ok);
  check_inv(c, __LINE__);
  ts_cache_stats s = stats(c);
  EQ(s.allocated_bytes[TS_POOL_ALL].current, 0);
  ts_cache_empty(c);
  EQ(f.used, 0);
  fake_done(&f, c, __LINE__);
}

/* The CPU cache under ASan (src/cpu/cache.c): a block is usable for exactly
 * the bytes asked for, its rounding and a freed block are poisoned, so ASan
 * still sees overruns and uses after free in tensor buffers. Without ASan
 * only the allocation itself is checked. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISONED(p) __asan_address_is_poisoned(p)
#else
#define POISONED(p) ((void)(p), -1)
#endif
void test_cpu_cache_poison(void) {
  size_t n = 4097; /* rounded up to 4608 by the cache */
  char *p = ts_cpu_cache_alloc(n);
  CHECK(p != NULL);
  if (!p) return;
  memset(p, 1, n);
  CHECK(ts_cache_block_size(ts_cpu_cache(), p) >= n);
  const char *off = getenv("TENSH_NO_CPU_CACHING");
  if (POISONED(p) != -1 && !(off && *off && strcmp(off, "0") != 0)) {
    CHECK(POISONED(p) == 0 && POISONED(p + n - 1) == 0);
    CHECK(POISONED(p + n) == 1); /* one past the end: the block's rounding */
    ts_cpu_cache_free(p);
    CHECK(POISONED(p) == 1); /* freed, still in the cache */
    return;
  }
  ts_cpu_cache_free(p);
}

/* ---- the marks a checking device gets (raw.mark) ----------------------------- */

/* A model of what a device that checks accesses (the simulated one) knows:
 * per byte of every raw allocation, live (handed out) or not, from the marks
 * alone; and the marks in order, for the exact sequence cases. */
typedef struct mark_rec { void *p; size_t size, live; uintptr_t stream; } mark_rec;
typedef struct mark_seg { uintptr_t base; size_t size; unsigned char *live; } mark_seg;
typedef struct marks {
  mark_rec log[64];
  int n;
  mark_seg seg[64];
  int nseg;
  int bad; /* marks outside every raw allocation */
} marks;
static marks the_marks;

static void fake_mark(void *ctx, void *p, size_t size, size_t live, uintptr_t stream) {
  marks *m = &the_marks;
  if (m->n < 64) m->log[m->n] = (mark_rec){p, size, live, stream};
  m->n++;
  fake *f = ctx;
  for (fake_alloc *a = f->allocs; a; a = a->next) { /* a new segment: its model */
    bool known = false;
    for (int i = 0; i < m->nseg; i++) known |= m->seg[i].base == ADDR(a->p);
    if (!known && m->nseg < 64) m->seg[m->nseg++] = (mark_seg){ADDR(a->p), a->n, calloc(a->n, 1)};
  }
  for (int i = 0; i < m->nseg; i++) {
    if (ADDR(p) >= m->seg[i].base && ADDR(p) + size <= m->seg[i].base + m->seg[i].size) {
      unsigned char *s = m->seg[i].live + (ADDR(p) - m->seg[i].base);
      memset(s, 1, live);
      memset(s + live, 0, size - live);
      return;
    }
  }
  m->bad++;
}

static ts_cache *marking_cache(fake *f, bool caching) {
  memset(&the_marks, 0, sizeof the_marks);
  memset(f, 0, sizeof *f);
  f->budget = GB;
  ts_cache_raw raw = {fake_malloc,        fake_free, fake_event_record, fake_event_done, fake_event_wait,
                      fake_event_destroy, f,         fake_mark};
  return ts_cache_new(raw, caching);
}

static void marks_free(void) {
  for (int i = 0; i < the_marks.nseg; i++) free(the_marks.seg[i].live);
}

#define MARK(k, P, SIZE, LIVE, STREAM)                                                                  \
  do {                                                                                                  \
    EQ(ADDR(the_marks.log[k].p), ADDR(P));                                                              \
    EQ(the_marks.log[k].size, SIZE);                                                                    \
    EQ(the_marks.log[k].live, LIVE);                                                                    \
    EQ(the_marks.log[k].stream, STREAM);                                                                \
  } while (0)

void test_cache_marks(void) {
  fake f;
  ts_cache *c = marking_cache(&f, true);
  CHECK(c != NULL);
  void *a = ts_cache_alloc(c, 100, 7);
  EQ(the_marks.n, 2);
  MARK(0, a, 2 * MB, 0, 7); /* the new segment: nothing handed out */
  MARK(1, a, 512, 100, 7);  /* the block: its 100 bytes */
  void *b = ts_cache_alloc(c, 1000, 7);
  EQ(ADDR(b), ADDR(a) + 512);
  MARK(2, b, 1024, 1000, 7);
  ts_cache_free(c, a);
  MARK(3, a, 512, 0, 7); /* cached: poisoned */
  void *a2 = ts_cache_alloc(c, 200, 7);
  EQ(ADDR(a2), ADDR(a));
  MARK(4, a, 512, 200, 7); /* handed out again: marked again */
  /* a block used on another stream is marked free only when that work is done */
  CHECK_OK(ts_cache_record_stream(c, b, 9));
  ts_cache_free(c, b);
  EQ(the_marks.n, 5);
  fake_sync(&f, 9);
  void *d = ts_cache_alloc(c, 10, 7);
  MARK(5, b, 1024, 0, 7);
  MARK(6, d, 512, 10, 7);
  EQ(the_marks.bad, 0);
  ts_cache_free(c, a2);
  ts_cache_free(c, d);
  fake_done(&f, c, __LINE__);
  marks_free();

  /* caching off: each block is its own raw allocation of exactly n bytes */
  c = marking_cache(&f, false);
  void *e = ts_cache_alloc(c, 100, 3);
  EQ(the_marks.n, 2);
  MARK(0, e, 100, 0, 3);
  MARK(1, e, 100, 100, 3);
  ts_cache_free(c, e);
  MARK(2, e, 100, 0, 3);
  fake_done(&f, c, __LINE__);
  marks_free();
}

/* Random allocations and frees: after each, the bytes the marks say are live
 * are exactly the requested bytes of the live blocks. */
void test_cache_marks_model(void) {
  fake f;
  ts_cache *c = marking_cache(&f, true);
  CHECK(c != NULL);
  enum { N = 64 };
  void *p[N] = {0};
  size_t n[N] = {0};
  uint64_t r = 12345;
  for (int step = 0; step < 3000; step++) {
    r = r * 6364136223846793005ULL + 1442695040888963407ULL;
    int k = (int)(r >> 33) % N;
    if (p[k]) {
      ts_cache_free(c, p[k]);
      p[k] = NULL;
    } else {
      size_t sizes[] = {0, 1, 3, 511, 512, 513, 4000, 70000, 2 * MB, 3 * MB + 5};
      n[k] = sizes[(r >> 20) % 10];
      p[k] = ts_cache_alloc(c, n[k], (r >> 50) % 2);
      CHECK(p[k] != NULL);
    }
    if (step % 100 != 99) continue;
    size_t want = 0, got = 0;
    for (int i = 0; i < N; i++) {
      if (!p[i]) continue;
      want += n[i];
      for (int s = 0; s < the_marks.nseg; s++)
        if (ADDR(p[i]) >= the_marks.seg[s].base && ADDR(p[i]) < the_marks.seg[s].base + the_marks.seg[s].size)
          for (size_t j = 0; j < n[i]; j++) CHECK(the_marks.seg[s].live[ADDR(p[i]) - the_marks.seg[s].base + j]);
    }
    for (int s = 0; s < the_marks.nseg; s++)
      for (fake_alloc *a = f.allocs; a; a = a->next)
        if (ADDR(a->p) == the_marks.seg[s].base)
          for (size_t j = 0; j < the_marks.seg[s].size; j++) got += the_marks.seg[s].live[j];
    EQ(got, want);
    EQ(the_marks.bad, 0);
  }
  for (int i = 0; i < N; i++) ts_cache_free(c, p[i]);
  fake_done(&f, c, __LINE__);
  marks_free();
}
