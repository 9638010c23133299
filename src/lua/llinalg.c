/* linalg bindings (to be written). */
#include "lt.h"

void lt_open_linalg(lua_State *L) { (void)L; }
