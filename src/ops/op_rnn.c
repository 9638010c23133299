/* The op layer of the recurrent layers: one layer of an RNN, LSTM or GRU in
 * one direction over a whole sequence (contract in op_rnn.h).
 *
 * The input projection of all steps is one GEMM made by the caller (xproj);
 * here each step is one GEMM with W_hh (BMM, beta 1 straight into the step's
 * gate rows) and one fused cell kernel (ops_rnn.def). Everything the backward
 * needs lives in one workspace, time-major, so that W_hh's gradient is one
 * GEMM over all steps at the end:
 *   hprev (L, N, P)    the state each step read
 *   cst   (L + 1, N, H) LSTM: the cell states, c0 and each step's c_t; step
 *                      t reads slot t and writes slot t + 1 (reversed: reads
 *                      t + 1, writes t), so c_t is stored once
 *   r     (L, N, H)    LSTM with projection: o * tanh(c), before W_hr
 * and the activations in a tensor of their own (saved beside it):
 *   act   (L, N, A)    activated gates: LSTM i, f, g, o (A = 4H); GRU r, z,
 *                      n, gh_n + b_hn (A = 4H); RNN h_t (A = H)
 * The LSTM's and RNN's gates start as the input projection plus the step
 * GEMM, so act is xproj itself when the caller hands xproj over as scratch
 * (nn.LSTM's projection is a temporary): an 8 MiB copy a layer saved at the
 * LSTM bench's sizes; a non-contiguous xproj's contiguous copy serves as
 * act too; otherwise xproj is copied into a new act.
 * The node's output is one flat tensor [output (L, N, P) | h_n (N, P) | c_n
 * (N, H)]; the caller gets views of it, so one node serves the three.
 *
 * Variable lengths (batch_sizes, rows sorted longest first) narrow each step
 * to its first rows; the others carry their state (copied forward) and
 * output zeros, and their gradients pass through unchanged. */
#include <stdlib.h>
#include <string.h>

#include "autograd/grad.h"
#include "ops.h"
#include "op_nn_common.h" /* the temporaries helpers */

static int gates_of(ts_rnn_mode m) { return m == TS_RNN_LSTM ? 4 : m == TS_RNN_GRU ? 3 : 1; }
static const char *name_of(ts_rnn_mode m) {
  return m == TS_RNN_LSTM ? "lstm" : m == TS_RNN_GRU ? "gru" : m == TS_RNN_RELU ? "rnn_relu" : "rnn_tanh";
}

/* offsets (elements) of the workspace's and the flat output's parts */
typedef struct layout {
  int64_t GH, A;
  int64_t hprev, cst, r, ws_total, act_total;
  int64_t out, hn, cn, y_total;
} layout;

static ts_status mul3(int64_t a, int64_t b, int64_t c, int64_t *out) {
  ts_status st = ts_mul_overflow(a, b, out);
  return st ? st : ts_mul_overflow(*out, c, out);
}

static ts_status add_to(int64_t *total, int64_t part, int64_t *offset) {
  *offset = *total;
  if (part > INT64_MAX - *total) return ts_fail(TS_ERR_SHAPE, "rnn: the workspace size overflows");
  *total += part;
  return TS_OK;
}

