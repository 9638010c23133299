/* The op layer for matrix products: matmul, mm, bmm, mv, dot, addmm, outer.
 * Each checks ranks, shapes, dtypes and devices, allocates a contiguous
 * result and hands the one batched kernel (TS_OP_BMM) 3-D stack views of its
 * operands. No operand is copied unless BLAS cannot read its matrix dims (a
 * float32/float64 matrix with no unit stride in its last two dims): transposed
 * operands go to GEMM as they are, and broadcast batch dims become batch
 * stride 0, so (2,1,3,4) @ (5,4,6) runs without materialising either side. */
#include "ops.h"
#include "autograd/autocast.h"
#include "autograd/grad.h"

#include <math.h>
#include <string.h>

/* ---- checks ------------------------------------------------------------- */

static ts_status shape_error(const char *fn, const ts_tensor *a, const ts_tensor *b) {
  char sa[256], sb[256];
  ts_shape_str(a->ndim, a->sizes, sa, sizeof sa);
  ts_shape_str(b->ndim, b->sizes, sb, sizeof sb);
  return ts_fail(TS_ERR_SHAPE, "%s: shapes %s and %s cannot be multiplied", fn, sa, sb);
}

static ts_status check_operands(const char *fn, int n, ts_tensor *const *ts) {
  ts_status st = ts_check_same_device(fn, n, ts);
  if (st) return st;
  for (int i = 1; i < n; i++)
    if (ts[i]->dtype != ts[0]->dtype)
      return ts_fail(TS_ERR_DTYPE,
                     "%s: expected %s operands to have the same dtype, but got: %s != %s "
                     "(convert one first, e.g. b:to(\"%s\"))",
                     fn, n == 2 ? "both" : "all", ts_dtype_name(ts[0]->dtype), ts_dtype_name(ts[i]->dtype), ts_dtype_name(ts[0]->dtype));
  if (ts[0]->dtype == TS_BOOL)
    return ts_fail(TS_ERR_DTYPE, "%s is not implemented for bool tensors; convert first, e.g. t:to(\"int64\")", fn);
  return TS_OK;
}

/* ---- the batched product ------------------------------------------------ */

/* A stack view of r (contiguous) with the given shape: the kernel's view of a
 * result whose 1-D dims were dropped. Only handed to ts_dispatch. */
static ts_tensor shaped(const ts_tensor *r, int nd, const int64_t *sizes) {
  ts_tensor v = *r;
  v.ndim = nd;
  memcpy(v.sizes, sizes, sizeof(int64_t) * (size_t)nd);
  ts_contiguous_strides(nd, sizes, v.strides);
  return v;
}

/* o (batch..., M, N) = beta*o + alpha * a (..., M, K) @ b (..., K, N), where
 * the batch dims of a and b broadcast to o's and o is not read when beta is 0.
 * Batch dims are merged where every operand allows (the common case is one
 * kernel call); the rest are looped over here. */
