/* CPU kernels of the recurrent cells (contracts in src/ops/ops_rnn.def): the gate
 * math of one time step of an LSTM, GRU or Elman RNN over M rows, forward and
 * backward, one pass over the rows. The GEMMs around them are BMM calls of
 * the op layer (src/ops/op_rnn.c). Every operand is contiguous, float32 or
 * float64; an output may be the input the contract says it may alias (each
 * element is read before it is written, by the same iteration). */
#include <math.h>

#include "cpu.h"
#include "vmath.h"

#define D(t) ts_data(t)
/* each function names its element count `work` */
#define PAR _Pragma("omp parallel for schedule(static) if (work > TS_PARALLEL_GRAIN / 8)")

/* exp and tanh by the argument's type (vmath.h: libm's tanhf was half of an
 * LSTM step's time); row functions cloned for x86-64-v3 and -v4 (AVX-512) */
#define EXP TS_VEXP
#define TANH TS_VTANH
#define SIGMOID(T, x) ((T)1 / ((T)1 + EXP((T)-(x))))
#define VECTOR TS_VECTOR_V4

/* gates (M, 4H) pre-activations i, f, g, o -> act (M, 4H) activated, c = f*c_prev + i*g,
 * h = o * tanh(c); one row of H per call of the row function, cloned for AVX2
 * (the baseline build's four SSE lanes made it a tenth of an LSTM step) */
#define LSTM_FWD(NAME, T)                                                                          \
  VECTOR static void NAME##_row(int64_t H, const T *g, const T *cp, T *h, T *c, T *a) {            \
    _Pragma("omp simd")                                                                            \
    for (int64_t j = 0; j < H; j++) {                                                              \
      T ig = SIGMOID(T, g[j]), fg = SIGMOID(T, g[H + j]), gg = TANH((T)g[2 * H + j]),                \
        og = SIGMOID(T, g[3 * H + j]);                                                             \
      T cn = fg * cp[j] + ig * gg;                                                                 \
      a[j] = ig, a[H + j] = fg, a[2 * H + j] = gg, a[3 * H + j] = og;                              \
      c[j] = cn;                                                                                   \
      h[j] = og * TANH((T)cn);                                                                     \
    }                                                                                              \
  }                                                                                                \
  static void NAME(int64_t M, int64_t H, const T *gates, const T *cp, T *h, T *c, T *act) {       \
    const int64_t work = M * H;                                                                   \
    PAR                                                                                             \
    for (int64_t m = 0; m < M; m++)                                                                \
      NAME##_row(H, gates + m * 4 * H, cp + m * H, h + m * H, c + m * H, act + m * 4 * H);        \
  }

/* dh, dc (M, H): gradients reaching h and c; -> dgates (M, 4H), dc_prev (M, H) */
#define LSTM_BWD(NAME, T)                                                                          \
  VECTOR static void NAME##_row(int64_t H, const T *dh, const T *dc, const T *a, const T *cp, const T *c, T *d, \
                                T *dcp) {                                                          \
    _Pragma("omp simd")                                                                            \
    for (int64_t j = 0; j < H; j++) {                                                              \
      T ig = a[j], fg = a[H + j], gg = a[2 * H + j], og = a[3 * H + j];                            \
      T tc = TANH((T)c[j]), dhe = dh[j];                                                           \
      T dct = dc[j] + dhe * og * ((T)1 - tc * tc);                                                 \
      d[j] = dct * gg * ig * ((T)1 - ig);                                                          \
      d[H + j] = dct * cp[j] * fg * ((T)1 - fg);                                                   \
      d[2 * H + j] = dct * ig * ((T)1 - gg * gg);                                                  \
      d[3 * H + j] = dhe * tc * og * ((T)1 - og);                                                  \
      dcp[j] = dct * fg;                                                                           \
    }                                                                                              \
  }                                                                                                \
  static void NAME(int64_t M, int64_t H, const T *dh, const T *dc, const T *act, const T *cp, const T *c, \
                   T *dg, T *dcp) {                                                                \
    const int64_t work = M * H;                                                                   \
    PAR                                                                                             \
    for (int64_t m = 0; m < M; m++) {                                                              \
      const int64_t e = m * H;                                                                     \
      NAME##_row(H, dh + e, dc + e, act + 4 * e, cp + e, c + e, dg + 4 * e, dcp + e);             \
    }                                                                                              \
  }

