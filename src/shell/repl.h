/* The interactive prompt: readline editing, history, completion, printing of
 * values, multi-line input, and Ctrl-C handling. */
#ifndef TENSH_REPL_H
#define TENSH_REPL_H

#include <lua.h>

/* Reads, runs and prints until Ctrl-D or os.exit(). */
void ts_shell_repl(lua_State *L);
void ts_shell_install_signals(void);
/* While on, Ctrl-C stops running Lua code (a hook) and C kernels (the flag). */
void ts_shell_catch_interrupts(lua_State *L, int on);
/* Calls the function below nargs arguments with a traceback handler and
 * interrupts caught; leaves nres results or the error message. */
int ts_shell_docall(lua_State *L, int nargs, int nres);
/* Whether a frame is the user's code: Lua, not C, not tensh's own lua/tensh. */
int ts_shell_user_frame(const lua_Debug *ar);
/* Length of a leading "file:line: " in msg, 0 if none. */
size_t ts_shell_location_prefix(const char *msg);
/* Tab completion (complete.c) of the names in L's globals. */
void ts_shell_complete_init(lua_State *L);
/* lua_CFunctions the Jupyter kernel shares with the prompt: the message
 * handler (the user's line and frames) and completion (word -> {name =
 * is_function}, the names that complete the last part of word). */
int ts_shell_msghandler(lua_State *L);
int ts_shell_completions(lua_State *L);
/* The shell's Lua allocator (lua_alloc.c): small blocks on free lists. Set
 * right after luaL_newstate; ts_shell_pool_close closes the state (lua_close)
 * and frees the lists. */
void ts_shell_pool_allocator(lua_State *L);
void ts_shell_pool_close(lua_State *L);

#endif
