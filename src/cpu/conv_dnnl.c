/* Convolution on oneDNN, the library PyTorch's own CPU convolution runs on:
 * its JIT kernels work in blocked layouts (nChw16c on AVX-512) and ran conv
 * 32 -> 64 3x3 on 14x14 at 2x the speed of the best im2col + OpenBLAS GEMM
 * (scripts/bench/RESULTS.md). The kernels of the TS_KIND_LIBRARY ops
 * (ops_nn.def): float32 only; anything else is declined and the op layer
 * composes the convolution from im2col and GEMM.
 *
 * Primitives are costly to create (JIT compilation), so each (direction,
 * shapes, parameters, thread count) keeps its primitive and the reorders
 * between tensh's plain NCHW and the layouts the primitive chose in a small
 * cache, reused by every training step. Their buffers (the reordered operands
 * and the primitive's scratchpad) are allocated per call, as PyTorch's are
 * (a cache of 24 shapes must not hold gigabytes of activations), from the
 * CPU caching allocator, which hands the same pages back each step. */
#include <stdlib.h>
#include "cpu.h"

#ifdef TS_HAVE_DNNL
#include <dlfcn.h>
#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "core/cache_alloc.h"

/* ---- libdnnl, opened on first use -----------------------------------------
 * Linked at start, its 36,000 relocations (and libstdc++'s, libOpenCL's) were
 * a third of the shell's start-up; most sessions never convolve. The
 * functions used here are resolved from libdnnl.so.<major> the first time a
 * convolution or torch.backends.mkldnn asks; without the library the kernels
 * decline and the op layer composes convolution from im2col and GEMM. */
#define DNNL_FUNCS(X) \
  X(dnnl_dilated_convolution_backward_data_desc_init) \
  X(dnnl_dilated_convolution_backward_weights_desc_init) \
  X(dnnl_dilated_convolution_forward_desc_init) \
  X(dnnl_engine_create) \
  X(dnnl_engine_destroy) \
  X(dnnl_memory_create) \
  X(dnnl_memory_desc_equal) \
  X(dnnl_memory_desc_get_size) \
  X(dnnl_memory_desc_init_by_tag) \
  X(dnnl_memory_destroy) \
  X(dnnl_memory_set_data_handle) \
  X(dnnl_primitive_attr_create) \
  X(dnnl_primitive_attr_destroy) \
  X(dnnl_primitive_attr_set_scratchpad_mode) \
  X(dnnl_primitive_create) \
  X(dnnl_primitive_desc_create) \
  X(dnnl_primitive_desc_destroy) \
  X(dnnl_primitive_desc_query_md) \
  X(dnnl_primitive_destroy) \
  X(dnnl_primitive_execute) \
  X(dnnl_reorder_primitive_desc_create) \
  X(dnnl_stream_create) \
  X(dnnl_stream_wait) \
  X(dnnl_version)
#define X(f) static __typeof__(f) *lazy_##f;
DNNL_FUNCS(X)
#undef X
#define DNNL_STR2(x) #x
#define DNNL_STR(x) DNNL_STR2(x)
static bool dnnl_present;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;

