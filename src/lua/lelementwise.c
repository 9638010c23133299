/* Elementwise bindings, driven by the op table: every unary and binary op
 * becomes a method, a torch function and (where torch has one) an in-place
 * `name_` method; the arithmetic metamethods map onto the same ops. */
#include "lt.h"

#include <math.h>
#include <string.h>

/* upvalue 1: the op */
static int l_unary(lua_State *L) {
  ts_op op = (ts_op)lua_tointeger(L, lua_upvalueindex(1));
  ts_tensor *x = lt_check(L, 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_unary(op, x, slot));
  lt_gc_debt(L);
  return 1;
}

static int l_unary_(lua_State *L) {
  ts_op op = (ts_op)lua_tointeger(L, lua_upvalueindex(1));
  ts_tensor *x = lt_check(L, 1);
  LT_TRY(L, ts_unary_out(op, x, x));
  lua_settop(L, 1);
  return 1;
}

/* binary: a op b, either side a tensor or a number; an options table may
 * give add's and sub's alpha, and no other op takes one (torch.div(a, b,
 * {rounding_mode = "floor"}) must not divide exactly without a word). */
static int binary(lua_State *L, ts_op op, int ia, int ib, bool inplace) {
  static const char *const alpha_only[] = {"alpha", NULL}, *const none[] = {NULL};
  ts_scalar_box ba, bb;
  ts_tensor *a = inplace ? lt_check(L, ia) : lt_operand(L, ia, &ba);
  ts_tensor *b = lt_operand(L, ib, &bb);
  double alpha = 1;
  bool add_sub = op == TS_OP_ADD || op == TS_OP_SUB;
  if (lt_opts_index(L, 3)) {
    char fn[64];
    snprintf(fn, sizeof fn, "%s%s", ts_ops[op].name, inplace ? "_" : "");
    lt_opts_check(L, 3, fn, add_sub ? alpha_only : none);
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

static int l_binary(lua_State *L) { return binary(L, (ts_op)lua_tointeger(L, lua_upvalueindex(1)), 1, 2, false); }
static int l_binary_(lua_State *L) { return binary(L, (ts_op)lua_tointeger(L, lua_upvalueindex(1)), 1, 2, true); }

/* metamethods: Lua calls them with the operands in source order */
static int mm_add(lua_State *L) { return binary(L, TS_OP_ADD, 1, 2, false); }
static int mm_sub(lua_State *L) { return binary(L, TS_OP_SUB, 1, 2, false); }
static int mm_mul(lua_State *L) { return binary(L, TS_OP_MUL, 1, 2, false); }
static int mm_div(lua_State *L) { return binary(L, TS_OP_DIV, 1, 2, false); }
static int mm_mod(lua_State *L) { return binary(L, TS_OP_REMAINDER, 1, 2, false); }
static int mm_pow(lua_State *L) { return binary(L, TS_OP_POW, 1, 2, false); }
static int mm_idiv(lua_State *L) { return binary(L, TS_OP_FLOOR_DIVIDE, 1, 2, false); }
static int mm_unm(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_unary(TS_OP_NEG, x, slot));
  lt_gc_debt(L);
  return 1;
}

/* clamp(min, max) / clamp({min=, max=}); either bound may be nil */
static void clamp_args(lua_State *L, const char *fn, int64_t *ip, double *fp) {
  ip[0] = 0;
  double lo = 0, hi = 0;
  static const char *const known[] = {"min", "max", NULL};
  if (lt_opts_index(L, 2)) {
    lt_opts_check(L, 2, fn, known);
    if (lua_getfield(L, 2, "min") != LUA_TNIL) ip[0] |= 1;
    if (lua_getfield(L, 2, "max") != LUA_TNIL) ip[0] |= 2;
    lua_pop(L, 2);
    lo = lt_opt_number(L, 2, "min", 0);
    hi = lt_opt_number(L, 2, "max", 0);
  } else {
    if (!lua_isnoneornil(L, 2)) ip[0] |= 1, lo = luaL_checknumber(L, 2);
    if (!lua_isnoneornil(L, 3)) ip[0] |= 2, hi = luaL_checknumber(L, 3);
  }
  if (!ip[0]) luaL_error(L, "clamp: at least one of 'min' or 'max' must not be nil");
  fp[0] = lo, fp[1] = hi;
}

static int l_clamp(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t ip[4] = {0};
  double fp[4] = {0};
  clamp_args(L, "clamp", ip, fp);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_unary_p(TS_OP_CLAMP, x, ip, fp, slot));
  lt_gc_debt(L);
  return 1;
}

