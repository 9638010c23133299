/* Autograd from Lua: t:backward(), t.grad, t.requires_grad, t.grad_fn,
 * detach, the grad mode (torch._set_grad_enabled, under lua/tensh/scopes.lua's
 * torch.no_grad / enable_grad / set_grad_enabled), torch.autograd.grad. */
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

/* ---- post-accumulate-grad hooks and end-of-backward callbacks ----
 * registry["tensh.grad_hooks"][leaf pointer] = {count =, next =, [id] = fn}:
 * the tensor is retained while it has hooks, so its address names it. */
static lua_State *hook_L; /* the thread running the current backward */
static int backward_depth;

static ts_status run_hooks(ts_tensor *leaf) {
  lua_State *L = hook_L;
  int top = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.grad_hooks");
  if (lua_rawgetp(L, -1, leaf) != LUA_TTABLE) return lua_settop(L, top), TS_OK;
  lua_getfield(L, -1, "next");
  lua_Integer n = lua_tointeger(L, -1);
  lua_pop(L, 1);
  for (lua_Integer id = 1; id < n; id++) {
    if (lua_rawgeti(L, -1, id) != LUA_TFUNCTION) {
      lua_pop(L, 1);
      continue;
    }
    lt_push_retained(L, leaf);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
      ts_status st = ts_fail(TS_ERR_ARG, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "error in a grad hook");
      lua_settop(L, top);
      return st;
    }
  }
  lua_settop(L, top);
  return TS_OK;
}

static int hook_remove(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "_leaf");
  ts_tensor *leaf = lua_touserdata(L, -1);
  lua_getfield(L, 1, "_id");
  lua_Integer id = lua_tointeger(L, -1);
  if (!leaf) return 0;
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.grad_hooks");
  if (lua_rawgetp(L, -1, leaf) == LUA_TTABLE && lua_rawgeti(L, -1, id) == LUA_TFUNCTION) {
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_rawseti(L, -2, id);
    lua_getfield(L, -1, "count");
    lua_Integer count = lua_tointeger(L, -1) - 1;
    lua_pop(L, 1);
    lua_pushinteger(L, count);
    lua_setfield(L, -2, "count");
    if (count == 0) { /* the last one: the tensor goes back to normal */
      lua_pushnil(L);
      lua_rawsetp(L, -3, leaf);
      ts_ag_set_hooked(leaf, false);
      ts_tensor_release(leaf);
    }
  }
  lua_pushnil(L);
  lua_setfield(L, 1, "_leaf");
  return 0;
}

/* t:register_post_accumulate_grad_hook(fn): fn(t) runs in every backward
 * once t.grad holds the whole gradient of that backward; returns a handle
 * whose remove() takes the hook off. */
static int m_register_post_accumulate_grad_hook(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (t->grad_fn || !t->requires_grad)
    lt_errorf(L, "register_post_accumulate_grad_hook: only a leaf tensor that requires grad can have one (this %s)",
              t->grad_fn ? "one has a grad_fn" : "one does not require grad");
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.grad_hooks");
  if (lua_rawgetp(L, -1, t) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 1, 2);
    lua_pushinteger(L, 1);
    lua_setfield(L, -2, "next");
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "count");
    LT_TRY(L, ts_ag_set_hooked(t, true));
    lua_pushvalue(L, -1);
    lua_rawsetp(L, -3, t);
    ts_tensor_retain(t);
  }
  lua_getfield(L, -1, "next");
  lua_Integer id = lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, 2);
  lua_rawseti(L, -2, id);
  lua_pushinteger(L, id + 1);
  lua_setfield(L, -2, "next");
  lua_getfield(L, -1, "count");
  lua_pushinteger(L, lua_tointeger(L, -1) + 1);
  lua_setfield(L, -3, "count");
  lua_pop(L, 1);
  ts_ag_post_accumulate_hook = run_hooks;
  lua_createtable(L, 0, 3); /* the handle */
  lua_pushlightuserdata(L, t);
  lua_setfield(L, -2, "_leaf");
  lua_pushinteger(L, id);
  lua_setfield(L, -2, "_id");
  lua_pushcfunction(L, hook_remove);
  lua_setfield(L, -2, "remove");
  return 1;
}

/* torch.autograd._queue_callback(fn): fn() runs once the current backward
 * has finished (PyTorch's engine queue_callback); DistributedDataParallel
 * waits for its last buckets there. */
