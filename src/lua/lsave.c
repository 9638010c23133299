/* torch.save(obj, path) and torch.load(path, [map_location,] {map_location=, flat=, metadata=}): Lua
 * values <-> safetensors files (the file format is src/io/safetensors.c's).
 *
 * The tensors of obj go into the file under flattened names ({fc1 = {weight
 * = W}} -> "fc1.weight", integer keys as decimals), so PyTorch's
 * safetensors.torch.load_file reads them. Everything else, and the shape of
 * the tree, goes into __metadata__["tensh"] as one JSON document:
 *
 *   {"format": "tensh/1", "root": V}
 *   V = true | false | "utf-8 string"
 *     | {"tensor": "flat.name"} | {"int": "-12"} | {"float": "0.10000000000000001"}
 *     | {"bytes": "hex"}                      (a string that is not UTF-8, or holds NUL)
 *     | {"size": "2,3"}                       (a torch.Size, its dims; "" for torch.Size({}))
 *     | {"table": [[K, V], ...]}              (keys sorted: integers, then strings)
 *   K = "string key" | {"int": "3"} | {"bytes": "hex"}
 *
 * The device each tensor was saved from (when not the CPU) goes into
 * __metadata__["tensh.devices"], {"fc1.weight": "cuda:1"}, the location a
 * map_location table or function is given, as PyTorch's storage locations.
 *
 * Numbers are strings so integers beyond 2^53 stay exact (cJSON keeps numbers
 * as doubles) and floats round-trip bit for bit (%.17g). The same tensor
 * reached twice is written once and comes back as one tensor. Loading never
 * runs code: the document is data, decoded by the walk below. */
#include "lt.h"

#include "io/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_KEY "tensh"
#define DEVICES_KEY "tensh.devices"
#define TREE_FORMAT "tensh/1"
#define MAX_DEPTH 200          /* table nesting torch.save accepts (each level is 3 JSON levels; cJSON stops at 1000) */
#define ROOT_TENSOR_NAME "tensor" /* the name of a tensor saved on its own */

/* ---- boxes: C resources owned by a userdata, so a Lua error cannot leak them */

typedef struct json_box {
  cJSON *root;
  char *text;
} json_box;

static int json_box_gc(lua_State *L) {
  json_box *b = luaL_checkudata(L, 1, "tensh.json_box");
  cJSON_Delete(b->root);
  cJSON_free(b->text);
  b->root = NULL, b->text = NULL; /* a finalizer may run twice (__close, then __gc) */
  return 0;
}

static json_box *push_json_box(lua_State *L) {
  json_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->root = NULL, b->text = NULL;
  if (luaL_newmetatable(L, "tensh.json_box")) {
    lua_pushcfunction(L, json_box_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, json_box_gc);
    lua_setfield(L, -2, "__close");
  }
  lua_setmetatable(L, -2);
  return b;
}

typedef struct file_box {
  ts_safetensors *sf;
} file_box;

static int file_box_gc(lua_State *L) {
  file_box *b = luaL_checkudata(L, 1, "tensh.safetensors_file");
  ts_safetensors_close(b->sf);
  b->sf = NULL;
  return 0;
}

static file_box *push_file_box(lua_State *L) {
  file_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->sf = NULL;
  if (luaL_newmetatable(L, "tensh.safetensors_file")) {
    lua_pushcfunction(L, file_box_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, file_box_gc);
    lua_setfield(L, -2, "__close");
  }
  lua_setmetatable(L, -2);
  return b;
}

/* ---- torch.save ----------------------------------------------------------- */

typedef struct save_ctx {
  int names;    /* stack index: list of flat names, parallel to tensors */
  int tensors;  /* stack index: list of tensor userdata (CPU copies of CUDA ones) */
  int seen;     /* stack index: lightuserdata(ts_tensor *) -> its flat name */
  int taken;    /* stack index: flat name -> true */
  int visiting; /* stack index: table -> true while it is being walked (cycles) */
  int n;
  cJSON *devices; /* flat name -> the device of a tensor not on the CPU */
} save_ctx;

