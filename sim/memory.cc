// Device and page-locked memory of the simulated device.
//
// One large range of address space (the window the access checks of
// check.cc watch) holds the shared-memory arenas of the worker threads, then
// a range per device, so a device pointer is never a host pointer. An allocation is placed so that its end (rounded
// to 256 bytes, cudaMalloc's alignment) touches an inaccessible guard page;
// the few bytes between its exact end and the guard hold a canary checked
// after every kernel. Freed memory stays inaccessible and its addresses are
// not handed out again until the range wraps, so a read after free faults.
// In protect mode (the default) device memory is inaccessible whenever no
// device work runs: host code that touches it faults and is reported. New
// allocations are filled with 0xff bytes (NaN for floats, -1 for integers),
// so code that assumes zeroed memory fails here instead of passing by luck.
#include "sim.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <vector>

namespace tsim {

static const size_t PAGE = 4096;
static const size_t RESERVE = (size_t)256 << 30; // address space per device
static const size_t ARENA = 64 << 10;             // a worker's shared memory: 48 KiB, then a guard
static const unsigned char CANARY = 0xa5, FILL = 0xff;

struct allocation {
  uintptr_t map, map_len; // the accessible pages
  uintptr_t base;
  size_t size;
  int device;
  bool live;
};

struct device_mem {
  uintptr_t start = 0, next = 0;
  size_t used = 0;
  bool accessible = false;
  std::map<uintptr_t, allocation> allocs; // by base; freed ones kept for reports (bounded)
  std::map<uintptr_t, allocation *> live;  // the live ones: what protection and canary checks walk
  size_t freed_kept = 0;
};

static device_mem devs[16];
static uintptr_t window_lo, devices_lo;
static std::map<uintptr_t, size_t> pinned; // page-locked host blocks: base -> size
static std::vector<std::pair<uintptr_t, bool>> lent; // pages the fault handler opened during a kernel (page, was live)

thread_local const site *fault_site;

// The window, reserved at the first use of device or shared memory.
static void reserve_window() {
  static std::once_flag once;
  std::call_once(once, [] {
    int n = device_count() > 0 ? device_count() : 1;
    size_t len = SHARED_REGION + (size_t)n * RESERVE;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      fprintf(stderr, "tensh-sim: cannot reserve address space for the simulated devices\n");
      abort();
    }
    window_lo = (uintptr_t)p, devices_lo = window_lo + SHARED_REGION;
    for (int d = 0; d < n; d++) devs[d].start = devs[d].next = devices_lo + d * RESERVE;
    check_window(window_lo, len);
    install_fault_handler();
  });
}

static device_mem &dev(int d) {
  if (!devs[d].start) reserve_window();
  return devs[d];
}

// Shared-memory arenas: one for each thread that runs blocks, given back
// when the thread ends.
static std::mutex arenas_lock;
static std::vector<int> free_arenas;
static int arenas_made;
struct arena_slot {
  int index = -1;
  ~arena_slot() {
    if (index < 0) return;
    std::lock_guard<std::mutex> g(arenas_lock);
    free_arenas.push_back(index);
  }
};
static thread_local arena_slot my_arena;

unsigned char *shared_arena() {
  if (my_arena.index < 0) {
    reserve_window();
    std::lock_guard<std::mutex> g(arenas_lock);
    if (!free_arenas.empty()) my_arena.index = free_arenas.back(), free_arenas.pop_back();
    else if (arenas_made < (int)(SHARED_REGION / ARENA)) {
      my_arena.index = arenas_made++;
      mprotect((void *)(window_lo + my_arena.index * ARENA), SHARED_STATIC_MAX, PROT_READ | PROT_WRITE);
    } else {
      fprintf(stderr, "tensh-sim: more than %zu threads ran kernels\n", SHARED_REGION / ARENA);
      abort();
    }
  }
  return (unsigned char *)(window_lo + my_arena.index * ARENA);
}

static uintptr_t round_up(uintptr_t v, uintptr_t a) { return (v + a - 1) / a * a; }

static int device_of(uintptr_t p) {
  if (!devices_lo || p < devices_lo) return -1;
  size_t d = (p - devices_lo) / RESERVE;
  return d < 16 && devs[d].start ? (int)d : -1;
}

