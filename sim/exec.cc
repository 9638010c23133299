// Kernels on the simulated device: blocks spread over worker threads, the
// threads of a block as fibers (Boost.Context) on its worker.
//
// A block runs in rounds: every runnable thread runs, in the launch's order,
// until it finishes or stops at a barrier or a warp operation. Then warp
// operations whose lanes have all arrived complete, and when every thread
// waits at __syncthreads the barrier opens. A barrier or warp operation that
// can never complete (some threads returned, or wait elsewhere) is reported
// with the kernel, block and thread, and the launch fails as a hung kernel
// would; so is a barrier or warp operation whose threads wait at different
// call sites. Launches alternate between running threads (and blocks) in
// forward and reverse order (TENSH_SIM_SCHEDULE), so a missing barrier
// changes the result instead of hiding behind one lucky order; the access
// checks (sim/check.cc) report the race itself.
//
// __shared__ memory: each worker thread has an arena (memory.cc places it in
// the checked window); a block's declarations are placed in it as its
// threads first reach them, filled with 0xff bytes.
#include "sim.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <condition_variable>
#include <thread>
#include <vector>

#include <boost/context/fiber.hpp>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace ctx = boost::context;

namespace tsim {

__thread thread_state *cur;
__thread block_view *cur_block;

// ---- fiber stacks: mmap'ed with a guard page, reused across blocks ----
static const size_t STACK = 256 << 10;

struct fiber_slot;

// A worker thread's idle fibers and their stacks, kept across blocks and
// launches; when the thread ends, its fibers are unwound, then the stacks go.
struct worker_fibers {
  std::vector<void *> free_stacks;
  std::vector<fiber_slot *> free_slots;
  ~worker_fibers();
};
static thread_local worker_fibers pool;

struct pooled_stack {
  void **base; // where to note the stack's lowest address (its guard page), for AddressSanitizer
  ctx::stack_context allocate() {
    void *p;
    if (!pool.free_stacks.empty()) p = pool.free_stacks.back(), pool.free_stacks.pop_back();
    else {
      p = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      mprotect(p, 4096, PROT_NONE); // overflow faults instead of corrupting the next stack
    }
    *base = p;
    ctx::stack_context sc;
    sc.size = STACK;
    sc.sp = (char *)p + STACK;
    return sc;
  }
  void deallocate(ctx::stack_context &sc) { pool.free_stacks.push_back((char *)sc.sp - STACK); }
};

// ---- one block ----
// FAULTED: stopped for good by a failed access check; unwound with its block
enum thread_wait { RUNNABLE, AT_BARRIER, AT_WARP, DONE, FAULTED };

struct sim_thread {
  thread_state ts;
  fiber_slot *slot = nullptr; // the fiber running this thread while it waits mid-body
  thread_wait wait = RUNNABLE;
  unsigned mask = 0;
  const char *what = "";
  const char *file = ""; // the barrier or warp operation it waits at
  int line = 0;
  unsigned char value[16];
};

// A fiber runs one simulated thread after another: a thread that finishes
// without waiting hands it on, so a kernel without barriers costs two
// switches a thread; a thread that waits keeps its fiber until it finishes.
struct fiber_slot {
  ctx::fiber fiber, sink;
  sim_thread *assigned = nullptr;
  void *stack = nullptr;                       // its stack's lowest address
  void *fake_stack = nullptr;                  // AddressSanitizer's, kept while switched away
  const void *host_stack = nullptr;            // the worker's stack, where the fiber switches back to
  size_t host_size = 0;
};

// AddressSanitizer follows the stack pointer only when told of every switch
// between a worker's stack and a fiber's (start before, finish after): else
// an exception thrown on a fiber (the unwinding of a failed block's threads)
// makes it unpoison or report the wrong stack. Without ASan these are empty.
#if defined(__SANITIZE_ADDRESS__)
static void san_start(void **fake, const void *bottom, size_t size) { __sanitizer_start_switch_fiber(fake, bottom, size); }
static void san_finish(void *fake, const void **bottom, size_t *size) {
  __sanitizer_finish_switch_fiber(fake, bottom, size);
}
#else
static void san_start(void **, const void *, size_t) {}
static void san_finish(void *, const void **, size_t *) {}
#endif

// From a fiber back to its worker. When the worker deletes the slot of a
// thread stopped mid-body, the fiber resumes here with Boost's unwinding
// exception: the switch in is finished before it propagates.
static void to_worker(fiber_slot *slot) {
  san_start(&slot->fake_stack, slot->host_stack, slot->host_size);
  try {
    slot->sink = std::move(slot->sink).resume();
  } catch (ctx::detail::forced_unwind &) {
    san_finish(slot->fake_stack, &slot->host_stack, &slot->host_size);
    throw;
  }
  san_finish(slot->fake_stack, &slot->host_stack, &slot->host_size);
}

// From the worker into a fiber: to run its thread, or (delete) to unwind it.
static thread_local void *worker_fake_stack;
static void to_fiber_start(fiber_slot *slot) { san_start(&worker_fake_stack, slot->stack, STACK); }
static void to_fiber_end() { san_finish(worker_fake_stack, nullptr, nullptr); }

struct shared_decl {
  const void *key;
  size_t offset;
};

struct block_state {
  const kernel_launch *k;
  block_view view;
  std::vector<sim_thread> threads;
  unsigned char snapshot[32][32 * 16]; // per warp: the lanes' values at the last exchange
  unsigned char *shared;               // this worker's arena
  size_t shared_used;
  std::vector<shared_decl> shared_decls; // the block's __shared__ variables so far
  cudaError_t code;                      // of the error: cudaErrorLaunchFailure unless an access check says
  char error[768];
};

static thread_local sim_thread *me;

static thread_local kernel_body *cur_body;

static void yield(thread_wait w) {
  me->wait = w;
  sim_thread *self = me;
  to_worker(self->slot);
  me = self;
  cur = &self->ts;
}

// A fiber's life: runs the threads the scheduler assigns it, one after another.
static ctx::fiber fiber_main(fiber_slot *slot, ctx::fiber &&sink) {
  san_finish(nullptr, &slot->host_stack, &slot->host_size);
  slot->sink = std::move(sink);
  try {
    for (;;) {
      sim_thread *t = slot->assigned;
      me = t;
      cur = &t->ts;
      cur_body->run();
      t->wait = DONE;
      to_worker(slot); // back to the scheduler, free for the next thread
    }
  } catch (ctx::detail::forced_unwind &) {
    san_start(nullptr, slot->host_stack, slot->host_size); // the fiber's last switch: its fake stack goes
    throw;
  }
  return std::move(slot->sink);
}

// A new fiber, or NULL when the host has no memory for its stack (a process
// near its address-space limit): the launch then fails instead of the process.
static fiber_slot *new_slot() {
  fiber_slot *slot = new (std::nothrow) fiber_slot();
  if (!slot) return nullptr;
  try {
    slot->fiber = ctx::fiber(std::allocator_arg, pooled_stack{&slot->stack},
                             [slot](ctx::fiber &&sink) { return fiber_main(slot, std::move(sink)); });
  } catch (std::bad_alloc &) {
    delete slot;
    return nullptr;
  }
  return slot;
}

static void where_string(const block_state &b, const sim_thread &t, char *buf, size_t n) {
  snprintf(buf, n, "block (%u,%u,%u) thread (%u,%u,%u)", b.view.bid.x, b.view.bid.y, b.view.bid.z, t.ts.tid.x,
           t.ts.tid.y, t.ts.tid.z);
}

void fault_where(char *buf, size_t n) {
  if (me) where_string(*me->ts.blk, *me, buf, n);
  else snprintf(buf, n, "(no thread)");
}

void syncthreads(const char *file, int line) {
  me->file = file, me->line = line;
  yield(AT_BARRIER);
}

const unsigned char *warp_exchange(unsigned mask, const void *v, size_t n, const char *what, const char *file,
                                   int line) {
  me->mask = mask;
  me->what = what;
  me->file = file, me->line = line;
  memcpy(me->value, v, n);
  yield(AT_WARP);
  return me->ts.blk->snapshot[me->ts.linear / 32];
}

void syncwarp(unsigned mask, const char *file, int line) {
  int zero = 0;
  warp_exchange(mask, &zero, sizeof zero, "__syncwarp", file, line);
}

void block_fail(cudaError_t code, const char *fmt, ...) {
  block_state &b = *me->ts.blk;
  if (b.error[0]) return;
  char where[96];
  where_string(b, *me, where, sizeof where);
  int n = snprintf(b.error, sizeof b.error, "%s: ", where);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b.error + n, sizeof b.error - n, fmt, ap);
  va_end(ap);
  b.code = code;
}

