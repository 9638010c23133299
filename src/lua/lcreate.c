/* Creation: torch.tensor from nested tables, zeros/ones/full/empty, ranges,
 * eye, *_like, and the random constructors. Options are a trailing table:
 * {dtype=, device=, requires_grad=}. */
#include "lt.h"
#include "ops/op_random.h"

#include <string.h>

typedef struct create_opts {
  ts_dtype dtype;
  ts_device device;
  bool requires_grad;
} create_opts;

/* The options of creation function fn; a device that is not there is an
 * error naming fn before anything is allocated ("zeros: CUDA is not
 * available ...", "randn: invalid device ordinal cuda:1 ..."). */
static create_opts read_opts(lua_State *L, const char *fn, int opts, ts_dtype dflt_dtype, ts_device dflt_dev) {
  static const char *const known[] = {"dtype", "device", "requires_grad", NULL};
  lt_opts_check(L, opts, fn, known);
  create_opts o = {lt_opt_dtype(L, opts, dflt_dtype), lt_opt_device(L, opts, dflt_dev), false};
  if (o.device.type != TS_CPU && ts_device_resolve(&o.device)) lt_errorf(L, "%s: %s", fn, ts_last_error());
  o.requires_grad = lt_opt_bool(L, opts, "requires_grad", false);
  if (o.requires_grad && !ts_dtype_is_float(o.dtype))
    luaL_error(L, "only tensors of floating point dtype can require gradients, got %s", ts_dtype_name(o.dtype));
  return o;
}

static void finish(lua_State *L, ts_tensor *t, const create_opts *o) {
  t->requires_grad = o->requires_grad;
  t->storage->version = 0; /* a new tensor's storage: the writes that made it are no in-place changes (torch's 0) */
  lt_gc_debt(L);
}

/* ---- torch.tensor ------------------------------------------------------- */

