/* The argument helpers every binding file shares: errors that name the
 * user's call and argument, integers, sizes, dtypes, devices and keyword
 * options read from the stack, and their values pushed back. (The tensor
 * userdata itself, and the checks of tensor arguments, are ltensor.c's.) */
#include "lt.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ----------------------------------------------------------------- */

/* The position an error names: the caller's line, as luaL_error gives, but
 * past the frames of tensh's own Lua library (lua/tensh, as errors.lua's
 * raise does), so an op that nn or optim calls for the user points at the
 * user's line rather than at the library's. A C caller gives no position. */
static bool in_library(const lua_Debug *ar) { return strncmp(ar->source, "@lua/tensh/", 11) == 0; }

/* The level of the first Lua function at or above `level` (0 if none). */
static int lua_caller(lua_State *L, int level) {
  lua_Debug ar;
  for (; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "S", &ar);
    if (*ar.what != 'C') return level;
  }
  return 0;
}

static void push_where(lua_State *L) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sl", &ar);
    if (in_library(&ar)) continue;
    if (*ar.what == 'C') { /* a C function the library called (tostring calling __tostring) */
      int next = lua_caller(L, level);
      if (next && lua_getstack(L, next, &ar) && lua_getinfo(L, "S", &ar) && in_library(&ar)) {
        level = next;
        continue;
      }
    }
    if (ar.currentline > 0) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      return;
    }
    break;
  }
  lua_pushliteral(L, "");
}

static int raise_message(lua_State *L, const char *msg) {
  push_where(L);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

int lt_errorf(lua_State *L, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return raise_message(L, buf);
}

int lt_error(lua_State *L, ts_status st) {
  (void)st;
  return raise_message(L, ts_last_error());
}

/* luaL_argerror for the checks in this file. When the failing call was made
 * by tensh's Lua library (lua/tensh) rather than by the user, luaL_argerror
 * would name the library's internal call ('?' when it was a tail call or a
 * metamethod) with its argument number, at the library's line. Instead the
 * message names the function the user called (the outermost library frame's
 * name at the user's call site) and points at the user's line; the internal
 * call stays as a detail for a bug report. */
int lt_argerror(lua_State *L, int idx, const char *msg) {
  lua_Debug ar;
  int level = lua_caller(L, 1); /* past C callers (tostring calling __tostring) */
  if (!level || !lua_getstack(L, level, &ar) || !lua_getinfo(L, "S", &ar) || !in_library(&ar))
    return luaL_argerror(L, idx, msg);
  const char *inner = NULL, *outer = NULL;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar)) inner = ar.name;
  for (level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sn", &ar);
    if (*ar.what != 'C' && !in_library(&ar)) break;
    if (ar.name) outer = ar.name; /* the last one seen is the user's call */
  }
  if (!outer) outer = "a tensh function";
  if (!inner) return lt_errorf(L, "%s: %s (argument #%d of an internal call)", outer, msg, idx);
  return lt_errorf(L, "%s: %s (argument #%d of its internal call to '%s')", outer, msg, idx, inner);
}

/* luaL_typeerror's message ("tensor expected, got table", by __name) through lt_argerror */
int lt_typeerror(lua_State *L, int idx, const char *expected) {
  const char *got = lua_type(L, idx) == LUA_TLIGHTUSERDATA ? "light userdata" : lt_value_name(L, idx);
  return lt_argerror(L, idx, lua_pushfstring(L, "%s expected, got %s", expected, got));
}

/* ---- integers, sizes, options ----------------------------------------- */

/* Lua strings may hold NUL bytes; a path cut at one would name another file
 * ("base.safetensors\0x" opening base.safetensors). */
const char *lt_checkpath(lua_State *L, int idx, const char *fn) {
  size_t n;
  const char *p = luaL_checklstring(L, idx, &n);
  if (strlen(p) != n) luaL_error(L, "%s: the path holds a NUL byte (at byte %d); remove it", fn, (int)strlen(p));
  return p;
}

int64_t lt_checkint(lua_State *L, int idx) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum) {
    if (lua_type(L, idx) == LUA_TNUMBER) lt_argerror(L, idx, "number has no integer representation");
    lt_typeerror(L, idx, "integer");
  }
  return v;
}

