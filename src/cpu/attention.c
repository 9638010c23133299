/* CPU kernels of fused scaled dot-product attention (contracts in
 * src/ops/ops_attention.def). Forward: each block of BQ queries meets the keys in
 * blocks of BK: one GEMM for the block's scores, the mask, an online softmax
 * (running max and sum per query; the partial output is rescaled when the max
 * grows), dropout, one GEMM into the output. Only a BQ x BK block of scores
 * exists at a time. Backward (flash attention's): the scores are recomputed
 * and turned into probabilities by the saved log-sum-exp, a block of queries
 * against all its keys at a time (the block sized to stay in cache); five
 * GEMMs per block give the scores, dv, the probabilities' gradient, dq, dk.
 * Threads split the forward by (batch, query block), the backward by batch
 * (a batch's dk and dv gather over all its queries). Operands are (B, H, rows,
 * features) with a unit feature stride and any row stride (the GEMMs' leading
 * dimension), batch-and-head bh = b * H + h. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "philox_simd.h"
#include "vmath.h"

enum { BQ = 64, BK = 128 };

/* an operand's strides in elements over (B, H, rows) */
typedef struct strides3 {
  int64_t b, h, r;
} strides3;

/* the row loops over the score blocks (exp, the softmax's backward, the dropout
 * scaling) in eight or sixteen lanes with fused multiply-adds where the CPU
 * has them (x86-64-v3, -v4): the baseline build's four SSE lanes left them a
 * quarter of the backward */
#define TS_ATTN_VECTOR TS_VECTOR_V4

typedef struct attn_args {
  int64_t B, H, L, S, E, Ev; /* B: batch times heads in the loops below */
  const void *q, *k, *v, *mask, *dout, *lse, *o_in;
  void *o, *dq, *dk, *dv;
  strides3 sq, sk, sv, so, sg, sdq, sdk, sdv;
  int64_t ms[4]; /* the mask's strides */
  bool causal;
  double p, scale;
  uint64_t seed, offset;
} attn_args;

/* the offset of batch-and-head bh's first row in an operand */
static inline int64_t at_bh(const attn_args *a, strides3 s, int64_t bh) { return (bh / a->H) * s.b + (bh % a->H) * s.h; }

#define T float
#define SFX _f32
#define GEMM cblas_sgemm
#define EXPT ts_expf
#include "attention_impl.h"
#undef T
#undef SFX
#undef GEMM
#undef EXPT

#define T double
#define SFX _f64
#define GEMM cblas_dgemm
#define EXPT exp
#include "attention_impl.h"
#undef T
#undef SFX
#undef GEMM
#undef EXPT

static strides3 strides_of(const ts_tensor *t) { return (strides3){t->strides[0], t->strides[1], t->strides[2]}; }

static attn_args args_of(const ts_call *c, int q, int k, int v, int mask) {
  ts_tensor *const *in = c->in;
  attn_args a = {.B = in[q]->sizes[0] * in[q]->sizes[1], .H = in[q]->sizes[1], .L = in[q]->sizes[2],
                 .S = in[k]->sizes[2], .E = in[q]->sizes[3], .Ev = in[v]->sizes[3], .q = ts_data(in[q]),
                 .k = ts_data(in[k]), .v = ts_data(in[v]), .sq = strides_of(in[q]), .sk = strides_of(in[k]),
                 .sv = strides_of(in[v]), .causal = c->i[2] != 0, .p = c->f[0], .scale = c->f[1],
                 .seed = (uint64_t)c->i[0], .offset = (uint64_t)c->i[1]};
  if (c->nin > mask) {
    const ts_tensor *m = in[mask];
    a.mask = ts_data(m);
    for (int d = 0; d < 4; d++) a.ms[d] = m->strides[d];
  }
  return a;
}

