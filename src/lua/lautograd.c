/* Autograd from Lua: t:backward(), t.grad, t.requires_grad, t.grad_fn,
 * detach, torch.no_grad / enable_grad / set_grad_enabled (scopes closed by
 * `<close>` or given a function), torch.autograd.grad. */
#include <string.h>

#include "../autograd.h"
#include "lt.h"

void lt_push_grad_fn(lua_State *L, ts_tensor *t) {
  if (!t->grad_fn) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 1);
  lua_pushstring(L, t->grad_fn->name);
  lua_setfield(L, -2, "name");
  luaL_setmetatable(L, "tensh.GradFn");
}

static void set_requires_grad(lua_State *L, ts_tensor *t, bool on) {
  if (on && !ts_dtype_is_float(t->dtype))
    lt_errorf(L, "only tensors of floating point dtype can require gradients, got %s", ts_dtype_name(t->dtype));
  if (!on && t->grad_fn)
    luaL_error(L, "you can only change requires_grad of leaf tensors; use detach() to get a tensor without history");
  t->requires_grad = on;
}

bool lt_set_autograd_field(lua_State *L, ts_tensor *t, const char *key) {
  if (strcmp(key, "requires_grad") == 0) {
    luaL_checktype(L, 3, LUA_TBOOLEAN);
    set_requires_grad(L, t, lua_toboolean(L, 3));
    return true;
  }
  if (strcmp(key, "grad") != 0) return false;
  if (lua_isnil(L, 3)) {
    ts_tensor_release(t->grad);
    t->grad = NULL;
    return true;
  }
  ts_tensor *g = lt_check(L, 3);
  if (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim) != 0) {
    char a[256], b[256];
    ts_shape_str(g->ndim, g->sizes, a, sizeof a);
    ts_shape_str(t->ndim, t->sizes, b, sizeof b);
    lt_errorf(L, "assigned grad has shape %s, but the tensor has shape %s", a, b);
  }
  if (g->dtype != t->dtype)
    lt_errorf(L, "assigned grad has dtype %s, but the tensor has dtype %s", ts_dtype_name(g->dtype),
              ts_dtype_name(t->dtype));
  if (!ts_device_eq(g->device, t->device)) luaL_error(L, "assigned grad is on another device than the tensor");
  ts_tensor_retain(g);
  ts_tensor_release(t->grad);
  t->grad = g;
  return true;
}

/* t:backward([gradient], [{retain_graph = false}]) */
static int m_backward(lua_State *L) {
  ts_tensor *t = lt_check(L, 1), *g = NULL;
  int opts = 0;
  if (lt_test(L, 2)) {
    g = lt_test(L, 2);
    opts = lt_opts_index(L, 3);
  } else if (!lua_isnoneornil(L, 2)) {
    opts = lt_opts_index(L, 2);
    if (!opts) return luaL_typeerror(L, 2, "tensor or options table");
  }
  bool retain = lt_opt_bool(L, opts, "retain_graph", false);
  LT_TRY(L, ts_backward(t, g, retain));
  lt_gc_debt(L);
  return 0;
}

static int m_detach(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_tensor_view_of(t, t->ndim, t->sizes, t->strides, t->offset, slot));
  return 1;
}

static int m_detach_(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (t->grad_fn) {
    ts_node_release(t->grad_fn);
    t->grad_fn = NULL;
  }
  t->requires_grad = false;
  lua_settop(L, 1);
  return 1;
}

static int m_requires_grad_(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  set_requires_grad(L, t, lua_isnone(L, 2) ? true : lua_toboolean(L, 2));
  lua_settop(L, 1);
  return 1;
}

/* ---- grad mode scopes ---------------------------------------------------- */

/* A metamethod called by hand gets whatever it is given: arg 1 must be a
 * table of class `name` (grad scopes and grad_fns are plain tables). */