// The allocation whose accessible pages hold p, or the nearest one below p.
static const allocation *near_alloc(device_mem &m, uintptr_t p) {
  auto it = m.allocs.upper_bound(p);
  if (it == m.allocs.begin()) return it == m.allocs.end() ? NULL : &it->second;
  --it;
  return &it->second;
}

mem_kind classify(const void *vp, int *device, uintptr_t *base, size_t *size) {
  uintptr_t p = (uintptr_t)vp;
  int d = device_of(p);
  if (d >= 0) {
    if (device) *device = d;
    const allocation *a = near_alloc(devs[d], p);
    bool in = a && a->live && p >= a->base && p <= a->base + a->size;
    if (base) *base = in ? a->base : 0;
    if (size) *size = in ? a->size : 0;
    return MEM_DEVICE;
  }
  auto it = pinned.upper_bound(p);
  if (it != pinned.begin() && (--it, p < it->first + it->second)) return MEM_PINNED;
  return MEM_HOST;
}

// "N bytes past the end of a live allocation of M bytes at X", etc.
void describe_device(uintptr_t p, char *buf, size_t n) {
  int d = device_of(p);
  if (d < 0) {
    snprintf(buf, n, "0x%lx is host memory", (unsigned long)p);
    return;
  }
  const allocation *a = near_alloc(devs[d], p);
  auto next = devs[d].allocs.upper_bound(p);
  if (a && p >= a->base && p < a->base + a->size)
    snprintf(buf, n, "0x%lx is %zu bytes into %s allocation of %zu bytes at 0x%lx on device %d", (unsigned long)p,
             (size_t)(p - a->base), a->live ? "a live" : "a freed", a->size, (unsigned long)a->base, d);
  else if (a && p >= a->base + a->size && p < a->map + a->map_len + PAGE)
    snprintf(buf, n, "0x%lx is %zu bytes past the end of %s allocation of %zu bytes at 0x%lx on device %d",
             (unsigned long)p, (size_t)(p - a->base - a->size), a->live ? "a live" : "a freed", a->size,
             (unsigned long)a->base, d);
  else if (next != devs[d].allocs.end() && p < next->second.base)
    snprintf(buf, n, "0x%lx is %zu bytes before the start of %s allocation of %zu bytes at 0x%lx on device %d",
             (unsigned long)p, (size_t)(next->second.base - p), next->second.live ? "a live" : "a freed",
             next->second.size, (unsigned long)next->second.base, d);
  else snprintf(buf, n, "0x%lx is device %d memory outside any allocation", (unsigned long)p, d);
}

cudaError_t check_device_range(const void *vp, size_t n, int device, const char *what) {
  uintptr_t p = (uintptr_t)vp, base;
  size_t size;
  int d;
  char where[256];
  if (classify(vp, &d, &base, &size) != MEM_DEVICE || (device >= 0 && d != device)) {
    describe_device(p, where, sizeof where);
    return fail(cudaErrorInvalidValue, false, "%s: expected memory of device %d, but %s", what,
                device >= 0 ? device : current_device(), where);
  }
  if (!size || p + n > base + size) {
    describe_device(size ? p + n - 1 : p, where, sizeof where);
    return fail(cudaErrorInvalidValue, false, "%s of %zu bytes at 0x%lx: the range leaves its allocation (%s)", what,
                n, (unsigned long)p, where);
  }
  return cudaSuccess;
}

static void set_access(const allocation &a, bool on) {
  mprotect((void *)a.map, a.map_len, on ? PROT_READ | PROT_WRITE : PROT_NONE);
}

void device_access(int d, bool on) {
  if (!protect_mode() || d < 0 || !devs[d].start || devs[d].accessible == on) return;
  devs[d].accessible = on;
  for (auto &kv : devs[d].live) set_access(*kv.second, on);
}

