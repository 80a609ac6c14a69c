// allocator.cc — the façade: process-wide state, the C API of gpumem_allocator.h that belongs to the
// allocator core, and the core:: functions the recorder uses (allocator_api.h).
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../include/gpumem_allocator.h"
#include "allocator_api.h"
#include "cuda_backend.h"
#include "device_allocator.h"
#include "json.h"
#include "recorder.h"
#include "sim_backend.h"

#define GPUMEM_API extern "C" __attribute__((visibility("default")))

namespace gpumem::core {
namespace {

struct Config {
  std::string backend = "cuda";
  uint64_t sim_capacity = 16ull << 30;
  int sim_devices = 1;
  // Note [Default segment strategy]: expandable with trim on growth. GPT-2 small, sequence lengths
  // 128…1024 at 8192 tokens per batch, H200 (test/gpu/bench_allocator.py): peak reserved / peak
  // allocated ×1.459 fixed (the same bytes as PyTorch's default), ×1.115 expandable (the same as
  // PyTorch's expandable_segments), ×1.036 expandable + trim. A trim moves same-stream pages without
  // waiting for the GPU (Note [Page moves]); Note [Futile trims] bounds how often trims run.
  bool expandable = true;
  bool trim_on_growth = true;  // Note [Trim on growth] in device_allocator.h
};

struct Global {
  std::mutex mu;  // creation and configuration only; the hot path reads `ready` and `devices`
  std::atomic<bool> ready{false};
  Config config;
  std::unique_ptr<Backend> backend;
  std::vector<std::unique_ptr<DeviceAllocator>> devices;
};

// Never destroyed: tensors may be freed by other threads or atexit handlers after static
// destructors would have run.
Global& global() {
  static Global* g = new Global;
  return *g;
}

void ensure_ready() {
  Global& g = global();
  if (g.ready.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.ready.load(std::memory_order_relaxed)) return;
  std::unique_ptr<Backend> backend;
  if (g.config.backend == "sim")
    backend = std::make_unique<SimBackend>(g.config.sim_devices, g.config.sim_capacity);
  else
    backend = make_cuda_backend();
  Options options;
  options.expandable = g.config.expandable;
  options.trim_on_growth = g.config.trim_on_growth;
  for (int d = 0; d < backend->device_count(); d++)
    g.devices.push_back(std::make_unique<DeviceAllocator>(d, *backend, options));
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

// Devices selected by `device` (-1 = all); empty before the allocator exists.
std::vector<DeviceAllocator*> selected(int device) {
  std::vector<DeviceAllocator*> out;
  Global& g = global();
  if (!g.ready.load(std::memory_order_acquire)) return out;
  for (auto& d : g.devices)
    if (device < 0 || d->device() == device) out.push_back(d.get());
  return out;
}

bool apply_config(const json::Value& v, std::string* err) {
  Global& g = global();
  Config c = g.config;
  bool touched = false;
  if (const json::Value* b = v.find("backend")) {
    if (!b->is_string() || (b->as_string() != "cuda" && b->as_string() != "sim")) {
      *err = "\"backend\" must be \"cuda\" or \"sim\"";
      return false;
    }
    c.backend = b->as_string();
    touched = true;
  }
  if (const json::Value* s = v.find("sim_capacity")) {
    if (!s->is_int() || s->as_int() <= 0) {
      *err = "\"sim_capacity\" must be a positive integer number of bytes";
      return false;
    }
    c.sim_capacity = uint64_t(s->as_int());
    touched = true;
  }
  if (const json::Value* s = v.find("sim_devices")) {
    if (!s->is_int() || s->as_int() < 1 || s->as_int() > 64) {
      *err = "\"sim_devices\" must be an integer from 1 to 64";
      return false;
    }
    c.sim_devices = int(s->as_int());
    touched = true;
  }
  if (const json::Value* s = v.find("segments")) {
    if (!s->is_string() || (s->as_string() != "expandable" && s->as_string() != "fixed")) {
      *err = "\"segments\" must be \"expandable\" or \"fixed\"";
      return false;
    }
    c.expandable = s->as_string() == "expandable";
    touched = true;
  }
  if (const json::Value* s = v.find("trim_on_growth")) {
    if (!s->is_bool()) {
      *err = "\"trim_on_growth\" must be true or false";
      return false;
    }
    c.trim_on_growth = s->as_bool();
    touched = true;
  }
  if (!touched) return true;
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.ready.load()) {
    *err = "\"backend\", \"sim_*\", \"segments\" and \"trim_on_growth\" must be configured before the first allocation "
           "(install the allocator before any CUDA tensor exists)";
    return false;
  }
  g.config = c;
  return true;
}

}  // namespace

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
  } catch (const std::exception& e) {
    rec::set_last_error(e.what());
    return false;
  }
}

}  // namespace gpumem::core

using namespace gpumem;
using namespace gpumem::core;

// ---- PyTorch hooks -------------------------------------------------------------------------------

GPUMEM_API void* gpumem_malloc(size_t size, int device, void* stream) {
  // Before any allocator lock: it may take the GIL (Note [Lock order] in device_allocator.h).
  const uint32_t stack = rec::capture_stack();
  try {
    return device_allocator(device).malloc(size, reinterpret_cast<Stream>(stream), stack);
  } catch (const OutOfMemory&) {
    throw;
  } catch (const std::exception& e) {
    // Driver and configuration failures must reach Python as RuntimeError with the reason; never NULL.
    throw std::runtime_error(std::string("gpumem: allocation failed: ") + e.what());
  }
}