/* Walks the first elements to find the shape, then checks every row. */
static void infer_shape(lua_State *L, int idx, int *nd, int64_t *sizes) {
  *nd = 0;
  lua_pushvalue(L, idx);
  while (lua_type(L, -1) == LUA_TTABLE && !lt_test(L, -1)) {
    if (*nd >= TS_MAX_DIMS) luaL_error(L, "tensor: nesting deeper than %d dims", TS_MAX_DIMS);
    sizes[(*nd)++] = (int64_t)lua_rawlen(L, -1);
    if (lua_rawlen(L, -1) == 0) break;
    lua_rawgeti(L, -1, 1);
    lt_unsize(L, -1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

/* kinds seen: 1 bool, 2 integer, 4 float */
static void scan_values(lua_State *L, int idx, int d, int nd, const int64_t *sizes, int *kinds) {
  if (d == nd) {
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN: *kinds |= 1; return;
    case LUA_TNUMBER: *kinds |= lua_isinteger(L, idx) ? 2 : 4; return;
    default: luaL_error(L, "tensor: expected numbers or booleans, got %s", luaL_typename(L, idx));
    }
  }
  if (lua_type(L, idx) != LUA_TTABLE || (int64_t)lua_rawlen(L, idx) != sizes[d]) {
    if (lua_type(L, idx) == LUA_TTABLE)
      lt_errorf(L, "tensor: ragged nested table: expected a list of length %lld at depth %d, got length %lld",
                (long long)sizes[d], d, (long long)lua_rawlen(L, idx));
    lt_errorf(L, "tensor: ragged nested table: expected a list of length %lld at depth %d, got a %s",
              (long long)sizes[d], d, luaL_typename(L, idx));
  }
  luaL_checkstack(L, 4, "tensor: nesting too deep");
  for (int64_t i = 1; i <= sizes[d]; i++) {
    lua_rawgeti(L, idx, i);
    lt_unsize(L, -1); /* torch.tensor({torch.Size{2, 3}, ...}): the Size's dims */
    scan_values(L, lua_gettop(L), d + 1, nd, sizes, kinds);
    lua_pop(L, 1);
  }
}

static void fill_values(lua_State *L, int idx, int d, int nd, const int64_t *sizes, char **p, ts_dtype dt) {
  if (d == nd) {
    if (lua_type(L, idx) == LUA_TBOOLEAN) ts_store_i64(*p, dt, lua_toboolean(L, idx));
    else if (lua_isinteger(L, idx)) ts_store_i64(*p, dt, lua_tointeger(L, idx));
    else ts_store_f64(*p, dt, lua_tonumber(L, idx));
    *p += ts_dtype_size(dt);
    return;
  }
  for (int64_t i = 1; i <= sizes[d]; i++) {
    lua_rawgeti(L, idx, i);
    lt_unsize(L, -1);
    fill_values(L, lua_gettop(L), d + 1, nd, sizes, p, dt);
    lua_pop(L, 1);
  }
}

static int l_tensor(lua_State *L) {
  lt_unsize(L, 1); /* torch.tensor(x.shape): its dims, as PyTorch's tensor(torch.Size([2, 3])) */
  if (lt_test(L, 1)) { /* torch.tensor(t): a copy */
    ts_tensor *src = lt_test(L, 1);
    create_opts o = read_opts(L, "tensor", lt_opts_index(L, 2), src->dtype, src->device);
    ts_tensor **alias = lt_newslot(L); /* src without its history: the copy is a new leaf, as torch's */
    LT_TRY(L, ts_tensor_view_of(src, src->ndim, src->sizes, src->strides, src->offset, alias));
    ts_tensor **slot = lt_newslot(L);
    LT_TRY(L, ts_tensor_empty(src->ndim, src->sizes, o.dtype, o.device, slot));
    LT_TRY(L, ts_copy_(*slot, *alias));
    finish(L, *slot, &o);
    return 1;
  }
  int nd, kinds = 0;
  int64_t sizes[TS_MAX_DIMS];
  ts_dtype inferred;
  if (lua_type(L, 1) == LUA_TNUMBER || lua_type(L, 1) == LUA_TBOOLEAN) {
    nd = 0;
    scan_values(L, 1, 0, 0, sizes, &kinds);
  } else {
    luaL_checktype(L, 1, LUA_TTABLE);
    infer_shape(L, 1, &nd, sizes);
    scan_values(L, 1, 0, nd, sizes, &kinds);
  }
  inferred = kinds & 4 ? TS_FLOAT32 : kinds & 2 ? TS_INT64 : kinds & 1 ? TS_BOOL : TS_FLOAT32;
  create_opts o = read_opts(L, "tensor", lt_opts_index(L, 2), inferred, TS_DEVICE_CPU);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_tensor_empty(nd, sizes, o.dtype, TS_DEVICE_CPU, slot));
  char *p = ts_data(*slot); /* values are written on the host, then moved */
  fill_values(L, 1, 0, nd, sizes, &p, o.dtype);
  if (o.device.type != TS_CPU) {
    ts_tensor **moved = lt_newslot(L);
    LT_TRY(L, ts_to_device(*slot, o.device, o.dtype, false, moved));
  }
  finish(L, lt_check(L, -1), &o); /* the result is on top either way */
  return 1;
}

/* ---- shapes + fill ---------------------------------------------------- */

static int make_filled(lua_State *L, const char *fn, int first, double v, bool fill) {
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  int used = lt_sizes(L, first, &nd, sizes);
  if (used == 0 && !lua_isnoneornil(L, first) && !lt_opts_index(L, first))
    return luaL_typeerror(L, first, "sizes (integers, a table or a torch.Size)");
  create_opts o = read_opts(L, fn, lt_opts_index(L, first + used), TS_DEFAULT_DTYPE, TS_DEVICE_CPU);
  ts_tensor **slot = lt_newslot(L);
  if (fill) LT_TRY(L, ts_full(nd, sizes, v, o.dtype, o.device, slot));
  else LT_TRY(L, ts_tensor_empty(nd, sizes, o.dtype, o.device, slot));
  finish(L, *slot, &o);
  return 1;
}

static int l_zeros(lua_State *L) { return make_filled(L, "zeros", 1, 0, true); }
static int l_ones(lua_State *L) { return make_filled(L, "ones", 1, 1, true); }
static int l_empty(lua_State *L) { return make_filled(L, "empty", 1, 0, false); }

static int l_full(lua_State *L) {
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  int used = lt_sizes(L, 1, &nd, sizes);
  if (used == 0) return luaL_typeerror(L, 1, "sizes (a table or a torch.Size)");
  int vi = 1 + used;
  ts_dtype dflt = lua_type(L, vi) == LUA_TBOOLEAN ? TS_BOOL : lua_isinteger(L, vi) ? TS_INT64 : TS_DEFAULT_DTYPE;
  double v = lua_type(L, vi) == LUA_TBOOLEAN ? lua_toboolean(L, vi) : luaL_checknumber(L, vi);
  create_opts o = read_opts(L, "full", lt_opts_index(L, vi + 1), dflt, TS_DEVICE_CPU);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_full(nd, sizes, v, o.dtype, o.device, slot));
  finish(L, *slot, &o);
  return 1;
}