void abandon_thread() {
  yield(FAULTED);
  abort(); // never resumed: run_block unwinds the fiber
}

void warp_width_check(int width, const char *what) {
  block_fail(cudaErrorLaunchFailure, "%s with width %d: the width must be a power of two from 1 to 32", what, width);
}

void *shared_alloc(const void *key, size_t size, size_t align) {
  block_state &b = *me->ts.blk;
  for (const shared_decl &d : b.shared_decls)
    if (d.key == key) return b.shared + d.offset;
  if (align < 16) align = 16;
  size_t off = (b.shared_used + align - 1) / align * align;
  if (off + size > SHARED_STATIC_MAX) {
    block_fail(cudaErrorLaunchOutOfResources, "the kernel's __shared__ variables need more than %zu bytes (48 KiB)",
               SHARED_STATIC_MAX);
    abandon_thread();
  }
  memset(b.shared + off, 0xff, size); // poisoned: what no thread of this block wrote reads as NaN / -1
  b.shared_decls.push_back({key, off});
  b.shared_used = off + size;
  return b.shared + off;
}

void warp_lane_check(unsigned mask, int src, const char *what) {
  if (mask >> (src & 31) & 1) return;
  block_state &b = *me->ts.blk;
  if (!b.error[0]) {
    char w[96];
    where_string(b, *me, w, sizeof w);
    snprintf(b.error, sizeof b.error, "%s: %s reads lane %d, which is not in its mask 0x%08x", w, what, src & 31, mask);
  }
}

