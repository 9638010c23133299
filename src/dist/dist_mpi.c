/* The MPI side of dist (see dist.h): Open MPI's libmpi opened on first use.
 *
 * Without mpi.h at build time: Open MPI's handles are pointers to its
 * predefined objects (MPI_COMM_WORLD is &ompi_mpi_comm_world), found here
 * with dlsym; its ABI has been stable since v3.0 (libmpi.so.40). float16
 * and bfloat16, which MPI lacks, travel as MPI_UINT16_T with our own
 * reduction functions (MPI_Op_create); bool as MPI_C_BOOL with logical
 * or/and for sum/max and product/min, as PyTorch reduces bools. */
#include "dist.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"

typedef void *MPI_Comm, *MPI_Datatype, *MPI_Op, *MPI_Request, *MPI_Errhandler;
typedef void(MPI_User_function)(void *, void *, int *, MPI_Datatype *);
#define MPI_SUCCESS 0
#define MPI_THREAD_FUNNELED 1
#define MPI_STATUS_IGNORE NULL
#define MPI_STATUSES_IGNORE NULL
#define MPI_IN_PLACE ((void *)1)
#define MPI_MAX_ERROR_STRING 256
#define MPI_MAX_LIBRARY_VERSION_STRING 256

/* the functions tensh calls, with their C prototypes (MPI 3.1) */
#define MPI_FUNCTIONS(X)                                                                                     \
  X(int, MPI_Initialized, (int *))                                                                           \
  X(int, MPI_Finalized, (int *))                                                                             \
  X(int, MPI_Init_thread, (int *, char ***, int, int *))                                                     \
  X(int, MPI_Finalize, (void))                                                                               \
  X(int, MPI_Abort, (MPI_Comm, int))                                                                         \
  X(int, MPI_Comm_rank, (MPI_Comm, int *))                                                                   \
  X(int, MPI_Comm_size, (MPI_Comm, int *))                                                                   \
  X(int, MPI_Comm_set_errhandler, (MPI_Comm, MPI_Errhandler))                                                \
  X(int, MPI_Error_string, (int, char *, int *))                                                             \
  X(int, MPI_Get_library_version, (char *, int *))                                                           \
  X(int, MPI_Op_create, (MPI_User_function *, int, MPI_Op *))                                                \
  X(int, MPI_Barrier, (MPI_Comm))                                                                            \
  X(int, MPI_Allreduce, (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm))                         \
  X(int, MPI_Iallreduce, (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *))         \
  X(int, MPI_Bcast, (void *, int, MPI_Datatype, int, MPI_Comm))                                              \
  X(int, MPI_Allgather, (const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm))              \
  X(int, MPI_Reduce_scatter_block, (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm))              \
  X(int, MPI_Send, (const void *, int, MPI_Datatype, int, int, MPI_Comm))                                    \
  X(int, MPI_Recv, (void *, int, MPI_Datatype, int, int, MPI_Comm, void *))                                  \
  X(int, MPI_Test, (MPI_Request *, int *, void *))                                                           \
  X(int, MPI_Wait, (MPI_Request *, void *))

#define DECLARE(ret, name, args) static ret(*p_##name) args;
MPI_FUNCTIONS(DECLARE)
#undef DECLARE

static void *lib;
static bool active;
static MPI_Comm world;
static MPI_Datatype types[TS_DTYPE_COUNT];
static MPI_Op ops[TS_REDUCE_COUNT], bool_ops[TS_REDUCE_COUNT], half_ops[2][TS_REDUCE_COUNT]; /* [0] float16, [1] bfloat16 */
static char version[MPI_MAX_LIBRARY_VERSION_STRING];

/* ---- float16 / bfloat16 reductions (MPI has no such types) ---- */

#define HALF_OP(name, to_f, from_f, expr)                                               \
  static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {                 \
    (void)dt;                                                                           \
    const uint16_t *x = in;                                                             \
    uint16_t *y = inout;                                                                \
    for (int i = 0; i < *len; i++) {                                                    \
      float a = to_f(x[i]), b = to_f(y[i]);                                             \
      y[i] = from_f(expr);                                                              \
    }                                                                                   \
  }
