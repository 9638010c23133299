/* The tensor userdata: its box and finaliser, the collector's pacing by
 * tensor memory, one metatable with methods in __index, properties read with
 * `.`, indexing with [] (counting from 0). The argument helpers every binding
 * shares are largs.c's. */
#include "lt.h"
#include "autograd/autograd.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tensors on the stack ------------------------------------------------ */

/* A userdata is a tensor box when it has a box's size and a box's tag: two
 * API calls (lua_touserdata, lua_rawlen) where comparing its metatable with
 * the tensor metatable took five, and this check runs for every operand of
 * every op and in every finaliser (~10 % of a 1-element op). The tag is odd,
 * so no pointer can carry it (the standard libraries' only other userdata of
 * this size is io's {FILE *, closef}), and it moves with the binary's load
 * address. Only C code writes into userdata, so Lua cannot forge one; a box
 * given another metatable by debug.setmetatable stays a tensor. */
static const char box_tag_anchor;
#define BOX_TAG (((uintptr_t)&box_tag_anchor ^ (uintptr_t)0x5a5a5a5a5a5a5a5au) | 1)

static inline lt_box *test_box(lua_State *L, int idx) {
  lt_box *b = lua_touserdata(L, idx);
  if (!b || lua_rawlen(L, idx) != sizeof *b || b->tag != BOX_TAG) return NULL;
  return b;
}

ts_tensor *lt_test(lua_State *L, int idx) {
  lt_box *b = test_box(L, idx);
  return b ? b->t : NULL;
}

/* a value's type name for messages: its metatable's __name, else Lua's (a
 * userdata given the tensor metatable by debug.setmetatable is no Tensor) */
static const char *got_name(lua_State *L, int idx) {
  if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING)
    return test_box(L, idx) || strcmp(lua_tostring(L, -1), "Tensor") != 0 ? lua_tostring(L, -1) : "userdata";
  return lua_isnone(L, idx) ? "no value" : luaL_typename(L, idx);
}

void lt_check_operator(lua_State *L, const char *mm) {
  if (test_box(L, 1) || test_box(L, 2)) return;
  const char *a = got_name(L, 1), *b = got_name(L, 2);
  lt_errorf(L, "bad argument #1 to '%s' (a tensor expected on one side, got %s and %s)", mm, a, b);
}

/* The name of the running C function when it is a tensor method (the
 * methods table, the tensor __index's upvalue, holds it under that name), or
 * NULL: a method whose first argument is not a tensor was most likely read
 * with '.' for ':' (x.view(2, 6), x.to("cuda") pass 2 or "cuda" as self). */
static const char *running_method(lua_State *L) {
  lua_Debug ar;
  if (!lua_getstack(L, 0, &ar) || !lua_getinfo(L, "nf", &ar) || !ar.name) return NULL;
  int fn = lua_gettop(L);
  bool found = false;
  luaL_getmetatable(L, LT_TENSOR);
  if (lua_getfield(L, -1, "__index") == LUA_TFUNCTION && lua_getupvalue(L, -1, 1) && lua_type(L, -1) == LUA_TTABLE) {
    lua_getfield(L, -1, ar.name);
    found = lua_rawequal(L, -1, fn);
    lua_pop(L, 1);
  }
  lua_settop(L, fn - 1);
  return found ? ar.name : NULL;
}

