// allocator.cc — the process-wide allocator: configuration, the backend, one DeviceAllocator per device
// and the sink they emit to (allocator.h), and the queries other parts use (allocator_api.h).
#include "allocator.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_backend.h"
#include "settings.h"
#include "sim_backend.h"

namespace gpumem::core {
namespace {

struct Config {
  std::string backend = settings::kBackendDefault;
  uint64_t sim_capacity = 16ull << 30;
  int sim_devices = 1;
  uint32_t sim_map_delay_us = 0;  // tests only: Note [Slow page maps] in sim_backend.h
  // Note [Default segment strategy]: expandable with trim on growth. GPT-2 small, sequence lengths
  // 128…1024 at 8192 tokens per batch, H200 (test/gpu/bench_allocator.py): peak reserved / peak
  // allocated ×1.459 fixed (the same bytes as PyTorch's default), ×1.115 expandable (the same as
  // PyTorch's expandable_segments), ×1.036 expandable + trim. A trim moves same-stream pages without
  // waiting for the GPU (Note [Page moves]); Note [Futile trims] bounds how often trims run.
  bool expandable = std::string(settings::kSegmentsDefault) == "expandable";
  bool trim_on_growth = settings::kTrimOnGrowthDefault;  // Note [Trim on growth] in device_allocator.h
};

struct Global {
  std::mutex mu;  // creation and configuration only; the hot path reads `ready` and `devices`
  std::atomic<bool> ready{false};
  Config config;
  std::unique_ptr<Backend> backend;
  std::vector<std::unique_ptr<DeviceAllocator>> devices;
  EventSink* sink = &null_sink();  // fixed once the devices exist
};

// Never destroyed: tensors may be freed by other threads or atexit handlers after static
// destructors would have run.
Global& global() {
  static Global* g = new Global;
  return *g;
}

}  // namespace

void ensure_ready() {
  Global& g = global();
  if (g.ready.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.ready.load(std::memory_order_relaxed)) return;
  std::unique_ptr<Backend> backend;
  if (g.config.backend == "sim") {
    auto sim = std::make_unique<SimBackend>(g.config.sim_devices, g.config.sim_capacity);
    sim->set_map_delay_us(g.config.sim_map_delay_us);
    backend = std::move(sim);
  } else
    backend = make_cuda_backend();
  Options options;
  options.expandable = g.config.expandable;
  options.trim_on_growth = g.config.trim_on_growth;
  for (int d = 0; d < backend->device_count(); d++)
    g.devices.push_back(std::make_unique<DeviceAllocator>(d, *backend, options, *g.sink));
  g.backend = std::move(backend);
  g.ready.store(true, std::memory_order_release);
}

DeviceAllocator& device_allocator(int device) {
  ensure_ready();
  Global& g = global();
  if (device < 0 || device >= int(g.devices.size()))
    throw std::runtime_error("gpumem: device " + std::to_string(device) + " does not exist (" +
                             std::to_string(g.devices.size()) + " visible)");
  return *g.devices[device];
}

std::vector<DeviceAllocator*> selected(int device) {
  std::vector<DeviceAllocator*> out;
  Global& g = global();
  if (!g.ready.load(std::memory_order_acquire)) return out;
  for (auto& d : g.devices)
    if (device < 0 || d->device() == device) out.push_back(d.get());
  return out;
}

bool configure(const json::Value& v, std::string* err) {
  Global& g = global();
  Config c = g.config;
  // The recording settings by the one table (settings.h); sim_devices and sim_map_delay_us are this
  // library's own (tests).
  bool touched = v.find(settings::kBackend.json) || v.find(settings::kSimCapacity.json) ||
                 v.find(settings::kSegments.json) || v.find(settings::kTrimOnGrowth.json);
  std::string segments = c.expandable ? "expandable" : "fixed";
  uint64_t sim_capacity = 0;  // 0: the simulator's default
  if (!settings::read(v, settings::kBackend, &c.backend, err) ||
      !settings::read(v, settings::kSimCapacity, &sim_capacity, err) ||
      !settings::read(v, settings::kSegments, &segments, err) ||
      !settings::read(v, settings::kTrimOnGrowth, &c.trim_on_growth, err))
    return false;
  if (sim_capacity) c.sim_capacity = sim_capacity;
  c.expandable = segments == "expandable";
  if (const json::Value* s = v.find("sim_devices")) {
    if (!s->is_int() || s->as_int() < 1 || s->as_int() > 64) {
      *err = "\"sim_devices\" must be an integer from 1 to 64";
      return false;
    }
    c.sim_devices = int(s->as_int());
    touched = true;
  }
  if (const json::Value* s = v.find("sim_map_delay_us")) {
    if (!s->is_int() || s->as_int() < 0 || s->as_int() > 1000000) {
      *err = "\"sim_map_delay_us\" must be an integer from 0 to 1000000";
      return false;
    }
    c.sim_map_delay_us = uint32_t(s->as_int());
    touched = true;
  }
  if (!touched) return true;
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.ready.load()) {
    *err =
        "\"backend\", \"sim_*\", \"segments\" and \"trim_on_growth\" must be configured before the first allocation "
        "(install the allocator before any CUDA tensor exists)";
    return false;
  }
  g.config = c;
  return true;
}

