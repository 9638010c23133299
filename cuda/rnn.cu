// CUDA kernels of the recurrent cells (contracts in src/ops/ops_rnn.def; the CPU
// reference is src/cpu/rnn.c). One thread per (row, hidden unit): it reads
// the unit's gates across the row's blocks and writes the new state, so each
// step's gate math is one launch. Operands contiguous, float32 or float64;
// the aliasing the contract allows is safe because an element is read and
// written by the same thread.
#include "common.cuh"

template <typename T> __device__ __forceinline__ T sigm(T x) { return (T)1 / ((T)1 + exp(-x)); }

template <typename T, typename I>
__global__ void lstm_fwd(I M, I H, const T *gates, const T *cp, T *h, T *c, T *act) {
  TSC_GRID_STRIDE(I, e, M * H) {
    const I m = e / H, j = e - m * H;
    const T *g = gates + m * 4 * H;
    T ig = sigm(g[j]), fg = sigm(g[H + j]), gg = tanh(g[2 * H + j]), og = sigm(g[3 * H + j]);
    T cn = fg * cp[e] + ig * gg;
    T *a = act + m * 4 * H;
    a[j] = ig, a[H + j] = fg, a[2 * H + j] = gg, a[3 * H + j] = og;
    c[e] = cn;
    h[e] = og * tanh(cn);
  }
}

template <typename T, typename I>
__global__ void lstm_bwd(I M, I H, const T *dh, const T *dc, const T *act, const T *cp, const T *c, T *dg, T *dcp) {
  TSC_GRID_STRIDE(I, e, M * H) {
    const I m = e / H, j = e - m * H;
    const T *a = act + m * 4 * H;
    T *d = dg + m * 4 * H;
    T ig = a[j], fg = a[H + j], gg = a[2 * H + j], og = a[3 * H + j];
    T tc = tanh(c[e]), dhe = dh[e];
    T dct = dc[e] + dhe * og * ((T)1 - tc * tc);
    d[j] = dct * gg * ig * ((T)1 - ig);
    d[H + j] = dct * cp[e] * fg * ((T)1 - fg);
    d[2 * H + j] = dct * ig * ((T)1 - gg * gg);
    d[3 * H + j] = dhe * tc * og * ((T)1 - og);
    dcp[e] = dct * fg;
  }
}

template <typename T, typename I>
__global__ void gru_fwd(I M, I H, const T *gx, const T *gh, const T *hp, const T *b, T *h, T *act) {
  TSC_GRID_STRIDE(I, e, M * H) {
    const I m = e / H, j = e - m * H;
    const T *x = gx + m * 3 * H, *y = gh + m * 3 * H;
    T br = b ? b[j] : (T)0, bz = b ? b[H + j] : (T)0, bn = b ? b[2 * H + j] : (T)0;
    T r = sigm(x[j] + y[j] + br), z = sigm(x[H + j] + y[H + j] + bz);
    T hn = y[2 * H + j] + bn, n = tanh(x[2 * H + j] + r * hn);
    T *a = act + m * 4 * H;
    a[j] = r, a[H + j] = z, a[2 * H + j] = n, a[3 * H + j] = hn;
    h[e] = ((T)1 - z) * n + z * hp[e];
  }
}

template <typename T, typename I>
__global__ void gru_bwd(I M, I H, const T *dh, const T *act, const T *hp, T *dgx, T *dgh, T *dhp) {
  TSC_GRID_STRIDE(I, e, M * H) {
    const I m = e / H, j = e - m * H;
    const T *a = act + m * 4 * H;
    T r = a[j], z = a[H + j], n = a[2 * H + j], hn = a[3 * H + j], d = dh[e];
    T dn = d * ((T)1 - z) * ((T)1 - n * n);
    T dz = d * (hp[e] - n) * z * ((T)1 - z);
    T dr = dn * hn * r * ((T)1 - r);
    T *dx = dgx + m * 3 * H, *dy = dgh + m * 3 * H;
    dx[j] = dr, dx[H + j] = dz, dx[2 * H + j] = dn;
    dy[j] = dr, dy[H + j] = dz, dy[2 * H + j] = dn * r;
    dhp[e] = d * z;
  }
}

template <typename T, typename I> __global__ void rnn_fwd(I n, int relu, const T *pre, T *h) {
  TSC_GRID_STRIDE(I, e, n) { h[e] = relu ? (pre[e] > (T)0 ? pre[e] : (T)0) : tanh(pre[e]); }
}

template <typename T, typename I> __global__ void rnn_bwd(I n, int relu, const T *dh, const T *h, T *dpre) {
  TSC_GRID_STRIDE(I, e, n) { dpre[e] = relu ? (h[e] > (T)0 ? dh[e] : (T)0) : dh[e] * ((T)1 - h[e] * h[e]); }
}