void *lt_check_self(lua_State *L, const char *tname, const char *what, const char *var) {
  void *p = luaL_testudata(L, 1, tname);
  if (p) return p;
  lua_Debug ar;
  const char *name = lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name ? ar.name : "?";
  const char *got = lua_isnone(L, 1) ? "no value" : luaL_typename(L, 1);
  if (luaL_getmetafield(L, 1, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
  return lt_errorf(L, "bad argument #1 to '%s' (%s expected, got %s; a method is called with ':', as %s:%s())", name, what,
                   got, var, name), NULL;
}

ts_tensor *lt_check(lua_State *L, int idx) {
  lt_box *b = test_box(L, idx);
  const char *method = !b && idx == 1 ? running_method(L) : NULL;
  if (method) {
    /* t.item() for t:item(): the method was read with '.' and got no tensor, or another argument as one */
    const char *got = lua_isnone(L, 1) ? "no value" : luaL_typename(L, 1);
    if (luaL_getmetafield(L, 1, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
    lt_errorf(L, "bad argument #1 to '%s' (tensor expected, got %s; a method is called with ':', as t:%s())", method,
              got, method);
  }
  if (!b) lt_typeerror(L, idx, "tensor");
  if (!b->t) lt_argerror(L, idx, "tensor was already freed");
  return b->t;
}

/* the tensor in box b at idx, which must not be freed yet */
static ts_tensor *box_tensor(lua_State *L, int idx, lt_box *b) {
  if (!b->t) lt_argerror(L, idx, "tensor was already freed (closed by <close> or __close)");
  return b->t;
}

/* A tensor is tried first, the common operand (two API calls; lua_type
 * first made it three), then a number or a boolean. */
ts_tensor *lt_operand(lua_State *L, int idx, ts_scalar_box *box) {
  lt_box *b = test_box(L, idx);
  if (b) return box_tensor(L, idx, b);
  switch (lua_type(L, idx)) {
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) return ts_scalar_wrap_int(box, lua_tointeger(L, idx));
    return ts_scalar_wrap_double(box, lua_tonumber(L, idx));
  case LUA_TBOOLEAN: return ts_scalar_wrap_bool(box, lua_toboolean(L, idx));
  default: lt_typeerror(L, idx, "tensor or number"); return NULL;
  }
}

/* An arithmetic metamethod's two operands (a + b: one of them a tensor),
 * each looked at once: lt_check_operator then lt_operand on both looked at
 * each tensor twice, ~5 % of a 1-element op. */
void lt_operator_operands(lua_State *L, const char *mm, ts_scalar_box box[2], ts_tensor *ops[2]) {
  lt_box *a = test_box(L, 1), *b = test_box(L, 2);
  if (!a && !b) lt_check_operator(L, mm); /* raises */
  ops[0] = a ? box_tensor(L, 1, a) : lt_operand(L, 1, &box[0]);
  ops[1] = b ? box_tensor(L, 2, b) : lt_operand(L, 2, &box[1]);
}

static int tensor_gc(lua_State *L) {
  lt_box *b = test_box(L, 1); /* Lua calls it with a tensor; a user may call it with anything */
  if (!b) return luaL_typeerror(L, 1, "tensor");
  if (b->t) {
    ts_tensor_release(b->t);
    b->t = NULL; /* a finalizer may run twice (__close then __gc) */
  }
  return 0;
}

/* Lua sees a few bytes of userdata per tensor, not the buffers behind it, so
 * tensor memory paces the collector here. What Lua can free is what tensors
 * it dropped still hold: the growth of live tensor bytes since the last
 * collection this ran (buffers freed without the collector, such as
 * backward's temporaries, never count). Once that growth passes `limit`, a
 * basic step runs: in generational mode (the shell's, as lua5.4's) a young
 * collection, which visits the objects made since the last one, not the
 * whole heap, and frees a loop's dead temporaries (a 1024 x 1024 softmax's
 * 4 MB output a call: full collections there took 57 % of the loop's time).
 * When it frees less than half the growth, the dead tensors are older (or
 * the mode incremental, where one step seldom ends a cycle): a full
 * collection. Its cost is the Lua heap's size (~0.4 ms per MiB), so
 * limit = max(4 MiB, 4 x the Lua heap, a quarter of the bytes live after the
 * last one) keeps it to one heap traversal per several heaps' worth of
 * garbage, and the garbage under a quarter of the live memory (plus 4 MiB).
 * This replaced a step of the incremental collector per 64 KiB allocated,
 * which traversed about as many bytes of Lua heap as tensor bytes were
 * allocated, freed at once or not: several full cycles per training step,
 * 20 % of the Fashion-MNIST MLP's epoch. Lua's own pacing (its allocations)
 * runs as before, in either mode. */
static size_t gc_pending, gc_live_after, gc_limit = (size_t)4 << 20;

/* Lua counts a tensor's userdata (~40 bytes), not the C behind it: the tensor
 * struct, a storage header and a small buffer's block, ~320 bytes more. Left
 * to Lua's own pacing, a loop of 1-element ops kept ~7x its Lua heap in dead
 * tensors (RSS 15 -> 190 MB and growing over 2e6 adds, page faults and malloc
 * consolidation 40 % of the time). Each 64 boxes created charge that
 * difference to Lua's debt (LUA_GCSTEP with a size adds it), so its
 * collector runs at the pace of the tensors' real size; big buffers are
 * the live-bytes rule's above. */
#define LT_BOX_HIDDEN_BYTES 320
static unsigned gc_boxes;

static size_t bytes_live(void) {
  size_t live = 0;
  for (int t = 0; t < TS_DEVICE_TYPE_COUNT; t++) live += ts_bytes_live((ts_device_type)t);
  return live;
}

void lt_gc_debt(lua_State *L) {
  if (gc_boxes >= 64) {
    lua_gc(L, LUA_GCSTEP, (int)(gc_boxes * LT_BOX_HIDDEN_BYTES / 1024));
    gc_boxes = 0;
  }
  gc_pending += ts_take_alloc_debt();
  if (gc_pending < 64 * 1024) return; /* checked every 64 KiB allocated */
  gc_pending = 0;
  size_t live = bytes_live();
  if (live < gc_live_after + gc_limit) {
    if (live < gc_live_after) gc_live_after = live; /* freed without the collector */
    return;
  }
  size_t grown = live - gc_live_after;
  lua_gc(L, LUA_GCSTEP, 0);
  live = bytes_live();
  if (live > gc_live_after + grown / 2) {
    lua_gc(L, LUA_GCCOLLECT);
    live = bytes_live();
  }
  size_t heap = (size_t)lua_gc(L, LUA_GCCOUNT) << 10, limit = (size_t)4 << 20;
  if (4 * heap > limit) limit = 4 * heap;
  if (live / 4 > limit) limit = live / 4;
  gc_live_after = live, gc_limit = limit;
}

static ts_tensor **new_box(lua_State *L) {
  lt_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->t = NULL;
  b->tag = BOX_TAG;
  gc_boxes++;
  return &b->t;
}

ts_tensor **lt_newslot(lua_State *L) {
  ts_tensor **slot = new_box(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, (void *)&lt_newslot); /* the metatable, cached under a light key */
  lua_setmetatable(L, -2);
  return slot;
}

ts_tensor **lt_newslot_mt(lua_State *L, int mt) {
  ts_tensor **slot = new_box(L);
  lua_pushvalue(L, mt);
  lua_setmetatable(L, -2);
  return slot;
}

void lt_push_retained(lua_State *L, ts_tensor *t) {
  ts_tensor **slot = lt_newslot(L); /* may raise: t is not retained yet, so nothing leaks */
  ts_tensor_retain(t);
  *slot = t;
}

/* ---- properties and indexing ---------------------------------------------- */

static int push_property(lua_State *L, ts_tensor *t, const char *k) {
  if (t->base) ts_ag_refresh(t); /* a view whose base's history changed (is_leaf, requires_grad, grad_fn) */
  switch (k[0]) {
  case '_':
    if (strcmp(k, "_version") == 0) return lua_pushinteger(L, t->storage->version), 1;
    break;
  case 's':
    if (strcmp(k, "shape") == 0) return lt_push_size(L, t->ndim, t->sizes), 1;
    break;
  case 'd':
    if (strcmp(k, "dtype") == 0) return lt_push_dtype(L, t->dtype), 1;
    if (strcmp(k, "device") == 0) return lt_push_device(L, t->device), 1;
    break;
  case 'n':
    if (strcmp(k, "ndim") == 0) return lua_pushinteger(L, t->ndim), 1;
    break;
  case 'i':
    if (strcmp(k, "is_cuda") == 0) return lua_pushboolean(L, t->device.type == TS_CUDA), 1;
    if (strcmp(k, "is_leaf") == 0) return lua_pushboolean(L, t->grad_fn == NULL), 1;
    break;
  case 'r':
    if (strcmp(k, "requires_grad") == 0) return lua_pushboolean(L, t->requires_grad), 1;
    break;
  case 'g':
    if (strcmp(k, "grad") == 0) {
      if (!t->grad) return lua_pushnil(L), 1;
      lt_push_retained(L, t->grad);
      return 1;
    }
    if (strcmp(k, "grad_fn") == 0) return lt_push_grad_fn(L, t), 1;
    break;
  case 'T':
    if (k[1] == 0) {
      int64_t dims[TS_MAX_DIMS];
      for (int i = 0; i < t->ndim; i++) dims[i] = t->ndim - 1 - i;
      ts_tensor **slot = lt_newslot(L);
      LT_TRY(L, ts_permute(t, t->ndim, dims, slot));
      return 1;
    }
    break;
  }
  return 0;
}

/* Applies one index entry `{start, stop[, step]}`, an integer, or `{}` to dim d.
 * Returns the dims consumed in the result (0 for an integer, 1 otherwise). */
static int apply_index(lua_State *L, int entry, ts_tensor **cur, int d, int argpos) {
  ts_tensor *next = NULL;
  if (lua_type(L, entry) == LUA_TNUMBER) {
    int64_t i = lt_checkint(L, entry);
    if (d >= (*cur)->ndim)
      luaL_error(L, "too many indices for tensor of dimension %d", (*cur)->ndim);
    LT_TRY(L, ts_select(*cur, d, i, &next));
    ts_tensor_release(*cur);
    *cur = next;
    return 0;
  }
  if (lua_type(L, entry) == LUA_TTABLE) {
    if (d >= (*cur)->ndim) luaL_error(L, "too many indices for tensor of dimension %d", (*cur)->ndim);
    int64_t n = (*cur)->sizes[d], v[3] = {0, n, 1};
    int len = (int)lua_rawlen(L, entry);
    if (len > 3) luaL_error(L, "slice at position %d: expected {start, stop[, step]}, got %d values", argpos, len);
    for (int k = 0; k < len; k++) {
      lua_rawgeti(L, entry, k + 1);
      if (!lua_isnil(L, -1)) {
        int isnum;
        v[k] = lua_tointegerx(L, -1, &isnum);
        if (!isnum) luaL_error(L, "slice at position %d: integer expected, got %s", argpos, luaL_typename(L, -1));
      }
      lua_pop(L, 1);
    }
    LT_TRY(L, ts_slice(*cur, d, v[0], v[1], v[2], &next));
    ts_tensor_release(*cur);
    *cur = next;
    return 1;
  }
  return luaL_error(L, "index at position %d: expected an integer or a {start, stop[, step]} slice, got %s", argpos,
                    luaL_typename(L, entry));
}

/* Builds the view t[key] into *out (a new reference). The caller anchors
 * *out in a slot before calling, so errors here cannot leak it. */
static void index_view(lua_State *L, ts_tensor *t, int key, ts_tensor **out) {
  ts_tensor_retain(t);
  *out = t;
  if (lua_type(L, key) == LUA_TNUMBER) {
    apply_index(L, key, out, 0, 1);
    return;
  }
  lt_unsize(L, key); /* x[torch.Size{0, 1}] is x[{0, 1}], as PyTorch's x[torch.Size([0, 1])] is x[0, 1] */
  int n = (int)lua_rawlen(L, key), d = 0;
  for (int k = 1; k <= n; k++) {
    lua_rawgeti(L, key, k);
    d += apply_index(L, lua_gettop(L), out, d, k);
    lua_pop(L, 1);
  }
}

/* the names push_property reads, for the suggestions below */
static const char *const property_names[] = {"shape",         "dtype", "device",  "ndim", "is_cuda", "is_leaf",
                                             "requires_grad", "grad",  "grad_fn", "T",    "_version", NULL};

/* A name that is neither a method nor a property: the Lua library's hook
 * (lua/tensh/strict.lua) raises "Tensor has no field 'itme' (did you mean
 * 'item'?)"; without the hook (a bare state), nil. */
static int tensor_no_field(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, "tensh.tensor_no_field") != LUA_TFUNCTION) return 0;
  lua_pushvalue(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_createtable(L, 0, 10);
  for (int i = 0; property_names[i]; i++) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, property_names[i]);
  }
  lua_call(L, 3, 1);
  return 1;
}

