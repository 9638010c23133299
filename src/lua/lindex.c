/* Bindings for joining, indexing and sorting: torch.cat/stack, split/chunk
 * (Lua lists of views), gather/scatter/index_select, masked_select, nonzero,
 * sort/argsort/topk, torch.unique and torch.one_hot. Ops with several
 * results push one slot per result before calling the core. */
#include "lt.h"

#include <math.h>
#include <string.h>

/* A dim given positionally at idx, or as opts.dim, or dflt. */
static int64_t dim_arg(lua_State *L, int idx, int opts, int64_t dflt) {
  if (lua_type(L, idx) == LUA_TNUMBER) return lt_checkint(L, idx);
  double v = lt_opt_number(L, opts, "dim", (double)dflt);
  if (v != floor(v)) luaL_error(L, "option 'dim' must be an integer, got %g", v);
  return (int64_t)v;
}

/* The tensors of the list at idx, in a userdata array (collected on error). */
static ts_tensor **tensor_list(lua_State *L, int idx, const char *fn, int *n) {
  luaL_checktype(L, idx, LUA_TTABLE);
  *n = (int)lua_rawlen(L, idx);
  ts_tensor **ts = lua_newuserdatauv(L, sizeof(ts_tensor *) * (size_t)(*n > 0 ? *n : 1), 0);
  for (int k = 0; k < *n; k++) {
    lua_rawgeti(L, idx, k + 1);
    ts[k] = lt_test(L, -1);
    if (!ts[k]) luaL_error(L, "%s: expected a list of tensors, but element %d is a %s", fn, k + 1, luaL_typename(L, -1));
    lua_pop(L, 1); /* the list keeps the tensor alive */
  }
  return ts;
}

/* torch.cat(tensors, dim=0) */
static const char *const dim_only[] = {"dim", NULL};

static int l_cat(lua_State *L) {
  int n, opts = lt_opts_index(L, 2);
  lt_opts_check(L, opts, "cat", dim_only);
  int64_t dim = dim_arg(L, 2, opts, 0);
  ts_tensor **ts = tensor_list(L, 1, "cat", &n);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_cat(n, ts, dim, slot));
  lt_gc_debt(L);
  return 1;
}

/* torch.stack(tensors, dim=0) */
static int l_stack(lua_State *L) {
  int n, opts = lt_opts_index(L, 2);
  lt_opts_check(L, opts, "stack", dim_only);
  int64_t dim = dim_arg(L, 2, opts, 0);
  ts_tensor **ts = tensor_list(L, 1, "stack", &n);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_stack(n, ts, dim, slot));
  lt_gc_debt(L);
  return 1;
}

/* The pieces of x along d as a list: lens[k] long (unbind: one select per
 * index when lens is NULL), views sharing one backward (op_split.c). The
 * list's tensor slots are made first, so a Lua error leaks nothing. */
static int push_pieces(lua_State *L, ts_tensor *x, int d, int64_t n, const int64_t *lens, bool with_sizes) {
  if (n > INT32_MAX) return luaL_error(L, "split: too many pieces (%I)", (lua_Integer)n);
  ts_tensor **pieces = lua_newuserdatauv(L, sizeof *pieces * (size_t)(n > 0 ? n : 1), 0);
  lua_createtable(L, (int)n, 0);
  for (int k = 1; k <= n; k++) {
    lt_newslot(L);
    lua_rawseti(L, -2, k);
  }
  LT_TRY(L, lens ? ts_split_with_sizes(x, d, (int)n, lens, with_sizes, pieces) : ts_unbind(x, d, pieces));
  for (int k = 1; k <= n; k++) {
    lua_rawgeti(L, -1, k);
    *(ts_tensor **)lua_touserdata(L, -1) = pieces[k - 1]; /* the slot's first field is its tensor */
    lua_pop(L, 1);
  }
  lt_gc_debt(L);
  return 1;
}

