/* The op layer's neural-network functions (included by ops.h): convolution,
 * pooling, batch and layer normalisation, embedding, each with its backward
 * as a plain function (autograd wires them in). Shapes are NCHW; an
 * unbatched (C, H, W) input is accepted wherever torch accepts one and gives
 * unbatched results. Inputs are float32/float64, or float16/bfloat16 computed
 * in float32. Outputs are NULL-initialised pointers set only on success. */
#ifndef TENSH_OP_NN_H
#define TENSH_OP_NN_H

/* Two non-negative int32 values (h, w) in one kernel parameter. */
static inline int64_t ts_pack2(int64_t h, int64_t w) { return (int64_t)(((uint64_t)h << 32) | (uint64_t)w); }
static inline int64_t ts_unpack_h(int64_t p) { return (int64_t)((uint64_t)p >> 32); }
static inline int64_t ts_unpack_w(int64_t p) { return (int64_t)((uint64_t)p & 0xffffffffu); }

typedef struct ts_conv2d_params {
  int64_t stride[2], padding[2], dilation[2]; /* (h, w) */
  int64_t groups;
} ts_conv2d_params;

/* x (N, C, H, W) or (C, H, W), weight (O, C/groups, kh, kw), bias (O) or NULL -> (N, O, Ho, Wo) */
ts_status ts_conv2d(ts_tensor *x, ts_tensor *weight, ts_tensor *bias, const ts_conv2d_params *p, ts_tensor **out);
/* need[k] says which of grad_input (x's shape), grad_weight, grad_bias (O) to compute;
 * the others are left untouched. */
ts_status ts_conv2d_backward(ts_tensor *grad_out, ts_tensor *x, ts_tensor *weight, const ts_conv2d_params *p,
                             const bool need[3], ts_tensor **grad_input, ts_tensor **grad_weight,
                             ts_tensor **grad_bias);
/* x (N, C, L) or (C, L), weight (O, C/groups, k): conv2d on a height-1 view; params' [1] entries used */
ts_status ts_conv1d(ts_tensor *x, ts_tensor *weight, ts_tensor *bias, const ts_conv2d_params *p, ts_tensor **out);
ts_status ts_conv1d_backward(ts_tensor *grad_out, ts_tensor *x, ts_tensor *weight, const ts_conv2d_params *p,
                             const bool need[3], ts_tensor **grad_input, ts_tensor **grad_weight,
                             ts_tensor **grad_bias);

typedef struct ts_pool2d_params {
  int64_t kernel[2], stride[2], padding[2], dilation[2]; /* (h, w); avg pools need dilation 1 */
  bool ceil_mode;
  bool count_include_pad; /* avg_pool2d */
} ts_pool2d_params;

/* -> values and int64 indices into H*W (torch's return_indices), both (N, C, Ho, Wo) */
ts_status ts_max_pool2d(ts_tensor *x, const ts_pool2d_params *p, ts_tensor **out, ts_tensor **indices);
ts_status ts_max_pool2d_backward(ts_tensor *grad_out, ts_tensor *indices, ts_tensor *x, ts_tensor **grad_input);
ts_status ts_avg_pool2d(ts_tensor *x, const ts_pool2d_params *p, ts_tensor **out);
ts_status ts_avg_pool2d_backward(ts_tensor *grad_out, ts_tensor *x, const ts_pool2d_params *p, ts_tensor **grad_input);
ts_status ts_adaptive_avg_pool2d(ts_tensor *x, int64_t oh, int64_t ow, ts_tensor **out);
ts_status ts_adaptive_avg_pool2d_backward(ts_tensor *grad_out, ts_tensor *x, ts_tensor **grad_input);

/* x (N, C, *). running_mean/var (C) may be NULL (then training must be true); in
 * training they are updated in place with momentum and the unbiased variance.
 * weight/bias (C) may be NULL. saved_mean/saved_invstd (C), in the compute dtype:
 * the statistics used (batch ones in training, running ones in eval); either
 * pointer may be NULL. */
ts_status ts_batch_norm(ts_tensor *x, ts_tensor *running_mean, ts_tensor *running_var, ts_tensor *weight,
                        ts_tensor *bias, bool training, double momentum, double eps, ts_tensor **out,
                        ts_tensor **saved_mean, ts_tensor **saved_invstd);
ts_status ts_batch_norm_backward(ts_tensor *grad_out, ts_tensor *x, ts_tensor *weight, ts_tensor *saved_mean,
                                 ts_tensor *saved_invstd, bool training, const bool need[3], ts_tensor **grad_input,
                                 ts_tensor **grad_weight, ts_tensor **grad_bias);

