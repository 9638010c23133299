/* Bindings of the data pipeline's C core (src/data/) under the private table
 * torch._data, which lua/tensh/data.lua wraps into datasets and DataLoader:
 * the file readers, tensor sources (a userdata owning a ts_data_source),
 * epochs (a userdata owning a ts_data_epoch and its worker threads; __close
 * and __gc stop and join them) and the Philox helpers for shuffling. */
#include "lt.h"

#include "../data/data.h"

#include <stdlib.h>
#include <string.h>

#define LT_SOURCE "tensh.data.Source"
#define LT_EPOCH "tensh.data.Epoch"

typedef struct source_box { ts_data_source *s; } source_box;
typedef struct epoch_box { ts_data_epoch *e; int nfields; } epoch_box;

static ts_data_source *check_source(lua_State *L, int idx) {
  source_box *b = luaL_checkudata(L, idx, LT_SOURCE);
  if (!b->s) luaL_argerror(L, idx, "dataset source was freed");
  return b->s;
}

/* An int64 CPU tensor argument, contiguous (a temporary is left on the stack). */
static const int64_t *int64_arg(lua_State *L, int idx, const char *what, int64_t *n) {
  ts_tensor *t = lt_check(L, idx);
  if (t->dtype != TS_INT64 || t->device.type != TS_CPU || t->ndim != 1)
    luaL_error(L, "%s: expected a 1-D int64 CPU tensor", what);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_contiguous(t, slot));
  LT_TRY(L, ts_host_ready(*slot));
  *n = (*slot)->sizes[0];
  return ts_data(*slot);
}

/* ---- readers ------------------------------------------------------------------- */

/* _data.read_idx(path, ndim) -> uint8 tensor */
static int l_read_idx(lua_State *L) {
  const char *path = lt_checkpath(L, 1, "read_idx");
  int64_t nd = lt_checkint(L, 2);
  luaL_argcheck(L, nd >= 1 && nd <= TS_MAX_DIMS, 2, "rank out of range");
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_data_read_idx(path, (int)nd, slot));
  lt_gc_debt(L);
  return 1;
}

/* _data.read_cifar({paths}) -> images uint8 (N, 3, 32, 32), labels int64 (N,) */
static int l_read_cifar(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = (int)luaL_len(L, 1);
  const char **paths = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n > 0 ? n : 1), 0);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    paths[i] = lua_tostring(L, -1);
    if (!paths[i]) luaL_error(L, "read_cifar: paths must be strings");
    lua_pop(L, 1); /* the list keeps the string alive */
  }
  ts_tensor **x = lt_newslot(L), **y = lt_newslot(L);
  LT_TRY(L, ts_data_read_cifar(n, paths, x, y));
  lt_gc_debt(L);
  return 2;
}

/* _data.gzip_write(path, bytes) */
static int l_gzip_write(lua_State *L) {
  size_t n;
  const char *path = lt_checkpath(L, 1, "gzip_write"), *bytes = luaL_checklstring(L, 2, &n);
  LT_TRY(L, ts_data_gzip_write(path, bytes, n));
  return 0;
}

/* ---- sources ----------------------------------------------------------------------- */

static int64_t int_field(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int ok;
  lua_Integer v = lua_tointegerx(L, -1, &ok);
  if (!ok) luaL_error(L, "transform: field '%s' must be an integer", k);
  lua_pop(L, 1);
  return v;
}

