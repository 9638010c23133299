/* Elementwise bindings, driven by the op table: every unary and binary op
 * becomes a method, a torch function and (where torch has one) an in-place
 * `name_` method; the arithmetic metamethods map onto the same ops. */
#include "lt.h"

#include <math.h>
#include <string.h>

static const char *const no_options[] = {NULL};

/* upvalue 1: the op. An options table is refused ("exp takes no options"),
 * as PyTorch refuses an unexpected keyword, instead of being ignored. */
static int l_unary(lua_State *L) {
  ts_op op = (ts_op)lua_tointeger(L, lua_upvalueindex(1));
  ts_tensor *x = lt_check(L, 1);
  lt_opts_check(L, lt_opts_index(L, 2), ts_ops[op].name, no_options);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_unary(op, x, slot));
  lt_gc_debt(L);
  return 1;
}

static int l_unary_(lua_State *L) {
  ts_op op = (ts_op)lua_tointeger(L, lua_upvalueindex(1));
  ts_tensor *x = lt_check(L, 1);
  char fn[64];
  snprintf(fn, sizeof fn, "%s_", ts_ops[op].name);
  lt_opts_check(L, lt_opts_index(L, 2), fn, no_options);
  LT_TRY(L, ts_unary_out(op, x, x));
  lua_settop(L, 1);
  return 1;
}

/* round(x, {decimals = n}): PyTorch's keyword-only decimals, negative too */
static void round_args(lua_State *L, const char *fn, int64_t *ip, double *fp) {
  static const char *const known[] = {"decimals", NULL};
  int opts = lt_opts_index(L, 2);
  lt_opts_check(L, opts, fn, known);
  int64_t d = lt_opt_int(L, opts, "decimals", 0);
  ip[0] = d;
  /* as torch: 10^|d| in double, cast to the dtype by the kernel (inf past
   * its range, and the result NaN, as PyTorch's) */
  fp[0] = pow(10, fabs((double)d));
}

static int round_call(lua_State *L, bool inplace) {
  ts_tensor *x = lt_check(L, 1);
  int64_t ip[4] = {0};
  double fp[4] = {0};
  round_args(L, inplace ? "round_" : "round", ip, fp);
  if (inplace) {
    LT_TRY(L, ts_unary_p_out(TS_OP_ROUND, x, ip, fp, x));
    lua_settop(L, 1);
    return 1;
  }
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_unary_p(TS_OP_ROUND, x, ip, fp, slot));
  lt_gc_debt(L);
  return 1;
}
static int l_round(lua_State *L) { return round_call(L, false); }
static int l_round_(lua_State *L) { return round_call(L, true); }

/* div's rounding_mode: nil (true division), "floor" or "trunc", as PyTorch */
static ts_op div_rounding(lua_State *L, int opts, const char *fn) {
  int t = lua_getfield(L, opts, "rounding_mode");
  const char *m = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  ts_op op = t == LUA_TNIL                 ? TS_OP_DIV
             : m && !strcmp(m, "floor") ? TS_OP_FLOOR_DIVIDE
             : m && !strcmp(m, "trunc") ? TS_OP_DIV_TRUNC
                                        : TS_OP_COUNT;
  if (op == TS_OP_COUNT)
    lt_errorf(L, "%s: rounding_mode must be nil, 'trunc' or 'floor', got %s", fn,
              m ? lua_pushfstring(L, "'%s'", m) : luaL_typename(L, -1));
  lua_pop(L, 1);
  return op;
}

/* binary: a op b, either side a tensor or a number; an options table may
 * give add's and sub's alpha and div's rounding_mode, and no other op takes
 * one. `name`, when given, is the function called (true_divide: op DIV
 * without rounding_mode). */
