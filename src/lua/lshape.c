/* View bindings: view, reshape, transpose, permute, squeeze, unsqueeze,
 * expand, narrow, select, flatten, unflatten, slicing helpers. */
#include "lt.h"

#define VIEW_RESULT(L, call)               \
  do {                                     \
    ts_tensor **slot = lt_newslot(L);      \
    LT_TRY(L, call);                       \
    lt_gc_debt(L);                         \
    return 1;                              \
  } while (0)

static int sized(lua_State *L, ts_status (*fn)(ts_tensor *, int, const int64_t *, ts_tensor **), const char *name) {
  ts_tensor *t = lt_check(L, 1);
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  if (lt_sizes(L, 2, &nd, sizes) == 0 && !lua_isnone(L, 2))
    return luaL_typeerror(L, 2, "sizes (integers, a table or a torch.Size)");
  (void)name;
  VIEW_RESULT(L, fn(t, nd, sizes, slot));
}

static int m_view(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) return luaL_error(L, "view: changing the dtype of a view is not supported; use t:to(dtype)");
  return sized(L, ts_view, "view");
}
static int m_reshape(lua_State *L) { return sized(L, ts_reshape, "reshape"); }
static int m_expand(lua_State *L) { return sized(L, ts_expand, "expand"); }
static int m_permute(lua_State *L) { return sized(L, ts_permute, "permute"); }

static int m_view_as(lua_State *L) {
  ts_tensor *t = lt_check(L, 1), *o = lt_check(L, 2);
  VIEW_RESULT(L, ts_view(t, o->ndim, o->sizes, slot));
}
static int m_expand_as(lua_State *L) {
  ts_tensor *t = lt_check(L, 1), *o = lt_check(L, 2);
  VIEW_RESULT(L, ts_expand(t, o->ndim, o->sizes, slot));
}
static int m_reshape_as(lua_State *L) {
  ts_tensor *t = lt_check(L, 1), *o = lt_check(L, 2);
  VIEW_RESULT(L, ts_reshape(t, o->ndim, o->sizes, slot));
}

static int m_transpose(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  int64_t a = lt_checkint(L, 2), b = lt_checkint(L, 3);
  VIEW_RESULT(L, ts_transpose(t, a, b, slot));
}

static int m_t(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (t->ndim > 2) return luaL_error(L, "t: expects a tensor with <= 2 dimensions, but self is %dD", t->ndim);
  VIEW_RESULT(L, t->ndim < 2 ? ts_transpose(t, 0, 0, slot) : ts_transpose(t, 0, 1, slot));
}

static int m_squeeze(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  bool all = lua_isnoneornil(L, 2); /* read before the result slot is pushed */
  int64_t d = all ? 0 : lt_checkint(L, 2);
  VIEW_RESULT(L, ts_squeeze(t, all ? NULL : &d, slot));
}

static int m_unsqueeze(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  int64_t d = lt_checkint(L, 2);
  VIEW_RESULT(L, ts_unsqueeze(t, d, slot));
}

static int m_narrow(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  int64_t d = lt_checkint(L, 2), s = lt_checkint(L, 3), n = lt_checkint(L, 4);
  VIEW_RESULT(L, ts_narrow(t, d, s, n, slot));
}

static int m_select(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  int64_t d = lt_checkint(L, 2), i = lt_checkint(L, 3);
  VIEW_RESULT(L, ts_select(t, d, i, slot));
}

static int m_flatten(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  int64_t s = luaL_optinteger(L, 2, 0), e = luaL_optinteger(L, 3, -1);
  VIEW_RESULT(L, ts_flatten(t, s, e, slot));
}

static int m_unflatten(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  int64_t d = lt_checkint(L, 2);
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  if (lt_sizes(L, 3, &nd, sizes) == 0) return luaL_typeerror(L, 3, "sizes table");
  VIEW_RESULT(L, ts_unflatten(t, d, nd, sizes, slot));
}

/* as_strided(size, stride[, storage_offset]), the offset also as {storage_offset =} */
static int m_as_strided(lua_State *L) {
  static const char *const known[] = {"storage_offset", NULL};
  ts_tensor *t = lt_check(L, 1);
  int nd, ns, opts = lt_opts_index(L, lua_gettop(L));
  int64_t sizes[TS_MAX_DIMS], strides[TS_MAX_DIMS], offset = 0;
  if (opts < 4) opts = 0; /* size and stride are tables too */
  if (lua_type(L, 2) != LUA_TTABLE || !lt_sizes(L, 2, &nd, sizes))
    return luaL_typeerror(L, 2, "size (a list of integers or a torch.Size)");
  if (lua_type(L, 3) != LUA_TTABLE || !lt_sizes(L, 3, &ns, strides))
    return luaL_typeerror(L, 3, "stride (a list of integers or a torch.Size)");
  if (nd != ns) return lt_errorf(L, "as_strided: mismatch in length of strides and shape (%d sizes, %d strides)", nd, ns);
  lt_opts_check(L, opts, "as_strided", known);
  bool given = !lua_isnoneornil(L, 4) && opts != 4;
  if (given) offset = lt_checkint(L, 4);
  if (opts) {
    lua_getfield(L, opts, "storage_offset");
    bool in_opts = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (in_opts && given) return lt_errorf(L, "as_strided: 'storage_offset' given both as an argument and as an option");
    if (in_opts) offset = lt_opt_int(L, opts, "storage_offset", 0), given = true;
  }
  VIEW_RESULT(L, ts_as_strided(t, nd, sizes, strides, given ? &offset : NULL, slot));
}

static int l_broadcast_to(lua_State *L) { return sized(L, ts_broadcast_to, "broadcast_to"); }

static int l_broadcast_shapes(lua_State *L) {
  int nd = 0, top = lua_gettop(L);
  int64_t sizes[TS_MAX_DIMS];
  for (int i = 1; i <= top; i++) {
    int n;
    int64_t s[TS_MAX_DIMS], tmp[TS_MAX_DIMS];
    if (lt_sizes(L, i, &n, s) == 0) return luaL_typeerror(L, i, "shape");
    LT_TRY(L, ts_broadcast_shapes("broadcast_shapes", nd, sizes, n, s, &nd, tmp));
    for (int k = 0; k < nd; k++) sizes[k] = tmp[k];
  }
  lt_push_size(L, nd, sizes);
  return 1;
}

void lt_open_shape(lua_State *L) {
  static const luaL_Reg both[] = {
      {"view", m_view}, {"reshape", m_reshape}, {"expand", m_expand}, {"permute", m_permute},
      {"transpose", m_transpose}, {"swapaxes", m_transpose}, {"t", m_t}, {"squeeze", m_squeeze},
      {"unsqueeze", m_unsqueeze}, {"narrow", m_narrow}, {"select", m_select}, {"flatten", m_flatten},
      {"unflatten", m_unflatten}, {"view_as", m_view_as}, {"expand_as", m_expand_as},
      {"reshape_as", m_reshape_as}, {"broadcast_to", l_broadcast_to}, {"as_strided", m_as_strided}, {NULL, NULL}};
  static const luaL_Reg fns[] = {{"broadcast_shapes", l_broadcast_shapes}, {NULL, NULL}};
  lt_register(L, both, both);
  lt_register(L, fns, NULL);
}
