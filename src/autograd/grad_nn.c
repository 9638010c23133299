/* Autograd for the neural-network ops: each node calls the op's backward
 * function from op_nn_*.c. Parameter structs are kept byte for byte in the
 * node's list. */
#include <stdlib.h>
#include <string.h>

#include "grad.h"

static ts_status keep_params(ts_node *n, const void *p, size_t size) {
  size_t words = (size + sizeof(int64_t) - 1) / sizeof(int64_t);
  n->list = calloc(words, sizeof(int64_t));
  if (!n->list) return ts_fail(TS_ERR_OOM, "out of memory recording %s", n->name);
  memcpy(n->list, p, size);
  n->nlist = (int)words;
  return TS_OK;
}

static ts_status load(ts_node *n, int k, ts_tensor **t) { return n->saved[k] ? ts_ag_saved(n, k, t) : TS_OK; }

ts_status ts_nn_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *s0 = NULL, *s1 = NULL, *s2 = NULL, *s3 = NULL;
  ts_status st = load(n, 0, &s0);
  if (!st) st = load(n, 1, &s1);
  if (!st) st = load(n, 2, &s2);
  if (!st) st = load(n, 3, &s3);
  if (st) return st;
  if (n->released) return ts_ag_saved(n, 0, &s0); /* the "backward twice" error */
  bool need[3] = {n->nin > 0 && (n->next[0].fn || n->next[0].leaf), n->nin > 1 && (n->next[1].fn || n->next[1].leaf),
                  n->nin > 2 && (n->next[2].fn || n->next[2].leaf)};
  switch (n->i[0]) {
  case TS_GRAD_CONV2D:
  case TS_GRAD_CONV1D: { /* inputs x, weight, bias; saved x, weight */
    const ts_conv2d_params *p = (const ts_conv2d_params *)n->list;
    return (n->i[0] == TS_GRAD_CONV2D ? ts_conv2d_backward : ts_conv1d_backward)(g, s0, s1, p, need, &grads[0], &grads[1],
                                                                          &grads[2]);
  }
  case TS_GRAD_MAX_POOL2D: /* saved x, indices */
    return ts_max_pool2d_backward(g, s1, s0, &grads[0]);
  case TS_GRAD_AVG_POOL2D:
    return ts_avg_pool2d_backward(g, s0, (const ts_pool2d_params *)n->list, &grads[0]);
  case TS_GRAD_ADAPTIVE_AVG_POOL2D:
    return ts_adaptive_avg_pool2d_backward(g, s0, &grads[0]);
  case TS_GRAD_BATCH_NORM: /* inputs x, weight, bias; saved x, weight, mean, invstd */
    return ts_batch_norm_backward(g, s0, s1, s2, s3, n->i[1] != 0, need, &grads[0], &grads[1], &grads[2]);
  case TS_GRAD_LAYER_NORM: /* inputs x, weight, bias; saved x, weight, mean, rstd; list: normalized shape */
    return ts_layer_norm_backward(g, s0, n->nlist, n->list, s2, s3, s1, need, &grads[0], &grads[1], &grads[2]);
  case TS_GRAD_EMBEDDING: { /* inputs weight; saved indices */
    int64_t pad = n->i[2];
    return ts_embedding_backward(g, s0, n->i[1], n->i[3] ? &pad : NULL, &grads[0]);
  }
  case TS_GRAD_SOFTPLUS:
  case TS_GRAD_ELU:
  case TS_GRAD_HARDTANH:
  case TS_GRAD_LOG_SIGMOID:
  case TS_GRAD_MISH: /* saved x */
    return ts_activation_backward((ts_activation)n->i[1], g, s0, n->f, &grads[0]);
  case TS_GRAD_GROUP_NORM: /* inputs x, weight, bias; saved x, weight, mean, rstd */
    return ts_group_norm_backward(g, s0, n->i[1], s2, s3, s1, need, &grads[0], &grads[1], &grads[2]);
  case TS_GRAD_UPSAMPLE_NEAREST1D:
  case TS_GRAD_UPSAMPLE_NEAREST2D:
  case TS_GRAD_UPSAMPLE_LINEAR1D:
  case TS_GRAD_UPSAMPLE_BILINEAR2D: /* the input's sizes from its edge */
    return ts_upsample_backward(g, n->next[0].sizes, (const ts_upsample_params *)n->list, &grads[0]);
  case TS_GRAD_ADAPTIVE_MAX_POOL2D: /* saved x, indices */
    return ts_max_pool2d_backward(g, s1, s0, &grads[0]);
  }
  return ts_fail(TS_ERR_ARG, "unknown nn node");
}

ts_status ts_ag_conv(bool is_1d, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv2d_params *p, ts_tensor *y) {
  ts_tensor *in[3] = {x, w, b};
  ts_node *n;
  ts_status st = ts_ag_record_kind(is_1d ? TS_GRAD_CONV1D : TS_GRAD_CONV2D, b ? 3 : 2, in, y, &n);
  if (st) return st;
  ts_ag_save(n, 0, x);
  ts_ag_save(n, 1, w);
  return keep_params(n, p, sizeof *p);
}

/* the max pools' nodes: saved x and the indices of the maxima */
static ts_status record_max_pool(ts_grad_kind kind, ts_tensor *x, ts_tensor *indices, ts_tensor *y) {
  ts_node *n;
  ts_status st = ts_ag_record_kind(kind, 1, &x, y, &n);
  if (st) return st;
  ts_ag_save(n, 0, x);
  ts_ag_save(n, 1, indices);
  return TS_OK;
}

