/* The op registry and the op layer.
 *
 * An op is described once (ops.def): a name, a kind, and one kernel per
 * backend. The op layer (src/op_*.c) does all the checking: shapes,
 * broadcasting, dtypes, devices; it allocates the outputs and fills a
 * ts_call. Kernels trust the call and only compute. */
#ifndef TENSH_OPS_H
#define TENSH_OPS_H

#include "core/backend.h"
#include "core/tensh.h"

typedef enum ts_op_kind {
  TS_KIND_SPECIAL,
  TS_KIND_RANDOM,
  TS_KIND_UNARY,        /* out dtype = in dtype */
  TS_KIND_UNARY_FLOAT,  /* integer and bool inputs become float32 */
  TS_KIND_UNARY_BOOL,   /* out is bool */
  TS_KIND_BINARY,       /* out dtype = promoted dtype */
  TS_KIND_BINARY_FLOAT, /* as BINARY, integers become float32 */
  TS_KIND_COMPARE,      /* out is bool */
  TS_KIND_REDUCE,
  TS_KIND_SCAN,
  /* A kernel a backend has only when its build found a library (oneDNN on the
   * CPU, cuDNN on CUDA). A NULL slot, a kernel returning TS_ERR_UNSUPPORTED, or
   * the library switched off (ts_set_library_kernels) sends the op layer to the
   * op's composed form, so the registry test does not require these. */
  TS_KIND_LIBRARY,
} ts_op_kind;

typedef enum ts_op {
#define X(e, n, k, ...) TS_OP_##e,
#include "ops.def"
#undef X
  TS_OP_COUNT
} ts_op;

/* What an elementwise op's backward reads of its forward (the second
 * argument of a registry line's GRAD column). Unary ops save exactly that:
 * a saved tensor changed in place later makes backward fail, so saving more
 * than the formula reads would refuse valid programs. */
typedef enum ts_op_saves {
  TS_SAVES_NONE,
  TS_SAVES_INPUT,       /* x, in the compute dtype */
  TS_SAVES_OUTPUT,      /* y */
  TS_SAVES_BOTH,
  TS_SAVES_PER_OPERAND, /* binary ops: what the formula of each operand needing a gradient reads (ts_ag_binary) */
} ts_op_saves;

/* torch.autocast's policy for an op on one device type (the registry's
 * AUTOCAST column, src/autograd/autocast.def for op-layer functions):
 *   KEEP    the op runs in its inputs' dtypes
 *   LOWER   floating inputs (not float64) are cast to the region's dtype
 *           (float16 or bfloat16): the ops tensor cores and AMX/AVX512-BF16 speed up
 *   FP32    floating inputs in float16/bfloat16 are cast to float32: ops whose
 *           range or accumulated rounding suffers in 16 bits
 *   PROMOTE inputs of mixed floating dtypes are cast to the widest of them */
typedef enum ts_autocast_policy { TS_AC_KEEP, TS_AC_LOWER, TS_AC_FP32, TS_AC_PROMOTE } ts_autocast_policy;

/* An op's line of the registry (ops.def says what each column means). */
typedef struct ts_op_desc {
  const char *name;
  ts_op_kind kind;
  const char *aten;    /* the ATen op PyTorch's profiler names for it ("aten::relu"), or NULL */
  const char *grad_fn; /* elementwise: its backward node's name, as PyTorch's ("ReluBackward0"); NULL: none */
  ts_op_saves saves;   /* elementwise: what that backward reads */
  uint8_t autocast[TS_DEVICE_TYPE_COUNT]; /* elementwise: a ts_autocast_policy per device type */
} ts_op_desc;

extern const ts_op_desc ts_ops[TS_OP_COUNT];

#define TS_CALL_MAX_OUT 3

/* One kernel invocation. Field meanings per op are documented in ops.def.
 * Elementwise calls: every input already has out[0]'s shape (broadcast views
 * with stride 0) and the compute dtype (comparisons: the inputs' common dtype). */
typedef struct ts_call {
  ts_op op;
  int nin;
  ts_tensor *const *in;            /* nin inputs */
  ts_tensor *out[TS_CALL_MAX_OUT];
  int64_t i[4];                    /* integer parameters */
  double f[4];                     /* real parameters */
} ts_call;

/* kernels and backends: core/backend.h */

/* torch.backends.mkldnn.enabled / torch.backends.cudnn.enabled: whether the
 * TS_KIND_LIBRARY kernels of a device type may run (on by default). */
void ts_set_library_kernels(ts_device_type t, bool enabled);
bool ts_library_kernels_enabled(ts_device_type t);
/* whether a TS_KIND_LIBRARY op may run on device type t: the backend has it, it is enabled */
bool ts_library_available(ts_op op, ts_device_type t);
/* Runs a TS_KIND_LIBRARY call when the backend has it and it is enabled: TS_OK with
 * *ran true, TS_OK with *ran false when declined (the caller composes the op), or
 * the kernel's error. */
