/* The CPU kernels of fused attention for one element type, included twice by
 * attention.c with T (float or double), SFX (the name suffix), GEMM (cblas_sgemm
 * or cblas_dgemm) and EXPT (the exponential) defined. See attention.c. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN_(name) CAT(name, SFX)

/* scores (nq, nk) of queries i0.. against keys j0..: mask added, future keys
 * (causal) -inf; row stride ld */
static void FN_(add_mask)(const attn_args *a, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk, T *s,
                          int64_t ld) {
  const T *m = a->mask;
  for (int64_t r = 0; r < nq; r++) {
    T *row = s + r * ld;
    const int64_t i = i0 + r;
    if (m) {
      const T *mr = m + (b / a->H) * a->ms[0] + (b % a->H) * a->ms[1] + i * a->ms[2] + j0 * a->ms[3];
      const int64_t st = a->ms[3];
      for (int64_t c = 0; c < nk; c++) row[c] += mr[c * st];
    }
    if (a->causal)
      for (int64_t c = i - j0 + 1 < 0 ? 0 : i - j0 + 1; c < nk; c++) row[c] = (T)-INFINITY;
  }
}

/* the dropout factors of queries i0.., keys j0.. (j0 % 4 == 0): keep / (1 - p) or 0,
 * into f (nq rows of ld >= nk rounded up to 4). One Philox draw gives four keys;
 * the draws of a row are independent, so the loop vectorises. Drawn BK keys at a
 * time (the backward asks for whole rows of keys). */
static void FN_(drop_factors)(const attn_args *a, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk, T *f,
                              int64_t ld) {
  const T rs = a->p < 1 ? (T)(1 / (1 - a->p)) : 0;
  const float pf = (float)a->p;
  uint32_t u[BK];
  for (int64_t r = 0; r < nq; r++) {
    const uint64_t base = a->offset + (uint64_t)((b * a->L + i0 + r) * ts_sdpa_row_counters(a->S) + j0 / 4);
    for (int64_t c0 = 0; c0 < nk; c0 += BK) {
      const int64_t groups = ((c0 + BK < nk ? BK : nk - c0) + 3) / 4;
      T *row = f + r * ld + c0;
      ts_philox_lanes(a->seed, base + (uint64_t)(c0 / 4), groups, u);
      for (int64_t e = 0; e < 4 * groups; e++) row[e] = ts_uniform_f32(u[e]) >= pf ? rs : 0;
    }
  }
}

/* x (nq, nk) *= f elementwise (both of row stride ld) */
TS_ATTN_VECTOR static void FN_(scale_by)(int64_t nq, int64_t nk, T *x, const T *f, int64_t ld) {
  for (int64_t r = 0; r < nq; r++) {
    T *xr = x + r * ld;
    const T *fr = f + r * ld;
#pragma omp simd
    for (int64_t c = 0; c < nk; c++) xr[c] *= fr[c];
  }
}

/* the online softmax's step for a block of scores s (nq, nk; row stride ld):
 * each row's running max m and sum l take the block in, the row becomes
 * exp(s - max), and the output rows so far (o, Ev wide) are rescaled when the
 * max grew. In eight lanes with FMA where the CPU has them: in the baseline's
 * four it was the forward's largest cost outside the GEMMs. */
TS_ATTN_VECTOR static void FN_(online_softmax)(int64_t nq, int64_t nk, T *s, int64_t ld, T *m, T *l, T *o,
                                               int64_t ldo, int64_t Ev) {
  for (int64_t r = 0; r < nq; r++) {
    T *row = s + r * ld, mx = (T)-INFINITY, sum = 0;
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < nk; c++) mx = row[c] > mx ? row[c] : mx;
    const T mn = mx > m[r] ? mx : m[r], shift = mn == (T)-INFINITY ? 0 : mn;
    const T corr = EXPT(m[r] - shift);
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < nk; c++) {
      T e = EXPT(row[c] - shift);
      row[c] = e;
      sum += e;
    }
    l[r] = l[r] * corr + sum, m[r] = mn;
    if (corr != 1) {
      T *orow = o + r * ldo;
      for (int64_t e = 0; e < Ev; e++) orow[e] *= corr;
    }
  }
}

