/* Autograd from Lua: t:backward(), t.grad, t.requires_grad, t.grad_fn,
 * detach, the grad mode (torch._set_grad_enabled, under lua/tensh/scopes.lua's
 * torch.no_grad / enable_grad / set_grad_enabled), torch.autograd.grad. */
#include <string.h>

#include "autograd/autograd.h"
#include "lt.h"

/* A grad_fn is a table {name = "MulBackward0"} of class tensh.GradFn; the
 * node it stands for is retained by a box that the registry's weak-keyed
 * "tensh.grad_fn_nodes" maps the table to, so the node lives as long as the
 * table (as PyTorch's grad_fn keeps its graph alive) and next_functions can
 * walk on from it. A leaf's AccumulateGrad has no node: its table holds the
 * leaf as `variable`. */
typedef struct node_box { ts_node *node; } node_box;

static int node_box_gc(lua_State *L) {
  node_box *b = luaL_checkudata(L, 1, "tensh.GradFnNode");
  if (b->node) ts_node_release(b->node);
  b->node = NULL;
  return 0;
}

static void push_node(lua_State *L, ts_node *n) {
  lua_createtable(L, 0, 1);
  lua_pushstring(L, n->name);
  lua_setfield(L, -2, "name");
  luaL_setmetatable(L, "tensh.GradFn");
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.grad_fn_nodes");
  lua_pushvalue(L, -2);
  node_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->node = n;
  ts_node_retain(n);
  luaL_setmetatable(L, "tensh.GradFnNode");
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

void lt_push_grad_fn(lua_State *L, ts_tensor *t) {
  if (t->base) ts_ag_refresh(t);
  if (!t->grad_fn) {
    lua_pushnil(L);
    return;
  }
  push_node(L, t->grad_fn);
}

/* the node behind the grad_fn table at idx, or NULL (an AccumulateGrad) */
static ts_node *node_of(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.grad_fn_nodes");
  lua_pushvalue(L, idx);
  lua_rawget(L, -2);
  node_box *b = lua_touserdata(L, -1);
  ts_node *n = b ? b->node : NULL;
  lua_pop(L, 2);
  return n;
}

static void set_requires_grad(lua_State *L, ts_tensor *t, bool on) {
  if (on && !ts_dtype_is_float(t->dtype))
    lt_errorf(L, "only tensors of floating point dtype can require gradients, got %s", ts_dtype_name(t->dtype));
  if (!on && t->grad_fn)
    luaL_error(L, "you can only change requires_grad of leaf tensors; use detach() to get a tensor without history");
  if (on && t->base && !t->grad_fn) { /* a view made a leaf of its own: no longer changes its base's history */
    ts_tensor_release(t->base);
    t->base = NULL;
  }
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

/* A tensor's list of hooks: {next =, count =, [id] = fn}, ids in order of registration. */
static void hook_list_new(lua_State *L) {
  lua_createtable(L, 1, 3);
  lua_pushinteger(L, 1);
  lua_setfield(L, -2, "next");
  lua_pushinteger(L, 0);
  lua_setfield(L, -2, "count");
}

/* Appends the function at fn to the list on top of the stack; returns its id. */
static lua_Integer hook_list_add(lua_State *L, int fn) {
  lua_getfield(L, -1, "next");
  lua_Integer id = lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, fn);
  lua_rawseti(L, -2, id);
  lua_pushinteger(L, id + 1);
  lua_setfield(L, -2, "next");
  lua_getfield(L, -1, "count");
  lua_pushinteger(L, lua_tointeger(L, -1) + 1);
  lua_setfield(L, -3, "count");
  lua_pop(L, 1);
  return id;
}

/* Takes hook id off the list on top of the stack; returns how many remain
 * (-1: it was not there, removed already). */
static lua_Integer hook_list_remove(lua_State *L, lua_Integer id) {
  if (lua_rawgeti(L, -1, id) != LUA_TFUNCTION) return lua_pop(L, 1), -1;
  lua_pop(L, 1);
  lua_pushnil(L);
  lua_rawseti(L, -2, id);
  lua_getfield(L, -1, "count");
  lua_Integer count = lua_tointeger(L, -1) - 1;
  lua_pop(L, 1);
  lua_pushinteger(L, count);
  lua_setfield(L, -2, "count");
  return count;
}

/* The handle register_*hook returns: {[key_field] = key, _id = id, remove = remove} */
static void push_handle(lua_State *L, const char *key_field, lua_Integer id, lua_CFunction remove) {
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, key_field);
  lua_pushinteger(L, id);
  lua_setfield(L, -2, "_id");
  lua_pushcfunction(L, remove);
  lua_setfield(L, -2, "remove");
}

