/* torch._image, the C side of images for lua/tensh/image.lua and plot.lua:
 * the terminal's size (for imshow and plot). */
#include "lt.h"

#include <sys/ioctl.h>
#include <unistd.h>

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
  static const luaL_Reg fns[] = {{"terminal_size", l_terminal_size}, {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_setfield(L, -3, "_image"); /* torch._image: private, wrapped by lua/tensh/image.lua */
}
