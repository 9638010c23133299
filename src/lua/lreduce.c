/* reduce bindings (to be written). */
#include "lt.h"

void lt_open_reduce(lua_State *L) { (void)L; }
