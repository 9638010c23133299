// Streams, events and copies of the simulated device.
//
// Work is queued per stream and runs only when the host must wait for it: a
// stream, event or device synchronisation, a copy into pageable host memory,
// cudaFree. So a missing synchronisation gives a wrong result here (the host
// reads a buffer before the copy into it ran), not a lucky pass. A wait on an
// event runs the other stream up to the event first. The legacy default
// stream waits for the device's blocking streams and they for it, as in CUDA.
// A query of unfinished work says "not ready" once, then runs it (a polling
// loop must end).
//
// Stream capture (cudaStreamBeginCapture ... cudaStreamEndCapture): work
// queued on a capturing stream, or on a stream that joined its capture by
// waiting on an event recorded there, becomes a node of the capture's graph
// instead of running; nodes keep the order the host queued them in, which
// every dependency respects, and cudaGraphLaunch queues them again in that
// order on the launch stream. CUDA's rules are kept: a synchronisation or
// query of a capturing stream or of an event recorded in a capture, a copy
// through pageable host memory, a dependency across the capture's boundary,
// the legacy stream while a blocking stream captures, and (in the global and
// thread-local modes) the unsafe calls (cudaMalloc, cudaFree, cudaHostAlloc,
// cudaDeviceSynchronize, synchronous copies) fail and invalidate the capture;
// cudaStreamEndCapture then reports cudaErrorStreamCaptureInvalidated.
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tsim {

struct event_t;

struct capture_t;

struct work {
  enum kind_t { KERNEL, HOST, WAIT, RECORD } kind;
  kernel_launch k{};                 // KERNEL
  std::function<void()> fn;          // HOST
  const char *what = "";
  stream_t *other = nullptr;         // WAIT: other's work up to pos
  uint64_t pos = 0;
  event_t *ev = nullptr;             // RECORD
  uint64_t rec = 0;
  std::shared_ptr<kernel_body> shared; // KERNEL of a graph: the body stays with the graph
};

struct stream_t {
  int device;
  bool blocking, legacy;
  std::deque<work> q;
  uint64_t submitted = 0, completed = 0;
  capture_t *cap = nullptr;          // the capture this stream's work goes into
  uint64_t cap_nodes = 0, cap_joined = 0; // nodes it added; of those, how many the origin has waited for
};

// One capture sequence: its origin stream, mode, thread, and the nodes so far.
struct capture_t {
  stream_t *origin;
  cudaStreamCaptureMode mode;
  std::thread::id thread;
  std::vector<work> nodes;
  std::set<stream_t *> members; // the origin and the streams that joined
  bool invalid = false;
  std::string why;              // what invalidated it
};

struct event_t {
  int device;
  unsigned flags;
  stream_t *s = nullptr;
  uint64_t pos = 0, rec = 0;
  double ms = NAN; // when the latest record ran
  bool queried = false, destroyed = false;
  int pending = 0; // queued RECORD items that point at this event
  capture_t *cap = nullptr; // last recorded inside this capture: a dependency, not work
  uint64_t cap_nodes = 0;   // the recording stream's node count then
};

static std::set<stream_t *> streams;
static std::set<event_t *> events;
static stream_t *legacy[16];
static uint64_t kernel_ids;

static double now_ms() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static stream_t *legacy_of(int d) {
  if (!legacy[d]) {
    legacy[d] = new stream_t{d, true, true, {}, 0, 0};
    streams.insert(legacy[d]);
  }
  return legacy[d];
}

stream_t *stream_of(cudaStream_t h, cudaError_t *err) {
  *err = cudaSuccess;
  if (h == 0 || h == cudaStreamLegacy || h == cudaStreamPerThread) return legacy_of(current_device());
  stream_t *s = (stream_t *)h;
  if (!streams.count(s)) {
    *err = fail(cudaErrorInvalidResourceHandle, false, "stream %p was destroyed or never created", (void *)h);
    return nullptr;
  }
  return s;
}

static std::set<capture_t *> captures;
static thread_local cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

static void invalidate(capture_t *c, const char *why) {
  if (!c->invalid) c->invalid = true, c->why = why;
}

// The captures an unsafe call of this thread conflicts with (CUDA's modes):
// its own unless relaxed, and other threads' global ones unless this thread
// is relaxed or thread-local.
static capture_t *unsafe_conflict() {
  if (thread_mode == cudaStreamCaptureModeRelaxed) return nullptr;
  for (capture_t *c : captures) {
    if (c->mode == cudaStreamCaptureModeRelaxed) continue;
    if (c->thread == std::this_thread::get_id() || (thread_mode == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal)) return c;
  }
  return nullptr;
}

cudaError_t capture_unsafe(const char *what) {
  capture_t *c = unsafe_conflict();
  if (!c) return cudaSuccess;
  invalidate(c, what);
  return fail(cudaErrorStreamCaptureUnsupported, false,
              "%s is not permitted while a stream is capturing (cudaStreamCaptureModeGlobal); the capture is invalidated",
              what);
}

// A synchronisation or query of s: refused while s captures.
static cudaError_t capture_sync(stream_t *s, const char *what) {
  capture_t *c = s->cap;
  if (!c && s->legacy) // the legacy stream waits for blocking streams, a capturing one among them
    for (capture_t *o : captures)
      for (stream_t *m : o->members)
        if (m->blocking && m->device == s->device) c = o;
  if (!c) return cudaSuccess;
  invalidate(c, what);
  return fail(cudaErrorStreamCaptureUnsupported, false,
              "%s of a stream that is capturing (the host cannot wait for work that has not run); the capture is "
              "invalidated", what);
}

static bool push_captured(stream_t *s, work &&w) {
  capture_t *c = s->cap;
  if (!c) return false;
  if (w.kind == work::KERNEL && !w.shared) w.shared.reset(w.k.body); // the graph owns the body; each launch runs it
  if (!c->invalid && (w.kind == work::KERNEL || w.kind == work::HOST)) c->nodes.push_back(std::move(w)), s->cap_nodes++;
  return true;
}

// Whether work may be queued on s: not into an invalidated capture, and not
// on the legacy stream while a blocking stream of its device captures.
static cudaError_t can_queue(stream_t *s, const char *what) {
  if (s->cap && s->cap->invalid)
    return fail(cudaErrorStreamCaptureInvalidated, false, "%s: the stream's capture was invalidated by %s", what,
                s->cap->why.c_str());
  if (s->legacy)
    for (capture_t *c : captures)
      for (stream_t *m : c->members)
        if (m->blocking && m->device == s->device) {
          invalidate(c, "work on the legacy stream");
          return fail(cudaErrorStreamCaptureImplicit, false,
                      "%s on the legacy default stream while a blocking stream captures (it would wait for the "
                      "capture); the capture is invalidated", what);
        }
  return cudaSuccess;
}

static void push(stream_t *s, work &&w) {
  if (push_captured(s, std::move(w))) return;
  // the legacy stream and blocking streams order against each other
  if (s->legacy) {
    for (stream_t *o : streams)
      if (o != s && o->device == s->device && o->blocking && o->submitted > o->completed)
        s->q.push_back(work{work::WAIT, {}, {}, "", o, o->submitted}), s->submitted++;
  } else if (s->blocking) {
    stream_t *l = legacy_of(s->device);
    if (l->submitted > l->completed) s->q.push_back(work{work::WAIT, {}, {}, "", l, l->submitted}), s->submitted++;
  }
  s->q.push_back(std::move(w));
  s->submitted++;
}

static int accessible_device = -1; // whose memory is open while work runs

static void open_device(int d) {
  if (accessible_device == d) return;
  device_access(accessible_device, false);
  device_access(d, true);
  accessible_device = d;
}

static void run_until(stream_t *s, uint64_t pos);

static void execute(stream_t *s, work &w) {
  switch (w.kind) {
  case work::WAIT:
    if (w.other) run_until(w.other, w.pos); // (null: the stream was destroyed, its work done)
    break;
  case work::RECORD:
    if (w.rec == w.ev->rec) w.ev->ms = now_ms();
    if (--w.ev->pending == 0 && w.ev->destroyed) events.erase(w.ev), delete w.ev;
    break;
  case work::HOST:
    if (sticky_error()) break;
    open_device(s->device);
    host_work = w.what;
    w.fn();
    host_work = nullptr;
    break;
  case work::KERNEL:
    if (!sticky_error()) {
      open_device(w.k.device);
      run_kernel(w.k);
      after_kernel(w.k.where);
    }
    if (!w.shared) delete w.k.body;
    break;
  }
}

static int draining; // nesting depth: memory closes when the outermost drain ends

static void run_until(stream_t *s, uint64_t pos) {
  draining++;
  while (s->completed < pos && !s->q.empty()) {
    work w = std::move(s->q.front());
    s->q.pop_front();
    execute(s, w);
    s->completed++;
  }
  if (--draining == 0) open_device(-1);
}

static void drain(stream_t *s) { run_until(s, s->submitted); }

void drain_device(int d) {
  std::vector<stream_t *> list(streams.begin(), streams.end());
  for (stream_t *s : list)
    if (s->device == d && streams.count(s)) drain(s);
}

cudaError_t enqueue_host(cudaStream_t h, const char *what, std::function<void()> fn) {
  cudaError_t e;
  stream_t *s = stream_of(h, &e);
  if (!s) return e;
  if ((e = can_queue(s, what))) return e;
  work w{work::HOST};
  w.fn = std::move(fn);
  w.what = what;
  push(s, std::move(w));
  return cudaSuccess;
}

void enqueue_kernel(const site &where, const launch_cfg &c, kernel_body *body, const void *const *ptrs, int nptrs) {
  std::lock_guard<std::recursive_mutex> g(lock());
  cudaError_t e = sticky_error();
  stream_t *s = e ? nullptr : stream_of(c.stream, &e);
  kernel_launch k{where, c, body, current_device(), ++kernel_ids};
  if (s && s->device != k.device)
    e = fail(cudaErrorInvalidResourceHandle, false,
             "kernel %s (%s:%d) launched on a stream of device %d while device %d is current", where.kernel,
             where.file, where.line, s->device, k.device);
  if (!e) e = check_config(k);
  if (!e) e = can_queue(s, where.kernel);
  for (int i = 0; !e && i < nptrs; i++) {
    if (!ptrs[i] || classify(ptrs[i], NULL, NULL, NULL) != MEM_HOST) continue;
    e = fail(cudaErrorIllegalAddress, true,
             "kernel %s (%s:%d): pointer argument %d (%p) is host memory; kernels read device memory (or "
             "page-locked host memory)",
             where.kernel, where.file, where.line, i + 1, ptrs[i]);
  }
  if (e) {
    delete body;
    return;
  }
  work w{work::KERNEL};
  w.k = k;
  push(s, std::move(w));
  notify_launch(where, c);
  if (getenv("CUDA_LAUNCH_BLOCKING") && getenv("CUDA_LAUNCH_BLOCKING")[0] == '1' && !s->cap) drain(s);
}

} // namespace tsim

