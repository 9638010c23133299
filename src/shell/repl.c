/* The REPL, after lua.c: each line is tried as `return <line>` first so
 * expressions print (a trailing ';' hides the value), then as statements
 * followed by a trailing expression (`loss:backward(); w.grad`, as IPython
 * prints it); an incomplete chunk (its syntax error ends in <eof>) asks for
 * more with ">> ". Values print through tensh.shell's show (tables
 * readably), and errors with the user's frames only.
 *
 * Ctrl-C has two jobs. While code runs, the SIGINT handler sets a hook that
 * raises "interrupted!" in Lua and ts_interrupt_flag, which C kernels poll.
 * At the prompt, readline runs through its callback interface in a select()
 * loop, and the handler wakes that loop through a pipe, so the half-typed
 * line is dropped and the terminal restored by readline itself. */
#include "repl.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "core/tensh.h"

/* ---- Ctrl-C ------------------------------------------------------------------ */

/* instructions between checks of a pending interrupt; also reaches the
 * coroutines, which inherit the hook of the thread that creates them */
#define HOOK_COUNT 1000

static lua_State *volatile active_L;        /* the state running code, while interrupts are caught */
static volatile sig_atomic_t lua_interrupt; /* Ctrl-C seen, not yet back at the prompt */
static int wake_pipe[2] = {-1, -1};         /* at the prompt, signals write their number here */

static void interrupt_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  if (!lua_interrupt) return;
  /* from now on raise at every instruction until the prompt is back, so a
   * pcall in the interrupted code cannot swallow the Ctrl-C (a loop around
   * the pcall gets the next one); count events only, so the C message
   * handler runs undisturbed */
  lua_sethook(L, interrupt_hook, LUA_MASKCOUNT, 1);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
  (void)sig;
  int saved = errno;
  lua_State *L = active_L;
  if (L) {
    ts_interrupt_flag = 1; /* C kernels poll this */
    lua_interrupt = 1;
    lua_sethook(L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  } else if (wake_pipe[1] >= 0) {
    char c = SIGINT;
    ssize_t r = write(wake_pipe[1], &c, 1);
    (void)r; /* a full pipe already holds a wake-up */
  }
  errno = saved;
}

/* SIGTSTP and SIGWINCH, while the prompt waits: handled in the read loop */
static void on_prompt_signal(int sig) {
  int saved = errno;
  char c = (char)sig;
  ssize_t r = write(wake_pipe[1], &c, 1);
  (void)r;
  errno = saved;
}

static void set_prompt_signals(int on) {
  if (wake_pipe[0] < 0) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on ? on_prompt_signal : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTSTP, &sa, NULL);
  sigaction(SIGWINCH, &sa, NULL);
}

void ts_shell_install_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a blocking read returns EINTR */
}

void ts_shell_catch_interrupts(lua_State *L, int on) {
  if (on) {
    lua_interrupt = 0;
    ts_interrupt_flag = 0;
    /* a standing count hook, unless the user set a hook of their own */
    if (lua_gethook(L) == NULL) lua_sethook(L, interrupt_hook, LUA_MASKCOUNT, HOOK_COUNT);
    active_L = L;
  } else {
    active_L = NULL;
    if (lua_gethook(L) == interrupt_hook) lua_sethook(L, NULL, 0, 0);
    lua_interrupt = 0;
    ts_interrupt_flag = 0;
  }
}

/* ---- reading a line ------------------------------------------------------------ */

static char *cb_line; /* the line readline handed over, NULL at end of input */
static int cb_done;

static void on_line(char *line) {
  cb_line = line;
  cb_done = 1;
  rl_callback_handler_remove(); /* before the next prompt, as Python does */
}

