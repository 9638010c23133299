/* The `tb` namespace: tb.SummaryWriter over the core's event-file writer
 * (src/io/tbevents.c; images as PNGs from src/data/png.c, laid out by
 * lua/tensh/image.lua), as torch.utils.tensorboard spells it, and torch._isatty
 * for lua/tensh/progress.lua. A writer's userdata owns its C writer and
 * closes it on close(), on __close and on __gc; a closed writer's methods
 * raise. Scratch arrays live in userdata, so a Lua error leaks nothing. */
#include "lt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../data/png.h"
#include "io/tbevents.h"

#define LT_TB_WRITER "tensh.tb.SummaryWriter"

typedef struct tb_box {
  ts_tb_writer *w; /* NULL before the file opened and after close */
} tb_box;

static ts_tb_writer *check_writer(lua_State *L, const char *fn) {
  tb_box *b = lt_check_self(L, LT_TB_WRITER, "SummaryWriter", "writer");
  if (!b->w) luaL_error(L, "%s: the SummaryWriter is closed; open a new one with tb.SummaryWriter(log_dir)", fn);
  return b->w;
}

/* A scalar argument: a number, or a one-element tensor read with :item()
 * (so whatever device :item() handles works here too). */
static double check_value(lua_State *L, int idx, const char *fn, const char *what) {
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_tonumber(L, idx);
  if (lt_test(L, idx)) {
    lua_getfield(L, idx, "item");
    lua_pushvalue(L, idx);
    lua_call(L, 1, 1);
    if (lua_type(L, -1) == LUA_TBOOLEAN) lua_pushnumber(L, lua_toboolean(L, -1)), lua_replace(L, -2);
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
  }
  return lt_errorf(L, "%s: %s must be a number or a one-element tensor, got %s", fn, what, luaL_typename(L, idx));
}

static bool is_integral(lua_State *L, int idx) {
  if (lua_isinteger(L, idx)) return true;
  if (lua_type(L, idx) != LUA_TNUMBER) return false;
  double v = lua_tonumber(L, idx);
  return floor(v) == v && fabs(v) < 9.2e18;
}

static int64_t opt_step(lua_State *L, int idx, const char *fn) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (!is_integral(L, idx))
    return lt_errorf(L, "%s: global_step must be an integer, got %s", fn,
                     lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
  return lt_checkint(L, idx);
}

static double opt_walltime(lua_State *L, int idx, const char *fn) {
  if (lua_isnoneornil(L, idx)) return ts_tb_now();
  if (lua_type(L, idx) != LUA_TNUMBER)
    return lt_errorf(L, "%s: walltime must be a number (seconds since the epoch), got %s", fn, luaL_typename(L, idx));
  return lua_tonumber(L, idx);
}

static const char *check_tag(lua_State *L, int idx, const char *fn) {
  if (lua_type(L, idx) != LUA_TSTRING) return lt_errorf(L, "%s: tag must be a string, got %s", fn, luaL_typename(L, idx)), "";
  return lua_tostring(L, idx);
}

/* tb.SummaryWriter([log_dir] [, {comment = "", flush_secs = 120}]) */
static int l_writer(lua_State *L) {
  static const char *const known[] = {"log_dir", "comment", "flush_secs", NULL};
  int opts = lt_opts_index(L, lua_gettop(L));
  lt_opts_check(L, opts, "SummaryWriter", known);
  const char *comment = "";
  double flush_secs = 120;
  if (opts) {
    if (lua_getfield(L, opts, "comment") != LUA_TNIL) comment = luaL_checkstring(L, -1);
    lua_pop(L, 1);
    flush_secs = lt_opt_number(L, opts, "flush_secs", flush_secs);
    if (lua_getfield(L, opts, "log_dir") != LUA_TNIL) lua_replace(L, 1); /* SummaryWriter({log_dir = ...}) */
    else lua_pop(L, 1);
  }
  if (lua_isnoneornil(L, 1) || (opts == 1 && lua_type(L, 1) != LUA_TSTRING)) {
    /* as PyTorch: runs/<Mon DD_HH-MM-SS>_<hostname><comment> */
    char stamp[64], host[256] = "localhost";
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    strftime(stamp, sizeof stamp, "%b%d_%H-%M-%S", &tmv);
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    lua_pushfstring(L, "runs/%s_%s%s", stamp, host, comment);
    lua_replace(L, 1);
  } else if (lua_type(L, 1) != LUA_TSTRING) {
    return lt_errorf(L, "SummaryWriter: log_dir must be a string, got %s", luaL_typename(L, 1));
  }
  const char *logdir = lt_checkpath(L, 1, "SummaryWriter");
  tb_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->w = NULL;
  luaL_setmetatable(L, LT_TB_WRITER);
  LT_TRY(L, ts_tb_writer_open(logdir, flush_secs, &b->w));
  return 1;
}

