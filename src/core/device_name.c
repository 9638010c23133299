/* Device names: "cpu", "cuda", "cuda:N" to a ts_device and back. (Resolving
 * "cuda" to the current ordinal and moving tensors is the op layer's:
 * op_device.c.) */
#include "tensh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ts_status ts_device_parse(const char *s, ts_device *out) {
  if (strcmp(s, "cpu") == 0) return *out = TS_DEVICE_CPU, TS_OK;
  if (strncmp(s, "cuda", 4) == 0) {
    if (s[4] == 0) return *out = (ts_device){TS_CUDA, -1}, TS_OK;
    if (s[4] == ':') {
      char *end;
      long i = strtol(s + 5, &end, 10);
      if (end != s + 5 && *end == 0 && i >= 0 && i < 127) return *out = (ts_device){TS_CUDA, (int8_t)i}, TS_OK;
    }
  }
  return ts_fail(TS_ERR_DEVICE, "unknown device '%s' (expected \"cpu\", \"cuda\" or \"cuda:N\")", s);
}

void ts_device_str(ts_device d, char *buf, size_t n) {
  if (d.type == TS_CPU) snprintf(buf, n, "cpu");
  else if (d.index < 0) snprintf(buf, n, "cuda");
  else snprintf(buf, n, "cuda:%d", d.index);
}