static int tensor_index(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  switch (lua_type(L, 2)) {
  case LUA_TSTRING:
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1; /* a method */
    lua_pop(L, 1);
    if (push_property(L, t, lua_tostring(L, 2))) return 1;
    return tensor_no_field(L);
  case LUA_TNUMBER:
  case LUA_TTABLE: {
    ts_tensor **slot = lt_newslot(L);
    index_view(L, t, 2, slot);
    return 1;
  }
  case LUA_TUSERDATA:
    if (lt_test(L, 2)) { /* advanced indexing: x[mask], x[idx] (a copy, not a view) */
      ts_tensor *index = lt_check(L, 2), **slot = lt_newslot(L);
      LT_TRY(L, ts_index_get(t, index, slot));
      lt_gc_debt(L);
      return 1;
    }
    /* fall through */
  default:
    return luaL_error(L, "tensor index: expected an integer, a slice table, an index tensor or a method name, got %s",
                      luaL_typename(L, 2));
  }
}

static int tensor_newindex(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (lt_test(L, 2)) { /* x[mask] = v, x[idx] = v: v broadcast to the indexing result */
    ts_scalar_box box;
    ts_tensor *index = lt_check(L, 2), *value = lt_operand(L, 3, &box);
    LT_TRY(L, ts_index_put_(t, index, value));
    return 0;
  }
  if (lua_type(L, 2) == LUA_TSTRING && lt_set_autograd_field(L, t, lua_tostring(L, 2))) return 0;
  if (lua_type(L, 2) != LUA_TNUMBER && lua_type(L, 2) != LUA_TTABLE)
    return luaL_error(L, "cannot set field '%s' of a tensor; tensors take values at integer or slice indices",
                      lua_tostring(L, 2) ? lua_tostring(L, 2) : luaL_typename(L, 2));
  ts_tensor **slot = lt_newslot(L); /* anchors the view */
  index_view(L, t, 2, slot);
  if (lua_type(L, 3) == LUA_TNUMBER || lua_type(L, 3) == LUA_TBOOLEAN) {
    double v = lua_type(L, 3) == LUA_TBOOLEAN ? lua_toboolean(L, 3) : lua_tonumber(L, 3);
    LT_TRY(L, ts_fill_(*slot, v));
  } else {
    ts_tensor *src = lt_check(L, 3);
    LT_TRY(L, ts_copy_(*slot, src));
  }
  return 0;
}