/* gx (M, 3H) = x W_ih^T + b_ih, gh (M, 3H) = h W_hh^T, b (3H) b_hh or NULL;
 * r = s(gx_r + gh_r + b_r), z likewise, hn = gh_n + b_n, n = tanh(gx_n + r*hn),
 * h = (1 - z)*n + z*h_prev; act (M, 4H) keeps r, z, n, hn */
#define GRU_FWD(NAME, T)                                                                           \
  static void NAME(int64_t M, int64_t H, const T *gx, const T *gh, const T *hp, const T *b, T *h, T *act) { \
    const int64_t work = M * H;                                                                   \
    PAR                                                                                             \
    for (int64_t m = 0; m < M; m++) {                                                              \
      const T *x = gx + m * 3 * H, *y = gh + m * 3 * H;                                            \
      T *a = act + m * 4 * H;                                                                      \
      _Pragma("omp simd")                                                                          \
      for (int64_t j = 0; j < H; j++) {                                                            \
        T br = b ? b[j] : 0, bz = b ? b[H + j] : 0, bn = b ? b[2 * H + j] : 0;                     \
        T r = SIGMOID(T, x[j] + y[j] + br), z = SIGMOID(T, x[H + j] + y[H + j] + bz);             \
        T hn = y[2 * H + j] + bn, n = TANH((T)x[2 * H + j] + r * hn);                                 \
        a[j] = r, a[H + j] = z, a[2 * H + j] = n, a[3 * H + j] = hn;                               \
        h[m * H + j] = ((T)1 - z) * n + z * hp[m * H + j];                                         \
      }                                                                                            \
    }                                                                                              \
  }

/* dh (M, H) -> dgx (M, 3H), dgh (M, 3H) (the gradient of gh + b), dhp (M, H) = dh * z */
#define GRU_BWD(NAME, T)                                                                           \
  static void NAME(int64_t M, int64_t H, const T *dh, const T *act, const T *hp, T *dgx, T *dgh, T *dhp) { \
    const int64_t work = M * H;                                                                   \
    PAR                                                                                             \
    for (int64_t m = 0; m < M; m++) {                                                              \
      const T *a = act + m * 4 * H;                                                                \
      T *dx = dgx + m * 3 * H, *dy = dgh + m * 3 * H;                                              \
      _Pragma("omp simd")                                                                          \
      for (int64_t j = 0; j < H; j++) {                                                            \
        const int64_t e = m * H + j;                                                               \
        T r = a[j], z = a[H + j], n = a[2 * H + j], hn = a[3 * H + j], d = dh[e];                  \
        T dn = d * ((T)1 - z) * ((T)1 - n * n);                                                    \
        T dz = d * (hp[e] - n) * z * ((T)1 - z);                                                   \
        T dr = dn * hn * r * ((T)1 - r);                                                           \
        dx[j] = dr, dx[H + j] = dz, dx[2 * H + j] = dn;                                            \
        dy[j] = dr, dy[H + j] = dz, dy[2 * H + j] = dn * r;                                        \
        dhp[e] = d * z;                                                                            \
      }                                                                                            \
    }                                                                                              \
  }

/* relu: 1, tanh: 0 */
#define RNN_FWD(NAME, T)                                                                           \
  static void NAME(int64_t n, int relu, const T *pre, T *h) {                                      \
    const int64_t work = n;                                                                   \
    PAR                                                                                             \
    for (int64_t e = 0; e < n; e++) h[e] = relu ? (pre[e] > 0 ? pre[e] : 0) : TANH((T)pre[e]);        \
  }

#define RNN_BWD(NAME, T)                                                                           \
  static void NAME(int64_t n, int relu, const T *dh, const T *h, T *dpre) {                        \
    const int64_t work = n;                                                                   \
    PAR                                                                                             \
    for (int64_t e = 0; e < n; e++) dpre[e] = relu ? (h[e] > 0 ? dh[e] : 0) : dh[e] * ((T)1 - h[e] * h[e]); \
  }

