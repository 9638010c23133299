/* Printing tensors the way PyTorch does (to be completed: aligned values in
 * one shared format, summarising with "...", dtype and device suffixes). */
#include "lt.h"

#include <stdio.h>

static int tensor_tostring(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  char shape[256];
  ts_shape_str(t->ndim, t->sizes, shape, sizeof shape);
  lua_pushfstring(L, "tensor(shape=%s, dtype=%s)", shape, ts_dtype_name(t->dtype));
  return 1;
}

void lt_open_print(lua_State *L) {
  luaL_getmetatable(L, LT_TENSOR);
  lua_pushcfunction(L, tensor_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}
