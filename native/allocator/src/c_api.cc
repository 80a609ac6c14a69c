// c_api.cc — the C API of libgpumem_allocator.so (include/gpumem_allocator.h), gpumem_last_error, and
// the composition of the library: the allocator core (allocator.h) with the recorder attached as its
// event sink, and the control channel served with control_commands.h's handler. Nothing else calls
// both the core and the recorder.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../format/gpumem_format.h"
#include "../include/gpumem_allocator.h"
#include "allocator.h"
#include "backward_links.h"
#include "control_commands.h"
#include "device_sampler.h"
#include "module_marks.h"
#include "observer.h"
#include "recorder.h"
#include "self_time.h"
#include "sequencer.h"
#include "snapshot_pickle.h"
#include "stack_capture.h"
#include "version.h"
#include "writer.h"

// The library is built with hidden visibility; only the C API is exported.
#define GPUMEM_API extern "C" __attribute__((visibility("default")))

using namespace gpumem;
using namespace gpumem::core;

namespace {

// gpumem_last_error: per thread, set by whichever C API call failed last on this thread.
thread_local std::string t_error;
void set_last_error(const std::string& msg) { t_error = msg; }

// Note [Composition root]: the recorder is attached as the core's sink when the library is loaded,
// before any C API call can create the devices (which keep the sink they were built with). A test
// that links these sources may attach its own sink before its first allocation instead.
[[maybe_unused]] const bool g_recorder_attached = core::set_event_sink(rec::sink());

}  // namespace

// ---- PyTorch hooks -------------------------------------------------------------------------------

// Note [Zero-byte tensors]: PyTorch's own allocator never allocates for a zero-byte storage (torch.empty(0) has data
// pointer 0 and memory_allocated() does not move), while a pluggable allocator is asked for 0 bytes. We answer as
// PyTorch's allocator would: a null pointer, no block, no event, and the free of a null pointer is nothing. PyTorch's
// pluggable wrapper frees tensors through a deleter context holding our pointer, so a shared null pointer is never
// looked up; its raw-pointer map only meets null for a raw_alloc(0), which a raw_delete(null) undoes. (The core
// itself still gives a zero-byte request a unique 512 B block: Note [Zero-byte requests] in device_allocator.cc.)
GPUMEM_API void* gpumem_malloc(size_t size, int device, void* stream) {
  if (size == 0) return nullptr;
  rec::self_time::Scope timed(rec::self_time::kMalloc);
  // Before any allocator lock: it may take the GIL (Note [Lock hierarchy] in README.md).
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
  if (!ptr) return;  // Note [Zero-byte tensors]
  rec::self_time::Scope timed(rec::self_time::kFree);
  try {
    if (device_allocator(device).free(ptr)) return;
    for (DeviceAllocator* d : selected(-1))  // a caller may name the wrong device; the pointer decides
      if (d->device() != device && d->free(ptr)) return;
    set_last_error("gpumem_free: pointer " + std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                   " was not allocated by the lens allocator; ignored");
  } catch (const std::exception& e) {
    set_last_error(std::string("gpumem_free: ") + e.what());
  }
}

GPUMEM_API void gpumem_init(int device_count) {
  try {
    ensure_ready();
  } catch (const std::exception& e) {
    set_last_error(e.what());
    throw std::runtime_error(std::string("gpumem: cannot start the allocator: ") + e.what());
  }
  rec::on_init(device_count);
}

GPUMEM_API void gpumem_reset(void) {
  try {
    empty_cache(-1, nullptr, nullptr, 0);
  } catch (const std::exception& e) {
    set_last_error(e.what());
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
  device_allocator(device).begin_allocate_to_pool(PoolId{pool.first, pool.second}, [f = std::move(filter)](Stream s) {
    return f(reinterpret_cast<CUstream_st*>(s));
  });
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
    set_last_error("gpumem_configure: NULL configuration");
    return -1;
  }
  json::Value v;
  std::string err;
  if (!json::Parser::parse(text, &v, &err)) {
    set_last_error("gpumem_configure: invalid JSON: " + err);
    return -1;
  }
  if (!v.is_object()) {
    set_last_error("gpumem_configure: the configuration must be a JSON object");
    return -1;
  }
  if (!core::configure(v, &err) || !rec::configure(text, rec::control::handle_line, &err)) {
    set_last_error("gpumem_configure: " + err);
    return -1;
  }
  return 0;
}

