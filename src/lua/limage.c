/* torch._image, the C side of images for lua/tensh/image.lua and plot.lua:
 * the PNG codec (src/data/png.c) and the terminal's size. PNG bytes cross
 * as Lua strings; pixels as uint8 tensors: (H, W, C) contiguous CPU ones
 * into the encoder, (C, H, W) out of the decoder. */
#include "lt.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../data/png.h"

/* The (H, W, C) uint8 contiguous CPU tensor at idx, C in 1..4. */
static ts_tensor *check_hwc(lua_State *L, int idx, const char *fn) {
  ts_tensor *t = lt_check(L, idx);
  if (t->dtype != TS_UINT8 || t->device.type != TS_CPU || t->ndim != 3 || !ts_is_contiguous(t) || t->sizes[2] < 1 ||
      t->sizes[2] > 4)
    luaL_error(L, "%s: expected a contiguous uint8 CPU tensor (H, W, C) with 1 to 4 channels", fn);
  LT_TRY(L, ts_host_ready(t));
  return t;
}

static int check_level(lua_State *L, int idx) {
  lua_Integer level = luaL_optinteger(L, idx, -1);
  if (level < -1 || level > 9) return luaL_error(L, "compression_level must be in [0, 9], got %d", (int)level);
  return (int)level;
}

/* _image.png_encode(hwc [, level]) -> the PNG's bytes as a string */
static int l_png_encode(lua_State *L) {
  ts_tensor *t = check_hwc(L, 1, "png_encode");
  int level = check_level(L, 2);
  uint8_t *png;
  size_t n;
  LT_TRY(L, ts_png_encode(ts_data(t), t->sizes[0], t->sizes[1], (int)t->sizes[2], level, &png, &n));
  lua_pushlstring(L, (const char *)png, n); /* may raise on memory: free first */
  free(png);
  return 1;
}

/* _image.png_write(path, hwc [, level]) */
static int l_png_write(lua_State *L) {
  const char *path = lt_checkpath(L, 1, "save_image");
  ts_tensor *t = check_hwc(L, 2, "png_write");
  int level = check_level(L, 3);
  LT_TRY(L, ts_png_write_file(path, ts_data(t), t->sizes[0], t->sizes[1], (int)t->sizes[2], level));
  return 0;
}

/* _image.png_decode(bytes, mode, name) -> uint8 (C, H, W) */
static int l_png_decode(lua_State *L) {
  size_t n;
  const char *bytes = luaL_checklstring(L, 1, &n);
  int mode = (int)luaL_checkinteger(L, 2);
  const char *name = luaL_checkstring(L, 3);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_png_decode((const uint8_t *)bytes, n, (ts_png_mode)mode, name, slot));
  lt_gc_debt(L);
  return 1;
}

/* _image.bytes(t) -> the bytes of a 1-D uint8 CPU tensor as a string */
static int l_bytes(lua_State *L) {
  ts_tensor *t = lt_check(L, 1);
  if (t->dtype != TS_UINT8 || t->ndim != 1) return luaL_error(L, "expected a 1-D uint8 tensor");
  t = lt_host_view(L, t);
  ts_tensor **c = lt_newslot(L);
  LT_TRY(L, ts_contiguous(t, c));
  LT_TRY(L, ts_host_ready(*c));
  lua_pushlstring(L, ts_data(*c), (size_t)(*c)->sizes[0]);
  return 1;
}

/* _image.from_bytes(s) -> a 1-D uint8 CPU tensor holding the string's bytes */
static int l_from_bytes(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  int64_t size = (int64_t)n;
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_tensor_empty(1, &size, TS_UINT8, TS_DEVICE_CPU, slot));
  if (n) memcpy(ts_data(*slot), s, n);
  lt_gc_debt(L);
  return 1;
}

/* _image.png_read(path, mode) -> uint8 (C, H, W) */
static int l_png_read(lua_State *L) {
  const char *path = lt_checkpath(L, 1, "read_image");
  int mode = (int)luaL_checkinteger(L, 2);
  ts_tensor **slot = lt_newslot(L);
  LT_TRY(L, ts_png_read_file(path, (ts_png_mode)mode, slot));
  lt_gc_debt(L);
  return 1;
}

/* _image.terminal_size() -> columns, rows of the terminal on stdout (or
 * stderr, stdin), or nothing when none of them is a terminal */
static int l_terminal_size(lua_State *L) {
  for (int fd = 1; fd <= 3; fd++) {
    struct winsize ws;
    int f = fd == 3 ? 0 : fd;
    if (ioctl(f, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
      lua_pushinteger(L, ws.ws_col);
      lua_pushinteger(L, ws.ws_row);
      return 2;
    }
  }
  return 0;
}

void lt_open_image(lua_State *L) {
  static const luaL_Reg fns[] = {{"terminal_size", l_terminal_size}, {"png_encode", l_png_encode},
                                 {"png_write", l_png_write},         {"png_decode", l_png_decode},
                                 {"png_read", l_png_read},           {"bytes", l_bytes},
                                 {"from_bytes", l_from_bytes},       {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_setfield(L, -3, "_image"); /* torch._image: private, wrapped by lua/tensh/image.lua */
}