static ts_status layout_of(const ts_rnn_dims *d, bool proj, layout *lo) {
  const bool lstm = d->mode == TS_RNN_LSTM;
  int64_t LN, part;
  ts_status st;
  memset(lo, 0, sizeof *lo);
  lo->GH = gates_of(d->mode) * d->H;
  lo->A = d->mode == TS_RNN_LSTM || d->mode == TS_RNN_GRU ? 4 * d->H : d->H;
  if ((st = ts_mul_overflow(d->L, d->N, &LN))) return st;
  if ((st = ts_mul_overflow(LN, d->P, &part)) || (st = add_to(&lo->ws_total, part, &lo->hprev))) return st;
  if ((st = ts_mul_overflow(LN, lo->A, &lo->act_total))) return st;
  if (lstm) { /* L + 1 slots */
    if (d->L == INT64_MAX) return ts_fail(TS_ERR_SHAPE, "rnn: the workspace size overflows");
    if ((st = mul3(d->L + 1, d->N, d->H, &part)) || (st = add_to(&lo->ws_total, part, &lo->cst))) return st;
  }
  if ((st = ts_mul_overflow(LN, d->H, &part))) return st;
  if (lstm && proj && (st = add_to(&lo->ws_total, part, &lo->r))) return st;
  if ((st = mul3(d->L, d->N, d->P, &part)) || (st = add_to(&lo->y_total, part, &lo->out))) return st;
  if ((st = ts_mul_overflow(d->N, d->P, &part)) || (st = add_to(&lo->y_total, part, &lo->hn))) return st;
  if ((st = ts_mul_overflow(d->N, d->H, &part))) return st;
  if (lstm && (st = add_to(&lo->y_total, part, &lo->cn))) return st;
  return TS_OK;
}

/* ---- stack views handed to kernels (never retained: the base outlives them) ---- */

/* rows x cols, row-major, at element off of contiguous base */
static ts_tensor mat(const ts_tensor *base, int64_t off, int64_t rows, int64_t cols) {
  ts_tensor v = *base;
  v.ndim = 2;
  v.sizes[0] = rows, v.sizes[1] = cols;
  v.strides[0] = cols, v.strides[1] = 1;
  v.offset = base->offset + off;
  v.requires_grad = false, v.grad = NULL, v.grad_fn = NULL;
  return v;
}
static ts_tensor head(ts_tensor m, int64_t rows) { /* the first rows */
  m.sizes[0] = rows;
  return m;
}
static ts_tensor tail(ts_tensor m, int64_t from) { /* rows [from, end) */
  m.offset += from * m.strides[0];
  m.sizes[0] -= from;
  return m;
}
static ts_tensor tr(ts_tensor m) {
  int64_t s = m.sizes[0], t = m.strides[0];
  m.sizes[0] = m.sizes[1], m.strides[0] = m.strides[1];
  m.sizes[1] = s, m.strides[1] = t;
  return m;
}

/* A token for the step GEMMs of one loop that all pass the same, unchanged B
 * (W_hh, W_hr): BMM's i[0], so the CPU packs B once per loop instead of once
 * per step (src/cpu/gemm_reused.c); other backends ignore it */
