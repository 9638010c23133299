// The access checks of the simulated device. cuda/*.cu are compiled with
// GCC's -fsanitize=thread instrumentation but linked without its runtime:
// every load, store and atomic they make calls the __tsan_* entry points at
// the end of this file first, and those are ours. An access outside the
// checked window (the shared-memory arenas and device memory, one address
// range: memory.cc) returns after one comparison; an access inside it by a
// simulated thread is checked for
//   alignment  an N-byte access (N = 2, 4, 8, 16) at an address that is not a
//              multiple of N is a misaligned-address fault on a GPU;
//   bounds     bytes the caching allocator has not handed out (a freed or
//              cached block, the rounding after a block's requested size),
//              from the poison marks it sends through tsim_mark_block, as
//              a custom allocator tells AddressSanitizer;
//   races      two threads of one launch touching the same bytes, at least
//              one writing, not both atomically, and not ordered: for shared
//              memory by a __syncthreads (or a warp operation of their warp)
//              between them, for device memory the same, within a block
//              (threads of different blocks are never ordered in a launch).
// A failed check fails the launch as a fault does, with the kernel, both
// threads and the address; a misaligned or out-of-block access stops its
// thread before it happens.
//
// Shadow memory, mapped once for the whole window (pages appear as they are
// written, and go when the memory is freed):
//   poison  one byte per 8 bytes: 0 all addressable, k in 1..7 the first k,
//           POISON_* none (the kind says why);
//   cells   one per 4 bytes: the last writer and a reader of the current
//           epoch (a launch for device memory, a block for shared memory).
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <emmintrin.h>
#include <sys/mman.h>

#include <atomic>
#include <map>

namespace tsim {

uintptr_t check_lo, check_len; // the window; 0, 0 until memory.cc reserves it

enum { POISON_FREE = 0x81, POISON_PAST_END = 0x82 };
enum access_flags { A_READ = 0, A_WRITE = 1, A_ATOMIC = 2, A_ALIGNED = 4, A_STORE_ANY = 8 };

// One 4-byte granule in the current epoch. Phases order accesses of one
// block: (barriers passed mod 1024) << 6 | (warp operations of the thread's
// warp mod 64). Equal modulo the width only hides a race, never invents one.
struct alignas(16) cell {
  uint16_t epoch;
  uint16_t wphase;
  uint32_t writer; // thread serial (thread_state::serial) of the last write; 0: none this epoch
  uint32_t reader; // the last reader since that write
  uint16_t rphase;
  uint8_t wflags; // bytes written (bits 0-3), W_ATOMIC
  uint8_t rflags; // bytes read, R_ATOMIC (every read atomic), R_MULTI (other threads read too), R_BLOCKS (in other blocks)
};
enum { W_ATOMIC = 0x10, R_ATOMIC = 0x10, R_MULTI = 0x20, R_BLOCKS = 0x40 };

static unsigned char *poison_shadow;
static cell *cells;
static const size_t DROP_CELLS_MIN = 16 << 20;

// The launch being run (one at a time: run_kernel holds the simulator's lock).
static const kernel_launch *cur_launch;
static uint16_t device_epoch;
static std::atomic<bool> launch_reported;
static thread_local uint16_t shared_epoch; // of the block this worker runs
static thread_local unsigned char *shared_base;

static bool races_on; // TENSH_SIM_RACES=0 turns the race checks off (the others stay)

void check_window(uintptr_t lo, size_t len) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void *p = mmap(NULL, len / 8, PROT_READ | PROT_WRITE, flags, -1, 0);
  void *c = mmap(NULL, len / 4 * sizeof(cell), PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED || c == MAP_FAILED) {
    fprintf(stderr, "tensh-sim: cannot reserve address space for the shadow memory of the access checks\n");
    abort();
  }
  poison_shadow = (unsigned char *)p, cells = (cell *)c;
  const char *v = getenv("TENSH_SIM_RACES");
  races_on = !v || strcmp(v, "0") != 0;
  check_lo = lo, check_len = len;
}