static int hook_remove(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "_leaf");
  ts_tensor *leaf = lua_touserdata(L, -1);
  lua_getfield(L, 1, "_id");
  lua_Integer id = lua_tointeger(L, -1);
  if (!leaf) return 0;
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.grad_hooks");
  if (lua_rawgetp(L, -1, leaf) == LUA_TTABLE && hook_list_remove(L, id) == 0) {
    /* the last one: the tensor goes back to normal */
    lua_pushnil(L);
    lua_rawsetp(L, -3, leaf);
    ts_ag_set_hooked(leaf, false);
    ts_tensor_release(leaf);
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
    hook_list_new(L);
    LT_TRY(L, ts_ag_set_hooked(t, true));
    lua_pushvalue(L, -1);
    lua_rawsetp(L, -3, t);
    ts_tensor_retain(t);
  }
  lua_Integer id = hook_list_add(L, 2);
  ts_ag_post_accumulate_hook = run_hooks;
  lua_pushlightuserdata(L, t);
  push_handle(L, "_leaf", id, hook_remove);
  return 1;
}

/* ---- tensor hooks: t:register_hook(fn) ----
 * registry["tensh.tensor_hooks"][key] = {next =, count =, leaf = (a leaf's
 * address, retained while it has hooks), [id] = fn}; the key is attached
 * to the tensor's node or leaf in the engine (autograd.h). Keys are never
 * reused: a freed node's key comes back through ts_ag_take_dead_hook_keys
 * and its functions are dropped. */
static uint64_t next_hook_key = 1;

static void forget_dead_hook_keys(lua_State *L) {
  uint64_t keys[64];
  int n;
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.tensor_hooks");
  while ((n = ts_ag_take_dead_hook_keys(keys, 64)) > 0)
    for (int i = 0; i < n; i++) {
      lua_pushnil(L);
      lua_rawseti(L, -2, (lua_Integer)keys[i]);
    }
  lua_pop(L, 1);
}

/* ts_ag_tensor_hook: the functions of key, in order, each given the
 * gradient; a tensor returned (of the same shape, dtype and device) replaces it */
static ts_status run_tensor_hooks(uint64_t key, ts_tensor **grad) {
  lua_State *L = hook_L;
  if (!L) return TS_OK;
  int top = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.tensor_hooks");
  if (lua_rawgeti(L, -1, (lua_Integer)key) != LUA_TTABLE) return lua_settop(L, top), TS_OK;
  lua_getfield(L, -1, "next");
  lua_Integer n = lua_tointeger(L, -1);
  lua_pop(L, 1);
  ts_status st = TS_OK;
  for (lua_Integer id = 1; id < n && !st; id++) {
    if (lua_rawgeti(L, -1, id) != LUA_TFUNCTION) {
      lua_pop(L, 1);
      continue;
    }
    lt_push_retained(L, *grad);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
      st = ts_fail(TS_ERR_ARG, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "error in a tensor hook");
    } else if (!lua_isnil(L, -1)) {
      ts_tensor *r = lt_test(L, -1), *g = *grad;
      if (!r) {
        st = ts_fail(TS_ERR_TYPE, "register_hook: a hook must return nil or a tensor, got %s", luaL_typename(L, -1));
      } else if (r->ndim != g->ndim || memcmp(r->sizes, g->sizes, sizeof(int64_t) * (size_t)g->ndim) != 0) {
        char a[256], b[256];
        ts_shape_str(r->ndim, r->sizes, a, sizeof a);
        ts_shape_str(g->ndim, g->sizes, b, sizeof b);
        st = ts_fail(TS_ERR_SHAPE, "register_hook: the hook has changed the size of value: it returned shape %s "
                     "for a gradient of shape %s", a, b);
      } else if (r->dtype != g->dtype || !ts_device_eq(r->device, g->device)) {
        st = ts_fail(TS_ERR_DTYPE, "register_hook: the hook has changed the type of value: it returned a %s tensor "
                     "for a %s gradient (or another device)", ts_dtype_name(r->dtype), ts_dtype_name(g->dtype));
      } else {
        ts_tensor_retain(r);
        ts_tensor_release(g);
        *grad = r;
      }
    }
    lua_pop(L, 1);
  }
  lua_settop(L, top);
  return st;
}

static int tensor_hook_remove(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "_key");
  lua_Integer key = lua_tointeger(L, -1);
  lua_getfield(L, 1, "_id");
  lua_Integer id = lua_tointeger(L, -1);
  if (!key) return 0;
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.tensor_hooks");
  int hooks = lua_gettop(L);
  if (lua_rawgeti(L, hooks, key) == LUA_TTABLE && hook_list_remove(L, id) == 0) {
    /* the last one: a leaf goes back to normal */
    if (lua_getfield(L, -1, "leaf") == LUA_TLIGHTUSERDATA) {
      ts_tensor *leaf = lua_touserdata(L, -1);
      ts_ag_set_hook_key(leaf, 0);
      ts_tensor_release(leaf);
    }
    lua_pushnil(L);
    lua_rawseti(L, hooks, key);
  }
  lua_pushnil(L);
  lua_setfield(L, 1, "_key");
  return 0;
}