static void *check_mem(lua_State *L, void *p) {
  if (!p) luaL_error(L, "torch.save: out of memory");
  return p;
}

/* Adds item to parent: under key when parent is an object, appended when key is NULL. */
static cJSON *attach(lua_State *L, cJSON *parent, const char *key, cJSON *item) {
  check_mem(L, item);
  if (!(key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item))) {
    cJSON_Delete(item);
    luaL_error(L, "torch.save: out of memory");
  }
  return item;
}

/* {tag: text} */
static void attach_tagged(lua_State *L, cJSON *parent, const char *key, const char *tag, const char *text) {
  cJSON *o = attach(L, parent, key, cJSON_CreateObject());
  check_mem(L, cJSON_AddStringToObject(o, tag, text));
}

/* A string as itself when JSON can carry it as text, else as {"bytes": hex}. */
static void attach_string(lua_State *L, cJSON *parent, const char *key, int idx) {
  size_t n;
  const char *s = lua_tolstring(L, idx, &n);
  if (strlen(s) == n && ts_utf8_valid(s, n)) { /* cJSON strings end at a NUL */
    attach(L, parent, key, cJSON_CreateString(s));
    return;
  }
  static const char hex[] = "0123456789abcdef";
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, 2 * n + 1);
  for (size_t i = 0; i < n; i++) p[2 * i] = hex[(unsigned char)s[i] >> 4], p[2 * i + 1] = hex[s[i] & 15];
  p[2 * n] = 0;
  luaL_pushresultsize(&b, 2 * n);
  attach_tagged(L, parent, key, "bytes", lua_tostring(L, -1));
  lua_pop(L, 1);
}

static void attach_number(lua_State *L, cJSON *parent, const char *key, int idx) {
  char buf[64];
  if (lua_isinteger(L, idx)) {
    snprintf(buf, sizeof buf, "%lld", (long long)lua_tointeger(L, idx));
    attach_tagged(L, parent, key, "int", buf);
    return;
  }
  double v = lua_tonumber(L, idx);
  if (isnan(v)) snprintf(buf, sizeof buf, "nan");
  else snprintf(buf, sizeof buf, "%.17g", v); /* enough digits to read back the same double; inf as "inf" */
  attach_tagged(L, parent, key, "float", buf);
}

/* Where a value sits, for messages: 'fc1.weight', or the top level. */
static const char *where(lua_State *L, int path) {
  return path ? lua_pushfstring(L, "at '%s'", lua_tostring(L, path)) : "at the top level";
}

