// device_sampler.cc — NVML device samples and the sampling thread (device_sampler.h).
#include "device_sampler.h"

#include <dlfcn.h>
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "allocator_api.h"
#include "clock.h"

namespace gpumem::rec::sampler {
namespace {

struct NvmlMemory {
  unsigned long long total, free, used;
};
struct Nvml {
  int (*GetHandleByPciBusId)(const char*, void**) = nullptr;
  int (*GetMemoryInfo)(void*, NvmlMemory*) = nullptr;
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
    n.ok = init && n.GetHandleByPciBusId && n.GetMemoryInfo && init() == 0;
    return n;
  }();
  return n;
}

// Note [One NVML call a sample]: a sample asks NVML for the device's memory only, with a handle looked up once per
// device. It used to look the handle up by PCI bus id at every sample and then ask
// nvmlDeviceGetComputeRunningProcesses_v3 for this process's share (DeviceSampleRec::process_used), which no reader
// reads. That query is the expensive one: it enumerates the device's processes inside the driver, milliseconds under
// the driver's global lock by others' measurements (a graphics-process query at 4.5 ms against 12 µs for the memory
// query, on an RTX 4090: MangoHud #2104, whose render threads blocked on that lock), and a container's PID namespace
// often hides our pid from it anyway. On an H200, ResNet-50 b64 bf16 under figures only issued its steps in +0.6 ms
// of host time over native with sampling at 200 ms and −0.2 ms with it off (5 interleaved rounds, 2026-11-28,
// test/gpu/README.md), the size of the excess every recording process showed after its recorded steps. So
// process_used is now always 0 ("not known", as the format allows), and the handle is cached: a device keeps its PCI
// bus id for the process's life.
void* handle_of(int device, const std::string& pci) {
  static std::mutex mu;
  static std::map<std::pair<int, std::string>, void*> handles;  // (device, PCI bus id) → handle, or nullptr: not found
  const Nvml& n = nvml();
  if (pci.empty() || !n.ok) return nullptr;
  std::lock_guard<std::mutex> lk(mu);
  auto it = handles.find({device, pci});
  if (it != handles.end()) return it->second;
  void* h = nullptr;
  if (n.GetHandleByPciBusId(pci.c_str(), &h) != 0) h = nullptr;
  handles.emplace(std::make_pair(device, pci), h);
  return h;
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
// (an H100). So the memory figure and the sample's time are read under the device lock (core::settled):
// every growth, release and rollback is then wholly before or wholly after the sample, and the segment
// events before the sample's time are exactly the ones whose pages it counts. The lock is held for one
// NVML memory query per device per period (tens of µs). After an
// OOM the recorder takes one more sample at once (RecorderSink::after_oom), so the moment after a failed
// growth has a sample of its own. The reader picks for each moment a sample of that moment (Note [Device
// samples of a moment] in native/addon/src/categories.cpp).
fmt::DeviceSampleRec sample_device(int d, const std::string& pci) {
  fmt::DeviceSampleRec r{0, 0, 0, 0};  // process_used stays 0: Note [One NVML call a sample]
  const Nvml& n = nvml();
  void* h = handle_of(d, pci);
  core::settled(d, [&] {
    r.t_ns = clock::now_ns();
    NvmlMemory m{};
    if (h && n.GetMemoryInfo(h, &m) == 0) {
      r.used = m.used;
      r.total = m.total;
      return;
    }
    uint64_t free_b = 0, total_b = 0;
    if (core::device_memory(d, &free_b, &total_b)) {
      r.used = total_b - free_b;
      r.total = total_b;
    }
  });
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
