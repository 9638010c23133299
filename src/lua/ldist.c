/* torch._dist: the C half of dist (lua/tensh/dist.lua checks the arguments
 * across ranks, stages device tensors through host memory and keeps the
 * public names). Every tensor here is a contiguous CPU tensor (the nccl
 * calls take CUDA tensors, checked in src/dist/dist_nccl.c). Also sets
 * RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from Open MPI's
 * variables at start-up, as torchrun sets them, so a script reads its rank
 * before init_process_group under `tensh --nproc` and `mpirun` alike. */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"
#include "lt.h"

static ts_tensor *check_host(lua_State *L, int idx, const char *fn) {
  ts_tensor *t = lt_check(L, idx);
  if (t->device.type != TS_CPU || !ts_is_contiguous(t))
    lt_errorf(L, "%s: expected a contiguous CPU tensor (dist.lua stages others)", fn);
  LT_TRY(L, ts_host_ready(t));
  return t;
}

static ts_reduce_op check_op(lua_State *L, int idx) {
  lua_Integer op = luaL_checkinteger(L, idx);
  if (op < 0 || op >= TS_REDUCE_COUNT) luaL_argerror(L, idx, "a reduce op code");
  return (ts_reduce_op)op;
}

static int check_rank(lua_State *L, int idx) {
  lua_Integer r = luaL_checkinteger(L, idx);
  if (r < 0 || r > 1 << 30) luaL_argerror(L, idx, "a rank");
  return (int)r;
}

/* os.exit with a failure code, once MPI runs: the whole job ends at once
 * (MPI_Abort), since exiting normally would wait in MPI_Finalize for ranks
 * that wait for this one. The original os.exit is upvalue 1. */