bool lt_is_a(lua_State *L, int idx, const char *tname) {
  if (!lua_getmetatable(L, idx)) return false;
  luaL_getmetatable(L, tname);
  bool r = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return r;
}

void lt_unsize(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE || !lt_is_a(L, idx, LT_SIZE)) return;
  lua_getfield(L, idx, "_dims");
  lua_replace(L, idx);
}

int lt_sizes(lua_State *L, int idx, int *ndim, int64_t *sizes) {
  idx = lua_absindex(L, idx);
  int n = 0;
  if (lua_type(L, idx) == LUA_TTABLE) {
    int src = idx;
    if (lt_is_a(L, idx, LT_SIZE)) { /* torch.Size keeps its dims in field _dims */
      lua_getfield(L, idx, "_dims");
      src = lua_gettop(L);
    } else if (lt_opts_index(L, idx)) {
      lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
      if (len == 0) { /* an empty list is a 0-dim shape, but an options table is not a shape */
        lua_pushnil(L);
        bool has_keys = lua_next(L, idx) != 0;
        if (has_keys) lua_pop(L, 2);
        if (has_keys) return *ndim = 0, 0;
      }
    }
    lua_Integer len = (lua_Integer)lua_rawlen(L, src);
    if (len > TS_MAX_DIMS) luaL_error(L, "too many dims (%d); tensors have at most %d", (int)len, TS_MAX_DIMS);
    for (lua_Integer i = 1; i <= len; i++) {
      lua_rawgeti(L, src, i);
      int isnum;
      lua_Integer v = lua_tointegerx(L, -1, &isnum);
      if (!isnum) luaL_error(L, "bad size at position %d: integer expected, got %s", (int)i, luaL_typename(L, -1));
      sizes[n++] = v;
      lua_pop(L, 1);
    }
    if (src != idx) lua_pop(L, 1);
    *ndim = n;
    return 1;
  }
  while (lua_type(L, idx + n) == LUA_TNUMBER) {
    if (n >= TS_MAX_DIMS) luaL_error(L, "too many dims; tensors have at most %d", TS_MAX_DIMS);
    sizes[n] = lt_checkint(L, idx + n);
    n++;
  }
  *ndim = n;
  return n;
}

void lt_push_size(lua_State *L, int ndim, const int64_t *sizes) {
  lua_createtable(L, 0, 1);
  lua_createtable(L, ndim, 0);
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, sizes[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "_dims");
  luaL_setmetatable(L, LT_SIZE);
}

/* An options table is a plain table: one with a metatable is a value (a
 * torch.Size, a torch.device: t:to(torch.device("cuda:1")) must move t,
 * not read the device's missing "device" field and stay where it is). */
int lt_opts_index(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  if (lua_getmetatable(L, idx)) return lua_pop(L, 1), 0;
  if (lua_rawlen(L, idx) > 0) return 0; /* a list: sizes or values, not options */
  return idx;
}

/* Optimal string alignment distance (a transposition counts 1), case-blind,
 * as lua/tensh/args.lua's: 3 stands for "more than 2". */
static int name_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > lb + 2 || lb > la + 2 || la > 62 || lb > 62) return 3;
  int d[64][64];
  for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    for (size_t j = 1; j <= lb; j++) {
      int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
      int v = d[i - 1][j - 1] + (ca != cb);
      if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
          d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  }
  return d[la][lb];
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Raises "fn: unknown option 'dtyp' (expected one of: device, dtype,
 * requires_grad; did you mean 'dtype'?)", or "fn: unknown option [2]
 * (options are named; ...)" for a key that is not a string: the wording of
 * args.check_opts, which checks the options of the library's Lua functions.
 * The suggestion is the nearest name within 2 edits (1 for keys of up to 4
 * bytes), case-blind, as tensh.strict suggests field names. */
