/* The profiler's bindings, wrapped by lua/tensh/profiler.lua (torch.profiler):
 *   torch._profiler_start({record_shapes =, profile_memory =, cuda =, with_stack =})
 *     (cuda: device times per op, and every launch, copy and synchronisation)
 *   torch._profiler_stop()   waits for the device's work first (uncounted: src/core/activity.h)
 *   torch._profiler_push(name) -> id; torch._profiler_pop(id)   record_function scopes
 *   torch._profiler_events() -> a list of event tables (see l_events), the number dropped */
#include "lt.h"

#include <stdlib.h>
#include <string.h>

#include "core/activity.h"
#include "core/profiler.h"
#ifdef TS_HAVE_CUDA
#include "core/cuda_api.h"
#endif

#ifdef TS_HAVE_CUDA
static uintptr_t cuda_record(ts_device dev) {
  uintptr_t e = 0;
  int d = dev.index >= 0 ? dev.index : ts_cuda_current_device();
  if (ts_cuda_event_create(d, true, false, &e) != TS_OK) return 0;
  if (ts_cuda_event_record(e, ts_cuda_current_stream(d), d) != TS_OK) {
    ts_cuda_event_destroy(e);
    return 0;
  }
  return e;
}
/* the profiler's own wait: neither counted nor checked by the sync debug mode */
static double cuda_elapsed_ms(uintptr_t a, uintptr_t b) {
  float ms;
  ts_activity_quiet(1);
  bool ok = ts_cuda_event_synchronize(b) == TS_OK && ts_cuda_event_elapsed(a, b, &ms) == TS_OK;
  ts_activity_quiet(-1);
  return ok ? ms : -1;
}
static void cuda_release(uintptr_t e) { ts_cuda_event_destroy(e); }
static const ts_prof_device_timer cuda_timer = {cuda_record, cuda_elapsed_ms, cuda_release};
#endif

/* with_stack: the innermost Lua frames of the thread that started the profiler */
static lua_State *stack_L;
static void lua_stack(char *buf, size_t n) {
  lua_Debug ar;
  size_t k = 0;
  buf[0] = 0;
  for (int level = 0, frames = 0; frames < 3 && k < n && lua_getstack(stack_L, level, &ar); level++) {
    if (!lua_getinfo(stack_L, "Sl", &ar) || ar.currentline <= 0) continue; /* C frames have no line */
    k += (size_t)snprintf(buf + k, n - k, "%s%s:%d", frames ? "; " : "", ar.short_src, ar.currentline);
    frames++;
  }
}

static bool device_on; /* the running profiler records the device */

static int l_start(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  ts_prof_options o = {0};
  o.record_shapes = lt_opt_bool(L, 1, "record_shapes", false);
  o.profile_memory = lt_opt_bool(L, 1, "profile_memory", false);
  o.device_timing = o.device_activity = lt_opt_bool(L, 1, "cuda", false);
#ifdef TS_HAVE_CUDA
  o.timer = &cuda_timer;
#endif
  if (lt_opt_bool(L, 1, "with_stack", false)) {
    stack_L = L;
    o.stack = lua_stack;
  }
  LT_TRY(L, ts_prof_start(o));
  device_on = o.device_activity;
  return 0;
}

/* the work queued in the region is part of it: wait for it, as the
 * profiler's own act (uncounted, unchecked) */
static int l_stop(lua_State *L) {
  ts_status st = TS_OK;
#ifdef TS_HAVE_CUDA
  if (device_on && ts_prof_running() && ts_cuda_device_count() > 0) {
    ts_activity_quiet(1);
    st = ts_cuda_synchronize(-1);
    ts_activity_quiet(-1);
  }
#endif
  ts_prof_stop();
  device_on = false;
  LT_TRY(L, st);
  return 0;
}

static int l_push(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  char *own = malloc(len + 1);
  if (!own) return lt_errorf(L, "record_function: out of memory");
  memcpy(own, name, len + 1);
  lua_pushinteger(L, ts_prof_begin_owned(own, TS_PROF_USER));
  return 1;
}

