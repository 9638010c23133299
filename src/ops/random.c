/* The global generator state: a seed and a counter offset. Each draw of n
 * values reserves n counters, so draws never overlap and runs replay exactly.
 * And the op layer of the random constructors and fills, which reserve the
 * counters and run the RAND, RANDN, RANDINT and RANDPERM kernels. */
#include "ops.h"
#include "op_random.h"
#include "autograd/autograd.h"

static uint64_t rng_seed = 67280421310721ull, rng_offset = 0;

void ts_manual_seed(uint64_t seed) {
  rng_seed = seed;
  rng_offset = 0;
}

uint64_t ts_initial_seed(void) { return rng_seed; }

void ts_rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset) {
  *seed = rng_seed;
  *offset = rng_offset;
  rng_offset += n;
}

void ts_rng_get_state(uint64_t *seed, uint64_t *offset) {
  *seed = rng_seed;
  *offset = rng_offset;
}

void ts_rng_set_state(uint64_t seed, uint64_t offset) {
  rng_seed = seed;
  rng_offset = offset;
}

/* CUDA graph captures underway, counted by the graph binding. The registry's
 * random kernels read their seed and offset from the graph's memory inside a
 * capture (cuda/random.cu); a kernel that takes them by value only (the
 * attention's dropout) refuses to be captured rather than repeat its draws. */
static _Atomic int graph_captures;
void ts_rng_graph_capture(int delta) { graph_captures += delta; }
bool ts_rng_graph_capturing(void) { return graph_captures > 0; }

/* Fills contiguous t (just made) by kernel op: i[0] seed, i[1] counter offset, i[2..3] and f[0..1] as ops.def says */
static ts_status draw(ts_op op, ts_tensor *t, int64_t count, int64_t lo, int64_t hi, double a, double b) {
  uint64_t seed, off;
  ts_rng_reserve((uint64_t)count, &seed, &off);
  ts_call c = {.op = op, .out = {t}, .i = {(int64_t)seed, (int64_t)off, lo, hi}, .f = {a, b}};
  return ts_dispatch(&c);
}

static ts_status need_float(const char *fn, ts_dtype dt) {
  if (ts_dtype_is_float(dt)) return TS_OK;
  return ts_fail(TS_ERR_DTYPE, "%s: expected a floating point dtype, got %s", fn, ts_dtype_name(dt));
}

/* A new (nd, sizes) tensor drawn by op; the caller checked the dtype */
static ts_status drawn(ts_op op, int nd, const int64_t *sizes, ts_dtype dt, ts_device dev, int64_t lo, int64_t hi,
                       double a, double b, ts_tensor **out) {
  ts_tensor *t;
  ts_status st = ts_tensor_empty(nd, sizes, dt, dev, &t);
  if (st) return st;
  if ((st = draw(op, t, ts_numel(t), lo, hi, a, b))) {
    ts_tensor_release(t);
    return st;
  }
  *out = t;
  return TS_OK;
}

ts_status ts_rand(int nd, const int64_t *sizes, ts_dtype dt, ts_device dev, ts_tensor **out) {
  ts_status st = need_float("rand", dt);
  return st ? st : drawn(TS_OP_RAND, nd, sizes, dt, dev, 0, 0, 0, 1, out);
}

/* op_random.h */
ts_status ts_dropout_mask(const ts_tensor *x, double p, ts_tensor **out) {
  ts_status st = need_float("dropout", x->dtype);
  if (st) return st;
  if (!(p >= 0 && p < 1)) return ts_fail(TS_ERR_ARG, "dropout: the mask needs 0 <= p < 1, got %g", p);
  ts_tensor *t;
  if ((st = ts_tensor_empty(x->ndim, x->sizes, x->dtype, x->device, &t))) return st;
  if ((st = draw(TS_OP_RAND, t, ts_numel(t), TS_RAND_KEEP, 0, p, 1 / (1 - p)))) {
    ts_tensor_release(t);
    return st;
  }
  *out = t;
  return TS_OK;
}

ts_status ts_randn(int nd, const int64_t *sizes, ts_dtype dt, ts_device dev, ts_tensor **out) {
  ts_status st = need_float("randn", dt);
  return st ? st : drawn(TS_OP_RANDN, nd, sizes, dt, dev, 0, 0, 0, 1, out);
}

ts_status ts_randint(int64_t low, int64_t high, int nd, const int64_t *sizes, ts_dtype dt, ts_device dev,
                     ts_tensor **out) {
  if (high <= low)
    return ts_fail(TS_ERR_ARG, "randint: expected low < high, got low=%lld, high=%lld", (long long)low, (long long)high);
  return drawn(TS_OP_RANDINT, nd, sizes, dt, dev, low, high, 0, 0, out);
}

ts_status ts_randperm(int64_t n, ts_dtype dt, ts_device dev, ts_tensor **out) {
  if (n < 0) return ts_fail(TS_ERR_ARG, "randperm: n must be non-negative, got %lld", (long long)n);
  return drawn(TS_OP_RANDPERM, 1, &n, dt, dev, 0, 0, 0, 0, out);
}

/* t <- draws of op: drawn contiguous, then copied in (t may be strided); one version bump */
static ts_status fill_random(const char *fn, ts_op op, ts_tensor *t, double a, double b) {
  if (!ts_dtype_is_float(t->dtype)) return ts_fail(TS_ERR_DTYPE, "%s: expected a floating point tensor", fn);
  ts_tensor *tmp;
  ts_status st = ts_ag_check_inplace(fn, t); /* named as the op, not as the copy_ below */
  if (st) return st;
  st = drawn(op, t->ndim, t->sizes, t->dtype, t->device, 0, 0, a, b, &tmp);
  if (st) return st;
  st = ts_copy_(t, tmp);
  ts_tensor_release(tmp);
  return st;
}

ts_status ts_uniform_(ts_tensor *t, double from, double to) { return fill_random("uniform_", TS_OP_RAND, t, from, to); }
ts_status ts_normal_(ts_tensor *t, double mean, double std) { return fill_random("normal_", TS_OP_RANDN, t, mean, std); }