void launch_bounds(int max_threads, int) {
  if (me->ts.linear != 0) return;
  block_state &b = *me->ts.blk;
  unsigned n = b.view.bdim.x * b.view.bdim.y * b.view.bdim.z;
  if ((int)n > max_threads && !b.error[0])
    snprintf(b.error, sizeof b.error, "launched with %u threads a block, past its __launch_bounds__(%d)", n, max_threads);
}

static uint16_t phase_of(const block_view &v, int warp) {
  return (uint16_t)((v.barriers & 1023) << 6 | (v.warp_syncs[warp] & 63));
}

static bool same_site(const sim_thread &a, const sim_thread &b) {
  return a.line == b.line && (a.file == b.file || !strcmp(a.file, b.file));
}

// One round's bookkeeping: completes warp operations and barriers, or says
// why the block cannot go on (b.error).
static bool release(block_state &b) {
  int n = (int)b.threads.size(), waiting_warp = 0, at_barrier = 0, done = 0;
  for (sim_thread &t : b.threads) {
    waiting_warp += t.wait == AT_WARP;
    at_barrier += t.wait == AT_BARRIER;
    done += t.wait == DONE;
  }
  if (done == n) return false;
  if (waiting_warp) {
    bool progress = false;
    for (int w = 0; w * 32 < n; w++) {
      sim_thread *lanes = &b.threads[w * 32];
      int nl = n - w * 32 < 32 ? n - w * 32 : 32;
      unsigned arrived = 0, mask = 0;
      for (int l = 0; l < nl; l++)
        if (lanes[l].wait == AT_WARP) arrived |= 1u << l, mask |= lanes[l].mask;
      if (!arrived) continue;
      if ((mask & arrived) == mask) { // every lane named by the masks is here
        int first = __builtin_ctz(arrived);
        for (int l = first + 1; l < nl; l++)
          if (arrived >> l & 1 && !same_site(lanes[first], lanes[l])) {
            char a[96], c[96];
            where_string(b, lanes[first], a, sizeof a);
            where_string(b, lanes[l], c, sizeof c);
            snprintf(b.error, sizeof b.error,
                     "warp operations at different call sites meet: %s is at %s (%s:%d), %s at %s (%s:%d) "
                     "(a warp operation in divergent code)",
                     a, lanes[first].what, lanes[first].file, lanes[first].line, c, lanes[l].what, lanes[l].file,
                     lanes[l].line);
            return false;
          }
        b.view.warp_syncs[w]++;
        for (int l = 0; l < nl; l++) {
          if (arrived >> l & 1) memcpy(b.snapshot[w] + 16 * l, lanes[l].value, 16), lanes[l].wait = RUNNABLE;
          lanes[l].ts.phase = phase_of(b.view, w); // the warp's count, for every lane
        }
        progress = true;
        continue;
      }
      int missing = __builtin_ctz(mask & ~arrived);
      int first = __builtin_ctz(arrived);
      char where[96];
      where_string(b, lanes[first], where, sizeof where);
      snprintf(b.error, sizeof b.error,
               "%s: %s with mask 0x%08x waits for lane %d, which %s", where, lanes[first].what, mask, missing,
               missing >= nl ? "does not exist (the block has fewer threads)"
               : lanes[missing].wait == DONE ? "has returned"
                                             : "waits at __syncthreads (divergent warp operation)");
      return false;
    }
    if (progress) return true;
  }
  if (at_barrier == n) {
    for (const sim_thread &t : b.threads)
      if (!same_site(t, b.threads[0])) {
        char a[96], c[96];
        where_string(b, b.threads[0], a, sizeof a);
        where_string(b, t, c, sizeof c);
        snprintf(b.error, sizeof b.error,
                 "__syncthreads at different call sites: %s waits at %s:%d, %s at %s:%d (a barrier in divergent code)",
                 a, b.threads[0].file, b.threads[0].line, c, t.file, t.line);
        return false;
      }
    b.view.barriers++;
    for (sim_thread &t : b.threads) t.wait = RUNNABLE, t.ts.phase = phase_of(b.view, t.ts.linear / 32);
    return true;
  }
  const sim_thread *waiter = nullptr;
  for (const sim_thread &t : b.threads)
    if (t.wait == AT_BARRIER) {
      waiter = &t;
      break;
    }
  char where[96];
  where_string(b, *waiter, where, sizeof where);
  snprintf(b.error, sizeof b.error,
           "__syncthreads reached by %d of the block's %d threads (%d returned without it): %s waits forever "
           "(a barrier in divergent code)",
           at_barrier, n, done, where);
  return false;
}