static double num_field(lua_State *L, int t, const char *k, double dflt) {
  lua_getfield(L, t, k);
  int ok = 1;
  double v = lua_isnil(L, -1) ? dflt : lua_tonumberx(L, -1, &ok);
  if (!ok) luaL_error(L, "transform: field '%s' must be a number, got %s", k, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

/* Reads one transform spec table at idx into tf; a Normalize's values go to a
 * userdata left on the stack (copied to malloc'd arrays only once nothing
 * can raise any more, so a Lua error never leaks them). */
static void read_transform(lua_State *L, int idx, ts_data_transform *tf) {
  memset(tf, 0, sizeof *tf);
  lua_getfield(L, idx, "kind");
  const char *kind = lua_tostring(L, -1);
  if (!kind) luaL_error(L, "transform: bad transform spec (no kind)");
  if (strcmp(kind, "normalize") == 0) {
    tf->kind = TS_TF_NORMALIZE;
    lua_getfield(L, idx, "mean");
    lua_getfield(L, idx, "std");
    int nm = (int)luaL_len(L, -2), ns = (int)luaL_len(L, -1);
    if (nm != ns || nm < 1)
      luaL_error(L, "Normalize: mean and std need the same number of values (one per channel), got %d and %d", nm, ns);
    double *v = lua_newuserdatauv(L, sizeof(double) * 2 * (size_t)nm, 0);
    for (int k = 0; k < nm; k++) {
      lua_rawgeti(L, -3, k + 1);
      lua_rawgeti(L, -3, k + 1);
      if (!lua_isnumber(L, -2) || !lua_isnumber(L, -1)) luaL_error(L, "Normalize: mean and std must be numbers");
      v[k] = lua_tonumber(L, -2), v[nm + k] = lua_tonumber(L, -1);
      lua_pop(L, 2);
    }
    lua_replace(L, -3); /* keep the values userdata; drop mean and std */
    lua_pop(L, 1);
    tf->nch = nm;
    tf->mean = v; /* borrowed from the userdata until copied */
  } else if (strcmp(kind, "crop") == 0) {
    tf->kind = TS_TF_CROP;
    tf->h = int_field(L, idx, "h"), tf->w = int_field(L, idx, "w"), tf->pad = int_field(L, idx, "pad");
    if (tf->h > INT32_MAX || tf->w > INT32_MAX || tf->pad > INT32_MAX || tf->pad < 0)
      luaL_error(L, "RandomCrop: size and padding out of range");
    lua_pushnil(L); /* keeps one stack slot per transform */
  } else if (strcmp(kind, "hflip") == 0) {
    tf->kind = TS_TF_HFLIP;
    tf->p = num_field(L, idx, "p", 0.5);
    lua_pushnil(L);
  } else {
    luaL_error(L, "transform: unknown kind '%s'", kind);
  }
  lua_remove(L, -2); /* kind */
}

/* _data.source({tensors}, {image = {sizes}, transforms = {specs}}) -> source */
static int l_source(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checkstack(L, TS_DATA_MAX_FIELDS + TS_DATA_MAX_TRANSFORMS + 16, "dataset");
  int opts = lua_type(L, 2) == LUA_TTABLE ? 2 : 0;
  int nf = (int)luaL_len(L, 1);
  if (nf < 1 || nf > TS_DATA_MAX_FIELDS) luaL_error(L, "dataset: expected 1 to %d tensors, got %d", TS_DATA_MAX_FIELDS, nf);
  ts_tensor *fields[TS_DATA_MAX_FIELDS];
  for (int f = 0; f < nf; f++) {
    lua_rawgeti(L, 1, f + 1);
    ts_tensor *t = lt_test(L, -1);
    if (!t) luaL_error(L, "dataset: argument %d is a %s, expected a tensor", f + 1, luaL_typename(L, -1));
    ts_tensor **slot = lt_newslot(L); /* a contiguous version, kept alive by the stack until retained */
    LT_TRY(L, ts_contiguous(t, slot));
    fields[f] = *slot;
    lua_remove(L, -2);
  }
  bool image = false;
  int ind = 0;
  int64_t isz[TS_MAX_DIMS];
  if (opts && lua_getfield(L, opts, "image") == LUA_TTABLE) {
    image = true;
    lt_sizes(L, -1, &ind, isz);
  }
  lua_pop(L, opts ? 1 : 0);
  int ntf = 0;
  ts_data_transform tf[TS_DATA_MAX_TRANSFORMS];
  if (opts && lua_getfield(L, opts, "transforms") == LUA_TTABLE) {
    int list = lua_gettop(L);
    ntf = (int)luaL_len(L, list);
    if (ntf > TS_DATA_MAX_TRANSFORMS) luaL_error(L, "transform: at most %d transforms in a chain", TS_DATA_MAX_TRANSFORMS);
    for (int j = 0; j < ntf; j++) {
      lua_rawgeti(L, list, j + 1);
      luaL_checktype(L, -1, LUA_TTABLE);
      read_transform(L, lua_gettop(L), &tf[j]);
      lua_remove(L, -2);
    }
  }
  source_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->s = NULL;
  luaL_setmetatable(L, LT_SOURCE);
  /* from here nothing raises before the core owns the arrays */
  bool oom = false;
  for (int j = 0; j < ntf; j++) {
    if (tf[j].kind != TS_TF_NORMALIZE) continue;
    const double *v = tf[j].mean;
    size_t bytes = sizeof(double) * (size_t)tf[j].nch;
    tf[j].mean = malloc(bytes), tf[j].std = malloc(bytes);
    if (!tf[j].mean || !tf[j].std) oom = true;
    else memcpy(tf[j].mean, v, bytes), memcpy(tf[j].std, v + tf[j].nch, bytes);
  }
  if (oom) {
    for (int j = 0; j < ntf; j++)
      if (tf[j].kind == TS_TF_NORMALIZE) free(tf[j].mean), free(tf[j].std);
    return luaL_error(L, "out of memory");
  }
  LT_TRY(L, ts_data_source_new(nf, fields, image, ind, isz, ntf, tf, &b->s));
  return 1;
}

static int source_gc(lua_State *L) {
  source_box *b = luaL_checkudata(L, 1, LT_SOURCE);
  ts_data_source_release(b->s);
  b->s = NULL;
  return 0;
}

/* src:len() -> samples */
static int source_len(lua_State *L) {
  lua_pushinteger(L, check_source(L, 1)->n);
  return 1;
}

/* src:sample_shape() -> the shape of field 0's samples after the transforms */
static int source_sample_shape(lua_State *L) {
  ts_data_source *s = check_source(L, 1);
  lt_push_size(L, s->out_ndim, s->out_sizes);
  return 1;
}

/* src:batch(indices int64 (n,), key, pos0) -> one tensor per field, (n, ...) */
static int source_batch(lua_State *L) {
  ts_data_source *s = check_source(L, 1);
  int64_t n;
  const int64_t *idx = int64_arg(L, 2, "batch", &n);
  uint64_t key = (uint64_t)lt_checkint(L, 3);
  int64_t pos0 = lt_checkint(L, 4);
  for (int64_t k = 0; k < n; k++)
    if (idx[k] < 0 || idx[k] >= s->n)
      return lt_errorf(L, "dataset: index %lld out of range for a dataset of %lld samples (indices count from 0)",
                       (long long)idx[k], (long long)s->n);
  int top = lua_gettop(L);
  ts_tensor **slots[TS_DATA_MAX_FIELDS], *outs[TS_DATA_MAX_FIELDS];
  for (int f = 0; f < s->nfields; f++) slots[f] = lt_newslot(L);
  ts_status st = ts_data_make_batch(s, idx, n, key, pos0, false, outs);
  for (int f = 0; f < s->nfields; f++) *slots[f] = outs[f]; /* partial results are freed by their slots */
  if (st) lt_error(L, st);
  lt_gc_debt(L);
  return lua_gettop(L) - top;
}

/* ---- epochs ----------------------------------------------------------------------- */

/* _data.epoch(src, indices (total,), offsets (nbatches + 1,), key, nworkers, prefetch, pin) -> epoch */
static int l_epoch(lua_State *L) {
  ts_data_source *s = check_source(L, 1);
  int64_t total, noff;
  const int64_t *idx = int64_arg(L, 2, "DataLoader", &total);
  const int64_t *off = int64_arg(L, 3, "DataLoader", &noff);
  uint64_t key = (uint64_t)lt_checkint(L, 4);
  int64_t nw = lt_checkint(L, 5), pf = lt_checkint(L, 6);
  bool pin = lua_toboolean(L, 7);
  if (noff < 1 || off[noff - 1] != total) return luaL_error(L, "DataLoader: bad batch plan");
  if (nw < 0 || nw > 64) return lt_errorf(L, "DataLoader: num_workers must be in [0, 64], got %lld", (long long)nw);
  if (pf < 1 || pf > 1 << 20) return lt_errorf(L, "DataLoader: prefetch_factor must be at least 1, got %lld", (long long)pf);
  epoch_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->e = NULL;
  b->nfields = s->nfields;
  luaL_setmetatable(L, LT_EPOCH);
  LT_TRY(L, ts_data_epoch_new(s, idx, noff - 1, off, key, (int)nw, (int)pf, pin, &b->e));
  return 1;
}

static int epoch_close(lua_State *L) {
  epoch_box *b = luaL_checkudata(L, 1, LT_EPOCH);
  ts_data_epoch_free(b->e); /* joins the workers; a finalizer may run twice */
  b->e = NULL;
  return 0;
}

/* ep:next() -> the batch's tensors, or nothing when the epoch is over (or closed) */
static int epoch_next(lua_State *L) {
  epoch_box *b = luaL_checkudata(L, 1, LT_EPOCH);
  if (!b->e) return 0;
  int top = lua_gettop(L);
  ts_tensor **slots[TS_DATA_MAX_FIELDS], *outs[TS_DATA_MAX_FIELDS];
  for (int f = 0; f < b->nfields; f++) slots[f] = lt_newslot(L);
  bool done;
  LT_TRY(L, ts_data_epoch_next(b->e, outs, &done));
  if (done) return 0;
  for (int f = 0; f < b->nfields; f++) *slots[f] = outs[f];
  lt_gc_debt(L);
  return lua_gettop(L) - top;
}

/* ep:workers() -> threads running (0 once closed) */
static int epoch_workers(lua_State *L) {
  epoch_box *b = luaL_checkudata(L, 1, LT_EPOCH);
  lua_pushinteger(L, ts_data_epoch_workers(b->e));
  return 1;
}

/* ---- randomness ---------------------------------------------------------------------- */

static int l_randperm(lua_State *L) {
  int64_t n = lt_checkint(L, 1);
  uint64_t key = (uint64_t)lt_checkint(L, 2);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_data_randperm(n, key, slot));
  lt_gc_debt(L);
  return 1;
}

static int l_mix(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)ts_data_mix((uint64_t)lt_checkint(L, 1), (uint64_t)lt_checkint(L, 2)));
  return 1;
}