/* writer:add_scalar(tag, value, global_step [, walltime]) */
static int m_add_scalar(lua_State *L) {
  ts_tb_writer *w = check_writer(L, "add_scalar");
  const char *tag = check_tag(L, 2, "add_scalar");
  double v = check_value(L, 3, "add_scalar", "scalar_value");
  int64_t step = opt_step(L, 4, "add_scalar");
  LT_TRY(L, ts_tb_add_scalar(w, tag, v, step, opt_walltime(L, 5, "add_scalar")));
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* writer:add_scalars(main_tag, {name = value, ...}, global_step [, walltime]) */
static int m_add_scalars(lua_State *L) {
  ts_tb_writer *w = check_writer(L, "add_scalars");
  const char *main_tag = check_tag(L, 2, "add_scalars");
  if (lua_type(L, 3) != LUA_TTABLE)
    return lt_errorf(L, "add_scalars: tag_scalar_dict must be a table {name = value, ...}, got %s", luaL_typename(L, 3));
  int64_t step = opt_step(L, 4, "add_scalars");
  double walltime = opt_walltime(L, 5, "add_scalars");
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, 3)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      return lt_errorf(L, "add_scalars: the keys of tag_scalar_dict must be strings, got a %s key", luaL_typename(L, -2));
    if (n == 1 << 20) return lt_errorf(L, "add_scalars: too many scalars");
    n++;
    lua_pop(L, 1);
  }
  if (n == 0) return 0;
  /* scratch in userdata: the key strings stay anchored by the table at 3 */
  const char **keys = lua_newuserdatauv(L, sizeof *keys * (size_t)n, 0);
  double *values = lua_newuserdatauv(L, sizeof *values * (size_t)n, 0);
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, 3)) {
    lua_pop(L, 1);
    keys[i++] = lua_tostring(L, -1);
  }
  qsort(keys, (size_t)n, sizeof *keys, cmp_str); /* a stable order of files and records */
  for (i = 0; i < n; i++) {
    lua_getfield(L, 3, keys[i]);
    values[i] = check_value(L, lua_gettop(L), "add_scalars", "each value");
    lua_pop(L, 1);
  }
  LT_TRY(L, ts_tb_add_scalars(w, main_tag, n, keys, values, step, walltime));
  return 0;
}

/* Counts the numbers in a (nested) list, or writes them to out. */
static int64_t list_numbers(lua_State *L, int idx, double *out, int64_t at, int depth) {
  if (depth > 32) return lt_errorf(L, "add_histogram: values nest too deeply"), 0;
  luaL_checkstack(L, 4, "add_histogram: values nest too deeply");
  lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
  for (lua_Integer i = 1; i <= len; i++) {
    int t = lua_rawgeti(L, idx, i);
    if (t == LUA_TNUMBER) {
      if (out) out[at] = lua_tonumber(L, -1);
      at++;
    } else if (t == LUA_TTABLE && !lt_test(L, -1)) {
      at = list_numbers(L, lua_gettop(L), out, at, depth + 1);
    } else {
      return lt_errorf(L, "add_histogram: values must be a tensor or a list of numbers, but found a %s in the list",
                       luaL_typename(L, -1)), 0;
    }
    lua_pop(L, 1);
  }
  return at;
}

/* The values at idx as doubles, kept alive on the stack (a tensor or a userdata). */
static const double *histogram_values(lua_State *L, int idx, int64_t *n) {
  if (lt_test(L, idx)) {
    lua_getfield(L, idx, "cpu");
    lua_pushvalue(L, idx);
    lua_call(L, 1, 1);
    ts_tensor *t = lt_check(L, -1);
    ts_tensor **d = lt_newslot(L);
    LT_TRY(L, ts_to_dtype(t, TS_FLOAT64, d));
    ts_tensor **c = lt_newslot(L);
    LT_TRY(L, ts_contiguous(*d, c));
    LT_TRY(L, ts_host_ready(*c));
    lt_gc_debt(L);
    *n = ts_numel(*c);
    return ts_data(*c);
  }
  if (lua_type(L, idx) != LUA_TTABLE)
    return lt_errorf(L, "add_histogram: values must be a tensor or a list of numbers, got %s", luaL_typename(L, idx)), NULL;
  *n = list_numbers(L, idx, NULL, 0, 0);
  double *buf = lua_newuserdatauv(L, sizeof *buf * (size_t)(*n ? *n : 1), 0);
  list_numbers(L, idx, buf, 0, 0);
  return buf;
}