static void save_tensor(lua_State *L, save_ctx *c, cJSON *parent, const char *key, int v, int path) {
  ts_tensor *t = lt_test(L, v);
  lua_pushlightuserdata(L, t);
  if (lua_rawget(L, c->seen) == LUA_TSTRING) { /* shared: one copy in the file */
    attach_tagged(L, parent, key, "tensor", lua_tostring(L, -1));
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  if (path) lua_pushvalue(L, path);
  else lua_pushliteral(L, ROOT_TENSOR_NAME);
  int name = lua_gettop(L);
  size_t len;
  const char *s = lua_tolstring(L, name, &len);
  if (strlen(s) != len) luaL_error(L, "torch.save: the tensor %s has a NUL byte in its name", where(L, path));
  if (lua_getfield(L, c->taken, s) != LUA_TNIL)
    luaL_error(L, "torch.save: two tensors would both be named '%s' in the file (a key with '.' in it clashes "
               "with a nested table); rename one of the keys", s);
  lua_pop(L, 1);
  lua_pushboolean(L, 1);
  lua_setfield(L, c->taken, s);
  lua_pushlightuserdata(L, t);
  lua_pushvalue(L, name);
  lua_rawset(L, c->seen);
  if (t->device.type != TS_CPU) { /* the file holds host bytes: t:cpu() copies (or says why it cannot) */
    char dev[32];
    ts_device_str(t->device, dev, sizeof dev);
    check_mem(L, cJSON_AddStringToObject(c->devices, s, dev));
    lua_getfield(L, v, "cpu");
    lua_pushvalue(L, v);
    lua_call(L, 1, 1);
    if (!lt_test(L, -1)) luaL_error(L, "torch.save: cpu() did not return a tensor");
  } else {
    lua_pushvalue(L, v);
  }
  c->n++;
  lua_rawseti(L, c->tensors, c->n);
  lua_pushvalue(L, name);
  lua_rawseti(L, c->names, c->n);
  attach_tagged(L, parent, key, "tensor", s);
  lua_pop(L, 1); /* name */
}

typedef struct table_key {
  bool is_int;
  lua_Integer i;
  const char *s; /* anchored by the table being saved */
  size_t len;
} table_key;

/* integers (ascending) before strings (bytewise), so a file's bytes do not
 * depend on the order `next` happens to visit keys in */
static int key_order(const void *a, const void *b) {
  const table_key *x = a, *y = b;
  if (x->is_int != y->is_int) return x->is_int ? -1 : 1;
  if (x->is_int) return (x->i > y->i) - (x->i < y->i);
  size_t m = x->len < y->len ? x->len : y->len;
  int r = memcmp(x->s, y->s, m);
  return r ? r : (x->len > y->len) - (x->len < y->len);
}

static void save_value(lua_State *L, save_ctx *c, cJSON *parent, const char *key, int v, int path, int depth);

/* a torch.Size as {"size": "2,3"}, as PyTorch pickles x.shape */
static void save_size(lua_State *L, cJSON *parent, const char *key, int v, int path) {
  lua_getfield(L, v, "_dims");
  const int dims = lua_gettop(L);
  const lua_Integer n = (lua_Integer)lua_rawlen(L, dims);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= n; i++) {
    int isint;
    lua_rawgeti(L, dims, i);
    lua_Integer d = lua_tointegerx(L, -1, &isint);
    lua_pop(L, 1);
    if (!isint) luaL_error(L, "torch.save: a torch.Size with a dim that is not an integer %s", where(L, path));
    char buf[32];
    snprintf(buf, sizeof buf, i > 1 ? ",%lld" : "%lld", (long long)d);
    luaL_addstring(&b, buf);
  }
  luaL_pushresult(&b);
  attach_tagged(L, parent, key, "size", lua_tostring(L, -1));
  lua_settop(L, dims - 1);
}