using namespace tsim;

#define TSIM_ENTER()                                        \
  std::lock_guard<std::recursive_mutex> tsim_guard(lock()); \
  if (cudaError_t tsim_e_ = sticky_error()) return tsim_e_

static event_t *event_of(cudaEvent_t h, cudaError_t *err) {
  event_t *e = (event_t *)h;
  *err = cudaSuccess;
  if (!events.count(e) || e->destroyed) {
    *err = fail(cudaErrorInvalidResourceHandle, false, "event %p was destroyed or never created", (void *)h);
    return nullptr;
  }
  return e;
}

extern "C" {

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *out, unsigned flags, int priority) {
  TSIM_ENTER();
  stream_t *s = new stream_t{current_device(), !(flags & cudaStreamNonBlocking), false, {}, 0, 0};
  streams.insert(s);
  *out = (cudaStream_t)s;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags) {
  return cudaStreamCreateWithPriority(out, flags, 0);
}
cudaError_t cudaStreamCreate(cudaStream_t *out) { return cudaStreamCreateWithPriority(out, 0, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t h) {
  TSIM_ENTER();
  cudaError_t e;
  stream_t *s = stream_of(h, &e);
  if (!s) return e;
  if (s->legacy) return fail(cudaErrorInvalidResourceHandle, false, "cudaStreamDestroy of the default stream");
  if (s->cap) {
    invalidate(s->cap, "cudaStreamDestroy");
    return fail(cudaErrorStreamCaptureUnsupported, false, "cudaStreamDestroy of a stream that is capturing");
  }
  drain(s); // its queued work completes, as on a GPU
  streams.erase(s);
  // the waits other streams queued for it are met (it ran to its end); they
  // must not read it once it is freed (a wait_stream on a stream collected
  // before the waiting stream ran: a use after free under make asan)
  for (stream_t *o : streams)
    for (work &w : o->q)
      if (w.kind == work::WAIT && w.other == s) w.other = nullptr;
  delete s;
  return sticky_error();
}

cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  TSIM_ENTER();
  cudaError_t e;
  stream_t *s = stream_of(h, &e);
  if (!s) return e;
  if ((e = capture_sync(s, "cudaStreamSynchronize"))) return e;
  drain(s);
  return sticky_error();
}

