/* Small-block free lists: tensor headers, storage headers and small CPU
 * buffers are allocated and freed millions of times by per-op loops at the
 * prompt; Lua's collector frees them in bursts that overflow malloc's own
 * thread caches. Thread-local lists per size class keep that path short.
 * A block freed on another thread simply joins that thread's list; a
 * thread's lists are freed when it exits (a DataLoader worker's used to be
 * lost with it: 320 bytes per failed allocation on a worker). */
#include "tensh.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define NCLASS 4
#define MAX_CACHED 16384

typedef struct free_block { struct free_block *next; } free_block;

static _Thread_local free_block *lists[NCLASS];
static _Thread_local int counts[NCLASS];
static _Thread_local int exit_hook; /* 0 not yet armed, 1 armed, -1 caching off */
static _Atomic int64_t freed_at_exit; /* blocks free_lists gave back, for the tests */

static pthread_key_t exit_key;
static int exit_key_ok;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* Runs at the thread's exit: its lists go back to malloc, and whatever it
 * frees after this (other exit handlers) goes straight to free. */
static void free_lists(void *unused) {
  (void)unused;
  for (int c = 0; c < NCLASS; c++) {
    while (lists[c]) {
      free_block *b = lists[c];
      lists[c] = b->next;
      free(b);
    }
    atomic_fetch_add(&freed_at_exit, counts[c]);
    counts[c] = 0;
  }
  exit_hook = -1;
}

static void make_exit_key(void) { exit_key_ok = pthread_key_create(&exit_key, free_lists) == 0; }

/* A thread caches blocks only once pthread will call free_lists at its exit
 * (a non-NULL value for the key). */
static int caching_on(void) {
  if (exit_hook == 0) {
    pthread_once(&exit_key_once, make_exit_key);
    exit_hook = exit_key_ok && pthread_setspecific(exit_key, (void *)1) == 0 ? 1 : -1;
  }
  return exit_hook > 0;
}

int64_t ts_small_freed_at_exit(void) { return atomic_load(&freed_at_exit); }

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
  if (c < 0 || counts[c] >= MAX_CACHED || !caching_on()) {
    free(p);
    return;
  }
  free_block *b = p;
  b->next = lists[c];
  lists[c] = b;
  counts[c]++;
}
