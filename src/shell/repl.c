/* The REPL, after lua.c: each line is tried as `return <line>` first so
 * expressions print (a trailing ';' hides the value); an incomplete chunk
 * (its syntax error ends in <eof>) asks for more with ">> ".
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

#include "../tensh.h"

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

/* Is the syntax error at the top about a chunk that is merely unfinished? */
static int incomplete(lua_State *L, int st) {
  if (st != LUA_ERRSYNTAX) return 0;
  size_t lmsg;
  const char *msg = lua_tolstring(L, -1, &lmsg);
  static const char eof[] = "<eof>";
  size_t le = sizeof eof - 1;
  return lmsg >= le && strcmp(msg + lmsg - le, eof) == 0;
}

/* Compiles `return <line>`; pushes the function on success, nothing on failure. */
static int load_return(lua_State *L, const char *line) {
  const char *ret = lua_pushfstring(L, "return %s;", line);
  int st = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
  lua_remove(L, -2);
  if (st != LUA_OK) lua_pop(L, 1);
  return st;
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
  if (*quiet) { /* `f(x);` still runs as an expression, so `1 + 1;` works */
    size_t e = end;
    while (e > 0 && (line[e - 1] == ';' || line[e - 1] == ' ' || line[e - 1] == '\t')) e--;
    char saved = line[e];
    line[e] = '\0';
    *st = load_return(L, line);
    line[e] = saved;
  } else {
    *st = load_return(L, line);
  }
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
  history_open();
  atexit(history_save);
  for (;;) {
    int base = lua_gettop(L);
    int st = LUA_OK, quiet = 0;
    int r = read_chunk(L, &st, &quiet);
    if (r == LINE_EOF) break;
    if (r == LINE_INTERRUPTED) continue;
    if (st == LUA_OK) st = ts_shell_docall(L, 0, LUA_MULTRET);
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