GPUMEM_API const char* gpumem_last_error(void) { return t_error.c_str(); }

GPUMEM_API const char* gpumem_version(void) { return kVersion; }

GPUMEM_API size_t gpumem_stats_json(int device, char* buf, size_t cap) {
  std::string s;
  try {
    s = device_allocator(device).stats().to_json();
  } catch (const std::exception& e) {
    set_last_error(e.what());
    s = DeviceStats().to_json();  // an unknown device reports zeros rather than garbage
  }
  if (buf && cap > s.size()) std::memcpy(buf, s.c_str(), s.size() + 1);
  return s.size();
}

GPUMEM_API uint64_t gpumem_allocated(int device) { return figures(device).allocated; }
GPUMEM_API uint64_t gpumem_reserved(int device) { return figures(device).reserved; }
GPUMEM_API uint64_t gpumem_requested(int device) { return figures(device).requested; }

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
    set_last_error(std::string("gpumem_empty_cache: ") + e.what());
    return -1;
  }
}

// ---- Snapshots, markers, notices, stacks, shutdown ------------------------------------------------

GPUMEM_API int64_t gpumem_snapshot(const char* pickle_path) {
  std::string err;
  int64_t off = rec::take_snapshot(pickle_path, &err);
  if (off < 0) set_last_error(err);
  return off;
}

GPUMEM_API int gpumem_snapshot_pickle(uint8_t** out, size_t* out_len) {
  if (!out || !out_len) {
    set_last_error("gpumem_snapshot_pickle: out and out_len must not be NULL");
    return -1;
  }
  rec::snap::on_snapshot(rec::now_ns());
  std::string bytes = rec::snap::build();
  auto* p = static_cast<uint8_t*>(std::malloc(bytes.size()));
  if (!p) {
    set_last_error("gpumem_snapshot_pickle: out of host memory for " + std::to_string(bytes.size()) + " bytes");
    return -1;
  }
  std::memcpy(p, bytes.data(), bytes.size());
  *out = p;
  *out_len = bytes.size();
  return 0;
}

GPUMEM_API void gpumem_free_buffer(void* p) { std::free(p); }

GPUMEM_API int gpumem_mark(const char* name, uint32_t kind) {
  if (!name || kind > fmt::MARK_MODULE_END) {
    set_last_error("gpumem_mark: name must not be NULL and kind must be 0–7 (MarkerKind)");
    return -1;
  }
  rec::mark(name, kind);
  return 0;
}

// gpumem_tag's and gpumem_tags's rule for one tag; false (and the error, naming `fn` and the batch's item when
// item >= 0) if it is broken. The message is built only then: a batch checks every item of every step.
static bool tag_ok(uint64_t category, int64_t device, const char* fn, int64_t item = -1) {
  if (category >= fmt::TAG_PARAMETER && category <= fmt::TAG_BUFFER && device >= 0 && device <= 255) return true;
  set_last_error(std::string(fn) + (item >= 0 ? ": item " + std::to_string(item) : std::string()) +
                 ": category must be 1 (parameter), 2 (gradient), 3 (optimizer state) or 4 (buffer) and device 0–255");
  return false;
}

GPUMEM_API int gpumem_tag(uint64_t addr, uint64_t size, uint32_t category, const char* name, int device) {
  if (!tag_ok(category, device, "gpumem_tag")) return -1;
  rec::tag(addr, size, category, name, device);
  return 0;
}

GPUMEM_API int gpumem_tags(const uint64_t* items, uint32_t count) {
  if (count && !items) {
    set_last_error("gpumem_tags: items must not be NULL when count > 0");
    return -1;
  }
  for (uint32_t i = 0; i < count; i++)  // all or nothing: a bad item writes no tag at all
    if (!tag_ok(items[4 * size_t(i) + 2], int64_t(std::min<uint64_t>(items[4 * size_t(i) + 3], 256)), "gpumem_tags", i))
      return -1;
  for (uint32_t i = 0; i < count; i++) {
    const uint64_t* it = items + 4 * size_t(i);
    rec::tag(it[0], it[1], uint32_t(it[2]), nullptr, int(it[3]));
  }
  return 0;
}

