/* The caching device allocator (see cache_alloc.h for the policy): plain C
 * over an injected raw allocator, so the same code serves cudaMalloc and the
 * fake device of the C tests.
 *
 * Structures. A segment is one raw allocation, tiled by blocks in address
 * order (prev/next). Each block is in exactly one state:
 *   allocated  handed out; found by pointer in an open-addressing map;
 *   pending    freed, but waiting for events on streams it was recorded on;
 *   free       in its pool's free set, a treap ordered by (stream, size, ptr).
 * Two free blocks are never neighbours (free merges them), and the first
 * block of a segment is never freed while the segment lives, so it carries
 * the segment's size and its place in the list of all segments. */
#include "cache_alloc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define MIN_BLOCK 512            /* every size is a multiple of this */
#define SMALL_SIZE MiB           /* largest request served by the small pool */
#define SMALL_SEGMENT (2 * MiB)  /* small pool segments */
#define MIN_LARGE_ALLOC (10 * MiB) /* below this a large request gets a LARGE_SEGMENT */
#define LARGE_SEGMENT (20 * MiB)
#define ROUND_LARGE (2 * MiB)    /* bigger segments are rounded to this */
#define MAX_REQUEST (SIZE_MAX / 4) /* rounding can never overflow below this */

typedef struct block block;
struct block {
  uintptr_t ptr;
  size_t size;            /* rounded; a multiple of MIN_BLOCK */
  size_t requested;       /* unrounded size asked for while allocated */
  uintptr_t stream;       /* the stream it was allocated on; it is reused only there */
  int pool;               /* TS_POOL_SMALL or TS_POOL_LARGE, that of its segment */
  bool allocated, is_free;
  int event_count;        /* events to complete before a pending block becomes free */
  block *prev, *next;     /* neighbours in the segment, by address */
  block *left, *right;    /* children in the free set's treap */
  uint32_t prio;          /* treap heap priority */
  uint64_t freed_at;      /* when it became a wholly free segment (the cache's tick), for trimming */
  block *link;            /* scratch list (segments to release) */
  uintptr_t *uses;        /* (nuses) streams from record_stream, != stream */
  int nuses, cap_uses;
  /* valid in a segment's first block only */
  size_t seg_size;
  block *seg_prev, *seg_next;
};

typedef struct pending { void *ev; block *b; } pending;

struct ts_cache {
  pthread_mutex_t lock;
  ts_cache_raw raw;
  bool caching;
  block *free_root[TS_POOL_COUNT]; /* [TS_POOL_SMALL], [TS_POOL_LARGE]; [TS_POOL_ALL] unused */
  block *segments;                 /* list of first blocks of all segments */
  block **map;                     /* (map_cap) allocated blocks by ptr, linear probing */
  size_t map_cap, map_count;
  pending *pend;                   /* (npend) events in the order recorded */
  size_t npend, cap_pend;
  ts_cache_stats st;               /* largest_free_block filled in at query time */
  ts_cache_oom last_oom;
  bool has_oom;
  uint64_t rng;
  /* what the cache may hold idle (ts_cache_set_idle_limits) */
  size_t max_segment, idle_limit;
  size_t idle_bytes;               /* bytes in wholly free segments: the free set's unsplit blocks */
  uint64_t tick;                   /* counts segments becoming wholly free */
};

/* ---- stats -------------------------------------------------------------- */

static void stat_add(ts_cache_stat *s, int64_t d) {
  s->current += d;
  if (s->current > s->peak) s->peak = s->current;
  if (d > 0) s->allocated += d;
  else s->freed -= d;
}

/* one stat of one pool, and the same change to "all" */
static void stat_pool(ts_cache_stat *s, int pool, int64_t d) {
  if (d == 0) return;
  stat_add(&s[pool], d);
  stat_add(&s[TS_POOL_ALL], d);
}

static bool is_split(const block *b) { return b->prev || b->next; }

/* ---- free sets: treaps keyed by (stream, size, ptr) -------------------- */