/* Reads the pending signal numbers; returns SIGINT if one was a Ctrl-C. */
static int drain_wake_pipe(int act) {
  char buf[64];
  ssize_t n;
  int intr = 0;
  while (wake_pipe[0] >= 0 && (n = read(wake_pipe[0], buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n && act; i++) {
      if (buf[i] == SIGINT) {
        intr = 1;
      } else if (buf[i] == SIGWINCH) {
        rl_resize_terminal();
      } else if (buf[i] == SIGTSTP) { /* Ctrl-Z: give the terminal back as found, stop, retake it */
        rl_deprep_terminal();
        signal(SIGTSTP, SIG_DFL);
        raise(SIGTSTP);
        set_prompt_signals(1);
        rl_prep_terminal(0);
        rl_forced_update_display();
      }
    }
  }
  return intr;
}

enum { LINE_OK, LINE_EOF, LINE_INTERRUPTED };

/* Reads one line with editing; *line is malloc'd on LINE_OK. */
static int read_line(const char *prompt, char **line) {
  fflush(stdout);
  fflush(stderr);
  drain_wake_pipe(0); /* a Ctrl-C typed before the prompt showed is not for it */
  cb_done = 0;
  cb_line = NULL;
  set_prompt_signals(1);
  rl_callback_handler_install(prompt, on_line);
  int in = fileno(rl_instream ? rl_instream : stdin);
  int r = LINE_OK;
  while (!cb_done) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(in, &fds);
    int maxfd = in;
    if (wake_pipe[0] >= 0) {
      FD_SET(wake_pipe[0], &fds);
      if (wake_pipe[0] > maxfd) maxfd = wake_pipe[0];
    }
    int n = select(maxfd + 1, &fds, NULL, NULL, NULL);
    if (n < 0) {
      if (errno == EINTR) continue; /* the signal also wrote to the pipe */
      rl_callback_handler_remove();
      r = LINE_EOF;
      break;
    }
    if (wake_pipe[0] >= 0 && FD_ISSET(wake_pipe[0], &fds) && drain_wake_pipe(1)) {
      /* leave the half-typed line on screen, marked, and start afresh */
      FILE *out = rl_outstream ? rl_outstream : stdout;
      rl_point = rl_end;
      rl_redisplay();
      fputs("^C\n", out); /* before the handler goes: leaving moves to column 0 */
      fflush(out);
      rl_free_line_state();
      rl_callback_sigcleanup();
      rl_callback_handler_remove();
      r = LINE_INTERRUPTED;
      break;
    }
    if (FD_ISSET(in, &fds)) rl_callback_read_char();
  }
  set_prompt_signals(0);
  if (r == LINE_OK && !cb_line) r = LINE_EOF;
  if (r == LINE_OK) *line = cb_line;
  return r;
}

/* ---- history --------------------------------------------------------------------- */

#define HISTORY_MAX 1000

static char *history_path; /* NULL: no history file */
static int history_added;  /* entries added this session, appended at exit */
static int history_saved;

static void history_open(void) {
  using_history();
  stifle_history(HISTORY_MAX);
  /* timestamps mark where an entry starts, so multi-line chunks come back whole */
  history_comment_char = '#'; /* timestamps are written as #<seconds> */
  history_write_timestamps = 1;
  history_multiline_entries = 1;
  const char *env = getenv("TENSH_HISTORY");
  if (env) {
    if (*env) history_path = strdup(env); /* TENSH_HISTORY= turns the file off */
  } else {
    const char *home = getenv("HOME");
    if (home && *home) {
      size_t n = strlen(home) + sizeof "/.tensh_history";
      history_path = malloc(n);
      if (history_path) snprintf(history_path, n, "%s/.tensh_history", home);
    }
  }
  if (history_path) read_history(history_path); /* a missing file is a first session */
}

static void history_add(const char *chunk) {
  const char *p = chunk;
  while (*p == ' ' || *p == '\t' || *p == '\n') p++;
  if (!*p) return;
  HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  if (last && strcmp(last->line, chunk) == 0) return; /* no consecutive duplicates */
  add_history(chunk);
  history_added++;
}

/* Appends this session's entries; runs at the end of the REPL and from
 * atexit, since os.exit() leaves without returning. Errors are ignored: an
 * unwritable home must not spoil the exit. */
static void history_save(void) {
  if (history_saved || !history_path) return;
  history_saved = 1;
  int n = history_added < history_length ? history_added : history_length;
  if (n > 0) {
    if (access(history_path, F_OK) == 0) append_history(n, history_path);
    else write_history(history_path);
    history_truncate_file(history_path, HISTORY_MAX);
  }
}

