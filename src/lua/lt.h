/* The Lua binding's shared helpers. Only src/lua/ and src/shell/ include lua.h.
 *
 * The pattern every binding follows (STYLE.md, rule 2): read and check the
 * arguments, push the result's userdata slot first (lt_newslot), then call the
 * core with the slot as output. If the core fails the slot stays empty and
 * the error is raised with nothing in C to leak. */
#ifndef TENSH_LT_H
#define TENSH_LT_H

#include <lauxlib.h>
#include <lua.h>

#include "ops/ops.h"

#define LT_TENSOR "tensh.Tensor"
#define LT_SIZE "torch.Size"
#define LT_DEVICE "torch.device"

typedef struct lt_box {
  ts_tensor *t;  /* NULL until the op that fills it succeeds; NULL again after __gc */
  uintptr_t tag; /* what tells a tensor box from other userdata (ltensor.c, test_box) */
} lt_box;

/* luaL_error with C's printf formats (%lld, %g, %zu), which Lua's lacks; the
 * position is the first caller outside lua/tensh/ (the user's line). */
int lt_errorf(lua_State *L, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Raises the core's message as a Lua error at lt_errorf's position (never returns). */
int lt_error(lua_State *L, ts_status st);
#define LT_TRY(L, expr)                  \
  do {                                   \
    ts_status st_ = (expr);              \
    if (st_ != TS_OK) lt_error(L, st_);  \
  } while (0)

/* luaL_argerror / luaL_typeerror, except when the call came from tensh's
 * Lua library: then the message names the function the user called, at the
 * user's line (largs.c). Never return. */
int lt_argerror(lua_State *L, int idx, const char *msg);
int lt_typeerror(lua_State *L, int idx, const char *expected);

/* `bad argument #i to 'fn' (tensor expected, got string)` */
ts_tensor *lt_check(lua_State *L, int idx);
ts_tensor *lt_test(lua_State *L, int idx); /* NULL when not a tensor */
/* An operator metamethod (__add, __lt, ...) called by hand with no tensor
 * operand at 1 or 2 raises "bad argument #1 to '__add' (a tensor expected
 * on one side, got number and number)"; Lua's own calls always have one. */
void lt_check_operator(lua_State *L, const char *mm);
/* A tensor, or a Lua number/boolean lifted into box as a wrapped 0-dim tensor. */
ts_tensor *lt_operand(lua_State *L, int idx, ts_scalar_box *box);
/* The operands at 1 and 2 of an operator metamethod (a + b), each a tensor
 * or a number lifted into box[i]; raises as lt_check_operator when neither is
 * a tensor. */
void lt_operator_operands(lua_State *L, const char *mm, ts_scalar_box box[2], ts_tensor *ops[2]);
/* Pushes an empty tensor userdata and returns its slot for the core to fill. */
ts_tensor **lt_newslot(lua_State *L);
/* The same with the tensor metatable at index mt (an upvalue holding it: a
 * registry lookup less, for the operators' path). */
ts_tensor **lt_newslot_mt(lua_State *L, int mt);
/* Pushes a new Lua reference to t (an existing tensor that stays owned elsewhere too). */
void lt_push_retained(lua_State *L, ts_tensor *t);
/* Steps Lua's collector for the bytes tensors took since the last call. */
void lt_gc_debt(lua_State *L);

/* Sizes from varargs (2, 3), a table ({2, 3}) or a torch.Size, starting at
 * idx and stopping at the first argument that is not an integer. Returns how
 * many stack slots were consumed. */
int lt_sizes(lua_State *L, int idx, int *ndim, int64_t *sizes);
void lt_push_size(lua_State *L, int ndim, const int64_t *sizes);
bool lt_is_a(lua_State *L, int idx, const char *tname); /* the value at idx has metatable tname (LT_SIZE, LT_DEVICE) */
/* A torch.Size at idx is replaced on the stack by its plain list of dims, so
 * code that reads lists raw (lua_rawlen, lua_rawgeti) takes a Size wherever
 * it takes {2, 3}: the Size itself keeps its dims in a field and counts from
 * 0 through __index. Anything else is left as it is. */
void lt_unsize(lua_State *L, int idx);
/* Argument 1 of a method of a C class (a userdata of metatable tname), or
 * the error a '.' for ':' gets: "bad argument #1 to 'synchronize' (what
 * expected, got no value; a method is called with ':', as var:synchronize())" */
void *lt_check_self(lua_State *L, const char *tname, const char *what, const char *var);
const char *lt_checkpath(lua_State *L, int idx, const char *fn); /* a file path: a string without NUL bytes */
int64_t lt_checkint(lua_State *L, int idx);  /* an integer (floats with integral values accepted) */

/* Keyword-option tables: the trailing table argument, if any. */
int lt_opts_index(lua_State *L, int idx);     /* idx if it is a plain table (not a tensor/size), else 0 */
/* Raises "fn: unknown option 'dtyp' (expected one of: device, dtype, ...;
 * did you mean 'dtype'?)" for a key of the table at opts (0: none) that is
 * not in known (NULL-terminated), so that a misspelt keyword is not ignored.
 * Each binding calls it with the keys it reads, before reading them. */
void lt_opts_check(lua_State *L, int opts, const char *fn, const char *const *known);
ts_dtype lt_opt_dtype(lua_State *L, int opts, ts_dtype dflt);
ts_device lt_opt_device(lua_State *L, int opts, ts_device dflt);
bool lt_opt_bool(lua_State *L, int opts, const char *key, bool dflt);
/* a value's name in a message: its metatable's __name (an nn.ReLU is "ReLU",
 * not "table"), else its Lua type; may push one value, for an error to follow */
const char *lt_value_name(lua_State *L, int idx);
/* the running C function's name as its caller called it ("randn"), or NULL */
const char *lt_running_name(lua_State *L);
double lt_opt_number(lua_State *L, int opts, const char *key, double dflt);
int64_t lt_opt_int(lua_State *L, int opts, const char *key, int64_t dflt);
ts_dtype lt_check_dtype(lua_State *L, int idx);  /* "float16", torch.float16 */
ts_device lt_check_device(lua_State *L, int idx); /* "cuda:0", torch.device */
void lt_push_device(lua_State *L, ts_device d);
void lt_push_dtype(lua_State *L, ts_dtype d);
/* t readable by the host: t, or a CPU copy anchored on the stack */
ts_tensor *lt_host_view(lua_State *L, ts_tensor *t);

/* Registration: functions go into `torch`, methods into the tensor metatable's
 * method table; each family file has one lt_open_* that adds its own. The
 * stack holds torch at -2 and the methods table at -1 when it is called. */
void lt_register(lua_State *L, const luaL_Reg *torch_fns, const luaL_Reg *methods);
/* A userdata class: the metatable `name` in the registry, with `meta`'s
 * metamethods (__gc, __tostring, ...) and `methods` as its __index table;
 * either may be NULL. Leaves the stack as it was. */
void lt_new_class(lua_State *L, const char *name, const luaL_Reg *methods, const luaL_Reg *meta);
void lt_open_tensor(lua_State *L);
void lt_open_create(lua_State *L);
void lt_open_elementwise(lua_State *L);
void lt_open_shape(lua_State *L);
void lt_open_reduce(lua_State *L);
void lt_open_linalg(lua_State *L);
void lt_open_index(lua_State *L);
void lt_open_nn_ops(lua_State *L);
void lt_open_nn_functional(lua_State *L); /* lnn_functional.c: torch._nn, called by lt_open_nn_ops */
void lt_open_rnn(lua_State *L);
void lt_open_attention(lua_State *L);
void lt_open_loss(lua_State *L); /* lloss.c: torch._nll_loss */
void lt_cuda_activity_fns(lua_State *L); /* lactivity.c: cuda.launch_count ... */
void lt_cuda_graph_fns(lua_State *L);    /* lcuda_graph.c: cuda.CUDAGraph, cuda.graph ... */
void lt_open_print(lua_State *L);
void lt_open_cuda(lua_State *L);
void lt_open_save(lua_State *L);
void lt_open_autograd(lua_State *L);
void lt_open_optim(lua_State *L); /* loptim.c: torch._adam_step */
/* autograd's tensor fields: t.grad_fn (nil or {name = ...}); t.grad = g and
 * t.requires_grad = b (returns false for any other key) */
void lt_push_grad_fn(lua_State *L, ts_tensor *t);
bool lt_set_autograd_field(lua_State *L, ts_tensor *t, const char *key);
void lt_open_tb(lua_State *L); /* ltb.c: the global tb (SummaryWriter), torch._isatty */
void lt_open_backends(lua_State *L); /* lbackends.c: torch.backends */
void lt_open_ops(lua_State *L); /* lops.c: torch._ops, the op registry's lines */
void lt_open_cpu(lua_State *L); /* lcpu.c: torch.cpu, the CPU allocator's statistics */
void lt_open_data(lua_State *L); /* torch._data, wrapped by lua/tensh/data.lua */
void lt_open_image(lua_State *L); /* limage.c: torch._image (PNG, terminal size) for lua/tensh/image.lua */

int luaopen_tensh(lua_State *L);

#endif