static void dnnl_open(void) {
  void *h = dlopen("libdnnl.so." DNNL_STR(DNNL_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  bool all = true;
#define X(f) all = all && (*(void **)&lazy_##f = dlsym(h, #f)) != NULL;
  DNNL_FUNCS(X)
#undef X
  dnnl_present = all;
}

static bool dnnl_loaded(void) {
  pthread_once(&dnnl_once, dnnl_open);
  return dnnl_present;
}

#define dnnl_dilated_convolution_backward_data_desc_init (*lazy_dnnl_dilated_convolution_backward_data_desc_init)
#define dnnl_dilated_convolution_backward_weights_desc_init (*lazy_dnnl_dilated_convolution_backward_weights_desc_init)
#define dnnl_dilated_convolution_forward_desc_init (*lazy_dnnl_dilated_convolution_forward_desc_init)
#define dnnl_engine_create (*lazy_dnnl_engine_create)
#define dnnl_engine_destroy (*lazy_dnnl_engine_destroy)
#define dnnl_memory_create (*lazy_dnnl_memory_create)
#define dnnl_memory_desc_equal (*lazy_dnnl_memory_desc_equal)
#define dnnl_memory_desc_get_size (*lazy_dnnl_memory_desc_get_size)
#define dnnl_memory_desc_init_by_tag (*lazy_dnnl_memory_desc_init_by_tag)
#define dnnl_memory_destroy (*lazy_dnnl_memory_destroy)
#define dnnl_memory_set_data_handle (*lazy_dnnl_memory_set_data_handle)
#define dnnl_primitive_attr_create (*lazy_dnnl_primitive_attr_create)
#define dnnl_primitive_attr_destroy (*lazy_dnnl_primitive_attr_destroy)
#define dnnl_primitive_attr_set_scratchpad_mode (*lazy_dnnl_primitive_attr_set_scratchpad_mode)
#define dnnl_primitive_create (*lazy_dnnl_primitive_create)
#define dnnl_primitive_desc_create (*lazy_dnnl_primitive_desc_create)
#define dnnl_primitive_desc_destroy (*lazy_dnnl_primitive_desc_destroy)
#define dnnl_primitive_desc_query_md (*lazy_dnnl_primitive_desc_query_md)
#define dnnl_primitive_destroy (*lazy_dnnl_primitive_destroy)
#define dnnl_primitive_execute (*lazy_dnnl_primitive_execute)
#define dnnl_reorder_primitive_desc_create (*lazy_dnnl_reorder_primitive_desc_create)
#define dnnl_stream_create (*lazy_dnnl_stream_create)
#define dnnl_stream_wait (*lazy_dnnl_stream_wait)
#define dnnl_version (*lazy_dnnl_version)

int ts_cpu_dnnl_version(void) {
  if (!dnnl_loaded()) return 0;
  return (int)(dnnl_version()->major * 10000 + dnnl_version()->minor * 100 + dnnl_version()->patch);
}

enum { FWD, BWD_INPUT, BWD_WEIGHT };

typedef struct conv_key {
  int dir, threads;
  bool bias;
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, G, sh, sw, ph, pw, dh, dw;
} conv_key;

/* One operand of the primitive: tensh's plain layout, the primitive's, and the
 * reorder between them with its buffer when they differ. */
typedef struct conv_arg {
  int arg;     /* DNNL_ARG_... */
  bool output; /* written by the primitive: reordered back after it */
  dnnl_memory_t user, want; /* want: its buffer (want_bytes) is bound per call */
  size_t want_bytes;
  dnnl_primitive_t reorder; /* NULL when the primitive takes the plain layout */
} conv_arg;

typedef struct conv_entry {
  conv_key key;
  bool used;
  uint64_t tick;
  dnnl_primitive_t prim;
  dnnl_memory_t scratch; /* the primitive's scratchpad, bound per call */
  size_t scratch_bytes;
  conv_arg args[4];
  int nargs;
} conv_entry;

#define CACHE_SIZE 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t engine;
static dnnl_stream_t stream;
static conv_entry cache[CACHE_SIZE];
static uint64_t ticks;

static void entry_free(conv_entry *e) {
  for (int i = 0; i < e->nargs; i++) {
    conv_arg *a = &e->args[i];
    if (a->reorder) dnnl_primitive_destroy(a->reorder), dnnl_memory_destroy(a->want);
    dnnl_memory_destroy(a->user);
  }
  if (e->prim) dnnl_primitive_destroy(e->prim);
  if (e->scratch) dnnl_memory_destroy(e->scratch);
  memset(e, 0, sizeof *e);
}

static dnnl_status_t md_plain(dnnl_memory_desc_t *md, int nd, const int64_t *dims, dnnl_format_tag_t tag) {
  dnnl_dims_t d;
  for (int i = 0; i < nd; i++) d[i] = dims[i];
  return dnnl_memory_desc_init_by_tag(md, nd, d, dnnl_f32, tag);
}

/* The operand `which` of pd, bound to tensh's plain layout `plain`, with a reorder
 * (its buffer, want_bytes, bound per call) when the primitive wants another layout. */
static dnnl_status_t add_arg(conv_entry *e, const_dnnl_primitive_desc_t pd, dnnl_query_t which, int index, int arg,
                             bool output, const dnnl_memory_desc_t *plain) {
  conv_arg *a = &e->args[e->nargs++];
  a->arg = arg, a->output = output;
  const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, which, index);
  if (!want) return dnnl_runtime_error;
  dnnl_status_t s = dnnl_memory_create(&a->user, plain, engine, DNNL_MEMORY_NONE);
  if (s != dnnl_success || dnnl_memory_desc_equal(want, plain)) return s;
  if ((s = dnnl_memory_create(&a->want, want, engine, DNNL_MEMORY_NONE)) != dnnl_success) return s;
  a->want_bytes = dnnl_memory_desc_get_size(want);
  dnnl_primitive_desc_t rpd;
  s = output ? dnnl_reorder_primitive_desc_create(&rpd, want, engine, plain, engine, NULL)
             : dnnl_reorder_primitive_desc_create(&rpd, plain, engine, want, engine, NULL);
  if (s != dnnl_success) return dnnl_memory_destroy(a->want), a->want = NULL, s;
  s = dnnl_primitive_create(&a->reorder, rpd);
  dnnl_primitive_desc_destroy(rpd);
  if (s != dnnl_success) dnnl_memory_destroy(a->want), a->want = NULL, a->reorder = NULL;
  return s;
}

/* Builds e's primitive and operands for its key; any failure leaves e unused. */
static dnnl_status_t entry_build(conv_entry *e) {
  const conv_key *k = &e->key;
  int64_t src[4] = {k->N, k->C, k->H, k->W}, dst[4] = {k->N, k->O, k->Ho, k->Wo}, bias[1] = {k->O};
  int64_t wg[5] = {k->G, k->O / k->G, k->C / k->G, k->kh, k->kw};
  const bool grouped = k->G > 1;
  dnnl_memory_desc_t src_p, dst_p, w_p, b_p, src_a, dst_a, w_a, b_a;
  md_plain(&src_p, 4, src, dnnl_nchw), md_plain(&dst_p, 4, dst, dnnl_nchw), md_plain(&b_p, 1, bias, dnnl_x);
  md_plain(&src_a, 4, src, dnnl_format_tag_any), md_plain(&dst_a, 4, dst, dnnl_format_tag_any);
  md_plain(&b_a, 1, bias, dnnl_format_tag_any);
  if (grouped) md_plain(&w_p, 5, wg, dnnl_goihw), md_plain(&w_a, 5, wg, dnnl_format_tag_any);
  else md_plain(&w_p, 4, wg + 1, dnnl_oihw), md_plain(&w_a, 4, wg + 1, dnnl_format_tag_any);
  dnnl_dims_t strides = {k->sh, k->sw}, dil = {k->dh - 1, k->dw - 1}, pad = {k->ph, k->pw};
  /* the forward description: the primitive itself, or the backward's hint */
  dnnl_convolution_desc_t fd, bd;
  dnnl_primitive_desc_t fpd = NULL, pd = NULL;
  dnnl_primitive_attr_t attr = NULL; /* a scratchpad we bind per call, not one the primitive keeps */
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success) s = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
                                                               &src_a, &w_a, k->bias ? &b_a : NULL, &dst_a, strides,
                                                               dil, pad, pad);
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&fpd, &fd, k->dir == FWD ? attr : NULL, engine, NULL);
  if (s == dnnl_success && k->dir == BWD_INPUT) {
    s = dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src_a, &w_a, &dst_a, strides,
                                                         dil, pad, pad);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &bd, attr, engine, fpd);
  } else if (s == dnnl_success && k->dir == BWD_WEIGHT) {
    s = dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &src_a, &w_a,
                                                            k->bias ? &b_a : NULL, &dst_a, strides, dil, pad, pad);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &bd, attr, engine, fpd);
  } else if (s == dnnl_success) {
    pd = fpd, fpd = NULL;
  }
  if (s == dnnl_success) s = dnnl_primitive_create(&e->prim, pd);
  if (s == dnnl_success) {
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (e->scratch_bytes) s = dnnl_memory_create(&e->scratch, sp, engine, DNNL_MEMORY_NONE);
  }
  /* operands in the order the kernels pass tensors: inputs, then outputs */
  if (s == dnnl_success) {
    if (k->dir == FWD) {
      s = add_arg(e, pd, dnnl_query_src_md, 0, DNNL_ARG_SRC, false, &src_p);
      if (!s) s = add_arg(e, pd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, false, &w_p);
      if (!s && k->bias) s = add_arg(e, pd, dnnl_query_weights_md, 1, DNNL_ARG_BIAS, false, &b_p);
      if (!s) s = add_arg(e, pd, dnnl_query_dst_md, 0, DNNL_ARG_DST, true, &dst_p);
    } else if (k->dir == BWD_INPUT) {
      s = add_arg(e, pd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, false, &dst_p);
      if (!s) s = add_arg(e, pd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, false, &w_p);
      if (!s) s = add_arg(e, pd, dnnl_query_diff_src_md, 0, DNNL_ARG_DIFF_SRC, true, &src_p);
    } else {
      s = add_arg(e, pd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, false, &dst_p);
      if (!s) s = add_arg(e, pd, dnnl_query_src_md, 0, DNNL_ARG_SRC, false, &src_p);
      if (!s) s = add_arg(e, pd, dnnl_query_diff_weights_md, 0, DNNL_ARG_DIFF_WEIGHTS, true, &w_p);
      if (!s && k->bias) s = add_arg(e, pd, dnnl_query_diff_weights_md, 1, DNNL_ARG_DIFF_BIAS, true, &b_p);
    }
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) entry_free(e);
  else e->used = true;
  return s;
}

