/* Reduction and scan bindings: sum, mean, prod, max/min (values and
 * indices), amax/amin, argmax/argmin, var, std, norm, all, any, logsumexp,
 * cumsum, softmax, log_softmax, equal, isclose, allclose. Each is both a
 * torch function and a method. Arguments follow torch's positional order:
 * x:sum(dim, keepdim), x:var(dim, unbiased, keepdim), x:norm(p, dim, keepdim),
 * where dim is an integer or a list ({0, 2}); a trailing options table may
 * give the keywords instead ({dim =, keepdim =, dtype =, correction =, ...}). */
#include "lt.h"

#include <math.h>
#include <string.h>

/* The parsed arguments of a reduction. */
typedef struct rargs {
  int ndims; /* 0: no dim given (reduce everything) */
  int64_t dims[TS_MAX_DIMS];
  int nb;    /* positional booleans after the dims (keepdim; var/std: unbiased, keepdim) */
  bool b[2];
  int opts;  /* stack index of the options table, or 0 */
} rargs;

/* dims from a Lua integer or list at idx into a; returns false if idx holds neither */
static bool read_dims(lua_State *L, const char *fn, int idx, rargs *a) {
  lt_unsize(L, idx);
  int t = lua_type(L, idx);
  if (t == LUA_TNUMBER) {
    a->dims[0] = lt_checkint(L, idx);
    a->ndims = 1;
    return true;
  }
  if (t != LUA_TTABLE || lt_test(L, idx) || lua_rawlen(L, idx) == 0) return false;
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  if (n > TS_MAX_DIMS) lt_errorf(L, "%s: at most %d dims can be reduced, got %lld", fn, TS_MAX_DIMS, (long long)n);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    int isnum;
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    if (!isnum) lt_errorf(L, "%s: dims must be integers, got %s at position %d", fn, luaL_typename(L, -1), (int)i);
    a->dims[i - 1] = v;
    lua_pop(L, 1);
  }
  a->ndims = (int)n;
  return true;
}

/* The options each family reads. */
static const char *const dim_keepdim[] = {"dim", "keepdim", NULL};
static const char *const dim_keepdim_dtype[] = {"dim", "keepdim", "dtype", NULL};

/* Parses [dim | {dims}] [bool [bool]] [options] starting at idx; the
 * options may hold the keys in known. */
static void parse_reduce(lua_State *L, const char *fn, int idx, rargs *a, const char *const *known) {
  int top = lua_gettop(L);
  a->ndims = 0, a->nb = 0;
  a->opts = top >= idx ? lt_opts_index(L, top) : 0;
  lt_opts_check(L, a->opts, fn, known);
  if (read_dims(L, fn, idx, a)) idx++;
  else if (lua_isnil(L, idx) && top > idx) idx++; /* torch.sum(x, nil, true) */
  while (a->nb < 2 && lua_type(L, idx) == LUA_TBOOLEAN) a->b[a->nb++] = lua_toboolean(L, idx++);
  if (idx <= top && idx != a->opts && !lua_isnil(L, idx))
    lt_errorf(L, "bad argument #%d to '%s' (dim (integer or list of integers) expected, got %s)", idx, fn,
              lt_value_name(L, idx));
  if (a->opts && a->ndims == 0) {
    if (lua_getfield(L, a->opts, "dim") != LUA_TNIL && !read_dims(L, fn, lua_gettop(L), a))
      lt_errorf(L, "%s: option 'dim' must be an integer or a list of integers, got %s", fn, lt_value_name(L, -1));
    lua_pop(L, 1);
  }
}

static bool keepdim_of(lua_State *L, const rargs *a, int pos) {
  return lt_opt_bool(L, a->opts, "keepdim", a->nb > pos ? a->b[pos] : false);
}

/* x, or x cast to the options' dtype (sum, mean, prod, cumsum, softmax: torch's dtype keyword) */
static ts_tensor *cast_opt(lua_State *L, ts_tensor *x, int opts) {
  ts_dtype dt = lt_opt_dtype(L, opts, x->dtype);
  if (dt == x->dtype) return x;
  ts_tensor **tmp = lt_newslot(L);
  LT_TRY(L, ts_to_dtype(x, dt, tmp));
  return *tmp;
}

