/* The `cuda` table (also torch.cuda): devices, memory, streams and events.
 * Without a CUDA build, a GPU or a driver, is_available() is false,
 * device_count() is 0 and the rest says why it cannot run; nothing crashes. */
#include "lt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_CUDA
#include "core/cuda_api.h"
#include "core/cache_alloc.h"
#define HAVE_CUDA 1
#else
#define HAVE_CUDA 0
#endif

#define LT_STREAM "tensh.cuda.Stream"
#define LT_EVENT "tensh.cuda.Event"
#define LT_SCOPE "tensh.cuda.Scope"
#define LT_PROPS "tensh.cuda.Properties"

static int device_count(void) {
#if HAVE_CUDA
  return ts_cuda_device_count();
#else
  return 0;
#endif
}

static int l_is_available(lua_State *L) { return lua_pushboolean(L, device_count() > 0), 1; }

/* The memory functions take PyTorch's arguments by one rule: a device (nil,
 * an ordinal, "cuda:1", torch.device) positionally or as {device = ...},
 * and memory_summary's abbreviated positionally or as an option; an
 * unknown option raises, in every build. Before the allocator is read, Lua
 * collects what the program dropped: a tensor it let go (x = nil, PyTorch's
 * `del x`) holds its memory until the collector frees it, and without the
 * collection the figures would still count it (a full collection: 0.5 to
 * 1 ms with up to 5,000 live tensors, see docs/porting.md). Leaves the device
 * (or nil) at index 1; returns abbreviated. */
static bool memory_args(lua_State *L, const char *fn, bool summary) {
  static const char *const plain[] = {"device", NULL};
  static const char *const with_abbreviated[] = {"device", "abbreviated", NULL};
  char name[64];
  snprintf(name, sizeof name, "cuda.%s", fn);
  int top = lua_gettop(L);
  int opts = top ? lt_opts_index(L, top) : 0;
  lt_opts_check(L, opts, name, summary ? with_abbreviated : plain);
  int npos = opts ? top - 1 : top, maxpos = summary ? 2 : 1;
  if (npos > maxpos)
    lt_errorf(L, "%s: expected at most %d positional argument%s (%s), got %d", name, maxpos, maxpos > 1 ? "s" : "",
              summary ? "device, abbreviated" : "device", npos);
  int dev = npos >= 1 && !lua_isnil(L, 1) ? 1 : 0, abbrev = npos >= 2 ? 2 : 0;
  if (opts && lua_getfield(L, opts, "device") != LUA_TNIL) {
    if (dev) lt_errorf(L, "%s: 'device' given both as an argument and as an option", name);
    dev = lua_gettop(L);
  }
  if (opts && summary && lua_getfield(L, opts, "abbreviated") != LUA_TNIL) {
    if (abbrev) lt_errorf(L, "%s: 'abbreviated' given both as an argument and as an option", name);
    abbrev = lua_gettop(L);
  }
  if (abbrev && !lua_isboolean(L, abbrev))
    lt_errorf(L, "%s: abbreviated must be a boolean, got %s", name, luaL_typename(L, abbrev));
  bool abbreviated = abbrev && lua_toboolean(L, abbrev);
  if (dev) lua_pushvalue(L, dev);
  else lua_pushnil(L);
  lua_insert(L, 1);
  if (device_count() > 0) lua_gc(L, LUA_GCCOLLECT);
  return abbreviated;
}
static int l_device_count(lua_State *L) { return lua_pushinteger(L, device_count()), 1; }

/* cuda.manual_seed(s), manual_seed_all(s): one counter-based generator serves
 * every device (the same seed gives the same values on the CPU and the GPU),
 * so these seed it, as torch.manual_seed does; without a GPU they still work,
 * as in PyTorch. */
static int l_manual_seed(lua_State *L) {
  ts_manual_seed((uint64_t)lt_checkint(L, 1));
  return 0;
}

#if HAVE_CUDA

static void need_cuda(lua_State *L, const char *fn) {
  if (device_count() == 0)
    lt_errorf(L, "cuda.%s: CUDA is not available (no GPU or driver on this machine; cuda.is_available() is false)", fn);
}

/* A device argument: nil (the current device), an ordinal, "cuda:1", a
 * torch.device or a tensor's device; checked against the devices present. */
