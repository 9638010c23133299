/* Backward formulas of the matrix products. One formula serves matmul in all
 * its shapes (and mm, bmm, mv, dot): ga = g @ b^T, gb = a^T @ g, with the
 * dropped 1s of 1-D operands put back first; the engine sums broadcast batch
 * dims away. */
#include "grad.h"
#include "grad_util.h"

static ts_tensor *mt(ag_scope *s, ts_tensor *t) { /* transpose of the last two dims */
  if (s->st || !t) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_transpose(t, -1, -2, &r);
  return ag_keep(s, st_, r);
}

static ts_tensor *mm(ag_scope *s, ts_tensor *a, ts_tensor *b) {
  if (s->st || !a || !b) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_matmul(a, b, &r);
  return ag_keep(s, st_, r);
}

static ts_tensor *unsq(ag_scope *s, ts_tensor *t, int64_t d) {
  if (s->st || !t) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_unsqueeze(t, d, &r);
  return ag_keep(s, st_, r);
}

static ts_tensor *sq(ag_scope *s, ts_tensor *t, int64_t d) {
  if (s->st || !t) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_squeeze(t, &d, &r);
  return ag_keep(s, st_, r);
}

/* t as a matrix of its last dim's width: (prod(leading dims), last) */
static ts_tensor *rows(ag_scope *s, ts_tensor *t) {
  if (s->st || !t) return NULL;
  ts_tensor *r = NULL;
  ts_status st_ = ts_reshape(t, 2, (int64_t[]){-1, t->sizes[t->ndim - 1]}, &r);
  return ag_keep(s, st_, r);
}

/* a 2-D matrix stored column by column (the transpose of a contiguous one) */
static bool column_major(const ts_tensor *t) {
  return t && t->ndim == 2 && t->sizes[0] > 1 && t->sizes[1] > 1 && t->strides[0] == 1 &&
         t->strides[1] == t->sizes[0];
}

/* ts_mm_ksum in a scope: x @ y, and in *sums x's rows (which 0) or y's columns (1) summed */
static ts_tensor *mm_ksum(ag_scope *s, ts_tensor *x, ts_tensor *y, int which, ts_tensor **sums) {
  *sums = NULL;
  if (s->st || !x || !y) return NULL;
  ts_tensor *r = NULL, *v = NULL;
  ts_status st_ = ts_mm_ksum(x, y, which, &r, &v);
  r = ag_keep(s, st_, r);
  if (!st_) *sums = ag_keep(s, TS_OK, v);
  return r;
}

/* ga, gb of y = a @ b (torch.matmul semantics) times scale; ib < 0: no gb */
static void matmul_grads(ag_scope *s, const ts_node *n, ts_tensor *g, ts_tensor *a, ts_tensor *b, int ia, int ib,
                         ts_tensor **ga, ts_tensor **gb) {
  if (a->ndim == 1 && b->ndim == 1) { /* dot: g is 0-dim */
    if (ag_wants(n, ia)) *ga = AG_MUL(s, g, b);
    if (ag_wants(n, ib)) *gb = AG_MUL(s, g, a);
    return;
  }
  ts_tensor *a2 = a->ndim == 1 ? unsq(s, a, 0) : a, *b2 = b->ndim == 1 ? unsq(s, b, 1) : b;
  ts_tensor *g2 = g;
  if (a->ndim == 1) g2 = unsq(s, g2, -2); /* y lost the row dim */
  if (b->ndim == 1) g2 = unsq(s, g2, -1); /* y lost the column dim */
  /* A column-major operand (w:t() in a Linear layer) gets its gradient in
   * its own layout, as (b g^T)^T or (g^T a)^T: the transpose's backward then
   * hands the weight a contiguous gradient it can adopt without a copy
   * (PyTorch's mm_mat1/mat2_backward do the same) */
  if (ag_wants(n, ia)) {
    ts_tensor *r = column_major(a2) ? mt(s, mm(s, b2, mt(s, g2))) : mm(s, g2, mt(s, b2));
    *ga = a->ndim == 1 ? sq(s, r, -2) : r;
  }
  if (ib >= 0 && ag_wants(n, ib)) {
    /* (batch..., M, K) @ (K, N), a Linear layer on a sequence: b's gradient is one GEMM over
     * the batch rows folded together, not a product per batch entry summed afterwards (the
     * LSTM language model's output layer: 46 ms of bmm and 136 ms of sum per step) */
    ts_tensor *ar = a2, *gr = g2;
    if (a2->ndim >= 3 && b2->ndim == 2 && a2->sizes[a2->ndim - 1] > 0 && g2->sizes[g2->ndim - 1] > 0)
      ar = rows(s, a2), gr = rows(s, g2);
    ts_tensor *r = column_major(b2) ? mt(s, mm(s, mt(s, gr), ar)) : mm(s, mt(s, ar), gr);
    *gb = b->ndim == 1 ? sq(s, r, -1) : r;
  }
}