static void check_class(lua_State *L, int idx, const char *name) {
  bool ok = lua_type(L, idx) == LUA_TTABLE && lua_getmetatable(L, idx);
  if (ok) {
    luaL_getmetatable(L, name);
    ok = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  if (!ok) luaL_typeerror(L, idx, name);
}

static int restore_mode(lua_State *L) {
  check_class(L, 1, "tensh.GradMode");
  if (lua_getfield(L, 1, "_prev") == LUA_TBOOLEAN) ts_set_grad_enabled(lua_toboolean(L, -1));
  lua_pushnil(L);
  lua_setfield(L, 1, "_prev"); /* closing twice restores once */
  return 0;
}

/* Sets grad mode to `on`; with a function, runs it and restores the mode even
 * if it fails; otherwise returns a scope to close with `<close>`. */
static int grad_scope(lua_State *L, bool on, int fn_index) {
  bool prev = ts_grad_enabled();
  if (lua_isfunction(L, fn_index)) {
    int nargs = lua_gettop(L) - fn_index;
    ts_set_grad_enabled(on);
    int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
    ts_set_grad_enabled(prev);
    if (st != LUA_OK) return lua_error(L);
    return lua_gettop(L) - fn_index + 1;
  }
  ts_set_grad_enabled(on);
  lua_createtable(L, 0, 1);
  lua_pushboolean(L, prev);
  lua_setfield(L, -2, "_prev");
  luaL_setmetatable(L, "tensh.GradMode");
  return 1;
}

static int l_no_grad(lua_State *L) { return grad_scope(L, false, 1); }
static int l_enable_grad(lua_State *L) { return grad_scope(L, true, 1); }
static int l_set_grad_enabled(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  return grad_scope(L, lua_toboolean(L, 1), 2);
}
static int l_is_grad_enabled(lua_State *L) { return lua_pushboolean(L, ts_grad_enabled()), 1; }

/* ---- torch.autograd ------------------------------------------------------ */

/* A tensor or a list of tensors at idx, into v (max n); returns the count. */
static int tensor_list(lua_State *L, int idx, ts_tensor **v, int n, const char *what) {
  if (lt_test(L, idx)) return v[0] = lt_test(L, idx), 1;
  if (lua_type(L, idx) != LUA_TTABLE) return luaL_typeerror(L, idx, what);
  int len = (int)lua_rawlen(L, idx);
  if (len > n) lt_errorf(L, "autograd: at most %d %s", n, what);
  for (int i = 0; i < len; i++) {
    lua_rawgeti(L, idx, i + 1);
    v[i] = lt_test(L, -1);
    if (!v[i]) lt_errorf(L, "autograd: %s[%d] is not a tensor", what, i + 1);
    lua_pop(L, 1); /* the list keeps it alive */
  }
  return len;
}

#define AG_MAX_LIST 256

/* torch.autograd.grad(outputs, inputs, {grad_outputs=, retain_graph=, allow_unused=}) -> list of grads */
static int l_autograd_grad(lua_State *L) {
  ts_tensor *outs[AG_MAX_LIST], *ins[AG_MAX_LIST], *gouts[AG_MAX_LIST];
  int no = tensor_list(L, 1, outs, AG_MAX_LIST, "outputs");
  int ni = tensor_list(L, 2, ins, AG_MAX_LIST, "inputs");
  int opts = lt_opts_index(L, 3);
  bool have_gouts = false;
  if (opts && lua_getfield(L, opts, "grad_outputs") != LUA_TNIL) {
    int ng = tensor_list(L, lua_gettop(L), gouts, AG_MAX_LIST, "grad_outputs");
    if (ng != no) lt_errorf(L, "autograd.grad: %d grad_outputs for %d outputs", ng, no);
    have_gouts = true;
  }
  if (opts) lua_pop(L, 1);
  bool retain = lt_opt_bool(L, opts, "retain_graph", false);
  bool allow_unused = lt_opt_bool(L, opts, "allow_unused", false);
  /* result slots first, so an error leaks nothing */
  lua_createtable(L, ni, 0);
  int list = lua_gettop(L);
  ts_tensor **slots[AG_MAX_LIST];
  for (int i = 0; i < ni; i++) {
    slots[i] = lt_newslot(L);
    lua_rawseti(L, list, i + 1);
  }
  ts_tensor *grads[AG_MAX_LIST];
  LT_TRY(L, ts_autograd_grad(no, outs, have_gouts ? gouts : NULL, ni, ins, retain, allow_unused, grads));
  for (int i = 0; i < ni; i++) {
    *slots[i] = grads[i];
    if (!grads[i]) { /* unused input: nil in the list */
      lua_pushnil(L);
      lua_rawseti(L, list, i + 1);
    }
  }
  lt_gc_debt(L);
  return 1;
}

/* torch.autograd.backward(tensors, grad_tensors) */
static int l_autograd_backward(lua_State *L) {
  ts_tensor *outs[AG_MAX_LIST], *gouts[AG_MAX_LIST];
  int no = tensor_list(L, 1, outs, AG_MAX_LIST, "tensors");
  int ng = lua_isnoneornil(L, 2) ? 0 : tensor_list(L, 2, gouts, AG_MAX_LIST, "grad_tensors");
  if (ng && ng != no) lt_errorf(L, "autograd.backward: %d grad_tensors for %d tensors", ng, no);
  for (int i = 0; i < no; i++) LT_TRY(L, ts_backward(outs[i], ng ? gouts[i] : NULL, i < no - 1));
  return 0;
}

static int gradfn_tostring(lua_State *L) {
  check_class(L, 1, "tensh.GradFn");
  lua_getfield(L, 1, "name");
  lua_pushfstring(L, "<%s>", lua_tostring(L, -1));
  return 1;
}

void lt_open_autograd(lua_State *L) {
  static const luaL_Reg methods[] = {{"backward", m_backward}, {"detach", m_detach}, {"detach_", m_detach_},
                                     {"requires_grad_", m_requires_grad_}, {NULL, NULL}};
  static const luaL_Reg fns[] = {{"no_grad", l_no_grad}, {"enable_grad", l_enable_grad},
                                 {"set_grad_enabled", l_set_grad_enabled}, {"is_grad_enabled", l_is_grad_enabled},
                                 {NULL, NULL}};
  lt_register(L, fns, methods);
  luaL_newmetatable(L, "tensh.GradMode");
  lua_pushcfunction(L, restore_mode);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
  luaL_newmetatable(L, "tensh.GradFn");
  lua_pushcfunction(L, gradfn_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  static const luaL_Reg ag[] = {{"grad", l_autograd_grad}, {"backward", l_autograd_backward}, {NULL, NULL}};
  luaL_newlib(L, ag);
  lua_setfield(L, -3, "autograd"); /* torch.autograd; torch is below methods */
}