/* bins: "tensorflow" (default), "auto", "fd", "sturges", "sqrt", a count, or a list of edges */
static void check_bins(lua_State *L, int idx, ts_tb_bins *bins) {
  *bins = (ts_tb_bins){TS_TB_BINS_TENSORFLOW, 0, NULL};
  int t = lua_type(L, idx);
  if (t == LUA_TNIL) return;
  if (t == LUA_TSTRING) {
    static const char *const names[] = {"tensorflow", "auto", "fd", "sturges", "sqrt", NULL};
    static const ts_tb_bins_kind kinds[] = {TS_TB_BINS_TENSORFLOW, TS_TB_BINS_AUTO, TS_TB_BINS_FD, TS_TB_BINS_STURGES,
                                            TS_TB_BINS_SQRT};
    const char *s = lua_tostring(L, idx);
    for (int i = 0; names[i]; i++)
      if (strcmp(s, names[i]) == 0) return (void)(bins->kind = kinds[i]);
    lt_errorf(L, "add_histogram: unknown bins '%s'; use 'tensorflow', 'auto', 'fd', 'sturges', 'sqrt', a count or a list of edges", s);
  } else if (t == LUA_TNUMBER) {
    if (!is_integral(L, idx))
      lt_errorf(L, "add_histogram: bins must be an integer count, got %s", lua_tostring(L, idx));
    bins->kind = TS_TB_BINS_COUNT;
    bins->n = lt_checkint(L, idx);
  } else if (t == LUA_TTABLE) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    double *e = lua_newuserdatauv(L, sizeof *e * (size_t)(n ? n : 1), 0); /* stays on the stack */
    for (lua_Integer i = 1; i <= n; i++) {
      if (lua_rawgeti(L, idx, i) != LUA_TNUMBER) lt_errorf(L, "add_histogram: bin edges must be numbers");
      e[i - 1] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    *bins = (ts_tb_bins){TS_TB_BINS_EDGES, n, e};
  } else {
    lt_errorf(L, "add_histogram: bins must be a string, a count or a list of edges, got %s", luaL_typename(L, idx));
  }
}

/* writer:add_histogram(tag, values, global_step [, {bins = ..., walltime = ...} | walltime]) */
static int m_add_histogram(lua_State *L) {
  ts_tb_writer *w = check_writer(L, "add_histogram");
  const char *tag = check_tag(L, 2, "add_histogram");
  int64_t step = opt_step(L, 4, "add_histogram");
  ts_tb_bins bins = {TS_TB_BINS_TENSORFLOW, 0, NULL};
  double walltime;
  static const char *const known[] = {"bins", "walltime", NULL};
  int opts = lt_opts_index(L, 5);
  lt_opts_check(L, opts, "add_histogram", known);
  if (opts) {
    lua_getfield(L, opts, "bins");
    check_bins(L, lua_gettop(L), &bins);
    lua_getfield(L, opts, "walltime");
    walltime = opt_walltime(L, lua_gettop(L), "add_histogram");
  } else {
    walltime = opt_walltime(L, 5, "add_histogram");
  }
  int64_t n = 0;
  const double *x = histogram_values(L, 3, &n);
  ts_tb_histogram h;
  ts_status st = ts_tb_histogram_make(x, n, &bins, &h);
  if (!st) {
    st = ts_tb_add_histogram(w, tag, &h, step, walltime);
    ts_tb_histogram_free(&h);
  }
  LT_TRY(L, st);
  return 0;
}

/* writer:add_text(tag, text, global_step [, walltime]) */
static int m_add_text(lua_State *L) {
  ts_tb_writer *w = check_writer(L, "add_text");
  const char *tag = check_tag(L, 2, "add_text");
  if (lua_type(L, 3) != LUA_TSTRING)
    return lt_errorf(L, "add_text: text_string must be a string, got %s", luaL_typename(L, 3));
  size_t len;
  const char *s = lua_tolstring(L, 3, &len);
  int64_t step = opt_step(L, 4, "add_text");
  LT_TRY(L, ts_tb_add_text(w, tag, s, len, step, opt_walltime(L, 5, "add_text")));
  return 0;
}

/* writer:add_image(tag, img, global_step [, {dataformats, walltime} | walltime])
 * and add_images: the image as PyTorch's summary.image makes it
 * (lua/tensh/image.lua's tb_image), PNG-encoded. */