worker_fibers::~worker_fibers() {
  for (fiber_slot *slot : free_slots) { // each waits in to_worker for its next thread
    to_fiber_start(slot);
    delete slot; // its stack comes back to free_stacks
    to_fiber_end();
  }
  for (void *p : free_stacks) munmap(p, STACK);
}

static void run_block(block_state &b, bool reverse) {
  int n = (int)b.threads.size();
  cur_body = b.k->body;
  for (sim_thread &t : b.threads) t.wait = RUNNABLE, t.slot = nullptr, t.ts.phase = 0;
  cur_block = &b.view;
  b.view.barriers = 0;
  memset(b.view.warp_syncs, 0, sizeof b.view.warp_syncs);
  b.shared_used = 0;
  b.shared_decls.clear();
  check_block_start(b.shared, SHARED_STATIC_MAX);
  do {
    for (int j = 0; j < n && !b.error[0]; j++) {
      sim_thread &t = b.threads[reverse ? n - 1 - j : j];
      if (t.wait != RUNNABLE) continue;
      if (!t.slot) {
        if (pool.free_slots.empty()) {
          fiber_slot *s = new_slot();
          if (!s) {
            snprintf(b.error, sizeof b.error, "the simulator has no host memory left for a thread's stack (%zu KiB)",
                     STACK >> 10);
            b.code = cudaErrorMemoryAllocation;
            break;
          }
          pool.free_slots.push_back(s);
        }
        t.slot = pool.free_slots.back();
        pool.free_slots.pop_back();
        t.slot->assigned = &t;
      }
      me = &t;
      cur = &t.ts;
      fiber_slot *slot = t.slot;
      to_fiber_start(slot);
      slot->fiber = std::move(slot->fiber).resume();
      to_fiber_end();
      if (t.wait == DONE) pool.free_slots.push_back(slot), t.slot = nullptr;
    }
  } while (!b.error[0] && release(b));
  for (sim_thread &t : b.threads)
    if (t.slot) { // unwinds a thread stopped mid-body (a failed block)
      to_fiber_start(t.slot);
      delete t.slot;
      to_fiber_end();
      t.slot = nullptr;
    }
  me = nullptr;
  cur = nullptr;
}

