/* The "nccl" backend of dist: NCCL's collectives on CUDA tensors, on the
 * tensor's device's current stream (ordered with the kernels around them,
 * as PyTorch's default). libnccl.so.2 is opened with dlopen on first use,
 * like cuBLAS and cuDNN, with its own declarations (no nccl.h at build
 * time: the ABI below has been stable since NCCL 2.0; bfloat16 since 2.10).
 * The unique id is made by rank 0 and handed out over MPI by dist.lua.
 * Without CUDA (and on the simulated device, where libnccl finds no GPU)
 * every call says so. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#ifdef TS_HAVE_CUDA
#include "core/cuda_api.h"
#endif

#ifdef TS_HAVE_CUDA
typedef struct { char internal[TS_NCCL_ID_BYTES]; } nccl_id;
typedef void *nccl_comm;
enum { NCCL_INT8 = 0, NCCL_UINT8 = 1, NCCL_INT32 = 2, NCCL_INT64 = 4, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7,
       NCCL_FLOAT64 = 8, NCCL_BFLOAT16 = 9 };
enum { NCCL_SUM = 0, NCCL_PROD = 1, NCCL_MAX = 2, NCCL_MIN = 3, NCCL_AVG = 4 };

static int (*p_get_unique_id)(nccl_id *);
static int (*p_comm_init_rank)(nccl_comm *, int, nccl_id, int);
static int (*p_comm_destroy)(nccl_comm);
static const char *(*p_error_string)(int);
static int (*p_all_reduce)(const void *, void *, size_t, int, int, nccl_comm, void *);
static int (*p_broadcast)(const void *, void *, size_t, int, int, nccl_comm, void *);
static int (*p_all_gather)(const void *, void *, size_t, int, nccl_comm, void *);
static int (*p_reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm, void *);

static ts_status load(void) {
  static void *lib;
  if (lib) return TS_OK;
  const char *path = getenv("TENSH_NCCL_LIBRARY");
  if (!path || !*path) path = "libnccl.so.2";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return ts_fail(TS_ERR_UNSUPPORTED, "init_process_group: the \"nccl\" backend needs NCCL (%s could not be loaded: "
                   "%s); install NVIDIA's libnccl2, or use the \"mpi\" backend", path, dlerror());
  struct { void **fn; const char *name; } syms[] = {
      {(void **)&p_get_unique_id, "ncclGetUniqueId"},   {(void **)&p_comm_init_rank, "ncclCommInitRank"},
      {(void **)&p_comm_destroy, "ncclCommDestroy"},    {(void **)&p_error_string, "ncclGetErrorString"},
      {(void **)&p_all_reduce, "ncclAllReduce"},        {(void **)&p_broadcast, "ncclBroadcast"},
      {(void **)&p_all_gather, "ncclAllGather"},        {(void **)&p_reduce_scatter, "ncclReduceScatter"}};
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
    if (!(*syms[i].fn = dlsym(h, syms[i].name))) {
      dlclose(h);
      return ts_fail(TS_ERR_UNSUPPORTED, "init_process_group: %s has no %s (NCCL 2.10 or later needed)", path,
                     syms[i].name);
    }
  lib = h;
  return TS_OK;
}

static ts_status nccl_error(const char *fn, int rc) {
  return ts_fail(TS_ERR_BACKEND, "dist (nccl): %s failed: %s (NCCL error %d)", fn,
                 p_error_string ? p_error_string(rc) : "unknown error", rc);
}
#define NCCL_TRY(fn, call)                            \
  do {                                                \
    int rc_ = (call);                                 \
    if (rc_ != 0) return nccl_error(fn, rc_);         \
  } while (0)

static int nccl_type(ts_dtype dt) {
  switch (dt) {
  case TS_FLOAT32: return NCCL_FLOAT32;
  case TS_FLOAT64: return NCCL_FLOAT64;
  case TS_FLOAT16: return NCCL_FLOAT16;
  case TS_BFLOAT16: return NCCL_BFLOAT16;
  case TS_INT64: return NCCL_INT64;
  case TS_INT32: return NCCL_INT32;
  case TS_INT8: return NCCL_INT8;
  case TS_UINT8: case TS_BOOL: return NCCL_UINT8;
  default: return NCCL_UINT8;
  }
}

/* sum/max of bools is or, product/min is and (as PyTorch maps them for NCCL) */
static int nccl_op(ts_dtype dt, int op) {
  static const int ops[] = {[TS_REDUCE_SUM] = NCCL_SUM, [TS_REDUCE_PRODUCT] = NCCL_PROD, [TS_REDUCE_MIN] = NCCL_MIN,
                            [TS_REDUCE_MAX] = NCCL_MAX};
  if (op == TS_NCCL_AVG) return NCCL_AVG;
  if (dt == TS_BOOL) return op == TS_REDUCE_SUM || op == TS_REDUCE_MAX ? NCCL_MAX : NCCL_MIN;
  return ops[op];
}

static void *stream_of(const ts_tensor *t) { return (void *)ts_cuda_current_stream(t->device.index); }