static int guarded_exit(lua_State *L) {
  int code = lua_isnoneornil(L, 1) ? 0 : lua_isboolean(L, 1) ? (lua_toboolean(L, 1) ? 0 : 1) : (int)luaL_optinteger(L, 1, 1);
  if (code != 0 && getenv("OMPI_COMM_WORLD_RANK")) {
    /* said here: mpirun's own banner about MPI_Abort is sometimes lost */
    fprintf(stderr, "tensh: rank %s: os.exit(%d) ends the whole job\n", getenv("OMPI_COMM_WORLD_RANK"), code);
    fflush(stderr);
  }
  if (code != 0) ts_dist_abort(code);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

static void guard_exit(lua_State *L) {
  static int guarded;
  if (guarded) return;
  if (lua_getglobal(L, "os") != LUA_TTABLE) return (void)lua_pop(L, 1);
  guarded = 1;
  lua_getfield(L, -1, "exit");
  lua_pushcclosure(L, guarded_exit, 1);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
}

/* The processes an MPI gather or scatter spans, and this one's rank (set by init). */
static int mpi_world = 1, mpi_rank = 0;

/* A send's or receive's peer: another process of the group. MPI would wait
 * for ever on a receive from itself (a fuzzed recv hung), and on a rank
 * outside the group; PyTorch raises for both. */
static int check_peer(lua_State *L, int idx, const char *fn) {
  int r = check_rank(L, idx);
  if (ts_dist_active() && (r == mpi_rank || r >= mpi_world))
    lt_errorf(L, "bad argument #%d to '%s' (the rank of another process, 0 to %d but not %d (this process), "
              "expected, got %d)", idx, fn, mpi_world - 1, mpi_rank, r);
  return r;
}

/* all_gather(out, t) writes, and reduce_scatter(out, input) reads, world
 * times the smaller tensor's elements into or from the larger one, which
 * MPI and NCCL take on trust (a fuzzed all_gather into a smaller out overran
 * the heap): the larger must have exactly that many, of the same dtype. */
static void check_world_sizes(lua_State *L, const char *fn, int big_idx, const ts_tensor *big, const ts_tensor *small,
                              int world) {
  int64_t want = ts_numel(small) * world;
  if (big->dtype != small->dtype || ts_numel(big) != want)
    lt_errorf(L, "bad argument #%d to '%s' (%s tensor of %lld elements (world size %d x %lld) expected, got %s of %lld)",
              big_idx, fn, ts_dtype_name(small->dtype), (long long)want, world, (long long)ts_numel(small),
              ts_dtype_name(big->dtype), (long long)ts_numel(big));
}

/* _dist.init() -> rank, world_size, MPI's version string */
static int l_init(lua_State *L) {
  int rank = 0, size = 1;
  LT_TRY(L, ts_dist_init(&rank, &size));
  mpi_world = size, mpi_rank = rank;
  guard_exit(L);
  lua_pushinteger(L, rank);
  lua_pushinteger(L, size);
  lua_pushstring(L, ts_dist_library_version());
  return 3;
}

static int l_barrier(lua_State *L) {
  LT_TRY(L, ts_dist_barrier());
  return 0;
}

static int l_all_reduce(lua_State *L) {
  ts_tensor *t = check_host(L, 1, "all_reduce");
  LT_TRY(L, ts_dist_all_reduce(ts_data(t), ts_numel(t), t->dtype, check_op(L, 2)));
  return 0;
}

static int l_broadcast(lua_State *L) {
  ts_tensor *t = check_host(L, 1, "broadcast");
  LT_TRY(L, ts_dist_broadcast(ts_data(t), ts_numel(t), t->dtype, check_rank(L, 2)));
  return 0;
}

/* _dist.all_gather(out, t): out holds world_size * numel(t) elements */
static int l_all_gather(lua_State *L) {
  ts_tensor *out = check_host(L, 1, "all_gather"), *t = check_host(L, 2, "all_gather");
  check_world_sizes(L, "all_gather", 1, out, t, mpi_world);
  LT_TRY(L, ts_dist_all_gather(ts_data(t), ts_data(out), ts_numel(t), t->dtype));
  return 0;
}

/* _dist.reduce_scatter(out, input, op): input holds world_size * numel(out) elements */
static int l_reduce_scatter(lua_State *L) {
  ts_tensor *out = check_host(L, 1, "reduce_scatter"), *in = check_host(L, 2, "reduce_scatter");
  check_world_sizes(L, "reduce_scatter", 2, in, out, mpi_world);
  LT_TRY(L, ts_dist_reduce_scatter(ts_data(in), ts_data(out), ts_numel(out), out->dtype, check_op(L, 3)));
  return 0;
}

static int l_send(lua_State *L) {
  ts_tensor *t = check_host(L, 1, "send");
  LT_TRY(L, ts_dist_send(ts_data(t), ts_numel(t), t->dtype, check_peer(L, 2, "send"), (int)luaL_optinteger(L, 3, 0)));
  return 0;
}

static int l_recv(lua_State *L) {
  ts_tensor *t = check_host(L, 1, "recv");
  LT_TRY(L, ts_dist_recv(ts_data(t), ts_numel(t), t->dtype, check_peer(L, 2, "recv"), (int)luaL_optinteger(L, 3, 0)));
  return 0;
}

/* _dist.iall_reduce(t, op) -> request id; the caller keeps t alive until wait */
static int l_iall_reduce(lua_State *L) {
  ts_tensor *t = check_host(L, 1, "all_reduce");
  int req = -1;
  LT_TRY(L, ts_dist_iall_reduce(ts_data(t), ts_numel(t), t->dtype, check_op(L, 2), &req));
  lua_pushinteger(L, req);
  return 1;
}

static int l_test(lua_State *L) {
  bool done = false;
  LT_TRY(L, ts_dist_test((int)luaL_checkinteger(L, 1), &done));
  lua_pushboolean(L, done);
  return 1;
}

static int l_wait(lua_State *L) {
  LT_TRY(L, ts_dist_wait((int)luaL_checkinteger(L, 1)));
  return 0;
}

/* ---- torch._nccl: the "nccl" backend's calls (CUDA builds) ---- */
#ifdef TS_HAVE_CUDA
/* The processes an NCCL gather or scatter spans: the last communicator's (set by init_rank). */
static int nccl_world = 1;

static ts_tensor *check_id(lua_State *L, int idx) {
  ts_tensor *t = lt_check(L, idx);
  if (t->device.type != TS_CPU || t->dtype != TS_UINT8 || !ts_is_contiguous(t) || ts_numel(t) != TS_NCCL_ID_BYTES)
    luaL_argerror(L, idx, "a contiguous uint8 CPU tensor of ID_BYTES elements");
  return t;
}

static void *check_comm(lua_State *L, int idx) {
  luaL_checktype(L, idx, LUA_TLIGHTUSERDATA);
  return lua_touserdata(L, idx);
}

static int l_nccl_available(lua_State *L) { return lua_pushboolean(L, ts_nccl_available()), 1; }

static int l_nccl_get_unique_id(lua_State *L) {
  LT_TRY(L, ts_nccl_get_unique_id(ts_data(check_id(L, 1))));
  return 0;
}

/* _nccl.init_rank(id, world_size, rank, device) -> communicator */
static int l_nccl_init_rank(lua_State *L) {
  void *comm = NULL;
  int world = (int)luaL_checkinteger(L, 2);
  LT_TRY(L, ts_nccl_init_rank(ts_data(check_id(L, 1)), world, check_rank(L, 3), (int)luaL_checkinteger(L, 4), &comm));
  nccl_world = world;
  lua_pushlightuserdata(L, comm);
  return 1;
}

static int l_nccl_destroy(lua_State *L) {
  LT_TRY(L, ts_nccl_destroy(check_comm(L, 1)));
  return 0;
}

static int nccl_op_arg(lua_State *L, int idx) {
  lua_Integer op = luaL_checkinteger(L, idx);
  if (op < 0 || op > TS_NCCL_AVG) luaL_argerror(L, idx, "a reduce op code");
  return (int)op;
}

static int l_nccl_all_reduce(lua_State *L) {
  LT_TRY(L, ts_nccl_all_reduce(check_comm(L, 1), lt_check(L, 2), nccl_op_arg(L, 3)));
  return 0;
}

static int l_nccl_broadcast(lua_State *L) {
  LT_TRY(L, ts_nccl_broadcast(check_comm(L, 1), lt_check(L, 2), check_rank(L, 3)));
  return 0;
}

static int l_nccl_all_gather(lua_State *L) {
  ts_tensor *out = lt_check(L, 2), *in = lt_check(L, 3);
  check_world_sizes(L, "all_gather", 2, out, in, nccl_world);
  LT_TRY(L, ts_nccl_all_gather(check_comm(L, 1), out, in));
  return 0;
}

static int l_nccl_reduce_scatter(lua_State *L) {
  ts_tensor *out = lt_check(L, 2), *in = lt_check(L, 3);
  check_world_sizes(L, "reduce_scatter", 3, in, out, nccl_world);
  LT_TRY(L, ts_nccl_reduce_scatter(check_comm(L, 1), out, in, nccl_op_arg(L, 4)));
  return 0;
}

static void open_nccl(lua_State *L) {
  static const luaL_Reg fns[] = {{"available", l_nccl_available},     {"get_unique_id", l_nccl_get_unique_id},
                                 {"init_rank", l_nccl_init_rank},     {"destroy", l_nccl_destroy},
                                 {"all_reduce", l_nccl_all_reduce},   {"broadcast", l_nccl_broadcast},
                                 {"all_gather", l_nccl_all_gather},   {"reduce_scatter", l_nccl_reduce_scatter},
                                 {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_pushinteger(L, TS_NCCL_ID_BYTES);
  lua_setfield(L, -2, "ID_BYTES");
  lua_setfield(L, -3, "_nccl"); /* torch is at -2 before the table */
}
#endif

static void copy_env(const char *to, const char *from) {
  const char *v = getenv(from);
  if (v && !getenv(to)) setenv(to, v, 0);
}

void lt_open_dist(lua_State *L) {
  copy_env("RANK", "OMPI_COMM_WORLD_RANK");
  copy_env("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
  copy_env("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK");
  copy_env("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE");
  static const luaL_Reg fns[] = {{"init", l_init},
                                 {"barrier", l_barrier},
                                 {"all_reduce", l_all_reduce},
                                 {"broadcast", l_broadcast},
                                 {"all_gather", l_all_gather},
                                 {"reduce_scatter", l_reduce_scatter},
                                 {"send", l_send},
                                 {"recv", l_recv},
                                 {"iall_reduce", l_iall_reduce},
                                 {"test", l_test},
                                 {"wait", l_wait},
                                 {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_setfield(L, -3, "_dist"); /* torch is at -2 before the table */
#ifdef TS_HAVE_CUDA
  open_nccl(L);
#endif
}
