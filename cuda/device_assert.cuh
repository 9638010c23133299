// Device-side assertions without a host synchronisation: a kernel that
// meets an input it cannot compute (a class index out of range) fills one
// record in page-locked host memory mapped into every device; every host
// synchronisation reads it after its wait (cuda/activity.cu), so the first
// one after the kernel ran raises the error, naming the op and the value, as
// PyTorch's device asserts do. Unlike those, the record is cleared once
// reported and the session goes on. The first failing thread's values are
// kept; later ones are dropped until the record is read.
#pragma once

#include "common.cuh"

struct tsc_assert_record {
  int claimed;  // 0 free; set by the first failing thread
  int ready;    // set once op, code and v are written
  int op;       // the ts_op that failed (names it in the message)
  int code;     // what failed, for the op's message (ts_loss_device_error)
  long long v[3];
};

// The record (allocated on first use); NULL and *st set when it cannot be.
tsc_assert_record *tsc_assert_record_get(ts_status *st);

__device__ __forceinline__ void tsc_device_assert(tsc_assert_record *r, int op, int code, long long a, long long b,
                                                  long long c) {
  if (atomicCAS(&r->claimed, 0, 1) != 0) return;
  r->op = op, r->code = code, r->v[0] = a, r->v[1] = b, r->v[2] = c;
  __threadfence_system(); // the values are visible before the flag that publishes them
  *(volatile int *)&r->ready = 1;
}
