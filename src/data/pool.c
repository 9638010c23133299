/* One epoch of a DataLoader over a tensor source: the batch plan (indices and
 * batch boundaries) and the worker threads that make batches ahead of the
 * consumer. Workers claim batches in order and park each finished batch in
 * a ring of slots (batch b in slot b % window); the main thread takes them
 * in order, so the result never depends on which worker made which batch or
 * when. A worker allocates a batch's tensors, puts them in its slot under the
 * mutex, and never touches them again; only the main thread frees tensors.
 * Freeing an epoch stops the workers, joins them, and frees what they left. */
#include "data.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WORKERS 64

typedef struct slot {
  bool ready;
  ts_status st;
  char err[512];                         /* the worker's message (messages are thread-local) */
  ts_tensor *outs[TS_DATA_MAX_FIELDS];   /* (batch, ...) per field; NULL where not made */
} slot;

struct ts_data_epoch {
  ts_data_source *src;     /* retained (main thread) */
  int64_t *idx;            /* (total,) sample indices, read-only once workers run */
  int64_t *offsets;        /* (nbatches + 1,) */
  int64_t nbatches;
  uint64_t key;            /* Philox key of the transforms' draws */
  bool pin;
  int nworkers;            /* threads started */
  pthread_t threads[MAX_WORKERS];
  pthread_mutex_t mu;      /* guards everything below */
  pthread_cond_t work;     /* workers: a batch may be claimed, or stop */
  pthread_cond_t done;     /* consumer: a batch is ready */
  int64_t next_claim;      /* first batch no worker has claimed */
  int64_t next_take;       /* the batch the consumer takes next */
  int64_t window;          /* batches in flight: workers claim b < next_take + window */
  slot *slots;             /* (window,) */
  bool stop;
  ts_status failed;        /* a worker's error, reported once, then the epoch ends */
};

static void *worker_main(void *arg) {
  ts_data_epoch *e = arg;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    while (!e->stop && (e->next_claim >= e->nbatches || e->next_claim >= e->next_take + e->window))
      pthread_cond_wait(&e->work, &e->mu);
    if (e->stop) break;
    int64_t b = e->next_claim++;
    pthread_mutex_unlock(&e->mu);

    ts_tensor *outs[TS_DATA_MAX_FIELDS];
    int64_t o = e->offsets[b];
    ts_status st = ts_data_make_batch(e->src, e->idx + o, e->offsets[b + 1] - o, e->key, o, e->pin, outs);

    pthread_mutex_lock(&e->mu);
    slot *s = &e->slots[b % e->window];
    memcpy(s->outs, outs, sizeof(ts_tensor *) * (size_t)e->src->nfields);
    s->st = st;
    if (st) snprintf(s->err, sizeof s->err, "%s", ts_last_error());
    s->ready = true;
    pthread_cond_broadcast(&e->done);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

static void release_outs(ts_tensor **outs, int n) {
  for (int f = 0; f < n; f++) {
    ts_tensor_release(outs[f]);
    outs[f] = NULL;
  }
}

ts_status ts_data_epoch_new(ts_data_source *s, const int64_t *idx, int64_t nbatches, const int64_t *offsets,
                            uint64_t key, int nworkers, int prefetch, bool pin, ts_data_epoch **out) {
  if (nbatches < 0 || offsets[0] != 0) return ts_fail(TS_ERR_ARG, "DataLoader: bad batch plan");
  for (int64_t b = 0; b < nbatches; b++)
    if (offsets[b + 1] < offsets[b]) return ts_fail(TS_ERR_ARG, "DataLoader: bad batch plan");
  int64_t total = offsets[nbatches];
  for (int64_t k = 0; k < total; k++)
    if (idx[k] < 0 || idx[k] >= s->n)
      return ts_fail(TS_ERR_INDEX, "DataLoader: index %lld out of range for a dataset of %lld samples "
                     "(indices count from 0)", (long long)idx[k], (long long)s->n);
  if (nworkers < 0 || nworkers > MAX_WORKERS)
    return ts_fail(TS_ERR_ARG, "DataLoader: num_workers must be in [0, %d], got %d", MAX_WORKERS, nworkers);
  if (prefetch < 1) return ts_fail(TS_ERR_ARG, "DataLoader: prefetch_factor must be at least 1, got %d", prefetch);

  ts_data_epoch *e = calloc(1, sizeof *e);
  if (!e) return ts_fail(TS_ERR_OOM, "out of memory allocating a DataLoader epoch");
  e->idx = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
  e->offsets = malloc(sizeof(int64_t) * (size_t)(nbatches + 1));
  e->window = nworkers > 0 ? (int64_t)nworkers * prefetch : 1;
  e->slots = calloc((size_t)e->window, sizeof(slot));
  if (!e->idx || !e->offsets || !e->slots) {
    free(e->idx), free(e->offsets), free(e->slots), free(e);
    return ts_fail(TS_ERR_OOM, "out of memory allocating a DataLoader epoch");
  }
  memcpy(e->idx, idx, sizeof(int64_t) * (size_t)total);
  memcpy(e->offsets, offsets, sizeof(int64_t) * (size_t)(nbatches + 1));
  e->nbatches = nbatches;
  e->key = key;
  e->pin = pin;
  e->src = s;
  ts_data_source_retain(s);
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->work, NULL);
  pthread_cond_init(&e->done, NULL);
  /* no more threads than batches; if the system refuses threads, fewer run
   * (with none, batches are made on the caller's thread: same results) */
  int want = nworkers < nbatches ? nworkers : (int)nbatches;
  for (int w = 0; w < want; w++) {
    if (pthread_create(&e->threads[w], NULL, worker_main, e) != 0) break;
    e->nworkers++;
  }
  *out = e;
  return TS_OK;
}