// ---- the launch: blocks over the workers ----

struct job {
  const kernel_launch *k;
  uint64_t nblocks;
  bool reverse;
  std::atomic<uint64_t> next{0};
  std::atomic<int> active{0};
  std::mutex err_lock;
  std::string error;
  cudaError_t code = cudaErrorLaunchFailure;
};

static void work_on(job &j) {
  const kernel_launch &k = *j.k;
  dim3 g = k.cfg.grid, bd = k.cfg.block;
  int n = (int)(bd.x * bd.y * bd.z);
  std::unique_ptr<block_state> b(new (std::nothrow) block_state());
  try {
    if (b) b->threads.resize(n);
  } catch (std::bad_alloc &) {
    b.reset();
  }
  if (!b) {
    std::lock_guard<std::mutex> gl(j.err_lock);
    if (j.error.empty()) j.error = "the simulator has no host memory left for a block", j.code = cudaErrorMemoryAllocation;
    j.next = j.nblocks;
    return;
  }
  b->k = &k;
  b->view.bdim = bd;
  b->view.gdim = g;
  for (int i = 0; i < n; i++) {
    sim_thread &t = b->threads[i];
    t.ts.tid = make_uint3(i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y));
    t.ts.linear = i;
    t.ts.blk = b.get();
  }
  b->shared = shared_arena();
  fault_site = &k.where;
  for (;;) {
    uint64_t i = j.next.fetch_add(1);
    if (i >= j.nblocks) break;
    uint64_t id = j.reverse ? j.nblocks - 1 - i : i;
    b->view.bid = make_uint3((unsigned)(id % g.x), (unsigned)(id / g.x % g.y), (unsigned)(id / ((uint64_t)g.x * g.y)));
    b->view.linear = id;
    for (int t = 0; t < n; t++) b->threads[t].ts.serial = (uint32_t)((id & 0x3fffff) << 10 | t) + 1;
    b->error[0] = 0;
    b->code = cudaErrorLaunchFailure;
    run_block(*b, j.reverse);
    if (b->error[0]) {
      std::lock_guard<std::mutex> gl(j.err_lock);
      if (j.error.empty()) j.error = b->error, j.code = b->code;
      j.next = j.nblocks; // the launch has failed: no more blocks
    }
  }
  fault_site = nullptr;
}

struct worker_pool {
  std::mutex m;
  std::condition_variable cv, done_cv;
  job *current = nullptr;
  uint64_t generation = 0;
  int pending = 0; // workers yet to finish the current job (each takes part, however late it wakes)
  std::vector<std::thread> threads;

