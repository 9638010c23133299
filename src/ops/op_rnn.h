/* The op layer of the recurrent layers (included by ops.h): one call runs one
 * layer of an RNN, LSTM or GRU in one direction over a whole sequence. */
#ifndef TENSH_OP_RNN_H
#define TENSH_OP_RNN_H

typedef enum ts_rnn_mode { TS_RNN_TANH, TS_RNN_RELU, TS_RNN_LSTM, TS_RNN_GRU } ts_rnn_mode;

/* The recurrence of one layer and direction. xproj (L, N, G*H) is the input
 * projection of every step, x W_ih^T + b_ih (+ b_hh, except for the GRU,
 * whose b_hh sits inside its reset gate and is given here), G = 4 (LSTM),
 * 3 (GRU) or 1; w_hh (G*H, P), P = H, or the projection size when w_hr (P, H)
 * is given (LSTM only); h0 (N, P) and c0 (N, H) (LSTM) or NULL for zeros.
 * batch_sizes (L, non-increasing, each <= N) or NULL: step t runs rows
 * [0, batch_sizes[t]) (sequences sorted longest first, as a PackedSequence);
 * other rows keep their state and output zeros. reverse runs t = L-1 .. 0.
 * Out: output (L, N, P), h_n (N, P), c_n (N, H) (LSTM; NULL otherwise).
 * xproj_scratch: the caller gives xproj up (a temporary of its own); when it
 * is contiguous, an LSTM or RNN computes its gates in it in place instead of
 * in a copy, and its values are gone. Recorded for autograd as one node (its
 * backward is the whole BPTT). */
ts_status ts_rnn_layer(ts_rnn_mode mode, ts_tensor *xproj, bool xproj_scratch, ts_tensor *h0, ts_tensor *c0,
                       ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *w_hr, bool reverse, const int64_t *batch_sizes,
                       ts_tensor **output, ts_tensor **h_n, ts_tensor **c_n);

/* The backward of ts_rnn_layer, for its autograd node: g the gradient of the
 * node's flat output (output, h_n, c_n), ws the saved workspace and act the
 * saved activations; grads of xproj, h0, c0, w_hh, b_hh, w_hr where need[k]. */
typedef struct ts_rnn_dims {
  ts_rnn_mode mode;
  bool reverse;
  int64_t L, N, H, P;
} ts_rnn_dims;
ts_status ts_rnn_layer_backward(const ts_rnn_dims *d, const int64_t *batch_sizes, ts_tensor *g, ts_tensor *ws,
                                ts_tensor *act, ts_tensor *w_hh, ts_tensor *w_hr, bool has_b_hh, const bool need[6],
                                ts_tensor *grads[6]);

#endif