static int binary_opts(lua_State *L, ts_op op, int ia, int ib, bool inplace, const char *name) {
  static const char *const alpha_only[] = {"alpha", NULL}, *const rounding[] = {"rounding_mode", NULL};
  ts_scalar_box ba, bb;
  ts_tensor *a = inplace ? lt_check(L, ia) : lt_operand(L, ia, &ba);
  ts_tensor *b = lt_operand(L, ib, &bb);
  double alpha = 1;
  bool add_sub = op == TS_OP_ADD || op == TS_OP_SUB, div = op == TS_OP_DIV && !name;
  if (lt_opts_index(L, 3)) {
    char fn[64];
    snprintf(fn, sizeof fn, "%s%s", name ? name : ts_ops[op].name, inplace ? "_" : "");
    lt_opts_check(L, 3, fn, add_sub ? alpha_only : div ? rounding : no_options);
    if (div) op = div_rounding(L, 3, fn);
  }
  if (add_sub && lua_type(L, 3) == LUA_TTABLE) alpha = lt_opt_number(L, 3, "alpha", 1);
  if (inplace) {
    if (alpha == 1) LT_TRY(L, ts_binary_out(op, a, b, a));
    else LT_TRY(L, ts_add_scaled_out(a, b, op == TS_OP_SUB ? -alpha : alpha, a));
    lua_pushvalue(L, ia);
    return 1;
  }
  ts_tensor **slot = lt_newslot(L);
  if (alpha != 1) LT_TRY(L, ts_add_scaled(a, b, op == TS_OP_SUB ? -alpha : alpha, slot));
  else LT_TRY(L, ts_binary(op, a, b, slot));
  lt_gc_debt(L);
  return 1;
}

static int binary(lua_State *L, ts_op op, int ia, int ib, bool inplace) {
  return binary_opts(L, op, ia, ib, inplace, NULL);
}
static int l_binary(lua_State *L) { return binary(L, (ts_op)lua_tointeger(L, lua_upvalueindex(1)), 1, 2, false); }
static int l_binary_(lua_State *L) { return binary(L, (ts_op)lua_tointeger(L, lua_upvalueindex(1)), 1, 2, true); }
static int l_true_divide(lua_State *L) { return binary_opts(L, TS_OP_DIV, 1, 2, false, "true_divide"); }
static int l_true_divide_(lua_State *L) { return binary_opts(L, TS_OP_DIV, 1, 2, true, "true_divide"); }

/* metamethods: Lua calls them with the operands in source order, one of
 * them a tensor; called by hand (getmetatable(t).__add(1, 2)) with none,
 * they raise as PyTorch's Tensor.__add__(1, 2) does instead of adding numbers */
static int mm_binary(lua_State *L, ts_op op, const char *mm) {
  if (lua_gettop(L) != 2) { /* by hand, with an options table too: as t:add(b, {alpha = 2}) */
    lt_check_operator(L, mm);
    return binary(L, op, 1, 2, false);
  }
  /* a op b as Lua calls it: two operands and no options to look for */
  ts_scalar_box boxes[2];
  ts_tensor *ops[2];
  lt_operator_operands(L, mm, boxes, ops);
  ts_tensor **slot = lt_newslot_mt(L, lua_upvalueindex(1));
  LT_TRY(L, ts_binary(op, ops[0], ops[1], slot));
  lt_gc_debt(L);
  return 1;
}
static int mm_add(lua_State *L) { return mm_binary(L, TS_OP_ADD, "__add"); }
static int mm_sub(lua_State *L) { return mm_binary(L, TS_OP_SUB, "__sub"); }
static int mm_mul(lua_State *L) { return mm_binary(L, TS_OP_MUL, "__mul"); }
static int mm_div(lua_State *L) { return mm_binary(L, TS_OP_DIV, "__div"); }
static int mm_mod(lua_State *L) { return mm_binary(L, TS_OP_REMAINDER, "__mod"); }
static int mm_pow(lua_State *L) { return mm_binary(L, TS_OP_POW, "__pow"); }
static int mm_idiv(lua_State *L) { return mm_binary(L, TS_OP_FLOOR_DIVIDE, "__idiv"); }
/* Lua 5.4's bitwise operators: a & b, a | b, a ~ b (exclusive or), ~a */
static int mm_band(lua_State *L) { return mm_binary(L, TS_OP_BITWISE_AND, "__band"); }
static int mm_bor(lua_State *L) { return mm_binary(L, TS_OP_BITWISE_OR, "__bor"); }
static int mm_bxor(lua_State *L) { return mm_binary(L, TS_OP_BITWISE_XOR, "__bxor"); }
/* unary metamethods: Lua passes the operand twice */
static int unary_mm(lua_State *L, ts_op op) {
  ts_tensor *x = lt_check(L, 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_unary(op, x, slot));
  lt_gc_debt(L);
  return 1;
}
static int mm_bnot(lua_State *L) { return unary_mm(L, TS_OP_BITWISE_NOT); }
static int mm_unm(lua_State *L) { return unary_mm(L, TS_OP_NEG); }