/* max/min propagate NaN, as torch.maximum and PyTorch's all_reduce do */
#define FMAX(a, b) ((a) != (a) || (a) > (b) ? (a) : (b))
#define FMIN(a, b) ((a) != (a) || (a) < (b) ? (a) : (b))
HALF_OP(f16_sum, ts_half_to_float, ts_float_to_half, a + b)
HALF_OP(f16_prod, ts_half_to_float, ts_float_to_half, a * b)
HALF_OP(f16_min, ts_half_to_float, ts_float_to_half, FMIN(a, b))
HALF_OP(f16_max, ts_half_to_float, ts_float_to_half, FMAX(a, b))
HALF_OP(bf16_sum, ts_bf16_to_float, ts_float_to_bf16, a + b)
HALF_OP(bf16_prod, ts_bf16_to_float, ts_float_to_bf16, a * b)
HALF_OP(bf16_min, ts_bf16_to_float, ts_float_to_bf16, FMIN(a, b))
HALF_OP(bf16_max, ts_bf16_to_float, ts_float_to_bf16, FMAX(a, b))

/* ---- loading ---- */

static ts_status mpi_error(const char *fn, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (p_MPI_Error_string) p_MPI_Error_string(rc, msg, &len);
  return ts_fail(TS_ERR_BACKEND, "dist: %s failed: %s (MPI error %d)", fn, msg[0] ? msg : "unknown error", rc);
}
#define MPI_TRY(fn, call)                       \
  do {                                          \
    int rc_ = (call);                           \
    if (rc_ != MPI_SUCCESS) return mpi_error(fn, rc_); \
  } while (0)

static void *object(const char *name) { return dlsym(lib, name); }