/* Normalises over the last nd dims, which must equal shape; weight/bias (shape) or NULL.
 * saved_mean/saved_rstd: x's leading dims then nd 1s (torch's native_layer_norm). */
ts_status ts_layer_norm(ts_tensor *x, int nd, const int64_t *shape, ts_tensor *weight, ts_tensor *bias, double eps,
                        ts_tensor **out, ts_tensor **saved_mean, ts_tensor **saved_rstd);
ts_status ts_layer_norm_backward(ts_tensor *grad_out, ts_tensor *x, int nd, const int64_t *shape,
                                 ts_tensor *saved_mean, ts_tensor *saved_rstd, ts_tensor *weight, const bool need[3],
                                 ts_tensor **grad_input, ts_tensor **grad_weight, ts_tensor **grad_bias);

/* weight (V, D), indices int64/int32 (any shape) -> indices.shape + (D) */
ts_status ts_embedding(ts_tensor *weight, ts_tensor *indices, ts_tensor **out);
/* as ts_embedding; rows at *padding_idx (if not NULL) get no gradient */
ts_status ts_embedding_padded(ts_tensor *weight, ts_tensor *indices, const int64_t *padding_idx, ts_tensor **out);
/* -> (V, D), duplicate indices accumulate; rows at *padding_idx (if not NULL) get no gradient */
ts_status ts_embedding_backward(ts_tensor *grad_out, ts_tensor *indices, int64_t num_weights,
                                const int64_t *padding_idx, ts_tensor **grad_weight);

/* ---- activations with kernels of their own (op_nn_act.c) ---- */
typedef enum ts_activation {
  TS_ACT_SOFTPLUS,    /* p[0] beta, p[1] threshold */
  TS_ACT_ELU,         /* p[0] alpha */
  TS_ACT_HARDTANH,    /* p[0] min_val, p[1] max_val */
  TS_ACT_LOG_SIGMOID,
  TS_ACT_MISH,
} ts_activation;
/* x floating, any shape and strides -> act(x) in x's dtype (halves computed in float32) */
ts_status ts_activation_forward(ts_activation a, ts_tensor *x, const double p[2], ts_tensor **out);
/* grad_out of x's shape -> the gradient with respect to x */
ts_status ts_activation_backward(ts_activation a, ts_tensor *grad_out, ts_tensor *x, const double p[2],
                                 ts_tensor **grad_input);
/* GELU's gradient (exact, or of the tanh approximation) in one kernel, as the activations' above */
ts_status ts_gelu_backward(ts_tensor *grad_out, ts_tensor *x, bool tanh_approximation, ts_tensor **grad_input);

/* x (N, C, *) normalised over groups of C/G channels (with the trailing dims) per sample;
 * weight/bias (C) or NULL. saved_mean/saved_rstd (N, G) in the compute dtype. */
ts_status ts_group_norm(ts_tensor *x, int64_t G, ts_tensor *weight, ts_tensor *bias, double eps, ts_tensor **out,
                        ts_tensor **saved_mean, ts_tensor **saved_rstd);
ts_status ts_group_norm_backward(ts_tensor *grad_out, ts_tensor *x, int64_t G, ts_tensor *saved_mean,
                                 ts_tensor *saved_rstd, ts_tensor *weight, const bool need[3], ts_tensor **grad_input,
                                 ts_tensor **grad_weight, ts_tensor **grad_bias);

/* Interpolation (op_nn_upsample.c), torch's upsample_nearest1d/2d, upsample_linear1d and
 * upsample_bilinear2d: x (N, C, L) or (N, C, H, W) to the spatial size `size` (1 or 2
 * entries); scales[d]: the scale factor the caller gave for spatial dim d, or 0 (the
 * sizes set it). align_corners only for linear. */
typedef struct ts_upsample_params {
  bool linear;          /* linear (3-D) / bilinear (4-D); else nearest */
  bool align_corners;
  int nd;               /* spatial dims: 1 or 2 */
  int64_t size[2];      /* the output's spatial sizes */
  double scales[2];
} ts_upsample_params;
ts_status ts_upsample(ts_tensor *x, const ts_upsample_params *p, ts_tensor **out);
/* input_sizes: x's sizes (its rank is p->nd + 2) */
ts_status ts_upsample_backward(ts_tensor *grad_out, const int64_t *input_sizes, const ts_upsample_params *p,
                               ts_tensor **grad_input);

/* x (N, C, H, W) or (C, H, W) -> the maxima of adaptive_avg_pool2d's windows and their
 * int64 indices into H*W; the backward is ts_max_pool2d_backward */
ts_status ts_adaptive_max_pool2d(ts_tensor *x, int64_t oh, int64_t ow, ts_tensor **out, ts_tensor **indices);

#endif