/* clamp(min, max) / clamp({min =, max =}): each bound nil, a number or a
 * tensor (broadcast, differentiable). Leaves x, min, max at 1..3 and the
 * bounds at 4 and 5; returns whether a bound is a tensor. */
static bool clamp_bounds(lua_State *L, const char *fn) {
  static const char *const known[] = {"min", "max", NULL};
  lua_settop(L, 3);
  bool opts = lt_opts_index(L, 2);
  if (opts) {
    lt_opts_check(L, 2, fn, known);
    lua_getfield(L, 2, "min");
    lua_getfield(L, 2, "max");
  } else {
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
  }
  for (int k = 4; k <= 5; k++)
    if (!lua_isnil(L, k) && lua_type(L, k) != LUA_TNUMBER && !lt_test(L, k))
      lt_errorf(L, "%s: %s'%s' must be a number or a tensor, got %s", fn, opts ? "option " : "", k == 4 ? "min" : "max",
                luaL_typename(L, k));
  if (lua_isnil(L, 4) && lua_isnil(L, 5)) lt_errorf(L, "%s: at least one of 'min' or 'max' must not be nil", fn);
  return lt_test(L, 4) || lt_test(L, 5);
}

/* the scalar kernel's parameters: i[0] bit 1 has min f[0], bit 2 has max f[1] */
static void clamp_numbers(lua_State *L, int64_t *ip, double *fp) {
  for (int k = 0; k < 2; k++)
    if (!lua_isnil(L, 4 + k)) ip[0] |= 1 << k, fp[k] = lua_tonumber(L, 4 + k);
}

/* clamp and clamp_: the tensor op when a bound is a tensor, else the scalar kernel */
static int clamp_call(lua_State *L, bool inplace) {
  ts_tensor *x = lt_check(L, 1);
  bool tensors = clamp_bounds(L, inplace ? "clamp_" : "clamp");
  ts_tensor **slot = inplace ? NULL : lt_newslot(L);
  if (tensors) {
    ts_scalar_box blo, bhi;
    ts_tensor *lo = lua_isnil(L, 4) ? NULL : lt_operand(L, 4, &blo), *hi = lua_isnil(L, 5) ? NULL : lt_operand(L, 5, &bhi);
    LT_TRY(L, inplace ? ts_clamp_tensor_out(x, lo, hi, x) : ts_clamp_tensor(x, lo, hi, slot));
  } else {
    int64_t ip[4] = {0};
    double fp[4] = {0};
    clamp_numbers(L, ip, fp);
    LT_TRY(L, inplace ? ts_unary_p_out(TS_OP_CLAMP, x, ip, fp, x) : ts_unary_p(TS_OP_CLAMP, x, ip, fp, slot));
  }
  if (inplace) lua_settop(L, 1);
  else lt_gc_debt(L);
  return 1;
}
static int l_clamp(lua_State *L) { return clamp_call(L, false); }
static int l_clamp_(lua_State *L) { return clamp_call(L, true); }

static int l_gelu(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t ip[4] = {0};
  static const char *const known[] = {"approximate", NULL};
  int opts = lt_opts_index(L, 2);
  lt_opts_check(L, opts, "gelu", known);
  if (opts && lua_getfield(L, opts, "approximate") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING)
      return luaL_error(L, "gelu: approximate must be 'none' or 'tanh', got %s", luaL_typename(L, -1));
    const char *a = lua_tostring(L, -1);
    if (strcmp(a, "tanh") == 0) ip[0] = 1;
    else if (strcmp(a, "none") != 0) return luaL_error(L, "gelu: approximate must be 'none' or 'tanh', got '%s'", a);
  } else if (lua_type(L, 2) == LUA_TSTRING) {
    ip[0] = strcmp(lua_tostring(L, 2), "tanh") == 0;
  }
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_unary_p(TS_OP_GELU, x, ip, NULL, slot));
  lt_gc_debt(L);
  return 1;
}