/* queries [i0, i0 + nq) of batch-and-head b: o and lse. scratch: 2*BQ*BK + 2*BQ */
static void FN_(forward_block)(const attn_args *a, int64_t b, int64_t i0, int64_t nq, T *scratch) {
  const int64_t E = a->E, Ev = a->Ev, S = a->S;
  const int64_t ldq = a->sq.r, ldk = a->sk.r, ldv = a->sv.r, ldo = a->so.r;
  const T *q = (const T *)a->q + at_bh(a, a->sq, b) + i0 * ldq, *k = (const T *)a->k + at_bh(a, a->sk, b);
  const T *v = (const T *)a->v + at_bh(a, a->sv, b);
  T *o = (T *)a->o + at_bh(a, a->so, b) + i0 * ldo, *lse = (T *)a->lse + b * a->L + i0;
  T *s = scratch, *f = s + BQ * BK, *m = f + BQ * BK, *l = m + BQ;
  for (int64_t r = 0; r < nq; r++) {
    m[r] = (T)-INFINITY, l[r] = 0;
    memset(o + r * ldo, 0, sizeof(T) * (size_t)Ev);
  }
  const int64_t jend = a->causal ? (i0 + nq < S ? i0 + nq : S) : S;
  for (int64_t j0 = 0; j0 < jend; j0 += BK) {
    const int64_t nk = j0 + BK < S ? BK : S - j0;
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)E, (T)a->scale, q, (int)ldq, k + j0 * ldk,
         (int)ldk, 0, s, BK);
    FN_(add_mask)(a, b, i0, nq, j0, nk, s, BK);
    FN_(online_softmax)(nq, nk, s, BK, m, l, o, ldo, Ev);
    if (a->p > 0) {
      FN_(drop_factors)(a, b, i0, nq, j0, nk, f, BK);
      FN_(scale_by)(nq, nk, s, f, BK);
    }
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)Ev, (int)nk, 1, s, BK, v + j0 * ldv, (int)ldv, 1, o,
         (int)ldo);
  }
  for (int64_t r = 0; r < nq; r++) {
    const T inv = 1 / l[r]; /* l = 0: every key masked, o = 0 * inf = NaN as the math gives */
    T *orow = o + r * ldo;
    for (int64_t e = 0; e < Ev; e++) orow[e] *= inv;
    lse[r] = m[r] + (T)log(l[r]);
  }
}

/* rows zeroed: n rows of width w, row stride ld */
static void FN_(zero_rows)(T *x, int64_t n, int64_t w, int64_t ld) {
  for (int64_t r = 0; r < n; r++) memset(x + r * ld, 0, sizeof(T) * (size_t)w);
}

/* p (nq, nk) <- exp(p - lse of the row): the block's probabilities (row stride ld) */
TS_ATTN_VECTOR static void FN_(probabilities)(int64_t nq, int64_t nk, T *p, int64_t ld, const T *lse) {
  for (int64_t r = 0; r < nq; r++) {
    T *row = p + r * ld;
    const T sh = lse[r];
#pragma omp simd
    for (int64_t c = 0; c < nk; c++) row[c] = EXPT(row[c] - sh);
  }
}

/* ds = p * (dp - delta), into dp: the softmax's backward (row stride ld) */
TS_ATTN_VECTOR static void FN_(softmax_grad)(int64_t nq, int64_t nk, const T *p, T *dp, int64_t ld, const T *delta) {
  for (int64_t r = 0; r < nq; r++) {
    T *dr = dp + r * ld;
    const T *pr = p + r * ld, de = delta[r];
#pragma omp simd
    for (int64_t c = 0; c < nk; c++) dr[c] = pr[c] * (dr[c] - de);
  }
}