static int split_dim(lua_State *L, ts_tensor *x, const char *fn, int idx) {
  int d, opts = lt_opts_index(L, idx);
  lt_opts_check(L, opts, fn, dim_only);
  if (x->ndim == 0) luaL_error(L, "%s: cannot split a 0-dim tensor", fn);
  LT_TRY(L, ts_wrap_dim(fn, dim_arg(L, idx, opts, 0), x->ndim, &d));
  return d;
}

/* Pieces of split_size along d (the last smaller), as a list. */
static int split_even(lua_State *L, ts_tensor *x, int d, int64_t s) {
  int64_t size = x->sizes[d], n = s && size ? (size - 1) / s + 1 : 1; /* size + s - 1 could overflow */
  if (n < 1) n = 1;
  if (n > INT32_MAX) luaL_error(L, "split: too many pieces (%I)", (lua_Integer)n);
  int64_t *lens = lua_newuserdatauv(L, sizeof *lens * (size_t)n, 0);
  for (int64_t k = 0; k < n; k++) lens[k] = s < size - k * s ? s : size - k * s;
  return push_pieces(L, x, d, n, lens, false);
}

/* x:split(split_size | {sizes...}, dim=0) */
static int m_split(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int d = split_dim(L, x, "split", 3);
  int64_t size = x->sizes[d];
  if (lua_type(L, 2) == LUA_TNUMBER) {
    int64_t s = lt_checkint(L, 2);
    if (s < 0) return luaL_error(L, "split: split_size must be non-negative, got %I", (lua_Integer)s);
    if (s == 0 && size > 0)
      return luaL_error(L, "split: split_size can only be 0 if dimension size is 0, but got dimension size of %I",
                        (lua_Integer)size);
    return split_even(L, x, d, s);
  }
  lt_unsize(L, 2);
  if (lua_type(L, 2) != LUA_TTABLE) return luaL_typeerror(L, 2, "integer or list of sizes");
  int n = (int)lua_rawlen(L, 2);
  int64_t sum = 0, *lens = lua_newuserdatauv(L, sizeof *lens * (size_t)(n > 0 ? n : 1), 0);
  for (int k = 1; k <= n; k++) {
    lua_rawgeti(L, 2, k);
    int isnum;
    int64_t s = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum || s < 0)
      return luaL_error(L, "split: split_sizes must be non-negative integers, got a bad value at position %d", k);
    if (__builtin_add_overflow(sum, s, &sum))
      return luaL_error(L, "split: split_sizes sum past 64 bits (at position %d)", k);
    lens[k - 1] = s;
  }
  if (sum != size)
    return luaL_error(L, "split: split_sizes must sum exactly to %I (the input's size in dimension %d), but they sum to %I",
                      (lua_Integer)size, d, (lua_Integer)sum);
  return push_pieces(L, x, d, n, lens, true);
}

/* x:chunk(chunks, dim=0): split's pieces, or (an empty dim) `chunks` empty
 * ones recorded as split_with_sizes, as torch does */
static int m_chunk(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t n = lt_checkint(L, 2);
  if (n <= 0) return luaL_error(L, "chunk: expects `chunks` to be greater than 0, got: %I", (lua_Integer)n);
  int d = split_dim(L, x, "chunk", 3);
  int64_t size = x->sizes[d], s = size ? (size - 1) / n + 1 : 0; /* size + n - 1 could overflow */
  if (s == 0) {
    if (n > INT32_MAX) return luaL_error(L, "chunk: too many chunks");
    int64_t *lens = lua_newuserdatauv(L, sizeof *lens * (size_t)n, 0);
    memset(lens, 0, sizeof *lens * (size_t)n);
    return push_pieces(L, x, d, n, lens, true);
  }
  return split_even(L, x, d, s);
}

/* x:unbind(dim=0) (tensor_extra.lua lists the result) */
static int m_unbind(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int d;
  if (x->ndim == 0) return luaL_error(L, "unbind: dimension specified as 0 but tensor has no dimensions");
  LT_TRY(L, ts_wrap_dim("unbind", lua_isnoneornil(L, 2) ? 0 : lt_checkint(L, 2), x->ndim, &d));
  return push_pieces(L, x, d, x->sizes[d], NULL, false);
}