/* r in the options' dtype when it asks for one r is not: sums, products and
 * running sums of integers come out int64, but with {dtype = torch.int32}
 * PyTorch gives int32 (wrapped around: the int64 result cast, the same bits) */
static ts_tensor *in_asked_dtype(lua_State *L, ts_tensor *r, int opts) {
  if (!opts) return r;
  bool asked = lua_getfield(L, opts, "dtype") != LUA_TNIL;
  lua_pop(L, 1);
  ts_dtype dt = lt_opt_dtype(L, opts, r->dtype);
  if (!asked || dt == r->dtype) return r;
  ts_tensor **tmp = lt_newslot(L);
  LT_TRY(L, ts_to_dtype(r, dt, tmp));
  return *tmp;
}

static const struct {
  const char *name;
  ts_status (*f)(ts_tensor *, int, const int64_t *, bool, ts_tensor **);
} reductions[] = {{"sum", ts_sum}, {"mean", ts_mean}, {"prod", ts_prod},
                  {"all", ts_all}, {"any", ts_any}, {"logsumexp", ts_logsumexp}};

/* upvalue 1: the index in reductions[] */
static int l_reduce(lua_State *L) {
  int which = (int)lua_tointeger(L, lua_upvalueindex(1));
  const char *fn = reductions[which].name;
  ts_tensor *x = lt_check(L, 1);
  rargs a;
  parse_reduce(L, fn, 2, &a, dim_keepdim_dtype); /* every one casts to the options' dtype first */
  bool keepdim = keepdim_of(L, &a, 0);
  x = cast_opt(L, x, a.opts);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, reductions[which].f(x, a.ndims, a.dims, keepdim, slot));
  if (reductions[which].f == ts_sum || reductions[which].f == ts_prod) in_asked_dtype(L, *slot, a.opts);
  lt_gc_debt(L);
  bool predicate = reductions[which].f == ts_all || reductions[which].f == ts_any;
  if (predicate && a.ndims == 0 && !keepdim) {
    /* x:any() / x:all() over everything answer with a Lua boolean, since Lua
     * has no truthiness hook: `if x:isnan():any() then` does what it says
     * (a tensor would always be true). :item() on the boolean still works
     * (prelude.lua), for code written the PyTorch way. */
    ts_tensor *host = lt_host_view(L, *slot);
    lua_pushboolean(L, *(const uint8_t *)ts_data(host) != 0);
  } else if (predicate && x->dtype == TS_UINT8) { /* PyTorch 1.13's any/all keep uint8 */
    ts_tensor **u8 = lt_newslot(L);
    LT_TRY(L, ts_to_dtype(*slot, TS_UINT8, u8));
  }
  return 1;
}

static ts_op extreme_op(lua_State *L) { return (ts_op)lua_tointeger(L, lua_upvalueindex(1)); }

/* max(x): 0-dim; max(x, dim[, keepdim]): values, indices; max(x, other): elementwise maximum */
static int l_max(lua_State *L) {
  ts_op op = extreme_op(L);
  const char *fn = ts_ops[op].name;
  ts_tensor *x = lt_check(L, 1);
  ts_tensor *other = lt_test(L, 2);
  if (other) {
    ts_tensor **slot = lt_newslot(L);
    LT_TRY(L, ts_binary(op == TS_OP_MAX ? TS_OP_MAXIMUM : TS_OP_MINIMUM, x, other, slot));
    lt_gc_debt(L);
    return 1;
  }
  rargs a;
  parse_reduce(L, fn, 2, &a, dim_keepdim);
  bool keepdim = keepdim_of(L, &a, 0);
  if (a.ndims > 1) return lt_errorf(L, "%s: expected one dim, got %d; use x:a%s(dims) for several", fn, a.ndims, fn);
  if (a.ndims == 0) {
    ts_tensor **slot = lt_newslot(L);
    LT_TRY(L, ts_amax(op, x, 0, NULL, keepdim, slot));
    lt_gc_debt(L);
    return 1;
  }
  ts_tensor **values = lt_newslot(L), **indices = lt_newslot(L);
  LT_TRY(L, ts_max_dim(op, x, a.dims[0], keepdim, values, indices));
  lt_gc_debt(L);
  return 2;
}

