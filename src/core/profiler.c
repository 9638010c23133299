/* The profiler's recorder: see profiler.h. Events live in one growing array;
 * a stack of open events gives each its parent, so self times (total minus
 * direct children) need no sorting afterwards. */
#include "profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/ops.h"

static ts_prof_options opts;
static bool running;
static _Thread_local bool recording_thread;
static ts_prof_event *events;
static int nevents, cap;
static int64_t dropped; /* events past TS_PROF_MAX_EVENTS */
static int open_top = -1; /* innermost open event */
static int64_t mark_cpu, mark_dev; /* live bytes when the previous event ended */

int64_t ts_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t live_dev(void) {
  int64_t n = 0;
  for (int t = 1; t < TS_DEVICE_TYPE_COUNT; t++) n += (int64_t)ts_bytes_live((ts_device_type)t);
  return n;
}

void ts_prof_clear(void) {
  for (int i = 0; i < nevents; i++) {
    free(events[i].owned_name);
    if (opts.timer) {
      if (events[i].dev_start) opts.timer->release(events[i].dev_start);
      if (events[i].dev_end) opts.timer->release(events[i].dev_end);
    }
  }
  free(events);
  events = NULL;
  nevents = cap = 0;
  dropped = 0;
}

ts_status ts_prof_start(ts_prof_options o) {
  if (running) return ts_fail(TS_ERR_ARG, "profiler: a profiler is already running (profilers do not nest)");
  ts_prof_clear();
  opts = o;
  if (!opts.timer) opts.device_timing = false;
  running = true;
  recording_thread = true;
  open_top = -1;
  mark_cpu = (int64_t)ts_bytes_live(TS_CPU);
  mark_dev = live_dev();
  ts_dispatch_observed |= TS_OBSERVE_PROFILE;
  return TS_OK;
}

void ts_prof_stop(void) {
  ts_dispatch_observed &= (uint8_t)~TS_OBSERVE_PROFILE;
  while (open_top >= 0) ts_prof_end(open_top); /* scopes left open by an error end here */
  running = false;
  recording_thread = false;
}

bool ts_prof_running(void) { return running; }
bool ts_prof_recording_here(void) { return running && recording_thread; }
int ts_prof_count(void) { return nevents; }
int64_t ts_prof_dropped(void) { return dropped; }
const ts_prof_event *ts_prof_events(void) { return events; }

static void format_shapes(char *buf, size_t n, int nt, ts_tensor *const *ts) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < nt && k < n; i++) {
    const ts_tensor *t = ts[i];
    k += (size_t)snprintf(buf + k, n - k, "%s[", i ? ", " : "");
    for (int d = 0; t && d < t->ndim && k < n; d++)
      k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)t->sizes[d]);
    if (k < n) k += (size_t)snprintf(buf + k, n - k, "]");
  }
  if (k < n) snprintf(buf + k, n - k, "]");
  if (k >= n && n > 4) memcpy(buf + n - 4, "..]", 4); /* cut, and says so */
}

static int push(const char *name, char *owned, ts_prof_kind kind, ts_device dev) {
  if (!ts_prof_recording_here()) {
    free(owned);
    return -1;
  }
  if (nevents == TS_PROF_MAX_EVENTS) { /* a profiler left running: memory stays bounded */
    dropped++;
    free(owned);
    return -1;
  }
  if (nevents == cap) {
    int ncap = cap ? cap * 2 : 4096;
    ts_prof_event *e = realloc(events, (size_t)ncap * sizeof *e);
    if (!e) {
      free(owned);
      return -1; /* out of memory: the event is lost, the op still runs */
    }
    events = e, cap = ncap;
  }
  ts_prof_event *e = &events[nevents];
  memset(e, 0, sizeof *e);
  e->name = owned ? owned : name;
  e->owned_name = owned;
  e->kind = kind;
  e->device_type = dev.type;
  e->device_index = (int8_t)dev.index;
  e->parent = open_top;
  e->correlation = -1;
  e->cpu_mem = mark_cpu; /* the starting marks until the end turns them into differences */
  e->dev_mem = mark_dev;
  open_top = nevents;
  if (opts.stack) opts.stack(e->stack, sizeof e->stack);
  if (opts.device_timing && dev.type != TS_CPU && kind == TS_PROF_OP) e->dev_start = opts.timer->record(dev);
  e->start_ns = ts_monotonic_ns();
  return nevents++;
}

