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
 * when malloc_usable_size says it holds the class's size.
 *
 * The lists are first filled from an arena mapped with its pages already in
 * place (MAP_POPULATE): the library's load makes ~5,000 small blocks, which
 * through malloc cost 0.9M instructions, and their pages ~80 faults, of a
 * 9M-instruction start-up; at lua_close each was freed again (0.5M). An
 * arena block is never given to free: it stays on its class's list, and the
 * arena is unmapped after lua_close. ASan builds go without it, so that
 * ASan sees every block. */
#include "repl.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CLASS_STEP 16
#define NCLASS 16                /* up to 256 bytes */
#define CACHED_BYTES (64 << 10) /* per class: what the lists keep at most */

typedef struct free_block { struct free_block *next; } free_block;

static struct {
  free_block *list[NCLASS];
  size_t count[NCLASS];
  bool closing; /* lua_close frees the whole heap: to malloc, not to the lists */
  char *arena, *arena_next, *arena_end;
} pool;

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_BYTES 0
#else
#define ARENA_BYTES (512 << 10) /* the library's start-up takes ~300 KiB of small blocks */
#endif

static inline bool in_arena(const void *p) {
  return (const char *)p >= pool.arena && (const char *)p < pool.arena_end;
}

/* class of a size of 1..256 bytes, -1 above (0 bytes is no block) */
static inline int size_class(size_t n) { return n - 1 < NCLASS * CLASS_STEP ? (int)((n - 1) / CLASS_STEP) : -1; }
static inline size_t class_size(int c) { return (size_t)(c + 1) * CLASS_STEP; }

static void *take(int c) {
  free_block *b = pool.list[c];
  if (!b) {
    if ((size_t)(pool.arena_end - pool.arena_next) >= class_size(c)) {
      pool.arena_next += class_size(c);
      return pool.arena_next - class_size(c);
    }
    return malloc(class_size(c));
  }
  pool.list[c] = b->next;
  pool.count[c]--;
  return b;
}

/* the bytes block p of class c holds (malloc's blocks may hold more) */
static size_t usable(void *p, int c) { return in_arena(p) ? class_size(c) : malloc_usable_size(p); }

static void give_back(void *p, int c) {
  if (in_arena(p) || (pool.count[c] < CACHED_BYTES / class_size(c) && malloc_usable_size(p) >= class_size(c))) {
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
    else if (!in_arena(ptr)) free(ptr);
    return NULL;
  }
  if (nc < 0 && (!ptr || oc < 0)) return realloc(ptr, nsize); /* big to big, as lauxlib's */
  if (ptr && oc == nc && (nsize <= osize || usable(ptr, oc) >= nsize)) return ptr; /* it fits */
  void *b = nc >= 0 ? take(nc) : malloc(nsize);
  if (!b) return NULL; /* Lua keeps ptr, as realloc's failure would */
  if (ptr) {
    memcpy(b, ptr, osize < nsize ? osize : nsize);
    if (oc >= 0) give_back(ptr, oc);
    else free(ptr);
  }
  return b;
}

void ts_shell_pool_allocator(lua_State *L) {
  if (ARENA_BYTES && !pool.arena) {
    void *a = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (a != MAP_FAILED) pool.arena = pool.arena_next = a, pool.arena_end = pool.arena + ARENA_BYTES;
  }
  lua_setallocf(L, pool_alloc, NULL);
}

void ts_shell_pool_close(lua_State *L) {
  pool.closing = true;
  lua_close(L);
  for (int c = 0; c < NCLASS; c++) {
    while (pool.list[c]) {
      free_block *b = pool.list[c];
      pool.list[c] = b->next;
      if (!in_arena(b)) free(b);
    }
    pool.count[c] = 0;
  }
  if (pool.arena) munmap(pool.arena, ARENA_BYTES);
  pool.arena = pool.arena_next = pool.arena_end = NULL;
}