static void save_table(lua_State *L, save_ctx *c, cJSON *parent, const char *key, int v, int path, int depth) {
  if (lt_is_a(L, v, LT_SIZE)) {
    save_size(L, parent, key, v, path);
    return;
  }
  if (lua_getmetatable(L, v))
    luaL_error(L, "torch.save: cannot save a table with a metatable %s (a torch.device or an object); save its "
               "plain contents instead", where(L, path));
  if (depth >= MAX_DEPTH) luaL_error(L, "torch.save: tables nested deeper than %d levels %s", MAX_DEPTH, where(L, path));
  lua_pushvalue(L, v);
  if (lua_rawget(L, c->visiting) != LUA_TNIL)
    luaL_error(L, "torch.save: the table %s is one of its own ancestors (a cycle); only trees of tables can be "
               "saved", where(L, path));
  lua_pop(L, 1);
  lua_pushvalue(L, v);
  lua_pushboolean(L, 1);
  lua_rawset(L, c->visiting);

  size_t nkeys = 0;
  lua_pushnil(L);
  while (lua_next(L, v)) nkeys++, lua_pop(L, 1);
  table_key *keys = lua_newuserdatauv(L, sizeof(table_key) * (nkeys ? nkeys : 1), 0);
  size_t k = 0;
  lua_pushnil(L);
  while (lua_next(L, v)) {
    lua_pop(L, 1);
    if (k >= nkeys) luaL_error(L, "torch.save: a table changed while it was being saved");
    if (lua_isinteger(L, -1)) {
      keys[k++] = (table_key){true, lua_tointeger(L, -1), NULL, 0};
    } else if (lua_type(L, -1) == LUA_TSTRING) {
      keys[k].is_int = false;
      keys[k].s = lua_tolstring(L, -1, &keys[k].len);
      k++;
    } else {
      luaL_error(L, "torch.save: table keys must be strings or integers, got a %s key %s", luaL_typename(L, -1),
                 where(L, path));
    }
  }
  qsort(keys, k, sizeof *keys, key_order);

  cJSON *obj = attach(L, parent, key, cJSON_CreateObject());
  cJSON *pairs = check_mem(L, cJSON_AddArrayToObject(obj, "table"));
  for (size_t i = 0; i < k; i++) {
    cJSON *pair = attach(L, pairs, NULL, cJSON_CreateArray());
    luaL_checkstack(L, 8, "torch.save: tables nested too deeply");
    if (keys[i].is_int) {
      char buf[32];
      snprintf(buf, sizeof buf, "%lld", (long long)keys[i].i);
      attach_tagged(L, pair, NULL, "int", buf);
      lua_pushinteger(L, keys[i].i);
    } else {
      lua_pushlstring(L, keys[i].s, keys[i].len);
      attach_string(L, pair, NULL, lua_gettop(L));
    }
    /* the child's flat name: parent.key */
    if (path) {
      lua_pushvalue(L, path);
      lua_pushliteral(L, ".");
      lua_pushvalue(L, -3);
      lua_concat(L, 3); /* integers print as decimals */
    } else {
      lua_pushvalue(L, -1);
      lua_tolstring(L, -1, NULL);
    }
    lua_pushvalue(L, -2);
    lua_rawget(L, v);
    save_value(L, c, pair, NULL, lua_gettop(L), lua_gettop(L) - 1, depth + 1);
    lua_pop(L, 3); /* key, name, value */
  }
  lua_pop(L, 1); /* keys */
  lua_pushvalue(L, v);
  lua_pushnil(L);
  lua_rawset(L, c->visiting);
}

static void save_value(lua_State *L, save_ctx *c, cJSON *parent, const char *key, int v, int path, int depth) {
  switch (lua_type(L, v)) {
  case LUA_TBOOLEAN: attach(L, parent, key, cJSON_CreateBool(lua_toboolean(L, v))); return;
  case LUA_TNUMBER: attach_number(L, parent, key, v); return;
  case LUA_TSTRING: attach_string(L, parent, key, v); return;
  case LUA_TTABLE: save_table(L, c, parent, key, v, path, depth); return;
  case LUA_TUSERDATA:
    if (lt_test(L, v)) {
      save_tensor(L, c, parent, key, v, path);
      return;
    }
    break;
  default: break;
  }
  luaL_error(L, "torch.save: cannot save a %s %s (only tensors, numbers, booleans, strings and tables of them)",
             luaL_typename(L, v), where(L, path));
}