static ts_status matmul_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *a = NULL, *b = NULL;
  ts_status st = ts_ag_saved(n, 0, &a);
  if (!st) st = ts_ag_saved(n, 1, &b);
  if (st) return st;
  ag_scope s = {.st = TS_OK};
  ts_tensor *ga = NULL, *gb = NULL;
  matmul_grads(&s, n, g, a, b, 0, 1, &ga, &gb);
  grads[0] = ag_end_keep(&s, ga);
  grads[1] = ag_end_keep(&s, gb);
  ag_end(&s, NULL);
  return s.st;
}

ts_status ts_ag_matmul(const char *name, ts_tensor *a, ts_tensor *b, ts_tensor *y) {
  if (!ts_dtype_is_float(y->dtype)) return TS_OK;
  ts_tensor *ab[2] = {a, b};
  ts_node *n;
  ts_status st = ts_ag_record(name, matmul_backward, 2, ab, y, &n);
  if (st) return st;
  ts_ag_save(n, 0, a);
  ts_ag_save(n, 1, b);
  return TS_OK;
}

/* y = beta * bias + alpha * a @ b; inputs (a, b, bias) */
static ts_status addmm_backward(ts_node *n, ts_tensor *g, ts_tensor **grads) {
  ts_tensor *a = NULL, *b = NULL;
  ts_status st = ts_ag_saved(n, 0, &a);
  if (!st) st = ts_ag_saved(n, 1, &b);
  if (st) return st;
  double beta = n->f[0], alpha = n->f[1];
  ag_scope s = {.st = TS_OK};
  ts_tensor *ga = NULL, *gb = NULL, *gbias = NULL;
  ts_tensor *ga_g = alpha == 1 ? g : AG_MUL(&s, g, ag_num(&s, alpha));
  /* a Linear layer (a bias (N), alpha and beta 1): the bias's gradient, g summed over its
   * rows, is the sum over k of the product that gives b's, and comes from that GEMM (one
   * launch where cuBLASLt sums in its epilogue, not a GEMM and a reduction) */
  const ts_edge *eb = &n->next[2];
  const bool together = alpha == 1 && beta == 1 && ag_wants(n, 1) && ag_wants(n, 2) && eb->ndim == 1 &&
                        g->ndim == 2 && a->ndim == 2 && b->ndim == 2 && eb->sizes[0] == g->sizes[1];
  matmul_grads(&s, n, ga_g, a, b, 0, together ? -1 : 1, &ga, &gb);
  if (together) /* in b's layout, as matmul_grads gives it: (g^T a)^T for a column-major b (w:t()) */
    gb = column_major(b) ? mt(&s, mm_ksum(&s, mt(&s, g), a, 0, &gbias)) : mm_ksum(&s, mt(&s, a), g, 1, &gbias);
  else if (ag_wants(n, 2)) gbias = beta == 1 ? g : AG_MUL(&s, g, ag_num(&s, beta));
  grads[0] = ag_end_keep(&s, ga);
  grads[1] = ag_end_keep(&s, gb);
  grads[2] = ag_end_keep(&s, gbias);
  ag_end(&s, NULL);
  return s.st;
}

ts_status ts_ag_addmm(ts_tensor *bias, ts_tensor *a, ts_tensor *b, double beta, double alpha, ts_tensor *y) {
  if (!ts_dtype_is_float(y->dtype)) return TS_OK;
  ts_tensor *in[3] = {a, b, bias};
  ts_node *n;
  ts_status st = ts_ag_record("AddmmBackward0", addmm_backward, 3, in, y, &n);
  if (st) return st;
  n->f[0] = beta, n->f[1] = alpha;
  ts_ag_save(n, 0, a);
  ts_ag_save(n, 1, b);
  return TS_OK;
}