static int64_t reuse_token(void) {
  static int64_t last;
  return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

/* o (M, N) = beta*o + a (M, K) @ b (K, N); token: reuse_token's, or 0 */
static ts_status gemm_reusing(ts_tensor o, ts_tensor a, ts_tensor b, double beta, int64_t token) {
  if (o.sizes[0] == 0 || o.sizes[1] == 0) return TS_OK;
  ts_tensor *v[3] = {&o, &a, &b};
  for (int k = 0; k < 3; k++) {
    ts_tensor *t = v[k];
    t->sizes[2] = t->sizes[1], t->sizes[1] = t->sizes[0], t->sizes[0] = 1;
    t->strides[2] = t->strides[1], t->strides[1] = t->strides[0], t->strides[0] = 0;
    t->ndim = 3;
  }
  ts_tensor *in[2] = {&a, &b};
  ts_call c = {.op = TS_OP_BMM, .nin = 2, .in = in, .out = {&o}, .f = {1.0, beta}, .i = {token}};
  return ts_dispatch(&c);
}

static ts_status gemm(ts_tensor o, ts_tensor a, ts_tensor b, double beta) { return gemm_reusing(o, a, b, beta, 0); }

static ts_status copy(ts_tensor dst, ts_tensor src) {
  if (dst.sizes[0] == 0) return TS_OK;
  ts_tensor *in[1] = {&src};
  ts_call c = {.op = TS_OP_COPY, .nin = 1, .in = in, .out = {&dst}};
  return ts_dispatch(&c);
}

static ts_status zero(ts_tensor *t) {
  if (ts_numel(t) == 0) return TS_OK;
  ts_call c = {.op = TS_OP_FILL, .nin = 0, .out = {t}};
  return ts_dispatch(&c);
}

/* dst += src */
static ts_status add_(ts_tensor dst, ts_tensor src) {
  if (dst.sizes[0] == 0) return TS_OK;
  ts_tensor *in[2] = {&dst, &src};
  ts_call c = {.op = TS_OP_ADD, .nin = 2, .in = in, .out = {&dst}, .f = {1.0}};
  return ts_dispatch(&c);
}

static ts_status run(ts_op op, int nin, ts_tensor *const *in, ts_tensor *o0, ts_tensor *o1, ts_tensor *o2,
                     int64_t i0) {
  if (in[0]->sizes[0] == 0) return TS_OK;
  ts_call c = {.op = op, .nin = nin, .in = in, .out = {o0, o1, o2}, .i = {i0}};
  return ts_dispatch(&c);
}

/* ---- checks ------------------------------------------------------------------ */

static ts_status check_shape(const char *fn, const char *what, const ts_tensor *t, int nd, int64_t s0, int64_t s1) {
  if (t->ndim == nd && t->sizes[0] == s0 && (nd == 1 || t->sizes[1] == s1)) return TS_OK;
  char want[64];
  int64_t s[2] = {s0, s1};
  ts_shape_str(nd, s, want, sizeof want);
  return ts_fail(TS_ERR_SHAPE, "%s: expected %s of shape %s, got %s", fn, what, want, shape_of(t).s);
}

static ts_status check_like(const char *fn, const char *what, const ts_tensor *t, const ts_tensor *x) {
  if (t->dtype != x->dtype)
    return ts_fail(TS_ERR_DTYPE, "%s: expected %s of dtype %s like the input, got %s", fn, what,
                   ts_dtype_name(x->dtype), ts_dtype_name(t->dtype));
  if (!ts_device_eq(t->device, x->device)) return ts_fail_devices(fn, x->device, t->device);
  return TS_OK;
}

/* ---- forward ------------------------------------------------------------------- */

/* state (N, w) <- src, or zeros when src is NULL */
static ts_status init_state(ts_tensor dst, ts_tensor *src) {
  if (!src) return zero(&dst);
  ts_tensor s = mat(src, 0, dst.sizes[0], dst.sizes[1]);
  return copy(dst, s);
}

/* the steps; x, w, wr, b contiguous; ws, act, y allocated; act holds the
 * input projection already (LSTM, RNN) */
static ts_status forward_steps(const ts_rnn_dims *d, const layout *lo, const int64_t *bsz, ts_tensor *x,
                               ts_tensor *h0, ts_tensor *c0, ts_tensor *w, ts_tensor *b, ts_tensor *wr,
                               ts_tensor *ws, ts_tensor *act, ts_tensor *y, ts_tensor *gh) {
  const int64_t L = d->L, N = d->N, H = d->H, P = d->P, GH = lo->GH;
  const bool lstm = d->mode == TS_RNN_LSTM;
  const int dir = d->reverse ? -1 : 1, relu = d->mode == TS_RNN_RELU;
  ts_tensor wt = tr(mat(w, 0, GH, P)), wrt = wr ? tr(mat(wr, 0, P, H)) : wt;
  const int64_t wt_token = reuse_token(), wrt_token = reuse_token();
  ts_status st = TS_OK;
  const int64_t t0 = d->reverse ? L - 1 : 0;
  ts_tensor first_h = L > 0 ? mat(ws, lo->hprev + t0 * N * P, N, P) : mat(y, lo->hn, N, P);
  if ((st = init_state(first_h, h0))) return st;
  if (lstm && (st = init_state(mat(ws, lo->cst + (d->reverse ? L : 0) * N * H, N, H), c0))) return st;
  for (int64_t k = 0; k < L && !st; k++) {
    const int64_t t = d->reverse ? L - 1 - k : k, tn = t + dir, bs = bsz ? bsz[t] : N;
    const bool last = k == L - 1;
    ts_tensor hp = mat(ws, lo->hprev + t * N * P, N, P);
    ts_tensor hn = last ? mat(y, lo->hn, N, P) : mat(ws, lo->hprev + tn * N * P, N, P);
    ts_tensor ot = mat(y, lo->out + t * N * P, N, P);
    ts_tensor cp = mat(ws, lo->cst + (t + d->reverse) * N * H, N, H);
    ts_tensor cn = mat(ws, lo->cst + (t + !d->reverse) * N * H, N, H);
    if (bs > 0) {
      ts_tensor hpb = head(hp, bs), otb = head(ot, bs);
      if (lstm) {
        ts_tensor a = mat(act, t * N * GH, bs, GH), cpb = head(cp, bs), cnb = head(cn, bs);
        ts_tensor hd = wr ? mat(ws, lo->r + t * N * H, bs, H) : otb;
        ts_tensor *in[2] = {&a, &cpb};
        if (!(st = gemm_reusing(a, hpb, wt, 1, wt_token)) && !(st = run(TS_OP_LSTM_CELL, 2, in, &hd, &cnb, &a, 0)))
          st = wr ? gemm_reusing(otb, hd, wrt, 0, wrt_token) : TS_OK;
      } else if (d->mode == TS_RNN_GRU) {
        ts_tensor g = mat(gh, 0, bs, GH), gx = mat(x, t * N * GH, bs, GH), bb = b ? *b : g;
        ts_tensor a = mat(act, t * N * lo->A, bs, lo->A);
        ts_tensor *in[4] = {&gx, &g, &hpb, &bb};
        if (!(st = gemm_reusing(g, hpb, wt, 0, wt_token))) st = run(TS_OP_GRU_CELL, b ? 4 : 3, in, &otb, &a, NULL, 0);
      } else {
        ts_tensor a = mat(act, t * N * H, bs, H);
        ts_tensor *in[1] = {&a};
        if (!(st = gemm_reusing(a, hpb, wt, 1, wt_token)) && !(st = run(TS_OP_RNN_CELL, 1, in, &a, NULL, NULL, relu)))
          st = copy(otb, a);
      }
      if (!st) st = copy(head(hn, bs), otb);
    }
    if (!st && bs < N) { /* rows past their sequence's end keep their state */
      st = copy(tail(hn, bs), tail(hp, bs));
      if (!st && lstm) st = copy(tail(cn, bs), tail(cp, bs));
    }
  }
  if (!st && lstm) /* c_n: the state after the last step, or c0 when there are no steps */
    st = copy(mat(y, lo->cn, N, H), mat(ws, lo->cst + (d->reverse ? 0 : L) * N * H, N, H));
  return st;
}

/* the node's backward (grad_kinds.def): one call of ts_rnn_layer_backward */
ts_status ts_rnn_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *ws = NULL, *w = NULL, *wr = NULL, *act = NULL;
  ts_status st = ts_ag_saved(n, 0, &ws);
  if (!st) st = ts_ag_saved(n, 1, &w);
  if (!st && n->saved[2]) st = ts_ag_saved(n, 2, &wr);
  if (!st) st = ts_ag_saved(n, 3, &act);
  if (st) return st;
  ts_rnn_dims d = {.mode = (ts_rnn_mode)(n->i[0] - TS_GRAD_RNN_TANH), .reverse = n->i[1] != 0, .L = n->i[2],
                   .N = n->i[3], .H = n->i[4], .P = n->i[5]};
  bool need[6];
  for (int k = 0; k < 6; k++) need[k] = k < n->nin && (n->next[k].fn || n->next[k].leaf);
  return ts_rnn_layer_backward(&d, n->nlist ? n->list : NULL, g, ws, act, w, wr, n->next[4].ndim > 0, need, grads);
}