static bool key_less(const block *a, const block *b) {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

static uint32_t next_prio(ts_cache *c) { /* xorshift64*: any spread of priorities keeps depth O(log n) */
  c->rng ^= c->rng >> 12;
  c->rng ^= c->rng << 25;
  c->rng ^= c->rng >> 27;
  return (uint32_t)((c->rng * 0x2545F4914F6CDD1DULL) >> 32);
}

/* splits t into keys < k (l) and keys > k (r); k itself is not in t */
static void treap_split(block *t, const block *k, block **l, block **r) {
  if (!t) {
    *l = *r = NULL;
  } else if (key_less(t, k)) {
    treap_split(t->right, k, &t->right, r);
    *l = t;
  } else {
    treap_split(t->left, k, l, &t->left);
    *r = t;
  }
}

static block *treap_merge(block *l, block *r) { /* every key of l < every key of r */
  if (!l) return r;
  if (!r) return l;
  if (l->prio > r->prio) {
    l->right = treap_merge(l->right, r);
    return l;
  }
  r->left = treap_merge(l, r->left);
  return r;
}

static block *treap_insert(block *t, block *n) {
  if (!t) return n;
  if (n->prio > t->prio) {
    treap_split(t, n, &n->left, &n->right);
    return n;
  }
  if (key_less(n, t)) t->left = treap_insert(t->left, n);
  else t->right = treap_insert(t->right, n);
  return t;
}

static block *treap_erase(block *t, const block *k) { /* k is in t */
  if (t == k) return treap_merge(t->left, t->right);
  if (key_less(k, t)) t->left = treap_erase(t->left, k);
  else t->right = treap_erase(t->right, k);
  return t;
}

/* best fit: the smallest free block of stream with size >= size */
static block *treap_best_fit(block *t, uintptr_t stream, size_t size) {
  block *best = NULL;
  while (t) {
    bool ge = t->stream != stream ? t->stream > stream : t->size >= size;
    if (ge) {
      best = t;
      t = t->left;
    } else {
      t = t->right;
    }
  }
  return best && best->stream == stream ? best : NULL;
}

/* A block in a free set keeps its neighbours until it leaves the set (a
 * merge or a split takes it out first), so whether it is a whole segment is
 * the same at insert and erase: idle_bytes counts those. */
static void set_insert(ts_cache *c, block *b) {
  b->left = b->right = NULL;
  b->prio = next_prio(c);
  b->is_free = true;
  c->free_root[b->pool] = treap_insert(c->free_root[b->pool], b);
  if (!is_split(b)) {
    c->idle_bytes += b->seg_size;
    b->freed_at = ++c->tick;
  }
}

static void set_erase(ts_cache *c, block *b) {
  c->free_root[b->pool] = treap_erase(c->free_root[b->pool], b);
  b->left = b->right = NULL;
  b->is_free = false;
  if (!is_split(b)) c->idle_bytes -= b->seg_size;
}

/* ---- pointer map: open addressing, linear probing, backward-shift delete - */

static size_t map_slot(const ts_cache *c, uintptr_t p) {
  uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ULL; /* blocks are 512-aligned: mix the high bits down */
  return (size_t)(h >> 17) & (c->map_cap - 1);
}

static void map_put(ts_cache *c, block *b) { /* capacity already reserved */
  size_t i = map_slot(c, b->ptr);
  while (c->map[i]) i = (i + 1) & (c->map_cap - 1);
  c->map[i] = b;
  c->map_count++;
}

/* room for one more entry at load <= 1/2; false without host memory */
static bool map_reserve(ts_cache *c) {
  if (2 * (c->map_count + 1) <= c->map_cap) return true;
  size_t cap = c->map_cap ? 2 * c->map_cap : 64;
  block **m = calloc(cap, sizeof *m);
  if (!m) return false;
  block **old = c->map;
  size_t old_cap = c->map_cap;
  c->map = m;
  c->map_cap = cap;
  c->map_count = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i]) map_put(c, old[i]);
  free(old);
  return true;
}

static size_t map_find(const ts_cache *c, uintptr_t p) { /* slot index, or map_cap */
  if (!c->map_cap) return 0;
  for (size_t i = map_slot(c, p);; i = (i + 1) & (c->map_cap - 1)) {
    if (!c->map[i]) return c->map_cap;
    if (c->map[i]->ptr == p) return i;
  }
}

static block *map_get(const ts_cache *c, uintptr_t p) {
  size_t i = map_find(c, p);
  return i < c->map_cap ? c->map[i] : NULL;
}

static block *map_take(ts_cache *c, uintptr_t p) {
  size_t i = map_find(c, p);
  if (i >= c->map_cap) return NULL;
  block *b = c->map[i];
  size_t mask = c->map_cap - 1;
  /* shift later entries of the run back so no probe chain is broken */
  for (size_t j = (i + 1) & mask; c->map[j]; j = (j + 1) & mask) {
    size_t home = map_slot(c, c->map[j]->ptr);
    /* map[j] may move to i unless its home lies cyclically in (i, j] */
    bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      c->map[i] = c->map[j];
      i = j;
    }
  }
  c->map[i] = NULL;
  c->map_count--;
  return b;
}

/* ---- segments ----------------------------------------------------------- */

/* Tells a checking device (raw.mark) which bytes of a block are live. */
static void mark(ts_cache *c, const block *b, size_t live) {
  if (c->raw.mark) c->raw.mark(c->raw.ctx, (void *)b->ptr, b->size, live, b->stream);
}