// Note [Unknown frees]: PyTorch only frees pointers it got from us (its wrapper rejects others), so a
// pointer no device knows means our state and PyTorch's disagree. Throwing from a deleter would
// terminate the process; we leave the memory alone and record why in gpumem_last_error().
GPUMEM_API void gpumem_free(void* ptr, size_t, int device, void*) {
  try {
    if (device_allocator(device).free(ptr)) return;
    for (DeviceAllocator* d : selected(-1))  // a caller may name the wrong device; the pointer decides
      if (d->device() != device && d->free(ptr)) return;
    rec::set_last_error("gpumem_free: pointer " + std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                   " was not allocated by the lens allocator; ignored");
  } catch (const std::exception& e) {
    rec::set_last_error(std::string("gpumem_free: ") + e.what());
  }
}

GPUMEM_API void gpumem_init(int device_count) {
  try {
    ensure_ready();
  } catch (const std::exception& e) {
    rec::set_last_error(e.what());
    throw std::runtime_error(std::string("gpumem: cannot start the allocator: ") + e.what());
  }
  rec::on_init(device_count);
}

GPUMEM_API void gpumem_reset(void) {
  try {
    empty_cache(-1, nullptr, nullptr, 0);
  } catch (const std::exception& e) {
    rec::set_last_error(e.what());
    throw std::runtime_error(std::string("gpumem: empty_cache failed: ") + e.what());
  }
}

GPUMEM_API void gpumem_memory_fraction(double fraction, int device) {
  if (!(fraction >= 0.0 && fraction <= 1.0))
    throw std::runtime_error("gpumem: memory fraction must be within [0, 1], got " + std::to_string(fraction));
  device_allocator(device).set_memory_fraction(fraction);
}

GPUMEM_API void gpumem_record_stream(void* ptr, void* stream) {
  for (DeviceAllocator* d : selected(-1)) {
    if (d->owns(ptr)) {
      d->record_stream(ptr, reinterpret_cast<Stream>(stream));
      return;
    }
  }
}

GPUMEM_API void* gpumem_base_alloc(void* ptr, size_t* size) {
  for (DeviceAllocator* d : selected(-1))
    if (d->owns(ptr)) return d->base_allocation(ptr, size);
  return ptr;
}

GPUMEM_API void gpumem_begin_allocate_to_pool(int device, std::pair<unsigned long long, unsigned long long> pool,
                                              std::function<bool(CUstream_st*)> filter) {
  device_allocator(device).begin_allocate_to_pool(
      PoolId{pool.first, pool.second},
      [f = std::move(filter)](Stream s) { return f(reinterpret_cast<CUstream_st*>(s)); });
}

GPUMEM_API void gpumem_end_allocate_to_pool(int device, std::pair<unsigned long long, unsigned long long> pool) {
  device_allocator(device).end_allocate_to_pool(PoolId{pool.first, pool.second});
}

GPUMEM_API void gpumem_release_pool(int device, std::pair<unsigned long long, unsigned long long> pool) {
  device_allocator(device).release_pool(PoolId{pool.first, pool.second});
}

// ---- Configuration, stats, actions ------------------------------------------------------------------

GPUMEM_API int gpumem_configure(const char* text) {
  if (!text) {
    rec::set_last_error("gpumem_configure: NULL configuration");
    return -1;
  }
  json::Value v;
  std::string err;
  if (!json::Parser::parse(text, &v, &err)) {
    rec::set_last_error("gpumem_configure: invalid JSON: " + err);
    return -1;
  }
  if (!v.is_object()) {
    rec::set_last_error("gpumem_configure: the configuration must be a JSON object");
    return -1;
  }
  if (!apply_config(v, &err) || !rec::configure(text, &err)) {
    rec::set_last_error("gpumem_configure: " + err);
    return -1;
  }
  return 0;
}

GPUMEM_API const char* gpumem_last_error(void) { return rec::last_error(); }

GPUMEM_API const char* gpumem_version(void) { return "0.1.0"; }

GPUMEM_API size_t gpumem_stats_json(int device, char* buf, size_t cap) {
  std::string s;
  try {
    s = device_allocator(device).stats().to_json();
  } catch (const std::exception& e) {
    rec::set_last_error(e.what());
    s = DeviceStats().to_json();  // an unknown device reports zeros rather than garbage
  }
  if (buf && cap > s.size()) std::memcpy(buf, s.c_str(), s.size() + 1);
  return s.size();
}

GPUMEM_API uint64_t gpumem_allocated(int device) { return figures(device).allocated; }
GPUMEM_API uint64_t gpumem_reserved(int device) { return figures(device).reserved; }

GPUMEM_API void gpumem_reset_peak_stats(int device) {
  for (DeviceAllocator* d : selected(device)) d->reset_peak_stats();
}
GPUMEM_API void gpumem_reset_accumulated_stats(int device) {
  for (DeviceAllocator* d : selected(device)) d->reset_accumulated_stats();
}

GPUMEM_API int gpumem_empty_cache(int device, uint64_t* reserved_before, uint64_t* reserved_after, int origin) {
  try {
    empty_cache(device, reserved_before, reserved_after, origin);
    return 0;
  } catch (const std::exception& e) {
    rec::set_last_error(std::string("gpumem_empty_cache: ") + e.what());
    return -1;
  }
}