static int l_save(lua_State *L) {
  const char *path = lt_checkpath(L, 2, "torch.save");
  lua_settop(L, 2);
  save_ctx c = {0};
  for (int i = 0; i < 5; i++) lua_newtable(L);
  c.names = 3, c.tensors = 4, c.seen = 5, c.taken = 6, c.visiting = 7;
  json_box *box = push_json_box(L);
  box->root = check_mem(L, cJSON_CreateObject());
  check_mem(L, cJSON_AddStringToObject(box->root, "format", TREE_FORMAT));
  json_box *devices = push_json_box(L);
  c.devices = devices->root = check_mem(L, cJSON_CreateObject());
  save_value(L, &c, box->root, "root", 1, 0, 0);
  box->text = check_mem(L, cJSON_PrintUnformatted(box->root));
  if (c.devices->child) devices->text = check_mem(L, cJSON_PrintUnformatted(c.devices));

  /* C arrays for the core, owned by userdata */
  const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)(c.n ? c.n : 1), 0);
  ts_tensor **tensors = lua_newuserdatauv(L, sizeof(ts_tensor *) * (size_t)(c.n ? c.n : 1), 0);
  for (int i = 0; i < c.n; i++) {
    lua_rawgeti(L, c.names, i + 1);
    names[i] = lua_tostring(L, -1); /* anchored in c.names */
    lua_pop(L, 1);
    lua_rawgeti(L, c.tensors, i + 1);
    tensors[i] = lt_test(L, -1);
    lua_pop(L, 1);
  }
  const char *mkeys[2] = {META_KEY, DEVICES_KEY}, *mvals[2] = {box->text, devices->text};
  LT_TRY(L, ts_safetensors_save(path, c.n, names, tensors, devices->text ? 2 : 1, mkeys, mvals));
  return 0;
}

/* ---- torch.load ----------------------------------------------------------- */

typedef struct load_ctx {
  const char *path;
  int by_name; /* stack index: flat name -> tensor */
} load_ctx;

static int corrupt(lua_State *L, const load_ctx *c, const char *what) {
  return luaL_error(L, "torch.load: '%s': corrupt tensh metadata (%s); torch.load(path, {flat = true}) reads "
                    "the tensors alone", c->path, what);
}

static const char *tag_text(lua_State *L, const load_ctx *c, const cJSON *o) {
  if (!cJSON_IsString(o)) corrupt(L, c, "a tagged value is not a string");
  return o->valuestring;
}

static void push_hex(lua_State *L, const load_ctx *c, const char *h) {
  size_t n = strlen(h);
  if (n % 2) corrupt(L, c, "odd-length bytes");
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, n / 2 + 1);
  for (size_t i = 0; i < n; i += 2) {
    int v = 0;
    for (int k = 0; k < 2; k++) {
      char ch = h[i + k];
      int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
      if (d < 0) corrupt(L, c, "bad hex digit in bytes");
      v = v * 16 + d;
    }
    p[i / 2] = (char)v;
  }
  luaL_pushresultsize(&b, n / 2);
}

static void push_int(lua_State *L, const load_ctx *c, const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end) corrupt(L, c, "bad integer");
  lua_pushinteger(L, (lua_Integer)v);
}

/* a torch.Size from its "2,3" */
static void push_size(lua_State *L, const load_ctx *c, const char *s) {
  lua_createtable(L, 0, 1);
  lua_newtable(L);
  lua_Integer n = 0;
  while (*s) {
    char *end;
    errno = 0;
    long long d = strtoll(s, &end, 10);
    if (errno || end == s || d < 0 || (*end && *end != ',') || (*end == ',' && !end[1])) corrupt(L, c, "bad torch.Size");
    lua_pushinteger(L, (lua_Integer)d);
    lua_rawseti(L, -2, ++n);
    s = *end ? end + 1 : end;
  }
  lua_setfield(L, -2, "_dims");
  luaL_setmetatable(L, LT_SIZE);
}