ts_status ts_ag_max_pool2d(ts_tensor *x, ts_tensor *indices, ts_tensor *y) {
  return record_max_pool(TS_GRAD_MAX_POOL2D, x, indices, y);
}

ts_status ts_ag_avg_pool2d(ts_tensor *x, const ts_pool2d_params *p, ts_tensor *y) {
  ts_node *n;
  ts_status st = ts_ag_record_kind(TS_GRAD_AVG_POOL2D, 1, &x, y, &n);
  if (st) return st;
  ts_ag_save(n, 0, x);
  return keep_params(n, p, sizeof *p);
}

ts_status ts_ag_adaptive_avg_pool2d(ts_tensor *x, ts_tensor *y) {
  ts_node *n;
  ts_status st = ts_ag_record_kind(TS_GRAD_ADAPTIVE_AVG_POOL2D, 1, &x, y, &n);
  if (!st) ts_ag_save(n, 0, x);
  return st;
}

/* the normalisations' nodes: inputs x, weight, bias; saved x, weight, the mean and the
 * spread (invstd or rstd); i[1] param (batch norm: training; group norm: G) */
static ts_status record_norm(ts_grad_kind kind, ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_tensor *mean,
                             ts_tensor *spread, ts_tensor *y, int64_t param, ts_node **node) {
  ts_tensor *in[3] = {x, w, b};
  ts_status st = ts_ag_record_kind(kind, 3, in, y, node);
  if (st) return st;
  ts_node *n = *node;
  n->i[1] = param;
  ts_ag_save(n, 0, x);
  if (w) ts_ag_save(n, 1, w);
  ts_ag_save(n, 2, mean);
  ts_ag_save(n, 3, spread);
  return TS_OK;
}

ts_status ts_ag_batch_norm(ts_tensor *x, ts_tensor *w, ts_tensor *b, bool training, ts_tensor *mean, ts_tensor *invstd,
                           ts_tensor *y) {
  ts_node *n;
  return record_norm(TS_GRAD_BATCH_NORM, x, w, b, mean, invstd, y, training, &n);
}

ts_status ts_ag_layer_norm(ts_tensor *x, int nd, const int64_t *shape, ts_tensor *w, ts_tensor *b, ts_tensor *mean,
                           ts_tensor *rstd, ts_tensor *y) {
  ts_node *n;
  ts_status st = record_norm(TS_GRAD_LAYER_NORM, x, w, b, mean, rstd, y, 0, &n);
  if (st) return st;
  st = keep_params(n, shape, sizeof(int64_t) * (size_t)nd);
  n->nlist = nd;
  return st;
}

ts_status ts_ag_embedding(ts_tensor *w, ts_tensor *indices, const int64_t *padding_idx, ts_tensor *y) {
  ts_node *n;
  ts_status st = ts_ag_record_kind(TS_GRAD_EMBEDDING, 1, &w, y, &n);
  if (st) return st;
  n->i[1] = w->sizes[0];
  n->i[2] = padding_idx ? *padding_idx : 0;
  n->i[3] = padding_idx != NULL;
  ts_ag_save(n, 0, indices);
  return TS_OK;
}

ts_status ts_ag_activation(ts_activation a, ts_tensor *x, const double p[2], ts_tensor *y) {
  static const ts_grad_kind kinds[] = {[TS_ACT_SOFTPLUS] = TS_GRAD_SOFTPLUS, [TS_ACT_ELU] = TS_GRAD_ELU,
                                       [TS_ACT_HARDTANH] = TS_GRAD_HARDTANH, [TS_ACT_LOG_SIGMOID] = TS_GRAD_LOG_SIGMOID,
                                       [TS_ACT_MISH] = TS_GRAD_MISH};
  ts_node *n;
  ts_status st = ts_ag_record_kind(kinds[a], 1, &x, y, &n);
  if (st) return st;
  n->i[1] = a;
  n->f[0] = p ? p[0] : 0, n->f[1] = p ? p[1] : 0;
  ts_ag_save(n, 0, x);
  return TS_OK;
}

ts_status ts_ag_group_norm(ts_tensor *x, int64_t G, ts_tensor *w, ts_tensor *b, ts_tensor *mean, ts_tensor *rstd,
                           ts_tensor *y) {
  ts_node *n;
  return record_norm(TS_GRAD_GROUP_NORM, x, w, b, mean, rstd, y, G, &n);
}

ts_status ts_ag_upsample(ts_tensor *x, const ts_upsample_params *p, ts_tensor *y) {
  const ts_grad_kind kind = p->nd == 1 ? (p->linear ? TS_GRAD_UPSAMPLE_LINEAR1D : TS_GRAD_UPSAMPLE_NEAREST1D)
                                       : (p->linear ? TS_GRAD_UPSAMPLE_BILINEAR2D : TS_GRAD_UPSAMPLE_NEAREST2D);
  ts_node *n;
  ts_status st = ts_ag_record_kind(kind, 1, &x, y, &n);
  return st ? st : keep_params(n, p, sizeof *p);
}

ts_status ts_ag_adaptive_max_pool2d(ts_tensor *x, ts_tensor *indices, ts_tensor *y) {
  return record_max_pool(TS_GRAD_ADAPTIVE_MAX_POOL2D, x, indices, y);
}
