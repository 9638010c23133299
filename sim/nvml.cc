// NVML as the simulated device provides it: the three calls cuda/stream.cu
// makes, reached through dlopen("libnvidia-ml.so.1") (cuda_sim.h routes
// dlopen and dlsym here). The utilisation is a fixed 0 %: work runs only
// when the host waits for it, so there is no busy time to sample.
#include "sim.h"

#undef dlopen
#undef dlsym
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

namespace {
struct nvml_util {
  unsigned gpu, memory;
};
int nvml_init() { return 0; }
int nvml_by_bus(const char *bus, void **dev) {
  unsigned b = 0;
  if (sscanf(bus, "0000:%x:00.0", &b) != 1 || b < 0x18 || (int)(b - 0x18) >= tsim::device_count()) return 13; // NVML_ERROR_NOT_FOUND
  *dev = (void *)(uintptr_t)(b - 0x18 + 1);
  return 0;
}
int nvml_utilization(void *dev, nvml_util *u) {
  if (!dev) return 2; // NVML_ERROR_INVALID_ARGUMENT
  u->gpu = 0, u->memory = 0;
  return 0;
}
char fake_nvml; // its address is the handle
} // namespace

extern "C" void *tsim_dlopen(const char *name, int flags) {
  if (name && strstr(name, "libnvidia-ml")) return &fake_nvml;
  return dlopen(name, flags);
}

extern "C" void *tsim_dlsym(void *handle, const char *sym) {
  if (handle != &fake_nvml) return dlsym(handle, sym);
  if (!strcmp(sym, "nvmlInit_v2")) return (void *)nvml_init;
  if (!strcmp(sym, "nvmlDeviceGetHandleByPciBusId_v2")) return (void *)nvml_by_bus;
  if (!strcmp(sym, "nvmlDeviceGetUtilizationRates")) return (void *)nvml_utilization;
  return nullptr;
}