/* ---- evaluating ---------------------------------------------------------------- */

static int shell_ref = LUA_NOREF; /* the tensh.shell module, or a nil ref if it did not load */

/* Prints the values above base: tensh.shell.show, or print without it. */
static void print_results(lua_State *L, int base) {
  int n = lua_gettop(L) - base;
  if (n == 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  if (lua_rawgeti(L, LUA_REGISTRYINDEX, shell_ref) != LUA_TTABLE || lua_getfield(L, -1, "show") != LUA_TFUNCTION) {
    lua_settop(L, base + n);
    lua_getglobal(L, "print");
  } else {
    lua_remove(L, -2);
  }
  lua_insert(L, base + 1);
  if (ts_shell_docall(L, n, 0) != LUA_OK) {
    fprintf(stderr, "error printing the value (%s)\n", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

/* help, dir, exit, quit, plot and imshow as globals, from tensh.shell (unless the user's
 * own globals of those names exist, e.g. set by -e) */
static void load_shell_module(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tensh.shell");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
    fprintf(stderr, "tensh: the prompt's helpers did not load (%s)\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    return;
  }
  static const char *const names[] = {"help", "dir", "exit", "quit", "plot", "imshow", NULL};
  for (int i = 0; names[i]; i++) {
    if (lua_getglobal(L, names[i]) == LUA_TNIL) {
      lua_getfield(L, -2, names[i]);
      lua_setglobal(L, names[i]);
    }
    lua_pop(L, 1);
  }
  shell_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* ---- errors at the prompt --------------------------------------------------------- */

/* The library's own chunks (lua/tensh/...) and C functions are not where
 * a user looks for a mistake: the prompt and the script runner leave them
 * out of tracebacks. */
int ts_shell_user_frame(const lua_Debug *ar) {
  if (ar->currentline <= 0 || strcmp(ar->what, "C") == 0) return 0;
  return strncmp(ar->source, "@lua/tensh/", 11) != 0;
}
#define user_source ts_shell_user_frame

/* Length of a leading "file:line: " in msg, 0 if none. */
size_t ts_shell_location_prefix(const char *msg) {
  const char *c = msg;
  while (*c && *c != ':' && *c != '\n' && *c != ' ') c++;
  if (*c != ':' || c == msg) return 0;
  const char *d = ++c;
  while (*d >= '0' && *d <= '9') d++;
  if (d == c || d[0] != ':' || d[1] != ' ') return 0;
  return (size_t)(d + 2 - msg);
}

/* The message handler at the prompt: the message located at the user's
 * innermost line (not at the library file that raised), then the user's
 * frames only, and only when there is more than the line typed. The
 * Jupyter kernel (lua/tensh/jupyter.lua) uses it too. */
int ts_shell_msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  if (strncmp(msg, "lua/tensh/", 10) == 0) msg += ts_shell_location_prefix(msg);
  char trace[2048];
  size_t used = 0;
  trace[0] = '\0';
  const char *where = NULL; /* the innermost user frame, "file:line" */
  lua_Debug ar;
  int frames = 0;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sln", &ar) || !user_source(&ar)) continue;
    if (frames == 0) where = lua_pushfstring(L, "%s:%d", ar.short_src, ar.currentline);
    if (frames < 8 && used < sizeof trace) {
      char fn[96];
      if (ar.name) snprintf(fn, sizeof fn, "function '%s'", ar.name);
      else snprintf(fn, sizeof fn, "%s", *ar.what == 'm' ? "the line typed" : "a function");
      used += (size_t)snprintf(trace + used, sizeof trace - used, "\n\t%s:%d: in %s", ar.short_src, ar.currentline, fn);
    }
    frames++;
  }
  if (used >= sizeof trace) used = sizeof trace - 1;
  /* no frame of the user's: the line typed was `return f(...)`, and the tail
   * call replaced its frame; a line that is an expression is one line */
  if (!where) where = "stdin:1";
  int located = ts_shell_location_prefix(msg) > 0 || strcmp(msg, "interrupted!") == 0;
  lua_pushfstring(L, "%s%s%s%s%s", located ? "" : where, located ? "" : ": ", msg,
                  frames > 1 ? "\ntraceback (your code, innermost first):" : "", frames > 1 ? trace : "");
  return 1;
}

/* Runs the compiled line on the stack, as ts_shell_docall but with the handler above. */
static int repl_call(lua_State *L) {
  int base = lua_gettop(L);
  lua_pushcfunction(L, ts_shell_msghandler);
  lua_insert(L, base);
  ts_shell_catch_interrupts(L, 1);
  int st = lua_pcall(L, 0, LUA_MULTRET, base);
  ts_shell_catch_interrupts(L, 0);
  lua_remove(L, base);
  return st;
}

/* Is the syntax error at the top about a chunk that is merely unfinished? */
static int incomplete(lua_State *L, int st) {
  if (st != LUA_ERRSYNTAX) return 0;
  size_t lmsg;
  const char *msg = lua_tolstring(L, -1, &lmsg);
  static const char eof[] = "<eof>";
  size_t le = sizeof eof - 1;
  /* "syntax error near <eof>": an expression where a statement must be
   * (`t.shape` after `do`); only an assignment on the next line would
   * complete it, which nobody types, so it is an error, not a '>>' */
  static const char expr[] = "syntax error near <eof>";
  size_t lx = sizeof expr - 1;
  if (lmsg >= lx && strcmp(msg + lmsg - lx, expr) == 0) return 0;
  return lmsg >= le && strcmp(msg + lmsg - le, eof) == 0;
}

/* Where `a; b; expr` splits: the last ';' outside strings, comments and
 * brackets ({1; 2} is a table), with something after it; 0 when none. */
static size_t last_statement_end(const char *s, size_t n) {
  size_t found = 0;
  int depth = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '"' || c == '\'') {
      for (i++; i < n && s[i] != c; i++)
        if (s[i] == '\\') i++;
    } else if (c == '[' && (s[i + 1] == '[' || s[i + 1] == '=')) { /* a long string */
      size_t j = i + 1, level = 0;
      while (j < n && s[j] == '=') j++, level++;
      if (j < n && s[j] == '[') {
        for (i = j + 1; i < n; i++) {
          if (s[i] != ']') continue;
          size_t k = i + 1, l = 0;
          while (k < n && s[k] == '=') k++, l++;
          if (l == level && k < n && s[k] == ']') { i = k; break; }
        }
      } else {
        depth++;
      }
    } else if (c == '-' && s[i + 1] == '-') {
      break; /* a comment to the end of the line */
    } else if (c == '(' || c == '{' || c == '[') {
      depth++;
    } else if (c == ')' || c == '}' || c == ']') {
      depth--;
    } else if (c == ';' && depth == 0) {
      size_t k = i + 1;
      while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == ';')) k++;
      if (k < n) found = i + 1;
    }
  }
  return found;
}

