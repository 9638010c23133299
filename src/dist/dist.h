/* Several processes: collectives over MPI (the "mpi" backend of dist) and
 * NCCL's unique id handed out over it (the "nccl" backend).
 *
 * libmpi (Open MPI's libmpi.so.40) is opened with dlopen on the first
 * ts_dist_init: tensh's start-up does not pay for MPI's libraries, and a build
 * on a machine without Open MPI still builds and runs (init_process_group
 * then says what is missing). Every MPI call comes from the thread that
 * called ts_dist_init (MPI_THREAD_FUNNELED).
 *
 * Buffers are host memory, contiguous, `count` elements of `dt`; the Lua
 * layer (lua/tensh/dist.lua) checks tensors and stages device tensors. */
#ifndef TENSH_DIST_H
#define TENSH_DIST_H

#include "core/tensh.h"

typedef enum ts_reduce_op { TS_REDUCE_SUM, TS_REDUCE_PRODUCT, TS_REDUCE_MIN, TS_REDUCE_MAX, TS_REDUCE_COUNT } ts_reduce_op;

/* Starts MPI once (singleton when not under mpirun); *rank and *size of the world. */
ts_status ts_dist_init(int *rank, int *size);
bool ts_dist_active(void);
/* Open MPI's version string ("Open MPI v4.1.4, ..."), or "" before init. */
const char *ts_dist_library_version(void);

ts_status ts_dist_barrier(void);
ts_status ts_dist_all_reduce(void *buf, int64_t count, ts_dtype dt, ts_reduce_op op);
ts_status ts_dist_broadcast(void *buf, int64_t count, ts_dtype dt, int root);
/* recv holds size * count elements, rank r's in [r * count, (r + 1) * count) */
ts_status ts_dist_all_gather(const void *send, void *recv, int64_t count, ts_dtype dt);
/* send holds size * count elements; recv gets the reduction of block `rank` */
ts_status ts_dist_reduce_scatter(const void *send, void *recv, int64_t count, ts_dtype dt, ts_reduce_op op);
ts_status ts_dist_send(const void *buf, int64_t count, ts_dtype dt, int dst, int tag);
ts_status ts_dist_recv(void *buf, int64_t count, ts_dtype dt, int src, int tag);

/* A non-blocking all-reduce (DistributedDataParallel's buckets): *req
 * identifies it for ts_dist_test / ts_dist_wait, which free it when done.
 * The buffer must stay alive and untouched until then. */
ts_status ts_dist_iall_reduce(void *buf, int64_t count, ts_dtype dt, ts_reduce_op op, int *req);
ts_status ts_dist_test(int req, bool *done); /* also moves MPI's progress engine */
ts_status ts_dist_wait(int req);

/* ---- the "nccl" backend (src/dist/dist_nccl.c): CUDA tensors, contiguous, on
 * their device's current stream; comm is an opaque NCCL communicator ---- */
#define TS_NCCL_ID_BYTES 128
#define TS_NCCL_AVG TS_REDUCE_COUNT /* op codes: the ts_reduce_op values, and average */
bool ts_nccl_available(void); /* a GPU, and libnccl loads */
ts_status ts_nccl_get_unique_id(uint8_t *id);
ts_status ts_nccl_init_rank(const uint8_t *id, int nranks, int rank, int device, void **comm);
ts_status ts_nccl_destroy(void *comm);
ts_status ts_nccl_all_reduce(void *comm, ts_tensor *t, int op);
ts_status ts_nccl_broadcast(void *comm, ts_tensor *t, int root);
ts_status ts_nccl_all_gather(void *comm, ts_tensor *out, const ts_tensor *in);
ts_status ts_nccl_reduce_scatter(void *comm, ts_tensor *out, const ts_tensor *in, int op);

/* Ends the whole job at once (every rank) with the exit code: what a rank
 * that failed does, so the others never wait for it. Nothing in a world of one. */
void ts_dist_abort(int code);
/* MPI_Finalize on a normal exit (registered with atexit by ts_dist_init). */
void ts_dist_finalize(void);

#endif