/* Pushes the Lua value an encoded tree node stands for. */
static void load_value(lua_State *L, const load_ctx *c, const cJSON *j) {
  luaL_checkstack(L, 8, "torch.load: tables nested too deeply");
  if (cJSON_IsBool(j)) {
    lua_pushboolean(L, cJSON_IsTrue(j));
    return;
  }
  if (cJSON_IsString(j)) {
    lua_pushstring(L, j->valuestring);
    return;
  }
  if (!cJSON_IsObject(j) || !j->child || j->child->next) corrupt(L, c, "a node is not a value");
  const cJSON *v = j->child;
  const char *tag = v->string;
  if (strcmp(tag, "tensor") == 0) {
    if (lua_getfield(L, c->by_name, tag_text(L, c, v)) == LUA_TNIL)
      luaL_error(L, "torch.load: '%s': corrupt tensh metadata (it names tensor '%s', which is not in the file)",
                 c->path, v->valuestring);
  } else if (strcmp(tag, "int") == 0) {
    push_int(L, c, tag_text(L, c, v));
  } else if (strcmp(tag, "float") == 0) {
    const char *s = tag_text(L, c, v);
    char *end;
    double d = strtod(s, &end);
    if (end == s || *end) corrupt(L, c, "bad float");
    lua_pushnumber(L, d);
  } else if (strcmp(tag, "bytes") == 0) {
    push_hex(L, c, tag_text(L, c, v));
  } else if (strcmp(tag, "size") == 0) {
    push_size(L, c, tag_text(L, c, v));
  } else if (strcmp(tag, "table") == 0) {
    if (!cJSON_IsArray(v)) corrupt(L, c, "a table is not a list of pairs");
    lua_createtable(L, 0, 0);
    for (const cJSON *pair = v->child; pair; pair = pair->next) {
      if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2) corrupt(L, c, "a table entry is not a [key, value] pair");
      const cJSON *k = pair->child;
      if (cJSON_IsString(k)) lua_pushstring(L, k->valuestring);
      else if (cJSON_IsObject(k) && k->child && !k->child->next && strcmp(k->child->string, "int") == 0)
        push_int(L, c, tag_text(L, c, k->child));
      else if (cJSON_IsObject(k) && k->child && !k->child->next && strcmp(k->child->string, "bytes") == 0)
        push_hex(L, c, tag_text(L, c, k->child));
      else corrupt(L, c, "a table key is not a string or an integer");
      lua_pushvalue(L, -1);
      if (lua_rawget(L, -3) != LUA_TNIL) corrupt(L, c, "a table has a key twice");
      lua_pop(L, 1);
      load_value(L, c, k->next);
      lua_rawset(L, -3);
    }
  } else {
    corrupt(L, c, "unknown node type");
  }
}

/* ---- map_location ----------------------------------------------------------
 * As PyTorch's torch.load takes it, positionally or as an option:
 *   nil                        every tensor on the CPU (safetensors' load_file; PyTorch would
 *                              restore each to the device it was saved from)
 *   "cuda:0", torch.device     every tensor there
 *   {["cuda:1"] = "cuda:0"}    a tensor saved from a key's device goes to its value ("cuda" as
 *                              a key: any CUDA device); the others as with nil
 *   function(t, location)      t on the CPU and the device it was saved from ("cpu", "cuda:1");
 *                              returns the tensor to keep, or nil for t as it is */

static bool is_torch_device(lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TTABLE && lt_is_a(L, idx, LT_DEVICE);
}

/* v (at idx) as a device: a string or a torch.device; false when it is neither or does not parse */
static bool to_device(lua_State *L, int idx, ts_device *d) {
  if (lua_type(L, idx) == LUA_TSTRING) return ts_device_parse(lua_tostring(L, idx), d) == TS_OK;
  if (is_torch_device(L, idx)) return *d = lt_check_device(L, idx), true;
  return false;
}

/* a plain table whose keys and values are all devices: a location map, not options */
static bool is_device_map(lua_State *L, int idx) {
  if (!lt_opts_index(L, idx)) return false;
  bool any = false, all = true;
  lua_pushnil(L);
  while (all && lua_next(L, idx)) {
    ts_device d;
    all = to_device(L, -2, &d) && to_device(L, -1, &d);
    any = true;
    lua_pop(L, 1);
  }
  if (!all) lua_pop(L, 1); /* the key lua_next left */
  return any && all;
}

/* Checks the map_location at idx (before the file is read), so a bad one
 * is named whatever the file holds. */