void after_kernel(const site &s) {
  for (auto &pl : lent) { // pages lent to a faulting kernel become what they were
    if (pl.second) mprotect((void *)pl.first, PAGE, PROT_NONE);
    else mmap((void *)pl.first, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  }
  lent.clear();
  for (int d = 0; d < 16; d++) {
    if (!devs[d].start || (protect_mode() && !devs[d].accessible)) continue;
    for (auto &kv : devs[d].live) {
      const allocation &a = *kv.second;
      const unsigned char *c = (const unsigned char *)(a.base + a.size), *end = (const unsigned char *)(a.map + a.map_len);
      for (; c < end; c++)
        if (*c != CANARY) {
          fail(cudaErrorIllegalAddress, true,
               "kernel %s (%s:%d) wrote %zu bytes past the end of an allocation of %zu bytes at 0x%lx on device %d",
               s.kernel, s.file, s.line, (size_t)(c - (const unsigned char *)(a.base + a.size)), a.size,
               (unsigned long)a.base, d);
          memset((void *)(a.base + a.size), CANARY, (size_t)(end - (const unsigned char *)(a.base + a.size)));
          break;
        }
    }
  }
}

static allocation *find_live(int d, uintptr_t p) {
  auto it = devs[d].allocs.find(p);
  return it != devs[d].allocs.end() && it->second.live ? &it->second : NULL;
}

} // namespace tsim

using namespace tsim;

extern "C" {

cudaError_t cudaMalloc(void **out, size_t n) {
  std::lock_guard<std::recursive_mutex> g(lock());
  *out = NULL;
  if (sticky_error()) return sticky_error();
  if (cudaError_t e = capture_unsafe("cudaMalloc")) return e;
  int d = current_device();
  device_mem &m = dev(d);
  if (n == 0) return cudaSuccess;
  if (n > device_memory() - m.used)
    return fail(cudaErrorMemoryAllocation, false, "cudaMalloc of %zu bytes on device %d: %zu of %zu bytes in use", n, d,
                m.used, device_memory());
  size_t body = round_up(n, 256), map_len = round_up(body, PAGE);
  uintptr_t map;
  for (int wraps = 0;;) { // a guard page before, one after; past live allocations after a wrap
    if (m.next + PAGE + map_len + PAGE > m.start + RESERVE) {
      if (wraps++) return fail(cudaErrorMemoryAllocation, false, "cudaMalloc of %zu bytes: no address space left", n);
      m.next = m.start; // wrap: freed addresses are handed out again
    }
    map = m.next + PAGE;
    auto above = m.live.lower_bound(map);
    if (above != m.live.begin()) { // the live allocation below may reach into the range
      auto below = std::prev(above);
      if (below->second->map + below->second->map_len + PAGE > map) {
        m.next = below->second->map + below->second->map_len;
        continue;
      }
    }
    if (above != m.live.end() && above->second->map < map + map_len + PAGE) {
      m.next = above->second->map + above->second->map_len;
      continue;
    }
    break;
  }
  m.next = map + map_len + PAGE;
  allocation a = {map, map_len, map + map_len - body, n, d, true};
  mprotect((void *)map, map_len, PROT_READ | PROT_WRITE);
  memset((void *)map, FILL, map_len - (body - n));
  memset((void *)(a.base + n), CANARY, body - n);
  if (protect_mode() && !m.accessible) mprotect((void *)map, map_len, PROT_NONE);
  m.allocs.erase(m.allocs.lower_bound(map), m.allocs.lower_bound(map + map_len)); // stale records after a wrap
  m.allocs[a.base] = a;
  m.live[a.base] = &m.allocs[a.base]; // std::map nodes do not move
  m.used += n;
  *out = (void *)a.base;
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (!p) return cudaSuccess;
  if (cudaError_t e = capture_unsafe("cudaFree")) return e;
  int d = device_of((uintptr_t)p);
  allocation *a = d >= 0 ? find_live(d, (uintptr_t)p) : NULL;
  if (!a) {
    char where[256];
    describe_device((uintptr_t)p, where, sizeof where);
    return fail(cudaErrorInvalidValue, false, "cudaFree(0x%lx): not the start of a live allocation (%s)%s",
                (unsigned long)p, where, d >= 0 && devs[d].allocs.count((uintptr_t)p) ? ": freed twice" : "");
  }
  drain_device(d); // cudaFree synchronises the device
  a->live = false;
  devs[d].live.erase(a->base);
  devs[d].used -= a->size;
  mprotect((void *)a->map, a->map_len, PROT_NONE);
  madvise((void *)a->map, a->map_len, MADV_DONTNEED);
  check_forget(a->map, a->map_len);
  if (++devs[d].freed_kept > 100000) { // forget the oldest freed records
    for (auto it = devs[d].allocs.begin(); it != devs[d].allocs.end() && devs[d].freed_kept > 50000;)
      if (!it->second.live) it = devs[d].allocs.erase(it), devs[d].freed_kept--;
      else ++it;
  }
  return sticky_error();
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) {
  std::lock_guard<std::recursive_mutex> g(lock());
  device_mem &m = dev(current_device());
  *total = device_memory();
  *free_b = device_memory() - m.used;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **out, size_t n, unsigned int flags) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (cudaError_t e = capture_unsafe("cudaHostAlloc")) return *out = NULL, e;
  void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return *out = NULL, fail(cudaErrorMemoryAllocation, false, "cudaHostAlloc of %zu bytes", n);
  pinned[(uintptr_t)p] = n ? n : 1;
  *out = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **out, size_t n) { return cudaHostAlloc(out, n, 0); }