/* pow(x, e): a number exponent goes through the scalar kernel (x^2 stays
 * int for int x, as torch); a tensor exponent through the binary one. */
static int l_pow(lua_State *L) {
  if (lua_type(L, 2) == LUA_TNUMBER && lt_test(L, 1)) {
    ts_tensor *x = lt_check(L, 1);
    double fp[4] = {lua_tonumber(L, 2)};
    ts_tensor **slot = lt_newslot(L);
    LT_TRY(L, ts_unary_p(TS_OP_POW_SCALAR, x, NULL, fp, slot));
    lt_gc_debt(L);
    return 1;
  }
  return binary(L, TS_OP_POW, 1, 2, false);
}

/* torch.where(cond): the indices of cond's non-zero elements, one int64
 * tensor per dim (PyTorch's nonzero(as_tuple=True); a 0-dim cond counts as 1-d) */
static int where_indices(lua_State *L, ts_tensor *cond) {
  ts_tensor **nz = lt_newslot(L);
  LT_TRY(L, ts_nonzero(cond, nz));
  int base = lua_gettop(L), n = cond->ndim > 0 ? cond->ndim : 1;
  luaL_checkstack(L, n + 1, "torch.where");
  for (int d = 0; d < n; d++) {
    ts_tensor **slot = lt_newslot(L);
    if (cond->ndim > 0) {
      ts_tensor **col = lt_newslot(L);
      LT_TRY(L, ts_select(*nz, 1, d, col));
      LT_TRY(L, ts_contiguous(*col, slot));
      lua_pop(L, 1);
    } else { /* (k, 0): k zeros, one per true 0-dim value */
      LT_TRY(L, ts_full(1, &(*nz)->sizes[0], 0, TS_INT64, cond->device, slot));
    }
  }
  lt_gc_debt(L);
  return lua_gettop(L) - base;
}

/* torch.where(cond, a, b), or torch.where(cond) */
static int l_where(lua_State *L) {
  ts_scalar_box ba, bb;
  ts_tensor *cond = lt_check(L, 1);
  if (lua_gettop(L) == 1) return where_indices(L, cond);
  ts_tensor *a = lt_operand(L, 2, &ba), *b = lt_operand(L, 3, &bb);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_where(cond, a, b, slot));
  lt_gc_debt(L);
  return 1;
}

/* x:where(cond, other) is torch.where(cond, x, other), as PyTorch's */
static int m_where(lua_State *L) {
  ts_scalar_box bb;
  ts_tensor *x = lt_check(L, 1), *cond = lt_check(L, 2), *b = lt_operand(L, 3, &bb);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_where(cond, x, b, slot));
  lt_gc_debt(L);
  return 1;
}

static int l_lerp(lua_State *L) {
  ts_scalar_box bw;
  ts_tensor *s = lt_check(L, 1), *e = lt_check(L, 2), *w = lt_operand(L, 3, &bw);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_lerp(s, e, w, slot));
  lt_gc_debt(L);
  return 1;
}

/* masked_fill(mask, value) and masked_fill_: value a number or a 0-dim
 * tensor, in self's dtype (the op layer checks and records them) */
static int l_masked_fill(lua_State *L) {
  ts_tensor *x = lt_check(L, 1), *mask = lt_check(L, 2);
  ts_scalar_box bv;
  ts_tensor *v = lt_operand(L, 3, &bv);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_masked_fill(x, mask, v, slot));
  lt_gc_debt(L);
  return 1;
}

static int l_masked_fill_(lua_State *L) {
  ts_tensor *x = lt_check(L, 1), *mask = lt_check(L, 2);
  ts_scalar_box bv;
  ts_tensor *v = lt_operand(L, 3, &bv);
  LT_TRY(L, ts_masked_fill_(x, mask, v));
  lua_settop(L, 1);
  return 1;
}

/* Aliases torch users type, mapped to registry names (true_divide is bound
 * on its own: it takes no rounding_mode). */
static const struct { const char *alias; ts_op op; } aliases[] = {
    {"negative", TS_OP_NEG}, {"absolute", TS_OP_ABS}, {"multiply", TS_OP_MUL}, {"subtract", TS_OP_SUB},
    {"divide", TS_OP_DIV}, {"greater", TS_OP_GT}, {"less", TS_OP_LT}, {"greater_equal", TS_OP_GE},
    {"less_equal", TS_OP_LE}, {"not_equal", TS_OP_NE}};