static ts_status product(ts_tensor *a, ts_tensor *b, const ts_tensor *o, double alpha, double beta) {
  ts_tensor *ab[2] = {a, b}, *made[2] = {NULL, NULL};
  ts_status st = TS_OK;
  if (o->dtype == TS_FLOAT32 || o->dtype == TS_FLOAT64) /* the only dtypes whose layout decides BLAS or not */
    for (int k = 0; k < 2 && !st; k++) {
      ts_tensor *t = ab[k];
      int n = t->ndim, ld;
      bool tr;
      if (!ts_blas_layout(t->sizes[n - 2], t->sizes[n - 1], t->strides[n - 2], t->strides[n - 1], &tr, &ld) &&
          t->sizes[n - 2] <= INT_MAX && t->sizes[n - 1] <= INT_MAX && !(st = ts_contiguous(t, &made[k])))
        ab[k] = made[k];
    }

  /* batch dims of size > 1, with each operand's stride there (0: broadcast) */
  const int nbat = o->ndim - 2;
  int n = 0;
  int64_t sz[TS_MAX_DIMS], bst[3][TS_MAX_DIMS];
  for (int d = 0; d < nbat; d++) {
    if (o->sizes[d] == 1) continue;
    sz[n] = o->sizes[d];
    for (int k = 0; k < 2; k++) {
      const ts_tensor *t = ab[k];
      int td = d - (nbat - (t->ndim - 2));
      bst[k][n] = td < 0 || t->sizes[td] == 1 ? 0 : t->strides[td];
    }
    bst[2][n] = o->strides[d];
    n++;
  }
  /* merge from the innermost batch dim outwards while all three strides agree */
  int64_t B = 1, bs[3] = {0, 0, 0};
  int inner = n;
  if (n > 0) {
    inner = n - 1, B = sz[n - 1];
    for (int k = 0; k < 3; k++) bs[k] = bst[k][n - 1];
    while (inner > 0) {
      int d = inner - 1;
      bool ok = true;
      for (int k = 0; k < 3; k++) ok = ok && bst[k][d] == bs[k] * B;
      if (!ok) break;
      B *= sz[d], inner = d;
    }
  }
  int64_t outer = 1, idx[TS_MAX_DIMS] = {0};
  for (int d = 0; d < inner; d++) outer *= sz[d];

  const ts_tensor *ops[3] = {ab[0], ab[1], o};
  for (int64_t it = 0; it < outer && !st; it++) {
    ts_tensor v[3];
    for (int k = 0; k < 3; k++) {
      const ts_tensor *t = ops[k];
      int nd = t->ndim;
      v[k] = *t;
      v[k].ndim = 3;
      v[k].sizes[0] = B, v[k].sizes[1] = t->sizes[nd - 2], v[k].sizes[2] = t->sizes[nd - 1];
      v[k].strides[0] = bs[k], v[k].strides[1] = t->strides[nd - 2], v[k].strides[2] = t->strides[nd - 1];
      for (int d = 0; d < inner; d++) v[k].offset += idx[d] * bst[k][d];
    }
    ts_tensor *in[2] = {&v[0], &v[1]};
    ts_call c = {.op = TS_OP_BMM, .nin = 2, .in = in, .out = {&v[2]}, .f = {alpha, beta}};
    st = ts_dispatch(&c);
    for (int d = inner - 1; d >= 0; d--) { /* odometer over the unmerged batch dims */
      if (++idx[d] < sz[d]) break;
      idx[d] = 0;
    }
  }
  for (int k = 0; k < 2; k++)
    if (made[k]) ts_tensor_release(made[k]);
  return st;
}

/* Allocates the result (shape rnd/rsizes), runs product into its full-shape
 * view (batch..., M, N) and hands it back. */