static void drop_pages(void *p, size_t n) { // gives back whole pages inside [p, p + n); they read as zeros again
  uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)p + n) & ~(uintptr_t)4095;
  if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}

// ---- the caching allocator's marks ----

struct block_rec {
  size_t size, live;
};
static std::map<uintptr_t, block_rec> blocks; // by base, as the marks last said (stream order)
static std::mutex blocks_lock;

static void set_poison(uintptr_t p, size_t n, size_t live) {
  size_t off = p - check_lo; // p is 8-aligned (blocks are 512-aligned)
  unsigned char *s = poison_shadow + off / 8;
  size_t full = live / 8;
  memset(s, 0, full);
  size_t g = full;
  if (live % 8 && live < n) s[g++] = (unsigned char)(live % 8);
  size_t total = (n + 7) / 8;
  if (g < total) memset(s + g, live ? POISON_PAST_END : POISON_FREE, total - g);
}

void apply_mark(void *vp, size_t size, size_t live) {
  uintptr_t p = (uintptr_t)vp;
  if (p - check_lo >= check_len || size > check_len - (p - check_lo)) return;
  set_poison(p, size, live);
  if (live) memset(vp, 0xff, live); // a reused block reads as NaN / -1 again, as new memory does
  // a large block's cells go when it is freed (their pages would stay, 4 bytes a byte); a small one's
  // stay for its next use, which would otherwise fault them in again (epochs make them stale)
  else if (size >= DROP_CELLS_MIN) drop_pages(cells + (p - check_lo) / 4, size / 4 * sizeof(cell));
  std::lock_guard<std::mutex> g(blocks_lock);
  blocks.erase(blocks.lower_bound(p), blocks.lower_bound(p + size)); // merged or split before
  blocks[p] = {size, live};
}

void check_forget(uintptr_t p, size_t n) {
  if (p - check_lo >= check_len) return;
  size_t off = p - check_lo;
  memset(poison_shadow + off / 8, 0, n / 8); // addressable again when the range is handed out anew
  drop_pages(poison_shadow + off / 8, n / 8);
  drop_pages(cells + off / 4, n / 4 * sizeof(cell));
  std::lock_guard<std::mutex> g(blocks_lock);
  blocks.erase(blocks.lower_bound(p), blocks.lower_bound(p + n));
}

// The first byte of [p, p + n) that is poisoned, or 0.
static uintptr_t first_poisoned(uintptr_t p, size_t n) {
  size_t off = p - check_lo, end = off + n;
  for (size_t g = off / 8; g * 8 < end; g++) {
    unsigned char s = poison_shadow[g];
    if (!s) continue;
    size_t ok = s & 0x80 ? 0 : s; // addressable bytes at the granule's start
    size_t first = g * 8 + ok > off ? g * 8 + ok : off;
    if (first < end && first < g * 8 + 8) return check_lo + first;
  }
  return 0;
}

// "12 bytes past the end of a block of 140 bytes at 0x... that the caching
// allocator handed out", or NULL when no mark covers p.
static bool describe_block(uintptr_t p, char *buf, size_t n) {
  std::lock_guard<std::mutex> g(blocks_lock);
  auto it = blocks.upper_bound(p);
  if (it == blocks.begin()) return false;
  --it;
  uintptr_t base = it->first;
  const block_rec &b = it->second;
  if (p >= base + b.size) return false;
  if (!b.live)
    snprintf(buf, n,
             "0x%lx is %zu bytes into a block of %zu bytes at 0x%lx that the caching allocator holds free "
             "(freed, or not handed out yet)",
             (unsigned long)p, (size_t)(p - base), b.size, (unsigned long)base);
  else if (p >= base + b.live)
    snprintf(buf, n, "0x%lx is %zu bytes past the end of a block of %zu bytes at 0x%lx from the caching allocator",
             (unsigned long)p, (size_t)(p - base - b.live), b.live, (unsigned long)base);
  else
    snprintf(buf, n, "0x%lx is %zu bytes into a block of %zu bytes at 0x%lx from the caching allocator",
             (unsigned long)p, (size_t)(p - base), b.live, (unsigned long)base);
  return true;
}