static int unknown_option(lua_State *L, const char *fn, int key, const char *const *known) {
  const char *names[64];
  size_t n = 0;
  while (known[n] && n < sizeof names / sizeof *names) names[n] = known[n], n++;
  qsort(names, n, sizeof *names, compare_names);
  int kt = lua_type(L, key);
  if (kt == LUA_TSTRING) lua_pushfstring(L, "'%s'", lua_tostring(L, key));
  else if (kt == LUA_TNUMBER || kt == LUA_TBOOLEAN) lua_pushfstring(L, "[%s]", luaL_tolstring(L, key, NULL));
  else lua_pushfstring(L, "[%s]", luaL_typename(L, key));
  const char *shown = lua_tostring(L, -1); /* the key as the message shows it, anchored on the stack */
  if (n == 0) return lt_errorf(L, "%s: unknown option %s (%s takes no options)", fn, shown, fn);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "%s: unknown option %s (%sexpected one of: ", fn, shown,
                  kt == LUA_TSTRING ? "" : "options are named; ");
  luaL_addvalue(&b);
  for (size_t i = 0; i < n; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, names[i]);
  }
  if (kt == LUA_TSTRING) {
    const char *k = lua_tostring(L, key), *best = NULL;
    int best_d = strlen(k) <= 4 ? 1 : 2;
    for (size_t i = 0; i < n; i++) {
      int dd = name_distance(k, names[i]);
      if (dd < best_d || (dd == best_d && !best)) best = names[i], best_d = dd;
    }
    if (best) {
      luaL_addstring(&b, "; did you mean '");
      luaL_addstring(&b, best);
      luaL_addstring(&b, "'?");
    }
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
  return raise_message(L, lua_tostring(L, -1));
}

void lt_opts_check(lua_State *L, int opts, const char *fn, const char *const *known) {
  if (!opts) return;
  opts = lua_absindex(L, opts);
  lua_pushnil(L);
  while (lua_next(L, opts)) {
    lua_pop(L, 1);
    bool ok = false;
    if (lua_type(L, -1) == LUA_TSTRING) {
      size_t len;
      const char *k = lua_tolstring(L, -1, &len);
      for (int i = 0; known[i] && !ok; i++) ok = strlen(known[i]) == len && memcmp(known[i], k, len) == 0;
    }
    if (!ok) unknown_option(L, fn, lua_gettop(L), known);
  }
}

static int opt_field(lua_State *L, int opts, const char *key) {
  if (!opts) return LUA_TNIL;
  return lua_getfield(L, opts, key);
}

/* The option lt_opt_dtype/device is reading, so that an error in its value
 * names it ("randn: option 'dtype': ...") instead of "bad argument #-1". */
static const char *reading_option;

const char *lt_running_name(lua_State *L) {
  const char *fn = NULL;
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name && strcmp(ar.name, "?") != 0) fn = ar.name;
  if (fn && !strncmp(fn, "tensh.", 6)) fn += 6;
  return fn;
}

/* "randn: option 'dtype'<rest>": the running C function's name as its
 * caller called it, when it has one. */
static int option_error(lua_State *L, const char *key, const char *rest) {
  const char *fn = lt_running_name(L);
  return lt_errorf(L, "%s%soption '%s'%s", fn ? fn : "", fn ? ": " : "", key, rest);
}

static int value_error(lua_State *L, int idx, const char *msg) {
  if (idx >= 0 || !reading_option) return lt_argerror(L, idx, msg);
  const char *key = reading_option;
  reading_option = NULL;
  return option_error(L, key, lua_pushfstring(L, ": %s", msg));
}

const char *lt_value_name(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) return lua_tostring(L, -1);
  return luaL_typename(L, idx);
}

static int value_type_error(lua_State *L, int idx, const char *expected) {
  return value_error(L, idx, lua_pushfstring(L, "%s expected, got %s", expected, lt_value_name(L, idx)));
}

ts_dtype lt_check_dtype(lua_State *L, int idx) {
  const char *s = lua_tostring(L, idx);
  if (!s) value_type_error(L, idx, "dtype (a name such as \"float32\", or torch.float32)");
  ts_dtype d;
  if (ts_dtype_from_name(s, &d)) value_error(L, idx, ts_last_error());
  return d;
}

