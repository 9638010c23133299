/* Tensor sources and batch making: a batch is one gather per field (rows
 * copied by index), field 0 optionally converted from image bytes to float32
 * and put through the transforms (Normalize, RandomCrop, RandomHorizontalFlip)
 * sample by sample in a private scratch buffer. Everything here may run on a
 * worker thread: it reads the source, allocates only the batch's own tensors
 * (never frees a tensor: a worker's free lists die with it) and draws its
 * randomness from Philox keyed by the sample's epoch position. */
#include "data.h"

#include "core/philox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- randomness ------------------------------------------------------------- */

uint64_t ts_data_mix(uint64_t key, uint64_t counter) {
  ts_u32x4 r = ts_philox(key, counter);
  return (uint64_t)r.v[0] << 32 | r.v[1];
}

uint64_t ts_data_global_key(void) {
  uint64_t seed, off;
  ts_rng_reserve(1, &seed, &off);
  return ts_data_mix(seed, off);
}

/* uniform integer in [0, m) from 64 random bits (bias below 2^-32 for m < 2^32) */
static uint64_t below(uint64_t bits, uint64_t m) { return (uint64_t)(((unsigned __int128)bits * m) >> 64); }

ts_status ts_data_randperm(int64_t n, uint64_t key, ts_tensor **out) {
  if (n < 0) return ts_fail(TS_ERR_ARG, "randperm: n must be non-negative, got %lld", (long long)n);
  ts_tensor *t;
  ts_status st = ts_tensor_empty(1, &n, TS_INT64, TS_DEVICE_CPU, &t);
  if (st) return st;
  int64_t *p = ts_data(t);
  for (int64_t i = 0; i < n; i++) p[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)below(ts_data_mix(key, (uint64_t)i), (uint64_t)i + 1);
    int64_t tmp = p[i];
    p[i] = p[j], p[j] = tmp;
  }
  *out = t;
  return TS_OK;
}

/* ---- sources ----------------------------------------------------------------- */

static void free_transforms(int ntf, ts_data_transform *tf) {
  for (int j = 0; j < ntf; j++) {
    free(tf[j].mean), free(tf[j].std);
    tf[j].mean = tf[j].std = NULL;
  }
}

/* Walks the transforms over the sample shape (C, H, W): checks each one and
 * records the output shape and the largest stage for the scratch buffers. */
static ts_status plan_transforms(ts_data_source *s) {
  if (s->ntf == 0) {
    s->out_ndim = s->in_ndim;
    memcpy(s->out_sizes, s->in_sizes, sizeof s->in_sizes);
    return TS_OK;
  }
  char shape[128];
  ts_shape_str(s->in_ndim, s->in_sizes, shape, sizeof shape);
  if (s->in_ndim != 3)
    return ts_fail(TS_ERR_SHAPE, "transform: expected image samples of shape (C, H, W), got %s", shape);
  if (!s->image && s->fields[0]->dtype != TS_FLOAT32)
    return ts_fail(TS_ERR_DTYPE, "transform: expected float32 samples, got %s (convert the tensor with :float())",
                   ts_dtype_name(s->fields[0]->dtype));
  int64_t c = s->in_sizes[0], h = s->in_sizes[1], w = s->in_sizes[2];
  s->scratch = c * h * w;
  for (int j = 0; j < s->ntf; j++) {
    ts_data_transform *t = &s->tf[j];
    switch (t->kind) {
    case TS_TF_NORMALIZE:
      if (t->nch != 1 && t->nch != c)
        return ts_fail(TS_ERR_SHAPE, "Normalize: got %d values of mean and std for images with %lld channels "
                       "(give one per channel, or one for all)", t->nch, (long long)c);
      for (int k = 0; k < t->nch; k++)
        if (t->std[k] == 0)
          return ts_fail(TS_ERR_ARG, "Normalize: std is 0 for channel %d, which divides by zero", k);
      break;
    case TS_TF_CROP:
      if (t->h < 1 || t->w < 1 || t->pad < 0)
        return ts_fail(TS_ERR_ARG, "RandomCrop: size must be positive and padding non-negative, got size (%lld, %lld), "
                       "padding %lld", (long long)t->h, (long long)t->w, (long long)t->pad);
      if (t->h > h + 2 * t->pad || t->w > w + 2 * t->pad)
        return ts_fail(TS_ERR_SHAPE, "RandomCrop: crop size (%lld, %lld) is larger than the padded image (%lld, %lld); "
                       "use a smaller size or more padding", (long long)t->h, (long long)t->w,
                       (long long)(h + 2 * t->pad), (long long)(w + 2 * t->pad));
      h = t->h, w = t->w;
      if (c * h * w > s->scratch) s->scratch = c * h * w;
      break;
    case TS_TF_HFLIP:
      if (!(t->p >= 0 && t->p <= 1))
        return ts_fail(TS_ERR_ARG, "RandomHorizontalFlip: p must be in [0, 1], got %g", t->p);
      break;
    }
  }
  s->out_ndim = 3;
  s->out_sizes[0] = c, s->out_sizes[1] = h, s->out_sizes[2] = w;
  return TS_OK;
}