GPUMEM_API int gpumem_user_metadata(const char* text) {
  if (!text) {
    set_last_error("gpumem_user_metadata: text must not be NULL (\"\" clears the label)");
    return -1;
  }
  return rec::user_metadata(text) ? 1 : 0;
}

GPUMEM_API int gpumem_notice(const char* text, uint32_t level) {
  if (!text || level > 2) {
    set_last_error("gpumem_notice: text must not be NULL and level must be 0 (info), 1 (warning) or 2 (error)");
    return -1;
  }
  rec::notice(text, level);
  return 0;
}

GPUMEM_API size_t gpumem_stack_info(char* buf, size_t cap) {
  std::string j = rec::stacks::info_json();
  // Note [Self time] (self_time.h): where the recording's host time went, when GPUMEM_SELF_TIME=1.
  j.insert(j.size() - 1, ",\"self_time\":" + rec::self_time::json());
  // Note [Backward on the forward line] (backward_links.h): nodes met in backward and linked; steps learned and known.
  j.insert(j.size() - 1, ",\"backward_links\":" + rec::links::json());
  if (buf && cap) {
    size_t n = std::min(cap - 1, j.size());
    std::memcpy(buf, j.data(), n);
    buf[n] = 0;
  }
  return j.size();
}

GPUMEM_API void gpumem_backward_begin(void) {
  rec::modules::close_all();  // no forward runs while autograd's threads allocate (module_marks.h)
  // After the recorded steps (Note [Recorded steps]) and under figures only no entry will take this stack: no walk.
  rec::stacks::backward_begin(rec::recording() && rec::observer::entries_expected());
  rec::links::backward_begins();  // Note [Learned steps], Note [Forward callback off in backward]
}

// ---- Module paths from frames (Note [Module paths from frames] in src/module_marks.h) ---------------

GPUMEM_API int gpumem_modules_calibrate(const void* expected) {
  std::string why;
  if (rec::stacks::calibrate_first_local(expected, &why)) return 1;
  set_last_error("gpumem_modules_calibrate: " + why);
  return 0;
}

GPUMEM_API void gpumem_modules_enable(int (*resolve)(const void* const*, int)) { rec::modules::enable(resolve); }

GPUMEM_API void gpumem_modules_learn(const void* self, const char* path) { rec::modules::learn(self, path); }

GPUMEM_API void gpumem_modules_forget(const void* self) { rec::modules::forget(self); }
GPUMEM_API void gpumem_backward_end(void) {
  rec::stacks::backward_end();
  rec::links::backward_ends();
}

// ---- Backward on the forward line (Note [Backward on the forward line] in src/backward_links.h) -------------
// Called by the observer extension: its PyTorch functions once, then its op callback on forward threads.

GPUMEM_API void gpumem_links_connect(uint64_t (*next_sequence)(void), uint64_t (*thread_id)(void),
                                     void (*op_callback)(int),
                                     int (*current_node)(uint64_t* seq, uint64_t* thread, const char** name)) {
  rec::links::connect(next_sequence, thread_id, op_callback, current_node);
}

GPUMEM_API void gpumem_op_end(void) {
  if (rec::recording() && rec::observer::entries_expected()) rec::links::op_end();
}

GPUMEM_API void gpumem_shutdown(int exit_code) { rec::shutdown(exit_code); }

// ---- Observer mode: PyTorch's own allocator, observed (Note [Observer] in src/observer.h) -----------

GPUMEM_API int gpumem_observe_start(int (*empty_cache_fn)(uint64_t*, uint64_t*),
                                    int64_t (*state_fn)(int, uint32_t, const char*)) {
  rec::observer::Host h;
  h.empty_cache = empty_cache_fn;
  h.state = state_fn;
  rec::observer::start(h);
  return 0;
}

