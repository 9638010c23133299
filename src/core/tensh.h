/* tensh core: tensors, dtypes, devices, storage, errors and the op layer.
 * Plain C11. Never includes lua.h or CUDA headers (DESIGN.md, rules 1-2).
 * Every function that can fail returns a ts_status and leaves a message
 * readable through ts_last_error(); nothing here longjmps or exits. */
#ifndef TENSH_H
#define TENSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TS_VERSION "0.1.0"
#define TS_MAX_DIMS 8   /* fixed maximum rank keeps a tensor one allocation */

/* ---- status and errors ------------------------------------------------ */

typedef enum ts_status {
  TS_OK = 0,
  TS_ERR_ARG,         /* a bad argument value */
  TS_ERR_TYPE,        /* a bad argument type (used by bindings) */
  TS_ERR_SHAPE,       /* shapes that do not fit */
  TS_ERR_DTYPE,       /* dtypes that cannot be combined */
  TS_ERR_DEVICE,      /* tensors on different or unavailable devices */
  TS_ERR_INDEX,       /* dim or index out of range */
  TS_ERR_OVERFLOW,    /* sizes whose product overflows */
  TS_ERR_OOM,         /* out of memory */
  TS_ERR_INTERRUPTED, /* the user pressed Ctrl-C */
  TS_ERR_IO,          /* file errors, corrupt files */
  TS_ERR_BACKEND,     /* an error reported by a backend (CUDA, BLAS) */
  TS_ERR_UNSUPPORTED, /* an op or dtype not implemented on a backend */
} ts_status;

