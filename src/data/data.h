/* The data pipeline's core (torch.utils.data's C side): readers for the IDX
 * (MNIST) and CIFAR-10 binary formats, tensor "sources" (datasets whose
 * samples are rows of tensors), batch making (one gather per field, then the
 * transforms, all in C on whole batches) and the worker pool that makes the
 * upcoming batches of an epoch on background threads.
 *
 * Threads: the core's refcounts are plain ints, so a tensor is only ever
 * touched by one thread at a time. A source's tensors are retained and
 * released on the main thread only; workers read their geometry and bytes
 * and never write them. A batch tensor is created by a worker, handed to the
 * main thread through a mutex-protected slot, and never touched by the
 * worker again. No Lua here (DESIGN.md, rule 1). */
#ifndef TENSH_DATA_H
#define TENSH_DATA_H

#include "ops/ops.h"

#define TS_DATA_MAX_FIELDS 8
#define TS_DATA_MAX_TRANSFORMS 16 /* random draws are keyed by (position * 16 + transform) */

/* ---- readers -------------------------------------------------------------- */

/* An IDX file of unsigned bytes (magic 0x00000803 for ndim 3) with exactly
 * ndim dims, plain or gzip (zlib reads both). The error names the file and
 * what is wrong: missing, wrong magic, truncated, trailing bytes. */
ts_status ts_data_read_idx(const char *path, int ndim, ts_tensor **out); /* uint8 (d0, .., d{ndim-1}) */
/* CIFAR-10 binary batches: records of 1 label byte + 3072 CHW pixel bytes. */
ts_status ts_data_read_cifar(int nfiles, const char *const *paths,
                             ts_tensor **images,  /* uint8 (N, 3, 32, 32) */
                             ts_tensor **labels); /* int64 (N,) */
/* Writes n bytes gzip-compressed (for tests and for caching downloads). */
ts_status ts_data_gzip_write(const char *path, const void *data, size_t n);

/* ---- transforms ------------------------------------------------------------ */

typedef enum ts_data_tf_kind {
  TS_TF_NORMALIZE, /* (x - mean[c]) / std[c] */
  TS_TF_CROP,      /* zero-pad by pad on every side, then a random (h, w) window */
  TS_TF_HFLIP,     /* mirror along W with probability p */
} ts_data_tf_kind;

typedef struct ts_data_transform {
  ts_data_tf_kind kind;
  int64_t h, w, pad; /* crop */
  double p;          /* flip */
  int nch;           /* normalize: nch values in mean and std; 1 applies to every channel */
  double *mean, *std; /* owned by the source once given to it */
} ts_data_transform;

/* ---- sources ---------------------------------------------------------------- */

/* A dataset made of tensors: sample i is row i of every field. Field 0 may be
 * image bytes (uint8, converted to float32 / 255 in image_sizes, as ToTensor)
 * and may carry transforms (which need float32 samples (C, H, W)). */
typedef struct ts_data_source {
  int refcount; /* main thread only */
  int nfields;
  int64_t n;                                /* samples */
  ts_tensor *fields[TS_DATA_MAX_FIELDS];    /* (n, ...) contiguous CPU tensors, retained, read-only */
  bool image;                               /* field 0 is uint8 pixels */
  int in_ndim;                              /* field 0's sample shape before transforms */
  int64_t in_sizes[TS_MAX_DIMS];
  int out_ndim;                             /* ... and after them */
  int64_t out_sizes[TS_MAX_DIMS];
  int ntf;
  ts_data_transform tf[TS_DATA_MAX_TRANSFORMS];
  int64_t scratch;                          /* floats per sample buffer the transforms need */
} ts_data_source;

/* Retains the fields (each must be a contiguous CPU tensor with n rows) and
 * takes ownership of the transforms' mean/std arrays, also on failure.
 * image_sizes gives field 0's per-sample shape when image is set (its numel
 * must match a row). Checks the transforms against the sample shape. */
ts_status ts_data_source_new(int nfields, ts_tensor *const *fields, bool image, int image_ndim,
                             const int64_t *image_sizes, int ntf, ts_data_transform *tf, ts_data_source **out);
void ts_data_source_retain(ts_data_source *s);
void ts_data_source_release(ts_data_source *s);

/* The batch of samples idx[0..n) (each already checked to be in [0, s->n)):
 * one new tensor per field in outs, (n, sample shape...). Random transforms
 * of the sample at epoch position pos0 + k draw from Philox keyed by key, so
 * a batch is the same whichever thread makes it. With pin the buffers should
 * be page-locked (a hook: ordinary memory until the CUDA allocator has a
 * pinned pool). Safe to call from a worker thread. On failure, the tensors
 * already made are left in outs (the rest NULL) for the caller to release. */
ts_status ts_data_make_batch(const ts_data_source *s, const int64_t *idx, int64_t n, uint64_t key, int64_t pos0,
                             bool pin, ts_tensor **outs);

/* ---- randomness ------------------------------------------------------------- */

/* 64 bits of Philox(key, counter): derives independent keys from a seed. */
uint64_t ts_data_mix(uint64_t key, uint64_t counter);
/* A key drawn from the global generator (one counter of it, as PyTorch draws
 * one int64 per sampler epoch). */
uint64_t ts_data_global_key(void);
/* A uniform random permutation of 0..n-1 (Fisher-Yates on Philox(key, .)). */
ts_status ts_data_randperm(int64_t n, uint64_t key, ts_tensor **out); /* int64 (n,) */

/* ---- epochs: the batches of one pass, made ahead by worker threads --------- */

typedef struct ts_data_epoch ts_data_epoch;

/* Batch b holds the samples idx[offsets[b] .. offsets[b+1]) of s (nbatches + 1
 * offsets; both arrays are copied). Indices are checked here. With nworkers
 * > 0, that many threads make up to nworkers * prefetch batches ahead of the
 * consumer; with 0, ts_data_epoch_next makes each batch when asked. */
ts_status ts_data_epoch_new(ts_data_source *s, const int64_t *idx, int64_t nbatches, const int64_t *offsets,
                            uint64_t key, int nworkers, int prefetch, bool pin, ts_data_epoch **out);
/* The next batch's tensors in outs[0..s->nfields), owned by the caller; *done
 * when the epoch is over. Waits for the worker making it; Ctrl-C interrupts. */
ts_status ts_data_epoch_next(ts_data_epoch *e, ts_tensor **outs, bool *done);
/* Stops and joins the workers and frees the batches they made ahead. */
void ts_data_epoch_free(ts_data_epoch *e);
int ts_data_epoch_workers(const ts_data_epoch *e); /* threads actually running (0 once freed) */

#endif
