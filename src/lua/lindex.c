/* index bindings (to be written). */
#include "lt.h"

void lt_open_index(lua_State *L) { (void)L; }