static ts_status run(ts_tensor *a, ts_tensor *b, int rnd, const int64_t *rsizes, int ond, const int64_t *osizes,
                     ts_tensor **out) {
  ts_tensor *r;
  ts_status st = ts_tensor_empty(rnd, rsizes, a->dtype, a->device, &r);
  if (st) return st;
  ts_tensor o = shaped(r, ond, osizes);
  if ((st = product(a, b, &o, 1, 0))) {
    ts_tensor_release(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

/* ---- torch's entry points ----------------------------------------------- */

static ts_status mm_impl(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  ts_tensor *ab[2] = {a, b};
  if (a->ndim != 2 || b->ndim != 2)
    return ts_fail(TS_ERR_SHAPE, "mm: expected 2-D matrices, but got %d-D and %d-D (use matmul for other ranks)",
                   a->ndim, b->ndim);
  ts_status st = check_operands("mm", 2, ab);
  if (st) return st;
  if (a->sizes[1] != b->sizes[0]) return shape_error("mm", a, b);
  int64_t s[2] = {a->sizes[0], b->sizes[1]};
  return run(a, b, 2, s, 2, s, out);
}

static ts_status bmm_impl(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  ts_tensor *ab[2] = {a, b};
  if (a->ndim != 3 || b->ndim != 3)
    return ts_fail(TS_ERR_SHAPE, "bmm: expected 3-D tensors, but got %d-D and %d-D (use matmul for other ranks)",
                   a->ndim, b->ndim);
  ts_status st = check_operands("bmm", 2, ab);
  if (st) return st;
  if (a->sizes[0] != b->sizes[0] || a->sizes[2] != b->sizes[1]) return shape_error("bmm", a, b);
  int64_t s[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
  return run(a, b, 3, s, 3, s, out);
}

/* A 1-D operand as a matrix: (1, K) when it is the left operand, (K, 1) when
 * it is the right one. Others are retained as they are. */
static ts_status as_matrix(ts_tensor *t, bool left, ts_tensor **out) {
  if (t->ndim != 1) return ts_tensor_retain(t), *out = t, TS_OK;
  int64_t k = t->sizes[0], s = t->strides[0];
  int64_t sizes[2] = {left ? 1 : k, left ? k : 1}, strides[2] = {left ? k * s : s, left ? s : 1};
  return ts_tensor_view_of(t, 2, sizes, strides, t->offset, out);
}

static ts_status matmul_impl(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  const char *fn = "matmul";
  if (a->ndim == 0 || b->ndim == 0)
    return ts_fail(TS_ERR_SHAPE,
                   "matmul: both arguments need to be at least 1-D, but they are %d-D and %d-D "
                   "(use mul or * to scale by a 0-dim tensor)",
                   a->ndim, b->ndim);
  ts_tensor *ab[2] = {a, b};
  ts_status st = check_operands(fn, 2, ab);
  if (st) return st;
  ts_tensor *a2 = NULL, *b2 = NULL, *fold = NULL;
  if ((st = as_matrix(a, true, &a2)) || (st = as_matrix(b, false, &b2))) goto done;
  const int na = a2->ndim, nb = b2->ndim;
  const int64_t M = a2->sizes[na - 2], K = a2->sizes[na - 1], N = b2->sizes[nb - 1];
  if (b2->sizes[nb - 2] != K) {
    st = shape_error(fn, a, b);
    goto done;
  }
  int nbat;
  int64_t bsz[TS_MAX_DIMS];
  if (ts_broadcast_shapes(fn, na - 2, a2->sizes, nb - 2, b2->sizes, &nbat, bsz)) {
    char sa[256], sb[256];
    ts_shape_str(a->ndim, a->sizes, sa, sizeof sa);
    ts_shape_str(b->ndim, b->sizes, sb, sizeof sb);
    st = ts_fail(TS_ERR_SHAPE, "%s: shapes %s and %s cannot be multiplied (their batch dims do not broadcast)", fn,
                 sa, sb);
    goto done;
  }
  /* result: batch dims, then M and N unless they came from a 1-D operand */
  int rnd = nbat, ond = nbat + 2;
  int64_t rs[TS_MAX_DIMS + 2], os[TS_MAX_DIMS + 2];
  memcpy(rs, bsz, sizeof(int64_t) * (size_t)nbat);
  memcpy(os, bsz, sizeof(int64_t) * (size_t)nbat);
  os[nbat] = M, os[nbat + 1] = N;
  if (a->ndim > 1) rs[rnd++] = M;
  if (b->ndim > 1) rs[rnd++] = N;
  if (ond > TS_MAX_DIMS) {
    st = ts_fail(TS_ERR_ARG, "matmul: tensors have at most %d dims", TS_MAX_DIMS);
    goto done;
  }
  /* (batch..., M, K) @ (K, N): one GEMM of (batch*M, K) @ (K, N), a's leading dims merged,
   * by a copy when they do not merge as a view (torch's fold; the linear-layer case: a
   * batch_first LSTM's output is a transposed view) */
  int64_t rows;
  if (na >= 3 && nb == 2 && !ts_shape_numel(na - 1, a2->sizes, &rows) && K > 0) {
    int64_t fs[2] = {rows, K};
    if (!ts_reshape(a2, 2, fs, &fold)) {
      int64_t fo[2] = {rows, N};
      ts_tensor *r;
      if ((st = ts_tensor_empty(rnd, rs, a->dtype, a->device, &r))) goto done;
      ts_tensor o = shaped(r, 2, fo);
      if ((st = product(fold, b2, &o, 1, 0))) ts_tensor_release(r);
      else *out = r;
      goto done;
    }
  }
  st = run(a2, b2, rnd, rs, ond, os, out);
done:
  if (a2) ts_tensor_release(a2);
  if (b2) ts_tensor_release(b2);
  if (fold) ts_tensor_release(fold);
  return st;
}

static ts_status mv_impl(ts_tensor *a, ts_tensor *v, ts_tensor **out) {
  if (a->ndim != 2 || v->ndim != 1)
    return ts_fail(TS_ERR_SHAPE, "mv: expected a 2-D matrix and a 1-D vector, but got %d-D and %d-D", a->ndim,
                   v->ndim);
  ts_tensor *ab[2] = {a, v};
  ts_status st = check_operands("mv", 2, ab);
  if (st) return st;
  if (a->sizes[1] != v->sizes[0]) return shape_error("mv", a, v);
  ts_tensor *v2;
  if ((st = as_matrix(v, false, &v2))) return st;
  int64_t rs[1] = {a->sizes[0]}, os[2] = {a->sizes[0], 1};
  st = run(a, v2, 1, rs, 2, os, out);
  ts_tensor_release(v2);
  return st;
}

static ts_status dot_impl(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  if (a->ndim != 1 || b->ndim != 1)
    return ts_fail(TS_ERR_SHAPE, "dot: expected 1-D tensors, but got %d-D and %d-D", a->ndim, b->ndim);
  ts_tensor *ab[2] = {a, b};
  ts_status st = check_operands("dot", 2, ab);
  if (st) return st;
  if (a->sizes[0] != b->sizes[0])
    return ts_fail(TS_ERR_SHAPE, "dot: expected both vectors to have the same number of elements, but got %lld and %lld",
                   (long long)a->sizes[0], (long long)b->sizes[0]);
  ts_tensor *a2 = NULL, *b2 = NULL;
  int64_t os[2] = {1, 1}, none[1] = {0};
  if (!(st = as_matrix(a, true, &a2)) && !(st = as_matrix(b, false, &b2))) st = run(a2, b2, 0, none, 2, os, out);
  if (a2) ts_tensor_release(a2);
  if (b2) ts_tensor_release(b2);
  return st;
}

/* ---- cuBLASLt's epilogues ----------------------------------------------- */

/* Whether the backend of t's device has the library kernel op (GEMM_BIAS,
 * GEMM_BGRAD) for t's dtype: cuBLASLt's epilogues, float32 and the half types. */
static bool epilogue_possible(ts_op op, const ts_tensor *t) {
  const ts_backend *be = ts_backends[t->device.type];
  return be && be->kernels[op] && (t->dtype == TS_FLOAT32 || t->dtype == TS_FLOAT16 || t->dtype == TS_BFLOAT16);
}

/* Runs the library call c; *ran false when the kernel declined (nothing ran:
 * the caller composes the op). Not ts_dispatch_library, whose switch is
 * torch.backends.cudnn.enabled: that turns cuDNN off, not cuBLASLt. */
static ts_status epilogue_kernel(const ts_call *c, bool *ran) {
  ts_status st = ts_dispatch(c);
  *ran = st == TS_OK;
  return st == TS_ERR_UNSUPPORTED ? TS_OK : st;
}

ts_status ts_mm_ksum(ts_tensor *a, ts_tensor *b, int which, ts_tensor **out, ts_tensor **sums) {
  ts_tensor *ab[2] = {a, b};
  if (a->ndim != 2 || b->ndim != 2 || (which != 0 && which != 1))
    return ts_fail(TS_ERR_ARG, "mm_ksum: expected 2-D matrices and which 0 or 1, but got %d-D, %d-D and %d", a->ndim,
                   b->ndim, which);
  ts_status st = check_operands("mm", 2, ab);
  if (st) return st;
  if (a->sizes[1] != b->sizes[0]) return shape_error("mm", a, b);
  int64_t s[2] = {a->sizes[0], b->sizes[1]}, len = s[which], dim = 1 - which;
  ts_tensor *r = NULL, *v = NULL;
  bool fused = false;
  if (epilogue_possible(TS_OP_GEMM_BGRAD, a) && !(st = ts_tensor_empty(2, s, a->dtype, a->device, &r)) &&
      !(st = ts_tensor_empty(1, &len, a->dtype, a->device, &v))) {
    ts_call c = {.op = TS_OP_GEMM_BGRAD, .nin = 2, .in = ab, .out = {r, v}, .i = {which}, .f = {1}};
    st = epilogue_kernel(&c, &fused);
  }
  if (!st && !fused) { /* the product, then a sum of its own */
    if (r) ts_tensor_release(r), r = NULL;
    if (v) ts_tensor_release(v), v = NULL;
    if (!(st = run(a, b, 2, s, 2, s, &r))) st = ts_sum(ab[which], 1, &dim, false, &v);
  }
  if (st) {
    if (r) ts_tensor_release(r);
    if (v) ts_tensor_release(v);
    return st;
  }
  *out = r, *sums = v;
  return TS_OK;
}

static ts_status addmm_impl(ts_tensor *bias, ts_tensor *a, ts_tensor *b, double beta, double alpha, ts_tensor **out) {
  if (a->ndim != 2 || b->ndim != 2)
    return ts_fail(TS_ERR_SHAPE, "addmm: expected 2-D matrices, but got %d-D and %d-D", a->ndim, b->ndim);
  ts_tensor *ops[3] = {a, b, bias};
  ts_status st = check_operands("addmm", 3, ops);
  if (st) return st;
  if (a->sizes[1] != b->sizes[0]) return shape_error("addmm", a, b);
  if (ts_dtype_is_int(a->dtype) && (alpha != floor(alpha) || beta != floor(beta)))
    return ts_fail(TS_ERR_DTYPE, "addmm: for integer tensors alpha and beta must be integers, got alpha %g, beta %g",
                   alpha, beta);
  int64_t s[2] = {a->sizes[0], b->sizes[1]}, bs[TS_MAX_DIMS];
  int nd;
  if (ts_broadcast_shapes("addmm", bias->ndim, bias->sizes, 2, s, &nd, bs) || nd != 2 || bs[0] != s[0] ||
      bs[1] != s[1]) {
    char sb[256], sp[256];
    ts_shape_str(bias->ndim, bias->sizes, sb, sizeof sb);
    ts_shape_str(2, s, sp, sizeof sp);
    return ts_fail(TS_ERR_SHAPE, "addmm: bias of shape %s cannot be broadcast to the product's shape %s", sb, sp);
  }
  ts_tensor *r;
  if ((st = ts_tensor_empty(2, s, a->dtype, a->device, &r))) return st;
  /* a Linear layer's bias (N) added by the GEMM's epilogue where the backend has one: one
   * launch, not a copy of the bias into r and a GEMM accumulating onto it (torch's addmm
   * takes cuBLASLt's bias epilogue on CUDA under the same conditions) */
  bool fused = false;
  if (beta == 1 && bias->ndim == 1 && bias->sizes[0] == s[1] && (bias->strides[0] == 1 || s[1] == 1) &&
      epilogue_possible(TS_OP_GEMM_BIAS, r)) {
    ts_tensor *in[3] = {a, b, bias};
    ts_call c = {.op = TS_OP_GEMM_BIAS, .nin = 3, .in = in, .out = {r}, .f = {alpha}};
    st = epilogue_kernel(&c, &fused);
  }
  if (!st && !fused && beta != 0) st = ts_copy_(r, bias); /* beta 0: torch ignores bias, NaN and inf included */
  if (!st && !fused) st = product(a, b, r, alpha, beta);
  if (st) {
    ts_tensor_release(r);
    return st;
  }
  r->storage->version = 0; /* a new tensor: the bias copied in is no in-place change */
  *out = r;
  return TS_OK;
}

/* outer is a broadcast multiply (as torch's): any dtypes, promoted, bool included. */
ts_status ts_outer(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  if (a->ndim != 1 || b->ndim != 1)
    return ts_fail(TS_ERR_SHAPE, "outer: expected 1-D tensors, but got %d-D and %d-D", a->ndim, b->ndim);
  ts_tensor *col = NULL, *row = NULL;
  ts_status st;
  if (!(st = ts_unsqueeze(a, 1, &col)) && !(st = ts_unsqueeze(b, 0, &row))) st = ts_binary(TS_OP_MUL, col, row, out);
  if (col) ts_tensor_release(col);
  if (row) ts_tensor_release(row);
  return st;
}

ts_status ts_mm(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_MM, .t = {a, b}, .out = {out});
  TS_AG_OFF(prev);
  ts_status st = mm_impl(a, b, out);
  TS_AG_RESTORE(prev);
  if (!st && (a->requires_grad || b->requires_grad) && prev) st = ts_ag_matmul("MmBackward0", a, b, *out);
  return st;
}

ts_status ts_bmm(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_BMM, .t = {a, b}, .out = {out});
  TS_AG_OFF(prev);
  ts_status st = bmm_impl(a, b, out);
  TS_AG_RESTORE(prev);
  if (!st && (a->requires_grad || b->requires_grad) && prev) st = ts_ag_matmul("BmmBackward0", a, b, *out);
  return st;
}

ts_status ts_matmul(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_MATMUL, .t = {a, b}, .out = {out});
  TS_AG_OFF(prev);
  ts_status st = matmul_impl(a, b, out);
  TS_AG_RESTORE(prev);
  if (!st && (a->requires_grad || b->requires_grad) && prev) st = ts_ag_matmul("MatmulBackward0", a, b, *out);
  return st;
}

ts_status ts_mv(ts_tensor *a, ts_tensor *v, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_MV, .t = {a, v}, .out = {out});
  TS_AG_OFF(prev);
  ts_status st = mv_impl(a, v, out);
  TS_AG_RESTORE(prev);
  if (!st && (a->requires_grad || v->requires_grad) && prev) st = ts_ag_matmul("MvBackward0", a, v, *out);
  return st;
}