static int l_pop(lua_State *L) {
  ts_prof_end((int)lt_checkint(L, 1));
  return 0;
}

static void setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}
static void setint(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static void set_triple(lua_State *L, const char *k, const uint32_t v[3]) {
  lua_createtable(L, 3, 0);
  for (int j = 0; j < 3; j++) {
    lua_pushinteger(L, v[j]);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, k);
}

/* each event: name, kind ("op", "backward", "user"; device activity:
 * "runtime", "kernel", "memcpy", "memset"), device ("cpu", "cuda:0"),
 * ts and dur (microseconds; ts from the first event), self (dur minus
 * children), parent (1-based index or nil), cpu_mem/self_cpu_mem,
 * dev_mem/self_dev_mem (bytes), device_us (CUDA events; nil when not
 * timed), shapes and stack (strings; nil when not recorded); device
 * activity also has stream (0: the default stream), a kernel its grid and
 * block ({x, y, z}), a copy or fill its bytes, each its correlation (the
 * index of the runtime call that queued it), a runtime call sync = true when
 * it waited for the device */
static int l_events(lua_State *L) {
  const ts_prof_event *ev = ts_prof_events();
  int n = ts_prof_count();
  static const char *const kinds[] = {"op", "backward", "user", "runtime", "kernel", "memcpy", "memset"};
  int64_t t0 = n ? ev[0].start_ns : 0;
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    const ts_prof_event *e = &ev[i];
    int64_t end = e->end_ns ? e->end_ns : e->start_ns;
    lua_createtable(L, 0, 16);
    lua_pushstring(L, e->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, kinds[e->kind]);
    lua_setfield(L, -2, "kind");
    char dev[32];
    ts_device_str((ts_device){e->device_type, e->device_index}, dev, sizeof dev);
    lua_pushstring(L, dev);
    lua_setfield(L, -2, "device");
    setnum(L, "ts", (double)(e->start_ns - t0) * 1e-3);
    setnum(L, "dur", (double)(end - e->start_ns) * 1e-3);
    setnum(L, "self", (double)(end - e->start_ns - e->child_ns) * 1e-3);
    if (e->parent >= 0) setint(L, "parent", e->parent + 1);
    setint(L, "cpu_mem", e->cpu_mem);
    setint(L, "self_cpu_mem", e->cpu_mem - e->child_cpu_mem);
    setint(L, "dev_mem", e->dev_mem);
    setint(L, "self_dev_mem", e->dev_mem - e->child_dev_mem);
#ifdef TS_HAVE_CUDA
    if (e->dev_start && e->dev_end) {
      double ms = cuda_timer.elapsed_ms(e->dev_start, e->dev_end);
      if (ms >= 0) setnum(L, "device_us", ms * 1e3);
    }
#endif
    if (e->shapes[0]) {
      lua_pushstring(L, e->shapes);
      lua_setfield(L, -2, "shapes");
    }
    if (e->stack[0]) {
      lua_pushstring(L, e->stack);
      lua_setfield(L, -2, "stack");
    }
    if (e->kind >= TS_PROF_RUNTIME) {
      setint(L, "stream", (int64_t)e->stream);
      if (e->correlation >= 0) setint(L, "correlation", e->correlation + 1);
      if (e->kind == TS_PROF_KERNEL) set_triple(L, "grid", e->grid), set_triple(L, "block", e->block);
      if (e->kind == TS_PROF_MEMCPY || e->kind == TS_PROF_MEMSET) setint(L, "bytes", e->bytes);
      if (e->sync) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "sync");
      }
    }
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushinteger(L, (lua_Integer)ts_prof_dropped());
  return 2;
}

void lt_open_profiler(lua_State *L) {
  static const luaL_Reg fns[] = {{"_profiler_start", l_start},   {"_profiler_stop", l_stop},
                                 {"_profiler_push", l_push},     {"_profiler_pop", l_pop},
                                 {"_profiler_events", l_events}, {NULL, NULL}};
  lt_register(L, fns, NULL);
}
