/* The CPU backend: its kernel table, allocator and typed element helpers. */
#include "cpu.h"

extern const ts_allocator ts_cpu_allocator;
static ts_kernel cpu_kernels[TS_OP_COUNT];
static ts_backend cpu_backend = {.name = "cpu", .kernels = cpu_kernels, .allocator = &ts_cpu_allocator};

void ts_cpu_backend_init(void) {
  if (ts_backends[TS_CPU]) return;
  ts_cpu_register_copy(cpu_backend.kernels);
  ts_cpu_register_elementwise(cpu_backend.kernels);
  ts_cpu_register_random(cpu_backend.kernels);
  ts_cpu_register_reduce(cpu_backend.kernels);
  ts_cpu_register_linalg(cpu_backend.kernels);
  ts_cpu_register_index(cpu_backend.kernels);
  ts_cpu_register_optim(cpu_backend.kernels);
  ts_cpu_register_amp(cpu_backend.kernels);
  ts_cpu_register_nn(cpu_backend.kernels);
  ts_cpu_register_rnn(cpu_backend.kernels);
  ts_cpu_register_attention(cpu_backend.kernels);
  ts_cpu_register_loss(cpu_backend.kernels);
  ts_cpu_register_dnnl(cpu_backend.kernels);
  ts_backends[TS_CPU] = &cpu_backend;
}