ts_device lt_check_device(lua_State *L, int idx) {
  ts_device d;
  if (lua_type(L, idx) == LUA_TNUMBER) { /* a bare ordinal means a CUDA device, as in torch */
    if (!lua_isinteger(L, idx) && lua_tonumber(L, idx) != (lua_Number)(lua_Integer)lua_tonumber(L, idx))
      value_error(L, idx, "a device ordinal must be an integer");
    lua_Integer i = lt_checkint(L, idx);
    return (ts_device){TS_CUDA, (int8_t)(i < 0 || i > 126 ? 127 : i)};
  }
  if (luaL_testudata(L, idx, LT_DEVICE) == NULL && lua_type(L, idx) == LUA_TTABLE) {
    lua_getfield(L, idx, "_str");
    const char *s = lua_tostring(L, -1);
    if (!s) { /* not a device: the message names the table (idx may be relative) */
      lua_pop(L, 1);
      value_type_error(L, idx, "device");
    }
    if (ts_device_parse(s, &d)) value_error(L, idx, ts_last_error());
    lua_pop(L, 1);
    return d;
  }
  const char *s = lua_tostring(L, idx);
  if (!s) value_type_error(L, idx, "device (a string such as \"cpu\" or \"cuda:0\")");
  if (ts_device_parse(s, &d)) value_error(L, idx, ts_last_error());
  return d;
}

ts_dtype lt_opt_dtype(lua_State *L, int opts, ts_dtype dflt) {
  ts_dtype d = dflt;
  if (opt_field(L, opts, "dtype") != LUA_TNIL) reading_option = "dtype", d = lt_check_dtype(L, -1);
  reading_option = NULL;
  if (opts) lua_pop(L, 1);
  return d;
}

ts_device lt_opt_device(lua_State *L, int opts, ts_device dflt) {
  ts_device d = dflt;
  if (opt_field(L, opts, "device") != LUA_TNIL) reading_option = "device", d = lt_check_device(L, -1);
  reading_option = NULL;
  if (opts) lua_pop(L, 1);
  return d;
}

bool lt_opt_bool(lua_State *L, int opts, const char *key, bool dflt) {
  bool v = dflt;
  int t = opt_field(L, opts, key);
  if (t != LUA_TNIL) {
    if (t != LUA_TBOOLEAN) option_error(L, key, lua_pushfstring(L, " must be a boolean, got %s", lt_value_name(L, -1)));
    v = lua_toboolean(L, -1);
  }
  if (opts) lua_pop(L, 1);
  return v;
}

double lt_opt_number(lua_State *L, int opts, const char *key, double dflt) {
  double v = dflt;
  int t = opt_field(L, opts, key);
  if (t != LUA_TNIL) {
    if (t != LUA_TNUMBER) option_error(L, key, lua_pushfstring(L, " must be a number, got %s", lt_value_name(L, -1)));
    v = lua_tonumber(L, -1);
  }
  if (opts) lua_pop(L, 1);
  return v;
}

int64_t lt_opt_int(lua_State *L, int opts, const char *key, int64_t dflt) {
  int64_t v = dflt;
  int t = opt_field(L, opts, key);
  if (t != LUA_TNIL) {
    int isnum;
    v = lua_tointegerx(L, -1, &isnum);
    if (!isnum)
      option_error(L, key, lua_pushfstring(L, " must be an integer, got %s",
                                           t == LUA_TNUMBER ? "a number with a fraction" : lt_value_name(L, -1)));
  }
  if (opts) lua_pop(L, 1);
  return v;
}

void lt_push_dtype(lua_State *L, ts_dtype d) {
  lua_pushfstring(L, "torch.%s", ts_dtype_name(d));
}

void lt_push_device(lua_State *L, ts_device d) {
  char buf[32];
  ts_device_str(d, buf, sizeof buf);
  lua_createtable(L, 0, 3);
  lua_pushstring(L, d.type == TS_CPU ? "cpu" : "cuda");
  lua_setfield(L, -2, "type");
  if (d.index >= 0) {
    lua_pushinteger(L, d.index);
    lua_setfield(L, -2, "index");
  }
  lua_pushstring(L, buf);
  lua_setfield(L, -2, "_str");
  luaL_setmetatable(L, LT_DEVICE);
}