/* *_like(t [, value], opts): t's shape, dtype and device unless overridden */
static int make_like(lua_State *L, int mode /* 0 zeros 1 ones 2 empty 3 full 4 rand 5 randn */) {
  ts_tensor *t = lt_check(L, 1);
  int opts_at = mode == 3 ? 3 : 2;
  bool flag = mode == 3 && lua_type(L, 2) == LUA_TBOOLEAN; /* full_like(t, true), as torch.full takes it */
  double v = mode == 1 ? 1 : flag ? lua_toboolean(L, 2) : mode == 3 ? luaL_checknumber(L, 2) : 0;
  static const char *const names[] = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"};
  create_opts o = read_opts(L, names[mode], lt_opts_index(L, opts_at), t->dtype, t->device);
  if (mode >= 4 && !ts_dtype_is_float(o.dtype))
    return luaL_error(L, "%s: expected a floating point dtype, got %s", names[mode], ts_dtype_name(o.dtype));
  ts_tensor **slot = lt_newslot(L);
  if (mode == 4) LT_TRY(L, ts_rand(t->ndim, t->sizes, o.dtype, o.device, slot));
  else if (mode == 5) LT_TRY(L, ts_randn(t->ndim, t->sizes, o.dtype, o.device, slot));
  else if (mode == 2) LT_TRY(L, ts_tensor_empty(t->ndim, t->sizes, o.dtype, o.device, slot));
  else LT_TRY(L, ts_full(t->ndim, t->sizes, v, o.dtype, o.device, slot));
  finish(L, *slot, &o);
  return 1;
}
static int l_zeros_like(lua_State *L) { return make_like(L, 0); }
static int l_ones_like(lua_State *L) { return make_like(L, 1); }
static int l_empty_like(lua_State *L) { return make_like(L, 2); }
static int l_full_like(lua_State *L) { return make_like(L, 3); }
static int l_rand_like(lua_State *L) { return make_like(L, 4); }
static int l_randn_like(lua_State *L) { return make_like(L, 5); }

/* ---- ranges ------------------------------------------------------------------ */