GPUMEM_API int gpumem_observe_event(int device, int action, uint64_t addr, uint64_t size, uint64_t stream,
                                    uint32_t stack, uint64_t t_ns) {
  rec::self_time::Scope timed(rec::self_time::kObserve);
  return rec::observer::on_event(device, action, addr, size, stream, stack, t_ns) ? 1 : 0;
}

// Note [Probe switches]: a probe of what the recording costs a step (test/gpu/probes/observer_parts.py) switches parts
// off and on inside one running workload, because two processes of one configuration differ by more than the parts
// on the lent hosts. Not settings: nothing of the product sets them, and a capture taken while one is on is not
// complete. "observe_hold" 1: the tracker's entries and the context recorder's calls return at once (the
// PyTorch-allocator mode's whole per-event path off; PyTorch still builds the entries); "stacks" 0: no stack is
// walked anywhere (stacks::set_enabled, as --no-stacks at start; the entries still queued); "drain_ms" and
// "drain_wake": the observer thread's cadence (sequencer::set_cadence); "flush_ms": the writer's.
namespace {
std::atomic<bool> g_observe_hold{false};
// The tracker's entry points return at once: a probe holds them, or the recorded steps are over (Note [Recorded
// steps] in observer.h).
bool observe_quiet() { return g_observe_hold.load(std::memory_order_relaxed) || rec::observer::events_are_off(); }
}  // namespace

GPUMEM_API int gpumem_probe_set(const char* name, int64_t value) {
  const std::string n = name ? name : "";
  if (n == "observe_hold") {
    g_observe_hold.store(value != 0);
  } else if (n == "drain_ms" || n == "drain_wake") {
    const uint32_t v = uint32_t(std::max<int64_t>(1, std::min<int64_t>(value, 1 << 20)));
    rec::sequencer::set_cadence(n == "drain_ms" ? v : 0, n == "drain_wake" ? v : 0);
  } else if (n == "stacks") {
    rec::stacks::set_enabled(value != 0);
  } else if (n == "flush_ms") {
    rec::writer::set_flush_interval_ms(uint32_t(std::max<int64_t>(1, std::min<int64_t>(value, 10000))));
  } else {
    set_last_error("gpumem_probe_set: unknown switch '" + n +
                   "' (observe_hold, stacks, drain_ms, drain_wake, flush_ms)");
    return -1;
  }
  return 0;
}

GPUMEM_API int gpumem_observe_event_queued(int device, int action, uint64_t addr, uint64_t size, uint64_t stream,
                                           uint32_t stack, uint64_t t_ns) {
  if (observe_quiet()) return 1;
  rec::self_time::Scope timed(rec::self_time::kObserve);
  return rec::observer::queue_event(device, action, addr, size, stream, stack, t_ns) ? 1 : 0;
}

// Note [Recorded steps] (observer.h): the live tracker's entries stop being recorded, for good; `why` names the
// setting in the marker. 0, or -1 with NULL.
GPUMEM_API int gpumem_observe_events_off(const char* why) {
  if (!why) {
    set_last_error("gpumem_observe_events_off: why must not be NULL");
    return -1;
  }
  rec::observer::events_off(why);
  return 0;
}

// Note [Figures only] (native/python/gpumem/_observe.py): the stats source has no event to order (observer.h).
GPUMEM_API void gpumem_observe_unqueued(void) { rec::observer::unqueued(); }

GPUMEM_API void gpumem_observe_figures(int device, uint64_t allocated, uint64_t reserved, uint64_t peak_allocated,
                                       uint64_t peak_reserved, uint64_t num_ooms) {
  rec::observer::set_figures(device, allocated, reserved, peak_allocated, peak_reserved, num_ooms);
}

// Note [Figures on the sampler's thread] (src/observer.h): taken only where the sampler runs, since nothing else
// would call it (the host then polls, as before).
GPUMEM_API int gpumem_observe_rounding(const char* settings_json) {
  if (!settings_json || !rec::observer::set_rounding(settings_json)) {
    set_last_error("gpumem_observe_rounding: settings_json must be the JSON object of PyTorch's allocator_settings");
    return -1;
  }
  return 0;
}

