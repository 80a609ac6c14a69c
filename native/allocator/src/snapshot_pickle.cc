// snapshot_pickle.cc — see snapshot_pickle.h. The dict's schema (key names and orders, action and state
// words, default settings) is native/format/torch_snapshot.h's (Note [One snapshot schema]); this file
// decides the values: the live segments, the trace rings and the annotations.
#include "snapshot_pickle.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "../../format/gpumem_format.h"
#include "../../format/pickle_emit.h"
#include "../../format/torch_snapshot.h"
#include "allocator_api.h"
#include "stack_capture.h"

namespace gpumem::rec::snap {
namespace {

namespace ts = fmt::torch;
using Action = ts::Action;

struct Entry {
  uint64_t t_ns, addr, size, stream;
  uint32_t stack;
  uint32_t label;  // index in State::labels (0: none)
  Action action;
};

struct Ring {
  std::vector<Entry> slots;  // grows to capacity, then wraps
  size_t next = 0;           // where the next entry goes once full
  void add(const Entry& e, size_t cap) {
    if (cap == 0) return;
    if (slots.size() < cap) {
      slots.push_back(e);
      return;
    }
    slots[next] = e;
    next = (next + 1) % cap;
  }
  std::vector<Entry> ordered() const {
    std::vector<Entry> out;
    out.reserve(slots.size());
    for (size_t i = 0; i < slots.size(); i++) out.push_back(slots[(next + i) % slots.size()]);
    return out;
  }
};

struct Annotation {
  bool begin;
  std::string name;
  int device;
  uint64_t t_ns;
};

struct State {
  std::mutex mu;  // Note [Lock hierarchy] (README.md): "snapshot ring", taken under the device lock
  Settings settings;
  std::vector<Ring> rings;  // index = device
  std::vector<Annotation> annotations;
  size_t annotations_next = 0;
  // Memory labels (_set_memory_metadata): each distinct text once, and each thread's current one.
  std::vector<std::string> labels{""};
  std::unordered_map<std::string, uint32_t> label_ids{{"", 0}};
  std::unordered_map<uint32_t, uint32_t> thread_label;  // BlockEvent.thread → label index
};
State& S() {
  static State* s = new State();
  return *s;
}

uint64_t to_us(const Settings& s, uint64_t t_ns) {
  int64_t delta = int64_t(t_ns - s.mono_anchor_ns);
  return uint64_t((int64_t(s.wall_anchor_ns) + delta) / 1000);
}

// A stack's frame list, pickled once per stack id per snapshot (Note [Memo-free] in pickle_emit.h).
class FrameLists {
 public:
  const std::string& get(uint32_t stack) {
    auto it = cache_.find(stack);
    if (it != cache_.end()) return it->second;
    fmt::PickleEmitter p(256);
    p.begin_list();
    for (auto& f : stacks::frames_of(stack)) ts::emit_frame(p, f.function, f.file, f.line);
    p.end_list();
    return cache_.emplace(stack, p.take()).first->second;
  }

 private:
  std::unordered_map<uint32_t, std::string> cache_;
};

void emit_segments(fmt::PickleEmitter& p, FrameLists& frames) {
  p.begin_list();
  for (auto& seg : core::snapshot_segments(-1)) {
    uint64_t allocated = 0, active = 0, requested = 0;
    for (auto& b : seg.blocks) {
      if (b.state == fmt::BLOCK_ACTIVE_ALLOCATED) {
        allocated += b.size;
        requested += b.requested;
      }
      if (b.state != fmt::BLOCK_INACTIVE) active += b.size;
    }
    ts::begin_segment(
        p, {seg.device, seg.addr, seg.size, allocated, active, requested, seg.stream,
            (seg.flags & fmt::kPoolSmall) != 0, seg.pool0, seg.pool1, (seg.flags & fmt::kSegExpandable) != 0});
    p.raw(frames.get(seg.stack));
    ts::begin_blocks(p);
    for (auto& b : seg.blocks) {
      ts::begin_block(p, b.addr, b.size, b.requested, b.state);
      // Like PyTorch, a free block shows no frames (its last owner's context is dropped on free).
      p.raw(frames.get(b.state == fmt::BLOCK_INACTIVE ? 0 : b.stack));
      ts::end_block(p);
    }
    ts::end_segment(p);
  }
  p.end_list();
}

void emit_settings(fmt::PickleEmitter& p, const Settings& s) {
  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  ts::emit_allocator_settings(p, conf ? conf : "", s.expandable_segments);
}

}  // namespace

// Whether the ring keeps entries, read without the lock: the PyTorch-allocator mode runs with no ring
// (trace_entries 0) and must not pay a lock per event for it (Note [Self time]).
std::atomic<bool> g_ring_on{Settings{}.trace_entries > 0};

void configure(const Settings& s) {
  std::lock_guard<std::mutex> lk(S().mu);
  S().settings = s;
  g_ring_on.store(s.trace_entries > 0, std::memory_order_relaxed);
}

void on_event(uint8_t type, uint8_t device, const void* payload, uint32_t bytes) {
  if (!g_ring_on.load(std::memory_order_relaxed)) return;
  Entry e{};
  uint32_t thread = UINT32_MAX;  // a block event's thread: its label is looked up under the mutex
  switch (type) {
    case fmt::REC_ALLOC:
    case fmt::REC_FREE_REQUESTED:
    case fmt::REC_FREE_COMPLETED: {
      if (bytes < sizeof(fmt::BlockEvent)) return;
      fmt::BlockEvent b;
      std::memcpy(&b, payload, sizeof b);
      e = Entry{b.t_ns, b.addr, b.size, b.stream, b.stack, 0, Action(uint8_t(Action::alloc) + (type - fmt::REC_ALLOC))};
      thread = b.thread;
      break;
    }
    case fmt::REC_SEGMENT_ALLOC:
    case fmt::REC_SEGMENT_FREE:
    case fmt::REC_SEGMENT_MAP:
    case fmt::REC_SEGMENT_UNMAP: {
      if (bytes < sizeof(fmt::SegmentEvent)) return;
      fmt::SegmentEvent s;
      std::memcpy(&s, payload, sizeof s);
      e = Entry{s.t_ns,
                s.addr,
                s.size,
                s.stream,
                s.stack,
                0,
                Action(uint8_t(Action::segment_alloc) + (type - fmt::REC_SEGMENT_ALLOC))};
      break;
    }
    case fmt::REC_OOM: {
      if (bytes < sizeof(fmt::OomRec)) return;
      fmt::OomRec o;
      std::memcpy(&o, payload, sizeof o);
      // PyTorch's oom entry: addr = the device's free bytes, size = the request.
      e = Entry{o.t_ns, o.device_free, o.requested, o.stream, o.stack, 0, Action::oom};
      break;
    }
    default: return;
  }
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.settings.trace_entries == 0) return;
  if (thread != UINT32_MAX && !s.thread_label.empty()) {
    auto it = s.thread_label.find(thread);
    if (it != s.thread_label.end()) e.label = it->second;
  }
  if (s.rings.size() <= device) s.rings.resize(size_t(device) + 1);
  s.rings[device].add(e, s.settings.trace_entries);
}