ts_status ts_dispatch_library(const ts_call *c, bool *ran);
/* how many TS_KIND_LIBRARY calls ran on a device type: lets tests see the library ran */
int64_t ts_library_kernel_runs(ts_device_type t);
/* Ops that write: the written tensor may not have elements sharing memory
 * (an expanded view), and an input may not overlap it partially (src/ops/overlap.c). */
ts_status ts_check_internal_overlap(const char *fn, const ts_tensor *t);
ts_status ts_check_partial_overlap(const char *fn, const ts_tensor *out, const ts_tensor *in);
/* What watches the dispatch: a bit per observer (counting below, the
 * profiler's in profiler.h); 0, the dispatch tests it once and goes on. */
extern uint8_t ts_dispatch_observed;
#define TS_OBSERVE_COUNT 1
/* Kernel calls per device type and op, counted only while counting is on
 * (torch.backends._dispatch_counts). */
void ts_set_dispatch_counting(bool on);
int64_t ts_dispatch_count(ts_device_type t, ts_op op);
/* oneDNN's version as major*10000 + minor*100 + patch; 0 in a build without it */
int ts_cpu_dnnl_version(void);

/* Runs c on the backend of out[0]'s device (or in[0]'s when there is no out). */
ts_status ts_dispatch(const ts_call *c);
ts_status ts_run(ts_op op, int nin, ts_tensor *const *in, ts_tensor *out0);

/* ---- the op layer ------------------------------------------------------- */

/* The dtype torch.result_type would give for these operands (wrapped numbers
 * and 0-dim tensors count less than dimensioned tensors of the same category). */
ts_dtype ts_result_type(int n, ts_tensor *const *ts);
/* "fn: expected all tensors on the same device, got a and b" (TS_ERR_DEVICE) */
ts_status ts_fail_devices(const char *fn, ts_device a, ts_device b);
/* Checks all tensors share one device; a 0-dim CPU tensor is accepted as a scalar. */
ts_status ts_check_same_device(const char *fn, int n, ts_tensor *const *ts);

/* creation */
ts_status ts_full(int ndim, const int64_t *sizes, double v, ts_dtype dt, ts_device dev, ts_tensor **out);
ts_status ts_fill_(ts_tensor *t, double v);
ts_status ts_zero_(ts_tensor *t);
/* t <- a 0-dim tensor's value (differentiable in it, as torch's fill_.Tensor) */
ts_status ts_fill_tensor_(ts_tensor *t, ts_tensor *value);
/* [start, end) by step, as torch.arange: ceil((end - start) / step) values;
 * the _int form computes in int64 (exact past 2^53) */
ts_status ts_arange(double start, double end, double step, ts_dtype dt, ts_device dev, ts_tensor **out);
ts_status ts_arange_int(int64_t start, int64_t end, int64_t step, ts_dtype dt, ts_device dev, ts_tensor **out);
ts_status ts_linspace(double start, double end, int64_t steps, ts_dtype dt, ts_device dev, ts_tensor **out);
ts_status ts_copy_(ts_tensor *dst, ts_tensor *src);   /* broadcasts src, casts dtype */
ts_status ts_to_dtype(ts_tensor *t, ts_dtype dt, ts_tensor **out); /* retains t if already dt */
ts_status ts_contiguous(ts_tensor *t, ts_tensor **out); /* retains t if already contiguous */
ts_status ts_clone(ts_tensor *t, ts_tensor **out);

/* elementwise: out NULL-initialised pointer gets a new tensor; *_out forms
 * write into an existing tensor (in-place ops pass the first operand). */
ts_status ts_unary(ts_op op, ts_tensor *x, ts_tensor **out);
ts_status ts_unary_out(ts_op op, ts_tensor *x, ts_tensor *out);
ts_status ts_unary_p(ts_op op, ts_tensor *x, const int64_t *ip, const double *fp, ts_tensor **out);
ts_status ts_unary_p_out(ts_op op, ts_tensor *x, const int64_t *ip, const double *fp, ts_tensor *out);
ts_status ts_binary(ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor **out);
ts_status ts_binary_out(ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor *out);
ts_status ts_add_scaled(ts_tensor *a, ts_tensor *b, double alpha, ts_tensor **out); /* a + alpha*b */
ts_status ts_add_scaled_out(ts_tensor *a, ts_tensor *b, double alpha, ts_tensor *out);
ts_status ts_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b, ts_tensor **out);
ts_status ts_lerp(ts_tensor *start, ts_tensor *end, ts_tensor *weight, ts_tensor **out);
/* clamp with tensor (or wrapped-number) bounds, lo or hi NULL when absent;
 * differentiable in x and in both bounds, as PyTorch's clamp.Tensor */
ts_status ts_clamp_tensor(ts_tensor *x, ts_tensor *lo, ts_tensor *hi, ts_tensor **out);
ts_status ts_clamp_tensor_out(ts_tensor *x, ts_tensor *lo, ts_tensor *hi, ts_tensor *out);
/* ReLU's gradient: y > 0 ? g : 0, for g and y of one floating dtype and shape */
ts_status ts_threshold_backward(ts_tensor *g, ts_tensor *y, ts_tensor **out);