int ts_prof_begin(const char *name, ts_prof_kind kind, ts_device dev, int n, ts_tensor *const *ts) {
  int i = push(name, NULL, kind, dev);
  if (i >= 0 && opts.record_shapes) format_shapes(events[i].shapes, sizeof events[i].shapes, n, ts);
  return i;
}

int ts_prof_begin_owned(char *name, ts_prof_kind kind) { return push(NULL, name, kind, (ts_device){TS_CPU, 0}); }

void ts_prof_end(int idx) {
  if (idx < 0 || idx >= nevents || !recording_thread || events[idx].end_ns) return;
  while (open_top > idx) ts_prof_end(open_top); /* opened inside and left open by an error: they end here */
  ts_prof_event *e = &events[idx];
  if (e->dev_start) e->dev_end = opts.timer->record((ts_device){e->device_type, e->device_index});
  e->end_ns = ts_monotonic_ns();
  if (opts.profile_memory) {
    int64_t cpu = (int64_t)ts_bytes_live(TS_CPU), dev = live_dev();
    e->cpu_mem = cpu - e->cpu_mem, e->dev_mem = dev - e->dev_mem;
    mark_cpu = cpu, mark_dev = dev;
  } else {
    e->cpu_mem = e->dev_mem = 0;
  }
  open_top = e->parent;
  if (e->parent >= 0) {
    ts_prof_event *p = &events[e->parent];
    p->child_ns += e->end_ns - e->start_ns;
    p->child_cpu_mem += e->cpu_mem;
    p->child_dev_mem += e->dev_mem;
  }
}

bool ts_prof_device_recording(void) { return ts_prof_recording_here() && opts.device_activity; }

/* A closed event [t0, t1] under the open region; -1 when not kept. */
static int leaf(const char *name, ts_prof_kind kind, int device, int64_t t0, int64_t t1) {
  if (nevents == TS_PROF_MAX_EVENTS) return dropped++, -1;
  if (nevents == cap) {
    int ncap = cap ? cap * 2 : 4096;
    ts_prof_event *e = realloc(events, (size_t)ncap * sizeof *e);
    if (!e) return -1;
    events = e, cap = ncap;
  }
  ts_prof_event *e = &events[nevents];
  memset(e, 0, sizeof *e);
  e->name = name ? name : "(unnamed kernel)";
  e->kind = kind;
  e->device_type = device >= 0 ? TS_CUDA : TS_CPU;
  e->device_index = (int8_t)(device >= 0 ? device : 0);
  e->parent = open_top;
  e->correlation = -1;
  e->start_ns = t0;
  e->end_ns = t1 > t0 ? t1 : t0 + 1; /* a zero end means "still open" */
  if (open_top >= 0) events[open_top].child_ns += e->end_ns - e->start_ns;
  return nevents++;
}

void ts_prof_device(const char *api, int device, int64_t t0, int64_t t1, const ts_prof_device_info *info) {
  if (!ts_prof_device_recording()) return;
  int r = leaf(api, TS_PROF_RUNTIME, device, t0, t1);
  if (r < 0) return;
  events[r].sync = info->sync;
  events[r].stream = info->stream;
  if (info->device_kind == TS_PROF_RUNTIME) return;
  int k = leaf(info->what, info->device_kind, device, t0, t1);
  if (k < 0) return;
  ts_prof_event *e = &events[k];
  memcpy(e->grid, info->grid, sizeof e->grid);
  memcpy(e->block, info->block, sizeof e->block);
  e->stream = info->stream;
  e->bytes = info->bytes;
  e->correlation = r;
  /* the device's share runs on the device: it is not the host region's time */
  if (open_top >= 0) events[open_top].child_ns -= e->end_ns - e->start_ns;
}
