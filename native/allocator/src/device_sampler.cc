// device_sampler.cc — NVML device samples and the sampling thread (device_sampler.h).
#include "device_sampler.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "allocator_api.h"
#include "clock.h"

namespace gpumem::rec::sampler {
namespace {

struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlProcessInfo {  // nvmlProcessInfo_t as taken by nvmlDeviceGetComputeRunningProcesses_v3
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
struct Nvml {
  int (*GetHandleByPciBusId)(const char*, void**) = nullptr;
  int (*GetMemoryInfo)(void*, NvmlMemory*) = nullptr;
  int (*GetProcesses)(void*, unsigned*, NvmlProcessInfo*) = nullptr;
  bool ok = false;
};
const Nvml& nvml() {
  static const Nvml n = [] {
    Nvml n;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return n;
    auto init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
    n.GetHandleByPciBusId =
        reinterpret_cast<decltype(n.GetHandleByPciBusId)>(dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.GetMemoryInfo = reinterpret_cast<decltype(n.GetMemoryInfo)>(dlsym(h, "nvmlDeviceGetMemoryInfo"));
    n.GetProcesses = reinterpret_cast<decltype(n.GetProcesses)>(dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3"));
    n.ok = init && n.GetHandleByPciBusId && n.GetMemoryInfo && init() == 0;
    return n;
  }();
  return n;
}

std::mutex g_mu;  // guards g_stop and the thread's start/stop
std::condition_variable g_cv;
bool g_stop = false;
std::thread g_thread;

}  // namespace

// Note [Settled samples]: a device sample says what the device holds at one moment, and a reader sets it
// against the allocator's reserved bytes at the same moment (device used − reserved: the CUDA context,
// libraries, other processes). A growth maps its pages one by one under the device lock, and a growth
// that fails gives them all back before it throws (grow_expandable's rollback); an OOM on an 80 GiB card
// asked for 90 % after 30 % maps ~55 GiB that way, for long enough that a sampler running beside it read
// 78.7 GiB used with 23.9 GiB reserved, and the summary then called 54.8 GiB "not from the allocator"
// (issue 27). So the memory figure and the sample's time are read under the device lock (core::settled):
// every growth, release and rollback is then wholly before or wholly after the sample, and the segment
// events before the sample's time are exactly the ones whose pages it counts. The lock is held for one
// NVML memory query per device per period (tens of µs); the per-process query runs after it. After an
// OOM the recorder takes one more sample at once (RecorderSink::after_oom), so the moment after a failed
// growth has a sample of its own. The reader picks for each moment a sample of that moment (Note [Device
// samples of a moment] in native/addon/src/categories.cpp).
fmt::DeviceSampleRec sample_device(int d, const std::string& pci) {
  fmt::DeviceSampleRec r{0, 0, 0, 0};
  const Nvml& n = nvml();
  void* h = nullptr;
  const bool have_nvml = !pci.empty() && n.ok && n.GetHandleByPciBusId(pci.c_str(), &h) == 0;
  bool by_nvml = false;
  core::settled(d, [&] {
    r.t_ns = clock::now_ns();
    NvmlMemory m{};
    if (have_nvml && n.GetMemoryInfo(h, &m) == 0) {
      r.used = m.used;
      r.total = m.total;
      by_nvml = true;
      return;
    }
    uint64_t free_b = 0, total_b = 0;
    if (core::device_memory(d, &free_b, &total_b)) {
      r.used = total_b - free_b;
      r.total = total_b;
    }
  });
  if (by_nvml && n.GetProcesses) {
    NvmlProcessInfo procs[64];
    unsigned count = 64;
    if (n.GetProcesses(h, &count, procs) == 0)
      for (unsigned i = 0; i < count && i < 64; i++)
        if (procs[i].pid == unsigned(::getpid()) && procs[i].usedGpuMemory != ~0ull)
          r.process_used = procs[i].usedGpuMemory;
  }
  return r;
}

void start(uint32_t interval_ms, std::function<void()> pass) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_thread.joinable()) return;
  g_stop = false;
  g_thread = std::thread([interval_ms, pass = std::move(pass)] {
    pthread_setname_np(pthread_self(), "gpumem-sampler");  // Note [Thread names] in sequencer.cc
    std::unique_lock<std::mutex> lk(g_mu);
    while (!g_stop) {
      lk.unlock();
      pass();
      lk.lock();
      g_cv.wait_for(lk, std::chrono::milliseconds(interval_ms), [] { return g_stop; });
    }
  });
}

bool running() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_thread.joinable();
}

void stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_stop = true;
    t = std::move(g_thread);
  }
  g_cv.notify_all();
  if (t.joinable()) t.join();
}

}  // namespace gpumem::rec::sampler