static int tensor_len(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (t->ndim == 0) return luaL_error(L, "len() of a 0-d tensor");
  lua_pushinteger(L, t->sizes[0]);
  return 1;
}

void lt_new_class(lua_State *L, const char *name, const luaL_Reg *methods, const luaL_Reg *meta) {
  luaL_newmetatable(L, name);
  if (meta) luaL_setfuncs(L, meta, 0);
  if (methods) { /* not luaL_newlib: it sizes the table by sizeof of an array, and methods is a pointer */
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}

void lt_register(lua_State *L, const luaL_Reg *torch_fns, const luaL_Reg *methods) {
  if (methods) luaL_setfuncs(L, methods, 0);
  if (torch_fns) {
    lua_pushvalue(L, -2);
    luaL_setfuncs(L, torch_fns, 0);
    lua_pop(L, 1);
  }
}

/* ---- basic methods -------------------------------------------------------- */

static int m_size(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (lua_isnoneornil(L, 2)) return lt_push_size(L, t->ndim, t->sizes), 1;
  int d;
  LT_TRY(L, ts_wrap_dim("size", lt_checkint(L, 2), t->ndim, &d));
  lua_pushinteger(L, t->ndim ? t->sizes[d] : 1);
  return 1;
}

static int m_stride(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (lua_isnoneornil(L, 2)) {
    lua_createtable(L, t->ndim, 0);
    for (int i = 0; i < t->ndim; i++) {
      lua_pushinteger(L, t->strides[i]);
      lua_rawseti(L, -2, i + 1);
    }
    return 1;
  }
  int d;
  LT_TRY(L, ts_wrap_dim("stride", lt_checkint(L, 2), t->ndim, &d));
  lua_pushinteger(L, t->ndim ? t->strides[d] : 1);
  return 1;
}

static int m_dim(lua_State *L) { return lua_pushinteger(L, lt_check(L, 1)->ndim), 1; }
static int m_numel(lua_State *L) { return lua_pushinteger(L, ts_numel(lt_check(L, 1))), 1; }
static int m_element_size(lua_State *L) { return lua_pushinteger(L, (lua_Integer)ts_dtype_size(lt_check(L, 1)->dtype)), 1; }
static int m_is_contiguous(lua_State *L) { return lua_pushboolean(L, ts_is_contiguous(lt_check(L, 1))), 1; }
static int m_get_device(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  lua_pushinteger(L, t->device.type == TS_CPU ? -1 : t->device.index);
  return 1;
}

/* Reads element at linear position i of t (row-major order) as a Lua value. */
static void push_element(lua_State *L, ts_tensor *t, const int64_t *idx) {
  char *p = ts_data(t);
  for (int d = 0; d < t->ndim; d++) p += idx[d] * t->strides[d] * (int64_t)ts_dtype_size(t->dtype);
  if (t->dtype == TS_BOOL) lua_pushboolean(L, *(uint8_t *)p != 0);
  else if (ts_dtype_is_float(t->dtype)) lua_pushnumber(L, ts_load_f64(p, t->dtype));
  else lua_pushinteger(L, ts_load_i64(p, t->dtype));
}

/* t readable by the host: t itself (waited for when a copy is still landing
 * in it), or a CPU copy anchored in a slot on the stack. */
ts_tensor *lt_host_view(lua_State *L, ts_tensor *t) {
  if (t->device.type == TS_CPU) {
    LT_TRY(L, ts_host_ready(t));
    return t;
  }
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_to_device(t, TS_DEVICE_CPU, t->dtype, false, slot));
  return *slot;
}