/* Waits for slot s to be filled; polls the Ctrl-C flag every 100 ms. */
static ts_status wait_ready(ts_data_epoch *e, slot *s) {
  while (!s->ready) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&e->done, &e->mu, &ts);
    if (!s->ready && ts_interrupt_flag) return ts_check_interrupt();
  }
  return TS_OK;
}

ts_status ts_data_epoch_next(ts_data_epoch *e, ts_tensor **outs, bool *done) {
  int nf = e->src->nfields;
  *done = false;
  if (e->failed || e->next_take >= e->nbatches) {
    *done = true;
    return TS_OK;
  }
  int64_t b = e->next_take;
  if (e->nworkers == 0) {
    int64_t o = e->offsets[b];
    ts_status st = ts_data_make_batch(e->src, e->idx + o, e->offsets[b + 1] - o, e->key, o, e->pin, outs);
    if (st) {
      release_outs(outs, nf);
      e->failed = st;
      return st;
    }
    e->next_take++;
    return TS_OK;
  }
  pthread_mutex_lock(&e->mu);
  slot *s = &e->slots[b % e->window];
  ts_status st = wait_ready(e, s);
  if (st) { /* interrupted: the batch stays queued; a later next() takes it */
    pthread_mutex_unlock(&e->mu);
    return st;
  }
  memcpy(outs, s->outs, sizeof(ts_tensor *) * (size_t)nf);
  memset(s->outs, 0, sizeof s->outs);
  s->ready = false;
  st = s->st;
  e->next_take++;
  pthread_cond_broadcast(&e->work);
  pthread_mutex_unlock(&e->mu);
  if (st) {
    release_outs(outs, nf);
    e->failed = st;
    return ts_fail(st, "%s", s->err);
  }
  return TS_OK;
}

void ts_data_epoch_free(ts_data_epoch *e) {
  if (!e) return;
  pthread_mutex_lock(&e->mu);
  e->stop = true;
  pthread_cond_broadcast(&e->work);
  pthread_mutex_unlock(&e->mu);
  for (int w = 0; w < e->nworkers; w++) pthread_join(e->threads[w], NULL);
  e->nworkers = 0;
  for (int64_t k = 0; k < e->window; k++) release_outs(e->slots[k].outs, e->src->nfields);
  pthread_cond_destroy(&e->work);
  pthread_cond_destroy(&e->done);
  pthread_mutex_destroy(&e->mu);
  ts_data_source_release(e->src);
  free(e->idx), free(e->offsets), free(e->slots), free(e);
}

int ts_data_epoch_workers(const ts_data_epoch *e) { return e ? e->nworkers : 0; }