/* arange(end) | arange(start, end [, step]) */
static int l_arange(lua_State *L) {
  int nargs = 0;
  while (nargs < 3 && lua_type(L, nargs + 1) == LUA_TNUMBER) nargs++;
  if (nargs == 0) return luaL_typeerror(L, 1, "number");
  bool all_int = true;
  for (int i = 1; i <= nargs; i++) all_int = all_int && lua_isinteger(L, i);
  create_opts o = read_opts(L, "arange", lt_opts_index(L, nargs + 1), all_int ? TS_INT64 : TS_DEFAULT_DTYPE, TS_DEVICE_CPU);
  ts_tensor **slot = lt_newslot(L);
  if (all_int)
    LT_TRY(L, ts_arange_int(nargs >= 2 ? lua_tointeger(L, 1) : 0, lua_tointeger(L, nargs >= 2 ? 2 : 1),
                            nargs == 3 ? lua_tointeger(L, 3) : 1, o.dtype, o.device, slot));
  else
    LT_TRY(L, ts_arange(nargs >= 2 ? lua_tonumber(L, 1) : 0, lua_tonumber(L, nargs >= 2 ? 2 : 1),
                        nargs == 3 ? lua_tonumber(L, 3) : 1, o.dtype, o.device, slot));
  finish(L, *slot, &o);
  return 1;
}

static int l_linspace(lua_State *L) {
  double start = luaL_checknumber(L, 1), end = luaL_checknumber(L, 2);
  int64_t n = lt_checkint(L, 3);
  create_opts o = read_opts(L, "linspace", lt_opts_index(L, 4), TS_DEFAULT_DTYPE, TS_DEVICE_CPU);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_linspace(start, end, n, o.dtype, o.device, slot));
  finish(L, *slot, &o);
  return 1;
}

/* eye(n [, m], opts): zeros, then a strided view of the diagonal filled with 1 */
static int l_eye(lua_State *L) {
  int64_t n = lt_checkint(L, 1), m = lua_type(L, 2) == LUA_TNUMBER ? lt_checkint(L, 2) : n;
  if (n < 0 || m < 0) return lt_errorf(L, "eye: sizes must be non-negative, got %lld and %lld", (long long)n, (long long)m);
  create_opts o = read_opts(L, "eye", lt_opts_index(L, lua_type(L, 2) == LUA_TNUMBER ? 3 : 2), TS_DEFAULT_DTYPE, TS_DEVICE_CPU);
  int64_t sizes[2] = {n, m};
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_full(2, sizes, 0, o.dtype, o.device, slot));
  int64_t k = n < m ? n : m, stride = k > 0 ? m + 1 : 1; /* k == 0: nothing to fill, and m + 1 may overflow */
  ts_tensor **diag = lt_newslot(L);
  LT_TRY(L, ts_tensor_view_of(*slot, 1, &k, &stride, 0, diag));
  LT_TRY(L, ts_fill_(*diag, 1));
  lua_pop(L, 1);
  finish(L, *slot, &o);
  return 1;
}

/* ---- random ------------------------------------------------------------------ */

/* rand, randn, randint (lo, hi): sizes from argument first on, then options */
static int make_random(lua_State *L, ts_op op, int first, int64_t lo, int64_t hi) {
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  int used = lt_sizes(L, first, &nd, sizes);
  if (used == 0 && !lua_isnoneornil(L, first) && !lt_opts_index(L, first))
    return luaL_typeerror(L, first, "sizes (integers, a table or a torch.Size)");
  ts_dtype dflt = op == TS_OP_RANDINT ? TS_INT64 : TS_DEFAULT_DTYPE;
  create_opts o = read_opts(L, ts_ops[op].name, lt_opts_index(L, first + used), dflt, TS_DEVICE_CPU);
  ts_tensor **slot = lt_newslot(L);
  if (op == TS_OP_RAND) LT_TRY(L, ts_rand(nd, sizes, o.dtype, o.device, slot));
  else if (op == TS_OP_RANDN) LT_TRY(L, ts_randn(nd, sizes, o.dtype, o.device, slot));
  else LT_TRY(L, ts_randint(lo, hi, nd, sizes, o.dtype, o.device, slot));
  finish(L, *slot, &o);
  return 1;
}

static int l_rand(lua_State *L) { return make_random(L, TS_OP_RAND, 1, 0, 0); }
static int l_randn(lua_State *L) { return make_random(L, TS_OP_RANDN, 1, 0, 0); }