static int l_amax(lua_State *L) {
  ts_op op = extreme_op(L);
  ts_tensor *x = lt_check(L, 1);
  rargs a;
  parse_reduce(L, op == TS_OP_MAX ? "amax" : "amin", 2, &a, dim_keepdim);
  bool keepdim = keepdim_of(L, &a, 0);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_amax(op, x, a.ndims, a.dims, keepdim, slot));
  lt_gc_debt(L);
  return 1;
}

static int l_argmax(lua_State *L) {
  ts_op op = extreme_op(L);
  const char *fn = op == TS_OP_MAX ? "argmax" : "argmin";
  ts_tensor *x = lt_check(L, 1);
  rargs a;
  parse_reduce(L, fn, 2, &a, dim_keepdim);
  bool keepdim = keepdim_of(L, &a, 0);
  if (a.ndims > 1) return lt_errorf(L, "%s: expected one dim, got %d", fn, a.ndims);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_argmax(op, x, a.ndims ? a.dims : NULL, keepdim, slot));
  lt_gc_debt(L);
  return 1;
}

/* var/std(dim, unbiased, keepdim) or {correction =, unbiased =, keepdim =}; upvalue 1: 1 for std */
static int l_var(lua_State *L) {
  bool is_std = lua_tointeger(L, lua_upvalueindex(1)) == 1;
  const char *fn = is_std ? "std" : "var";
  ts_tensor *x = lt_check(L, 1);
  rargs a;
  static const char *const known[] = {"dim", "keepdim", "unbiased", "correction", NULL};
  parse_reduce(L, fn, 2, &a, known);
  bool unbiased = lt_opt_bool(L, a.opts, "unbiased", a.nb > 0 ? a.b[0] : true);
  double correction = lt_opt_number(L, a.opts, "correction", unbiased ? 1 : 0);
  bool keepdim = keepdim_of(L, &a, 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, (is_std ? ts_std : ts_var)(x, a.ndims, a.dims, correction, keepdim, slot));
  lt_gc_debt(L);
  return 1;
}

/* norm(p, dim, keepdim): p a number (math.huge for the max norm) or "fro" */
static double norm_p(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    const char *s = lua_tostring(L, idx);
    if (strcmp(s, "fro") == 0) return 2;
    if (strcmp(s, "inf") == 0) return INFINITY;
    if (strcmp(s, "-inf") == 0) return -INFINITY;
    lt_errorf(L, "norm: p must be a number, \"fro\", \"inf\" or \"-inf\", got \"%s\" (matrix norms such as \"nuc\" "
              "are not supported)", s);
  }
  return luaL_checknumber(L, idx);
}

static int l_norm(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  double p = 2;
  int idx = 2;
  if (lua_type(L, 2) == LUA_TNUMBER || lua_type(L, 2) == LUA_TSTRING) p = norm_p(L, idx++);
  else if (lua_isnil(L, 2) && lua_gettop(L) > 2) idx++;
  rargs a;
  static const char *const known[] = {"p", "dim", "keepdim", "dtype", NULL};
  parse_reduce(L, "norm", idx, &a, known);
  if (a.opts && lua_getfield(L, a.opts, "p") != LUA_TNIL) p = norm_p(L, lua_gettop(L));
  if (a.opts) lua_pop(L, 1);
  bool keepdim = keepdim_of(L, &a, 0);
  x = cast_opt(L, x, a.opts);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_norm(x, p, a.ndims, a.dims, keepdim, slot));
  lt_gc_debt(L);
  return 1;
}

static const struct {
  const char *name;
  ts_status (*f)(ts_tensor *, int64_t, ts_tensor **);
} scans[] = {{"cumsum", ts_cumsum}, {"softmax", ts_softmax}, {"log_softmax", ts_log_softmax}};

/* cumsum/softmax/log_softmax(dim[, dtype][, {dtype =}]); upvalue 1: the index in scans[] */
static int l_scan(lua_State *L) {
  int which = (int)lua_tointeger(L, lua_upvalueindex(1));
  const char *fn = scans[which].name;
  ts_tensor *x = lt_check(L, 1);
  static const char *const known[] = {"dim", "dtype", NULL};
  int opts = lt_opts_index(L, lua_gettop(L));
  lt_opts_check(L, opts, fn, known);
  int64_t dim;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    dim = lt_checkint(L, 2);
  } else if (opts && lua_getfield(L, opts, "dim") != LUA_TNIL) {
    lua_pop(L, 1);
    dim = lt_opt_int(L, opts, "dim", 0);
  } else {
    return lt_errorf(L, "%s: missing the dim to work along, e.g. x:%s(-1)", fn, fn);
  }
  if (lua_type(L, 3) == LUA_TSTRING) { /* torch.softmax(x, dim, dtype) */
    ts_tensor **tmp = lt_newslot(L);
    LT_TRY(L, ts_to_dtype(x, lt_check_dtype(L, 3), tmp));
    x = *tmp;
  }
  x = cast_opt(L, x, opts);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, scans[which].f(x, dim, slot));
  if (scans[which].f == ts_cumsum) in_asked_dtype(L, *slot, opts);
  lt_gc_debt(L);
  return 1;
}