/* batch-and-head b's gradients, its queries in blocks of nqb rows, each against
 * every key it sees at once: the block's probabilities and their gradient (nqb
 * rows of ld values, ld >= S rounded up to 4) stay in cache, and each block is
 * five GEMMs as large as the block allows (scores, dv, the probabilities'
 * gradient, dq, dk) instead of five per pair of small blocks.
 * scratch: 3 * nqb * ld + L */
static void FN_(backward_batch)(const attn_args *a, int64_t b, int64_t nqb, int64_t ld, T *scratch) {
  const int64_t E = a->E, Ev = a->Ev, S = a->S, L = a->L;
  const int64_t ldq = a->sq.r, ldk = a->sk.r, ldv = a->sv.r, ldg = a->sg.r, ldo = a->so.r;
  const int64_t lddq = a->sdq.r, lddk = a->sdk.r, lddv = a->sdv.r;
  const T *q = (const T *)a->q + at_bh(a, a->sq, b), *k = (const T *)a->k + at_bh(a, a->sk, b);
  const T *v = (const T *)a->v + at_bh(a, a->sv, b), *o = (const T *)a->o_in + at_bh(a, a->so, b);
  const T *dO = (const T *)a->dout + at_bh(a, a->sg, b), *lse = (const T *)a->lse + b * L;
  T *dq = (T *)a->dq + at_bh(a, a->sdq, b), *dk = (T *)a->dk + at_bh(a, a->sdk, b);
  T *dv = (T *)a->dv + at_bh(a, a->sdv, b);
  T *p = scratch, *dp = p + nqb * ld, *f = dp + nqb * ld, *delta = f + nqb * ld;
  for (int64_t i = 0; i < L; i++) { /* delta_i = do_i . o_i, the softmax backward's row term (o = dropped p v) */
    T acc = 0;
    for (int64_t e = 0; e < Ev; e++) acc += dO[i * ldg + e] * o[i * ldo + e];
    delta[i] = acc;
  }
  FN_(zero_rows)(dk, S, E, lddk);
  FN_(zero_rows)(dv, S, Ev, lddv);
  for (int64_t i0 = 0; i0 < L; i0 += nqb) {
    const int64_t nq = i0 + nqb < L ? nqb : L - i0;
    /* the keys any query of the block sees: causal, up to its last query */
    const int64_t nk = a->causal && i0 + nq < S ? i0 + nq : S;
    const T *qb = q + i0 * ldq, *dob = dO + i0 * ldg;
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)E, (T)a->scale, qb, (int)ldq, k, (int)ldk, 0,
         p, (int)ld);
    FN_(add_mask)(a, b, i0, nq, 0, nk, p, ld);
    FN_(probabilities)(nq, nk, p, ld, lse + i0);
    const T *pv = p; /* the probabilities that met v: dropped ones where dropout runs */
    if (a->p > 0) { /* the forward's factors, drawn once for pv and dpv */
      FN_(drop_factors)(a, b, i0, nq, 0, nk, f, ld);
      memcpy(dp, p, sizeof(T) * (size_t)(nq * ld));
      FN_(scale_by)(nq, nk, dp, f, ld);
      pv = dp;
    }
    /* dv += pv^T do */
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)Ev, (int)nq, 1, pv, (int)ld, dob, (int)ldg, 1, dv,
         (int)lddv);
    /* dpv = do v^T: the gradient of the dropped probabilities */
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)Ev, 1, dob, (int)ldg, v, (int)ldv, 0, dp,
         (int)ld);
    if (a->p > 0) FN_(scale_by)(nq, nk, dp, f, ld);
    FN_(softmax_grad)(nq, nk, p, dp, ld, delta + i0);
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)E, (int)nk, (T)a->scale, dp, (int)ld, k, (int)ldk, 0,
         dq + i0 * lddq, (int)lddq);
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)E, (int)nq, (T)a->scale, dp, (int)ld, qb, (int)ldq, 1,
         dk, (int)lddk);
  }
}

#undef FN_
#undef CAT
#undef CAT_