/* x:gather(dim, index) */
static int m_gather(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t dim = lt_checkint(L, 2);
  ts_tensor *index = lt_check(L, 3);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_gather(x, dim, index, slot));
  lt_gc_debt(L);
  return 1;
}

/* scatter family: (dim, index, src | value [, {reduce = "add"}]) */
static int scatter_impl(lua_State *L, bool inplace, bool add) {
  ts_tensor *x = lt_check(L, 1);
  int64_t dim = lt_checkint(L, 2);
  ts_tensor *index = lt_check(L, 3);
  ts_scalar_box box;
  ts_tensor *src = lt_operand(L, 4, &box);
  static const char *const known[] = {"reduce", NULL};
  int opts = lt_opts_index(L, 5);
  lt_opts_check(L, opts, inplace ? (add ? "scatter_add_" : "scatter_") : (add ? "scatter_add" : "scatter"), known);
  if (opts && lua_getfield(L, opts, "reduce") != LUA_TNIL) {
    const char *r = lua_tostring(L, -1);
    if (!r || strcmp(r, "add") != 0)
      return luaL_error(L, "scatter: reduce must be \"add\" (got %s); \"multiply\" is not supported",
                        r ? r : luaL_typename(L, -1));
    add = true;
  }
  if (inplace) {
    LT_TRY(L, ts_scatter_(x, dim, index, src, add));
    lua_settop(L, 1);
    return 1;
  }
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_scatter(x, dim, index, src, add, slot));
  lt_gc_debt(L);
  return 1;
}
static int m_scatter(lua_State *L) { return scatter_impl(L, false, false); }
static int m_scatter_(lua_State *L) { return scatter_impl(L, true, false); }
static int m_scatter_add(lua_State *L) { return scatter_impl(L, false, true); }
static int m_scatter_add_(lua_State *L) { return scatter_impl(L, true, true); }

/* x:index_select(dim, index) */
static int m_index_select(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t dim = lt_checkint(L, 2);
  ts_tensor *index = lt_check(L, 3);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_index_select(x, dim, index, slot));
  lt_gc_debt(L);
  return 1;
}

static int m_masked_select(lua_State *L) {
  ts_tensor *x = lt_check(L, 1), *mask = lt_check(L, 2);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_masked_select(x, mask, slot));
  lt_gc_debt(L);
  return 1;
}