void describe_address(uintptr_t p, char *buf, size_t n) {
  if (p - check_lo < SHARED_REGION) {
    snprintf(buf, n, "shared memory, byte %zu of the block's __shared__ variables",
             (size_t)(p - (uintptr_t)shared_base));
    return;
  }
  if (!describe_block(p, buf, n)) describe_device(p, buf, n);
}

cudaError_t check_block_range(const void *vp, size_t n, const char *what) {
  uintptr_t p = (uintptr_t)vp;
  if (!n || p - check_lo >= check_len) return cudaSuccess;
  uintptr_t bad = first_poisoned(p, n);
  if (!bad) return cudaSuccess;
  char where[256];
  describe_address(bad, where, sizeof where);
  return fail(cudaErrorIllegalAddress, true, "%s of %zu bytes at 0x%lx leaves its block: %s", what, n, (unsigned long)p,
              where);
}

// ---- launches and blocks ----

void check_launch_begin(const kernel_launch &k) {
  cur_launch = &k;
  launch_reported = false;
  if (++device_epoch == 0) { // wrapped: cells of 65535 launches ago would look current
    drop_pages(cells + SHARED_REGION / 4, (check_len - SHARED_REGION) / 4 * sizeof(cell));
    device_epoch = 1;
  }
}

void check_launch_end() { cur_launch = nullptr; }

void check_block_start(unsigned char *arena, size_t n) {
  shared_base = arena;
  if (++shared_epoch == 0) {
    memset(cells + ((uintptr_t)arena - check_lo) / 4, 0, n / 4 * sizeof(cell));
    shared_epoch = 1;
  }
}

// ---- reports ----

static bool same_block_as(uint32_t a, uint32_t b) { return !(((a - 1) ^ (b - 1)) >> 10); }

static void thread_of(uint32_t serial, char *buf, size_t n) {
  const dim3 &g = cur_launch->cfg.grid, &b = cur_launch->cfg.block;
  uint32_t s = serial - 1, blk = s >> 10, t = s & 1023;
  snprintf(buf, n, "block (%u,%u,%u) thread (%u,%u,%u)", (unsigned)(blk % g.x), (unsigned)(blk / g.x % g.y),
           (unsigned)(blk / ((uint64_t)g.x * g.y)), (unsigned)(t % b.x), (unsigned)(t / b.x % b.y),
           (unsigned)(t / ((uint64_t)b.x * b.y)));
}

static const char *verb(int flags) {
  if (flags & A_STORE_ANY) return "stored (any store may win)";
  return flags & A_ATOMIC ? (flags & A_WRITE ? "updated atomically" : "read atomically")
                          : (flags & A_WRITE ? "wrote" : "read");
}

static void report_race(uintptr_t a, size_t n, int flags, uint32_t other, int other_flags, bool several) {
  if (launch_reported.exchange(true)) return;
  char where[256], them[64];
  describe_address(a, where, sizeof where);
  thread_of(other, them, sizeof them);
  bool same_block = same_block_as(other, cur->serial);
  block_fail(cudaErrorLaunchFailure,
             "data race: this thread %s %zu bytes that %s%s %s, %s (%s); at least one writes and not both "
             "atomically: a lost update or a stale read on a GPU",
             verb(flags), n, several ? "several threads read, last " : "", them, verb(other_flags),
             same_block ? "with no __syncthreads between them"
                        : "in another block of the same launch (only atomics or a second launch order them)",
             where);
}

static void report_fault(uintptr_t a, size_t n, int flags, const char *why, cudaError_t code) {
  char where[256];
  describe_address(a, where, sizeof where);
  if (!launch_reported.exchange(true)) block_fail(code, "%s %zu bytes at 0x%lx: %s (%s)", verb(flags), n, (unsigned long)a, why, where);
  abandon_thread(); // the access must not happen (a misaligned vector load would crash the host)
}

