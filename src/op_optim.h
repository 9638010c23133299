/* The op layer's optimizer steps (included by ops.h). */
#ifndef TENSH_OP_OPTIM_H
#define TENSH_OP_OPTIM_H

typedef struct ts_adam_params {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step; /* the step count after this step (1 on the first) */
  bool amsgrad, maximize, decoupled; /* decoupled: AdamW's weight decay */
} ts_adam_params;

/* One Adam/AdamW step over n parameters, in place: params[k], exp_avg[k],
 * exp_avg_sq[k] (and max_exp_avg_sq[k] when amsgrad) are updated from
 * grads[k]. Every tensor of a parameter must share its shape, dtype
 * (float32 or float64), device and be contiguous; the caller falls back to
 * separate ops otherwise (the error says which). */
ts_status ts_adam_step(int n, ts_tensor *const *params, ts_tensor *const *grads, ts_tensor *const *exp_avg,
                       ts_tensor *const *exp_avg_sq, ts_tensor *const *max_exp_avg_sq, const ts_adam_params *p);

#endif
