/* CPU random kernels over Philox, drawing exactly as the CUDA kernels do:
 * element j of the output (in row-major order) draws counter offset + j,
 * except rand below float64, which uses all four words of a counter
 * (element j takes word j % 4 of counter offset + j / 4: a quarter of the
 * rounds). A draw of n elements reserves n counters either way. */
#include "cpu.h"
#include "core/philox.h"
#include "philox_simd.h"
#include "ops/op_random.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

/* rand on float32 (dropout's masks draw it every training step): the loop
 * below for that one case, without the per-element op and dtype branches.
 * Elements 4g..4g+3 (of the whole draw) take the four words of counter
 * off + g, ctr0 being element 0's counter here (the caller starts at a
 * multiple of 4). The same arithmetic as the generic loop (lo + span * u in
 * double, rounded once), so the same bits; [0, 1) stores u itself, which is
 * exact. keep (TS_RAND_KEEP): hi where u >= (float)lo, else 0. */
static void rand_f32(float *p, int64_t n, uint64_t seed, uint64_t ctr0, bool keep, double lo, double hi) {
  enum { GROUPS = 256 };
  uint32_t u[4 * GROUPS];
  const double span = hi - lo;
  const float thr = (float)lo, kept = (float)hi;
  for (int64_t e0 = 0; e0 < n; e0 += 4 * GROUPS) {
    int64_t m = n - e0 < 4 * GROUPS ? n - e0 : 4 * GROUPS;
    ts_philox_lanes(seed, ctr0 + (uint64_t)(e0 / 4), (m + 3) / 4, u);
    float *q = p + e0;
    if (keep)
      for (int64_t e = 0; e < m; e++) q[e] = ts_uniform_f32(u[e]) >= thr ? kept : 0.0f;
    else if (lo == 0 && span == 1)
      for (int64_t e = 0; e < m; e++) q[e] = ts_uniform_f32(u[e]);
    else
      for (int64_t e = 0; e < m; e++) q[e] = (float)(lo + span * (double)ts_uniform_f32(u[e]));
  }
}

/* v as dtype dt stores it */
static double rounded(ts_dtype dt, double v) {
  char b[8];
  ts_store_f64(b, dt, v);
  return ts_load_f64(b, dt);
}

/* out must be contiguous (the op layer allocates it so). */
static ts_status k_random(const ts_call *c) {
  ts_tensor *out = c->out[0];
  uint64_t seed = (uint64_t)c->i[0], off = (uint64_t)c->i[1];
  int64_t n = ts_numel(out);
  ts_dtype dt = out->dtype;
  char *p = ts_data(out);
  int64_t w = (int64_t)ts_dtype_size(dt);
  double lo = c->f[0], hi = c->f[1];
  const bool keep = c->op == TS_OP_RAND && c->i[2] == TS_RAND_KEEP;
  if (c->op == TS_OP_RAND && dt == TS_FLOAT32) {
    float *f = (float *)p;
#pragma omp parallel if (n > TS_PARALLEL_GRAIN)
    {
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      /* chunks of whole counters (multiples of 4 elements) */
      int64_t chunk = ((n + nt - 1) / nt + 3) / 4 * 4, a = chunk * id, b = a + chunk < n ? a + chunk : n;
      if (a < b) rand_f32(f + a, b - a, seed, off + (uint64_t)(a / 4), keep, lo, hi);
    }
    return TS_OK;
  }
  const int words = c->op == TS_OP_RAND && dt != TS_FLOAT64; /* four elements a counter */
  const double thr = keep ? rounded(dt, lo) : 0; /* u and p compared as dt holds them */
#pragma omp parallel for schedule(static) if (n > TS_PARALLEL_GRAIN)
  for (int64_t j = 0; j < n; j++) {
    ts_u32x4 r = ts_philox(seed, off + (uint64_t)(words ? j / 4 : j));
    void *q = p + j * w;
    if (c->op == TS_OP_RAND) {
      double u = dt == TS_FLOAT64 ? ts_uniform_f64(r.v[0], r.v[1]) : ts_uniform_f32(r.v[j % 4]);
      if (keep) ts_store_f64(q, dt, rounded(dt, u) >= thr ? hi : 0);
      else ts_store_f64(q, dt, lo + (hi - lo) * u);
    } else if (c->op == TS_OP_RANDN) { /* Box-Muller on two uniforms in (0, 1] */
      double u1 = 1.0 - ts_uniform_f64(r.v[0], r.v[1]), u2 = ts_uniform_f64(r.v[2], r.v[3]);
      double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
      ts_store_f64(q, dt, lo + hi * z);
    } else { /* RANDINT: [i[2], i[3]) */
      uint64_t range = (uint64_t)c->i[3] - (uint64_t)c->i[2]; /* unsigned: no overflow */
      uint64_t x = ((uint64_t)r.v[0] << 32) | r.v[1];
      ts_store_i64(q, dt, (int64_t)((uint64_t)c->i[2] + x % range));
    }
  }
  return TS_OK;
}

/* randperm: sort indices by 64-bit Philox keys (ties broken by index), so a
 * GPU sort of the same keys gives the same permutation. */
typedef struct { uint64_t key; int64_t idx; } keyed;

static int cmp_keyed(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static ts_status k_randperm(const ts_call *c) {
  ts_tensor *out = c->out[0];
  int64_t n = ts_numel(out);
  keyed *k = malloc(sizeof *k * (size_t)(n ? n : 1));
  if (!k) return ts_fail(TS_ERR_OOM, "randperm: out of memory for %lld keys", (long long)n);
  for (int64_t j = 0; j < n; j++) {
    ts_u32x4 r = ts_philox((uint64_t)c->i[0], (uint64_t)c->i[1] + (uint64_t)j);
    k[j].key = ((uint64_t)r.v[0] << 32) | r.v[1];
    k[j].idx = j;
  }
  qsort(k, (size_t)n, sizeof *k, cmp_keyed);
  char *p = ts_data(out);
  int64_t w = (int64_t)ts_dtype_size(out->dtype);
  for (int64_t j = 0; j < n; j++) ts_store_i64(p + j * w, out->dtype, k[j].idx);
  free(k);
  return TS_OK;
}

void ts_cpu_register_random(ts_kernel *k) {
  k[TS_OP_RAND] = k_random;
  k[TS_OP_RANDN] = k_random;
  k[TS_OP_RANDINT] = k_random;
  k[TS_OP_RANDPERM] = k_randperm;
}