// ---- races ----

static bool ordered(uint32_t other, uint32_t me, uint16_t other_phase, uint16_t phase, bool whole_block_only) {
  uint32_t x = (other - 1) ^ (me - 1);
  if (x >> 10) return false;                       // another block
  if (other_phase >> 6 != phase >> 6) return true; // a __syncthreads between
  return !whole_block_only && !(x >> 5) && other_phase != phase; // a warp operation of their warp between
}

// Cells of device memory are shared by the workers, without a lock: each is
// read and written whole, by one 16-byte aligned SSE load and store, which
// x86-64 processors with AVX perform atomically (Intel SDM vol. 3, 9.1.1;
// AMD APM vol. 1, 3.9.1.3). Two workers updating one cell at the same moment
// (threads of two blocks touching one word) lose one update, so a race may
// be missed then, but a cell always holds one real access of the epoch, so
// no race is reported that did not happen. Without AVX, blocks run on one
// worker while the checks are on (check_blocks_concurrently).
// Built from and into two 64-bit words in registers (the fields' order in
// struct cell, little-endian): composing the cell in memory and loading it
// as one vector stalled every store.
static inline cell load_cell(const cell *p) {
  __m128i v = _mm_load_si128((const __m128i *)p);
  uint64_t lo = (uint64_t)_mm_cvtsi128_si64(v), hi = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v));
  cell c;
  c.epoch = (uint16_t)lo, c.wphase = (uint16_t)(lo >> 16), c.writer = (uint32_t)(lo >> 32);
  c.reader = (uint32_t)hi, c.rphase = (uint16_t)(hi >> 32), c.wflags = (uint8_t)(hi >> 48), c.rflags = (uint8_t)(hi >> 56);
  return c;
}
static inline void store_cell(cell *p, const cell &c) {
  uint64_t lo = c.epoch | (uint64_t)c.wphase << 16 | (uint64_t)c.writer << 32;
  uint64_t hi = c.reader | (uint64_t)c.rphase << 32 | (uint64_t)c.wflags << 48 | (uint64_t)c.rflags << 56;
  _mm_store_si128((__m128i *)p, _mm_set_epi64x((long long)hi, (long long)lo));
}

bool check_blocks_concurrently() {
  static bool whole = __builtin_cpu_supports("avx");
  return whole || !races_on;
}

// One granule g already touched this epoch (the slow path: the checks).
static __attribute__((noinline)) void race_granule(size_t g, uint8_t mask, uintptr_t a, size_t n, int flags,
                                                   uint32_t me, uint16_t phase, cell c) {
  bool write = flags & A_WRITE, atomic = flags & A_ATOMIC;
  uint8_t kept_atomic = atomic ? R_ATOMIC : 0;
  if (!write && c.reader == me && !c.writer && (c.rflags & mask) == mask && c.rphase == phase &&
      (c.rflags & R_ATOMIC) == kept_atomic)
    return; // read again as before: nothing changes
  if (c.writer && c.writer != me && (c.wflags & mask) && !(atomic && (c.wflags & W_ATOMIC)) &&
      !ordered(c.writer, me, c.wphase, phase, false))
    report_race(a, n, flags, c.writer, A_WRITE | (c.wflags & W_ATOMIC ? A_ATOMIC : 0), false);
  else if (write && c.reader && (c.rflags & mask) && !(atomic && (c.rflags & R_ATOMIC)) &&
           (c.rflags & R_BLOCKS || (c.reader != me || c.rflags & R_MULTI) &&
                                       !ordered(c.reader, me, c.rphase, phase, c.rflags & R_MULTI)))
    report_race(a, n, flags, c.reader, c.rflags & R_ATOMIC ? A_ATOMIC : A_READ, c.rflags & R_MULTI);
  if (write) {
    c.writer = me, c.wphase = phase, c.wflags = (uint8_t)(mask | (atomic ? W_ATOMIC : 0));
    c.reader = 0, c.rflags = 0;
  } else if (!c.reader || (!(c.rflags & R_BLOCKS) && ordered(c.reader, me, c.rphase, phase, true))) {
    // the first reader, or every earlier read is before a barrier this one is after: it alone matters
    c.reader = me, c.rphase = phase, c.rflags = (uint8_t)(mask | kept_atomic);
  } else if (c.reader == me) {
    c.rflags = (uint8_t)((c.rflags & (0x0f | R_MULTI | R_BLOCKS | kept_atomic)) | mask);
    c.rphase = phase;
  } else {
    bool other_block = !same_block_as(c.reader, me);
    c.rflags = (uint8_t)((c.rflags & (0x0f | R_BLOCKS | kept_atomic)) | mask | R_MULTI | (other_block ? R_BLOCKS : 0));
    c.reader = me, c.rphase = phase;
  }
  store_cell(&cells[g], c);
}