static conv_key key_of(int dir, const ts_call *c) {
  conv_key k;
  memset(&k, 0, sizeof k); /* the key is compared with memcmp: no stray padding */
  /* x (N, C, H, W) and the (N, O, Ho, Wo) side, wherever this direction has them */
  const ts_tensor *x = dir == FWD ? c->in[0] : dir == BWD_INPUT ? c->out[0] : c->in[1];
  const ts_tensor *y = dir == FWD ? c->out[0] : c->in[0];
  const ts_tensor *w = dir == BWD_WEIGHT ? c->out[0] : c->in[1];
  k.dir = dir, k.threads = omp_get_max_threads();
  k.bias = dir == FWD ? c->nin == 3 : dir == BWD_WEIGHT && c->out[1];
  k.N = x->sizes[0], k.C = x->sizes[1], k.H = x->sizes[2], k.W = x->sizes[3];
  k.O = y->sizes[1], k.Ho = y->sizes[2], k.Wo = y->sizes[3], k.kh = w->sizes[2], k.kw = w->sizes[3];
  k.G = c->i[3];
  k.sh = ts_unpack_h(c->i[0]), k.sw = ts_unpack_w(c->i[0]);
  k.ph = ts_unpack_h(c->i[1]), k.pw = ts_unpack_w(c->i[1]);
  k.dh = ts_unpack_h(c->i[2]), k.dw = ts_unpack_w(c->i[2]);
  return k;
}