static int l_clamp_(lua_State *L) {
  ts_tensor *x = lt_check(L, 1);
  int64_t ip[4] = {0};
  double fp[4] = {0};
  clamp_args(L, "clamp_", ip, fp);
  LT_TRY(L, ts_unary_p_out(TS_OP_CLAMP, x, ip, fp, x));
  lua_settop(L, 1);
  return 1;
}

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

static int l_where(lua_State *L) {
  ts_scalar_box ba, bb;
  ts_tensor *cond = lt_check(L, 1), *a = lt_operand(L, 2, &ba), *b = lt_operand(L, 3, &bb);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_where(cond, a, b, slot));
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

/* Aliases torch users type, mapped to registry names. */
static const struct { const char *alias; ts_op op; } aliases[] = {
    {"negative", TS_OP_NEG}, {"absolute", TS_OP_ABS}, {"multiply", TS_OP_MUL}, {"subtract", TS_OP_SUB},
    {"divide", TS_OP_DIV}, {"true_divide", TS_OP_DIV}, {"fmod", TS_OP_REMAINDER}, {"greater", TS_OP_GT},
    {"less", TS_OP_LT}, {"greater_equal", TS_OP_GE}, {"less_equal", TS_OP_LE}, {"not_equal", TS_OP_NE}};

static bool has_inplace(ts_op op) {
  ts_op_kind k = ts_ops[op].kind;
  return k != TS_KIND_COMPARE || op == TS_OP_LOGICAL_AND || op == TS_OP_LOGICAL_OR;
}

static void set_closure(lua_State *L, int table, const char *name, lua_CFunction f, ts_op op) {
  lua_pushinteger(L, op);
  lua_pushcclosure(L, f, 1);
  lua_setfield(L, table, name);
}

void lt_open_elementwise(lua_State *L) {
  int methods = lua_gettop(L), torch = methods - 1;
  for (int op = 0; op < TS_OP_COUNT; op++) {
    ts_op_kind k = ts_ops[op].kind;
    const char *name = ts_ops[op].name;
    if (op == TS_OP_CLAMP || op == TS_OP_POW_SCALAR || op == TS_OP_GELU || op == TS_OP_POW) continue;
    bool unary = k == TS_KIND_UNARY || k == TS_KIND_UNARY_FLOAT || k == TS_KIND_UNARY_BOOL;
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
    set_closure(L, methods, aliases[i].alias, l_binary, aliases[i].op);
    set_closure(L, torch, aliases[i].alias, l_binary, aliases[i].op);
  }
  static const luaL_Reg both[] = {{"clamp", l_clamp}, {"clip", l_clamp}, {"gelu", l_gelu}, {"pow", l_pow},
                                  {"where", l_where}, {"lerp", l_lerp}, {"masked_fill", l_masked_fill},
                                  {NULL, NULL}};
  static const luaL_Reg only_methods[] = {{"clamp_", l_clamp_}, {"clip_", l_clamp_},
                                          {"masked_fill_", l_masked_fill_}, {NULL, NULL}};
  lt_register(L, both, both);
  lt_register(L, NULL, only_methods);
  static const luaL_Reg meta[] = {{"__add", mm_add}, {"__sub", mm_sub}, {"__mul", mm_mul}, {"__div", mm_div},
                                  {"__mod", mm_mod}, {"__pow", mm_pow}, {"__idiv", mm_idiv}, {"__unm", mm_unm},
                                  {NULL, NULL}};
  luaL_getmetatable(L, LT_TENSOR);
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
}