// Inlined into every entry point: a granule first touched this epoch (most
// of a streaming kernel's) only gets its new cell.
static inline __attribute__((always_inline)) void race_check(uintptr_t a, size_t n, int flags, bool shared) {
  size_t off = a - check_lo;
  uint16_t epoch = shared ? shared_epoch : device_epoch;
  uint32_t me = cur->serial;
  uint16_t phase = cur->phase;
  bool write = flags & A_WRITE;
  uint8_t atomic_bit = flags & A_ATOMIC ? W_ATOMIC : 0; // W_ATOMIC == R_ATOMIC
  for (size_t g = off / 4; g * 4 < off + n; g++) {
    unsigned lo = g * 4 < off ? (unsigned)(off - g * 4) : 0, hi = (g + 1) * 4 > off + n ? (unsigned)(off + n - g * 4) : 4;
    uint8_t mask = (uint8_t)(((1u << hi) - 1) & ~((1u << lo) - 1));
    __m128i v = _mm_load_si128((const __m128i *)&cells[g]);
    if ((uint16_t)_mm_cvtsi128_si32(v) == epoch) {
      race_granule(g, mask, a, n, flags, me, phase, load_cell(&cells[g]));
      continue;
    }
    cell c = cell{}; // the first access this epoch: nothing to race with
    c.epoch = epoch;
    if (write) c.writer = me, c.wphase = phase, c.wflags = (uint8_t)(mask | atomic_bit);
    else c.reader = me, c.rphase = phase, c.rflags = (uint8_t)(mask | atomic_bit);
    store_cell(&cells[g], c);
  }
}

// ---- one access ----

// A word-sized atomic may cover, beside the element it updates, bytes past
// its block's end: the compare-and-swap loops that emulate 1- and 2-byte
// atomics on the aligned 4-byte word (as PyTorch's) do. Inside the block's
// rounding, as here, a GPU raises no fault; in a free block it would race.
static bool word_atomic_ok(uintptr_t a, size_t n) {
  if (n > 8) return false;
  size_t off = a - check_lo;
  bool some_live = false;
  for (size_t i = off; i < off + n; i++) {
    unsigned char s = poison_shadow[i / 8];
    if (!s || (!(s & 0x80) && i % 8 < s)) some_live = true;
    else if (s & 0x80 && s != POISON_PAST_END) return false;
  }
  return some_live;
}

thread_local const char *host_work;

static __attribute__((noinline)) void host_access(uintptr_t a, size_t n) {
  if (host_work && n && a - check_lo >= SHARED_REGION) check_block_range((void *)a, n, host_work);
}

static __attribute__((noinline)) void poisoned_access(uintptr_t a, size_t n, int flags) {
  uintptr_t bad = first_poisoned(a, n);
  if (bad && !(flags & A_ATOMIC && !(flags & A_STORE_ANY) && word_atomic_ok(a, n)))
    report_fault(bad, n - (bad - a), flags, "outside every live block", cudaErrorIllegalAddress);
}