ts_status ts_data_source_new(int nfields, ts_tensor *const *fields, bool image, int image_ndim,
                             const int64_t *image_sizes, int ntf, ts_data_transform *tf, ts_data_source **out) {
  ts_status st = TS_OK;
  if (nfields < 1 || nfields > TS_DATA_MAX_FIELDS)
    st = ts_fail(TS_ERR_ARG, "dataset: expected 1 to %d tensors, got %d", TS_DATA_MAX_FIELDS, nfields);
  else if (ntf < 0 || ntf > TS_DATA_MAX_TRANSFORMS)
    st = ts_fail(TS_ERR_ARG, "transform: at most %d transforms in a chain, got %d", TS_DATA_MAX_TRANSFORMS, ntf);
  for (int f = 0; f < nfields && !st; f++) {
    ts_tensor *t = fields[f];
    if (t->ndim < 1)
      st = ts_fail(TS_ERR_SHAPE, "dataset: tensor %d is 0-dim; samples are rows along dim 0", f);
    else if (t->device.type != TS_CPU || !ts_is_contiguous(t))
      st = ts_fail(TS_ERR_ARG, "dataset: tensor %d must be a contiguous CPU tensor", f);
    else if (t->sizes[0] != fields[0]->sizes[0])
      st = ts_fail(TS_ERR_SHAPE, "dataset: size mismatch between tensors: tensor %d has %lld rows but tensor 0 has "
                   "%lld", f, (long long)t->sizes[0], (long long)fields[0]->sizes[0]);
  }
  if (st) {
    free_transforms(ntf > 0 && ntf <= TS_DATA_MAX_TRANSFORMS ? ntf : 0, tf);
    return st;
  }
  ts_data_source *s = calloc(1, sizeof *s);
  if (!s) {
    free_transforms(ntf, tf);
    return ts_fail(TS_ERR_OOM, "out of memory allocating a dataset");
  }
  s->refcount = 1;
  s->nfields = nfields;
  s->n = fields[0]->sizes[0];
  for (int f = 0; f < nfields; f++) ts_tensor_retain(s->fields[f] = fields[f]);
  s->ntf = ntf;
  if (ntf) memcpy(s->tf, tf, sizeof *tf * (size_t)ntf);
  s->image = image;
  ts_tensor *x = fields[0];
  if (image) {
    int64_t row = 1, want = 1;
    for (int d = 1; d < x->ndim; d++) row *= x->sizes[d];
    if (image_ndim < 0 || image_ndim > TS_MAX_DIMS - 1 || ts_shape_numel(image_ndim, image_sizes, &want) || want != row) {
      ts_data_source_release(s);
      return ts_fail(TS_ERR_SHAPE, "dataset: image shape does not match the rows of the pixel tensor");
    }
    if (x->dtype != TS_UINT8) {
      ts_data_source_release(s);
      return ts_fail(TS_ERR_DTYPE, "dataset: image pixels must be uint8, got %s", ts_dtype_name(x->dtype));
    }
    s->in_ndim = image_ndim;
    memcpy(s->in_sizes, image_sizes, sizeof(int64_t) * (size_t)image_ndim);
  } else {
    s->in_ndim = x->ndim - 1;
    memcpy(s->in_sizes, x->sizes + 1, sizeof(int64_t) * (size_t)(x->ndim - 1));
  }
  if ((st = plan_transforms(s))) {
    ts_data_source_release(s);
    return st;
  }
  *out = s;
  return TS_OK;
}

