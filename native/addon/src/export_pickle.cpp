// Model → PyTorch 2.11 snapshot pickle (protocol 4): segments, device_traces, allocator_settings,
// external_annotations, in the schema torch.cuda.memory._snapshot() writes, so pytorch.org/memory_viz
// and torch.cuda._memory_viz open it.
#include "export_pickle.h"

#include <cmath>
#include <unordered_map>

#include "aggregate.h"
#include "pickle_emit.h"
#include "replay.h"

namespace gpumem {

namespace {

struct Exporter {
  const Model& m;
  fmt::PickleEmitter p{1 << 20};

  // Note [Memoised frame lists]: pickle_emit.h never memoises, so this exporter owns the whole memo: the
  // first emission of a stack's frame list is followed by MEMOIZE, later ones are a (LONG_)BINGET of it.
  // This keeps a 55 k-event trace at pickle.dump's size instead of six times it.
  std::unordered_map<uint32_t, uint32_t> memoOf;  // stack id → memo index
  uint32_t nextMemo = 0;

  void frames(uint32_t stackId) {
    auto it = memoOf.find(stackId);
    if (it != memoOf.end()) {
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
    if (stackId < m.stacks.size()) {
      const StackData& s = m.stacks[stackId];
      for (uint32_t k = 0; k < s.count; k++) {
        const FrameData& fr = m.frames[m.stackFrames[s.first + k]];
        p.begin_dict();
        p.kv("name", m.strings[fr.name]);
        p.kv("filename", m.strings[fr.file]);
        p.kv_int("line", fr.line);
        p.end_dict();
      }
    }
    p.end_list();
    p.raw("\x94");  // MEMOIZE the list just built (it is on top of the stack)
    memoOf.emplace(stackId, nextMemo++);
  }

  void segment(int device, const SegmentData& s) {
    uint64_t allocated = 0, active = 0, requested = 0;
    for (const auto& b : s.blocks) {
      if (b.state == ST_ALLOCATED) allocated += b.size;
      if (b.state != ST_INACTIVE) active += b.size, requested += b.requested;
    }
    p.begin_dict();
    p.kv_int("device", device);
    p.kv_uint("address", s.addr);
    p.kv_uint("total_size", s.size);
    p.kv_uint("allocated_size", allocated);
    p.kv_uint("active_size", active);
    p.kv_uint("requested_size", requested);
    p.kv_uint("stream", s.stream);
    p.kv("segment_type", s.pool == POOL_SMALL ? "small" : "large");
    p.key("segment_pool_id");
    p.begin_tuple();
    p.uinteger(s.poolId0);
    p.uinteger(s.poolId1);
    p.end_tuple();
    p.kv_bool("is_expandable", s.expandable);
    p.key("frames");
    frames(s.stack);
    p.key("blocks");
    p.begin_list();
    for (const auto& b : s.blocks) {
      p.begin_dict();
      p.kv_uint("address", b.addr);
      p.kv_uint("size", b.size);
      p.kv_uint("requested_size", b.requested);
      p.kv("state", kBlockStateNames[b.state]);
      p.key("frames");
      frames(b.stack);
      p.end_dict();
    }
    p.end_list();
    p.end_dict();
  }

  void event(const DeviceData& d, size_t i) {
    uint8_t a = d.action[i];
    if (a == ACT_EMPTY_CACHE) return;  // not a PyTorch trace action
    p.begin_dict();
    p.kv("action", kActionNames[a]);
    p.kv_uint(a == ACT_OOM ? "device_free" : "addr", d.addr[i]);
    p.kv_uint("size", d.size[i]);
    p.kv_uint("stream", d.stream[i]);
    p.kv_int("time_us", d.t[i]);
    auto extra = d.contextAndMetadata.find((uint32_t)i);
    p.kv("compile_context", extra != d.contextAndMetadata.end() ? m.strings[extra->second.first] : "N/A");
    p.kv("user_metadata", extra != d.contextAndMetadata.end() ? m.strings[extra->second.second] : "");
    if (a != ACT_SNAPSHOT) {  // PyTorch writes no frames on snapshot entries
      p.key("frames");
      frames(d.stack[i]);
    }
    p.end_dict();
  }

  void defaultSettings() {
    // What PyTorch 2.11 writes with an empty PYTORCH_CUDA_ALLOC_CONF (captures carry no such dict).
    p.begin_dict();
    p.kv("PYTORCH_CUDA_ALLOC_CONF", "");
    p.kv_int("max_split_size", -1);
    p.kv_float("garbage_collection_threshold", 0.0);
    p.kv_bool("expandable_segments", false);
    p.kv_int("pinned_num_register_threads", 1);
    p.kv_bool("release_lock_on_cudamalloc", false);
    p.kv_bool("pinned_use_cuda_host_register", false);
    p.kv_bool("graph_capture_record_stream_reuse", false);
    p.key("roundup_power2_divisions");
    p.begin_dict();
    for (int k = 1; k <= 32768; k *= 2) p.kv_int(std::to_string(k), 0);
    p.end_dict();
    p.end_dict();
  }
};

}  // namespace

std::string exportPickle(const Model& m, double atUs) {
  Exporter ex{m, fmt::PickleEmitter(64 << 10), {}, 0};
  auto& p = ex.p;
  p.begin();
  p.begin_dict();
  p.key("segments");
  p.begin_list();
  for (const auto& [idx, d] : m.devices) {
    size_t n = eventsUpTo(d, atUs);
    for (const auto& s : stateAfter(d, n)) ex.segment(idx, s);
  }
  p.end_list();
  p.key("device_traces");
  p.begin_list();
  int maxDev = m.devices.empty() ? -1 : m.devices.rbegin()->first;
  for (int dev = 0; dev <= maxDev; dev++) {
    p.begin_list();
    auto it = m.devices.find(dev);
    if (it != m.devices.end()) {
      size_t n = eventsUpTo(it->second, atUs);
      for (size_t i = 0; i < n; i++) ex.event(it->second, i);
    }
    p.end_list();
  }
  p.end_list();
  p.key("allocator_settings");
  if (!m.allocatorSettingsPickle.empty())
    p.raw(m.allocatorSettingsPickle);
  else
    ex.defaultSettings();
  p.key("external_annotations");
  p.begin_list();
  for (const auto& [idx, d] : m.devices) {
    for (const auto& mk : d.markers) {
      if (mk.kind != 1 && mk.kind != 2) continue;
      if (!std::isnan(atUs) && (double)mk.tUs > atUs) continue;
      p.begin_dict();
      p.kv("stage", mk.kind == 1 ? "START" : "END");
      p.kv("name", m.strings[mk.label]);
      p.kv_int("device", idx);
      p.kv_int("time_us", mk.tUs);
      p.end_dict();
    }
  }
  p.end_list();
  p.end_dict();
  p.end();
  return p.take();
}

}  // namespace gpumem