static bool has_inplace(ts_op op) {
  ts_op_kind k = ts_ops[op].kind;
  return k != TS_KIND_COMPARE || op == TS_OP_LOGICAL_AND || op == TS_OP_LOGICAL_OR;
}

static void set_closure(lua_State *L, int table, const char *name, lua_CFunction f, ts_op op) {
  lua_pushinteger(L, op);
  lua_pushcclosure(L, f, 1);
  lua_setfield(L, table, name);
}

/* ops bound by hand below, or only used inside the library (div's "trunc"
 * rounding mode is div_trunc, reached through div) */
static bool bound_elsewhere(ts_op op) {
  return op == TS_OP_CLAMP || op == TS_OP_POW_SCALAR || op == TS_OP_GELU || op == TS_OP_POW || op == TS_OP_ROUND ||
         op == TS_OP_DIV_TRUNC;
}

static bool is_unary(ts_op op) {
  ts_op_kind k = ts_ops[op].kind;
  return k == TS_KIND_UNARY || k == TS_KIND_UNARY_FLOAT || k == TS_KIND_UNARY_BOOL;
}

void lt_open_elementwise(lua_State *L) {
  int methods = lua_gettop(L), torch = methods - 1;
  for (int op = 0; op < TS_OP_COUNT; op++) {
    ts_op_kind k = ts_ops[op].kind;
    const char *name = ts_ops[op].name;
    if (bound_elsewhere((ts_op)op)) continue;
    bool unary = is_unary((ts_op)op);
    bool bin = k == TS_KIND_BINARY || k == TS_KIND_BINARY_FLOAT || k == TS_KIND_COMPARE;
    if (!unary && !bin) continue;
    for (int t = 0; t < 2; t++) set_closure(L, t ? torch : methods, name, unary ? l_unary : l_binary, (ts_op)op);
    if (has_inplace((ts_op)op) || k == TS_KIND_COMPARE) {
      char buf[64];
      snprintf(buf, sizeof buf, "%s_", name);
      set_closure(L, methods, buf, unary ? l_unary_ : l_binary_, (ts_op)op);
    }
  }
  for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++) {
    ts_op op = aliases[i].op;
    bool unary = is_unary(op);
    char buf[64];
    snprintf(buf, sizeof buf, "%s_", aliases[i].alias);
    set_closure(L, methods, aliases[i].alias, unary ? l_unary : l_binary, op);
    set_closure(L, torch, aliases[i].alias, unary ? l_unary : l_binary, op);
    set_closure(L, methods, buf, unary ? l_unary_ : l_binary_, op);
  }
  static const luaL_Reg both[] = {{"clamp", l_clamp}, {"clip", l_clamp}, {"gelu", l_gelu}, {"pow", l_pow},
                                  {"lerp", l_lerp}, {"masked_fill", l_masked_fill},
                                  {"round", l_round}, {"true_divide", l_true_divide}, {NULL, NULL}};
  static const luaL_Reg only_torch[] = {{"where", l_where}, {NULL, NULL}};
  static const luaL_Reg only_methods[] = {{"where", m_where}, {"clamp_", l_clamp_}, {"clip_", l_clamp_}, {"round_", l_round_},
                                          {"true_divide_", l_true_divide_}, {"masked_fill_", l_masked_fill_},
                                          {NULL, NULL}};
  lt_register(L, both, both);
  lt_register(L, only_torch, only_methods);
  static const luaL_Reg meta[] = {{"__add", mm_add}, {"__sub", mm_sub}, {"__mul", mm_mul}, {"__div", mm_div},
                                  {"__mod", mm_mod}, {"__pow", mm_pow}, {"__idiv", mm_idiv}, {"__unm", mm_unm},
                                  {"__band", mm_band}, {"__bor", mm_bor}, {"__bxor", mm_bxor}, {"__bnot", mm_bnot},
                                  {NULL, NULL}};
  luaL_getmetatable(L, LT_TENSOR);
  lua_pushvalue(L, -1); /* their upvalue: the metatable of the tensors they return */
  luaL_setfuncs(L, meta, 1);
  lua_pop(L, 1);
}