void ts_data_source_retain(ts_data_source *s) { s->refcount++; }

void ts_data_source_release(ts_data_source *s) {
  if (!s || --s->refcount > 0) return;
  for (int f = 0; f < s->nfields; f++) ts_tensor_release(s->fields[f]);
  free_transforms(s->ntf, s->tf);
  free(s);
}

/* ---- transforms on one sample (C, H, W) ---------------------------------------- */

static void normalize(const ts_data_transform *t, float *x, int64_t c, int64_t hw) {
  for (int64_t ch = 0; ch < c; ch++) {
    int k = t->nch == 1 ? 0 : (int)ch;
    float m = (float)t->mean[k], sd = (float)t->std[k];
    float *p = x + ch * hw;
    for (int64_t e = 0; e < hw; e++) p[e] = (p[e] - m) / sd;
  }
}

/* The (oh, ow) window at (top, left) of x zero-padded by pad: out (C, oh, ow). */
static void crop(const float *x, int64_t c, int64_t h, int64_t w, int64_t pad, int64_t top, int64_t left, int64_t oh,
                 int64_t ow, float *out) {
  for (int64_t ch = 0; ch < c; ch++)
    for (int64_t y = 0; y < oh; y++) {
      int64_t sy = top + y - pad;
      float *o = out + (ch * oh + y) * ow;
      if (sy < 0 || sy >= h) {
        memset(o, 0, sizeof(float) * (size_t)ow);
        continue;
      }
      const float *row = x + (ch * h + sy) * w;
      for (int64_t xx = 0; xx < ow; xx++) {
        int64_t sx = left + xx - pad;
        o[xx] = sx >= 0 && sx < w ? row[sx] : 0.0f;
      }
    }
}

static void hflip(float *x, int64_t rows, int64_t w) {
  for (int64_t r = 0; r < rows; r++) {
    float *p = x + r * w;
    for (int64_t a = 0, b = w - 1; a < b; a++, b--) {
      float tmp = p[a];
      p[a] = p[b], p[b] = tmp;
    }
  }
}

/* Runs the chain on the sample in *a (shape in_sizes); the result ends in *a
 * (the buffers swap when a transform writes the other one). */
static void run_transforms(const ts_data_source *s, uint64_t key, int64_t pos, float **a, float **b) {
  int64_t c = s->in_sizes[0], h = s->in_sizes[1], w = s->in_sizes[2];
  for (int j = 0; j < s->ntf; j++) {
    const ts_data_transform *t = &s->tf[j];
    ts_u32x4 r = ts_philox(key, (uint64_t)pos * TS_DATA_MAX_TRANSFORMS + (uint64_t)j);
    switch (t->kind) {
    case TS_TF_NORMALIZE: normalize(t, *a, c, h * w); break;
    case TS_TF_CROP: {
      /* as torchvision: pad, then top in [0, H + 2p - h], left in [0, W + 2p - w] */
      uint64_t ny = (uint64_t)(h + 2 * t->pad - t->h + 1), nx = (uint64_t)(w + 2 * t->pad - t->w + 1);
      int64_t top = (int64_t)(((uint64_t)r.v[0] * ny) >> 32), left = (int64_t)(((uint64_t)r.v[1] * nx) >> 32);
      crop(*a, c, h, w, t->pad, top, left, t->h, t->w, *b);
      float *tmp = *a;
      *a = *b, *b = tmp;
      h = t->h, w = t->w;
      break;
    }
    case TS_TF_HFLIP:
      if (ts_uniform_f64(r.v[2], r.v[3]) < t->p) hflip(*a, c * h, w);
      break;
    }
  }
}

/* ---- batches --------------------------------------------------------------------- */