static ts_status record(const ts_rnn_dims *d, ts_tensor *const in[6], const int64_t *bsz, ts_tensor *ws,
                        ts_tensor *act, ts_tensor *w, ts_tensor *wr, ts_tensor *y) {
  _Static_assert(TS_GRAD_RNN_RELU - TS_GRAD_RNN_TANH == TS_RNN_RELU && TS_GRAD_LSTM - TS_GRAD_RNN_TANH == TS_RNN_LSTM &&
                     TS_GRAD_GRU - TS_GRAD_RNN_TANH == TS_RNN_GRU,
                 "grad_kinds.def lists the recurrent kinds in ts_rnn_mode's order");
  ts_node *n;
  ts_status st = ts_ag_record_kind((ts_grad_kind)(TS_GRAD_RNN_TANH + d->mode), 6, in, y, &n);
  if (st) return st;
  n->i[1] = d->reverse, n->i[2] = d->L, n->i[3] = d->N, n->i[4] = d->H, n->i[5] = d->P;
  ts_ag_save(n, 0, ws);
  ts_ag_save(n, 1, w);
  if (wr) ts_ag_save(n, 2, wr);
  ts_ag_save(n, 3, act);
  if (bsz && d->L > 0) {
    n->list = malloc(sizeof(int64_t) * (size_t)d->L);
    if (!n->list) return ts_fail(TS_ERR_OOM, "out of memory recording %s", n->name);
    memcpy(n->list, bsz, sizeof(int64_t) * (size_t)d->L);
    n->nlist = (int)d->L;
  }
  return TS_OK;
}

