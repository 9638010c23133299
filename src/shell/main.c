/* tensh: the tensor shell. Options follow lua5.4's: `tensh script.lua args`,
 * -e stat, -i, -l mod, -v, -h, and a REPL when there is nothing to run. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tensh.h"
#include "repl.h"

int luaopen_tensh(lua_State *L);

static const char *usage =
    "usage: tensh [options] [script [args]]\n"
    "Available options are:\n"
    "  -e stat   execute string 'stat'\n"
    "  -i        enter interactive mode after executing 'script'\n"
    "  -l mod    require library 'mod' into global 'mod'\n"
    "  -v        show version information\n"
    "  -h        show this help\n"
    "  --        stop handling options\n"
    "  -         stop handling options and execute stdin\n";

static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Runs the function at the top with nargs arguments; reports errors on stderr. */
int ts_shell_docall(lua_State *L, int nargs, int nres) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  ts_shell_catch_interrupts(L, 1);
  int st = lua_pcall(L, nargs, nres, base);
  ts_shell_catch_interrupts(L, 0);
  lua_remove(L, base);
  return st;
}

static int report(lua_State *L, int st) {
  if (st != LUA_OK) {
    fprintf(stderr, "tensh: %s\n", lua_tostring(L, -1));
    fflush(stderr);
    lua_pop(L, 1);
  }
  return st;
}

static int dochunk(lua_State *L, int st) {
  if (st == LUA_OK) st = ts_shell_docall(L, 0, 0);
  return report(L, st);
}

static int run_script(lua_State *L, char **argv, int script, int argc) {
  const char *fname = argv[script];
  if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0) fname = NULL; /* stdin */
  int st = luaL_loadfile(L, fname);
  if (st != LUA_OK) return report(L, st);
  int n = 0;
  for (int i = script + 1; i < argc; i++, n++) lua_pushstring(L, argv[i]);
  return report(L, ts_shell_docall(L, n, LUA_MULTRET));
}

/* the global `arg`: script at 0, its arguments from 1, options below 0 */
static void create_arg_table(lua_State *L, char **argv, int argc, int script) {
  lua_createtable(L, argc - script, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int open_libs(lua_State *L) {
  luaL_openlibs(L);
  luaL_requiref(L, "tensh", luaopen_tensh, 0);
  lua_pop(L, 1);
  return 0;
}

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "tensh: cannot create Lua state: not enough memory\n");
    return 1;
  }
  lua_pushcfunction(L, open_libs);
  if (report(L, lua_pcall(L, 0, 0, 0)) != LUA_OK) return 1;

  /* first pass: find the script and check options */
  int script = 0, interactive = 0, version = 0, has_e = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) { script = i; break; }
    if (strcmp(a, "--") == 0) { if (i + 1 < argc) script = i + 1; break; }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      printf("%s", usage);
      lua_close(L);
      return 0;
    }
    if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) version = 1;
    else if (strcmp(a, "-i") == 0) interactive = version = 1;
    else if (strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "tensh: '%s' needs argument\n%s", a, usage);
        lua_close(L);
        return 1;
      }
      has_e |= a[1] == 'e';
      i++;
    } else {
      fprintf(stderr, "tensh: unrecognized option '%s'\n%s", a, usage);
      lua_close(L);
      return 1;
    }
  }
  if (version) printf("tensh %s (Lua %s.%s)\n", TS_VERSION, LUA_VERSION_MAJOR, LUA_VERSION_MINOR);
  create_arg_table(L, argv, argc, script ? script : argc);
  ts_shell_install_signals();
  /* second pass: -e and -l in order */
  int end = script ? script : argc;
  for (int i = 1; i < end; i++) {
    if (strcmp(argv[i], "-e") == 0) {
      if (dochunk(L, luaL_loadbuffer(L, argv[i + 1], strlen(argv[i + 1]), "=(command line)")) != LUA_OK) {
        lua_close(L);
        return 1;
      }
      i++;
    } else if (strcmp(argv[i], "-l") == 0) {
      lua_getglobal(L, "require");
      lua_pushstring(L, argv[i + 1]);
      int st = ts_shell_docall(L, 1, 1);
      if (report(L, st) != LUA_OK) {
        lua_close(L);
        return 1;
      }
      lua_setglobal(L, argv[i + 1]);
      i++;
    }
  }
  int rc = 0;
  if (script && run_script(L, argv, script, argc) != LUA_OK) rc = 1;
  if (interactive || (!script && !has_e && !version)) ts_shell_repl(L);
  lua_close(L);
  return rc;
}