cudaError_t cudaStreamQuery(cudaStream_t h) {
  TSIM_ENTER();
  cudaError_t e;
  stream_t *s = stream_of(h, &e);
  if (!s) return e;
  if ((e = capture_sync(s, "cudaStreamQuery"))) return e;
  static std::set<stream_t *> asked;
  if (s->completed < s->submitted && asked.insert(s).second) return cudaErrorNotReady;
  asked.erase(s);
  drain(s);
  return sticky_error();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned flags) {
  TSIM_ENTER();
  event_t *e = new event_t{current_device(), flags};
  events.insert(e);
  *out = (cudaEvent_t)e;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *out) { return cudaEventCreateWithFlags(out, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t h) {
  TSIM_ENTER();
  cudaError_t err;
  event_t *e = event_of(h, &err);
  if (!e) return err;
  e->destroyed = true; // waits already queued keep their position; records free it when they run
  if (!e->pending) events.erase(e), delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t sh) {
  TSIM_ENTER();
  cudaError_t err;
  event_t *e = event_of(h, &err);
  stream_t *s = e ? stream_of(sh, &err) : nullptr;
  if (!s) return err;
  if (s->device != e->device)
    return fail(cudaErrorInvalidResourceHandle, false,
                "cudaEventRecord: the event belongs to device %d, the stream to device %d", e->device, s->device);
  if ((err = can_queue(s, "cudaEventRecord"))) return err;
  if (s->cap) { // inside a capture the event marks a point of the graph, for joins
    e->cap = s->cap, e->cap_nodes = s->cap_nodes, e->s = s, e->queried = false, e->ms = NAN;
    return cudaSuccess;
  }
  e->cap = nullptr;
  work w{work::RECORD};
  w.ev = e;
  w.rec = ++e->rec;
  e->pending++;
  e->queried = false;
  e->ms = NAN;
  push(s, std::move(w));
  e->s = s;
  e->pos = s->submitted;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t sh, cudaEvent_t h, unsigned flags) {
  TSIM_ENTER();
  cudaError_t err;
  event_t *e = event_of(h, &err);
  stream_t *s = e ? stream_of(sh, &err) : nullptr;
  if (!s) return err;
  if ((err = can_queue(s, "cudaStreamWaitEvent"))) return err;
  if (e->cap && !captures.count(e->cap)) e->cap = nullptr; // that capture has ended: an ordinary point again
  if (e->cap) {
    if (s->cap && s->cap != e->cap) {
      invalidate(s->cap, "cudaStreamWaitEvent"), invalidate(e->cap, "cudaStreamWaitEvent");
      return fail(cudaErrorStreamCaptureMerge, false,
                  "cudaStreamWaitEvent: the stream and the event belong to two different captures");
    }
    if (!s->cap) s->cap = e->cap, s->cap_nodes = s->cap_joined = 0, e->cap->members.insert(s); // a fork joins the capture
    else if (s == s->cap->origin && e->s != s && e->cap_nodes > e->s->cap_joined) e->s->cap_joined = e->cap_nodes;
    return cudaSuccess;
  }
  if (s->cap && e->s) {
    invalidate(s->cap, "cudaStreamWaitEvent");
    return fail(cudaErrorStreamCaptureIsolation, false,
                "cudaStreamWaitEvent: a capturing stream cannot wait for an event recorded outside its capture (wait "
                "before the capture begins); the capture is invalidated");
  }
  if (e->s && streams.count(e->s) && e->s != s) push(s, work{work::WAIT, {}, {}, "", e->s, e->pos});
  return cudaSuccess;
}

// A synchronisation, query or timing of an event recorded inside a capture.
static cudaError_t captured_event(event_t *e, const char *what) {
  if (!e->cap || !captures.count(e->cap)) return cudaSuccess;
  invalidate(e->cap, what);
  return fail(cudaErrorCapturedEvent, false,
              "%s of an event recorded in a capturing stream (it marks a point of the graph, not work that runs); the "
              "capture is invalidated", what);
}

static bool event_done(event_t *e) { return !e->s || !streams.count(e->s) || e->s->completed >= e->pos; }

cudaError_t cudaEventSynchronize(cudaEvent_t h) {
  TSIM_ENTER();
  cudaError_t err;
  event_t *e = event_of(h, &err);
  if (!e) return err;
  if ((err = captured_event(e, "cudaEventSynchronize"))) return err;
  if (!event_done(e)) run_until(e->s, e->pos);
  return sticky_error();
}

cudaError_t cudaEventQuery(cudaEvent_t h) {
  TSIM_ENTER();
  cudaError_t err;
  event_t *e = event_of(h, &err);
  if (!e) return err;
  if ((err = captured_event(e, "cudaEventQuery"))) return err;
  if (event_done(e)) return cudaSuccess;
  if (!e->queried) return e->queried = true, cudaErrorNotReady;
  run_until(e->s, e->pos);
  return sticky_error();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  TSIM_ENTER();
  cudaError_t err;
  event_t *ea = event_of(a, &err), *eb = ea ? event_of(b, &err) : nullptr;
  if (!eb) return err;
  if ((err = captured_event(ea, "cudaEventElapsedTime")) || (err = captured_event(eb, "cudaEventElapsedTime"))) return err;
  if ((ea->flags | eb->flags) & cudaEventDisableTiming)
    return fail(cudaErrorInvalidResourceHandle, false, "cudaEventElapsedTime: an event was created without timing");
  if (!ea->s || !eb->s) return fail(cudaErrorInvalidResourceHandle, false, "cudaEventElapsedTime: an event was never recorded");
  if (!event_done(ea) || !event_done(eb)) return cudaErrorNotReady;
  *ms = (float)(eb->ms - ea->ms);
  return cudaSuccess;
}

// ---- copies ----

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t sh) {
  TSIM_ENTER();
  cudaError_t err;
  stream_t *s = stream_of(sh, &err);
  if (!s) return err;
  if (n == 0) return cudaSuccess;
  mem_kind dk = classify(dst, NULL, NULL, NULL), sk = classify(src, NULL, NULL, NULL);
  if (kind == cudaMemcpyDefault)
    kind = dk == MEM_DEVICE ? (sk == MEM_DEVICE ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                            : (sk == MEM_DEVICE ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  bool d_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool s_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (d_dev && (err = check_device_range(dst, n, -1, "cudaMemcpyAsync destination"))) return err;
  if (s_dev && (err = check_device_range(src, n, -1, "cudaMemcpyAsync source"))) return err;
  if (!d_dev && dk == MEM_DEVICE)
    return fail(cudaErrorInvalidValue, false, "cudaMemcpyAsync: the destination is device memory, the kind says host");
  if (!s_dev && sk == MEM_DEVICE)
    return fail(cudaErrorInvalidValue, false, "cudaMemcpyAsync: the source is device memory, the kind says host");
  if ((err = can_queue(s, "cudaMemcpyAsync"))) return err;
  if (s->cap && ((!d_dev && dk == MEM_HOST) || (!s_dev && sk == MEM_HOST))) {
    invalidate(s->cap, "a copy through pageable host memory");
    return fail(cudaErrorStreamCaptureUnsupported, false,
                "cudaMemcpyAsync %s pageable host memory while the stream captures (a graph copies only device and "
                "page-locked memory); the capture is invalidated", d_dev ? "from" : "to");
  }
  if (kind == cudaMemcpyHostToDevice && sk == MEM_HOST) {
    // pageable source: staged now, so the caller may reuse it on return
    auto staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
    push(s, work{work::HOST, {}, [dst, staged] {
                   if (!check_block_range(dst, staged->size(), "cudaMemcpyAsync destination"))
                     memcpy(dst, staged->data(), staged->size());
                 }, "cudaMemcpyAsync"});
    return cudaSuccess;
  }
  push(s, work{work::HOST, {}, [dst, src, n, d_dev, s_dev] {
                 if (d_dev && check_block_range(dst, n, "cudaMemcpyAsync destination")) return;
                 if (s_dev && check_block_range(src, n, "cudaMemcpyAsync source")) return;
                 memcpy(dst, src, n);
               }, "cudaMemcpyAsync"});
  if (kind == cudaMemcpyDeviceToHost && dk == MEM_HOST) drain(s); // pageable destination: returns when done
  return sticky_error();
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  TSIM_ENTER();
  if (cudaError_t e = capture_unsafe("cudaMemcpy")) return e;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, 0);
  if (!e) drain(legacy_of(current_device()));
  return e ? e : sticky_error();
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t sh) {
  TSIM_ENTER();
  cudaError_t err;
  stream_t *s = stream_of(sh, &err);
  if (!s) return err;
  if (n == 0) return cudaSuccess;
  if ((err = check_device_range(dst, n, dd, "cudaMemcpyPeerAsync destination"))) return err;
  if ((err = check_device_range(src, n, sd, "cudaMemcpyPeerAsync source"))) return err;
  if ((err = can_queue(s, "cudaMemcpyPeerAsync"))) return err;
  push(s, work{work::HOST, {}, [dst, dd, src, sd, n] {
                 if (check_block_range(dst, n, "cudaMemcpyPeerAsync destination") ||
                     check_block_range(src, n, "cudaMemcpyPeerAsync source"))
                   return;
                 device_access(dd, true), device_access(sd, true); // both ends open for the copy
                 memcpy(dst, src, n);
                 if (dd != accessible_device) device_access(dd, false);
                 if (sd != accessible_device) device_access(sd, false);
               }, "cudaMemcpyPeerAsync"});
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t sh) {
  TSIM_ENTER();
  cudaError_t err;
  stream_t *s = stream_of(sh, &err);
  if (!s) return err;
  if (n == 0) return cudaSuccess;
  if ((err = check_device_range(p, n, -1, "cudaMemsetAsync"))) return err;
  if ((err = can_queue(s, "cudaMemsetAsync"))) return err;
  push(s, work{work::HOST, {}, [p, v, n] {
                 if (!check_block_range(p, n, "cudaMemsetAsync")) memset(p, v, n);
               }, "cudaMemsetAsync"});
  return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n) { return cudaMemsetAsync(p, v, n, 0); }

} // extern "C"