template <typename T> static T *P(const ts_tensor *t) { return t ? tsc_ptr<T>(t) : nullptr; }

// the kernel over n = M*H items, 32-bit index math when it fits
#define LAUNCH(KERNEL, n, what, ...)                                                                     \
  do {                                                                                                   \
    const int64_t n_ = (n);                                                                              \
    if (n_ == 0) return TS_OK;                                                                           \
    return tsc_with_index(4 * n_ < (int64_t)UINT32_MAX, [&](auto i) -> ts_status {                       \
      using I = decltype(i);                                                                             \
      if (dbl) KERNEL<double, I><<<tsc_blocks(n_), TSC_THREADS, 0, tsc_stream()>>>(__VA_ARGS__(double)); \
      else KERNEL<float, I><<<tsc_blocks(n_), TSC_THREADS, 0, tsc_stream()>>>(__VA_ARGS__(float));       \
      TSC_LAUNCH_CHECK(what);                                                                            \
      return TS_OK;                                                                                      \
    });                                                                                                  \
  } while (0)

static ts_status k_lstm_cell(const ts_call *c) {
  const int64_t M = c->in[1]->sizes[0], H = c->in[1]->sizes[1];
  const bool dbl = c->in[1]->dtype == TS_FLOAT64;
#define ARGS(T) (I)M, (I)H, P<T>(c->in[0]), P<T>(c->in[1]), P<T>(c->out[0]), P<T>(c->out[1]), P<T>(c->out[2])
  LAUNCH(lstm_fwd, M * H, "lstm_cell", ARGS);
#undef ARGS
}

static ts_status k_lstm_cell_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = in[0]->sizes[0], H = in[0]->sizes[1];
  const bool dbl = in[0]->dtype == TS_FLOAT64;
#define ARGS(T) \
  (I)M, (I)H, P<T>(in[0]), P<T>(in[1]), P<T>(in[2]), P<T>(in[3]), P<T>(in[4]), P<T>(c->out[0]), P<T>(c->out[1])
  LAUNCH(lstm_bwd, M * H, "lstm_cell_backward", ARGS);
#undef ARGS
}

static ts_status k_gru_cell(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = in[2]->sizes[0], H = in[2]->sizes[1];
  const bool dbl = in[0]->dtype == TS_FLOAT64;
  const ts_tensor *b = c->nin > 3 ? in[3] : nullptr;
#define ARGS(T) (I)M, (I)H, P<T>(in[0]), P<T>(in[1]), P<T>(in[2]), P<T>(b), P<T>(c->out[0]), P<T>(c->out[1])
  LAUNCH(gru_fwd, M * H, "gru_cell", ARGS);
#undef ARGS
}

static ts_status k_gru_cell_backward(const ts_call *c) {
  ts_tensor *const *in = c->in;
  const int64_t M = in[0]->sizes[0], H = in[0]->sizes[1];
  const bool dbl = in[0]->dtype == TS_FLOAT64;
#define ARGS(T) \
  (I)M, (I)H, P<T>(in[0]), P<T>(in[1]), P<T>(in[2]), P<T>(c->out[0]), P<T>(c->out[1]), P<T>(c->out[2])
  LAUNCH(gru_bwd, M * H, "gru_cell_backward", ARGS);
#undef ARGS
}

static ts_status k_rnn_cell(const ts_call *c) {
  const int64_t n = ts_numel(c->in[0]);
  const bool dbl = c->in[0]->dtype == TS_FLOAT64;
  const int relu = (int)c->i[0];
#define ARGS(T) (I)n, relu, P<T>(c->in[0]), P<T>(c->out[0])
  LAUNCH(rnn_fwd, n, "rnn_cell", ARGS);
#undef ARGS
}

static ts_status k_rnn_cell_backward(const ts_call *c) {
  const int64_t n = ts_numel(c->in[0]);
  const bool dbl = c->in[0]->dtype == TS_FLOAT64;
  const int relu = (int)c->i[0];
#define ARGS(T) (I)n, relu, P<T>(c->in[0]), P<T>(c->in[1]), P<T>(c->out[0])
  LAUNCH(rnn_bwd, n, "rnn_cell_backward", ARGS);
#undef ARGS
}

void tsc_register_rnn(ts_kernel *k) {
  k[TS_OP_LSTM_CELL] = k_lstm_cell;
  k[TS_OP_LSTM_CELL_BACKWARD] = k_lstm_cell_backward;
  k[TS_OP_GRU_CELL] = k_gru_cell;
  k[TS_OP_GRU_CELL_BACKWARD] = k_gru_cell_backward;
  k[TS_OP_RNN_CELL] = k_rnn_cell;
  k[TS_OP_RNN_CELL_BACKWARD] = k_rnn_cell_backward;
}