/* a view of y's part: (n0, n1[, n2]) at off */
static ts_status part(ts_tensor *y, int64_t off, int nd, const int64_t *sizes, ts_tensor **out) {
  int64_t numel = 1;
  for (int k = 0; k < nd; k++) numel *= sizes[k];
  ts_tensor *nw = NULL;
  ts_status st = ts_narrow(y, 0, off, numel, &nw);
  if (!st) st = ts_view(nw, nd, sizes, out);
  ts_tensor_release(nw);
  return st;
}

ts_status ts_rnn_layer(ts_rnn_mode mode, ts_tensor *xproj, bool xproj_scratch, ts_tensor *h0, ts_tensor *c0,
                       ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *w_hr, bool reverse, const int64_t *batch_sizes,
                       ts_tensor **output, ts_tensor **h_n, ts_tensor **c_n) {
  const char *fn = name_of(mode);
  const bool lstm = mode == TS_RNN_LSTM;
  const int G = gates_of(mode);
  if ((unsigned)mode > TS_RNN_GRU) return ts_fail(TS_ERR_ARG, "rnn: unknown mode %d", (int)mode);
  if (!xproj || !w_hh) return ts_fail(TS_ERR_ARG, "%s: the input projection and weight_hh are required", fn);
  if (xproj->dtype != TS_FLOAT32 && xproj->dtype != TS_FLOAT64)
    return ts_fail(TS_ERR_DTYPE, "%s: expected a float32 or float64 input, got %s", fn, ts_dtype_name(xproj->dtype));
  if (xproj->ndim != 3)
    return ts_fail(TS_ERR_SHAPE, "%s: expected the input projection to be 3-D (L, N, %d*H), got %s", fn, G,
                   shape_of(xproj).s);
  if (w_hh->ndim != 2 || w_hh->sizes[0] % G != 0)
    return ts_fail(TS_ERR_SHAPE, "%s: expected weight_hh of shape (%d*hidden_size, P), got %s", fn, G,
                   shape_of(w_hh).s);
  if (w_hr && !lstm) return ts_fail(TS_ERR_ARG, "%s: weight_hr (a projection) is for LSTMs only", fn);
  if (c0 && !lstm) return ts_fail(TS_ERR_ARG, "%s: a cell state is for LSTMs only", fn);
  if (b_hh && mode != TS_RNN_GRU) return ts_fail(TS_ERR_ARG, "%s: bias_hh goes into the input projection", fn);
  ts_rnn_dims d = {.mode = mode, .reverse = reverse, .L = xproj->sizes[0], .N = xproj->sizes[1],
                   .H = w_hh->sizes[0] / G, .P = w_hh->sizes[1]};
  ts_status st;
  if ((st = check_like(fn, "weight_hh", w_hh, xproj))) return st;
  if (xproj->sizes[2] != G * d.H)
    return ts_fail(TS_ERR_SHAPE, "%s: the input projection has %lld features, expected %lld (weight_hh is %s)", fn,
                   (long long)xproj->sizes[2], (long long)(G * d.H), shape_of(w_hh).s);
  if (w_hr) {
    if ((st = check_like(fn, "weight_hr", w_hr, xproj)) || (st = check_shape(fn, "weight_hr", w_hr, 2, d.P, d.H)))
      return st;
  } else if (d.P != d.H) {
    return ts_fail(TS_ERR_SHAPE, "%s: expected weight_hh of shape (%lld, %lld), got %s", fn, (long long)(G * d.H),
                   (long long)d.H, shape_of(w_hh).s);
  }
  if (b_hh && ((st = check_like(fn, "bias_hh", b_hh, xproj)) || (st = check_shape(fn, "bias_hh", b_hh, 1, G * d.H, 0))))
    return st;
  if (h0 && ((st = check_like(fn, "hx", h0, xproj)) || (st = check_shape(fn, "hx", h0, 2, d.N, d.P)))) return st;
  if (c0 && ((st = check_like(fn, "cx", c0, xproj)) || (st = check_shape(fn, "cx", c0, 2, d.N, d.H)))) return st;
  bool partial = false;
  if (batch_sizes)
    for (int64_t t = 0; t < d.L; t++) {
      if (batch_sizes[t] < 0 || batch_sizes[t] > d.N || (t > 0 && batch_sizes[t] > batch_sizes[t - 1]))
        return ts_fail(TS_ERR_ARG, "%s: batch_sizes must be non-increasing and within [0, %lld], got %lld at step %lld",
                       fn, (long long)d.N, (long long)batch_sizes[t], (long long)t);
      partial = partial || batch_sizes[t] < d.N;
    }
  layout lo;
  if ((st = layout_of(&d, w_hr != NULL, &lo))) return st;

  tmps k = {.n = 0};
  ts_tensor **xc = tmp(&k), **wc = tmp(&k), **wrc = tmp(&k), **bc = tmp(&k), **hc = tmp(&k), **cc = tmp(&k),
            **ws = tmp(&k), **act = tmp(&k), **y = tmp(&k), **gh = tmp(&k), **o = tmp(&k), **hn = tmp(&k),
            **cn = tmp(&k);
  TS_AG_OFF(prev);
  TRY(ts_contiguous(xproj, xc));
  TRY(ts_contiguous(w_hh, wc));
  if (w_hr) TRY(ts_contiguous(w_hr, wrc));
  if (b_hh) TRY(ts_contiguous(b_hh, bc));
  if (h0) TRY(ts_contiguous(h0, hc));
  if (c0) TRY(ts_contiguous(c0, cc));
  TRY(ts_tensor_empty(1, &lo.ws_total, xproj->dtype, xproj->device, ws));
  if (mode == TS_RNN_GRU) {
    TRY(ts_tensor_empty(1, &lo.act_total, xproj->dtype, xproj->device, act));
  } else if (*xc != xproj) { /* ts_contiguous's copy is this call's own: the gates are computed in it */
    ts_tensor_retain(*xc);
    *act = *xc;
  } else if (xproj_scratch) { /* the gates are computed in place: xproj's values are gone */
    ts_tensor_retain(xproj);
    *act = xproj;
    xproj->storage->version++;
  } else {
    TRY(ts_tensor_empty(1, &lo.act_total, xproj->dtype, xproj->device, act));
    ts_tensor a = mat(*act, 0, d.L * d.N, lo.GH);
    TRY(copy(a, mat(*xc, 0, d.L * d.N, lo.GH)));
  }
  TRY(ts_tensor_empty(1, &lo.y_total, xproj->dtype, xproj->device, y));
  if (partial) { /* rows past their end: zeros in the output, and in r, which W_hr's gradient reads whole */
    TRY(zero(*y));
    if (w_hr) {
      ts_tensor r = mat(*ws, lo.r, d.L * d.N, d.H);
      TRY(zero(&r));
    }
  }
  if (mode == TS_RNN_GRU) {
    int64_t s[2] = {d.N, lo.GH};
    TRY(ts_tensor_empty(2, s, xproj->dtype, xproj->device, gh));
  }
  TRY(forward_steps(&d, &lo, batch_sizes, *xc, *hc, *cc, *wc, *bc, *wrc, *ws, *act, *y, *gh));
  TS_AG_RESTORE(prev);
  {
    ts_tensor *in[6] = {xproj, h0, c0, w_hh, b_hh, w_hr};
    if (ts_ag_needed(6, in)) TRY(record(&d, in, batch_sizes, *ws, *act, *wc, *wrc, *y));
  }
  {
    int64_t so[3] = {d.L, d.N, d.P}, sh[2] = {d.N, d.P}, sc[2] = {d.N, d.H};
    TRY(part(*y, lo.out, 3, so, o));
    TRY(part(*y, lo.hn, 2, sh, hn));
    if (lstm) TRY(part(*y, lo.cn, 2, sc, cn));
  }
  *output = take(o);
  *h_n = take(hn);
  if (c_n) *c_n = lstm ? take(cn) : NULL;
done:
  TS_AG_RESTORE(prev);
  tmps_free(&k);
  return st;
}