static int m_item(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  int64_t n = ts_numel(t);
  if (n != 1) return lt_errorf(L, "item: a tensor with %lld elements cannot be converted to a number; only one-element tensors can", (long long)n);
  t = lt_host_view(L, t);
  int64_t idx[TS_MAX_DIMS] = {0};
  push_element(L, t, idx);
  return 1;
}

static void tolist_rec(lua_State *L, ts_tensor *t, int d, int64_t *idx) {
  if (d == t->ndim) {
    push_element(L, t, idx);
    return;
  }
  luaL_checkstack(L, 4, "tolist: nesting too deep");
  lua_createtable(L, (int)t->sizes[d], 0);
  for (int64_t i = 0; i < t->sizes[d]; i++) {
    idx[d] = i;
    tolist_rec(L, t, d + 1, idx);
    lua_rawseti(L, -2, i + 1);
  }
}

static int m_tolist(lua_State *L) {
  ts_tensor *t = lt_host_view(L, lt_check(L, 1));
  int64_t idx[TS_MAX_DIMS] = {0};
  tolist_rec(L, t, 0, idx);
  return 1;
}

static int m_contiguous(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_contiguous(t, slot));
  lt_gc_debt(L);
  return 1;
}

static int m_clone(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_clone(t, slot));
  lt_gc_debt(L);
  return 1;
}

