/* torch._ops(): the op registry's lines (src/ops/ops.def) as Lua sees them,
 * for the library (the profiler's ATen names) and the tests (their lists of
 * every unary op come from here, so a new op is tested without editing them):
 *   {name = {kind = "unary_float", aten = "aten::exp", grad_fn = "ExpBackward0",
 *            saves = "output", autocast = {cuda = "fp32", cpu = "keep"}}, ...}
 * aten, grad_fn and saves are absent where the line has no such column, and
 * autocast where it keeps every dtype on both device types. A fresh table per
 * call: nothing is built at start-up. */
#include "lt.h"

static const char *const kind_names[] = {
    [TS_KIND_SPECIAL] = "special", [TS_KIND_RANDOM] = "random", [TS_KIND_UNARY] = "unary",
    [TS_KIND_UNARY_FLOAT] = "unary_float", [TS_KIND_UNARY_BOOL] = "unary_bool", [TS_KIND_BINARY] = "binary",
    [TS_KIND_BINARY_FLOAT] = "binary_float", [TS_KIND_COMPARE] = "compare", [TS_KIND_REDUCE] = "reduce",
    [TS_KIND_SCAN] = "scan", [TS_KIND_LIBRARY] = "library"};
static const char *const saves_names[] = {[TS_SAVES_NONE] = "none", [TS_SAVES_INPUT] = "input",
                                          [TS_SAVES_OUTPUT] = "output", [TS_SAVES_BOTH] = "both",
                                          [TS_SAVES_PER_OPERAND] = "per_operand"};
static const char *const policy_names[] = {[TS_AC_KEEP] = "keep", [TS_AC_LOWER] = "lower", [TS_AC_FP32] = "fp32",
                                           [TS_AC_PROMOTE] = "promote"};

static void set_string(lua_State *L, const char *key, const char *value) {
  if (!value) return;
  lua_pushstring(L, value);
  lua_setfield(L, -2, key);
}

static int l_ops(lua_State *L) {
  lua_createtable(L, 0, TS_OP_COUNT);
  for (int op = 0; op < TS_OP_COUNT; op++) {
    const ts_op_desc *d = &ts_ops[op];
    lua_createtable(L, 0, 5);
    set_string(L, "kind", kind_names[d->kind]);
    set_string(L, "aten", d->aten);
    set_string(L, "grad_fn", d->grad_fn);
    if (d->grad_fn) set_string(L, "saves", saves_names[d->saves]);
    if (d->autocast[TS_CPU] != TS_AC_KEEP || d->autocast[TS_CUDA] != TS_AC_KEEP) {
      lua_createtable(L, 0, 2);
      set_string(L, "cpu", policy_names[d->autocast[TS_CPU]]);
      set_string(L, "cuda", policy_names[d->autocast[TS_CUDA]]);
      lua_setfield(L, -2, "autocast");
    }
    lua_setfield(L, -2, d->name);
  }
  return 1;
}

void lt_open_ops(lua_State *L) {
  static const luaL_Reg fns[] = {{"_ops", l_ops}, {NULL, NULL}};
  lt_register(L, fns, NULL);
}