/* randint(high, size) | randint(low, high, size), as torch */
static int l_randint(lua_State *L) {
  int64_t lo = 0, hi;
  int first;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    lo = lt_checkint(L, 1), hi = lt_checkint(L, 2), first = 3;
  } else {
    hi = lt_checkint(L, 1), first = 2;
  }
  if (lua_type(L, first) != LUA_TTABLE) return luaL_typeerror(L, first, "size table, e.g. {64}");
  return make_random(L, TS_OP_RANDINT, first, lo, hi);
}

static int l_randperm(lua_State *L) {
  int64_t n = lt_checkint(L, 1);
  create_opts o = read_opts(L, "randperm", lt_opts_index(L, 2), TS_INT64, TS_DEVICE_CPU);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_randperm(n, o.dtype, o.device, slot));
  finish(L, *slot, &o);
  return 1;
}

static int l_manual_seed(lua_State *L) {
  ts_manual_seed((uint64_t)lt_checkint(L, 1));
  return 0;
}

static int l_initial_seed(lua_State *L) { return lua_pushinteger(L, (lua_Integer)ts_initial_seed()), 1; }

/* The generator state as {seed = , offset = } (Philox needs nothing more),
 * so a checkpoint can resume the random stream exactly. */
static int l_get_rng_state(lua_State *L) {
  uint64_t seed, offset;
  ts_rng_get_state(&seed, &offset);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)seed);
  lua_setfield(L, -2, "seed");
  lua_pushinteger(L, (lua_Integer)offset);
  lua_setfield(L, -2, "offset");
  return 1;
}

static int l_set_rng_state(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "seed");
  lua_getfield(L, 1, "offset");
  if (!lua_isinteger(L, -2) || !lua_isinteger(L, -1))
    return luaL_error(L, "set_rng_state: expected {seed = integer, offset = integer} as get_rng_state gives");
  ts_rng_set_state((uint64_t)lua_tointeger(L, -2), (uint64_t)lua_tointeger(L, -1));
  return 0;
}

/* In-place random fills, as methods: t:uniform_(a, b), t:normal_(mean, std) */
static int random_fill(lua_State *L, ts_status (*fill)(ts_tensor *, double, double)) {
  ts_tensor *t = lt_check(L, 1);
  double a = luaL_optnumber(L, 2, 0), b = luaL_optnumber(L, 3, 1);
  LT_TRY(L, fill(t, a, b));
  lua_settop(L, 1);
  return 1;
}
/* torch._dropout_mask(x, p): F.dropout's keep factors in one kernel (op_random.h) */
static int l_dropout_mask(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  double p = luaL_checknumber(L, 2);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_dropout_mask(x, p, slot));
  return 1;
}

static int m_uniform_(lua_State *L) { return random_fill(L, ts_uniform_); }
static int m_normal_(lua_State *L) { return random_fill(L, ts_normal_); }

void lt_open_create(lua_State *L) {
  static const luaL_Reg fns[] = {
      {"tensor", l_tensor}, {"zeros", l_zeros}, {"ones", l_ones}, {"empty", l_empty}, {"full", l_full},
      {"zeros_like", l_zeros_like}, {"ones_like", l_ones_like}, {"empty_like", l_empty_like},
      {"full_like", l_full_like}, {"rand_like", l_rand_like}, {"randn_like", l_randn_like},
      {"arange", l_arange}, {"linspace", l_linspace}, {"eye", l_eye}, {"rand", l_rand}, {"randn", l_randn},
      {"randint", l_randint}, {"randperm", l_randperm}, {"manual_seed", l_manual_seed},
      {"initial_seed", l_initial_seed}, {"get_rng_state", l_get_rng_state},
      {"set_rng_state", l_set_rng_state}, {"_dropout_mask", l_dropout_mask}, {NULL, NULL}};
  static const luaL_Reg methods[] = {{"uniform_", m_uniform_}, {"normal_", m_normal_}, {NULL, NULL}};
  lt_register(L, fns, methods);
}
