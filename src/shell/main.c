/* tensh: the tensor shell. Options follow lua5.4's: `tensh script.lua args`,
 * -e stat, -i, -l mod, -v, -W, -h, and a REPL when there is nothing to run
 * (or stdin run as a script when it is not a terminal). Everything runs in
 * a protected call, as in lua.c, so even a memory error reaches the user as
 * a message. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist/dist.h"
#include "core/tensh.h"
#include "repl.h"

int luaopen_tensh(lua_State *L);

static const char *usage =
    "usage: tensh [options] [script [args]]\n"
    "       tensh bench [files or folders] [options]   run benchmarks (tensh bench -h)\n"
    "Available options are:\n"
    "  -e stat   execute string 'stat'\n"
    "  -i        enter interactive mode after executing 'script'\n"
    "  -l mod    require library 'mod' into global 'mod'\n"
    "  -l g=mod  require library 'mod' into global 'g'\n"
    "  -v        show version information\n"
    "  -W        turn warnings on\n"
    "  --nproc N run the script in N processes through mpirun (first option; dist.get_rank() tells them apart)\n"
    "  --jupyter install [--user] [--prefix DIR]   install tensh as a Jupyter kernel (first option)\n"
    "  -h        show this help\n"
    "  --        stop handling options\n"
    "  -         stop handling options and execute stdin\n"
    "The prompt keeps its history in $TENSH_HISTORY (default ~/.tensh_history; empty: none).\n";

// A simulated-device build says so wherever it names itself: its "cuda" runs on the CPU.
#ifdef TS_SIM_DEVICE
#define TS_BUILD_KIND ", simulated CUDA device (kernels run on the CPU)"
#else
#define TS_BUILD_KIND ""
#endif

static void print_version(void) {
  printf("tensh %s (Lua %s.%s%s)\n", TS_VERSION, LUA_VERSION_MAJOR, LUA_VERSION_MINOR, TS_BUILD_KIND);
  fflush(stdout);
}

static void print_banner(void) {
  printf("tensh %s (Lua %s.%s%s) \xe2\x80\x94 torch, cuda loaded; Ctrl-D to exit\n", TS_VERSION, LUA_VERSION_MAJOR,
         LUA_VERSION_MINOR, TS_BUILD_KIND);
  fflush(stdout);
}

/* A script's error: the message, then Lua's "stack traceback:" of the
 * user's frames only. tensh's own Lua library (lua/tensh/...) and the C
 * functions are where nobody looks for the mistake (errors.lua, raise,
 * error, the wrappers: 4 to 6 lines before the user's), so they are left
 * out, and a message positioned inside the library is positioned at the
 * user's innermost line instead. With no frame of the user's (a library
 * chunk run on its own), or with TENSH_TRACEBACK=full, Lua's whole traceback. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  const char *full = getenv("TENSH_TRACEBACK");
  if (full && strcmp(full, "full") == 0) return luaL_traceback(L, L, msg, 1), 1;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_Debug ar;
  int frames = 0;
  size_t inside = strncmp(msg, "lua/tensh/", 10) == 0 ? ts_shell_location_prefix(msg) : 0;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sln", &ar) || !ts_shell_user_frame(&ar)) continue;
    if (frames++ == 0) {
      if (inside) lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg + inside);
      else lua_pushstring(L, msg);
      luaL_addvalue(&b);
      luaL_addstring(&b, "\nstack traceback:");
    }
    if (*ar.namewhat) lua_pushfstring(L, "\n\t%s:%d: in %s '%s'", ar.short_src, ar.currentline,
                                      strcmp(ar.namewhat, "global") == 0 ? "function" : ar.namewhat, ar.name);
    else if (*ar.what == 'm') lua_pushfstring(L, "\n\t%s:%d: in main chunk", ar.short_src, ar.currentline);
    else lua_pushfstring(L, "\n\t%s:%d: in function <%s:%d>", ar.short_src, ar.currentline, ar.short_src, ar.linedefined);
    luaL_addvalue(&b);
  }
  if (frames == 0) return luaL_traceback(L, L, msg, 1), 1;
  luaL_pushresult(&b);
  return 1;
}

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

/* In a job of several processes an error says which rank it came from. */
static int report(lua_State *L, int st) {
  if (st != LUA_OK) {
    const char *rank = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_RANK") : NULL;
    if (rank) fprintf(stderr, "tensh: rank %s: %s\n", rank, lua_tostring(L, -1));
    else fprintf(stderr, "tensh: %s\n", lua_tostring(L, -1));
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

/* `tensh bench ...` (unless ./bench is a script): the benchmark runner,
 * lua/tensh/bench_runner.lua; its exit status becomes tensh's */
static bool is_subcommand(const char *a) {
  struct stat sb;
  return strcmp(a, "bench") == 0 && !(stat(a, &sb) == 0 && S_ISREG(sb.st_mode));
}

static int run_subcommand(lua_State *L, int *code) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tensh.bench_runner");
  int st = ts_shell_docall(L, 1, 1);
  if (st == LUA_OK) {
    lua_getfield(L, -1, "main");
    lua_getglobal(L, "arg");
    st = ts_shell_docall(L, 1, 1);
    if (st == LUA_OK) *code = (int)lua_tointeger(L, -1);
  }
  return report(L, st);
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

/* -l mod or -l g=mod: require mod into the global mod (or g) */
static int require_global(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  const char *mod = eq ? eq + 1 : spec;
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  int st = ts_shell_docall(L, 1, 1);
  if (st == LUA_OK) {
    if (eq) lua_pushlstring(L, spec, (size_t)(eq - spec));
    else lua_pushstring(L, mod);
    lua_insert(L, -2);
    lua_setglobal(L, lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  return report(L, st);
}

/* Lua's collector in generational mode, as lua5.4's own interpreter runs it
 * (lua.c: `lua_gc(L, LUA_GCGEN, 0, 0)`, so `require "tensh"` from lua5.4
 * already had it). Most tensors die young (an op's temporaries at the
 * prompt or in a training step); a young collection visits those, not the
 * ~1.2 MB of library tables a full incremental cycle marks each time, and
 * a 1-element op loop ran 0.43 -> 0.31 us an op. The tensor bytes' own
 * pacing (lt_gc_debt) works in either mode. */
static void collect_generationally(lua_State *L) { lua_gc(L, LUA_GCGEN, 0, 0); }

/* require "tensh" with the collector stopped: what the library builds as it
 * loads lives on (its namespaces), so collections during the load only
 * traverse it to free almost nothing (~5 % of start-up). */
static void open_tensh(lua_State *L) {
  lua_gc(L, LUA_GCSTOP);
  luaL_requiref(L, "tensh", luaopen_tensh, 0);
  lua_pop(L, 1);
  lua_gc(L, LUA_GCRESTART);
}

enum { HAS_E = 1, HAS_I = 2, HAS_V = 4, HAS_W = 8, HAS_ERROR = 16 };

/* Checks the options; returns the HAS_* set and the script's index (0: none). */
static int scan_args(char **argv, int argc, int *script) {
  int flags = 0;
  *script = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) { *script = i; break; }
    if (strcmp(a, "--") == 0) {
      if (i + 1 < argc) *script = i + 1;
      break;
    }
    if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) flags |= HAS_V;
    else if (strcmp(a, "-i") == 0) flags |= HAS_I;
    else if (strcmp(a, "-W") == 0) flags |= HAS_W;
    else if (strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0) {
      if (i + 1 >= argc || argv[i + 1][0] == '-') {
        fprintf(stderr, "tensh: '%s' needs argument\n%s", a, usage);
        return HAS_ERROR;
      }
      if (a[1] == 'e') flags |= HAS_E;
      i++;
    } else {
      fprintf(stderr, "tensh: unrecognized option '%s'\n%s", a, usage);
      return HAS_ERROR;
    }
  }
  return flags;
}

/* lua_pcall'd with (argc, argv); returns true when all went well */
static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  int script;
  int flags = scan_args(argv, argc, &script);
  if (flags & HAS_ERROR) return 0;
  luaL_checkversion(L);
  luaL_openlibs(L);
  collect_generationally(L);
  open_tensh(L);
  if (flags & HAS_W) lua_warning(L, "@on", 0);
  int stdin_tty = isatty(STDIN_FILENO);
  int repl = (flags & HAS_I) || (!script && !(flags & (HAS_E | HAS_V)) && stdin_tty);
  if ((flags & HAS_V) && !repl) print_version();
  create_arg_table(L, argv, argc, script ? script : argc);
  ts_shell_install_signals();
  int end = script ? script : argc;
  for (int i = 1; i < end; i++) { /* -e and -l, in order */
    if (strcmp(argv[i], "-e") == 0) {
      const char *s = argv[++i];
      if (dochunk(L, luaL_loadbuffer(L, s, strlen(s), "=(command line)")) != LUA_OK) return 0;
    } else if (strcmp(argv[i], "-l") == 0) {
      if (require_global(L, argv[++i]) != LUA_OK) return 0;
    } else if (strcmp(argv[i], "--") == 0) {
      break;
    }
  }
  if (script && is_subcommand(argv[script])) {
    int code = 2;
    if (run_subcommand(L, &code) != LUA_OK) return 0;
    lua_pushinteger(L, code);
    return 1;
  }
  if (script && run_script(L, argv, script, argc) != LUA_OK) return 0;
  if (repl) {
    print_banner();
    ts_shell_repl(L);
  } else if (!script && !(flags & (HAS_E | HAS_V))) {
    if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK) return 0; /* stdin is not a terminal: run it */
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* `tensh --nproc N script.lua args`: N copies of `tensh script.lua args` under
 * Open MPI's mpirun on this machine, each with its rank (RANK, LOCAL_RANK,
 * WORLD_SIZE, set by ldist.c from mpirun's variables). Not bound to cores,
 * OpenMP's threads shared out (OMP_NUM_THREADS = cores / N unless set, as
 * torchrun sets it), more processes than cores allowed, root allowed (CI and
 * containers). Returns only on an error. */