/* ---- backward ------------------------------------------------------------------- */

ts_status ts_rnn_layer_backward(const ts_rnn_dims *d, const int64_t *bsz, ts_tensor *g, ts_tensor *ws,
                                ts_tensor *acts, ts_tensor *w, ts_tensor *wr, bool has_b_hh, const bool need[6],
                                ts_tensor *grads[6]) {
  const char *fn = "rnn_backward";
  layout lo;
  ts_status st = layout_of(d, wr != NULL, &lo);
  if (st) return st;
  if (ts_numel(g) != lo.y_total || ts_numel(ws) != lo.ws_total || ts_numel(acts) != lo.act_total ||
      !ts_is_contiguous(ws) || !ts_is_contiguous(acts) || !ts_is_contiguous(w) || (wr && !ts_is_contiguous(wr)))
    return ts_fail(TS_ERR_SHAPE, "%s: the gradient or the saved tensors do not match the recorded sizes", fn);
  const int64_t L = d->L, N = d->N, H = d->H, P = d->P, GH = lo.GH, LN = L * N;
  const bool lstm = d->mode == TS_RNN_LSTM, gru = d->mode == TS_RNN_GRU;
  const int relu = d->mode == TS_RNN_RELU;
  bool partial = false;
  for (int64_t t = 0; bsz && t < L; t++) partial = partial || bsz[t] < N;
  const ts_dtype dt = ws->dtype;
  const ts_device dev = ws->device;
  tmps k = {.n = 0};
  ts_tensor **gc = tmp(&k), **dh = tmp(&k), **dc = tmp(&k), **dG = tmp(&k), **dGh = tmp(&k), **dHs = tmp(&k),
            **dr = tmp(&k), **gw = tmp(&k), **gb = tmp(&k), **gwr = tmp(&k);
  TS_AG_OFF(prev);
  TRY(ts_contiguous(g, gc));
  {
    int64_t s[3] = {L, N, GH}, sh[2] = {N, P}, sc[2] = {N, H}, sp[3] = {L, N, P};
    TRY(ts_tensor_empty(2, sh, dt, dev, dh));
    TRY(copy(mat(*dh, 0, N, P), mat(*gc, lo.hn, N, P)));
    if (lstm) {
      TRY(ts_tensor_empty(2, sc, dt, dev, dc));
      TRY(copy(mat(*dc, 0, N, H), mat(*gc, lo.cn, N, H)));
    }
    TRY(ts_tensor_empty(3, s, dt, dev, dG));
    if (partial) TRY(zero(*dG));
    if (gru) {
      TRY(ts_tensor_empty(3, s, dt, dev, dGh));
      if (partial) TRY(zero(*dGh));
    }
    if (wr) {
      TRY(ts_tensor_empty(3, sp, dt, dev, dHs));
      if (partial) TRY(zero(*dHs));
      TRY(ts_tensor_empty(2, sc, dt, dev, dr));
    }
  }
  const ts_tensor W = mat(w, 0, GH, P);
  const int64_t w_token = reuse_token(), wr_token = reuse_token();
  for (int64_t s = 0; s < L; s++) {
    const int64_t t = d->reverse ? s : L - 1 - s, bs = bsz ? bsz[t] : N;
    if (bs == 0) continue;
    ts_tensor dhb = mat(*dh, 0, bs, P), act = mat(acts, t * N * lo.A, bs, lo.A);
    TRY(add_(dhb, mat(*gc, lo.out + t * N * P, bs, P)));
    if (lstm) {
      ts_tensor dcur = dhb, dgb = mat(*dG, t * N * GH, bs, GH), dcb = mat(*dc, 0, bs, H);
      ts_tensor cp = mat(ws, lo.cst + (t + d->reverse) * N * H, bs, H);
      ts_tensor c = mat(ws, lo.cst + (t + !d->reverse) * N * H, bs, H);
      if (wr) { /* h = r W_hr^T: r's gradient is dh W_hr */
        dcur = mat(*dr, 0, bs, H);
        TRY(copy(mat(*dHs, t * N * P, bs, P), dhb));
        TRY(gemm_reusing(dcur, dhb, mat(wr, 0, P, H), 0, wr_token));
      }
      ts_tensor *in[5] = {&dcur, &dcb, &act, &cp, &c};
      TRY(run(TS_OP_LSTM_CELL_BACKWARD, 5, in, &dgb, &dcb, NULL, 0));
      TRY(gemm_reusing(dhb, dgb, W, 0, w_token));
    } else if (gru) {
      ts_tensor dgx = mat(*dG, t * N * GH, bs, GH), dgh = mat(*dGh, t * N * GH, bs, GH);
      ts_tensor hp = mat(ws, lo.hprev + t * N * P, bs, P);
      ts_tensor *in[3] = {&dhb, &act, &hp};
      TRY(run(TS_OP_GRU_CELL_BACKWARD, 3, in, &dgx, &dgh, &dhb, 0));
      TRY(gemm_reusing(dhb, dgh, W, 1, w_token));
    } else {
      ts_tensor dgb = mat(*dG, t * N * H, bs, H);
      ts_tensor *in[2] = {&dhb, &act};
      TRY(run(TS_OP_RNN_CELL_BACKWARD, 2, in, &dgb, NULL, NULL, relu));
      TRY(gemm_reusing(dhb, dgb, W, 0, w_token));
    }
  }
  if (need[3]) { /* dW_hh = sum over steps of dgates^T h_prev: one GEMM */
    int64_t s[2] = {GH, P};
    TRY(ts_tensor_empty(2, s, dt, dev, gw));
    TRY(LN ? gemm(mat(*gw, 0, GH, P), tr(mat(gru ? *dGh : *dG, 0, LN, GH)), mat(ws, lo.hprev, LN, P), 0) : zero(*gw));
  }
  if (need[4] && gru && has_b_hh) {
    int64_t s[2] = {LN, GH}, dim0 = 0;
    ts_tensor **m = tmp(&k);
    TRY(ts_view(*dGh, 2, s, m));
    TRY(ts_sum(*m, 1, &dim0, false, gb));
  }
  if (need[5] && wr) {
    int64_t s[2] = {P, H};
    TRY(ts_tensor_empty(2, s, dt, dev, gwr));
    TRY(LN ? gemm(mat(*gwr, 0, P, H), tr(mat(*dHs, 0, LN, P)), mat(ws, lo.r, LN, H), 0) : zero(*gwr));
  }
  if (need[0]) grads[0] = take(dG);
  if (need[1]) grads[1] = take(dh);
  if (need[2] && lstm) grads[2] = take(dc);
  if (need[3]) grads[3] = take(gw);
  if (need[4]) grads[4] = take(gb);
  if (need[5]) grads[5] = take(gwr);
done:
  TS_AG_RESTORE(prev);
  tmps_free(&k);
  return st;
}