/* Sets the thread-local message and returns s, so `return ts_fail(...)` reads well. */
ts_status ts_fail(ts_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char *ts_last_error(void);
const char *ts_status_name(ts_status s);

/* Ctrl-C: the shell sets this flag from its signal handler; long kernels poll
 * it between chunks and return TS_ERR_INTERRUPTED. */
extern volatile int ts_interrupt_flag;
ts_status ts_check_interrupt(void);

/* ---- dtypes ------------------------------------------------------------ */

typedef enum ts_dtype {
  TS_FLOAT32 = 0,
  TS_FLOAT64,
  TS_FLOAT16,
  TS_BFLOAT16,
  TS_INT64,
  TS_INT32,
  TS_UINT8,
  TS_BOOL,
  TS_INT8, /* after bool: the older dtypes keep their numbers */
  TS_INT16,
  TS_DTYPE_COUNT
} ts_dtype;

#define TS_DEFAULT_DTYPE TS_FLOAT32

extern const uint8_t ts_dtype_sizes[TS_DTYPE_COUNT];
static inline size_t ts_dtype_size(ts_dtype d) { return ts_dtype_sizes[d]; }
const char *ts_dtype_name(ts_dtype d);            /* "float32" */
ts_status ts_dtype_from_name(const char *name, ts_dtype *out); /* accepts torch aliases: "float", "long", "half"... */
bool ts_dtype_is_float(ts_dtype d);
bool ts_dtype_is_int(ts_dtype d);                  /* integer, not bool */
ts_dtype ts_promote(ts_dtype a, ts_dtype b);       /* torch.promote_types */
/* One element at p, of dtype dt, read or written through double or int64
 * (for code that is not performance critical: scalars, printing, item). */
double ts_load_f64(const void *p, ts_dtype dt);
void ts_store_f64(void *p, ts_dtype dt, double v);
int64_t ts_load_i64(const void *p, ts_dtype dt);
void ts_store_i64(void *p, ts_dtype dt, int64_t v);

/* ---- devices ----------------------------------------------------------- */

typedef enum ts_device_type { TS_CPU = 0, TS_CUDA = 1, TS_DEVICE_TYPE_COUNT } ts_device_type;

typedef struct ts_device {
  int8_t type;  /* ts_device_type */
  int8_t index; /* -1 on the CPU; the CUDA ordinal otherwise */
} ts_device;

#define TS_DEVICE_CPU ((ts_device){TS_CPU, -1})
static inline bool ts_device_eq(ts_device a, ts_device b) { return a.type == b.type && a.index == b.index; }
/* "cpu", "cuda", "cuda:1"; "cuda" resolves to index -1 (the current device, resolved by the backend) */
ts_status ts_device_parse(const char *s, ts_device *out);
void ts_device_str(ts_device d, char *buf, size_t n);

/* ---- small blocks ---------------------------------------------------------- */

/* Allocation for blocks that come and go at op rate (headers, tiny buffers).
 * ts_small_free must get the size given to ts_small_alloc. */
void *ts_small_alloc(size_t n);
void ts_small_free(void *p, size_t n);
/* Blocks returned to malloc from exiting threads' free lists, ever (tests). */
int64_t ts_small_freed_at_exit(void);

/* ---- storage ------------------------------------------------------------ */

typedef struct ts_allocator {
  /* returns NULL on failure; must return aligned memory (64 bytes on the CPU) */
  void *(*alloc)(void *ctx, size_t nbytes, ts_device dev);
  void (*free)(void *ctx, void *ptr, size_t nbytes, ts_device dev);
  void *ctx;
} ts_allocator;

/* One reference-counted buffer. Views share it. */
typedef struct ts_storage {
  void *data;
  size_t nbytes;
  ts_device device;
  const ts_allocator *allocator; /* NULL: memory not owned (wrapped scalars) */
  int refcount;
  bool pinned;     /* page-locked host memory (pin_memory) */
  uint32_t version; /* bumped once per in-place op through any view (the op layer's), as torch's _version:
                      autograd's saved tensors check it */
  uint32_t inplace_version; /* the version the last in-place op autograd recorded left, */
  const char *inplace_fn;   /* and its node's name (for the error when a saved tensor changed) */
  uintptr_t pending; /* a device event a non-blocking copy into this host storage
                        records: the host waits for it before touching the bytes */
  struct ts_backend *pending_on; /* the backend whose event pending is */
} ts_storage;

ts_status ts_storage_new(size_t nbytes, ts_device dev, ts_storage **out);
/* The same from a given allocator (pinned host memory for pin_memory). */
ts_status ts_storage_new_from(size_t nbytes, ts_device dev, const ts_allocator *a, ts_storage **out);
/* Waits for a pending non-blocking copy into s (a no-op when none). */
ts_status ts_storage_sync(ts_storage *s);
/* Called once when an allocation fails, before one retry: the binding runs a
 * full Lua collection there (tensors Lua dropped still hold memory until
 * they are collected). */
void ts_set_oom_hook(void (*hook)(void *ud), void *ud);
void ts_storage_retain(ts_storage *s);
void ts_storage_release(ts_storage *s);

/* Bytes of CPU/device memory handed out since the last call: the binding
 * steps Lua's collector in proportion, since Lua cannot see these bytes. */
size_t ts_take_alloc_debt(void);
size_t ts_cpu_bytes_live(void);
/* Bytes held by live storages of a device type (all its devices), their peak
 * since the last reset (bench.Timer's peak memory per block), and the reset. */
size_t ts_bytes_live(ts_device_type t);
size_t ts_bytes_peak(ts_device_type t);
void ts_reset_bytes_peak(ts_device_type t);

/* ---- tensors ----------------------------------------------------------- */

struct ts_node; /* autograd graph node, defined by the autograd layer */

typedef struct ts_tensor {
  ts_storage *storage;
  int64_t offset;               /* in elements */
  int ndim;
  int64_t sizes[TS_MAX_DIMS];
  int64_t strides[TS_MAX_DIMS]; /* in elements; may be 0 (expanded) */
  ts_dtype dtype;
  ts_device device;
  int refcount;
  bool is_wrapped_number; /* a Lua number lifted to a 0-dim tensor: low priority in promotion */
  /* autograd */
  bool requires_grad;
  struct ts_tensor *grad;
  struct ts_node *grad_fn;
  /* A view made in grad mode keeps the tensor whose storage it views (the
   * first non-view, retained): an in-place op on the view rewrites that
   * base's history (PyTorch's CopySlices). NULL otherwise. */
  struct ts_tensor *base;
  /* The tensor's own address when ts_tensor_* allocated it; a stack copy (a
   * view struct built for one kernel call) differs, so views never retain one. */
  const struct ts_tensor *self;
} ts_tensor;

/* A new tensor with fresh contiguous storage (uninitialised). */
ts_status ts_tensor_empty(int ndim, const int64_t *sizes, ts_dtype dt, ts_device dev, ts_tensor **out);
/* A view of t's storage with the given geometry (no checks beyond rank). */
ts_status ts_tensor_view_of(ts_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                            int64_t offset, ts_tensor **out);
void ts_tensor_retain(ts_tensor *t);
void ts_tensor_release(ts_tensor *t);

/* Builds a 0-dim wrapped-number tensor in caller-owned memory (no allocation).
 * Only valid while `box` lives; ops never keep a reference to it. */
typedef struct ts_scalar_box {
  ts_tensor t;
  ts_storage s;
  union { double f; int64_t i; uint8_t b; } v;
} ts_scalar_box;
ts_tensor *ts_scalar_wrap_double(ts_scalar_box *box, double v);
ts_tensor *ts_scalar_wrap_int(ts_scalar_box *box, int64_t v);
ts_tensor *ts_scalar_wrap_bool(ts_scalar_box *box, bool v);

int64_t ts_numel(const ts_tensor *t);
bool ts_is_contiguous(const ts_tensor *t);
/* Address of the tensor's first element. */
static inline void *ts_data(const ts_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)ts_dtype_size(t->dtype);
}

/* ---- shapes ------------------------------------------------------------- */

ts_status ts_mul_overflow(int64_t a, int64_t b, int64_t *out);
ts_status ts_shape_numel(int ndim, const int64_t *sizes, int64_t *out); /* checked */
/* Wraps a possibly negative dim into [0, ndim); names `fn` in the error. */
ts_status ts_wrap_dim(const char *fn, int64_t dim, int ndim, int *out);
ts_status ts_broadcast_shapes(const char *fn, int na, const int64_t *a, int nb, const int64_t *b,
                              int *nout, int64_t *out);
void ts_shape_str(int ndim, const int64_t *sizes, char *buf, size_t n); /* "(3, 4)" */
void ts_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);

#endif
