/* The shell's Lua allocator: blocks of up to 256 bytes kept on free lists by
 * size class (16-byte steps), everything else through malloc as lauxlib's
 * allocator does. Every op at the prompt makes a tensor box (a ~50-byte
 * userdata) that a young collection frees a few hundred at a time; through
 * glibc each cost a malloc and a free that overflowed its per-thread cache
 * (~250 instructions an op of ~3200, callgrind). A Lua state is used by one
 * thread at a time, so the lists need no lock.
 *
 * The state is made by luaL_newstate (for its panic and warning functions)
 * and switched to this allocator at once, so the first few blocks, made by
 * malloc at their exact size, come back here too: a block joins a list only
 * when malloc_usable_size says it holds the class's size. */
#include "repl.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define CLASS_STEP 16
#define NCLASS 16                /* up to 256 bytes */
#define CACHED_BYTES (64 << 10) /* per class: what the lists keep at most */

typedef struct free_block { struct free_block *next; } free_block;

static struct {
  free_block *list[NCLASS];
  size_t count[NCLASS];
  bool closing; /* lua_close frees the whole heap: to malloc, not to the lists */
} pool;

/* class of a size of 1..256 bytes, -1 above (0 bytes is no block) */
static inline int size_class(size_t n) { return n - 1 < NCLASS * CLASS_STEP ? (int)((n - 1) / CLASS_STEP) : -1; }
static inline size_t class_size(int c) { return (size_t)(c + 1) * CLASS_STEP; }

static void *take(int c) {
  free_block *b = pool.list[c];
  if (!b) return malloc(class_size(c));
  pool.list[c] = b->next;
  pool.count[c]--;
  return b;
}

static void give_back(void *p, int c) {
  if (pool.count[c] < CACHED_BYTES / class_size(c) && malloc_usable_size(p) >= class_size(c)) {
    free_block *b = p;
    b->next = pool.list[c];
    pool.list[c] = b;
    pool.count[c]++;
  } else {
    free(p);
  }
}

/* lua_Alloc: osize is the block's size when ptr is a block (a type tag when it is NULL) */
static void *pool_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  int oc = ptr ? size_class(osize) : -1, nc = size_class(nsize);
  if (nsize == 0) {
    if (oc >= 0 && !pool.closing) give_back(ptr, oc);
    else free(ptr);
    return NULL;
  }
  if (nc < 0 && (!ptr || oc < 0)) return realloc(ptr, nsize); /* big to big, as lauxlib's */
  if (ptr && oc == nc && (nsize <= osize || malloc_usable_size(ptr) >= nsize)) return ptr; /* it fits */
  void *b = nc >= 0 ? take(nc) : malloc(nsize);
  if (!b) return NULL; /* Lua keeps ptr, as realloc's failure would */
  if (ptr) {
    memcpy(b, ptr, osize < nsize ? osize : nsize);
    if (oc >= 0) give_back(ptr, oc);
    else free(ptr);
  }
  return b;
}

void ts_shell_pool_allocator(lua_State *L) { lua_setallocf(L, pool_alloc, NULL); }

void ts_shell_pool_close(lua_State *L) {
  pool.closing = true;
  lua_close(L);
  for (int c = 0; c < NCLASS; c++) {
    while (pool.list[c]) {
      free_block *b = pool.list[c];
      pool.list[c] = b->next;
      free(b);
    }
    pool.count[c] = 0;
  }
}
