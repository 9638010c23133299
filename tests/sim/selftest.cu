// Deliberately broken CUDA code, each piece a fault the simulated device must
// report (or, for races, make visible). Built for the simulator only
// (build-sim/sim_selftest); tests/lua/test_cuda_sim.lua runs one case per process
// and checks what it printed: "RESULT <what>" lines on stdout, the
// simulator's reports on stderr.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void result(const char *what, cudaError_t e) {
  printf("RESULT %s %s: %s\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

__global__ void read_at(const float *p, long i, float *out) { out[0] = p[i]; }
__global__ void write_at(float *p, long i) { p[i] = 1.0f; }

// Rotates a block's values through shared memory; without the barrier a
// thread reads its neighbour's slot before the neighbour wrote it.
template <bool BARRIER> __global__ void rotate(const int *in, int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = in[t];
  if (BARRIER) __syncthreads();
  out[t] = s[(t + 1) % blockDim.x];
}

__global__ void divergent_barrier(int *out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void partial_warp_shuffle(int *out) {
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
}

__global__ void __launch_bounds__(64) bounded(int *out) { out[threadIdx.x] = 1; }

__global__ void fill(int *p, int v, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

static void sync_report(const char *what) { result(what, cudaDeviceSynchronize()); }

int check_case(const char *c); // checks.cu

static int rotate_case(bool barrier) {
  int h[64], *in, *out, got[2][64];
  for (int i = 0; i < 64; i++) h[i] = i * 10;
  cudaMalloc(&in, sizeof h), cudaMalloc(&out, sizeof h);
  cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
  int wrong[2] = {0, 0};
  for (int run = 0; run < 2; run++) { // two launches: the simulator alternates the thread order
    if (barrier) rotate<true><<<1, 64>>>(in, out);
    else rotate<false><<<1, 64>>>(in, out);
    cudaMemcpy(got[run], out, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 64; i++) wrong[run] += got[run][i] != h[(i + 1) % 64];
  }
  printf("RESULT rotate wrong_forward=%d wrong_reverse=%d\n", wrong[0], wrong[1]);
  return 0;
}

// Stream capture with CUDA's rules: a graph replays what was captured (and
// nothing ran during the capture); unsafe calls, a fork never joined, the
// legacy stream beside a capturing blocking stream and syncs fail.
static int capture_case(void) {
  int *d, *h;
  const int n = 256;
  cudaMalloc(&d, n * sizeof(int));
  cudaHostAlloc((void **)&h, n * sizeof(int), 0);
  cudaStream_t a, b, blocking;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaStreamCreate(&blocking);
  cudaMemsetAsync(d, 0, n * sizeof(int), a);
  cudaStreamSynchronize(a);
  cudaGraph_t g;
  cudaGraphExec_t x;
  // a fork to b and its join: both streams' work in the graph, in order
  cudaEvent_t fork, join;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
  result("begin", cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
  fill<<<1, 256, 0, a>>>(d, 3, n);
  cudaEventRecord(fork, a);
  cudaStreamWaitEvent(b, fork, 0);
  cudaStreamCaptureStatus st;
  cudaStreamIsCapturing(b, &st);
  printf("RESULT joined_stream_capturing=%d\n", (int)(st == cudaStreamCaptureStatusActive));
  cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, b); // pinned: may be captured
  cudaEventRecord(join, b);
  cudaStreamWaitEvent(a, join, 0);
  result("sync_in_capture", cudaStreamSynchronize(b));
  result("end_after_sync", cudaStreamEndCapture(a, &g));
  // the same capture without the sync
  cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal);
  fill<<<1, 256, 0, a>>>(d, 3, n);
  cudaEventRecord(fork, a);
  cudaStreamWaitEvent(b, fork, 0);
  cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, b);
  cudaEventRecord(join, b);
  cudaStreamWaitEvent(a, join, 0);
  result("end", cudaStreamEndCapture(a, &g));
  cudaStreamSynchronize(a);
  printf("RESULT during_capture value=%d\n", h[0]); // nothing ran
  result("instantiate", cudaGraphInstantiate(&x, g, 0));
  cudaGraphLaunch(x, a);
  cudaStreamSynchronize(a);
  printf("RESULT after_launch value=%d\n", h[n - 1]);
  // cudaMalloc in the global mode fails and invalidates; relaxed, it is allowed
  void *p = NULL;
  cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal);
  result("malloc_in_capture", cudaMalloc(&p, 1024));
  fill<<<1, 32, 0, a>>>(d, 1, n);
  result("launch_after_invalid", cudaGetLastError());
  result("end_invalidated", cudaStreamEndCapture(a, &g));
  cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal);
  result("host_alloc_in_capture", cudaHostAlloc(&p, 1024, 0));
  cudaStreamEndCapture(a, &g);
  cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  result("malloc_relaxed", cudaMalloc(&p, 1024));
  cudaThreadExchangeStreamCaptureMode(&mode);
  result("end_relaxed", cudaStreamEndCapture(a, &g));
  // a fork that never joins
  cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal);
  cudaEventRecord(fork, a);
  cudaStreamWaitEvent(b, fork, 0);
  fill<<<1, 32, 0, b>>>(d, 1, n);
  result("unjoined", cudaStreamEndCapture(a, &g));
  // the legacy stream while a blocking stream captures; waiting on an event from outside
  cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal);
  fill<<<1, 32>>>(d, 1, n);
  result("legacy_beside_capture", cudaGetLastError());
  cudaStreamEndCapture(blocking, &g);
  cudaEventRecord(fork, b);
  cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal);
  result("outside_event", cudaStreamWaitEvent(a, fork, 0));
  cudaStreamEndCapture(a, &g);
  result("legacy_capture", cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal));
  result("device_ok", cudaDeviceSynchronize());
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return fprintf(stderr, "usage: sim_selftest CASE\n"), 2;
  const char *c = argv[1];
  float *p, *out;
  cudaMalloc(&out, 64);
  if (!strcmp(c, "read_past_end")) {
    cudaMalloc(&p, 256 * sizeof(float));
    read_at<<<1, 1>>>(p, 256, out);
    sync_report("read_past_end");
  } else if (!strcmp(c, "write_past_end")) {
    cudaMalloc(&p, 10 * sizeof(float)); // 40 bytes: the rest of its 256 is canary
    write_at<<<1, 1>>>(p, 11);
    sync_report("write_past_end");
  } else if (!strcmp(c, "read_after_free")) {
    cudaMalloc(&p, 1024);
    cudaFree(p);
    read_at<<<1, 1>>>(p, 3, out);
    sync_report("read_after_free");
  } else if (!strcmp(c, "double_free")) {
    cudaMalloc(&p, 1024);
    cudaFree(p);
    result("double_free", cudaFree(p));
  } else if (!strcmp(c, "missing_barrier")) {
    return rotate_case(false);
  } else if (!strcmp(c, "with_barrier")) {
    return rotate_case(true);
  } else if (!strcmp(c, "divergent_barrier")) {
    int *o;
    cudaMalloc(&o, 32 * sizeof(int));
    divergent_barrier<<<1, 32>>>(o);
    sync_report("divergent_barrier");
  } else if (!strcmp(c, "missing_lanes")) {
    int *o;
    cudaMalloc(&o, 16 * sizeof(int));
    partial_warp_shuffle<<<1, 16>>>(o);
    sync_report("missing_lanes");
  } else if (!strcmp(c, "block_2048")) {
    int *o;
    cudaMalloc(&o, 4096 * sizeof(int));
    fill<<<1, 2048>>>(o, 1, 4096);
    result("block_2048", cudaGetLastError());
  } else if (!strcmp(c, "grid_y_70000")) {
    int *o;
    cudaMalloc(&o, 64);
    fill<<<dim3(1, 70000), 32>>>(o, 1, 16);
    result("grid_y_70000", cudaGetLastError());
  } else if (!strcmp(c, "launch_bounds")) {
    int *o;
    cudaMalloc(&o, 128 * sizeof(int));
    bounded<<<1, 128>>>(o);
    sync_report("launch_bounds");
  } else if (!strcmp(c, "host_pointer")) {
    static float host[16];
    read_at<<<1, 1>>>(host, 0, out);
    sync_report("host_pointer");
  } else if (!strcmp(c, "host_reads_device")) {
    cudaMalloc(&p, 1024);
    cudaDeviceSynchronize();
    printf("RESULT host_reads_device about to read\n");
    fflush(stdout);
    volatile float v = p[3]; // host code dereferencing device memory: a crash, reported
    printf("RESULT host_reads_device read %f\n", (double)v);
  } else if (!strcmp(c, "missing_stream_sync")) {
    int *d, *h;
    const int n = 1024;
    cudaMalloc(&d, n * sizeof(int));
    cudaHostAlloc((void **)&h, n * sizeof(int), 0);
    memset(h, 0, n * sizeof(int));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    fill<<<4, 256, 0, s>>>(d, 7, n);
    cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s); // pinned: returns at once
    int early = h[n - 1];                                              // no cudaStreamSynchronize: too early
    cudaStreamSynchronize(s);
    printf("RESULT missing_stream_sync early=%d after_sync=%d\n", early, h[n - 1]);
  } else if (!strcmp(c, "missing_stream_wait") || !strcmp(c, "with_stream_wait")) {
    int *d, *h;
    const int n = 256;
    cudaMalloc(&d, n * sizeof(int));
    cudaHostAlloc((void **)&h, n * sizeof(int), 0);
    cudaStream_t a, b;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaMemsetAsync(d, 0, n * sizeof(int), a);
    cudaStreamSynchronize(a);
    fill<<<1, 256, 0, a>>>(d, 5, n); // a writes d ...
    if (!strcmp(c, "with_stream_wait")) {
      cudaEvent_t ev;
      cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
      cudaEventRecord(ev, a);
      cudaStreamWaitEvent(b, ev, 0);
    }
    cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, b); // ... b reads it
    cudaStreamSynchronize(b);
    printf("RESULT %s value=%d\n", c, h[0]);
  } else if (!strcmp(c, "event_other_device")) {
    cudaEvent_t ev;
    cudaEventCreate(&ev); // on device 0
    cudaSetDevice(1);
    cudaStream_t s;
    cudaStreamCreate(&s);
    result("event_other_device", cudaEventRecord(ev, s));
  } else if (!strcmp(c, "capture")) {
    return capture_case();
  } else if (check_case(c) < 0) {
    fprintf(stderr, "sim_selftest: unknown case %s\n", c);
    return 2;
  }
  return 0;
}
