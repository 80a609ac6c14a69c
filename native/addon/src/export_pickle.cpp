// Model → PyTorch 2.11 snapshot pickle (protocol 4): segments, device_traces, allocator_settings,
// external_annotations, in the schema torch.cuda.memory._snapshot() writes, so pytorch.org/memory_viz
// and torch.cuda._memory_viz open it.
#include "export_pickle.h"

#include <cmath>
#include <unordered_map>

#include "aggregate.h"
#include "pickle_emit.h"
#include "replay.h"
#include "torch_snapshot.h"

namespace gpumem {

namespace {

namespace ts = fmt::torch;

// The reader's action → PyTorch's (the reader orders snapshot before oom and has empty_cache besides).
ts::Action torch_action(uint8_t a) {
  switch (a) {
    case ACT_ALLOC: return ts::Action::alloc;
    case ACT_FREE_REQUESTED: return ts::Action::free_requested;
    case ACT_FREE_COMPLETED: return ts::Action::free_completed;
    case ACT_SEGMENT_ALLOC: return ts::Action::segment_alloc;
    case ACT_SEGMENT_FREE: return ts::Action::segment_free;
    case ACT_SEGMENT_MAP: return ts::Action::segment_map;
    case ACT_SEGMENT_UNMAP: return ts::Action::segment_unmap;
    case ACT_OOM: return ts::Action::oom;
    default: return ts::Action::snapshot;
  }
}

struct Exporter {
  const Model& m;
  fmt::PickleEmitter p{1 << 20};

  // Note [Memoised frame lists]: pickle_emit.h never memoises, so this exporter owns the whole memo: the
  // first emission of a stack's frame list is followed by MEMOIZE, later ones are a (LONG_)BINGET of it.
  // This keeps a 55 k-event trace at pickle.dump's size instead of six times it.
  std::unordered_map<uint32_t, uint32_t> memo_of;  // stack id → memo index
  uint32_t next_memo = 0;

  void frames(uint32_t stack_id) {
    auto it = memo_of.find(stack_id);
    if (it != memo_of.end()) {
      uint32_t k = it->second;
      if (k < 256) {
        char op[2] = {'h', (char)k};
        p.raw(std::string_view(op, 2));
      } else {
        char op[5] = {'j', (char)(k & 0xff), (char)((k >> 8) & 0xff), (char)((k >> 16) & 0xff), (char)(k >> 24)};
        p.raw(std::string_view(op, 5));
      }
      return;
    }
    p.begin_list();
    if (stack_id < m.stacks.size()) {
      const StackData& s = m.stacks[stack_id];
      for (uint32_t k = 0; k < s.count; k++) {
        const FrameData& fr = m.frames[m.stack_frames[s.first + k]];
        ts::emit_frame(p, m.strings[fr.name], m.strings[fr.file], fr.line);
      }
    }
    p.end_list();
    p.raw("\x94");  // MEMOIZE the list just built (it is on top of the stack)
    memo_of.emplace(stack_id, next_memo++);
  }

  void segment(int device, const SegmentData& s) {
    uint64_t allocated = 0, active = 0, requested = 0;
    for (const auto& b : s.blocks) {
      if (b.state == ST_ALLOCATED) allocated += b.size;
      if (b.state != ST_INACTIVE) active += b.size, requested += b.requested;
    }
    ts::begin_segment(p, {device, s.addr, s.size, allocated, active, requested, s.stream, s.pool == POOL_SMALL,
                          s.pool_id0, s.pool_id1, s.expandable});
    frames(s.stack);
    ts::begin_blocks(p);
    for (const auto& b : s.blocks) {
      ts::begin_block(p, b.addr, b.size, b.requested, b.state);
      frames(b.stack);
      ts::end_block(p);
    }
    ts::end_segment(p);
  }

  void event(const DeviceData& d, size_t i) {
    uint8_t a = d.action[i];
    if (a == ACT_EMPTY_CACHE) return;  // not a PyTorch trace action
    auto extra = d.context_and_metadata.find((uint32_t)i);
    bool has_extra = extra != d.context_and_metadata.end();
    ts::Action ta = torch_action(a);
    ts::begin_trace_entry(p, ta, d.addr[i], d.size[i], d.stream[i], d.t[i],
                          has_extra ? std::string_view(m.strings[extra->second.first]) : "N/A",
                          has_extra ? std::string_view(m.strings[extra->second.second]) : "");
    if (ts::trace_entry_has_frames(ta)) frames(d.stack[i]);
    ts::end_trace_entry(p);
  }
};

}  // namespace

std::string export_pickle(const Model& m, double at_us) {
  Exporter ex{m, fmt::PickleEmitter(64 << 10), {}, 0};
  auto& p = ex.p;
  p.begin();
  p.begin_dict();
  p.key(ts::kSegments);
  p.begin_list();
  for (const auto& [idx, d] : m.devices) {
    size_t n = events_up_to(d, at_us);
    for (const auto& s : state_after(d, n)) ex.segment(idx, s);
  }
  p.end_list();
  p.key(ts::kDeviceTraces);
  p.begin_list();
  int max_dev = m.devices.empty() ? -1 : m.devices.rbegin()->first;
  for (int dev = 0; dev <= max_dev; dev++) {
    p.begin_list();
    auto it = m.devices.find(dev);
    if (it != m.devices.end()) {
      size_t n = events_up_to(it->second, at_us);
      for (size_t i = 0; i < n; i++) ex.event(it->second, i);
    }
    p.end_list();
  }
  p.end_list();
  p.key(ts::kAllocatorSettings);
  if (!m.allocator_settings_pickle.empty())
    p.raw(m.allocator_settings_pickle);
  else
    ts::emit_allocator_settings(p, "", false);  // what PyTorch 2.11 writes with an empty PYTORCH_CUDA_ALLOC_CONF
  p.key(ts::kExternalAnnotations);
  p.begin_list();
  for (const auto& [idx, d] : m.devices) {
    for (const auto& mk : d.markers) {
      if (mk.kind != 1 && mk.kind != 2) continue;
      if (!std::isnan(at_us) && (double)mk.t_us > at_us) continue;
      ts::emit_annotation(p, mk.kind == 1, m.strings[mk.label], idx, mk.t_us);
    }
  }
  p.end_list();
  p.end_dict();
  p.end();
  return p.take();
}

}  // namespace gpumem