static int l_global_key(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)ts_data_global_key());
  return 1;
}

void lt_open_data(lua_State *L) {
  static const luaL_Reg source_methods[] = {
      {"len", source_len}, {"batch", source_batch}, {"sample_shape", source_sample_shape}, {NULL, NULL}};
  static const luaL_Reg epoch_methods[] = {
      {"next", epoch_next}, {"close", epoch_close}, {"workers", epoch_workers}, {NULL, NULL}};
  static const luaL_Reg fns[] = {
      {"read_idx", l_read_idx}, {"read_cifar", l_read_cifar}, {"gzip_write", l_gzip_write},
      {"source", l_source},     {"epoch", l_epoch},           {"randperm", l_randperm},
      {"mix", l_mix},           {"global_key", l_global_key}, {NULL, NULL}};
  static const luaL_Reg source_meta[] = {{"__gc", source_gc}, {"__close", source_gc}, {NULL, NULL}};
  static const luaL_Reg epoch_meta[] = {{"__gc", epoch_close}, {"__close", epoch_close}, {NULL, NULL}};
  lt_new_class(L, LT_SOURCE, source_methods, source_meta);
  lt_new_class(L, LT_EPOCH, epoch_methods, epoch_meta);
  luaL_newlib(L, fns);
  lua_setfield(L, -3, "_data"); /* torch._data: private, wrapped by lua/tensh/data.lua */
}
