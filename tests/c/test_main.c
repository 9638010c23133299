/* C unit tests of the core: a tiny runner, one function per case. Prints one
 * line per failure and a closing "N passed, N failed" line. */
#include "test.h"

#include <stdio.h>
#include <string.h>

int t_passed, t_failed;
static const char *current;

void t_fail(const char *file, int line, const char *msg) {
  t_failed++;
  printf("FAIL c:%s %s:%d: %s\n", current, file, line, msg);
}

#define X(name) void name(void);
#include "cases.def"
#undef X

int main(int argc, char **argv) {
  ts_cpu_backend_init();
  struct { const char *name; void (*fn)(void); } cases[] = {
#define X(name) {#name, name},
#include "cases.def"
#undef X
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (argc > 1 && !strstr(cases[i].name, argv[1])) continue;
    current = cases[i].name;
    int before = t_failed;
    cases[i].fn();
    if (t_failed == before) t_passed++;
  }
  printf("c: %d passed, %d failed\n", t_passed, t_failed);
  return t_failed != 0;
}