static int run_nproc(int argc, char **argv) {
  char *end = NULL;
  long n = argc > 2 ? strtol(argv[2], &end, 10) : 0;
  if (argc < 3 || !end || *end || n < 1 || n > 4096) {
    fprintf(stderr, "tensh: --nproc needs a number of processes (1 to 4096), got '%s'\n", argc > 2 ? argv[2] : "");
    return EXIT_FAILURE;
  }
  if (argc < 4) {
    fprintf(stderr, "tensh: --nproc %ld needs a script to run: tensh --nproc %ld script.lua [args]\n", n, n);
    return EXIT_FAILURE;
  }
  static char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    fprintf(stderr, "tensh: --nproc: cannot find tensh's own path (/proc/self/exe)\n");
    return EXIT_FAILURE;
  }
  self[len] = 0;
  if (!getenv("OMP_NUM_THREADS")) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN), per = cores / n > 0 ? cores / n : 1;
    char v[32];
    snprintf(v, sizeof v, "%ld", per);
    setenv("OMP_NUM_THREADS", v, 1);
  }
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  const char *mpirun = getenv("TENSH_MPIRUN");
  if (!mpirun || !*mpirun) mpirun = "mpirun";
  char **av = calloc((size_t)argc + 8, sizeof *av);
  if (!av) return EXIT_FAILURE;
  int k = 0;
  av[k++] = (char *)mpirun;
  av[k++] = "-np";
  av[k++] = argv[2];
  av[k++] = "--oversubscribe";
  av[k++] = "--bind-to";
  av[k++] = "none";
  av[k++] = self;
  for (int i = 3; i < argc; i++) av[k++] = argv[i];
  execvp(mpirun, av);
  fprintf(stderr, "tensh: --nproc runs the processes with Open MPI's mpirun, which could not be started (%s: %s); "
          "on Debian: apt-get install openmpi-bin\n", mpirun, strerror(errno));
  free(av);
  return EXIT_FAILURE;
}