/* t:register_hook(fn): fn(grad) runs when t's gradient is computed (the sum
 * of every use), before it flows on; a tensor it returns replaces the
 * gradient. Returns a handle whose remove() takes the hook off. */
static int m_register_hook(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  uint64_t key = ts_ag_hook_key(t); /* also brings a view's history up to date */
  if (!t->requires_grad) lt_errorf(L, "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  forget_dead_hook_keys(L);
  lua_getfield(L, LUA_REGISTRYINDEX, "tensh.tensor_hooks");
  if (!key) {
    key = next_hook_key++;
    LT_TRY(L, ts_ag_set_hook_key(t, key));
  }
  if (lua_rawgeti(L, -1, (lua_Integer)key) != LUA_TTABLE) {
    lua_pop(L, 1);
    hook_list_new(L);
    if (!t->grad_fn) { /* a leaf: kept alive while it has hooks, as its address names it */
      lua_pushlightuserdata(L, t);
      lua_setfield(L, -2, "leaf");
      ts_tensor_retain(t);
    }
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, (lua_Integer)key);
  }
  lua_Integer id = hook_list_add(L, 2);
  ts_ag_tensor_hook = run_tensor_hooks;
  lua_pushinteger(L, (lua_Integer)key);
  push_handle(L, "_key", id, tensor_hook_remove);
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
  forget_dead_hook_keys(L);
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
  ts_tensor_release(t->base); /* out of the graph for good: its base's later history is not its own */
  t->base = NULL;
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
  lua_State *prev = hook_L; /* the hooks of non-leaf tensors run here too */
  hook_L = L;
  ts_status st = ts_autograd_grad(no, outs, have_gouts ? gouts : NULL, ni, ins, retain, allow_unused, grads);
  hook_L = prev;
  forget_dead_hook_keys(L);
  LT_TRY(L, st);
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

/* grad_fn.next_functions, as PyTorch's: one {fn, 0} pair per input of the op,
 * fn the input's grad_fn, an AccumulateGrad for a leaf that requires grad
 * (its `variable` the leaf), or nil for an input that needs no gradient; the
 * 0 is the input's output number, always 0 here (one output per node). */
static int gradfn_index(lua_State *L) {
  check_class(L, 1, "tensh.GradFn");
  const char *k = lua_tostring(L, 2);
  if (!k || strcmp(k, "next_functions") != 0) return 0;
  ts_node *n = node_of(L, 1);
  lua_createtable(L, n ? n->nin : 0, 0);
  for (int i = 0; n && i < n->nin; i++) {
    const ts_edge *e = &n->next[i];
    lua_createtable(L, 2, 0);
    if (e->fn) {
      push_node(L, e->fn);
    } else if (e->leaf) {
      lua_createtable(L, 0, 2);
      lua_pushliteral(L, "AccumulateGrad");
      lua_setfield(L, -2, "name");
      lt_push_retained(L, e->leaf);
      lua_setfield(L, -2, "variable");
      luaL_setmetatable(L, "tensh.GradFn");
    } else {
      lua_pushnil(L);
    }
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, 0);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* two grad_fns of one node are equal (PyTorch: y.grad_fn is y.grad_fn) */
static int gradfn_eq(lua_State *L) {
  ts_node *a = node_of(L, 1), *b = node_of(L, 2);
  lua_pushboolean(L, a && a == b);
  return 1;
}

void lt_open_autograd(lua_State *L) {
  static const luaL_Reg methods[] = {{"backward", m_backward}, {"detach", m_detach}, {"detach_", m_detach_},
                                     {"requires_grad_", m_requires_grad_},
                                     {"register_post_accumulate_grad_hook", m_register_post_accumulate_grad_hook},
                                     {"register_hook", m_register_hook},
                                     {NULL, NULL}};
  static const luaL_Reg fns[] = {{"_set_grad_enabled", l_set_grad_mode}, {"is_grad_enabled", l_is_grad_enabled},
                                 {NULL, NULL}};
  lt_register(L, fns, methods);
  static const luaL_Reg gradfn_meta[] = {{"__tostring", gradfn_tostring}, {"__index", gradfn_index},
                                         {"__eq", gradfn_eq}, {NULL, NULL}};
  lt_new_class(L, "tensh.GradFn", NULL, gradfn_meta);
  static const luaL_Reg node_meta[] = {{"__gc", node_box_gc}, {NULL, NULL}};
  lt_new_class(L, "tensh.GradFnNode", NULL, node_meta);
  lua_newtable(L); /* grad_fn table -> its node's box, weak keys */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "tensh.grad_fn_nodes");
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "tensh.grad_hooks");
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "tensh.tensor_hooks");
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "tensh.ag_callbacks");
  static const luaL_Reg ag[] = {{"grad", l_autograd_grad}, {"backward", l_autograd_backward},
                                {"_queue_callback", l_queue_callback}, {NULL, NULL}};
  luaL_newlib(L, ag);
  lua_setfield(L, -3, "autograd"); /* torch.autograd; torch is below methods */
}