static int l_queue_callback(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  if (backward_depth == 0) return lt_errorf(L, "autograd._queue_callback: only valid during a backward (from a hook)");
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.ag_callbacks");
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

/* ts_backward with hooks pointed at this thread; then the queued callbacks, in order */
static void backward_with_hooks(lua_State *L, ts_tensor *root, ts_tensor *g, bool retain) {
  lua_State *prev = hook_L;
  hook_L = L;
  backward_depth++;
  ts_status st = ts_backward(root, g, retain);
  backward_depth--;
  hook_L = prev;
  if (backward_depth > 0) { /* a backward inside a hook: callbacks wait for the outer one */
    LT_TRY(L, st);
    return;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.ag_callbacks");
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "tensh.ag_callbacks");
  LT_TRY(L, st);
  for (lua_Integer i = 1; lua_rawgeti(L, -1, i) == LUA_TFUNCTION; i++) lua_call(L, 0, 0);
  lua_pop(L, 2);
}

/* The engine runs the backward functions with grad mode off, so a gradient
 * is never recorded and cannot be differentiated again: create_graph = true
 * raises rather than give a gradient without a graph (false is accepted). */
static void check_create_graph(lua_State *L, int opts, const char *fn) {
  if (lt_opt_bool(L, opts, "create_graph", false))
    lt_errorf(L, "%s: create_graph = true is not supported yet in tensh: backward functions are not recorded, so a "
              "gradient cannot be differentiated again (no second derivatives); estimate them with finite "
              "differences of first derivatives", fn);
}

/* t:backward([gradient], [{retain_graph = false, create_graph = false}]).
 * The options follow a gradient or stand in its place; after a nil gradient
 * (PyTorch's backward(None, retain_graph=True)) they are still read, and
 * anything else there is an error rather than silently dropped. */
static int m_backward(lua_State *L) {
  ts_tensor *t = lt_check(L, 1), *g = lt_test(L, 2);
  int opts = 0;
  if (g || lua_isnil(L, 2)) {
    opts = lt_opts_index(L, 3);
    if (!opts && !lua_isnoneornil(L, 3)) return luaL_typeerror(L, 3, "options table");
  } else if (!lua_isnone(L, 2)) {
    opts = lt_opts_index(L, 2);
    if (!opts) return luaL_typeerror(L, 2, "tensor or options table");
  }
  static const char *const known[] = {"retain_graph", "create_graph", NULL};
  lt_opts_check(L, opts, "backward", known);
  check_create_graph(L, opts, "backward");
  bool retain = lt_opt_bool(L, opts, "retain_graph", false);
  backward_with_hooks(L, t, g, retain);
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

/* ---- grad mode ------------------------------------------------------------- */

/* A metamethod called by hand gets whatever it is given: arg 1 must be a
 * table of class `name` (grad_fns are plain tables). */
static void check_class(lua_State *L, int idx, const char *name) {
  bool ok = lua_type(L, idx) == LUA_TTABLE && lua_getmetatable(L, idx);
  if (ok) {
    luaL_getmetatable(L, name);
    ok = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  if (!ok) luaL_typeerror(L, idx, name);
}

/* torch._set_grad_enabled(b): the mode itself; lua/tensh/scopes.lua builds
 * torch.no_grad, enable_grad and set_grad_enabled (their scope objects and
 * function forms) on it */
static int l_set_grad_mode(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  ts_set_grad_enabled(lua_toboolean(L, 1));
  return 0;
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

/* torch.autograd.grad(outputs, inputs, {grad_outputs=, retain_graph=, allow_unused=, create_graph = false})
 * -> list of grads */
static int l_autograd_grad(lua_State *L) {
  ts_tensor *outs[AG_MAX_LIST], *ins[AG_MAX_LIST], *gouts[AG_MAX_LIST];
  int no = tensor_list(L, 1, outs, AG_MAX_LIST, "outputs");
  int ni = tensor_list(L, 2, ins, AG_MAX_LIST, "inputs");
  static const char *const known[] = {"grad_outputs", "retain_graph", "allow_unused", "create_graph", NULL};
  int opts = lt_opts_index(L, 3);
  lt_opts_check(L, opts, "autograd.grad", known);
  check_create_graph(L, opts, "autograd.grad");
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

/* torch.autograd.backward(tensors [, grad_tensors] [, {grad_tensors=, retain_graph=, create_graph = false}]).
 * A table of options in place of grad_tensors reads as options (an empty
 * one is no grad_tensors either way), not as an empty list of gradients. */
static int l_autograd_backward(lua_State *L) {
  static const char *const known[] = {"grad_tensors", "retain_graph", "create_graph", NULL};
  ts_tensor *outs[AG_MAX_LIST], *gouts[AG_MAX_LIST];
  int no = tensor_list(L, 1, outs, AG_MAX_LIST, "tensors");
  int opts = lt_opts_index(L, 2), grads = opts ? 0 : 2;
  if (!opts) opts = lt_opts_index(L, 3);
  lt_opts_check(L, opts, "autograd.backward", known);
  check_create_graph(L, opts, "autograd.backward");
  bool retain = lt_opt_bool(L, opts, "retain_graph", false);
  if (opts && lua_getfield(L, opts, "grad_tensors") != LUA_TNIL) {
    if (grads && !lua_isnoneornil(L, grads))
      lt_errorf(L, "autograd.backward: 'grad_tensors' given both as an argument and as an option");
    grads = lua_gettop(L); /* the options table keeps it alive */
  }
  int ng = !grads || lua_isnoneornil(L, grads) ? 0 : tensor_list(L, grads, gouts, AG_MAX_LIST, "grad_tensors");
  if (ng && ng != no) lt_errorf(L, "autograd.backward: %d grad_tensors for %d tensors", ng, no);
  for (int i = 0; i < no; i++) backward_with_hooks(L, outs[i], ng ? gouts[i] : NULL, retain || i < no - 1);
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
                                     {"requires_grad_", m_requires_grad_},
                                     {"register_post_accumulate_grad_hook", m_register_post_accumulate_grad_hook},
                                     {NULL, NULL}};
  static const luaL_Reg fns[] = {{"_set_grad_enabled", l_set_grad_mode}, {"is_grad_enabled", l_is_grad_enabled},
                                 {NULL, NULL}};
  lt_register(L, fns, methods);
  luaL_newmetatable(L, "tensh.GradFn");
  lua_pushcfunction(L, gradfn_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "tensh.grad_hooks");
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "tensh.ag_callbacks");
  static const luaL_Reg ag[] = {{"grad", l_autograd_grad}, {"backward", l_autograd_backward},
                                {"_queue_callback", l_queue_callback}, {NULL, NULL}};
  luaL_newlib(L, ag);
  lua_setfield(L, -3, "autograd"); /* torch.autograd; torch is below methods */
}
