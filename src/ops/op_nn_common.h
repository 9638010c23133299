/* Helpers shared by the op layer's neural-network families (op_nn_conv.c,
 * op_nn_pool.c, op_nn_norm.c, op_nn_embedding.c): temporaries released on
 * every path, shape strings for messages, the compute dtype (float16 and
 * bfloat16 compute in float32), stack views for BMM. Internal to src/. */
#ifndef TENSH_OP_NN_COMMON_H
#define TENSH_OP_NN_COMMON_H

#include "ops.h"
#include "autograd/autocast.h"
#include "autograd/grad.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Temporaries released at the end of a function, whatever path it takes. */
typedef struct tmps {
  ts_tensor *t[40];
  int n;
} tmps;

static inline ts_tensor **tmp(tmps *k) {
  k->t[k->n] = NULL;
  return &k->t[k->n++];
}

static inline void tmps_free(tmps *k) {
  for (int i = 0; i < k->n; i++)
    if (k->t[i]) ts_tensor_release(k->t[i]);
}

static inline ts_tensor *take(ts_tensor **s) {
  ts_tensor *t = *s;
  *s = NULL;
  return t;
}

#define TRY(e)                          \
  do {                                  \
    if ((st = (e)) != TS_OK) goto done; \
  } while (0)

typedef struct shp {
  char s[160];
} shp;

static inline shp shape_of(const ts_tensor *t) {
  shp r;
  ts_shape_str(t->ndim, t->sizes, r.s, sizeof r.s);
  return r;
}

static inline shp pair_str(const int64_t *p) {
  shp r;
  snprintf(r.s, sizeof r.s, "(%lld, %lld)", (long long)p[0], (long long)p[1]);
  return r;
}

static inline ts_dtype compute_dtype(ts_dtype d) { return d == TS_FLOAT64 ? TS_FLOAT64 : TS_FLOAT32; }

static inline ts_status to_compute(ts_tensor *t, ts_tensor **out) { return ts_to_dtype(t, compute_dtype(t->dtype), out); }

static inline ts_status check_float(const char *fn, const char *what, const ts_tensor *t) {
  if (ts_dtype_is_float(t->dtype)) return TS_OK;
  return ts_fail(TS_ERR_DTYPE, "%s: expected a floating-point %s, got %s (convert it first, e.g. t:float())", fn, what,
                 ts_dtype_name(t->dtype));
}

/* A (C, H, W) input as (1, C, H, W); others retained as they are. */
static inline ts_status lift4(ts_tensor *x, ts_tensor **out) {
  if (x->ndim == 3) return ts_unsqueeze(x, 0, out);
  ts_tensor_retain(x);
  return *out = x, TS_OK;
}

/* r in x's dtype and, for an unbatched x, without its leading 1. */
static inline ts_status finish(ts_tensor *r, ts_dtype dt, bool unbatched, ts_tensor **out) {
  tmps k = {.n = 0};
  ts_tensor **a = tmp(&k);
  ts_status st;
  TRY(ts_to_dtype(r, dt, a));
  if (unbatched) {
    int64_t d0 = 0;
    TRY(ts_squeeze(*a, &d0, out));
  } else {
    *out = take(a);
  }
done:
  tmps_free(&k);
  return st;
}

static inline ts_status mul_s(ts_tensor *a, double v, ts_tensor **out) {
  ts_scalar_box b;
  return ts_binary(TS_OP_MUL, a, ts_scalar_wrap_double(&b, v), out);
}

static inline ts_status add_s(ts_tensor *a, double v, ts_tensor **out) {
  ts_scalar_box b;
  return ts_binary(TS_OP_ADD, a, ts_scalar_wrap_double(&b, v), out);
}

/* A stack view of a contiguous-or-not base with an explicit 3-D geometry, for BMM. */
static inline ts_tensor view3(const ts_tensor *base, int64_t offset, int64_t s0, int64_t s1, int64_t s2, int64_t t0,
                       int64_t t1, int64_t t2) {
  ts_tensor v = *base;
  v.ndim = 3;
  v.offset = base->offset + offset;
  v.sizes[0] = s0, v.sizes[1] = s1, v.sizes[2] = s2;
  v.strides[0] = t0, v.strides[1] = t1, v.strides[2] = t2;
  return v;
}

/* A stack view of t's first `rows` entries along dim 0, starting at row r0. */
static inline ts_tensor rows_view(const ts_tensor *t, int64_t r0, int64_t rows) {
  ts_tensor v = *t;
  v.offset += r0 * t->strides[0];
  v.sizes[0] = rows;
  return v;
}

static inline ts_status bmm(ts_tensor *a, ts_tensor *b, ts_tensor *o, double beta) {
  ts_tensor *in[2] = {a, b};
  ts_call c = {.op = TS_OP_BMM, .nin = 2, .in = in, .out = {o}, .f = {1, beta}};
  return ts_dispatch(&c);
}

static inline int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

#endif