static inline __attribute__((always_inline)) void check_access(uintptr_t a, size_t n, int flags) {
  // (inlined into check_fixed: N and FLAGS are constants there)
  if (__builtin_expect(!cur, 0)) { // host code: the emulated CUB's work, in stream order, is checked against the blocks
    host_access(a, n);
    return;
  }
  if (!cur_launch || !n) return;
  size_t off = a - check_lo;
  bool shared = off < SHARED_REGION;
  if (flags & A_ALIGNED && n > 1 && (a & (n - 1)))
    report_fault(a, n, flags, "a misaligned address (a vector access needs an address that is a multiple of its size)",
                 cudaErrorMisalignedAddress);
  if (!shared) { // up to 16 bytes over two clean granules (the common case) need no more
    size_t g0 = off / 8, g1 = (off + n - 1) / 8;
    if (g1 - g0 > 1 || (poison_shadow[g0] | poison_shadow[g1])) poisoned_access(a, n, flags);
  }
  if (races_on) race_check(a, n, flags, shared);
}

// One kind of access, out of line: the entry points stay a comparison and a
// jump, so the many accesses outside the window (a thread's own variables)
// save no registers.
template <size_t N, int FLAGS> __attribute__((noinline)) void check_fixed(uintptr_t a) { check_access(a, N, FLAGS); }
static __attribute__((noinline)) void check_range(uintptr_t a, size_t n, int flags) { check_access(a, n, flags); }

} // namespace tsim

// ---- the instrumentation's entry points ----

using namespace tsim;

#define TSIM_IN_WINDOW(p) ((uintptr_t)(p)-check_lo < check_len)

extern "C" {

void tsim_mark_block(void *p, size_t size, size_t live, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (cudaError_t e = enqueue_host(stream, "the caching allocator's mark", [=] { apply_mark(p, size, live); }))
    fprintf(stderr, "tensh-sim: a mark of the caching allocator was lost: %s\n", cudaGetErrorName(e));
}

void tsim_store_any(void *p, const void *v, size_t n) {
  if (TSIM_IN_WINDOW(p)) check_range((uintptr_t)p, n, A_WRITE | A_ATOMIC | A_ALIGNED | A_STORE_ANY);
  memcpy(p, v, n);
}

void __tsan_init(void) {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_vptr_read(void **) {}

#define TSIM_PLAIN(N)                                                                                   \
  void __tsan_read##N(void *p) {                                                                        \
    if (TSIM_IN_WINDOW(p)) check_fixed<N, A_READ | A_ALIGNED>((uintptr_t)p);                           \
  }                                                                                                     \
  void __tsan_write##N(void *p) {                                                                       \
    if (TSIM_IN_WINDOW(p)) check_fixed<N, A_WRITE | A_ALIGNED>((uintptr_t)p);                          \
  }                                                                                                     \
  void __tsan_unaligned_read##N(void *p) {                                                              \
    if (TSIM_IN_WINDOW(p)) check_fixed<N, A_READ>((uintptr_t)p);                                       \
  }                                                                                                     \
  void __tsan_unaligned_write##N(void *p) {                                                             \
    if (TSIM_IN_WINDOW(p)) check_fixed<N, A_WRITE>((uintptr_t)p);                                      \
  }                                                                                                     \
  /* volatile accesses are what PTX makes of them: relaxed atomics */                                   \
  void __tsan_volatile_read##N(void *p) {                                                               \
    if (TSIM_IN_WINDOW(p)) check_fixed<N, A_READ | A_ATOMIC | A_ALIGNED>((uintptr_t)p);                \
  }                                                                                                     \
  void __tsan_volatile_write##N(void *p) {                                                              \
    if (TSIM_IN_WINDOW(p)) check_fixed<N, A_WRITE | A_ATOMIC | A_ALIGNED>((uintptr_t)p);               \
  }                                                                                                     \
  void __tsan_unaligned_volatile_read##N(void *p) {                                                     \
    if (TSIM_IN_WINDOW(p)) check_fixed<N, A_READ | A_ATOMIC>((uintptr_t)p);                            \
  }                                                                                                     \
  void __tsan_unaligned_volatile_write##N(void *p) {                                                    \
    if (TSIM_IN_WINDOW(p)) check_fixed<N, A_WRITE | A_ATOMIC>((uintptr_t)p);                           \
  }