static ts_status load(void) {
  if (lib) return TS_OK;
  /* TENSH_MPI_LIBRARY names another libmpi (a cluster's own Open MPI build).
   * RTLD_GLOBAL: Open MPI's plug-ins (mca_*.so), which it opens itself, find
   * libmpi's symbols in the global scope. */
  const char *path = getenv("TENSH_MPI_LIBRARY");
  if (!path || !*path) path = "libmpi.so.40";
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    return ts_fail(TS_ERR_UNSUPPORTED, "init_process_group: the \"mpi\" backend needs Open MPI (%s could not be "
                   "loaded: %s); on Debian: apt-get install libopenmpi3 openmpi-bin", path, dlerror());
  lib = h;
#define LOOKUP(ret, name, args)                                                                              \
  if (!(p_##name = (ret(*) args)dlsym(h, #name))) {                                                          \
    lib = NULL;                                                                                              \
    return ts_fail(TS_ERR_UNSUPPORTED, "init_process_group: %s has no %s (not an MPI 3 library)", path, #name); \
  }
  MPI_FUNCTIONS(LOOKUP)
#undef LOOKUP
  static const char *const type_names[TS_DTYPE_COUNT] = {
      [TS_FLOAT32] = "ompi_mpi_float",     [TS_FLOAT64] = "ompi_mpi_double",  [TS_FLOAT16] = "ompi_mpi_uint16_t",
      [TS_BFLOAT16] = "ompi_mpi_uint16_t", [TS_INT64] = "ompi_mpi_int64_t",  [TS_INT32] = "ompi_mpi_int32_t",
      [TS_UINT8] = "ompi_mpi_uint8_t",     [TS_BOOL] = "ompi_mpi_c_bool",    [TS_INT8] = "ompi_mpi_int8_t",
      [TS_INT16] = "ompi_mpi_int16_t"};
  for (int d = 0; d < TS_DTYPE_COUNT; d++) types[d] = object(type_names[d]);
  ops[TS_REDUCE_SUM] = object("ompi_mpi_op_sum");
  ops[TS_REDUCE_PRODUCT] = object("ompi_mpi_op_prod");
  ops[TS_REDUCE_MIN] = object("ompi_mpi_op_min");
  ops[TS_REDUCE_MAX] = object("ompi_mpi_op_max");
  MPI_Op lor = object("ompi_mpi_op_lor"), land = object("ompi_mpi_op_land");
  bool_ops[TS_REDUCE_SUM] = bool_ops[TS_REDUCE_MAX] = lor;
  bool_ops[TS_REDUCE_PRODUCT] = bool_ops[TS_REDUCE_MIN] = land;
  world = object("ompi_mpi_comm_world");
  MPI_Errhandler errors_return = object("ompi_mpi_errors_return");
  bool found = world && errors_return && lor && land;
  for (int d = 0; d < TS_DTYPE_COUNT; d++) found = found && types[d];
  for (int o = 0; o < TS_REDUCE_COUNT; o++) found = found && ops[o];
  if (!found) {
    lib = NULL;
    return ts_fail(TS_ERR_UNSUPPORTED, "init_process_group: %s is not Open MPI's libmpi (its predefined handles "
                   "are missing); tensh's \"mpi\" backend is built for Open MPI", path);
  }
  return TS_OK;
}

ts_status ts_dist_init(int *rank, int *size) {
  if (!active) {
    ts_status st = load();
    if (st) return st;
    int inited = 0, finalized = 0;
    p_MPI_Finalized(&finalized);
    if (finalized)
      return ts_fail(TS_ERR_ARG, "init_process_group: MPI was finalized in this process and cannot start again");
    p_MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      MPI_TRY("MPI_Init_thread", p_MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
      atexit(ts_dist_finalize);
    }
    /* errors come back as codes and become Lua errors, instead of MPI's abort */
    p_MPI_Comm_set_errhandler(world, object("ompi_mpi_errors_return"));
    MPI_User_function *const half_fns[2][TS_REDUCE_COUNT] = {{f16_sum, f16_prod, f16_min, f16_max},
                                                              {bf16_sum, bf16_prod, bf16_min, bf16_max}};
    for (int h = 0; h < 2; h++)
      for (int o = 0; o < TS_REDUCE_COUNT; o++)
        if (!half_ops[h][o]) MPI_TRY("MPI_Op_create", p_MPI_Op_create(half_fns[h][o], 1, &half_ops[h][o]));
    int len = 0;
    p_MPI_Get_library_version(version, &len);
    active = true;
  }
  MPI_TRY("MPI_Comm_rank", p_MPI_Comm_rank(world, rank));
  MPI_TRY("MPI_Comm_size", p_MPI_Comm_size(world, size));
  return TS_OK;
}

bool ts_dist_active(void) { return active; }
const char *ts_dist_library_version(void) { return version; }

static ts_status need_active(const char *fn) {
  return active ? TS_OK
                : ts_fail(TS_ERR_ARG, "%s: the default process group has not been initialized; call "
                          "dist.init_process_group first", fn);
}

static MPI_Op op_for(ts_dtype dt, ts_reduce_op op) {
  if (dt == TS_BOOL) return bool_ops[op];
  if (dt == TS_FLOAT16) return half_ops[0][op];
  if (dt == TS_BFLOAT16) return half_ops[1][op];
  return ops[op];
}

/* MPI counts are ints: large buffers go in pieces of at most CHUNK elements */
#define CHUNK ((int64_t)1 << 30)

ts_status ts_dist_barrier(void) {
  ts_status st = need_active("barrier");
  if (st) return st;
  MPI_TRY("MPI_Barrier", p_MPI_Barrier(world));
  return TS_OK;
}

ts_status ts_dist_all_reduce(void *buf, int64_t count, ts_dtype dt, ts_reduce_op op) {
  ts_status st = need_active("all_reduce");
  if (st) return st;
  char *p = buf;
  for (int64_t at = 0; at < count; at += CHUNK) {
    int n = (int)(count - at < CHUNK ? count - at : CHUNK);
    MPI_TRY("MPI_Allreduce", p_MPI_Allreduce(MPI_IN_PLACE, p + at * ts_dtype_sizes[dt], n, types[dt], op_for(dt, op), world));
  }
  return TS_OK;
}

ts_status ts_dist_broadcast(void *buf, int64_t count, ts_dtype dt, int root) {
  ts_status st = need_active("broadcast");
  if (st) return st;
  char *p = buf;
  for (int64_t at = 0; at < count; at += CHUNK) {
    int n = (int)(count - at < CHUNK ? count - at : CHUNK);
    MPI_TRY("MPI_Bcast", p_MPI_Bcast(p + at * ts_dtype_sizes[dt], n, types[dt], root, world));
  }
  return TS_OK;
}

static ts_status fits_int(const char *fn, int64_t count) {
  return count <= INT_MAX ? TS_OK
                          : ts_fail(TS_ERR_OVERFLOW, "%s: %lld elements per rank is more than MPI's limit of %d",
                                    fn, (long long)count, INT_MAX);
}

ts_status ts_dist_all_gather(const void *send, void *recv, int64_t count, ts_dtype dt) {
  ts_status st = need_active("all_gather");
  if (!st) st = fits_int("all_gather", count);
  if (st) return st;
  MPI_TRY("MPI_Allgather", p_MPI_Allgather(send, (int)count, types[dt], recv, (int)count, types[dt], world));
  return TS_OK;
}

ts_status ts_dist_reduce_scatter(const void *send, void *recv, int64_t count, ts_dtype dt, ts_reduce_op op) {
  ts_status st = need_active("reduce_scatter");
  if (!st) st = fits_int("reduce_scatter", count);
  if (st) return st;
  MPI_TRY("MPI_Reduce_scatter_block",
          p_MPI_Reduce_scatter_block(send, recv, (int)count, types[dt], op_for(dt, op), world));
  return TS_OK;
}

/* send and recv: the same pieces in the same order on both sides */
static ts_status point_to_point(bool send, void *buf, int64_t count, ts_dtype dt, int peer, int tag) {
  ts_status st = need_active(send ? "send" : "recv");
  if (st) return st;
  char *p = buf;
  for (int64_t at = 0; at < count || at == 0; at += CHUNK) {
    int n = (int)(count - at < CHUNK ? count - at : CHUNK);
    void *piece = p + at * ts_dtype_sizes[dt];
    if (send) MPI_TRY("MPI_Send", p_MPI_Send(piece, n, types[dt], peer, tag, world));
    else MPI_TRY("MPI_Recv", p_MPI_Recv(piece, n, types[dt], peer, tag, world, MPI_STATUS_IGNORE));
  }
  return TS_OK;
}

ts_status ts_dist_send(const void *buf, int64_t count, ts_dtype dt, int dst, int tag) {
  return point_to_point(true, (void *)buf, count, dt, dst, tag);
}

ts_status ts_dist_recv(void *buf, int64_t count, ts_dtype dt, int src, int tag) {
  return point_to_point(false, buf, count, dt, src, tag);
}

/* ---- non-blocking all-reduce ---- */

static MPI_Request *requests; /* a slot is NULL when free */
static int nrequests;

ts_status ts_dist_iall_reduce(void *buf, int64_t count, ts_dtype dt, ts_reduce_op op, int *req) {
  ts_status st = need_active("all_reduce");
  if (!st) st = fits_int("all_reduce", count);
  if (st) return st;
  int slot = 0;
  while (slot < nrequests && requests[slot]) slot++;
  if (slot == nrequests) {
    int n = nrequests ? 2 * nrequests : 16;
    MPI_Request *r = realloc(requests, sizeof *r * (size_t)n);
    if (!r) return ts_fail(TS_ERR_OOM, "all_reduce: out of memory for a request");
    memset(r + nrequests, 0, sizeof *r * (size_t)(n - nrequests));
    requests = r, nrequests = n;
  }
  MPI_TRY("MPI_Iallreduce", p_MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, types[dt], op_for(dt, op), world,
                                             &requests[slot]));
  *req = slot;
  return TS_OK;
}

static ts_status check_request(const char *fn, int req) {
  if (req < 0 || req >= nrequests || !requests[req])
    return ts_fail(TS_ERR_ARG, "%s: no pending request %d (already waited for?)", fn, req);
  return TS_OK;
}

ts_status ts_dist_test(int req, bool *done) {
  ts_status st = check_request("Work.is_completed", req);
  if (st) return st;
  int flag = 0;
  MPI_TRY("MPI_Test", p_MPI_Test(&requests[req], &flag, MPI_STATUS_IGNORE));
  if (flag) requests[req] = NULL; /* MPI set it to MPI_REQUEST_NULL; the slot is free again */
  *done = flag != 0;
  return TS_OK;
}

ts_status ts_dist_wait(int req) {
  ts_status st = check_request("Work.wait", req);
  if (st) return st;
  int rc = p_MPI_Wait(&requests[req], MPI_STATUS_IGNORE);
  requests[req] = NULL;
  if (rc != MPI_SUCCESS) return mpi_error("MPI_Wait", rc);
  return TS_OK;
}

void ts_dist_abort(int code) {
  int size = 1;
  /* a world of one has nobody waiting: exit as usual, without MPI's banner */
  if (active && p_MPI_Comm_size(world, &size) == MPI_SUCCESS && size > 1) p_MPI_Abort(world, code);
}

void ts_dist_finalize(void) {
  if (!active) return;
  active = false;
  int finalized = 0;
  p_MPI_Finalized(&finalized);
  if (!finalized) p_MPI_Finalize();
}
