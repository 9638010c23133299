/* Tab completion for the prompt: globals and keywords, fields of tables
 * (`torch.cuda.is_<TAB>`), tensor methods after `t:` / `t.`, and the
 * methods and fields of objects (`model:`, `model.fc`, `opt:`, `loader:`).
 *
 * Completion must never run user code: names are found by raw reads only
 * (lua_rawget / lua_next over _G and tables), following a metatable's
 * __index only when it is itself a table. The one __index function we look
 * through is the tensor's, whose methods table is its upvalue (torch._methods);
 * tensor properties come from a fixed list, since reading them means a call.
 * The one function called is tensh's own loader of a namespace that loads
 * on first use (nn, optim, ...: lua/tensh/lazy.lua), so that its names show.
 * Inside a string literal, readline's filename completion takes over. */
#include <lauxlib.h>
#include <readline/readline.h>
#include <stdlib.h>
#include <string.h>

#include "../lua/lt.h"
#include "repl.h"

#define MAX_DEPTH 8 /* __index chains followed, so a cycle cannot loop */

static lua_State *comp_L; /* the state whose names are completed */

static const char *const keywords[] = {"and",   "break", "do",   "else",   "elseif", "end",   "false", "for",
                                       "function", "goto", "if", "in",   "local",  "nil",   "not",   "or",
                                       "repeat", "return", "then", "true", "until", "while", NULL};

/* read through __index, so not in the methods table (see push_property in ltensor.c) */
static const char *const tensor_properties[] = {"shape",   "dtype",         "device", "ndim",    "is_cuda",
                                                "is_leaf", "requires_grad", "grad",   "grad_fn", "T",
                                                NULL};

/* ---- finding names ---------------------------------------------------------- */

/* where nn.Module keeps an instance's children, parameters, buffers and
 * other attributes (an ordered table's `vals`, or a plain table) */
static const char *const regs[] = {"_modules", "_parameters", "_buffers", "_attrs", NULL};

static int is_keyword(const char *s, size_t n) {
  for (int i = 0; keywords[i]; i++)
    if (strlen(keywords[i]) == n && memcmp(keywords[i], s, n) == 0) return 1;
  return 0;
}

static int is_ident(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return 0;
  }
  return !is_keyword(s, n);
}

/* If the value at idx is a tensor, pushes its methods table (the upvalue of
 * the tensor __index) and returns 1; otherwise pushes nothing and returns 0. */
static int push_tensor_methods(lua_State *L, int idx) {
  int top = lua_gettop(L);
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return 0;
  luaL_getmetatable(L, LT_TENSOR);
  if (lua_rawequal(L, -1, -2)) {
    lua_pushliteral(L, "__index");
    if (lua_rawget(L, -3) == LUA_TFUNCTION && lua_getupvalue(L, -1, 1) && lua_type(L, -1) == LUA_TTABLE) {
      lua_replace(L, top + 1);
      lua_settop(L, top + 1);
      return 1;
    }
  }
  lua_settop(L, top);
  return 0;
}

/* If the value at idx has a metatable whose __index is a table, pushes that
 * table and returns 1; otherwise pushes nothing and returns 0. */
static int push_index_table(lua_State *L, int idx) {
  if (!lua_getmetatable(L, idx)) return 0;
  lua_pushliteral(L, "__index");
  if (lua_rawget(L, -2) == LUA_TTABLE) {
    lua_remove(L, -2);
    return 1;
  }
  lua_pop(L, 2);
  return 0;
}

/* A namespace of tensh's that is still a stub (lua/tensh/lazy.lua) is loaded. */
static void load_lazy(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return;
  int t = luaL_getmetafield(L, idx, "__tensh_lazy");
  if (t == LUA_TNIL) return;
  if (t != LUA_TFUNCTION || lua_pcall(L, 0, 0, 0) != LUA_OK) lua_pop(L, 1);
}

/* Pushes value[key] as a plain read would find it, without running code:
 * a raw read, then the __index table chain; a tensor gives its methods. */