static ts_status k_sdpa_forward(const ts_call *c) {
  attn_args a = args_of(c, 0, 1, 2, 3);
  a.o = ts_data(c->out[0]), a.lse = ts_data(c->out[1]), a.so = strides_of(c->out[0]);
  const bool dbl = c->in[0]->dtype == TS_FLOAT64;
  const int64_t nb = (a.L + BQ - 1) / BQ, tasks = a.B * nb;
  const size_t elem = dbl ? sizeof(double) : sizeof(float);
  bool oom = false;
#pragma omp parallel if (tasks > 1 && a.L * a.S * a.E * a.B > TS_PARALLEL_GRAIN) reduction(|| : oom)
  {
    void *scratch = malloc(elem * (2 * BQ * BK + 2 * BQ));
    if (!scratch) oom = true;
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; t++) {
      if (!scratch) continue;
      const int64_t b = t / nb, i0 = (t % nb) * BQ, nq = i0 + BQ < a.L ? BQ : a.L - i0;
      if (dbl) forward_block_f64(&a, b, i0, nq, scratch);
      else forward_block_f32(&a, b, i0, nq, scratch);
    }
    free(scratch);
  }
  return oom ? ts_fail(TS_ERR_OOM, "sdpa_forward: out of memory for the score blocks") : TS_OK;
}

/* The backward's query block: as many queries as keep their probabilities and
 * the probabilities' gradient (2 * rows * ld values) within BACKWARD_CACHE
 * bytes, half a core's L2 here, at least MIN_ROWS (so the GEMMs stay GEMMs
 * when S is long), a multiple of 8, at most L; causal, at most BQ, so that
 * the blocks skip most of the masked keys. */
enum { BACKWARD_CACHE = 512 << 10, MIN_ROWS = 16 };
static int64_t backward_rows(int64_t L, int64_t ld, size_t elem, bool causal) {
  int64_t rows = (int64_t)(BACKWARD_CACHE / (2 * elem * (size_t)ld)) / 8 * 8;
  if (rows < MIN_ROWS) rows = MIN_ROWS;
  if (causal && rows > BQ) rows = BQ; /* smaller blocks skip more of the masked triangle */
  return rows < L ? rows : L;
}

static ts_status k_sdpa_backward(const ts_call *c) {
  attn_args a = args_of(c, 1, 2, 3, 6);
  a.dout = ts_data(c->in[0]), a.o_in = ts_data(c->in[4]), a.lse = ts_data(c->in[5]);
  a.sg = strides_of(c->in[0]), a.so = strides_of(c->in[4]);
  a.dq = ts_data(c->out[0]), a.dk = ts_data(c->out[1]), a.dv = ts_data(c->out[2]);
  a.sdq = strides_of(c->out[0]), a.sdk = strides_of(c->out[1]), a.sdv = strides_of(c->out[2]);
  const bool dbl = c->in[0]->dtype == TS_FLOAT64;
  const size_t elem = dbl ? sizeof(double) : sizeof(float);
  const int64_t ld = (a.S + 3) / 4 * 4, rows = backward_rows(a.L, ld, elem, a.causal);
  bool oom = false;
#pragma omp parallel if (a.B > 1 && a.L * a.S * a.E * a.B > TS_PARALLEL_GRAIN) reduction(|| : oom)
  {
    void *scratch = malloc(elem * (size_t)(3 * rows * ld + a.L));
    if (!scratch) oom = true;
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < a.B; b++) {
      if (!scratch) continue;
      if (dbl) backward_batch_f64(&a, b, rows, ld, scratch);
      else backward_batch_f32(&a, b, rows, ld, scratch);
    }
    free(scratch);
  }
  return oom ? ts_fail(TS_ERR_OOM, "sdpa_backward: out of memory for the probability blocks") : TS_OK;
}

void ts_cpu_register_attention(ts_kernel *k) {
  k[TS_OP_SDPA_FORWARD] = k_sdpa_forward;
  k[TS_OP_SDPA_BACKWARD] = k_sdpa_backward;
}