cudaError_t cudaFreeHost(void *p) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (cudaError_t e = capture_unsafe("cudaFreeHost")) return e;
  auto it = pinned.find((uintptr_t)p);
  if (it == pinned.end())
    return fail(cudaErrorInvalidValue, false, "cudaFreeHost(0x%lx): not a block from cudaHostAlloc", (unsigned long)p);
  for (int d = 0; d < device_count(); d++) drain_device(d); // as CUDA, it waits for the devices
  munmap(p, it->second);
  pinned.erase(it);
  return cudaSuccess;
}

} // extern "C"

// ---- the fault handler ----

static struct sigaction previous;
static std::mutex fault_lock; // workers may fault at once

static void on_fault(int sig, siginfo_t *si, void *uc) {
  uintptr_t p = (uintptr_t)si->si_addr;
  int d = device_of(p);
  if (d < 0 && fault_site && window_lo && p - window_lo < SHARED_REGION) { // past a block's 48 KiB of shared memory
    std::lock_guard<std::mutex> g(fault_lock);
    char thread[96];
    fault_where(thread, sizeof thread);
    fail(cudaErrorIllegalAddress, true, "kernel %s (%s:%d) %s touched shared memory %zu bytes past the 48 KiB of a block",
         fault_site->kernel, fault_site->file, fault_site->line, thread, (size_t)((p - window_lo) % ARENA - SHARED_STATIC_MAX));
    uintptr_t page = p & ~(PAGE - 1);
    mmap((void *)page, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    lent.push_back({page, false});
    return;
  }
  if (d < 0) { // not ours: what would have happened without us
    sigaction(SIGSEGV, &previous, NULL);
    return;
  }
  bool is_write = (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
  char where[256];
  describe_device(p, where, sizeof where);
  if (!fault_site) {
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "tensh-sim: host code %s device memory: %s. Device memory is only for kernels and "
                     "cudaMemcpy*; copy it to the host first.\n",
                     is_write ? "wrote to" : "read", where);
    if (write(2, msg, (size_t)n) < 0) {}
    signal(SIGSEGV, SIG_DFL);
    return; // the access faults again and the process ends as it would on a GPU machine
  }
  uintptr_t page = p & ~(PAGE - 1);
  const allocation *a = near_alloc(devs[d], p);
  bool live_page = a && a->live && page >= a->map && page < a->map + a->map_len;
  std::lock_guard<std::mutex> g(fault_lock);
  char thread[96];
  fault_where(thread, sizeof thread);
  fail(cudaErrorIllegalAddress, true, "kernel %s (%s:%d) %s, %s %s", fault_site->kernel, fault_site->file,
       fault_site->line, thread, is_write ? "wrote to" : "read", where);
  // lend the page to the kernel so it can finish; after_kernel takes it back
  if (live_page) mprotect((void *)page, PAGE, PROT_READ | PROT_WRITE);
  else mmap((void *)page, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  lent.push_back({page, live_page});
}

void tsim::install_fault_handler() {
  static bool done;
  if (done) return;
  done = true;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &previous);
}