static int add_image(lua_State *L, const char *fn, const char *default_format) {
  ts_tb_writer *w = check_writer(L, fn);
  const char *tag = check_tag(L, 2, fn);
  int64_t step = opt_step(L, 4, fn);
  static const char *const known[] = {"dataformats", "walltime", NULL};
  int opts = lt_opts_index(L, 5);
  lt_opts_check(L, opts, fn, known);
  double walltime;
  lua_settop(L, 5);
  lua_pushstring(L, default_format); /* dataformats, at 6 */
  if (opts) {
    if (lua_getfield(L, opts, "dataformats") != LUA_TNIL) lua_replace(L, 6);
    else lua_pop(L, 1);
    lua_getfield(L, opts, "walltime");
    walltime = opt_walltime(L, lua_gettop(L), fn);
    lua_pop(L, 1);
  } else {
    walltime = opt_walltime(L, 5, fn);
  }
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tensh.image");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "tb_image");
  lua_pushstring(L, fn);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 6);
  lua_call(L, 3, 1); /* uint8 (H, W, C) contiguous on the CPU */
  ts_tensor *t = lt_check(L, -1);
  LT_TRY(L, ts_host_ready(t));
  uint8_t *png;
  size_t n;
  LT_TRY(L, ts_png_encode(ts_data(t), t->sizes[0], t->sizes[1], (int)t->sizes[2], 6, &png, &n));
  ts_status st = ts_tb_add_image(w, tag, png, n, t->sizes[0], t->sizes[1], (int)t->sizes[2], step, walltime);
  free(png);
  LT_TRY(L, st);
  return 0;
}

static int m_add_image(lua_State *L) { return add_image(L, "add_image", "CHW"); }
static int m_add_images(lua_State *L) { return add_image(L, "add_images", "NCHW"); }

static int m_flush(lua_State *L) {
  LT_TRY(L, ts_tb_writer_flush(check_writer(L, "flush")));
  return 0;
}

/* close() twice is harmless, as in PyTorch */
static int m_close(lua_State *L) {
  tb_box *b = lt_check_self(L, LT_TB_WRITER, "SummaryWriter", "writer");
  ts_tb_writer *w = b->w;
  b->w = NULL;
  if (w) LT_TRY(L, ts_tb_writer_close(w));
  return 0;
}

/* __close(w, err): raises an I/O error only when no other error is unwinding */
static int m_toclose(lua_State *L) {
  tb_box *b = luaL_checkudata(L, 1, LT_TB_WRITER);
  ts_tb_writer *w = b->w;
  b->w = NULL;
  if (w && ts_tb_writer_close(w) != TS_OK && lua_isnoneornil(L, 2)) return lt_error(L, TS_ERR_IO);
  return 0;
}

static int m_gc(lua_State *L) {
  tb_box *b = luaL_checkudata(L, 1, LT_TB_WRITER);
  if (b->w) ts_tb_writer_close(b->w); /* nowhere to report an error from a finalizer */
  b->w = NULL;
  return 0;
}

static int m_get_logdir(lua_State *L) {
  lua_pushstring(L, ts_tb_writer_logdir(check_writer(L, "get_logdir")));
  return 1;
}

/* the event file's path (for tests and tools) */
static int m_event_file(lua_State *L) {
  lua_pushstring(L, ts_tb_writer_path(check_writer(L, "_event_file")));
  return 1;
}

static int m_tostring(lua_State *L) {
  tb_box *b = luaL_checkudata(L, 1, LT_TB_WRITER);
  if (b->w) lua_pushfstring(L, "SummaryWriter(log_dir='%s')", ts_tb_writer_logdir(b->w));
  else lua_pushliteral(L, "SummaryWriter(closed)");
  return 1;
}

/* torch._isatty(fd): whether stdin (0), stdout (1) or stderr (2) is a terminal */
static int l_isatty(lua_State *L) {
  lua_Integer fd = luaL_optinteger(L, 1, 1);
  FILE *f = fd == 0 ? stdin : fd == 1 ? stdout : fd == 2 ? stderr : NULL;
  if (!f) return luaL_argerror(L, 1, "0 (stdin), 1 (stdout) or 2 (stderr) expected");
  lua_pushboolean(L, isatty(fileno(f)));
  return 1;
}

void lt_open_tb(lua_State *L) {
  static const luaL_Reg torch_fns[] = {{"_isatty", l_isatty}, {NULL, NULL}};
  lt_register(L, torch_fns, NULL);
  static const luaL_Reg methods[] = {{"add_scalar", m_add_scalar}, {"add_scalars", m_add_scalars},
                                     {"add_histogram", m_add_histogram}, {"add_text", m_add_text},
                                     {"add_image", m_add_image}, {"add_images", m_add_images},
                                     {"flush", m_flush}, {"close", m_close}, {"get_logdir", m_get_logdir},
                                     {"_event_file", m_event_file}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__close", m_toclose}, {"__gc", m_gc}, {"__tostring", m_tostring}, {NULL, NULL}};
  lt_new_class(L, LT_TB_WRITER, methods, meta);

  lua_newtable(L); /* tb */
  lua_pushcfunction(L, l_writer);
  lua_setfield(L, -2, "SummaryWriter");
  /* torch.utils.tensorboard.SummaryWriter, as PyTorch spells it */
  if (lua_getfield(L, -3, "utils") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, -5, "utils");
  }
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "tensorboard");
  lua_pop(L, 1);
  lua_setglobal(L, "tb");
}