static int opt_device(lua_State *L, int idx, const char *fn) {
  need_cuda(L, fn);
  int d;
  if (lua_isnoneornil(L, idx)) {
    d = ts_cuda_current_device();
  } else {
    ts_device dev = lt_check_device(L, idx);
    if (dev.type != TS_CUDA) return lt_errorf(L, "cuda.%s: expected a CUDA device, got cpu", fn);
    d = dev.index < 0 ? ts_cuda_current_device() : dev.index;
  }
  if (ts_cuda_check_device(d)) return lt_errorf(L, "cuda.%s: %s", fn, ts_last_error());
  return d;
}

static int l_current_device(lua_State *L) {
  need_cuda(L, "current_device");
  return lua_pushinteger(L, ts_cuda_current_device()), 1;
}

static int l_set_device(lua_State *L) {
  int d = opt_device(L, 1, "set_device");
  LT_TRY(L, ts_cuda_set_device(d));
  return 0;
}

static int l_synchronize(lua_State *L) {
  LT_TRY(L, ts_cuda_synchronize(opt_device(L, 1, "synchronize")));
  return 0;
}

static int l_get_device_name(lua_State *L) {
  ts_cuda_props p;
  LT_TRY(L, ts_cuda_get_properties(opt_device(L, 1, "get_device_name"), &p));
  return lua_pushstring(L, p.name), 1;
}

static int l_get_device_capability(lua_State *L) {
  ts_cuda_props p;
  LT_TRY(L, ts_cuda_get_properties(opt_device(L, 1, "get_device_capability"), &p));
  lua_pushinteger(L, p.major);
  lua_pushinteger(L, p.minor);
  return 2;
}

static int props_tostring(lua_State *L) {
  /* (called by hand on another value: say so, rather than index it) */
  bool props = lua_type(L, 1) == LUA_TTABLE && lua_getmetatable(L, 1) && luaL_getmetatable(L, LT_PROPS) &&
               lua_rawequal(L, -1, -2);
  if (!props) return luaL_typeerror(L, 1, LT_PROPS);
  lua_settop(L, 1);
  lua_getfield(L, 1, "name");
  lua_getfield(L, 1, "major");
  lua_getfield(L, 1, "minor");
  lua_getfield(L, 1, "total_memory");
  lua_getfield(L, 1, "multi_processor_count");
  lua_getfield(L, 1, "uuid");
  lua_getfield(L, 1, "L2_cache_size");
  lua_pushfstring(L, "_CudaDeviceProperties(name='%s', major=%d, minor=%d, total_memory=%dMB, multi_processor_count=%d, "
                  "uuid=%s, L2_cache_size=%dMB)", lua_tostring(L, 2), (int)lua_tointeger(L, 3), (int)lua_tointeger(L, 4),
                  (int)(lua_tointeger(L, 5) >> 20), (int)lua_tointeger(L, 6), lua_tostring(L, 7),
                  (int)(lua_tointeger(L, 8) >> 20));
  return 1;
}

static int l_get_device_properties(lua_State *L) {
  ts_cuda_props p;
  LT_TRY(L, ts_cuda_get_properties(opt_device(L, 1, "get_device_properties"), &p));
  lua_createtable(L, 0, 12);
  lua_pushstring(L, p.name), lua_setfield(L, -2, "name");
  lua_pushstring(L, p.uuid), lua_setfield(L, -2, "uuid");
  lua_pushinteger(L, (lua_Integer)p.total_memory), lua_setfield(L, -2, "total_memory");
  lua_pushinteger(L, p.major), lua_setfield(L, -2, "major");
  lua_pushinteger(L, p.minor), lua_setfield(L, -2, "minor");
  lua_pushinteger(L, p.multi_processor_count), lua_setfield(L, -2, "multi_processor_count");
  lua_pushinteger(L, p.l2_cache_size), lua_setfield(L, -2, "L2_cache_size");
  lua_pushinteger(L, p.max_threads_per_multi_processor), lua_setfield(L, -2, "max_threads_per_multi_processor");
  lua_pushinteger(L, p.warp_size), lua_setfield(L, -2, "warp_size");
  lua_pushboolean(L, p.is_integrated), lua_setfield(L, -2, "is_integrated");
  lua_pushinteger(L, p.pci_bus_id), lua_setfield(L, -2, "pci_bus_id");
  lua_pushinteger(L, p.pci_device_id), lua_setfield(L, -2, "pci_device_id");
  luaL_setmetatable(L, LT_PROPS);
  return 1;
}

