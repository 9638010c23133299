/* The `cuda` table (also torch.cuda). Without a CUDA build, a GPU or a
 * driver, is_available() is false and nothing fails. The rest of the device
 * and memory API arrives with the CUDA backend issue. */
#include "lt.h"

#ifdef TS_HAVE_CUDA
#include "../../cuda/cuda_api.h"
#endif

static int device_count(void) {
#ifdef TS_HAVE_CUDA
  return ts_cuda_device_count();
#else
  return 0;
#endif
}

static int l_is_available(lua_State *L) { return lua_pushboolean(L, device_count() > 0), 1; }
static int l_device_count(lua_State *L) { return lua_pushinteger(L, device_count()), 1; }

void lt_open_cuda(lua_State *L) {
  static const luaL_Reg fns[] = {{"is_available", l_is_available}, {"device_count", l_device_count}, {NULL, NULL}};
  luaL_newlib(L, fns);
#ifdef TS_HAVE_CUDA
  int v = ts_cuda_runtime_version();
  lua_pushfstring(L, "%d.%d", v / 1000, (v % 1000) / 10);
  lua_setfield(L, -2, "version");
#endif
  lua_pushvalue(L, -1);
  lua_setfield(L, -4, "cuda"); /* torch.cuda; torch is below methods */
  lua_setglobal(L, "cuda");
}
