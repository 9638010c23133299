/* torch.autocast: the cast policy of autocast.def, or of an elementwise op's
 * registry line, applied at the start of each listed op, the per-thread
 * regions, and the cache of cast weights. */
#include "autocast.h"

#include <stdlib.h>

#include "autograd.h"
#include "ops/ops.h"

static const struct {
  const char *name;
  unsigned char policy[TS_DEVICE_TYPE_COUNT];
} ac_ops[TS_AC_COUNT] = {
#define A(e, n, cuda, cpu, call) [TS_AC_##e] = {n, {[TS_CPU] = TS_AC_##cpu, [TS_CUDA] = TS_AC_##cuda}},
#include "autocast.def"
#undef A
};

_Atomic int ts_autocast_threads;
_Thread_local unsigned ts_autocast_mask;
static _Thread_local bool counted; /* this thread is in ts_autocast_threads */
/* the regions' state, per thread; the mask mirrors `enabled` outside ops */
static _Thread_local bool enabled[TS_DEVICE_TYPE_COUNT];
static _Thread_local ts_dtype low_dtype[TS_DEVICE_TYPE_COUNT] = {[TS_CPU] = TS_BFLOAT16, [TS_CUDA] = TS_FLOAT16};
static _Thread_local bool cache_off;
static _Thread_local int nesting;

/* Casts of float32 leaves that require grad (the weights), made once per
 * region: a model that calls a layer many times casts its weight once. The
 * entry holds both tensors and the source's version, so a weight changed in
 * place inside the region is cast again. */
typedef struct cached_cast {
  ts_tensor *src, *cast;
  uint32_t version;
} cached_cast;
static _Thread_local cached_cast *cache;
static _Thread_local int ncache, cache_cap;

void ts_autocast_clear_cache(void) {
  for (int i = 0; i < ncache; i++) {
    ts_tensor_release(cache[i].src);
    ts_tensor_release(cache[i].cast);
  }
  free(cache);
  cache = NULL;
  ncache = cache_cap = 0;
}

static bool cacheable(const ts_tensor *t, ts_dtype to) {
  return !cache_off && t->dtype == TS_FLOAT32 && to != TS_FLOAT32 && t->requires_grad && !t->grad_fn &&
         ts_grad_enabled(); /* a cast made under no_grad has no graph to reuse */
}

static ts_tensor *cache_find(const ts_tensor *src, ts_dtype to) {
  for (int i = 0; i < ncache; i++)
    if (cache[i].src == src && cache[i].cast->dtype == to && cache[i].version == src->storage->version)
      return cache[i].cast;
  return NULL;
}

static void cache_put(ts_tensor *src, ts_tensor *cast) { /* best effort: out of memory only skips the cache */
  if (ncache == cache_cap) {
    int cap = cache_cap ? 2 * cache_cap : 16;
    cached_cast *c = realloc(cache, sizeof *c * (size_t)cap);
    if (!c) return;
    cache = c, cache_cap = cap;
  }
  ts_tensor_retain(src);
  ts_tensor_retain(cast);
  cache[ncache++] = (cached_cast){src, cast, src->storage->version};
}

/* t cast to dtype `to` (a new reference), through the cache when it may. */
static ts_status cast(ts_tensor *t, ts_dtype to, ts_tensor **out) {
  bool keep = cacheable(t, to);
  ts_tensor *c = keep ? cache_find(t, to) : NULL;
  if (c) {
    ts_tensor_retain(c);
    return *out = c, TS_OK;
  }
  ts_status st = ts_to_dtype(t, to, out);
  if (!st && keep) cache_put(t, *out);
  return st;
}

/* inputs autocast may change: floating, not float64, on the region's device type */
static bool eligible(const ts_tensor *t, ts_device_type dt) {
  return t && !t->is_wrapped_number && (int)t->device.type == (int)dt && ts_dtype_is_float(t->dtype) && t->dtype != TS_FLOAT64;
}

/* op's policy on device type dt: autocast.def's, or the registry line's */
static ts_autocast_policy policy_of(int op, ts_device_type dt) {
  return op < TS_AC_COUNT ? ac_ops[op].policy[dt] : ts_ops[op - TS_AC_COUNT].autocast[dt];
}

