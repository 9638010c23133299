/* The interactive prompt: readline editing, history, completion, printing of
 * values, multi-line input, and Ctrl-C handling. */
#ifndef TENSH_REPL_H
#define TENSH_REPL_H

#include <lua.h>

void ts_shell_repl(lua_State *L);
void ts_shell_install_signals(void);
/* While on, Ctrl-C stops running Lua code (a hook) and C kernels (the flag). */
void ts_shell_catch_interrupts(lua_State *L, int on);
int ts_shell_docall(lua_State *L, int nargs, int nres);

#endif
