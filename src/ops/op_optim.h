/* The op layer's optimizer steps (included by ops.h). Each updates every
 * parameter of a group in place with one kernel call. Every tensor of a
 * parameter must share its shape, dtype (float32 or float64), device and be
 * contiguous; the caller falls back to separate ops otherwise (the error
 * says which parameter and what is wrong). */
#ifndef TENSH_OP_OPTIM_H
#define TENSH_OP_OPTIM_H

typedef struct ts_adam_params {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step; /* the step count after this step (1 on the first) */
  bool amsgrad, maximize, decoupled; /* decoupled: AdamW's weight decay */
} ts_adam_params;

/* One Adam/AdamW step over n parameters: params[k], exp_avg[k],
 * exp_avg_sq[k] (and max_exp_avg_sq[k] when amsgrad) are updated from grads[k].
 * steps NULL: the step count is p->step. steps given (PyTorch's capturable):
 * steps[k] is parameter k's count, a one-element float32 tensor on its device,
 * incremented on the device and read there (p->step unused), so the step can
 * be captured in a CUDA graph and replayed. */
ts_status ts_adam_step(int n, ts_tensor *const *params, ts_tensor *const *grads, ts_tensor *const *exp_avg,
                       ts_tensor *const *exp_avg_sq, ts_tensor *const *max_exp_avg_sq, ts_tensor *const *steps,
                       const ts_adam_params *p);

typedef struct ts_sgd_params {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
} ts_sgd_params;

/* One SGD step over n parameters. With momentum != 0, momentum_buffers[k]
 * is updated too; fresh[k] (fresh may be NULL: none) says buffer k holds
 * nothing yet and is to be set to the grad (after weight decay), as
 * PyTorch's first step clones it. momentum_buffers is unused otherwise. */
ts_status ts_sgd_step(int n, ts_tensor *const *params, ts_tensor *const *grads, ts_tensor *const *momentum_buffers,
                      const bool *fresh, const ts_sgd_params *p);

typedef struct ts_rmsprop_params {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
} ts_rmsprop_params;

/* One RMSprop step over n parameters: params[k], square_avgs[k],
 * momentum_buffers[k] (when momentum > 0) and grad_avgs[k] (when centered)
 * are updated from grads[k]; the lists not used may be NULL. */
ts_status ts_rmsprop_step(int n, ts_tensor *const *params, ts_tensor *const *grads, ts_tensor *const *square_avgs,
                          ts_tensor *const *momentum_buffers, ts_tensor *const *grad_avgs, const ts_rmsprop_params *p);

/* torch.nn.utils.clip_grad_norm_ over n gradients at once (CLIP_GRAD_NORM):
 * contiguous, one dtype (float32 or float64), one device; norm_type 2 or
 * INFINITY. *total gets the total norm (0-dim); the gradients are scaled in
 * place. Nothing waits for a device. */
ts_status ts_clip_grad_norm(int n, ts_tensor *const *grads, double max_norm, double norm_type, ts_tensor **total);

/* torch._foreach_zero_: n tensors (contiguous, float32 or float64, one
 * device) set to 0 at once (FOREACH_ZERO). */
ts_status ts_foreach_zero(int n, ts_tensor *const *ts);

#endif