/* Compiles `return <line>`; pushes the function on success, nothing on failure. */
static int load_return(lua_State *L, const char *line) {
  const char *ret = lua_pushfstring(L, "return %s;", line);
  int st = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
  lua_remove(L, -2);
  if (st != LUA_OK) lua_pop(L, 1);
  return st;
}

/* Compiles `stmts; return <expr>` for a line `stmts; expr`; as load_return. */
static int load_statements_then_return(lua_State *L, const char *line, size_t len) {
  size_t cut = last_statement_end(line, len);
  if (cut == 0) return LUA_ERRSYNTAX;
  const char *chunk = lua_pushfstring(L, "%s return %s;", lua_pushlstring(L, line, cut), line + cut);
  int st = luaL_loadbuffer(L, chunk, strlen(chunk), "=stdin");
  lua_remove(L, -2);
  lua_remove(L, -2);
  if (st != LUA_OK) lua_pop(L, 1);
  return st;
}

/* Pushes the chunk with its top-level `local`s made globals, so that a
 * variable declared on one line is there on the next (lua/tensh/prompt_locals.lua),
 * or the chunk itself when there is nothing to change. */
static const char *globalize_locals(lua_State *L, const char *chunk) {
  int top = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tensh.prompt_locals");
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_getfield(L, -1, "rewrite") == LUA_TFUNCTION) {
    lua_pushstring(L, chunk);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) {
      lua_replace(L, top + 1);
      lua_settop(L, top + 1);
      return lua_tostring(L, -1);
    }
  }
  lua_settop(L, top);
  return lua_pushstring(L, chunk);
}