GPUMEM_API int gpumem_observe_figures_reader(int (*read)(int device, int64_t* out)) {
  if (read != nullptr && !rec::sampler::running()) {
    set_last_error("gpumem_observe_figures_reader: the sampler does not run (sample_interval_ms 0 or no capture)");
    return -1;
  }
  rec::observer::set_figures_reader(read);
  return 0;
}

GPUMEM_API uint32_t gpumem_observe_gather(void) {
  if (observe_quiet()) return 0;
  rec::self_time::Scope timed(rec::self_time::kGather);
  return rec::recording() ? rec::observer::gather() : 0;
}

GPUMEM_API uint32_t gpumem_observe_take_stack(int action) {
  if (observe_quiet()) return 0;
  return rec::recording() ? rec::observer::take_stack(action) : 0;
}

GPUMEM_API uint32_t gpumem_observe_frames(const char* frames_json, uint32_t flags) {
  json::Value v;
  std::string err;
  if (!frames_json || !json::parse(frames_json, &v, &err) || !v.is_array()) {
    set_last_error("gpumem_observe_frames: expected a JSON array of [file, function, line], innermost first");
    return 0;
  }
  std::vector<rec::stacks::FrameInfo> frames;
  for (const json::Value& f : v.items()) {
    if (!f.is_array() || f.items().size() != 3 || !f.items()[0].is_string() || !f.items()[1].is_string()) {
      set_last_error("gpumem_observe_frames: each frame must be [file, function, line]");
      return 0;
    }
    int64_t line = f.items()[2].is_number() ? f.items()[2].as_int() : 0;
    frames.push_back({f.items()[0].as_string(), f.items()[1].as_string(), uint32_t(line < 0 ? 0 : line)});
  }
  return rec::stacks::intern_frames(frames, flags);
}

GPUMEM_API int64_t gpumem_observe_state(int device, uint32_t reason, const char* segments_json) {
  std::string err;
  int64_t off = rec::observer::write_state_json(device, reason, segments_json ? segments_json : "", &err);
  if (off < 0) set_last_error("gpumem_observe_state: " + err);
  return off;
}

GPUMEM_API int gpumem_observe_device(int device, const char* name, uint64_t total_bytes, const char* pci_bus_id) {
  if (device < 0 || device > 255) {
    set_last_error("gpumem_observe_device: device must be 0–255");
    return -1;
  }
  rec::observer::note_device(device);
  rec::announce_device(device, name ? name : "", total_bytes, pci_bus_id ? pci_bus_id : "");
  return 0;
}

GPUMEM_API size_t gpumem_observe_info(char* buf, size_t cap) {
  core::Figures f = rec::observer::figures(-1);
  std::string j = "{\"active\":" + std::string(rec::observer::active() ? "true" : "false") +
                  ",\"devices\":" + std::to_string(rec::observer::device_count()) +
                  ",\"allocated\":" + std::to_string(f.allocated) + ",\"reserved\":" + std::to_string(f.reserved) +
                  ",\"peak_allocated\":" + std::to_string(f.peak_allocated) +
                  ",\"dropped_frees\":" + std::to_string(rec::observer::dropped_frees());
  // Note [Deferred observation]: how the queue kept up (full_drains: batches the allocating thread applied itself)
  const rec::sequencer::Counters q = rec::sequencer::counters();
  j += ",\"queue\":{\"running\":" + std::string(rec::sequencer::running() ? "true" : "false") +
       ",\"events\":" + std::to_string(q.events) + ",\"records\":" + std::to_string(q.records) +
       ",\"drains\":" + std::to_string(q.drains) + ",\"full_drains\":" + std::to_string(q.full_drains) +
       ",\"max_depth\":" + std::to_string(q.max_depth) + ",\"folded\":" + std::to_string(q.folded) + "}}";
  if (buf && cap) {
    size_t n = std::min(cap - 1, j.size());
    std::memcpy(buf, j.data(), n);
    buf[n] = 0;
  }
  return j.size();
}