/* x:nonzero({as_tuple = false}): (n, ndim) int64, or a list of ndim (n) columns */
static int m_nonzero(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  static const char *const known[] = {"as_tuple", NULL};
  int opts = lt_opts_index(L, 2);
  lt_opts_check(L, opts, "nonzero", known);
  bool as_tuple = lt_opt_bool(L, opts, "as_tuple", false);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_nonzero(x, slot));
  lt_gc_debt(L);
  if (!as_tuple) return 1;
  ts_tensor *nz = *slot;
  int cols = x->ndim ? x->ndim : 1; /* torch treats a 0-dim input as 1-D here */
  lua_createtable(L, cols, 0);
  for (int d = 0; d < cols; d++) {
    ts_tensor **col = lt_newslot(L);
    if (x->ndim) LT_TRY(L, ts_select(nz, 1, d, col));
    else LT_TRY(L, ts_full(1, (int64_t[]){nz->sizes[0]}, 0, TS_INT64, x->device, col));
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

/* Reads sort's arguments: (dim, descending) positionally or {dim, descending, stable}. */
static void sort_args(lua_State *L, const char *fn, int64_t *dim, bool *desc) {
  static const char *const known[] = {"dim", "descending", "stable", NULL};
  int opts = lt_opts_index(L, lua_gettop(L));
  lt_opts_check(L, opts, fn, known);
  *dim = dim_arg(L, 2, opts, -1);
  *desc = lua_type(L, 3) == LUA_TBOOLEAN ? lua_toboolean(L, 3) : lt_opt_bool(L, opts, "descending", false);
  if (lua_type(L, 2) == LUA_TBOOLEAN) { /* sort(true): torch's sort(descending=True) spelled positionally */
    *desc = lua_toboolean(L, 2);
    *dim = -1;
  }
  (void)lt_opt_bool(L, opts, "stable", true); /* always stable; the option is accepted, checked for type */
}

static int m_sort(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t dim;
  bool desc;
  sort_args(L, "sort", &dim, &desc);
  ts_tensor **v = lt_newslot(L), **i = lt_newslot(L);
  LT_TRY(L, ts_sort(x, dim, desc, v, i));
  lt_gc_debt(L);
  return 2;
}

static int m_argsort(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t dim;
  bool desc;
  sort_args(L, "argsort", &dim, &desc);
  ts_tensor **v = lt_newslot(L), **i = lt_newslot(L);
  LT_TRY(L, ts_sort(x, dim, desc, v, i));
  lt_gc_debt(L);
  return 1; /* the indices, on top */
}

/* x:topk(k, dim=-1, largest=true, sorted=true) or x:topk(k, {dim=, largest=, sorted=}) */
static int m_topk(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t k = lt_checkint(L, 2);
  static const char *const known[] = {"dim", "largest", "sorted", NULL};
  int opts = lt_opts_index(L, lua_gettop(L));
  lt_opts_check(L, opts, "topk", known);
  int64_t dim = dim_arg(L, 3, opts, -1);
  bool largest = lua_type(L, 4) == LUA_TBOOLEAN ? lua_toboolean(L, 4) : lt_opt_bool(L, opts, "largest", true);
  (void)lt_opt_bool(L, opts, "sorted", true); /* results are always sorted */
  ts_tensor **v = lt_newslot(L), **i = lt_newslot(L);
  LT_TRY(L, ts_topk(x, k, dim, largest, v, i));
  lt_gc_debt(L);
  return 2;
}

/* torch.unique(x, {sorted = true, return_inverse = false, return_counts = false}) */
static int l_unique(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  static const char *const known[] = {"sorted", "return_inverse", "return_counts", "dim", NULL};
  int opts = lt_opts_index(L, 2);
  if (!lua_isnoneornil(L, 2) && !opts) return luaL_typeerror(L, 2, "options table");
  lt_opts_check(L, opts, "unique", known); /* dim is known, to say it is not supported */
  (void)lt_opt_bool(L, opts, "sorted", true); /* always sorted, which torch allows either way */
  bool inv = lt_opt_bool(L, opts, "return_inverse", false), cnt = lt_opt_bool(L, opts, "return_counts", false);
  if (opts && lua_getfield(L, opts, "dim") != LUA_TNIL)
    return luaL_error(L, "unique: the dim option is not supported; unique works on the flattened tensor");
  ts_tensor **v = lt_newslot(L), **i = inv ? lt_newslot(L) : NULL, **c = cnt ? lt_newslot(L) : NULL;
  LT_TRY(L, ts_unique(x, v, i, c));
  lt_gc_debt(L);
  return 1 + inv + cnt;
}

/* torch.one_hot(t, num_classes=-1) */
static int l_one_hot(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t c = lua_isnoneornil(L, 2) ? -1 : lt_checkint(L, 2);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_one_hot(x, c, slot));
  lt_gc_debt(L);
  return 1;
}

void lt_open_index(lua_State *L) {
  static const luaL_Reg both[] = {
      {"split", m_split}, {"chunk", m_chunk}, {"unbind", m_unbind}, {"gather", m_gather}, {"scatter", m_scatter},
      {"scatter_add", m_scatter_add}, {"index_select", m_index_select}, {"masked_select", m_masked_select},
      {"nonzero", m_nonzero}, {"sort", m_sort}, {"argsort", m_argsort}, {"topk", m_topk}, {"unique", l_unique}, {NULL, NULL}};
  static const luaL_Reg methods[] = {{"scatter_", m_scatter_}, {"scatter_add_", m_scatter_add_}, {NULL, NULL}};
  static const luaL_Reg fns[] = {{"cat", l_cat}, {"concat", l_cat}, {"stack", l_stack},
                                 {"one_hot", l_one_hot}, {NULL, NULL}};
  lt_register(L, both, both);
  lt_register(L, fns, methods);
}