/* t:to(dtype | device [, dtype] [, opts]), opts {dtype=, device=, non_blocking=, copy=} */
static int m_to(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  ts_dtype dt = t->dtype;
  ts_device dev = t->device;
  bool non_blocking = false, copy = false;
  for (int i = 2; i <= lua_gettop(L); i++) {
    if (lt_test(L, i)) { /* t:to(other): other's dtype and device */
      dt = lt_test(L, i)->dtype, dev = lt_test(L, i)->device;
    } else if (lua_type(L, i) == LUA_TSTRING) {
      ts_dtype d;
      if (ts_dtype_from_name(lua_tostring(L, i), &d) == TS_OK) dt = d;
      else dev = lt_check_device(L, i);
    } else if (lua_type(L, i) == LUA_TNUMBER) {
      dev = lt_check_device(L, i);
    } else if (lt_opts_index(L, i)) {
      static const char *const known[] = {"dtype", "device", "non_blocking", "copy", NULL};
      lt_opts_check(L, i, "to", known);
      dt = lt_opt_dtype(L, i, dt);
      dev = lt_opt_device(L, i, dev);
      non_blocking = lt_opt_bool(L, i, "non_blocking", false);
      copy = lt_opt_bool(L, i, "copy", false);
    } else if (lua_type(L, i) == LUA_TTABLE) {
      dev = lt_check_device(L, i);
    } else if (lua_type(L, i) == LUA_TBOOLEAN && i == lua_gettop(L)) {
      non_blocking = lua_toboolean(L, i); /* t:to(dev, true), PyTorch's positional non_blocking */
    } else {
      return luaL_typeerror(L, i, "dtype, device, tensor or options table");
    }
  }
  ts_tensor **slot = lt_newslot(L);
  if (ts_to_device(t, dev, dt, non_blocking, slot)) return lt_errorf(L, "to: %s", ts_last_error());
  if (copy && *slot == t) { /* copy=true: never the same tensor */
    ts_tensor_release(t);
    *slot = NULL;
    LT_TRY(L, ts_clone(t, slot));
  }
  lt_gc_debt(L);
  return 1;
}