/* devices (op_device.c; names in device_name.c) */
/* ts_device_resolve: core/backend.h */
/* t on dev in dtype dt: t itself (retained) when nothing changes. A
 * non_blocking copy from the GPU lands in pinned memory that the host waits
 * for on first touch; to the GPU it overlaps when t is pinned. Recorded for
 * autograd (the gradient moves back). */
ts_status ts_to_device(ts_tensor *t, ts_device dev, ts_dtype dt, bool non_blocking, ts_tensor **out);
/* dst <- src across devices (dst's shape, src broadcast, dtype cast). */
ts_status ts_copy_across(ts_tensor *dst, ts_tensor *src, bool non_blocking);
/* An uninitialised contiguous CPU tensor in page-locked memory (needs CUDA). */
ts_status ts_tensor_empty_pinned(int ndim, const int64_t *sizes, ts_dtype dt, ts_tensor **out);
/* A copy of CPU tensor t in page-locked memory (t itself when pinned). */
ts_status ts_pin_memory(ts_tensor *t, ts_tensor **out);
/* Waits for pending copies into t's storage before the host reads it. */
static inline ts_status ts_host_ready(const ts_tensor *t) { return t->storage->pending ? ts_storage_sync(t->storage) : TS_OK; }

/* views (no copy; errors when the geometry needs one) */
ts_status ts_view(ts_tensor *t, int ndim, const int64_t *sizes, ts_tensor **out); /* one -1 allowed */
ts_status ts_reshape(ts_tensor *t, int ndim, const int64_t *sizes, ts_tensor **out); /* copies if it must */
ts_status ts_transpose(ts_tensor *t, int64_t d0, int64_t d1, ts_tensor **out);
ts_status ts_permute(ts_tensor *t, int ndim, const int64_t *dims, ts_tensor **out);
ts_status ts_squeeze(ts_tensor *t, const int64_t *dim, ts_tensor **out);   /* dim NULL: all size-1 dims */
ts_status ts_unsqueeze(ts_tensor *t, int64_t dim, ts_tensor **out);
ts_status ts_expand(ts_tensor *t, int ndim, const int64_t *sizes, ts_tensor **out); /* -1 keeps a size */
ts_status ts_narrow(ts_tensor *t, int64_t dim, int64_t start, int64_t length, ts_tensor **out);
ts_status ts_select(ts_tensor *t, int64_t dim, int64_t index, ts_tensor **out);
ts_status ts_slice(ts_tensor *t, int64_t dim, int64_t start, int64_t stop, int64_t step, ts_tensor **out);
ts_status ts_flatten(ts_tensor *t, int64_t start, int64_t end, ts_tensor **out);
ts_status ts_unflatten(ts_tensor *t, int64_t dim, int n, const int64_t *sizes, ts_tensor **out);
ts_status ts_broadcast_to(ts_tensor *t, int ndim, const int64_t *sizes, ts_tensor **out);
/* Any geometry over t's storage (offset in elements from the storage's
 * start; NULL: t's own), checked to stay inside the storage. */
ts_status ts_as_strided(ts_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                        const int64_t *offset, ts_tensor **out);

/* random (a counter-based generator: the same seed gives the same values on
 * every backend; see random.c) */
void ts_manual_seed(uint64_t seed);
uint64_t ts_initial_seed(void);
/* Reserves n counter values and returns (seed, offset) for a kernel. */
void ts_rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset);
/* The whole generator state, for checkpoints that resume exactly. */
void ts_rng_get_state(uint64_t *seed, uint64_t *offset);
/* CUDA graph captures underway (+1 at a capture's begin, -1 at its end; src/random.c) */
void ts_rng_graph_capture(int delta);
bool ts_rng_graph_capturing(void);
void ts_rng_set_state(uint64_t seed, uint64_t offset);
/* New tensors of draws: uniform [0, 1) and standard normal (floating dtypes),
 * integers in [low, high), a permutation of [0, n) */
ts_status ts_rand(int nd, const int64_t *sizes, ts_dtype dt, ts_device dev, ts_tensor **out);
ts_status ts_randn(int nd, const int64_t *sizes, ts_dtype dt, ts_device dev, ts_tensor **out);
ts_status ts_randint(int64_t low, int64_t high, int nd, const int64_t *sizes, ts_dtype dt, ts_device dev,
                     ts_tensor **out);
ts_status ts_randperm(int64_t n, ts_dtype dt, ts_device dev, ts_tensor **out);
/* In-place fills of a floating tensor (any strides): uniform [from, to), normal(mean, std) */
ts_status ts_uniform_(ts_tensor *t, double from, double to);
ts_status ts_normal_(ts_tensor *t, double mean, double std);

/* the op families, each in its own header */
#include "op_reduce.h"
#include "op_linalg.h"
#include "op_index.h"
#include "op_optim.h"
#include "op_nn.h"
#include "op_rnn.h"
#include "op_attention.h"

#endif
