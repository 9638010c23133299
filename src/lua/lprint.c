/* Printing tensors the way PyTorch does: __tostring (so print(t) and
 * tostring(t)) through the core formatter (src/io/format.c), and
 * torch.set_printoptions / torch.get_printoptions. */
#include "lt.h"
#include "autograd/autograd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/format.h"

#define LT_STRBOX "tensh.strbox"

/* The formatted string lives in a box whose __gc frees it, so that a memory
 * error raised while Lua copies it cannot leak it. */
static int strbox_gc(lua_State *L) {
  char **box = luaL_checkudata(L, 1, LT_STRBOX);
  free(*box);
  *box = NULL;
  return 0;
}

static int tensor_tostring(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  char **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, LT_STRBOX);
  size_t len;
  /* grad_fn names come with the autograd layer; until then none is passed */
  if (t->base) ts_ag_refresh(t); /* a view whose base's history changed prints the new grad_fn */
  LT_TRY(L, ts_tensor_format(t, t->grad_fn ? t->grad_fn->name : NULL, box, &len));
  lua_pushlstring(L, *box, len);
  free(*box);
  *box = NULL;
  return 1;
}

static const char *const option_names[] = {"precision", "threshold", "edgeitems", "linewidth", "sci_mode",
                                           "profile", NULL};

static int64_t opt_int(lua_State *L, const char *key) {
  int isint = 0;
  lua_Integer v = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
  if (!isint) luaL_error(L, "set_printoptions: option '%s' must be an integer, got %s", key,
                         lua_type(L, -1) == LUA_TNUMBER ? "a non-integral number" : luaL_typename(L, -1));
  return v;
}

/* torch.set_printoptions({precision=, threshold=, edgeitems=, linewidth=,
 * sci_mode=, profile=}). As in PyTorch, options not given keep their value,
 * except sci_mode, which every call resets to automatic unless given; a
 * profile ("default", "short", "full") is applied first. */
static int l_set_printoptions(lua_State *L) {
  int opts = lua_gettop(L) >= 1 && !lua_isnil(L, 1) ? 1 : 0;
  if (opts && lua_type(L, 1) != LUA_TTABLE) luaL_typeerror(L, 1, "table of options");
  ts_print_options o;
  ts_print_options_get(&o);
  o.sci_mode = -1;
  if (opts) {
    lt_opts_check(L, opts, "set_printoptions", option_names);
    if (lua_getfield(L, opts, "profile") != LUA_TNIL) {
      const char *p = lua_tostring(L, -1);
      ts_print_options d = ts_print_options_default();
      if (lua_type(L, -1) != LUA_TSTRING) p = NULL;
      if (p && strcmp(p, "default") == 0) {
        o = d;
      } else if (p && strcmp(p, "short") == 0) {
        o = d;
        o.precision = 2;
        o.edgeitems = 2;
      } else if (p && strcmp(p, "full") == 0) {
        o = d;
        o.threshold = HUGE_VAL;
      } else {
        luaL_error(L, "set_printoptions: profile must be \"default\", \"short\" or \"full\", got %s",
                   p ? p : luaL_typename(L, -1));
      }
    }
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "precision") != LUA_TNIL) {
      int64_t v = opt_int(L, "precision");
      if (v < 0 || v > 100) luaL_error(L, "set_printoptions: precision must be in [0, 100], got %I", (lua_Integer)v);
      o.precision = (int)v;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "threshold") != LUA_TNIL) {
      if (lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "set_printoptions: option 'threshold' must be a number, got %s", luaL_typename(L, -1));
      o.threshold = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "edgeitems") != LUA_TNIL) o.edgeitems = opt_int(L, "edgeitems");
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "linewidth") != LUA_TNIL) o.linewidth = opt_int(L, "linewidth");
    lua_pop(L, 1);
    int ty = lua_getfield(L, opts, "sci_mode");
    if (ty != LUA_TNIL) {
      if (ty != LUA_TBOOLEAN)
        luaL_error(L, "set_printoptions: option 'sci_mode' must be a boolean or nil (automatic), got %s",
                   luaL_typename(L, -1));
      o.sci_mode = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
  }
  LT_TRY(L, ts_print_options_set(&o));
  return 0;
}

/* The current options as a table that set_printoptions accepts back. */
static int l_get_printoptions(lua_State *L) {
  ts_print_options o;
  ts_print_options_get(&o);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, o.precision);
  lua_setfield(L, -2, "precision");
  if (o.threshold == floor(o.threshold) && fabs(o.threshold) < 9.0e15) lua_pushinteger(L, (lua_Integer)o.threshold);
  else lua_pushnumber(L, o.threshold);
  lua_setfield(L, -2, "threshold");
  lua_pushinteger(L, o.edgeitems);
  lua_setfield(L, -2, "edgeitems");
  lua_pushinteger(L, o.linewidth);
  lua_setfield(L, -2, "linewidth");
  if (o.sci_mode >= 0) {
    lua_pushboolean(L, o.sci_mode);
    lua_setfield(L, -2, "sci_mode");
  }
  return 1;
}

void lt_open_print(lua_State *L) {
  static const luaL_Reg fns[] = {{"set_printoptions", l_set_printoptions},
                                 {"get_printoptions", l_get_printoptions}, {NULL, NULL}};
  lt_register(L, fns, NULL);
  if (luaL_newmetatable(L, LT_STRBOX)) {
    lua_pushcfunction(L, strbox_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, strbox_gc);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  luaL_getmetatable(L, LT_TENSOR);
  lua_pushcfunction(L, tensor_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}