LSTM_FWD(lstm_fwd_f32, float)
LSTM_FWD(lstm_fwd_f64, double)
LSTM_BWD(lstm_bwd_f32, float)
LSTM_BWD(lstm_bwd_f64, double)
GRU_FWD(gru_fwd_f32, float)
GRU_FWD(gru_fwd_f64, double)
GRU_BWD(gru_bwd_f32, float)
GRU_BWD(gru_bwd_f64, double)
RNN_FWD(rnn_fwd_f32, float)
RNN_FWD(rnn_fwd_f64, double)
RNN_BWD(rnn_bwd_f32, float)
RNN_BWD(rnn_bwd_f64, double)

static ts_status k_lstm_cell(const ts_call *c) {
  const ts_tensor *cp = c->in[1];
  const int64_t M = cp->sizes[0], H = cp->sizes[1];
  if (cp->dtype == TS_FLOAT32)
    lstm_fwd_f32(M, H, D(c->in[0]), D(cp), D(c->out[0]), D(c->out[1]), D(c->out[2]));
  else lstm_fwd_f64(M, H, D(c->in[0]), D(cp), D(c->out[0]), D(c->out[1]), D(c->out[2]));
  return TS_OK;
}

static ts_status k_lstm_cell_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = in[0]->sizes[0], H = in[0]->sizes[1];
  if (in[0]->dtype == TS_FLOAT32)
    lstm_bwd_f32(M, H, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(in[4]), D(c->out[0]), D(c->out[1]));
  else lstm_bwd_f64(M, H, D(in[0]), D(in[1]), D(in[2]), D(in[3]), D(in[4]), D(c->out[0]), D(c->out[1]));
  return TS_OK;
}

static ts_status k_gru_cell(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = in[2]->sizes[0], H = in[2]->sizes[1];
  void *b = c->nin > 3 ? D(in[3]) : NULL;
  if (in[0]->dtype == TS_FLOAT32)
    gru_fwd_f32(M, H, D(in[0]), D(in[1]), D(in[2]), b, D(c->out[0]), D(c->out[1]));
  else gru_fwd_f64(M, H, D(in[0]), D(in[1]), D(in[2]), b, D(c->out[0]), D(c->out[1]));
  return TS_OK;
}

static ts_status k_gru_cell_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = in[0]->sizes[0], H = in[0]->sizes[1];
  if (in[0]->dtype == TS_FLOAT32)
    gru_bwd_f32(M, H, D(in[0]), D(in[1]), D(in[2]), D(c->out[0]), D(c->out[1]), D(c->out[2]));
  else gru_bwd_f64(M, H, D(in[0]), D(in[1]), D(in[2]), D(c->out[0]), D(c->out[1]), D(c->out[2]));
  return TS_OK;
}

static ts_status k_rnn_cell(const ts_call *c) {
  const int64_t n = ts_numel(c->in[0]);
  if (c->in[0]->dtype == TS_FLOAT32) rnn_fwd_f32(n, (int)c->i[0], D(c->in[0]), D(c->out[0]));
  else rnn_fwd_f64(n, (int)c->i[0], D(c->in[0]), D(c->out[0]));
  return TS_OK;
}

static ts_status k_rnn_cell_backward(const ts_call *c) {
  const int64_t n = ts_numel(c->in[0]);
  if (c->in[0]->dtype == TS_FLOAT32) rnn_bwd_f32(n, (int)c->i[0], D(c->in[0]), D(c->in[1]), D(c->out[0]));
  else rnn_bwd_f64(n, (int)c->i[0], D(c->in[0]), D(c->in[1]), D(c->out[0]));
  return TS_OK;
}

#undef D

void ts_cpu_register_rnn(ts_kernel *k) {
  k[TS_OP_LSTM_CELL] = k_lstm_cell;
  k[TS_OP_LSTM_CELL_BACKWARD] = k_lstm_cell_backward;
  k[TS_OP_GRU_CELL] = k_gru_cell;
  k[TS_OP_GRU_CELL_BACKWARD] = k_gru_cell_backward;
  k[TS_OP_RNN_CELL] = k_rnn_cell;
  k[TS_OP_RNN_CELL_BACKWARD] = k_rnn_cell_backward;
}