TSIM_PLAIN(1)
TSIM_PLAIN(2)
TSIM_PLAIN(4)
TSIM_PLAIN(8)
TSIM_PLAIN(16)
#undef TSIM_PLAIN

void __tsan_read_range(void *p, unsigned long n) {
  if (TSIM_IN_WINDOW(p)) check_range((uintptr_t)p, n, A_READ);
}
void __tsan_write_range(void *p, unsigned long n) {
  if (TSIM_IN_WINDOW(p)) check_range((uintptr_t)p, n, A_WRITE);
}

// Atomics: checked as atomic accesses, then done (sequentially consistent,
// whatever order was asked: the simulator does not model weaker ones).
#define TSIM_ATOMICS(N, T)                                                                                       \
  T __tsan_atomic##N##_load(const volatile T *p, int) {                                                          \
    if (TSIM_IN_WINDOW(p)) check_fixed<N / 8, A_READ | A_ATOMIC | A_ALIGNED>((uintptr_t)p);                     \
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);                                                                 \
  }                                                                                                              \
  void __tsan_atomic##N##_store(volatile T *p, T v, int) {                                                       \
    if (TSIM_IN_WINDOW(p)) check_fixed<N / 8, A_WRITE | A_ATOMIC | A_ALIGNED>((uintptr_t)p);                    \
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);                                                                    \
  }                                                                                                              \
  TSIM_RMW(N, T, exchange, __atomic_exchange_n)                                                                  \
  TSIM_RMW(N, T, fetch_add, __atomic_fetch_add)                                                                  \
  TSIM_RMW(N, T, fetch_sub, __atomic_fetch_sub)                                                                  \
  TSIM_RMW(N, T, fetch_and, __atomic_fetch_and)                                                                  \
  TSIM_RMW(N, T, fetch_or, __atomic_fetch_or)                                                                    \
  TSIM_RMW(N, T, fetch_xor, __atomic_fetch_xor)                                                                  \
  TSIM_RMW(N, T, fetch_nand, __atomic_fetch_nand)                                                                \
  int __tsan_atomic##N##_compare_exchange_strong(volatile T *p, T *expected, T v, int, int) {                    \
    if (TSIM_IN_WINDOW(p)) check_fixed<N / 8, A_WRITE | A_ATOMIC | A_ALIGNED>((uintptr_t)p);                    \
    return __atomic_compare_exchange_n(p, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
  }                                                                                                              \
  int __tsan_atomic##N##_compare_exchange_weak(volatile T *p, T *expected, T v, int mo, int fmo) {               \
    return __tsan_atomic##N##_compare_exchange_strong(p, expected, v, mo, fmo);                                  \
  }                                                                                                              \
  T __tsan_atomic##N##_compare_exchange_val(volatile T *p, T expected, T v, int mo, int fmo) {                   \
    __tsan_atomic##N##_compare_exchange_strong(p, &expected, v, mo, fmo);                                        \
    return expected;                                                                                             \
  }
#define TSIM_RMW(N, T, op, builtin)                                                                              \
  T __tsan_atomic##N##_##op(volatile T *p, T v, int) {                                                           \
    if (TSIM_IN_WINDOW(p)) check_fixed<N / 8, A_WRITE | A_ATOMIC | A_ALIGNED>((uintptr_t)p);                    \
    return builtin(p, v, __ATOMIC_SEQ_CST);                                                                      \
  }
TSIM_ATOMICS(8, uint8_t)
TSIM_ATOMICS(16, uint16_t)
TSIM_ATOMICS(32, uint32_t)
TSIM_ATOMICS(64, uint64_t)
#undef TSIM_ATOMICS
#undef TSIM_RMW

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) {}

} // extern "C"