// ---- stream capture and graphs ----

// The graph a capture made, and its executable copy: the nodes in the order
// they were queued (kernel bodies shared: a launch runs them again).
struct CUgraph_st {
  int device;
  std::vector<tsim::work> nodes;
};
struct CUgraphExec_st {
  int device;
  std::vector<tsim::work> nodes;
};

namespace tsim {

// cudaDeviceSynchronize: an unsafe call, and never while a stream of the device captures.
cudaError_t capture_device_sync(int d) {
  if (cudaError_t e = capture_unsafe("cudaDeviceSynchronize")) return e;
  for (capture_t *c : captures)
    if (c->origin->device == d) {
      invalidate(c, "cudaDeviceSynchronize");
      return fail(cudaErrorStreamCaptureUnsupported, false,
                  "cudaDeviceSynchronize while a stream of device %d is capturing; the capture is invalidated", d);
    }
  return cudaSuccess;
}

static std::set<CUgraph_st *> graphs;
static std::set<CUgraphExec_st *> execs;

} // namespace tsim

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode) {
  TSIM_ENTER();
  cudaError_t e;
  stream_t *s = stream_of(h, &e);
  if (!s) return e;
  if (s->legacy)
    return fail(cudaErrorStreamCaptureUnsupported, false, "cudaStreamBeginCapture: the legacy default stream cannot capture");
  if (s->cap) return fail(cudaErrorIllegalState, false, "cudaStreamBeginCapture: the stream is already capturing");
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal && mode != cudaStreamCaptureModeRelaxed)
    return fail(cudaErrorInvalidValue, false, "cudaStreamBeginCapture: unknown mode %d", (int)mode);
  capture_t *c = new capture_t{s, mode, std::this_thread::get_id()};
  c->members.insert(s);
  captures.insert(c);
  s->cap = c, s->cap_nodes = s->cap_joined = 0;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *out) {
  TSIM_ENTER();
  cudaError_t e;
  stream_t *s = stream_of(h, &e);
  if (!s) return e;
  *out = nullptr;
  capture_t *c = s->cap;
  if (!c) return fail(cudaErrorIllegalState, false, "cudaStreamEndCapture: the stream is not capturing");
  if (c->origin != s)
    return fail(cudaErrorStreamCaptureUnmatched, false, "cudaStreamEndCapture: the capture began on another stream");
  if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
    return fail(cudaErrorStreamCaptureWrongThread, false, "cudaStreamEndCapture from another thread than its begin");
  bool unjoined = false;
  for (stream_t *m : c->members) {
    if (m != s && m->cap_nodes > m->cap_joined) unjoined = true;
    m->cap = nullptr;
  }
  captures.erase(c);
  std::unique_ptr<capture_t> gone(c);
  if (c->invalid)
    return fail(cudaErrorStreamCaptureInvalidated, false, "cudaStreamEndCapture: the capture was invalidated by %s",
                c->why.c_str());
  if (unjoined)
    return fail(cudaErrorStreamCaptureUnjoined, false,
                "cudaStreamEndCapture: a stream that joined the capture has work the capturing stream never waited for");
  CUgraph_st *g = new CUgraph_st{s->device, std::move(c->nodes)};
  graphs.insert(g);
  *out = g;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *status) {
  TSIM_ENTER();
  cudaError_t e;
  stream_t *s = stream_of(h, &e);
  if (!s) return e;
  if (s->legacy && (e = can_queue(s, "cudaStreamIsCapturing"))) return e;
  *status = !s->cap ? cudaStreamCaptureStatusNone
            : s->cap->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  if (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal && *mode != cudaStreamCaptureModeRelaxed)
    return fail(cudaErrorInvalidValue, false, "cudaThreadExchangeStreamCaptureMode: unknown mode %d", (int)*mode);
  std::swap(*mode, thread_mode);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *out, cudaGraph_t g, unsigned long long flags) {
  TSIM_ENTER();
  if (!graphs.count(g)) return fail(cudaErrorInvalidValue, false, "cudaGraphInstantiate: not a live graph");
  CUgraphExec_st *x = new CUgraphExec_st{g->device, g->nodes};
  execs.insert(x);
  *out = x;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t h) {
  TSIM_ENTER();
  if (!execs.count(x)) return fail(cudaErrorInvalidValue, false, "cudaGraphLaunch: not a live executable graph");
  cudaError_t e;
  stream_t *s = stream_of(h, &e);
  if (!s) return e;
  if (s->device != x->device)
    return fail(cudaErrorInvalidValue, false, "cudaGraphLaunch: the graph belongs to device %d, the stream to device %d",
                x->device, s->device);
  if ((e = can_queue(s, "cudaGraphLaunch"))) return e;
  for (const work &n : x->nodes) {
    work w = n; // the kernel body stays shared; the launch is a new one
    if (w.kind == work::KERNEL) w.k.id = ++kernel_ids;
    push(s, std::move(w));
  }
  if (getenv("CUDA_LAUNCH_BLOCKING") && getenv("CUDA_LAUNCH_BLOCKING")[0] == '1' && !s->cap) drain(s);
  return cudaSuccess;
}

// Destroying a graph while a launch of it is queued is allowed: queued nodes keep their bodies.
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
  TSIM_ENTER();
  if (!execs.erase(x)) return fail(cudaErrorInvalidValue, false, "cudaGraphExecDestroy: not a live executable graph");
  delete x;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  TSIM_ENTER();
  if (!graphs.erase(g)) return fail(cudaErrorInvalidValue, false, "cudaGraphDestroy: not a live graph");
  delete g;
  return cudaSuccess;
}

} // extern "C"