static void raw_field(lua_State *L, int idx, const char *key, size_t klen, int depth) {
  idx = lua_absindex(L, idx);
  load_lazy(L, idx);
  if (lua_type(L, idx) == LUA_TTABLE) {
    lua_pushlstring(L, key, klen);
    if (lua_rawget(L, idx) != LUA_TNIL) return;
    lua_pop(L, 1);
  }
  if (depth < MAX_DEPTH && (push_tensor_methods(L, idx) || push_index_table(L, idx))) {
    raw_field(L, -1, key, klen, depth + 1);
    lua_remove(L, -2);
    return;
  }
  if (lua_type(L, idx) == LUA_TTABLE) { /* an nn.Module's child, parameter or buffer */
    for (int i = 0; regs[i]; i++) {
      lua_pushstring(L, regs[i]);
      if (lua_rawget(L, idx) == LUA_TTABLE) {
        lua_pushliteral(L, "vals");
        if (lua_rawget(L, -2) != LUA_TTABLE) lua_pop(L, 1);
        else lua_remove(L, -2);
        lua_pushlstring(L, key, klen);
        if (lua_rawget(L, -2) != LUA_TNIL) {
          lua_remove(L, -2);
          return;
        }
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
  }
  lua_pushnil(L);
}

/* Adds to the set at `out` (name -> is it a function) the identifier keys of
 * the table at idx that start with prefix. Names starting with '_' are left
 * out unless the prefix asks for them. */
static void add_keys(lua_State *L, int idx, int out, const char *prefix, size_t plen) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    size_t n;
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &n) : NULL;
    if (k && n >= plen && memcmp(k, prefix, plen) == 0 && is_ident(k, n) && (k[0] != '_' || plen > 0)) {
      int fn = lua_type(L, -1) == LUA_TFUNCTION;
      lua_pushvalue(L, -2);
      lua_pushboolean(L, fn);
      lua_rawset(L, out);
    }
    lua_pop(L, 1);
  }
}

static void add_list(lua_State *L, const char *const *names, int fn, int out, const char *prefix, size_t plen) {
  for (int i = 0; names[i]; i++) {
    if (strncmp(names[i], prefix, plen) != 0) continue;
    lua_pushboolean(L, fn);
    lua_setfield(L, out, names[i]);
  }
}

/* nn.Module keeps an instance's children, parameters and buffers in
 * registries (an ordered table's `vals`, or a plain table) and its other
 * attributes in _attrs; its __index function reads them. */