static int l_mem_get_info(lua_State *L) {
  memory_args(L, "mem_get_info", false);
  size_t free_b, total;
  LT_TRY(L, ts_cuda_mem_get_info(opt_device(L, 1, "mem_get_info"), &free_b, &total));
  lua_pushinteger(L, (lua_Integer)free_b);
  lua_pushinteger(L, (lua_Integer)total);
  return 2;
}

static int l_utilization(lua_State *L) {
  int pct;
  LT_TRY(L, ts_cuda_utilization(opt_device(L, 1, "utilization"), &pct));
  return lua_pushinteger(L, pct), 1;
}

/* ---- memory ------------------------------------------------------------ */

/* Without a device the statistics are PyTorch's before CUDA starts: zeros
 * (memory_stats() is empty, the resets have nothing to reset). */
static ts_cache_stats stats_of(lua_State *L, const char *fn) {
  ts_cache_stats s;
  memory_args(L, fn, false);
  if (device_count() == 0) return memset(&s, 0, sizeof s), s;
  LT_TRY(L, ts_cuda_memory_stats(opt_device(L, 1, fn), &s));
  return s;
}

static int l_memory_allocated(lua_State *L) {
  return lua_pushinteger(L, stats_of(L, "memory_allocated").allocated_bytes[TS_POOL_ALL].current), 1;
}
static int l_max_memory_allocated(lua_State *L) {
  return lua_pushinteger(L, stats_of(L, "max_memory_allocated").allocated_bytes[TS_POOL_ALL].peak), 1;
}
static int l_memory_reserved(lua_State *L) {
  return lua_pushinteger(L, stats_of(L, "memory_reserved").reserved_bytes[TS_POOL_ALL].current), 1;
}
static int l_max_memory_reserved(lua_State *L) {
  return lua_pushinteger(L, stats_of(L, "max_memory_reserved").reserved_bytes[TS_POOL_ALL].peak), 1;
}
/* PyTorch's old names, whose errors say the name the user typed */
static int l_memory_cached(lua_State *L) {
  return lua_pushinteger(L, stats_of(L, "memory_cached").reserved_bytes[TS_POOL_ALL].current), 1;
}
static int l_max_memory_cached(lua_State *L) {
  return lua_pushinteger(L, stats_of(L, "max_memory_cached").reserved_bytes[TS_POOL_ALL].peak), 1;
}

static void set_stat(void *ud, const char *key, int64_t v) {
  lua_State *L = ud;
  lua_pushinteger(L, v);
  lua_setfield(L, -2, key);
}

static int l_memory_stats(lua_State *L) {
  ts_cache_stats s = stats_of(L, "memory_stats");
  if (device_count() == 0) return lua_newtable(L), 1;
  lua_newtable(L);
  ts_cache_stats_foreach(&s, set_stat, L);
  return 1;
}

/* abbreviated: PyTorch's, the rows for all pools without the large/small
 * pool breakdown */
static int l_memory_summary(lua_State *L) {
  bool abbreviated = memory_args(L, "memory_summary", true);
  int d = opt_device(L, 1, "memory_summary");
  char *buf = lua_newuserdatauv(L, 16384, 0); /* the collector's, whatever raises */
  LT_TRY(L, ts_cuda_memory_summary(d, buf, 16384));
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (char *line = buf, *end; *line; line = end) {
    end = strchr(line, '\n');
    end = end ? end + 1 : line + strlen(line);
    char saved = *end; /* the line alone, for strstr */
    *end = '\0';
    bool pool_row = strstr(line, "from large pool") || strstr(line, "from small pool");
    *end = saved;
    if (!(abbreviated && pool_row)) luaL_addlstring(&b, line, (size_t)(end - line));
  }
  luaL_pushresult(&b);
  return 1;
}

static int l_reset_peak_memory_stats(lua_State *L) {
  memory_args(L, "reset_peak_memory_stats", false);
  if (device_count() == 0) return 0;
  LT_TRY(L, ts_cuda_reset_peak(opt_device(L, 1, "reset_peak_memory_stats")));
  return 0;
}

