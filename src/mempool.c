/* Small-block free lists: tensor headers, storage headers and small CPU
 * buffers are allocated and freed millions of times by per-op loops at the
 * prompt; Lua's collector frees them in bursts that overflow malloc's own
 * thread caches. Thread-local lists per size class keep that path short.
 * A block freed on another thread simply joins that thread's list. */
#include "tensh.h"

#include <stdlib.h>

#define NCLASS 4
#define MAX_CACHED 16384

typedef struct free_block { struct free_block *next; } free_block;

static _Thread_local free_block *lists[NCLASS];
static _Thread_local int counts[NCLASS];

static int size_class(size_t n) {
  return n <= 64 ? 0 : n <= 128 ? 1 : n <= 256 ? 2 : n <= 512 ? 3 : -1;
}

void *ts_small_alloc(size_t n) {
  int c = size_class(n);
  if (c < 0) return malloc(n);
  free_block *b = lists[c];
  if (b) {
    lists[c] = b->next;
    counts[c]--;
    return b;
  }
  return malloc((size_t)64 << c);
}

void ts_small_free(void *p, size_t n) {
  if (!p) return;
  int c = size_class(n);
  if (c < 0 || counts[c] >= MAX_CACHED) {
    free(p);
    return;
  }
  free_block *b = p;
  b->next = lists[c];
  lists[c] = b;
  counts[c]++;
}