static size_t round_size(size_t n) {
  if (n == 0) n = 1;
  return (n + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
}

static size_t segment_size(const ts_cache *c, size_t size) {
  if (!c->caching) return size;
  if (size <= SMALL_SIZE) return SMALL_SEGMENT;
  if (size < MIN_LARGE_ALLOC) return LARGE_SEGMENT;
  return (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

/* a new segment of seg bytes as one block (not in any set), or NULL */
static block *segment_new(ts_cache *c, int pool, uintptr_t stream, size_t seg) {
  block *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  void *p = c->raw.malloc(c->raw.ctx, seg);
  if (!p) {
    free(b);
    return NULL;
  }
  b->ptr = (uintptr_t)p;
  b->size = b->seg_size = seg;
  b->stream = stream;
  b->pool = pool;
  mark(c, b, 0); /* nothing handed out yet */
  b->seg_next = c->segments;
  if (c->segments) c->segments->seg_prev = b;
  c->segments = b;
  stat_pool(c->st.segment, pool, 1);
  stat_pool(c->st.reserved_bytes, pool, (int64_t)seg);
  c->st.num_device_alloc++;
  return b;
}

/* b is a whole segment and in no set */
static void segment_release(ts_cache *c, block *b) {
  if (b->seg_prev) b->seg_prev->seg_next = b->seg_next;
  else c->segments = b->seg_next;
  if (b->seg_next) b->seg_next->seg_prev = b->seg_prev;
  stat_pool(c->st.segment, b->pool, -1);
  stat_pool(c->st.reserved_bytes, b->pool, -(int64_t)b->seg_size);
  c->st.num_device_free++;
  c->raw.free(c->raw.ctx, (void *)b->ptr);
  free(b->uses);
  free(b);
}

/* pushes the whole-segment blocks of treap t onto *list (through link) */
static void collect_whole(block *t, block **list) {
  if (!t) return;
  collect_whole(t->left, list);
  if (!is_split(t)) {
    t->link = *list;
    *list = t;
  }
  collect_whole(t->right, list);
}

/* Releases every free block that is a whole segment. */
static void release_free_segments(ts_cache *c) {
  block *list = NULL; /* collected first: the treap cannot change under its own walk */
  for (int pool = TS_POOL_SMALL; pool <= TS_POOL_LARGE; pool++) collect_whole(c->free_root[pool], &list);
  while (list) {
    block *b = list;
    list = b->link;
    set_erase(c, b);
    segment_release(c, b);
  }
}

static int older_first(const void *a, const void *b) {
  uint64_t x = (*(block *const *)a)->freed_at, y = (*(block *const *)b)->freed_at;
  return x < y ? -1 : x > y;
}

/* Releases wholly free segments, the longest idle first, until they hold
 * at most idle_limit bytes. The list is built from the free sets first (the
 * treaps cannot change under their own walk); without host memory for it
 * every free segment goes, which also keeps the bound. */
static void trim_idle(ts_cache *c) {
  if (c->idle_bytes <= c->idle_limit) return;
  block *list = NULL;
  size_t n = 0;
  for (int pool = TS_POOL_SMALL; pool <= TS_POOL_LARGE; pool++) collect_whole(c->free_root[pool], &list);
  for (block *b = list; b; b = b->link) n++;
  block **v = malloc(n * sizeof *v);
  if (!v) {
    release_free_segments(c);
    return;
  }
  n = 0;
  for (block *b = list; b; b = b->link) v[n++] = b;
  qsort(v, n, sizeof *v, older_first);
  for (size_t i = 0; i < n && c->idle_bytes > c->idle_limit; i++) {
    set_erase(c, v[i]);
    segment_release(c, v[i]);
  }
  free(v);
}

/* ---- blocks ------------------------------------------------------------- */

/* A freed block whose events are done becomes free: merged with its free
 * neighbours, or given back to raw at once when caching is off. */
static void block_free(ts_cache *c, block *b) {
  stat_pool(c->st.active, b->pool, -1);
  stat_pool(c->st.active_bytes, b->pool, -(int64_t)b->size);
  mark(c, b, 0);
  if (!c->caching) { /* each block is its own segment */
    segment_release(c, b);
    return;
  }
  block *p = b->prev, *n = b->next;
  int64_t dsplit = 0, dsplit_bytes = 0;
  if (p && p->is_free) { /* keep the lower block: a segment's first block must survive */
    dsplit--, dsplit_bytes -= (int64_t)p->size;
    set_erase(c, p);
    p->size += b->size;
    p->next = n;
    if (n) n->prev = p;
    free(b->uses);
    free(b);
    b = p;
  }
  if (n && n->is_free) {
    dsplit--, dsplit_bytes -= (int64_t)n->size;
    set_erase(c, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n->uses);
    free(n);
  }
  if (is_split(b)) dsplit++, dsplit_bytes += (int64_t)b->size;
  stat_pool(c->st.inactive_split, b->pool, dsplit);
  stat_pool(c->st.inactive_split_bytes, b->pool, dsplit_bytes);
  if (!is_split(b) && b->seg_size > c->max_segment) { /* a big segment goes back at once, as glibc's mmap */
    segment_release(c, b);
    return;
  }
  set_insert(c, b);
  trim_idle(c);
}

static void event_finished(ts_cache *c, block *b) {
  if (--b->event_count == 0) block_free(c, b);
}

/* Frees the blocks whose events have completed; never blocks. */
static void process_events(ts_cache *c) {
  size_t k = 0;
  for (size_t i = 0; i < c->npend; i++) {
    pending e = c->pend[i];
    if (c->raw.event_done(c->raw.ctx, e.ev)) {
      c->raw.event_destroy(c->raw.ctx, e.ev);
      event_finished(c, e.b);
    } else {
      c->pend[k++] = e;
    }
  }
  c->npend = k;
}

/* Waits for every pending event (OOM retry, empty_cache, teardown). */
static void wait_events(ts_cache *c) {
  for (size_t i = 0; i < c->npend; i++) {
    c->raw.event_wait(c->raw.ctx, c->pend[i].ev);
    c->raw.event_destroy(c->raw.ctx, c->pend[i].ev);
    event_finished(c, c->pend[i].b);
  }
  c->npend = 0;
}

/* Splits off b's tail beyond size when it is worth keeping as a free block:
 * any rest in the small pool, more than 1 MiB in the large one (smaller
 * rests of big blocks would only fragment the pool). */
static void maybe_split(ts_cache *c, block *b, size_t size) {
  size_t rest = b->size - size;
  if (!c->caching || rest == 0) return;
  if (b->pool == TS_POOL_SMALL ? rest < MIN_BLOCK : rest <= SMALL_SIZE) return;
  block *r = calloc(1, sizeof *r);
  if (!r) return; /* no host memory: hand out the whole block */
  r->ptr = b->ptr + size;
  r->size = rest;
  r->stream = b->stream;
  r->pool = b->pool;
  r->prev = b;
  r->next = b->next;
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  set_insert(c, r);
  stat_pool(c->st.inactive_split, r->pool, 1);
  stat_pool(c->st.inactive_split_bytes, r->pool, (int64_t)rest);
}

/* takes the best-fitting free block of stream out of the free set, or NULL */
static block *take_free(ts_cache *c, int pool, uintptr_t stream, size_t size) {
  if (!c->caching) return NULL;
  block *b = treap_best_fit(c->free_root[pool], stream, size);
  if (!b) return NULL;
  set_erase(c, b);
  if (is_split(b)) {
    stat_pool(c->st.inactive_split, pool, -1);
    stat_pool(c->st.inactive_split_bytes, pool, -(int64_t)b->size);
  }
  return b;
}

static size_t max_size(const block *t) { /* per stream the largest is the rightmost of its run: visit all */
  if (!t) return 0;
  size_t l = max_size(t->left), r = max_size(t->right), m = t->size;
  return l > m ? (l > r ? l : r) : (m > r ? m : r);
}

static size_t largest_free(const ts_cache *c) {
  size_t s = max_size(c->free_root[TS_POOL_SMALL]), l = max_size(c->free_root[TS_POOL_LARGE]);
  return s > l ? s : l;
}

static void *alloc_locked(ts_cache *c, size_t n, uintptr_t stream) {
  if (!map_reserve(c)) return NULL; /* host memory: before anything changes */
  block *b = NULL;
  size_t size = 0;
  int pool = TS_POOL_LARGE;
  if (n <= MAX_REQUEST) {
    /* caching off: each block is a segment of exactly the bytes asked for, so
     * a device that guards its allocations (the simulated one) catches an
     * overrun of one byte */
    size = c->caching ? round_size(n) : (n ? n : 1);
    pool = size <= SMALL_SIZE ? TS_POOL_SMALL : TS_POOL_LARGE;
    process_events(c);
    b = take_free(c, pool, stream, size);
    if (!b) b = segment_new(c, pool, stream, segment_size(c, size));
    if (!b) {
      /* Out of memory: blocks waiting on events may fit once those are
       * done; otherwise give the wholly-free segments back and try again. */
      wait_events(c);
      b = take_free(c, pool, stream, size);
      if (!b) {
        release_free_segments(c);
        c->st.num_alloc_retries++;
        b = segment_new(c, pool, stream, segment_size(c, size));
      }
    }
  }
  if (!b) {
    c->st.num_ooms++;
    c->has_oom = true;
    c->last_oom = (ts_cache_oom){
        .requested = n,
        .allocated = (size_t)c->st.allocated_bytes[TS_POOL_ALL].current,
        .reserved = (size_t)c->st.reserved_bytes[TS_POOL_ALL].current,
        .largest_free = largest_free(c),
        .stream = stream,
    };
    return NULL;
  }
  maybe_split(c, b, size);
  b->allocated = true;
  b->requested = n;
  mark(c, b, n);
  map_put(c, b);
  stat_pool(c->st.allocation, b->pool, 1);
  stat_pool(c->st.allocated_bytes, b->pool, (int64_t)b->size);
  stat_pool(c->st.requested_bytes, b->pool, (int64_t)n);
  stat_pool(c->st.active, b->pool, 1);
  stat_pool(c->st.active_bytes, b->pool, (int64_t)b->size);
  return (void *)b->ptr;
}

static void free_locked(ts_cache *c, block *b) {
  b->allocated = false;
  stat_pool(c->st.allocation, b->pool, -1);
  stat_pool(c->st.allocated_bytes, b->pool, -(int64_t)b->size);
  stat_pool(c->st.requested_bytes, b->pool, -(int64_t)b->requested);
  b->requested = 0;
  /* Work queued on the recorded streams until now may still use b: an event
   * on each, and b stays active until they are all done. */
  for (int i = 0; i < b->nuses; i++) {
    void *ev = c->raw.event_record(c->raw.ctx, b->uses[i]);
    if (!ev) { /* a failing device: never reuse b rather than race (freed at destroy) */
      b->event_count++;
      continue;
    }
    if (c->npend == c->cap_pend) {
      size_t cap = c->cap_pend ? 2 * c->cap_pend : 16;
      pending *p = realloc(c->pend, cap * sizeof *p);
      if (!p) { /* no host memory to remember it: wait now instead */
        c->raw.event_wait(c->raw.ctx, ev);
        c->raw.event_destroy(c->raw.ctx, ev);
        continue;
      }
      c->pend = p;
      c->cap_pend = cap;
    }
    c->pend[c->npend++] = (pending){ev, b};
    b->event_count++;
  }
  b->nuses = 0;
  if (b->event_count == 0) block_free(c, b);
}

/* ---- public functions --------------------------------------------------- */

ts_cache *ts_cache_new(ts_cache_raw raw, bool caching) {
  ts_cache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    return NULL;
  }
  c->raw = raw;
  c->caching = caching;
  c->max_segment = c->idle_limit = SIZE_MAX;
  c->rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)c;
  return c;
}

bool ts_cache_env_caching(void) {
  const char *v = getenv("TENSH_NO_CUDA_CACHING");
  return !v || !*v || strcmp(v, "0") == 0;
}

void ts_cache_destroy(ts_cache *c) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  for (size_t i = 0; i < c->npend; i++) { /* their blocks go with their segments */
    c->raw.event_wait(c->raw.ctx, c->pend[i].ev);
    c->raw.event_destroy(c->raw.ctx, c->pend[i].ev);
  }
  while (c->segments) {
    block *s = c->segments;
    c->segments = s->seg_next;
    for (block *b = s->next, *nx; b; b = nx) {
      nx = b->next;
      free(b->uses);
      free(b);
    }
    c->raw.free(c->raw.ctx, (void *)s->ptr);
    free(s->uses);
    free(s);
  }
  free(c->map);
  free(c->pend);
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void *ts_cache_alloc(ts_cache *c, size_t n, uintptr_t stream) {
  pthread_mutex_lock(&c->lock);
  void *p = alloc_locked(c, n, stream);
  pthread_mutex_unlock(&c->lock);
  return p;
}

void ts_cache_free(ts_cache *c, void *p) {
  if (!p) return;
  pthread_mutex_lock(&c->lock);
  block *b = map_take(c, (uintptr_t)p);
  if (b) free_locked(c, b);
  pthread_mutex_unlock(&c->lock);
}

ts_status ts_cache_record_stream(ts_cache *c, void *p, uintptr_t stream) {
  ts_status st = TS_OK;
  pthread_mutex_lock(&c->lock);
  block *b = map_get(c, (uintptr_t)p);
  if (!b) {
    st = ts_fail(TS_ERR_ARG, "record_stream: %p is not a live block of this device's allocator", p);
    goto out;
  }
  if (stream == b->stream) goto out; /* its own stream orders itself */
  for (int i = 0; i < b->nuses; i++)
    if (b->uses[i] == stream) goto out;
  if (b->nuses == b->cap_uses) {
    int cap = b->cap_uses ? 2 * b->cap_uses : 2;
    uintptr_t *u = realloc(b->uses, (size_t)cap * sizeof *u);
    if (!u) {
      st = ts_fail(TS_ERR_OOM, "record_stream: out of host memory");
      goto out;
    }
    b->uses = u;
    b->cap_uses = cap;
  }
  b->uses[b->nuses++] = stream;
out:
  pthread_mutex_unlock(&c->lock);
  return st;
}

void ts_cache_set_idle_limits(ts_cache *c, size_t max_segment, size_t idle_limit) {
  pthread_mutex_lock(&c->lock);
  c->max_segment = max_segment;
  c->idle_limit = idle_limit;
  /* segments already idle meet the new bounds now */
  block *list = NULL;
  for (int pool = TS_POOL_SMALL; pool <= TS_POOL_LARGE; pool++) collect_whole(c->free_root[pool], &list);
  while (list) {
    block *b = list;
    list = b->link;
    if (b->seg_size > max_segment) {
      set_erase(c, b);
      segment_release(c, b);
    }
  }
  trim_idle(c);
  pthread_mutex_unlock(&c->lock);
}

size_t ts_cache_idle_bytes(ts_cache *c) {
  pthread_mutex_lock(&c->lock);
  size_t n = c->idle_bytes;
  pthread_mutex_unlock(&c->lock);
  return n;
}

void ts_cache_empty(ts_cache *c) {
  pthread_mutex_lock(&c->lock);
  wait_events(c);
  release_free_segments(c);
  pthread_mutex_unlock(&c->lock);
}

size_t ts_cache_block_size(ts_cache *c, void *p) {
  pthread_mutex_lock(&c->lock);
  block *b = map_get(c, (uintptr_t)p);
  size_t n = b ? b->size : 0;
  pthread_mutex_unlock(&c->lock);
  return n;
}

void ts_cache_get_stats(ts_cache *c, ts_cache_stats *out) {
  pthread_mutex_lock(&c->lock);
  *out = c->st;
  out->largest_free_block = largest_free(c);
  pthread_mutex_unlock(&c->lock);
}

void ts_cache_usage(ts_cache *c, size_t *allocated, size_t *reserved) {
  pthread_mutex_lock(&c->lock);
  if (allocated) *allocated = (size_t)c->st.allocated_bytes[TS_POOL_ALL].current;
  if (reserved) *reserved = (size_t)c->st.reserved_bytes[TS_POOL_ALL].current;
  pthread_mutex_unlock(&c->lock);
}

#define EACH_STAT(X) \
  X(allocation) X(segment) X(active) X(inactive_split) X(allocated_bytes) \
  X(reserved_bytes) X(active_bytes) X(inactive_split_bytes) X(requested_bytes)

void ts_cache_reset_peak(ts_cache *c) {
  pthread_mutex_lock(&c->lock);
  for (int p = 0; p < TS_POOL_COUNT; p++) {
#define X(name) c->st.name[p].peak = c->st.name[p].current;
    EACH_STAT(X)
#undef X
  }
  pthread_mutex_unlock(&c->lock);
}

void ts_cache_reset_accumulated(ts_cache *c) {
  pthread_mutex_lock(&c->lock);
  for (int p = 0; p < TS_POOL_COUNT; p++) {
#define X(name) c->st.name[p].allocated = c->st.name[p].freed = 0;
    EACH_STAT(X)
#undef X
  }
  c->st.num_alloc_retries = c->st.num_ooms = c->st.num_device_alloc = c->st.num_device_free = 0;
  pthread_mutex_unlock(&c->lock);
}

static const char *const pool_names[TS_POOL_COUNT] = {"all", "small_pool", "large_pool"};

void ts_cache_stats_foreach(const ts_cache_stats *s, void (*fn)(void *ud, const char *key, int64_t v), void *ud) {
  char key[64];
  for (int p = 0; p < TS_POOL_COUNT; p++) {
#define X(name)                                                                         \
  snprintf(key, sizeof key, #name ".%s.current", pool_names[p]), fn(ud, key, s->name[p].current);     \
  snprintf(key, sizeof key, #name ".%s.peak", pool_names[p]), fn(ud, key, s->name[p].peak);           \
  snprintf(key, sizeof key, #name ".%s.allocated", pool_names[p]), fn(ud, key, s->name[p].allocated); \
  snprintf(key, sizeof key, #name ".%s.freed", pool_names[p]), fn(ud, key, s->name[p].freed);
    EACH_STAT(X)
#undef X
  }
  fn(ud, "num_alloc_retries", s->num_alloc_retries);
  fn(ud, "num_ooms", s->num_ooms);
  fn(ud, "num_device_alloc", s->num_device_alloc);
  fn(ud, "num_device_free", s->num_device_free);
}

/* ---- text ---------------------------------------------------------------- */

static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

/* decimals < 0: as many as needed, none for a whole number of the unit, else one */
static void fmt_bytes(size_t n, int decimals, char *buf, size_t len) {
  if (!len) return;
  int u = 0;
  size_t unit = 1;
  while (u < 6 && n / unit >= 1024) unit *= 1024, u++;
  if (u == 0) {
    snprintf(buf, len, "%zu B", n);
    return;
  }
  if (decimals < 0) decimals = n % unit == 0 ? 0 : 1;
  snprintf(buf, len, "%.*f %s", decimals, (double)n / (double)unit, units[u]);
}

void ts_format_bytes(size_t n, char *buf, size_t len) { fmt_bytes(n, 2, buf, len); }

void ts_cache_oom_message(ts_cache *c, size_t requested, const char *device_name,
                          size_t total, size_t free_bytes, char *buf, size_t n) {
  pthread_mutex_lock(&c->lock);
  size_t allocated = (size_t)c->st.allocated_bytes[TS_POOL_ALL].current;
  size_t reserved = (size_t)c->st.reserved_bytes[TS_POOL_ALL].current;
  size_t largest = largest_free(c);
  pthread_mutex_unlock(&c->lock);
  char req[32], tot[32], fre[32], held[32], cached[32], big[32];
  fmt_bytes(requested, 2, req, sizeof req);
  fmt_bytes(total, 1, tot, sizeof tot);
  fmt_bytes(free_bytes, 1, fre, sizeof fre);
  fmt_bytes(allocated, 1, held, sizeof held);
  fmt_bytes(reserved > allocated ? reserved - allocated : 0, 1, cached, sizeof cached);
  fmt_bytes(largest, -1, big, sizeof big);
  if (!n) return;
  snprintf(buf, n,
           "CUDA out of memory: tried to allocate %s on %s (%s total, %s free); "
           "tensors hold %s, the cache %s more (largest free block %s). "
           "Drop references, call cuda.empty_cache(), or use a smaller batch.",
           req, device_name ? device_name : "cuda", tot, fre, held, cached, big);
}

bool ts_cache_last_oom(ts_cache *c, ts_cache_oom *out) {
  pthread_mutex_lock(&c->lock);
  bool has = c->has_oom;
  *out = has ? c->last_oom : (ts_cache_oom){0};
  pthread_mutex_unlock(&c->lock);
  return has;
}

typedef struct text { char *buf; size_t n, len; } text;

/* appends, cutting at the buffer's end (len keeps counting) */
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = t->len < t->n ? t->n - t->len : 0;
  int k = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
  va_end(ap);
  if (k > 0) t->len += (size_t)k;
}

/* PyTorch's cells: a unit chosen from pref (so a column reads alike), whole numbers */
static void cell_bytes(text *t, int64_t v, int64_t pref) {
  int u = 0;
  while (u < 5 && pref >= 768 * 1024) v /= 1024, pref /= 1024, u++;
  put(t, " %6lld %-3s |", (long long)v, units[u]);
}

static void cell_count(text *t, int64_t v, int64_t pref) {
  static const char *const pre[] = {" ", "K", "M"};
  int u = 0;
  while (u < 2 && pref >= 750 * 1000) v /= 1000, pref /= 1000, u++;
  put(t, " %7lld %s  |", (long long)v, pre[u]);
}

#define RULE_EQ "|===========================================================================|\n"
#define RULE "|---------------------------------------------------------------------------|\n"

void ts_cache_summary(const ts_cache_stats *s, const char *device_name, char *buf, size_t n) {
  text t = {buf, n, 0};
  if (n) buf[0] = '\0';
  char title[80];
  snprintf(title, sizeof title, "tensh CUDA memory summary, %.40s", device_name ? device_name : "cuda");
  int tl = (int)strlen(title), pad = (75 - tl) / 2;
  put(&t, RULE_EQ);
  put(&t, "|%*s%s%*s|\n", pad, "", title, 75 - tl - pad, "");
  put(&t, RULE);
  put(&t, "|  CUDA OOMs: %-23lld |  cudaMalloc retries: %-14lld |\n",
      (long long)s->num_ooms, (long long)s->num_alloc_retries);
  put(&t, RULE_EQ);
  put(&t, "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");
  struct { const char *name; const ts_cache_stat *st; bool bytes; } rows[] = {
      {"Allocated memory", s->allocated_bytes, true},
      {"Active memory", s->active_bytes, true},
      {"Requested memory", s->requested_bytes, true},
      {"GPU reserved memory", s->reserved_bytes, true},
      {"Non-releasable memory", s->inactive_split_bytes, true},
      {"Allocations", s->allocation, false},
      {"Active allocs", s->active, false},
      {"GPU reserved segments", s->segment, false},
      {"Non-releasable allocs", s->inactive_split, false},
  };
  static const int order[3] = {TS_POOL_ALL, TS_POOL_LARGE, TS_POOL_SMALL};
  for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
    put(&t, RULE);
    const ts_cache_stat *all = &rows[r].st[TS_POOL_ALL];
    for (int k = 0; k < 3; k++) {
      const ts_cache_stat *v = &rows[r].st[order[k]];
      put(&t, "| %-21s |", k == 0 ? rows[r].name : k == 1 ? "      from large pool" : "      from small pool");
      void (*cell)(text *, int64_t, int64_t) = rows[r].bytes ? cell_bytes : cell_count;
      cell(&t, v->current, all->peak); /* current and peak share peak's unit, as in PyTorch */
      cell(&t, v->peak, all->peak);
      cell(&t, v->allocated, all->allocated);
      cell(&t, v->freed, all->freed);
      put(&t, "\n");
    }
  }
  put(&t, RULE_EQ);
}

/* ---- invariant check (tests) ---------------------------------------------- */

typedef struct walk {
  const ts_cache *c;
  const block *last;
  size_t count;
  bool ok;
  char *why;
  size_t n;
} walk;

static void bad(walk *w, const char *fmt, ...) {
  if (!w->ok) return;
  w->ok = false;
  va_list ap;
  va_start(ap, fmt);
  if (w->n) vsnprintf(w->why, w->n, fmt, ap);
  va_end(ap);
}

static void walk_set(walk *w, const block *t, int pool, int depth) {
  if (!t || !w->ok) return;
  if (depth > 200) { bad(w, "free set deeper than 200"); return; }
  if (t->left && t->left->prio > t->prio) { bad(w, "treap heap order broken"); return; }
  if (t->right && t->right->prio > t->prio) { bad(w, "treap heap order broken"); return; }
  walk_set(w, t->left, pool, depth + 1);
  if (w->last && !key_less(w->last, t)) { bad(w, "free set out of order at %#zx", (size_t)t->ptr); return; }
  if (!t->is_free || t->allocated || t->pool != pool) { bad(w, "block %#zx in a free set is not free in pool %d", (size_t)t->ptr, pool); return; }
  w->last = t;
  w->count++;
  walk_set(w, t->right, pool, depth + 1);
}

bool ts_cache_check(ts_cache *c, char *why, size_t n) {
  pthread_mutex_lock(&c->lock);
  walk w = {c, NULL, 0, true, why, n};
  if (n) why[0] = '\0';
  ts_cache_stat want[9][TS_POOL_COUNT];
  memset(want, 0, sizeof want);
  enum { ALLOC, SEG, ACT, SPLIT, ABYTES, RBYTES, ACTBYTES, SPLITBYTES, REQ };
  size_t nfree = 0, nalloc = 0, idle = 0;
  for (block *s = c->segments; s && w.ok; s = s->seg_next) {
    if (s->is_free && !is_split(s)) idle += s->seg_size;
    if (s->prev) bad(&w, "segment list holds a non-first block %#zx", (size_t)s->ptr);
    if (s->seg_next && s->seg_next->seg_prev != s) bad(&w, "segment list links broken");
    want[SEG][s->pool].current++;
    want[RBYTES][s->pool].current += (int64_t)s->seg_size;
    size_t sum = 0;
    for (const block *b = s; b && w.ok; b = b->next) {
      if (b->pool != s->pool) bad(&w, "block %#zx in another pool than its segment", (size_t)b->ptr);
      if (b->size == 0 || (c->caching && b->size % MIN_BLOCK)) bad(&w, "block %#zx has size %zu", (size_t)b->ptr, b->size);
      if (b->ptr != s->ptr + sum) bad(&w, "segment %#zx not tiled at %#zx", (size_t)s->ptr, (size_t)b->ptr);
      if (b->next && b->next->prev != b) bad(&w, "prev/next broken at %#zx", (size_t)b->ptr);
      int states = b->allocated + b->is_free + (b->event_count > 0);
      if (states != 1) bad(&w, "block %#zx in %d states", (size_t)b->ptr, states);
      if (b->is_free && b->next && b->next->is_free) bad(&w, "free neighbours at %#zx", (size_t)b->ptr);
      if (b->allocated) {
        nalloc++;
        if (map_get(c, b->ptr) != b) bad(&w, "allocated block %#zx not in the map", (size_t)b->ptr);
        want[ALLOC][b->pool].current++;
        want[ABYTES][b->pool].current += (int64_t)b->size;
        want[REQ][b->pool].current += (int64_t)b->requested;
      } else if (b->nuses) {
        bad(&w, "unallocated block %#zx keeps record_stream streams", (size_t)b->ptr);
      }
      if (!b->is_free) {
        want[ACT][b->pool].current++;
        want[ACTBYTES][b->pool].current += (int64_t)b->size;
      }
      if (b->is_free) {
        nfree++;
        if (is_split(b)) {
          want[SPLIT][b->pool].current++;
          want[SPLITBYTES][b->pool].current += (int64_t)b->size;
        }
      }
      sum += b->size;
    }
    if (w.ok && sum != s->seg_size) bad(&w, "segment %#zx: blocks sum to %zu, not %zu", (size_t)s->ptr, sum, s->seg_size);
  }
  for (int pool = TS_POOL_SMALL; pool <= TS_POOL_LARGE; pool++) {
    w.last = NULL;
    walk_set(&w, c->free_root[pool], pool, 0);
  }
  if (w.ok && w.count != nfree) bad(&w, "free sets hold %zu blocks, segments %zu free ones", w.count, nfree);
  if (w.ok && c->idle_bytes != idle) bad(&w, "idle_bytes is %zu, wholly free segments hold %zu", c->idle_bytes, idle);
  if (w.ok && idle > c->idle_limit) bad(&w, "%zu idle bytes above the limit of %zu", idle, c->idle_limit);
  if (w.ok && c->map_count != nalloc) bad(&w, "map holds %zu blocks, segments %zu allocated", c->map_count, nalloc);
  for (size_t i = 0; i < c->npend; i++)
    if (c->pend[i].b->event_count <= 0 || c->pend[i].b->allocated || c->pend[i].b->is_free)
      bad(&w, "an event waits for block %#zx, which is not pending", (size_t)c->pend[i].b->ptr);
  const ts_cache_stat *have[9] = {c->st.allocation, c->st.segment, c->st.active, c->st.inactive_split,
                                  c->st.allocated_bytes, c->st.reserved_bytes, c->st.active_bytes,
                                  c->st.inactive_split_bytes, c->st.requested_bytes};
  static const char *const names[9] = {"allocation", "segment", "active", "inactive_split", "allocated_bytes",
                                       "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"};
  for (int k = 0; k < 9 && w.ok; k++) {
    want[k][TS_POOL_ALL].current = want[k][TS_POOL_SMALL].current + want[k][TS_POOL_LARGE].current;
    for (int p = 0; p < TS_POOL_COUNT; p++) {
      const ts_cache_stat *h = &have[k][p];
      if (h->current != want[k][p].current)
        bad(&w, "%s.%s.current is %lld, blocks say %lld", names[k], pool_names[p], (long long)h->current,
            (long long)want[k][p].current);
      else if (h->peak < h->current)
        bad(&w, "%s.%s: peak %lld below current %lld", names[k], pool_names[p], (long long)h->peak,
            (long long)h->current);
    }
  }
  pthread_mutex_unlock(&c->lock);
  return w.ok;
}