static void check_map_location(lua_State *L, int idx) {
  static const char *const expected =
      "a device (\"cpu\", \"cuda:0\", torch.device), a table of devices ({[\"cuda:1\"] = \"cuda:0\"}) or a function";
  ts_device d;
  int t = lua_type(L, idx);
  if (t == LUA_TNIL || t == LUA_TFUNCTION) return;
  if (t == LUA_TSTRING || is_torch_device(L, idx)) {
    if (!to_device(L, idx, &d)) lt_errorf(L, "torch.load: map_location: %s", ts_last_error());
    if (ts_device_resolve(&d)) lt_errorf(L, "torch.load: %s", ts_last_error()); /* t:to(dev)'s words */
    return;
  }
  if (t != LUA_TTABLE || lua_getmetatable(L, idx))
    lt_errorf(L, "torch.load: map_location: expected %s, got %s", expected, luaL_typename(L, idx));
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (!to_device(L, -2, &d))
      lt_errorf(L, "torch.load: map_location: the key %s is not a device (\"cpu\", \"cuda:1\")",
                lua_type(L, -2) == LUA_TSTRING ? lua_pushfstring(L, "'%s'", lua_tostring(L, -2)) : luaL_typename(L, -2));
    if (!to_device(L, -1, &d)) /* a device that is not here fails when a tensor goes there, as in PyTorch */
      lt_errorf(L, "torch.load: map_location: the value for '%s' is not a device (\"cpu\", \"cuda:0\")",
                luaL_tolstring(L, -2, NULL));
    lua_pop(L, 1);
  }
}

/* Moves the freshly read (CPU) tensor on top of the stack where the
 * map_location at ml sends a tensor saved from `location`. */
static void place_tensor(lua_State *L, int ml, const char *location) {
  ts_device to, from, key;
  int t = lua_type(L, ml);
  if (t == LUA_TNIL) return;
  if (t == LUA_TFUNCTION) {
    int tensor = lua_gettop(L);
    lua_pushvalue(L, ml);
    lua_pushvalue(L, tensor);
    lua_pushstring(L, location);
    lua_call(L, 2, 1);
    if (lua_isnil(L, -1)) return (void)lua_pop(L, 1);
    if (!lt_test(L, -1))
      lt_errorf(L, "torch.load: the map_location function returned a %s; expected a tensor, or nil to keep it as read",
                luaL_typename(L, -1));
    lua_replace(L, tensor);
    return;
  }
  if (t == LUA_TTABLE && !is_torch_device(L, ml)) {
    if (ts_device_parse(location, &from)) return;
    bool found = false;
    lua_pushnil(L);
    while (!found && lua_next(L, ml)) {
      found = to_device(L, -2, &key) && key.type == from.type && (key.index < 0 || key.index == from.index) &&
              to_device(L, -1, &to);
      lua_pop(L, 1);
    }
    if (found) lua_pop(L, 1); /* the key lua_next left */
    else return;
  } else {
    to_device(L, ml, &to);
  }
  if (ts_device_resolve(&to)) lt_errorf(L, "torch.load: map_location: %s", ts_last_error());
  if (to.type == TS_CPU) return;
  char devname[32];
  ts_device_str(to, devname, sizeof devname);
  lua_getfield(L, -1, "to"); /* the device backend's copy, as t:to(dev) does it */
  lua_insert(L, -2);
  lua_pushstring(L, devname);
  lua_call(L, 2, 1);
}

/* torch.load(path [, map_location] [, {map_location =, flat =, metadata =}]): the
 * object, as PyTorch's (one value, so that model:load_state_dict(torch.load(p))
 * passes no second argument); with metadata = true also the file's metadata
 * strings */
