#ifndef TENSH_TEST_H
#define TENSH_TEST_H

#include <stdio.h>

#include "ops/ops.h"

void t_fail(const char *file, int line, const char *msg);

#define CHECK(cond)                                      \
  do {                                                   \
    if (!(cond)) t_fail(__FILE__, __LINE__, #cond);      \
  } while (0)
#define CHECK_OK(expr)                                                       \
  do {                                                                       \
    ts_status st_ = (expr);                                                  \
    if (st_ != TS_OK) {                                                      \
      char m_[1200];                                                         \
      snprintf(m_, sizeof m_, "%s -> %s", #expr, ts_last_error());          \
      t_fail(__FILE__, __LINE__, m_);                                        \
    }                                                                        \
  } while (0)

#endif