static int l_reset_accumulated_memory_stats(lua_State *L) {
  memory_args(L, "reset_accumulated_memory_stats", false);
  if (device_count() == 0) return 0;
  LT_TRY(L, ts_cuda_reset_accumulated(opt_device(L, 1, "reset_accumulated_memory_stats")));
  return 0;
}

/* ---- streams ------------------------------------------------------------- */

typedef struct lstream {
  uintptr_t handle; /* 0: the device's default stream */
  int device;
  bool owned;       /* created here: destroyed when collected */
} lstream;

static lstream *push_stream(lua_State *L, uintptr_t h, int device, bool owned) {
  lstream *s = lua_newuserdatauv(L, sizeof *s, 0);
  s->handle = h, s->device = device, s->owned = owned;
  luaL_setmetatable(L, LT_STREAM);
  return s;
}

static lstream *check_stream(lua_State *L, int idx) { return luaL_checkudata(L, idx, LT_STREAM); }
/* a method's stream: s.query() for s:query() says so */
static lstream *self_stream(lua_State *L) { return lt_check_self(L, LT_STREAM, "cuda.Stream", "stream"); }

/* cuda.Stream([device] | {device=, priority=}) */
static int l_stream_new(lua_State *L) {
  static const char *const known[] = {"device", "priority", NULL};
  int opts = lt_opts_index(L, 1);
  lt_opts_check(L, opts, "cuda.Stream", known);
  int d;
  if (opts) {
    lua_getfield(L, opts, "device");
    d = opt_device(L, lua_gettop(L), "Stream");
    lua_pop(L, 1);
  } else {
    d = opt_device(L, 1, "Stream");
  }
  int priority = (int)lt_opt_number(L, opts, "priority", 0);
  lstream *s = push_stream(L, 0, d, false); /* made first: an error below leaks nothing */
  LT_TRY(L, ts_cuda_stream_create(d, priority, &s->handle));
  s->owned = true;
  return 1;
}

static int stream_gc(lua_State *L) {
  lstream *s = check_stream(L, 1);
  if (s->owned && s->handle) {
    if (ts_cuda_current_stream(s->device) == s->handle) ts_cuda_set_current_stream(s->device, 0);
    ts_cuda_stream_destroy(s->handle);
  }
  s->handle = 0, s->owned = false;
  return 0;
}

static int l_current_stream(lua_State *L) {
  int d = opt_device(L, 1, "current_stream");
  push_stream(L, ts_cuda_current_stream(d), d, false);
  return 1;
}

static int l_default_stream(lua_State *L) {
  push_stream(L, 0, opt_device(L, 1, "default_stream"), false);
  return 1;
}

static int m_stream_synchronize(lua_State *L) {
  lstream *s = self_stream(L);
  LT_TRY(L, ts_cuda_stream_synchronize(s->handle, s->device));
  return 0;
}

static int m_stream_query(lua_State *L) {
  lstream *s = self_stream(L);
  bool done;
  LT_TRY(L, ts_cuda_stream_query(s->handle, s->device, &done));
  return lua_pushboolean(L, done), 1;
}

static int m_stream_wait_stream(lua_State *L) {
  lstream *s = self_stream(L), *o = check_stream(L, 2);
  LT_TRY(L, ts_cuda_stream_wait_stream(s->handle, s->device, o->handle, o->device));
  return 0;
}

static int stream_eq(lua_State *L) {
  lstream *a = luaL_testudata(L, 1, LT_STREAM), *b = luaL_testudata(L, 2, LT_STREAM);
  return lua_pushboolean(L, a && b && a->handle == b->handle && a->device == b->device), 1;
}

/* PyTorch's repr: the handle in hex, 0x0 for the default stream (%p would
 * print "(nil)" there) */
static int stream_tostring(lua_State *L) {
  lstream *s = check_stream(L, 1);
  char handle[24];
  snprintf(handle, sizeof handle, "%#" PRIxPTR, s->handle);
  lua_pushfstring(L, "<torch.cuda.Stream device=cuda:%d cuda_stream=%s>", s->device, s->handle ? handle : "0x0");
  return 1;
}