static void add_registries(lua_State *L, int idx, int out, const char *prefix, size_t plen) {
  for (int i = 0; regs[i]; i++) {
    lua_pushstring(L, regs[i]);
    if (lua_rawget(L, idx) == LUA_TTABLE) {
      lua_pushliteral(L, "vals");
      if (lua_rawget(L, -2) == LUA_TTABLE) add_keys(L, -1, out, prefix, plen);
      else add_keys(L, -2, out, prefix, plen);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* Adds the names reachable from the value at idx: its own keys when it is a
 * table, then those its __index tables (or tensor methods) provide. An
 * __index function is never called: for a table whose metatable has one (a
 * class instance: nn.Module, a strict table) the metatable's own keys and
 * its __index tables stand for what the function finds, with the module
 * registries above. */
static void add_fields(lua_State *L, int idx, int out, const char *prefix, size_t plen, int colon, int depth) {
  idx = lua_absindex(L, idx);
  load_lazy(L, idx);
  if (lua_type(L, idx) == LUA_TTABLE) add_keys(L, idx, out, prefix, plen);
  if (depth >= MAX_DEPTH) return;
  if (push_tensor_methods(L, idx)) {
    add_keys(L, -1, out, prefix, plen);
    lua_pop(L, 1);
    if (!colon) add_list(L, tensor_properties, 0, out, prefix, plen);
  } else if (push_index_table(L, idx)) {
    add_fields(L, -1, out, prefix, plen, colon, depth + 1);
    lua_pop(L, 1);
  } else if (lua_type(L, idx) == LUA_TTABLE && lua_getmetatable(L, idx)) {
    lua_pushliteral(L, "__index");
    int kind = lua_rawget(L, -2);
    lua_pop(L, 1);
    if (kind == LUA_TFUNCTION) {
      add_fields(L, -1, out, prefix, plen, colon, depth + 1);
      if (!colon) add_registries(L, idx, out, prefix, plen);
    }
    lua_pop(L, 1);
  }
}

/* lua_pcall'd: (word) -> {name = is_function}, the full completions of word.
 * The word is `a.b.c:pre`, `a.b.pre` or `pre`. The Jupyter kernel's
 * complete_request asks it too (lua/tensh/jupyter.lua). */
int ts_shell_completions(lua_State *L) {
  size_t len;
  const char *word = luaL_checklstring(L, 1, &len);
  lua_newtable(L);
  int out = lua_gettop(L);
  size_t sep = len;
  while (sep > 0 && word[sep - 1] != '.' && word[sep - 1] != ':') sep--;
  const char *prefix = word + sep;
  size_t plen = len - sep;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  if (sep == 0) { /* a global or a keyword */
    add_fields(L, -1, out, prefix, plen, 0, 0);
    add_list(L, keywords, 0, out, prefix, plen);
    lua_pushvalue(L, out);
    return 1;
  }
  if (sep == 1) return 0; /* `.x` after a bracket or a call: its value is unknown */
  int colon = word[sep - 1] == ':';
  /* walk the path a.b.c; every part an identifier, ':' only before the last */
  for (size_t b = 0; b < sep - 1;) {
    size_t e = b;
    while (e < sep - 1 && word[e] != '.') e++;
    if (!is_ident(word + b, e - b)) return 0; /* also refuses a ':' inside the path */
    raw_field(L, -1, word + b, e - b, 0);
    lua_remove(L, -2);
    b = e + 1;
  }
  if (lua_isnil(L, -1)) return 0;
  add_fields(L, -1, out, prefix, plen, colon, 0);
  lua_pushvalue(L, out);
  return 1;
}

/* ---- the readline side ------------------------------------------------------ */

static char **matches;   /* the candidates of the completion under way */
static size_t n_matches; /* how many */
static int single_is_function;

static void free_matches(void) {
  for (size_t i = 0; i < n_matches; i++) free(matches[i]);
  free(matches);
  matches = NULL;
  n_matches = 0;
}

/* Fills `matches` with the completions of word; on any Lua error, none. */
static void collect(const char *word) {
  lua_State *L = comp_L;
  free_matches();
  single_is_function = 0;
  int top = lua_gettop(L);
  lua_pushcfunction(L, ts_shell_completions);
  lua_pushstring(L, word);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || lua_type(L, -1) != LUA_TTABLE) {
    lua_settop(L, top);
    return;
  }
  size_t sep = strlen(word);
  while (sep > 0 && word[sep - 1] != '.' && word[sep - 1] != ':') sep--;
  size_t cap = 0;
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    size_t n;
    const char *name = lua_tolstring(L, -2, &n);
    if (n_matches + 1 >= cap) {
      size_t nc = cap ? 2 * cap : 16;
      char **m = realloc(matches, nc * sizeof *m);
      if (!m) break;
      matches = m;
      cap = nc;
    }
    char *s = malloc(sep + n + 1);
    if (!s) break;
    memcpy(s, word, sep);
    memcpy(s + sep, name, n + 1);
    matches[n_matches++] = s;
    single_is_function = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_settop(L, top);
}

static char *generator(const char *text, int state) {
  static size_t next;
  (void)text;
  if (state == 0) next = 0;
  if (next >= n_matches) return NULL;
  char *s = matches[next];
  matches[next++] = NULL; /* readline frees what we return */
  return s;
}

static char **attempt(const char *text, int start, int end) {
  (void)start;
  (void)end;
  if (rl_completion_quote_character) return NULL; /* in a string: file names */
  rl_attempted_completion_over = 1;               /* never fall back to file names outside strings */
  collect(text);
  /* a lone function completes to `name(`, a lone keyword to `kw ` */
  rl_completion_append_character = '\0';
  if (n_matches == 1) {
    const char *m = matches[0];
    if (single_is_function) rl_completion_append_character = '(';
    else if (is_keyword(m, strlen(m))) rl_completion_append_character = ' ';
  }
  char **r = n_matches ? rl_completion_matches(text, generator) : NULL;
  free_matches();
  return r;
}

/* Lists `torch.zeros  torch.zeros_like` as `zeros  zeros_like`. */
static void display(char **list, int n, int max_len) {
  (void)max_len;
  size_t sep = strlen(list[0]);
  while (sep > 0 && list[0][sep - 1] != '.' && list[0][sep - 1] != ':') sep--;
  char **shown = malloc((size_t)(n + 2) * sizeof *shown);
  if (!shown) return;
  int max = 0;
  for (int i = 0; i <= n; i++) {
    shown[i] = list[i] + (strlen(list[i]) >= sep ? sep : 0);
    int l = (int)strlen(shown[i]);
    if (i > 0 && l > max) max = l;
  }
  shown[n + 1] = NULL;
  rl_display_match_list(shown, n, max);
  free(shown);
  rl_forced_update_display();
}

static const char lua_breaks[] = " \t\n\"'`@$><=;|&{}()[],+-*/%^~#\\";

/* Inside a string literal only blanks end a word, so a path like "/tmp/x"
 * reaches filename completion whole; elsewhere Lua's operators do, except
 * '.' and ':' so that `torch.ze` and `t:to` complete as one word. */
static char *word_breaks(void) {
  char quote = 0;
  for (int i = 0; i < rl_point && rl_line_buffer[i]; i++) {
    char c = rl_line_buffer[i];
    if (quote) {
      if (c == '\\') i++;
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '-' && rl_line_buffer[i + 1] == '-') {
      break; /* a comment */
    }
  }
  return (char *)(quote ? " \t\n" : lua_breaks);
}

void ts_shell_complete_init(lua_State *L) {
  comp_L = L;
  rl_attempted_completion_function = attempt;
  rl_completion_display_matches_hook = display;
  rl_completion_word_break_hook = word_breaks;
  rl_completer_word_break_characters = lua_breaks;
  rl_completer_quote_characters = "\"'";
}