/* Reads and compiles one chunk; pushes the function, or an error message.
 * Returns a LINE_* code, with *st the load status and *quiet set when a
 * trailing ';' asks that the values not be printed. */
static int read_chunk(lua_State *L, int *st, int *quiet) {
  char *line;
  int r = read_line("> ", &line);
  if (r != LINE_OK) return r;
  size_t len = strlen(line);
  size_t end = len;
  while (end > 0 && (line[end - 1] == ' ' || line[end - 1] == '\t')) end--;
  *quiet = end > 0 && line[end - 1] == ';';
  size_t e = end;
  if (*quiet) { /* `f(x);` still runs as an expression, so `1 + 1;` works */
    while (e > 0 && (line[e - 1] == ';' || line[e - 1] == ' ' || line[e - 1] == '\t')) e--;
  }
  char saved = line[e];
  line[e] = '\0';
  const char *src = globalize_locals(L, line);
  *st = load_return(L, src);
  if (*st != LUA_OK) *st = load_statements_then_return(L, src, strlen(src));
  if (*st == LUA_OK) lua_remove(L, -2); /* src */
  else lua_pop(L, 1);
  line[e] = saved;
  if (*st == LUA_OK) {
    history_add(line);
    free(line);
    return LINE_OK;
  }
  /* a statement, maybe over several lines */
  lua_pushstring(L, line); /* the chunk so far */
  free(line);
  for (;;) {
    size_t n;
    const char *chunk = lua_tolstring(L, -1, &n);
    *st = luaL_loadbuffer(L, chunk, n, "=stdin");
    if (!incomplete(L, *st)) break;
    lua_pop(L, 1);
    r = read_line(">> ", &line);
    if (r != LINE_OK) {
      lua_pop(L, 1);
      return r;
    }
    lua_pushfstring(L, "%s\n%s", chunk, line);
    free(line);
    lua_remove(L, -2);
  }
  if (*st == LUA_OK) { /* the whole statement, with its top-level locals made globals */
    globalize_locals(L, lua_tostring(L, -2)); /* chunk, fn, src */
    if (!lua_rawequal(L, -1, -3)) {
      size_t n;
      const char *src = lua_tolstring(L, -1, &n);
      if (luaL_loadbuffer(L, src, n, "=stdin") == LUA_OK) lua_replace(L, -3); /* chunk, new fn, src */
      else lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  history_add(lua_tostring(L, -2));
  lua_remove(L, -2);
  return LINE_OK;
}

void ts_shell_repl(lua_State *L) {
  if (pipe(wake_pipe) == 0) {
    for (int i = 0; i < 2; i++) fcntl(wake_pipe[i], F_SETFL, fcntl(wake_pipe[i], F_GETFL) | O_NONBLOCK);
    for (int i = 0; i < 2; i++) fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC);
  }
  rl_readline_name = "tensh"; /* for $if tensh in ~/.inputrc */
  rl_catch_signals = 0;       /* ours, through the wake pipe; readline's act only inside its calls */
  rl_catch_sigwinch = 0;
  ts_shell_complete_init(L);
  load_shell_module(L);
  history_open();
  atexit(history_save);
  for (;;) {
    int base = lua_gettop(L);
    int st = LUA_OK, quiet = 0;
    int r = read_chunk(L, &st, &quiet);
    if (r == LINE_EOF) break;
    if (r == LINE_INTERRUPTED) continue;
    if (st == LUA_OK) st = repl_call(L);
    if (st == LUA_OK) {
      if (!quiet) print_results(L, base);
    } else {
      fprintf(stderr, "%s\n", lua_tostring(L, -1));
    }
    lua_settop(L, base);
  }
  printf("\n");
  fflush(stdout);
  history_save();
}
