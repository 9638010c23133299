/* The REPL, after lua.c: each line is tried as `return <line>` first so
 * expressions print; an incomplete chunk (ends in <eof>) asks for more. */
#include "repl.h"

#include <lauxlib.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tensh.h"

static lua_State *volatile active_L; /* the state running code, while interrupts are caught */

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
  (void)sig;
  lua_State *L = active_L;
  if (L) {
    ts_interrupt_flag = 1; /* C kernels poll this */
    lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  }
}

void ts_shell_install_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
}

void ts_shell_catch_interrupts(lua_State *L, int on) {
  active_L = on ? L : NULL;
  if (!on) ts_interrupt_flag = 0;
}

static void print_results(lua_State *L, int base) {
  int n = lua_gettop(L) - base;
  if (n == 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "print");
  lua_insert(L, base + 1);
  if (ts_shell_docall(L, n, 0) != LUA_OK) {
    fprintf(stderr, "error calling 'print' (%s)\n", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

static int incomplete(lua_State *L, int st) {
  if (st != LUA_ERRSYNTAX) return 0;
  size_t lmsg;
  const char *msg = lua_tolstring(L, -1, &lmsg);
  const char *eof = "<eof>";
  size_t le = strlen(eof);
  if (lmsg >= le && strcmp(msg + lmsg - le, eof) == 0) {
    lua_pop(L, 1);
    return 1;
  }
  return 0;
}

void ts_shell_repl(lua_State *L) {
  for (;;) {
    char *line = readline("> ");
    if (!line) break; /* Ctrl-D */
    size_t len = strlen(line);
    char *buf = malloc(len + 1);
    if (!buf) { free(line); break; }
    memcpy(buf, line, len + 1);
    free(line);
    int st;
    int base = lua_gettop(L);
    const char *ret = lua_pushfstring(L, "return %s;", buf);
    st = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
    lua_remove(L, -2);
    if (st != LUA_OK) {
      lua_pop(L, 1);
      for (;;) {
        st = luaL_loadbuffer(L, buf, len, "=stdin");
        if (!incomplete(L, st)) break;
        char *more = readline(">> ");
        if (!more) break;
        size_t ml = strlen(more);
        char *nb = realloc(buf, len + ml + 2);
        if (!nb) { free(more); break; }
        buf = nb;
        buf[len++] = '\n';
        memcpy(buf + len, more, ml + 1);
        len += ml;
        free(more);
      }
    }
    if (len > 0) add_history(buf);
    free(buf);
    if (st == LUA_OK) st = ts_shell_docall(L, 0, LUA_MULTRET);
    if (st == LUA_OK) print_results(L, base);
    else {
      fprintf(stderr, "%s\n", lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    lua_settop(L, base);
  }
  printf("\n");
}