  void start(int n) {
    for (int i = 0; i < n; i++)
      threads.emplace_back([this] {
        stack_t ss; // the fault handler runs on its own stack (a fiber's may be what overflowed)
        ss.ss_sp = malloc(1 << 16);
        ss.ss_size = 1 << 16;
        ss.ss_flags = 0;
        sigaltstack(&ss, NULL);
        sigset_t all; // signals go to the host thread
        sigfillset(&all);
        sigdelset(&all, SIGSEGV), sigdelset(&all, SIGBUS), sigdelset(&all, SIGFPE);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
        uint64_t seen = 0;
        for (;;) {
          job *j;
          {
            std::unique_lock<std::mutex> l(m);
            cv.wait(l, [&] { return generation != seen; });
            seen = generation;
            j = current;
          }
          work_on(*j);
          std::lock_guard<std::mutex> l(m);
          if (--pending == 0) done_cv.notify_all();
        }
      });
    for (std::thread &t : threads) t.detach();
  }

  void run(job &j) {
    {
      std::lock_guard<std::mutex> l(m);
      current = &j;
      generation++;
      pending = (int)threads.size();
    }
    cv.notify_all();
    work_on(j); // the calling thread works too
    std::unique_lock<std::mutex> l(m);
    done_cv.wait(l, [&] { return pending == 0; });
    current = nullptr;
  }
};

static worker_pool *pool_of_workers() {
  static worker_pool *p = [] {
    worker_pool *w = new worker_pool();
    w->start(worker_count() - 1);
    return w;
  }();
  return p;
}

static launch_observer_fn launch_observer;
void set_launch_observer(launch_observer_fn f) { launch_observer = f; }
void notify_launch(const site &s, const launch_cfg &c) {
  if (launch_observer) launch_observer(s.kernel, c.grid, c.block, c.stream);
}

cudaError_t check_config(const kernel_launch &k) {
  dim3 g = k.cfg.grid, b = k.cfg.block;
  const char *bad = NULL;
  char why[160];
  uint64_t threads = (uint64_t)b.x * b.y * b.z;
  if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z) bad = "a zero grid or block dimension";
  else if (threads > 1024)
    snprintf(why, sizeof why, "%llu threads a block (at most 1024)", (unsigned long long)threads), bad = why;
  else if (b.x > 1024 || b.y > 1024 || b.z > 64) bad = "block dimensions past (1024, 1024, 64)";
  else if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
    snprintf(why, sizeof why, "grid (%u, %u, %u): y and z are at most 65535, x at most 2^31-1", g.x, g.y, g.z), bad = why;
  if (bad)
    return fail(cudaErrorInvalidConfiguration, false, "kernel %s (%s:%d) launched with %s", k.where.kernel,
                k.where.file, k.where.line, bad);
  if (k.cfg.smem > 48 << 10)
    return fail(cudaErrorInvalidValue, false, "kernel %s (%s:%d): %zu bytes of dynamic shared memory (at most 48 KiB)",
                k.where.kernel, k.where.file, k.where.line, k.cfg.smem);
  return cudaSuccess;
}

void run_kernel(const kernel_launch &k) {
  const char *mode = schedule_mode();
  bool reverse = !strcmp(mode, "reverse") || (!strcmp(mode, "alternate") && (k.id & 1) == 0);
  job j;
  j.k = &k;
  j.nblocks = (uint64_t)k.cfg.grid.x * k.cfg.grid.y * k.cfg.grid.z;
  j.reverse = reverse;
  bool concurrent = j.nblocks > 1 && worker_count() > 1 && check_blocks_concurrently();
  check_launch_begin(k);
  if (!concurrent) work_on(j);
  else pool_of_workers()->run(j);
  check_launch_end();
  if (!j.error.empty())
    fail(j.code, true, "kernel %s (%s:%d) failed: %s", k.where.kernel, k.where.file, k.where.line, j.error.c_str());
}

} // namespace tsim