static int stream_index(lua_State *L) {
  lstream *s = check_stream(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "device") == 0) return lt_push_device(L, (ts_device){TS_CUDA, (int8_t)s->device}), 1;
  if (strcmp(k, "cuda_stream") == 0) return lua_pushinteger(L, (lua_Integer)s->handle), 1;
  luaL_getmetatable(L, LT_STREAM);
  lua_getfield(L, -1, "_methods");
  lua_getfield(L, -1, k);
  return 1;
}

/* ---- scopes: cuda.device(i) and cuda.stream(s) ------------------------------ */

/* A scope restores the device (and that device's stream) current when it
 * was opened; closing twice restores once. */
typedef struct lscope {
  int prev_device;
  int stream_device;     /* -1: no stream to restore */
  uintptr_t prev_stream;
  bool open;
} lscope;

static void scope_restore(lscope *sc) {
  if (!sc->open) return;
  sc->open = false;
  if (sc->stream_device >= 0) ts_cuda_set_current_stream(sc->stream_device, sc->prev_stream);
  ts_cuda_set_device(sc->prev_device);
}

static int scope_close(lua_State *L) {
  scope_restore(luaL_checkudata(L, 1, LT_SCOPE));
  return 0;
}

/* Runs fn (at fn_index) inside the scope on top of the stack, or returns the
 * scope for `<close>`. */
static int scope_run(lua_State *L, int fn_index) {
  if (!lua_isfunction(L, fn_index)) return 1;
  lscope *sc = lua_touserdata(L, -1);
  lua_insert(L, fn_index); /* kept on the stack below fn: not collected while fn runs */
  int nargs = lua_gettop(L) - fn_index - 1;
  int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
  scope_restore(sc);
  if (st != LUA_OK) return lua_error(L);
  return lua_gettop(L) - fn_index;
}

static lscope *push_scope(lua_State *L) {
  lscope *sc = lua_newuserdatauv(L, sizeof *sc, 0);
  sc->prev_device = ts_cuda_current_device(), sc->stream_device = -1, sc->prev_stream = 0, sc->open = true;
  luaL_setmetatable(L, LT_SCOPE);
  return sc;
}

static int l_device_scope(lua_State *L) {
  int d = opt_device(L, 1, "device");
  push_scope(L);
  LT_TRY(L, ts_cuda_set_device(d));
  return scope_run(L, 2);
}

static int l_stream_scope(lua_State *L) {
  need_cuda(L, "stream");
  lstream *s = lua_isnil(L, 1) ? NULL : check_stream(L, 1);
  lscope *sc = push_scope(L);
  if (s) {
    sc->stream_device = s->device;
    sc->prev_stream = ts_cuda_current_stream(s->device);
    LT_TRY(L, ts_cuda_set_device(s->device));
    LT_TRY(L, ts_cuda_set_current_stream(s->device, s->handle));
  }
  return scope_run(L, 2);
}

static int l_set_stream(lua_State *L) {
  lstream *s = check_stream(L, 1);
  LT_TRY(L, ts_cuda_set_device(s->device));
  LT_TRY(L, ts_cuda_set_current_stream(s->device, s->handle));
  return 0;
}

/* ---- events --------------------------------------------------------------- */

typedef struct levent {
  uintptr_t handle; /* created at the first record, on the stream's device */
  int device;
  bool timing, blocking, recorded;
} levent;

static levent *check_event(lua_State *L, int idx) { return luaL_checkudata(L, idx, LT_EVENT); }
/* a method's event: e.record() for e:record() says so */
static levent *self_event(lua_State *L) { return lt_check_self(L, LT_EVENT, "cuda.Event", "event"); }

/* An optional stream argument: the current stream of the current device by default. */
static uintptr_t stream_arg(lua_State *L, int idx, int *device) {
  if (lua_isnoneornil(L, idx)) {
    *device = ts_cuda_current_device();
    return ts_cuda_current_stream(*device);
  }
  lstream *st = check_stream(L, idx);
  *device = st->device;
  return st->handle;
}

