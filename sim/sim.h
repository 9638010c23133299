// The simulated device's runtime, shared by its files:
//   runtime.cc  errors, devices and their properties (an H100's)
//   memory.cc   device and page-locked memory: guard pages, canaries,
//               protection while no device work runs, the fault handler
//   stream.cc   streams, events, copies: work is queued and runs only when
//               the host must wait for it, in stream order
//   exec.cc     kernels: blocks on worker threads, threads as fibers
//   check.cc    every access of a kernel: alignment, the caching allocator's
//               block bounds, races between its threads
//   cublas.cc, include/cub/: the libraries, emulated on the CPU
#pragma once

#include "cuda_sim.h"

#include <functional>
#include <mutex>
#include <string>

namespace tsim {

// ---- configuration (environment, read once) ----
int device_count();         // TENSH_SIM_DEVICES, default 1
size_t device_memory();     // TENSH_SIM_MEMORY bytes (e.g. 512M, 4G), default 4 GiB
int worker_count();         // TENSH_SIM_WORKERS, default: the CPUs tensh may use
bool protect_mode();        // TENSH_SIM_PROTECT (default 1): device memory inaccessible to host code
const char *schedule_mode(); // TENSH_SIM_SCHEDULE: alternate (default), forward, reverse

// The lock over all simulator state; held by every runtime call and while
// queued work runs (kernels fan out to workers that take no lock).
std::recursive_mutex &lock();

// ---- errors ----
// Records e as this thread's last error, and as the context's sticky error
// when `sticky` (as a fault in a kernel is on a GPU, then also printed); the
// message is appended to cudaGetErrorString(e) for the next report of e.
cudaError_t fail(cudaError_t e, bool sticky, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
cudaError_t sticky_error();
int current_device();

// ---- memory ----
// Shared memory: each thread that runs blocks has an arena of 64 KiB at the
// start of the window, of which a block may use the first 48 KiB.
const size_t SHARED_REGION = (size_t)256 << 16;
const size_t SHARED_STATIC_MAX = 48 << 10;
unsigned char *shared_arena(); // the calling thread's
enum mem_kind { MEM_HOST, MEM_PINNED, MEM_DEVICE };
// What p points into; for device memory, its device and the live allocation's
// [base, base + size) (size 0 when p is in no live allocation).
mem_kind classify(const void *p, int *device, uintptr_t *base, size_t *size);
// cudaSuccess when [p, p + n) lies in one live allocation of device memory
// (any device when device < 0); else an error naming `what`.
cudaError_t check_device_range(const void *p, size_t n, int device, const char *what);
// Makes device memory of `device` accessible (before its work runs) or not.
void device_access(int device, bool on);
// After a kernel: the bytes between each allocation's end and its guard page
// must be untouched; restores pages the fault handler lent to a kernel.
void after_kernel(const site &s);
void install_fault_handler();
// "0x... is N bytes past the end of a live allocation of M bytes ..." for a device address.
void describe_device(uintptr_t p, char *buf, size_t n);
// The kernel and simulated thread a worker is running, for fault reports.
extern thread_local const site *fault_site;
// "block (x,y,z) thread (x,y,z)" of the simulated thread running on this worker.
void fault_where(char *buf, size_t n);

// ---- streams ----
struct stream_t;
stream_t *stream_of(cudaStream_t s, cudaError_t *err); // 0 and the legacy handles: the current device's
// Queues host-side work (a copy, a library call) on s; it runs in stream
// order with its device's memory accessible.
cudaError_t enqueue_host(cudaStream_t s, const char *what, std::function<void()> fn);
void drain_device(int device); // runs every queued work item of the device
// A call CUDA deems unsafe while a stream captures (cudaMalloc, cudaFree,
// cudaHostAlloc, synchronous copies): cudaSuccess, or the capture it
// conflicts with (by the modes of cudaThreadExchangeStreamCaptureMode) is
// invalidated and cudaErrorStreamCaptureUnsupported returned.
cudaError_t capture_unsafe(const char *what);
cudaError_t capture_device_sync(int device); // cudaDeviceSynchronize's check

// ---- the access checks (check.cc) ----
void check_window(uintptr_t lo, size_t len);      // maps the shadow memory of the window
void check_forget(uintptr_t p, size_t n);         // cudaFree: the range's marks and shadow go
void apply_mark(void *p, size_t size, size_t live); // a caching allocator's mark, in stream order
// Host work (a copy, a library call) touching [p, p + n): cudaSuccess, or a
// sticky illegal address when bytes lie outside the live blocks.
cudaError_t check_block_range(const void *p, size_t n, const char *what);
// The name of the host work (a copy, a library call) this thread runs, or NULL.
extern thread_local const char *host_work;
// The block and the caching allocator's view of an address, for reports.
void describe_address(uintptr_t p, char *buf, size_t n);

// ---- kernels ----
struct kernel_launch {
  site where;
  launch_cfg cfg;
  kernel_body *body;
  int device;
  uint64_t id;
};
// Checks a launch's configuration as CUDA does (cudaErrorInvalidConfiguration ...).
cudaError_t check_config(const kernel_launch &k);
void run_kernel(const kernel_launch &k); // runs all blocks; failures set the sticky error
void check_launch_begin(const kernel_launch &k);
bool check_blocks_concurrently(); // false: the checks need the blocks of a launch on one worker
void check_launch_end();
void check_block_start(unsigned char *arena, size_t n); // a block starts on this worker
// In a simulated thread: fails its block (the first failure explains the
// launch), with `code` as the launch's error; "block (..) thread (..): " first.
void block_fail(cudaError_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Stops the calling simulated thread for good (its block has failed).
[[noreturn]] void abandon_thread();

} // namespace tsim