ts_status ts_dot(ts_tensor *a, ts_tensor *b, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_DOT, .t = {a, b}, .out = {out});
  TS_AG_OFF(prev);
  ts_status st = dot_impl(a, b, out);
  TS_AG_RESTORE(prev);
  if (!st && (a->requires_grad || b->requires_grad) && prev) st = ts_ag_matmul("DotBackward0", a, b, *out);
  return st;
}

ts_status ts_addmm(ts_tensor *bias, ts_tensor *a, ts_tensor *b, double beta, double alpha, ts_tensor **out) {
  TS_AUTOCAST(TS_AC_ADDMM, .t = {bias, a, b}, .f = {beta, alpha}, .out = {out});
  TS_AG_OFF(prev);
  ts_status st = addmm_impl(bias, a, b, beta, alpha, out);
  TS_AG_RESTORE(prev);
  ts_tensor *in[3] = {bias, a, b};
  if (!st && prev && ts_ag_needed(3, in)) st = ts_ag_addmm(bias, a, b, beta, alpha, *out);
  return st;
}

static ts_matmul_precision matmul_precision = TS_MATMUL_HIGHEST;
void ts_set_float32_matmul_precision(ts_matmul_precision p) { matmul_precision = p; }
ts_matmul_precision ts_get_float32_matmul_precision(void) { return matmul_precision; }