static ts_status check_cuda(const char *fn, const ts_tensor *t) {
  if (t->device.type != TS_CUDA || !ts_is_contiguous(t))
    return ts_fail(TS_ERR_DEVICE, "%s: the \"nccl\" backend takes contiguous CUDA tensors", fn);
  if (t->dtype == TS_INT16) /* NCCL has no 16-bit integer type (PyTorch refuses it too) */
    return ts_fail(TS_ERR_DTYPE, "%s: the \"nccl\" backend has no int16; convert first, e.g. t:int()", fn);
  return TS_OK;
}

bool ts_nccl_available(void) {
#ifdef TS_SIM_DEVICE
  return false; /* NCCL drives real GPUs only; the simulated device's memory is host memory */
#else
  return ts_cuda_device_count() > 0 && load() == TS_OK;
#endif
}

ts_status ts_nccl_get_unique_id(uint8_t *id) {
  ts_status st = load();
  if (st) return st;
  nccl_id v;
  NCCL_TRY("ncclGetUniqueId", p_get_unique_id(&v));
  memcpy(id, v.internal, TS_NCCL_ID_BYTES);
  return TS_OK;
}

ts_status ts_nccl_init_rank(const uint8_t *id, int nranks, int rank, int device, void **comm) {
  ts_status st = load();
  if (!st) st = ts_cuda_set_device(device);
  if (st) return st;
  nccl_id v;
  memcpy(v.internal, id, TS_NCCL_ID_BYTES);
  nccl_comm c = NULL;
  NCCL_TRY("ncclCommInitRank", p_comm_init_rank(&c, nranks, v, rank));
  *comm = c;
  return TS_OK;
}

ts_status ts_nccl_destroy(void *comm) {
  if (comm && p_comm_destroy) NCCL_TRY("ncclCommDestroy", p_comm_destroy(comm));
  return TS_OK;
}

ts_status ts_nccl_all_reduce(void *comm, ts_tensor *t, int op) {
  ts_status st = check_cuda("all_reduce", t);
  if (st) return st;
  void *p = ts_data(t);
  NCCL_TRY("ncclAllReduce", p_all_reduce(p, p, (size_t)ts_numel(t), nccl_type(t->dtype), nccl_op(t->dtype, op),
                                         comm, stream_of(t)));
  return TS_OK;
}

ts_status ts_nccl_broadcast(void *comm, ts_tensor *t, int root) {
  ts_status st = check_cuda("broadcast", t);
  if (st) return st;
  void *p = ts_data(t);
  NCCL_TRY("ncclBroadcast", p_broadcast(p, p, (size_t)ts_numel(t), nccl_type(t->dtype), root, comm, stream_of(t)));
  return TS_OK;
}

ts_status ts_nccl_all_gather(void *comm, ts_tensor *out, const ts_tensor *in) {
  ts_status st = check_cuda("all_gather", out);
  if (!st) st = check_cuda("all_gather", in);
  if (st) return st;
  NCCL_TRY("ncclAllGather", p_all_gather(ts_data(in), ts_data(out), (size_t)ts_numel(in), nccl_type(in->dtype), comm,
                                         stream_of(in)));
  return TS_OK;
}

ts_status ts_nccl_reduce_scatter(void *comm, ts_tensor *out, const ts_tensor *in, int op) {
  ts_status st = check_cuda("reduce_scatter", out);
  if (!st) st = check_cuda("reduce_scatter", in);
  if (st) return st;
  NCCL_TRY("ncclReduceScatter", p_reduce_scatter(ts_data(in), ts_data(out), (size_t)ts_numel(out),
                                                 nccl_type(out->dtype), nccl_op(out->dtype, op), comm, stream_of(in)));
  return TS_OK;
}

#else /* no CUDA in this build */

static ts_status no_cuda(void) {
  return ts_fail(TS_ERR_UNSUPPORTED, "the \"nccl\" backend needs a CUDA build of tensh (this one is CPU-only); use "
                 "the \"mpi\" backend");
}
bool ts_nccl_available(void) { return false; }
ts_status ts_nccl_get_unique_id(uint8_t *id) { return (void)id, no_cuda(); }
ts_status ts_nccl_init_rank(const uint8_t *id, int nranks, int rank, int device, void **comm) {
  return (void)id, (void)nranks, (void)rank, (void)device, (void)comm, no_cuda();
}
ts_status ts_nccl_destroy(void *comm) { return (void)comm, TS_OK; }
ts_status ts_nccl_all_reduce(void *comm, ts_tensor *t, int op) { return (void)comm, (void)t, (void)op, no_cuda(); }
ts_status ts_nccl_broadcast(void *comm, ts_tensor *t, int root) { return (void)comm, (void)t, (void)root, no_cuda(); }
ts_status ts_nccl_all_gather(void *comm, ts_tensor *out, const ts_tensor *in) {
  return (void)comm, (void)out, (void)in, no_cuda();
}
ts_status ts_nccl_reduce_scatter(void *comm, ts_tensor *out, const ts_tensor *in, int op) {
  return (void)comm, (void)out, (void)in, (void)op, no_cuda();
}
#endif