/* cuda.Event({enable_timing=, blocking=}) */
static int l_event_new(lua_State *L) {
  static const char *const known[] = {"enable_timing", "blocking", NULL};
  int opts = lt_opts_index(L, 1);
  lt_opts_check(L, opts, "cuda.Event", known); /* a typo is one even without a GPU */
  need_cuda(L, "Event");
  levent *e = lua_newuserdatauv(L, sizeof *e, 0);
  memset(e, 0, sizeof *e);
  e->device = -1;
  luaL_setmetatable(L, LT_EVENT);
  e->timing = lt_opt_bool(L, opts, "enable_timing", false);
  e->blocking = lt_opt_bool(L, opts, "blocking", false);
  return 1;
}

static int event_gc(lua_State *L) {
  levent *e = check_event(L, 1);
  if (e->handle) ts_cuda_event_destroy(e->handle);
  e->handle = 0;
  return 0;
}

/* e:record([stream]): the current stream by default */
static int m_event_record(lua_State *L) {
  levent *e = self_event(L);
  int d;
  uintptr_t s = stream_arg(L, 2, &d);
  if (e->handle && e->device != d)
    return lt_errorf(L, "Event.record: the event was recorded on cuda:%d and cannot be recorded on cuda:%d", e->device, d);
  if (!e->handle) {
    LT_TRY(L, ts_cuda_event_create(d, e->timing, e->blocking, &e->handle));
    e->device = d;
  }
  LT_TRY(L, ts_cuda_event_record(e->handle, s, d));
  e->recorded = true;
  return 0;
}

static int m_event_synchronize(lua_State *L) {
  levent *e = self_event(L);
  if (e->recorded) LT_TRY(L, ts_cuda_event_synchronize(e->handle));
  return 0;
}

static int m_event_query(lua_State *L) {
  levent *e = self_event(L);
  bool done = true;
  if (e->recorded) LT_TRY(L, ts_cuda_event_query(e->handle, &done));
  return lua_pushboolean(L, done), 1;
}

/* a:elapsed_time(b): milliseconds from a to b, with PyTorch's errors */
static int m_event_elapsed_time(lua_State *L) {
  levent *a = self_event(L), *b = check_event(L, 2);
  if (!a->timing || !b->timing)
    return lt_errorf(L, "Both events must be created with argument 'enable_timing=True'.");
  if (!a->recorded || !b->recorded)
    return lt_errorf(L, "Both events must be recorded before calculating elapsed time.");
  float ms;
  LT_TRY(L, ts_cuda_event_elapsed(a->handle, b->handle, &ms));
  return lua_pushnumber(L, ms), 1;
}

/* e:wait([stream]): work queued on stream after this waits for the event */
static int m_event_wait(lua_State *L) {
  levent *e = self_event(L);
  if (!e->recorded) return 0;
  int d;
  uintptr_t s = stream_arg(L, 2, &d);
  LT_TRY(L, ts_cuda_stream_wait_event(s, e->handle, d));
  return 0;
}

/* s:wait_event(e) and s:record_event([e]) as PyTorch's Stream methods; the
   event is checked here, in the method's name, before Event's method runs */
