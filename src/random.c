/* The global generator state: a seed and a counter offset. Each draw of n
 * values reserves n counters, so draws never overlap and runs replay exactly. */
#include "ops.h"

static uint64_t rng_seed = 67280421310721ull, rng_offset = 0;

void ts_manual_seed(uint64_t seed) {
  rng_seed = seed;
  rng_offset = 0;
}

uint64_t ts_initial_seed(void) { return rng_seed; }

void ts_rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset) {
  *seed = rng_seed;
  *offset = rng_offset;
  rng_offset += n;
}

void ts_rng_get_state(uint64_t *seed, uint64_t *offset) {
  *seed = rng_seed;
  *offset = rng_offset;
}

void ts_rng_set_state(uint64_t seed, uint64_t offset) {
  rng_seed = seed;
  rng_offset = offset;
}