/* ---- tensh --jupyter ----------------------------------------------------------
 * The Jupyter kernel is lua/tensh/jupyter.lua: `install` writes the
 * kernelspec, `kernel IN OUT` serves the requests of its Python wrapper
 * (ipykernel) on those file descriptors. From C it needs the prompt's ways
 * of running code: interrupts caught, the prompt's message handler and
 * completer. */

/* call(f, ...) -> true, results... | false, message */
static int jupyter_call(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int n = lua_gettop(L) - 1;
  lua_pushcfunction(L, ts_shell_msghandler);
  lua_insert(L, 1);
  ts_shell_catch_interrupts(L, 1);
  int st = lua_pcall(L, n, LUA_MULTRET, 1);
  ts_shell_catch_interrupts(L, 0);
  lua_pushboolean(L, st == LUA_OK);
  lua_replace(L, 1);
  return lua_gettop(L);
}

/* as pmain, for `tensh --jupyter ...`: returns the exit status */
static int pjupyter(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  luaL_checkversion(L);
  luaL_openlibs(L);
  collect_generationally(L);
  open_tensh(L);
  ts_shell_install_signals();
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tensh.jupyter");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "main");
  lua_createtable(L, argc, 0); /* the arguments after --jupyter */
  for (int i = 2; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 1);
  }
  lua_newtable(L);
  lua_pushcfunction(L, jupyter_call);
  lua_setfield(L, -2, "call");
  lua_pushcfunction(L, ts_shell_completions);
  lua_setfield(L, -2, "completions");
  static char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = 0;
    lua_pushstring(L, self);
    lua_setfield(L, -2, "exe");
  }
  lua_call(L, 2, 1);
  return 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--nproc") == 0) return run_nproc(argc, argv);
  for (int i = 1; i < argc && argv[i][0] == '-'; i++) { /* -h answers before anything loads */
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf("%s", usage);
      return EXIT_SUCCESS;
    }
    if (strcmp(argv[i], "--") == 0 || strcmp(argv[i], "-") == 0) break;
    if (strcmp(argv[i], "-e") == 0 || strcmp(argv[i], "-l") == 0) i++;
  }
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "tensh: cannot create Lua state: not enough memory\n");
    return EXIT_FAILURE;
  }
  ts_shell_pool_allocator(L);
  lua_pushcfunction(L, argc > 1 && strcmp(argv[1], "--jupyter") == 0 ? pjupyter : pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int st = lua_pcall(L, 2, 1, 0);
  int ok = st == LUA_OK && lua_toboolean(L, -1);
  int code = st == LUA_OK && lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : ok ? EXIT_SUCCESS : EXIT_FAILURE;
  report(L, st);
  ts_shell_pool_close(L);
  if (code != EXIT_SUCCESS) ts_dist_abort(code); /* a rank that failed ends the job: the others never wait for it */
  return code;
}