/* t:cuda([device] [, opts]) */
static int m_cuda(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  ts_device dev = {TS_CUDA, -1};
  int opts = 0;
  if (lt_opts_index(L, 2)) opts = 2;
  else {
    if (!lua_isnoneornil(L, 2)) dev = lt_check_device(L, 2);
    if (dev.type != TS_CUDA) return luaL_argerror(L, 2, "a CUDA device expected");
    opts = lt_opts_index(L, 3);
  }
  static const char *const known[] = {"device", "non_blocking", NULL};
  lt_opts_check(L, opts, "cuda", known);
  if (opts) dev = lt_opt_device(L, opts, dev);
  bool non_blocking = lt_opt_bool(L, opts, "non_blocking", false);
  ts_tensor **slot = lt_newslot(L);
  if (ts_to_device(t, dev, t->dtype, non_blocking, slot)) return lt_errorf(L, "cuda: %s", ts_last_error());
  lt_gc_debt(L);
  return 1;
}

static int m_cpu(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (t->device.type == TS_CPU) return lua_settop(L, 1), 1;
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_to_device(t, TS_DEVICE_CPU, t->dtype, false, slot));
  lt_gc_debt(L);
  return 1;
}

static int m_pin_memory(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_pin_memory(t, slot));
  lt_gc_debt(L);
  return 1;
}

static int m_is_pinned(lua_State *L) { return lua_pushboolean(L, lt_check(L, 1)->storage->pinned), 1; }

#define CAST_METHOD(NAME, DT)                      \
  static int m_##NAME(lua_State *L) {              \
    ts_tensor *t = lt_check(L, 1);                 \
    ts_tensor **slot = lt_newslot(L);              \
    LT_TRY(L, ts_to_dtype(t, DT, slot));           \
    lt_gc_debt(L);                                 \
    return 1;                                      \
  }
CAST_METHOD(float, TS_FLOAT32)
CAST_METHOD(double, TS_FLOAT64)
CAST_METHOD(half, TS_FLOAT16)
CAST_METHOD(bfloat16, TS_BFLOAT16)
CAST_METHOD(long, TS_INT64)
CAST_METHOD(int, TS_INT32)
CAST_METHOD(short, TS_INT16)
CAST_METHOD(char, TS_INT8)
CAST_METHOD(byte, TS_UINT8)
CAST_METHOD(bool, TS_BOOL)

static int m_copy_(lua_State *L) {
  ts_tensor *t = lt_check(L, 1), *src = lt_check(L, 2);
  LT_TRY(L, ts_copy_(t, src));
  lua_settop(L, 1);
  return 1;
}

static int m_fill_(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  double v;
  if (lua_type(L, 2) == LUA_TBOOLEAN) v = lua_toboolean(L, 2);
  else if (lt_test(L, 2)) { /* a 0-dim tensor: differentiable in it (FillBackward3) */
    LT_TRY(L, ts_fill_tensor_(t, lt_test(L, 2)));
    lua_settop(L, 1);
    return 1;
  } else v = luaL_checknumber(L, 2);
  LT_TRY(L, ts_fill_(t, v));
  lua_settop(L, 1);
  return 1;
}

static int m_zero_(lua_State *L) {
  LT_TRY(L, ts_zero_(lt_check(L, 1)));
  lua_settop(L, 1);
  return 1;
}

static int m_storage_offset(lua_State *L) { return lua_pushinteger(L, lt_check(L, 1)->offset), 1; }

static int m_data_ptr(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(intptr_t)ts_data(lt_check(L, 1)));
  return 1;
}

static int m_type(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (lua_isnoneornil(L, 2)) return lt_push_dtype(L, t->dtype), 1;
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_to_dtype(t, lt_check_dtype(L, 2), slot));
  return 1;
}

/* ---- comparison operators ----------------------------------------------
 * Lua turns whatever a comparison metamethod returns into a boolean, so
 * `a < b` cannot be PyTorch's elementwise tensor. The operators compare
 * values instead: a one-element tensor stands for its number, and a tensor of
 * any other size raises PyTorch's "ambiguous" error naming the elementwise
 * method, so `if loss < best then` works and `if a == b then` on whole tensors
 * never silently tests identity. (Lua calls __eq only when both sides are
 * tensors: `t == 1` is always false, which docs/porting.md says.) */