/* The cached entry for k, built on a miss in the least recently used slot; NULL
 * when oneDNN cannot build it. Called under lock. */
static conv_entry *entry_get(const conv_key *k) {
  conv_entry *victim = &cache[0];
  for (int i = 0; i < CACHE_SIZE; i++) {
    conv_entry *e = &cache[i];
    if (e->used && memcmp(&e->key, k, sizeof *k) == 0) return e->tick = ++ticks, e;
    if (!e->used || (victim->used && e->tick < victim->tick)) victim = e;
  }
  entry_free(victim);
  victim->key = *k;
  if (entry_build(victim) != dnnl_success) return NULL;
  victim->tick = ++ticks;
  return victim;
}

static ts_status run(int dir, const ts_call *c) {
  if (c->in[0]->dtype != TS_FLOAT32)
    return ts_fail(TS_ERR_UNSUPPORTED, "oneDNN convolution: %s is not supported", ts_dtype_name(c->in[0]->dtype));
  /* the tensors in the order entry_build binds them: inputs, then outputs */
  ts_tensor *ts[5];
  int n = 0;
  for (int i = 0; i < c->nin; i++) ts[n++] = c->in[i];
  for (int i = 0; i < 2; i++)
    if (c->out[i]) ts[n++] = c->out[i];
  if (!dnnl_loaded()) return ts_fail(TS_ERR_UNSUPPORTED, "oneDNN convolution: libdnnl could not be loaded");
  conv_key k = key_of(dir, c);
  /* Depthwise on tiny maps (a MobileNet's last stages, 1x1 and 2x2 outputs): oneDNN runs
   * a GEMM per channel there (its backward weights always), 10-40x slower than the
   * direct kernel that loops over channels innermost (src/cpu/nn.c): decline */
  if (k.G > 1 && k.C == k.G && k.Ho * k.Wo <= 4)
    return ts_fail(TS_ERR_UNSUPPORTED, "oneDNN convolution: depthwise on a tiny map is the direct kernel's");
  ts_status st = TS_OK;
  pthread_mutex_lock(&lock);
  if (!engine && (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
                  dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success)) {
    if (engine) dnnl_engine_destroy(engine);
    engine = NULL;
  }
  conv_entry *e = engine ? entry_get(&k) : NULL;
  if (!e || e->nargs != n) {
    pthread_mutex_unlock(&lock);
    return ts_fail(TS_ERR_UNSUPPORTED, "oneDNN convolution: this case is not supported");
  }
  /* one buffer for this call's reordered operands and scratchpad, 64-byte aligned pieces */
  size_t bytes = e->scratch_bytes, at = 0;
  for (int i = 0; i < n; i++) bytes += (e->args[i].want_bytes + 63) & ~(size_t)63;
  bytes = (bytes + 63) & ~(size_t)63;
  char *buf = bytes ? ts_cpu_cache_alloc(bytes) : NULL; /* the CPU cache: the same pages every step */
  if (bytes && !buf) {
    pthread_mutex_unlock(&lock);
    return ts_fail(TS_ERR_OOM, "oneDNN convolution: out of memory for %zu bytes of reordered operands and scratch",
                   bytes);
  }
  dnnl_exec_arg_t args[5];
  dnnl_status_t s = dnnl_success;
  for (int i = 0; i < n && s == dnnl_success; i++) {
    conv_arg *a = &e->args[i];
    args[i].arg = a->arg, args[i].memory = a->reorder ? a->want : a->user;
    s = dnnl_memory_set_data_handle(a->user, ts_data(ts[i]));
    if (s == dnnl_success && a->reorder) {
      s = dnnl_memory_set_data_handle(a->want, buf + at);
      at += (a->want_bytes + 63) & ~(size_t)63;
    }
    if (s == dnnl_success && a->reorder && !a->output)
      s = dnnl_primitive_execute(a->reorder, stream, 2,
                                 (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, a->user}, {DNNL_ARG_TO, a->want}});
  }
  int nargs = n;
  if (s == dnnl_success && e->scratch) {
    s = dnnl_memory_set_data_handle(e->scratch, buf + at);
    args[nargs].arg = DNNL_ARG_SCRATCHPAD, args[nargs++].memory = e->scratch;
  }
  if (s == dnnl_success) s = dnnl_primitive_execute(e->prim, stream, nargs, args);
  for (int i = 0; i < n && s == dnnl_success; i++) {
    conv_arg *a = &e->args[i];
    if (a->reorder && a->output)
      s = dnnl_primitive_execute(a->reorder, stream, 2,
                                 (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, a->want}, {DNNL_ARG_TO, a->user}});
  }
  if (s == dnnl_success) s = dnnl_stream_wait(stream);
  if (s != dnnl_success)
    st = ts_fail(s == dnnl_out_of_memory ? TS_ERR_OOM : TS_ERR_BACKEND, "oneDNN convolution failed (status %d)%s",
                 (int)s, s == dnnl_out_of_memory ? ": out of memory" : "");
  pthread_mutex_unlock(&lock);
  ts_cpu_cache_free(buf);
  return st;
}

static ts_status k_forward(const ts_call *c) { return run(FWD, c); }
static ts_status k_backward_input(const ts_call *c) { return run(BWD_INPUT, c); }
static ts_status k_backward_weight(const ts_call *c) { return run(BWD_WEIGHT, c); }

void ts_cpu_register_dnnl(ts_kernel *k) {
  k[TS_OP_CONV2D_FORWARD] = k_forward;
  k[TS_OP_CONV2D_BACKWARD_INPUT] = k_backward_input;
  k[TS_OP_CONV2D_BACKWARD_WEIGHT] = k_backward_weight;
}

#else /* built without oneDNN: the op layer composes convolution itself */

int ts_cpu_dnnl_version(void) { return 0; }
void ts_cpu_register_dnnl(ts_kernel *k) { (void)k; }

#endif
