/* Errors: a status code returned, a message left in thread-local storage.
 * The binding layer reads the message and raises the Lua error. */
#include "tensh.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];
volatile int ts_interrupt_flag = 0;

ts_status ts_fail(ts_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return s;
}

const char *ts_last_error(void) { return last_error; }

const char *ts_status_name(ts_status s) {
  static const char *names[] = {"ok",          "bad argument", "bad type",    "shape error",
                                "dtype error", "device error", "index error", "size overflow",
                                "out of memory", "interrupted", "i/o error",  "backend error",
                                "unsupported"};
  return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown error";
}

ts_status ts_check_interrupt(void) {
  if (ts_interrupt_flag) {
    ts_interrupt_flag = 0;
    return ts_fail(TS_ERR_INTERRUPTED, "interrupted");
  }
  return TS_OK;
}