bool set_event_sink(EventSink& sink) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.ready.load()) return false;
  g.sink = &sink;
  return true;
}

std::vector<SegmentView> snapshot_segments(int device) {
  std::vector<SegmentView> out;
  for (DeviceAllocator* d : selected(device)) {
    auto v = d->segments();
    out.insert(out.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  }
  return out;
}

int device_count() {
  Global& g = global();
  return g.ready.load(std::memory_order_acquire) ? int(g.devices.size()) : 0;
}

Figures figures(int device) {
  Figures f{};
  for (DeviceAllocator* d : selected(device)) {
    DeviceStats s = d->stats();
    f.allocated += uint64_t(s.allocated_bytes[kAll].current);
    f.reserved += uint64_t(s.reserved_bytes[kAll].current);
    f.active += uint64_t(s.active_bytes[kAll].current);
    f.requested += uint64_t(s.requested_bytes[kAll].current);
    f.peak_allocated += uint64_t(s.allocated_bytes[kAll].peak);
    f.peak_reserved += uint64_t(s.reserved_bytes[kAll].peak);
    f.num_ooms += uint64_t(s.num_ooms);
    f.num_alloc_retries += uint64_t(s.num_alloc_retries);
  }
  return f;
}

void empty_cache(int device, uint64_t* before, uint64_t* after, int origin) {
  uint64_t b = 0, a = 0;
  for (DeviceAllocator* d : selected(device)) {
    uint64_t db = 0, da = 0;
    d->empty_cache(&db, &da, origin);
    b += db;
    a += da;
  }
  if (before) *before = b;
  if (after) *after = a;
}

bool device_memory(int device, uint64_t* free_b, uint64_t* total_b) {
  Global& g = global();
  if (!g.ready.load(std::memory_order_acquire) || device < 0 || device >= int(g.devices.size())) return false;
  try {
    return g.backend->mem_get_info(device, free_b, total_b);
  } catch (const std::exception&) {
    return false;  // callers (samplers, the control channel) treat "unknown" as no figure
  }
}

void settled(int device, const std::function<void()>& read) {
  const std::vector<DeviceAllocator*> d = device < 0 ? std::vector<DeviceAllocator*>() : selected(device);
  if (d.empty()) return read();
  d.front()->settled(read);
}

DeviceIdentity device_identity(int device) {
  Global& g = global();
  if (!g.ready.load(std::memory_order_acquire) || device < 0 || device >= int(g.devices.size())) return {};
  try {
    return g.backend->identity(device);
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace gpumem::core