/* pin_memory: batches in page-locked memory when a GPU is there (so that
 * :to(dev, {non_blocking = true}) overlaps), ordinary memory otherwise
 * (is_pinned() tells which). */
static ts_status batch_empty(int ndim, const int64_t *sizes, ts_dtype dt, bool pin, ts_tensor **out) {
  ts_backend *be = pin ? ts_backend_get(TS_CUDA) : NULL;
  if (pin && be && be->host_allocator && be->device_count > 0) return ts_tensor_empty_pinned(ndim, sizes, dt, out);
  return ts_tensor_empty(ndim, sizes, dt, TS_DEVICE_CPU, out);
}

/* Field 0 as float32 (n, out_sizes): pixels / 255 (ToTensor), then the transforms. */
static ts_status make_converted(const ts_data_source *s, const int64_t *idx, int64_t n, uint64_t key, int64_t pos0,
                                ts_tensor *out) {
  const ts_tensor *x = s->fields[0];
  int64_t in_row = 1, out_row = 1;
  for (int d = 0; d < s->in_ndim; d++) in_row *= s->in_sizes[d];
  for (int d = 0; d < s->out_ndim; d++) out_row *= s->out_sizes[d];
  float *dst = ts_data(out);
  if (s->ntf == 0) { /* image bytes without transforms: straight conversion */
    const uint8_t *src = ts_data(x);
    for (int64_t k = 0; k < n; k++) {
      const uint8_t *p = src + idx[k] * in_row;
      float *o = dst + k * out_row;
      for (int64_t e = 0; e < in_row; e++) o[e] = (float)p[e] / 255.0f;
    }
    return TS_OK;
  }
  /* plain malloc, not ts_small_alloc: freed on this thread, whose free lists may die with it */
  float *a = malloc(sizeof(float) * (size_t)s->scratch), *b = malloc(sizeof(float) * (size_t)s->scratch);
  if (!a || !b) {
    free(a), free(b);
    return ts_fail(TS_ERR_OOM, "out of memory for a transform buffer");
  }
  for (int64_t k = 0; k < n; k++) {
    if (s->image) {
      const uint8_t *p = (const uint8_t *)ts_data(x) + idx[k] * in_row;
      for (int64_t e = 0; e < in_row; e++) a[e] = (float)p[e] / 255.0f;
    } else {
      memcpy(a, (const float *)ts_data(x) + idx[k] * in_row, sizeof(float) * (size_t)in_row);
    }
    run_transforms(s, key, pos0 + k, &a, &b);
    memcpy(dst + k * out_row, a, sizeof(float) * (size_t)out_row);
  }
  free(a), free(b);
  return TS_OK;
}

ts_status ts_data_make_batch(const ts_data_source *s, const int64_t *idx, int64_t n, uint64_t key, int64_t pos0,
                             bool pin, ts_tensor **outs) {
  for (int f = 0; f < s->nfields; f++) outs[f] = NULL;
  for (int f = 0; f < s->nfields; f++) {
    const ts_tensor *x = s->fields[f];
    int64_t sizes[TS_MAX_DIMS];
    sizes[0] = n;
    bool converted = f == 0 && (s->image || s->ntf > 0);
    int nd = converted ? s->out_ndim + 1 : x->ndim;
    if (converted) memcpy(sizes + 1, s->out_sizes, sizeof(int64_t) * (size_t)s->out_ndim);
    else memcpy(sizes + 1, x->sizes + 1, sizeof(int64_t) * (size_t)(x->ndim - 1));
    ts_status st = batch_empty(nd, sizes, converted ? TS_FLOAT32 : x->dtype, pin, &outs[f]);
    if (st) return st;
    if (converted) {
      if ((st = make_converted(s, idx, n, key, pos0, outs[f]))) return st;
      continue;
    }
    size_t row = ts_dtype_size(x->dtype);
    for (int d = 1; d < x->ndim; d++) row *= (size_t)x->sizes[d];
    const char *src = ts_data(x);
    char *dst = ts_data(outs[f]);
    for (int64_t k = 0; k < n; k++) memcpy(dst + (size_t)k * row, src + (size_t)idx[k] * row, row);
  }
  return TS_OK;
}