static int l_equal(lua_State *L) {
  ts_tensor *a = lt_check(L, 1), *b = lt_check(L, 2);
  bool r;
  LT_TRY(L, ts_equal(a, b, &r));
  lua_pushboolean(L, r);
  return 1;
}

/* isclose/allclose(a, b[, rtol[, atol[, equal_nan]]][, {rtol =, atol =, equal_nan =}]) */
static void close_args(lua_State *L, const char *fn, double *rtol, double *atol, bool *equal_nan) {
  static const char *const known[] = {"rtol", "atol", "equal_nan", NULL};
  int opts = lt_opts_index(L, lua_gettop(L));
  lt_opts_check(L, opts, fn, known);
  *rtol = lua_type(L, 3) == LUA_TNUMBER ? lua_tonumber(L, 3) : 1e-5;
  *atol = lua_type(L, 4) == LUA_TNUMBER ? lua_tonumber(L, 4) : 1e-8;
  *equal_nan = lua_type(L, 5) == LUA_TBOOLEAN ? lua_toboolean(L, 5) : false;
  *rtol = lt_opt_number(L, opts, "rtol", *rtol);
  *atol = lt_opt_number(L, opts, "atol", *atol);
  *equal_nan = lt_opt_bool(L, opts, "equal_nan", *equal_nan);
}

static int l_isclose(lua_State *L) {
  ts_scalar_box bb;
  ts_tensor *a = lt_check(L, 1), *b = lt_operand(L, 2, &bb);
  double rtol, atol;
  bool en;
  close_args(L, "isclose", &rtol, &atol, &en);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_isclose(a, b, rtol, atol, en, slot));
  lt_gc_debt(L);
  return 1;
}

static int l_allclose(lua_State *L) {
  ts_tensor *a = lt_check(L, 1), *b = lt_check(L, 2);
  double rtol, atol;
  bool en, r;
  close_args(L, "allclose", &rtol, &atol, &en);
  LT_TRY(L, ts_allclose(a, b, rtol, atol, en, &r));
  lua_pushboolean(L, r);
  return 1;
}

/* Sets name in both the torch table and the methods table, as a closure over the integer i. */
static void set_both(lua_State *L, int torch, int methods, const char *name, lua_CFunction f, lua_Integer i) {
  for (int k = 0; k < 2; k++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, f, 1);
    lua_setfield(L, k ? torch : methods, name);
  }
}

void lt_open_reduce(lua_State *L) {
  int methods = lua_gettop(L), torch = methods - 1;
  for (size_t i = 0; i < sizeof reductions / sizeof *reductions; i++)
    set_both(L, torch, methods, reductions[i].name, l_reduce, (lua_Integer)i);
  for (size_t i = 0; i < sizeof scans / sizeof *scans; i++)
    set_both(L, torch, methods, scans[i].name, l_scan, (lua_Integer)i);
  set_both(L, torch, methods, "max", l_max, TS_OP_MAX);
  set_both(L, torch, methods, "min", l_max, TS_OP_MIN);
  set_both(L, torch, methods, "amax", l_amax, TS_OP_MAX);
  set_both(L, torch, methods, "amin", l_amax, TS_OP_MIN);
  set_both(L, torch, methods, "argmax", l_argmax, TS_OP_MAX);
  set_both(L, torch, methods, "argmin", l_argmax, TS_OP_MIN);
  set_both(L, torch, methods, "var", l_var, 0);
  set_both(L, torch, methods, "std", l_var, 1);
  static const luaL_Reg both[] = {{"norm", l_norm}, {"equal", l_equal}, {"isclose", l_isclose},
                                  {"allclose", l_allclose}, {NULL, NULL}};
  lt_register(L, both, both);
}