static int l_load(lua_State *L) {
  load_ctx c = {lt_checkpath(L, 1, "torch.load"), 0};
  lua_settop(L, 3);
  int ml = 0, opts;
  if (lua_isfunction(L, 2) || lua_type(L, 2) == LUA_TSTRING || is_torch_device(L, 2) || is_device_map(L, 2)) {
    ml = 2;
    opts = lt_opts_index(L, 3);
    if (!opts && !lua_isnil(L, 3)) return luaL_typeerror(L, 3, "options table ({flat=, metadata=})");
  } else {
    opts = lt_opts_index(L, 2);
    if (!opts && !lua_isnil(L, 2))
      return luaL_typeerror(L, 2, "map_location (a device, a table of devices or a function) or options table");
    if (!lua_isnil(L, 3)) return luaL_typeerror(L, 3, "nothing after the options table");
  }
  static const char *const known[] = {"map_location", "flat", "metadata", NULL};
  lt_opts_check(L, opts, "torch.load", known); /* a misspelt option would otherwise be ignored silently */
  bool flat = lt_opt_bool(L, opts, "flat", false), with_metadata = lt_opt_bool(L, opts, "metadata", false);
  if (opts && lua_getfield(L, opts, "map_location") != LUA_TNIL) {
    if (ml) lt_errorf(L, "torch.load: 'map_location' given both as an argument and as an option");
    ml = lua_gettop(L);
  }
  if (ml) lua_pushvalue(L, ml);
  else lua_pushnil(L);
  lua_replace(L, 2);
  lua_settop(L, 2);
  ml = 2;
  check_map_location(L, ml);

  file_box *fb = push_file_box(L); /* 3 */
  LT_TRY(L, ts_safetensors_open(c.path, &fb->sf));
  ts_safetensors *sf = fb->sf;

  lua_createtable(L, 0, sf->nmeta); /* 4: the metadata strings */
  const char *doc = NULL, *devices_doc = NULL;
  for (int i = 0; i < sf->nmeta; i++) {
    lua_pushstring(L, sf->meta_values[i]);
    lua_setfield(L, 4, sf->meta_keys[i]);
    if (strcmp(sf->meta_keys[i], META_KEY) == 0) doc = sf->meta_values[i];
    if (strcmp(sf->meta_keys[i], DEVICES_KEY) == 0) devices_doc = sf->meta_values[i];
  }
  /* the tree is checked before any tensor data is read */
  json_box *jb = push_json_box(L); /* 5 */
  if (doc && !flat) {
    jb->root = cJSON_Parse(doc);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(jb->root, "format");
    if (!cJSON_IsObject(jb->root)) corrupt(L, &c, "not a JSON object");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, TREE_FORMAT) != 0)
      luaL_error(L, "torch.load: '%s': written in tensh format '%s', which this tensh (reading '%s') does not "
                 "know; torch.load(path, {flat = true}) reads the tensors alone", c.path,
                 cJSON_IsString(fmt) ? fmt->valuestring : "?", TREE_FORMAT);
    if (!cJSON_GetObjectItemCaseSensitive(jb->root, "root")) corrupt(L, &c, "no root");
  }

  lua_createtable(L, 0, sf->n); /* 6: name -> tensor, read in data order */
  c.by_name = 6;
  json_box *devices = push_json_box(L); /* 7: where each tensor was saved from */
  if (devices_doc) devices->root = cJSON_Parse(devices_doc);
  for (int i = 0; i < sf->n; i++) {
    ts_tensor **slot = lt_newslot(L);
    LT_TRY(L, ts_safetensors_read(sf, i, slot));
    lt_gc_debt(L);
    const cJSON *saved = cJSON_GetObjectItemCaseSensitive(devices->root, sf->entries[i].name);
    place_tensor(L, ml, cJSON_IsString(saved) ? saved->valuestring : "cpu");
    lua_setfield(L, c.by_name, sf->entries[i].name);
  }
  if (jb->root) load_value(L, &c, cJSON_GetObjectItemCaseSensitive(jb->root, "root"));
  else lua_pushvalue(L, c.by_name);
  /* close the file now rather than when the collector gets to the box */
  ts_safetensors_close(fb->sf);
  fb->sf = NULL;
  if (!with_metadata) return 1;
  lua_pushvalue(L, 4);
  return 2;
}

void lt_open_save(lua_State *L) {
  static const luaL_Reg fns[] = {{"save", l_save}, {"load", l_load}, {NULL, NULL}};
  lt_register(L, fns, NULL);
}