static void stream_event_arg(lua_State *L, const char *method) {
  if (luaL_testudata(L, 2, LT_EVENT)) return;
  const char *got = lua_isnone(L, 2) ? "no value" : luaL_typename(L, 2);
  if (luaL_getmetafield(L, 2, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
  lt_errorf(L, "bad argument #1 to '%s' (cuda.Event expected, got %s)", method, got);
}

static int m_stream_wait_event(lua_State *L) {
  self_stream(L);
  stream_event_arg(L, "wait_event");
  lua_settop(L, 2);
  lua_insert(L, 1); /* e, s */
  return m_event_wait(L);
}

static int m_stream_record_event(lua_State *L) {
  self_stream(L);
  lua_settop(L, 2);
  if (lua_isnil(L, 2)) {
    lua_pushcfunction(L, l_event_new);
    lua_call(L, 0, 1);
    lua_replace(L, 2);
  }
  stream_event_arg(L, "record_event");
  lua_pushcfunction(L, m_event_record);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 1);
  lua_call(L, 2, 0); /* e:record(s) */
  lua_settop(L, 2);
  return 1;
}

/* PyTorch's repr: the handle in hex, "uninitialized" before the first record */
static int event_tostring(lua_State *L) {
  levent *e = check_event(L, 1);
  if (!e->handle) return lua_pushliteral(L, "<torch.cuda.Event uninitialized>"), 1;
  char handle[24];
  snprintf(handle, sizeof handle, "%#" PRIxPTR, e->handle);
  lua_pushfstring(L, "<torch.cuda.Event %s>", handle);
  return 1;
}

/* t:record_stream(s): t's memory is used on s too; it is not reused before
 * the work queued there when t is freed has run */
static int m_record_stream(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  lstream *s = check_stream(L, 2);
  if (t->device.type != TS_CUDA) return lt_errorf(L, "record_stream: expected a CUDA tensor, got one on cpu");
  if (t->device.index != s->device)
    return lt_errorf(L, "record_stream: the tensor is on cuda:%d and the stream on cuda:%d", t->device.index, s->device);
  LT_TRY(L, ts_cuda_record_stream(t->storage->data, s->device, s->handle));
  return 0;
}

#else /* a build without CUDA: the same names, each saying why it cannot run */

static int l_not_built(lua_State *L) {
  return lt_errorf(L, "cuda.%s: CUDA is not available (tensh was built without CUDA: rebuild with nvcc installed)",
                   lua_tostring(L, lua_upvalueindex(1)));
}

static const char *const cuda_only[] = {
    "current_device", "set_device", "device", "synchronize", "get_device_name", "get_device_capability",
    "get_device_properties", "mem_get_info", "utilization", "memory_summary", "Stream", "stream",
    "set_stream", "current_stream", "default_stream", "Event", "CUDAGraph", "graph_pool_handle", NULL};

/* The memory statistics are PyTorch's without a GPU: 0 bytes, an empty
 * memory_stats(), resets with nothing to reset; scripts that log memory run
 * unchanged on a laptop. */
static int l_zero(lua_State *L) {
  memory_args(L, lua_tostring(L, lua_upvalueindex(1)), false);
  return lua_pushinteger(L, 0), 1;
}
static int l_empty(lua_State *L) {
  memory_args(L, lua_tostring(L, lua_upvalueindex(1)), false);
  return lua_newtable(L), 1;
}
static int l_nothing(lua_State *L) {
  memory_args(L, lua_tostring(L, lua_upvalueindex(1)), false);
  return 0;
}

#endif /* HAVE_CUDA */

/* ---- the collector: dropped tensors may hold the memory an allocation needs --- */

/* run by the storage layer when an allocation fails, then it retries once:
 * in every build, since the CPU's caching allocator is as blind to Lua's
 * garbage as the device's */
static void oom_collect(void *ud) {
  lua_State *L = ud;
  lua_gc(L, LUA_GCCOLLECT);
#if HAVE_CUDA
  ts_cuda_empty_cache();
#endif
}

/* empty_cache() frees what the program dropped first (see memory_args), so
 * that the blocks of a tensor set to nil go back too */
static int l_empty_cache_any(lua_State *L) {
  if (lua_gettop(L) > 0) return lt_errorf(L, "cuda.empty_cache: takes no arguments, got %d", lua_gettop(L));
#if HAVE_CUDA
  if (device_count() > 0) {
    lua_gc(L, LUA_GCCOLLECT);
    LT_TRY(L, ts_cuda_empty_cache());
  }
#endif
  return 0;
}

void lt_open_cuda(lua_State *L) {
  static const luaL_Reg fns[] = {
    {"is_available", l_is_available},
    {"device_count", l_device_count},
    {"manual_seed", l_manual_seed},
    {"manual_seed_all", l_manual_seed},
    {"empty_cache", l_empty_cache_any}, /* nothing cached: nothing to do */
#if HAVE_CUDA
    {"memory_cached", l_memory_cached}, /* PyTorch's old names */
    {"max_memory_cached", l_max_memory_cached},
    {"current_device", l_current_device},
    {"set_device", l_set_device},
    {"device", l_device_scope},
    {"synchronize", l_synchronize},
    {"get_device_name", l_get_device_name},
    {"get_device_capability", l_get_device_capability},
    {"get_device_properties", l_get_device_properties},
    {"mem_get_info", l_mem_get_info},
    {"utilization", l_utilization},
    {"memory_allocated", l_memory_allocated},
    {"max_memory_allocated", l_max_memory_allocated},
    {"memory_reserved", l_memory_reserved},
    {"max_memory_reserved", l_max_memory_reserved},
    {"memory_stats", l_memory_stats},
    {"memory_summary", l_memory_summary},
    {"reset_peak_memory_stats", l_reset_peak_memory_stats},
    {"reset_accumulated_memory_stats", l_reset_accumulated_memory_stats},
    {"Stream", l_stream_new},
    {"stream", l_stream_scope},
    {"set_stream", l_set_stream},
    {"current_stream", l_current_stream},
    {"default_stream", l_default_stream},
    {"Event", l_event_new},
#endif
    {NULL, NULL}};
  luaL_newlib(L, fns);
  lt_cuda_activity_fns(L); /* lactivity.c: launch and sync counters, the sync debug mode */
  lt_cuda_graph_fns(L);    /* lcuda_graph.c: CUDA graphs */
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  ts_set_oom_hook(oom_collect, lua_tothread(L, -1));
  lua_pop(L, 1);
#if !HAVE_CUDA
  static const luaL_Reg no_gpu[] = {
      {"memory_allocated", l_zero}, {"max_memory_allocated", l_zero}, {"memory_reserved", l_zero},
      {"max_memory_reserved", l_zero}, {"memory_cached", l_zero}, {"max_memory_cached", l_zero},
      {"memory_stats", l_empty}, {"reset_peak_memory_stats", l_nothing},
      {"reset_accumulated_memory_stats", l_nothing}, {NULL, NULL}};
  for (int i = 0; no_gpu[i].name; i++) { /* each with its name, for its messages */
    lua_pushstring(L, no_gpu[i].name);
    lua_pushcclosure(L, no_gpu[i].func, 1);
    lua_setfield(L, -2, no_gpu[i].name);
  }
  for (int i = 0; cuda_only[i]; i++) {
    lua_pushstring(L, cuda_only[i]);
    lua_pushcclosure(L, l_not_built, 1);
    lua_setfield(L, -2, cuda_only[i]);
  }
#endif
#if HAVE_CUDA
  int v = ts_cuda_runtime_version();
  lua_pushfstring(L, "%d.%d", v / 1000, (v % 1000) / 10);
  lua_setfield(L, -2, "version");
  lua_pushcfunction(L, m_record_stream);
  lua_setfield(L, -3, "record_stream"); /* a tensor method; methods are below the table */

  static const luaL_Reg stream_methods[] = {{"synchronize", m_stream_synchronize}, {"query", m_stream_query},
                                            {"wait_stream", m_stream_wait_stream}, {"wait_event", m_stream_wait_event},
                                            {"record_event", m_stream_record_event}, {NULL, NULL}};
  luaL_newmetatable(L, LT_STREAM);
  luaL_newlib(L, stream_methods);
  lua_setfield(L, -2, "_methods");
  static const luaL_Reg stream_meta[] = {{"__index", stream_index}, {"__gc", stream_gc}, {"__eq", stream_eq},
                                         {"__tostring", stream_tostring}, {NULL, NULL}};
  luaL_setfuncs(L, stream_meta, 0);
  lua_pop(L, 1);

  static const luaL_Reg event_methods[] = {{"record", m_event_record}, {"synchronize", m_event_synchronize},
                                           {"query", m_event_query}, {"elapsed_time", m_event_elapsed_time},
                                           {"wait", m_event_wait}, {NULL, NULL}};
  static const luaL_Reg event_meta[] = {{"__gc", event_gc}, {"__tostring", event_tostring}, {NULL, NULL}};
  lt_new_class(L, LT_EVENT, event_methods, event_meta);
  static const luaL_Reg props_meta[] = {{"__tostring", props_tostring}, {NULL, NULL}};
  lt_new_class(L, LT_PROPS, NULL, props_meta); /* made here, so the printable values' __concat reaches it */
  static const luaL_Reg scope_meta[] = {{"__close", scope_close}, {"__gc", scope_close}, {NULL, NULL}};
  lt_new_class(L, LT_SCOPE, NULL, scope_meta);
#endif
  lua_pushvalue(L, -1);
  lua_setfield(L, -4, "cuda"); /* torch.cuda; torch is below methods */
  lua_setglobal(L, "cuda");
}