ts_status ts_autocast_cast(int op, int n, ts_tensor **const *args, ts_tensor **made, int *nmade) {
  *nmade = 0;
  if (op < 0) return TS_OK;
  int dt = -1;
  for (int i = 0; i < n && dt < 0; i++)
    if (*args[i] && !(*args[i])->is_wrapped_number) dt = (*args[i])->device.type;
  if (dt < 0 || !(ts_autocast_mask & (1u << dt))) return TS_OK;
  ts_autocast_policy p = policy_of(op, (ts_device_type)dt);
  if (p == TS_AC_KEEP) return TS_OK;
  ts_dtype to = p == TS_AC_LOWER ? low_dtype[dt] : TS_FLOAT32;
  if (p == TS_AC_PROMOTE) { /* the widest eligible dtype; float16 with bfloat16 gives float32 */
    int w = -1;
    for (int i = 0; i < n; i++)
      if (eligible(*args[i], (ts_device_type)dt))
        w = w < 0 ? (int)(*args[i])->dtype : (int)ts_promote((ts_dtype)w, (*args[i])->dtype);
    if (w < 0) return TS_OK;
    to = (ts_dtype)w;
  }
  for (int i = 0; i < n; i++) {
    ts_tensor *t = *args[i];
    if (!eligible(t, (ts_device_type)dt) || t->dtype == to) continue;
    ts_status st = cast(t, to, &made[*nmade]);
    if (st) {
      while (*nmade > 0) ts_tensor_release(made[--*nmade]);
      return st;
    }
    *args[i] = made[(*nmade)++];
  }
  return TS_OK;
}

/* the last column of autocast.def reads the packed arguments through these */
#define T0 c->t[0]
#define T1 c->t[1]
#define T2 c->t[2]
#define I0 c->i[0]
#define I1 c->i[1]
#define F0 c->f[0]
#define F1 c->f[1]
#define P0 c->p[0]
#define OUT c->out[0]
#define NO_CALL ts_fail(TS_ERR_ARG, "autocast: %s has no op-layer call", ac_ops[op].name)

static ts_status call(int op, const ts_autocast_call *c) {
  switch (op) {
#define A(e, n, cuda, cpu, call) \
  case TS_AC_##e: return call;
#include "autocast.def"
#undef A
  default: break;
  }
  /* an elementwise kernel op (ts_autocast_of_op), packed by ts_unary_p or ts_binary */
  ts_op k = (ts_op)(op - TS_AC_COUNT);
  if ((unsigned)k >= TS_OP_COUNT) return ts_fail(TS_ERR_ARG, "autocast: no op %d", op);
  ts_op_kind kind = ts_ops[k].kind;
  if (kind == TS_KIND_BINARY || kind == TS_KIND_BINARY_FLOAT || kind == TS_KIND_COMPARE) return ts_binary(k, T0, T1, OUT);
  return ts_unary_p(k, T0, c->p[0], c->p[1], OUT);
}

ts_status ts_autocast_run(int op, const ts_autocast_call *c0) {
  ts_autocast_call c = *c0;
  ts_tensor *made[4];
  int nmade;
  ts_tensor **args[4] = {&c.t[0], &c.t[1], &c.t[2], &c.t[3]};
  ts_status st = ts_autocast_cast(op, 4, args, made, &nmade);
  if (st) return st;
  unsigned saved = ts_autocast_suspend();
  st = call(op, &c);
  ts_autocast_resume(saved);
  while (nmade > 0) ts_tensor_release(made[--nmade]);
  return st;
}

int ts_autocast_of_op(int kernel_op) {
  if ((unsigned)kernel_op >= TS_OP_COUNT) return -1;
  const uint8_t *p = ts_ops[kernel_op].autocast;
  for (int t = 0; t < TS_DEVICE_TYPE_COUNT; t++)
    if (p[t] != TS_AC_KEEP) return TS_AC_COUNT + kernel_op;
  return -1;
}

static void sync_mask(void) {
  unsigned m = 0;
  for (int t = 0; t < TS_DEVICE_TYPE_COUNT; t++)
    if (enabled[t]) m |= 1u << t;
  ts_autocast_mask = m;
  if ((m != 0) != counted) { /* the threads with a region, for the hook's first test */
    counted = m != 0;
    atomic_fetch_add(&ts_autocast_threads, counted ? 1 : -1);
  }
}

ts_autocast_state ts_autocast_get(ts_device_type t) {
  return (ts_autocast_state){enabled[t], low_dtype[t], !cache_off};
}

void ts_autocast_enter(ts_device_type t, ts_autocast_state s, ts_autocast_state *prev) {
  *prev = ts_autocast_get(t);
  enabled[t] = s.enabled, low_dtype[t] = s.dtype, cache_off = !s.cache_enabled;
  nesting++;
  sync_mask();
}

void ts_autocast_exit(ts_device_type t, ts_autocast_state prev) {
  enabled[t] = prev.enabled, low_dtype[t] = prev.dtype, cache_off = !prev.cache_enabled;
  if (nesting > 0 && --nesting == 0) ts_autocast_clear_cache();
  sync_mask();
}

unsigned ts_autocast_suspend(void) {
  unsigned m = ts_autocast_mask;
  ts_autocast_mask = 0;
  return m;
}

void ts_autocast_resume(unsigned saved) { ts_autocast_mask = saved; }