static void push_compared(lua_State *L, int idx, const char *elementwise) {
  ts_tensor *t = lt_test(L, idx);
  if (!t) {
    if (test_box(L, idx)) lt_check(L, idx); /* a freed tensor: says so */
    if (lua_type(L, idx) != LUA_TNUMBER)
      lt_errorf(L, "attempt to compare a tensor with a %s value", luaL_typename(L, idx));
    lua_pushvalue(L, idx);
    return;
  }
  int64_t n = ts_numel(t);
  if (n != 1)
    lt_errorf(L,
              "Boolean value of Tensor with %s is ambiguous: a comparison operator gives one Lua boolean; "
              "use %s for the elementwise result, then :all() or :any()",
              n == 0 ? "no values" : "more than one value", elementwise);
  int top = lua_gettop(L);
  t = lt_host_view(L, t); /* a device tensor's host copy takes a stack slot */
  int64_t first[TS_MAX_DIMS] = {0};
  push_element(L, t, first);
  if (lua_gettop(L) > top + 1) lua_replace(L, top + 1); /* the value alone stays: compare reads the top two */
}

static int compare(lua_State *L, int op, const char *mm, const char *elementwise) {
  lt_check_operator(L, mm);
  push_compared(L, 1, elementwise);
  push_compared(L, 2, elementwise);
  if (lua_isboolean(L, -1) || lua_isboolean(L, -2)) {
    if (op != LUA_OPEQ) return lt_errorf(L, "bool tensors have no order: compare them with == or a:eq(b)");
    lua_pushboolean(L, lua_toboolean(L, -1) == lua_toboolean(L, -2) && lua_type(L, -1) == lua_type(L, -2));
    return 1;
  }
  lua_pushboolean(L, lua_compare(L, -2, -1, op));
  return 1;
}
static int mm_eq(lua_State *L) { return compare(L, LUA_OPEQ, "__eq", "a:eq(b) (or torch.equal(a, b) for one answer)"); }
static int mm_lt(lua_State *L) { return compare(L, LUA_OPLT, "__lt", "a:lt(b), a:gt(b)"); }
static int mm_le(lua_State *L) { return compare(L, LUA_OPLE, "__le", "a:le(b), a:ge(b)"); }

static int l_is_tensor(lua_State *L) { return lua_pushboolean(L, lt_test(L, 1) != NULL), 1; }

void lt_open_tensor(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"size", m_size}, {"stride", m_stride}, {"dim", m_dim}, {"ndimension", m_dim}, {"numel", m_numel},
      {"nelement", m_numel}, {"element_size", m_element_size}, {"is_contiguous", m_is_contiguous},
      {"get_device", m_get_device}, {"item", m_item}, {"tolist", m_tolist}, {"contiguous", m_contiguous},
      {"clone", m_clone}, {"to", m_to}, {"float", m_float}, {"double", m_double}, {"half", m_half},
      {"bfloat16", m_bfloat16}, {"long", m_long}, {"int", m_int}, {"short", m_short}, {"char", m_char}, {"byte", m_byte}, {"bool", m_bool},
      {"cpu", m_cpu}, {"cuda", m_cuda}, {"pin_memory", m_pin_memory}, {"is_pinned", m_is_pinned}, {"copy_", m_copy_}, {"fill_", m_fill_}, {"zero_", m_zero_},
      {"storage_offset", m_storage_offset}, {"data_ptr", m_data_ptr}, {"type", m_type}, {NULL, NULL}};
  static const luaL_Reg fns[] = {{"is_tensor", l_is_tensor}, {NULL, NULL}};
  lt_register(L, fns, methods);
}

/* Creates the tensor metatable; the methods table is at the top of the stack. */
void lt_make_metatable(lua_State *L) {
  int methods = lua_gettop(L);
  luaL_newmetatable(L, LT_TENSOR);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, (void *)&lt_newslot);
  lua_pushvalue(L, methods);
  lua_pushcclosure(L, tensor_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, tensor_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pushcfunction(L, tensor_len);
  lua_setfield(L, -2, "__len");
  lua_pushcfunction(L, tensor_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, tensor_gc);
  lua_setfield(L, -2, "__close");
  static const luaL_Reg compare_meta[] = {{"__eq", mm_eq}, {"__lt", mm_lt}, {"__le", mm_le}, {NULL, NULL}};
  luaL_setfuncs(L, compare_meta, 0);
  lua_pushliteral(L, "Tensor");
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
}