void on_user_metadata(uint32_t thread, const std::string& text) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.label_ids.find(text);
  if (it == s.label_ids.end()) {
    it = s.label_ids.emplace(text, uint32_t(s.labels.size())).first;
    s.labels.push_back(text);
  }
  if (it->second)
    s.thread_label[thread] = it->second;
  else
    s.thread_label.erase(thread);
}

void on_annotation(bool begin, const std::string& name, int device, uint64_t t_ns) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  size_t cap = s.settings.trace_entries;
  if (cap == 0) return;
  Annotation a{begin, name, device, t_ns};
  if (s.annotations.size() < cap) {
    s.annotations.push_back(std::move(a));
  } else {
    s.annotations[s.annotations_next] = std::move(a);
    s.annotations_next = (s.annotations_next + 1) % cap;
  }
}

void on_snapshot(uint64_t t_ns) {
  // Figures first: core::figures takes the device lock, which may not be taken under our mutex
  // (Note [Lock hierarchy]).
  std::vector<uint64_t> active;
  for (int d = 0; d < core::device_count(); d++) active.push_back(core::figures(d).active);
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.rings.size() < active.size()) s.rings.resize(active.size());
  // PyTorch's 'snapshot' entry: addr 0, size = the device's active bytes, no frames key.
  for (size_t d = 0; d < s.rings.size(); d++)
    s.rings[d].add(Entry{t_ns, 0, d < active.size() ? active[d] : 0, 0, 0, 0, Action::snapshot},
                   s.settings.trace_entries);
}

std::string build() {
  Settings settings;
  std::vector<std::vector<Entry>> traces;
  std::vector<Annotation> annotations;
  std::vector<std::string> labels;
  {
    State& s = S();
    std::lock_guard<std::mutex> lk(s.mu);
    settings = s.settings;
    labels = s.labels;
    for (auto& r : s.rings) traces.push_back(r.ordered());
    size_t n = s.annotations.size();
    for (size_t i = 0; i < n; i++) annotations.push_back(s.annotations[(s.annotations_next + i) % n]);
  }
  size_t ndev = std::max<size_t>(traces.size(), size_t(std::max(core::device_count(), 0)));
  traces.resize(ndev);

  FrameLists frames;
  fmt::PickleEmitter p(1 << 20);
  p.begin();
  p.begin_dict();
  p.key(ts::kSegments);
  emit_segments(p, frames);
  p.key(ts::kDeviceTraces);
  p.begin_list();
  for (auto& dev : traces) {
    p.begin_list();
    for (auto& e : dev) {
      ts::begin_trace_entry(p, e.action, e.addr, e.size, e.stream, int64_t(to_us(settings, e.t_ns)), "N/A",
                            e.label < labels.size() ? std::string_view(labels[e.label]) : std::string_view());
      if (ts::trace_entry_has_frames(e.action)) p.raw(frames.get(e.stack));
      ts::end_trace_entry(p);
    }
    p.end_list();
  }
  p.end_list();
  p.key(ts::kAllocatorSettings);
  emit_settings(p, settings);
  p.key(ts::kExternalAnnotations);
  p.begin_list();
  for (auto& a : annotations) ts::emit_annotation(p, a.begin, a.name, a.device, int64_t(to_us(settings, a.t_ns)));
  p.end_list();
  p.end_dict();
  p.end();
  return p.take();
}

}  // namespace gpumem::rec::snap
