/* A stand-in for libnvidia-ml.so.1 (the driver's NVML) with the four entry points the device sampler resolves
   (native/allocator/src/device_sampler.cc), counting each call: the tests check which NVML calls a sample makes
   (Note [One NVML call a sample]). Its figures come from FAKE_NVML_USED / FAKE_NVML_TOTAL; at exit it writes
   `init handle memory processes pci` to FAKE_NVML_OUT. Built by test_observe.py with the system's cc. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_init, n_handle, n_memory, n_processes;
static char last_pci[64];
static int the_device;

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

int nvmlInit_v2(void) { n_init++; return 0; }

int nvmlDeviceGetHandleByPciBusId_v2(const char* pci, void** device) {
  __atomic_add_fetch(&n_handle, 1, __ATOMIC_RELAXED);
  snprintf(last_pci, sizeof last_pci, "%s", pci);
  *device = &the_device;
  return 0;
}

static unsigned long long env_u64(const char* name, unsigned long long dflt) {
  const char* v = getenv(name);
  return v ? strtoull(v, NULL, 10) : dflt;
}

int nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* m) {
  if (device != &the_device) return 4; /* NVML_ERROR_INVALID_ARGUMENT: not a handle of ours */
  __atomic_add_fetch(&n_memory, 1, __ATOMIC_RELAXED);
  m->total = env_u64("FAKE_NVML_TOTAL", 80ull << 30);
  m->used = env_u64("FAKE_NVML_USED", 5ull << 30);
  m->free = m->total - m->used;
  return 0;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned* count, void* infos) {
  (void)device;
  (void)infos;
  __atomic_add_fetch(&n_processes, 1, __ATOMIC_RELAXED);
  *count = 0;
  return 0;
}

__attribute__((destructor)) static void report(void) {
  const char* out = getenv("FAKE_NVML_OUT");
  if (!out) return;
  FILE* f = fopen(out, "w");
  if (!f) return;
  fprintf(f, "%d %d %d %d %s\n", n_init, n_handle, n_memory, n_processes, last_pci[0] ? last_pci : "-");
  fclose(f);
}
