#include "policy_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "aggregate.h"
#include "gpumem_format.h"
#include "json.h"
#include "oom_message.h"
#include "replay.h"

namespace gpumem {

namespace f = gpumem::fmt;

// Note [Policy of the data]: which allocator policy made a file's numbers.
//  - Captures: the header's "segments" ("fixed" → pytorch, "expandable" → lens) and "trim_on_growth"
//    (false → lens-no-trim). Captures written before the bootstrap put trim_on_growth in the header
//    were made with the default, trim on (Note [Default segment strategy] in allocator.cc); the
//    source stays "capture-header" since the segment kind, which decides the most, is recorded.
//  - Captures of the PyTorch-allocator mode ("allocator_mode":"pytorch"): PyTorch's own
//    allocator made them, with the header's "pytorch_expandable_segments" (written by the bootstrap from
//    PyTorch's allocator_settings): true → pytorch-expandable, false → pytorch ("capture-header"); absent →
//    pytorch ("assumed").
//  - PyTorch pickles: a segment with is_expandable true → pytorch-expandable ("pickle-segments"; all
//    false → pytorch); without that key allocator_settings' expandable_segments ("pickle-settings");
//    else pytorch, PyTorch's default ("assumed").
DataPolicy data_policy(const Model& m) {
  if (m.format == "gpumem-capture") {
    const std::string& h = m.header_json;
    auto has = [&](const char* needle) { return h.find(needle) != std::string::npos; };
    if (has("\"allocator_mode\":\"pytorch\"")) {
      if (has("\"pytorch_expandable_segments\":true")) return {core::Policy::kPytorchExpandable, "capture-header"};
      if (has("\"pytorch_expandable_segments\":false")) return {core::Policy::kPytorch, "capture-header"};
      return {core::Policy::kPytorch, "assumed"};
    }
    if (has("\"segments\":\"fixed\"")) return {core::Policy::kPytorch, "capture-header"};
    if (has("\"segments\":\"expandable\""))
      return {has("\"trim_on_growth\":false") ? core::Policy::kLensNoTrim : core::Policy::kLens, "capture-header"};
    return {core::Policy::kLens, "assumed"};
  }
  if (m.pickle_segments_expandable >= 0)
    return {m.pickle_segments_expandable ? core::Policy::kPytorchExpandable : core::Policy::kPytorch,
            "pickle-segments"};
  if (m.pickle_settings_expandable >= 0)
    return {m.pickle_settings_expandable ? core::Policy::kPytorchExpandable : core::Policy::kPytorch,
            "pickle-settings"};
  return {core::Policy::kPytorch, "assumed"};
}

uint64_t device_capacity(const DeviceData& d) {
  for (auto it = d.samples.rbegin(); it != d.samples.rend(); ++it)
    if (it->total) return it->total;
  for (const OomData& o : d.ooms)
    if (o.device_total) return o.device_total;
  return kUnknownCapacity;
}

std::vector<core::SegmentView> to_core_segments(const std::vector<SegmentData>& segs, int device) {
  std::vector<core::SegmentView> out;
  out.reserve(segs.size());
  for (const SegmentData& s : segs) {
    core::SegmentView v;
    v.device = device;
    v.addr = s.addr, v.size = s.size, v.stream = s.stream, v.pool0 = s.pool_id0, v.pool1 = s.pool_id1;
    v.stack = s.stack;
    // A private pool's segments keep their small/large kind only in their size: small segments and
    // small-pool pages are 2 MiB, large ones ≥ 20 MiB (expandable: whole 20 MiB pages).
    bool small = s.pool == POOL_SMALL;
    if (s.pool == POOL_PRIVATE) small = s.expandable ? s.size % core::kLargePage != 0 : s.size <= core::kSmallBuffer;
    v.flags = small ? f::kPoolSmall : f::kPoolLarge;
    if (s.pool == POOL_PRIVATE) v.flags |= f::kPoolPrivate;
    if (s.expandable) v.flags |= f::kSegExpandable;
    for (const BlockData& b : s.blocks)
      v.blocks.push_back(core::BlockView{b.addr, b.size, b.state == ST_INACTIVE ? 0 : b.requested, b.stack, b.state});
    out.push_back(std::move(v));
  }
  return out;
}

namespace {

const DeviceData& device_of(const Model& m, int device) {
  auto it = m.devices.find(device);
  if (it == m.devices.end())
    throw std::runtime_error("device " + std::to_string(device) + " has no allocator events in this file");
  return it->second;
}

std::string seconds(int64_t us, int64_t t0) {
  char b[48];
  std::snprintf(b, sizeof b, "%.3f s", double(us - t0) / 1e6);
  return b;
}

// Note [Policy replay]: a run's allocation stream on a fresh simulated device with a given policy
// and capacity.
//  - Each alloc is a malloc of the requested bytes (pickles: the block size; the same after 512 B
//    rounding) on its stream. A free_requested that its free_completed does not follow at once was
//    deferred by record_stream: the block is freed as pending on an event of a stream of its own,
//    which completes at the free_completed (one still pending when the data ends stays pending, as in
//    the run); the block is reusable from the next malloc on, as in the run. Segment events of the trace are the
//    original policy's answers and are not replayed: the replayed policy makes its own.
//  - A pickle's trace may begin after tensors already lived. When the state before the trace has
//    segments of the replayed policy's kind it is restored as it was (Note [Restored state]): the
//    replay of a PyTorch pickle under `pytorch` then starts from PyTorch's own layout. Otherwise its
//    live blocks are allocated first, in address order (their real order is not known), and the
//    trace's frees find them.
//  - Markers: torch.cuda.empty_cache() and the Empty Cache command run where the run ran them (the
//    OOM ladder's are the policy's own business); at user and range markers, empty_cache() runs on a
//    copy (Note [What-if]) to report what it would release there.
//  - Graph-private pools are not modelled: their allocations go to the default pools.
//  - The first OOM at the capacity ends the replay (the run would have raised there).
class Replayer {
 public:
  Replayer(const DeviceData& d, core::Policy policy, uint64_t capacity)
      : d_(d), sim_(1, capacity), a_(0, sim_, core::policy_options(policy)), policy_(policy), capacity_(capacity) {
    r_.policy = policy, r_.capacity = capacity;
    if (!d.start_empty) {
      // Blocks live before the trace's first event (undone from the pickle's final state).
      std::vector<SegmentData> start = state_after(d, 0);
      const bool expandable = core::policy_options(policy).expandable;
      bool same_kind = !start.empty();
      uint64_t bytes = 0;
      for (const SegmentData& s : start) same_kind &= s.expandable == expandable, bytes += s.size;
      if (same_kind && bytes <= capacity) {
        // The start state holds segments of this policy's kind: it is restored as it was (a state that
        // does not fit the capacity gets its blocks allocated instead, below).
        try {
          a_.restore(to_core_segments(start, 0));
        } catch (const core::RestoreError& e) {
          throw std::runtime_error(std::string("cannot replay from the state before the trace: ") + e.what());
        }
        for (const SegmentData& s : start)
          for (const BlockData& b : s.blocks)
            if (b.state == ST_ALLOCATED)
              ptrs_[b.addr] = reinterpret_cast<void*>(b.addr);
            else if (b.state == ST_PENDING_FREE)
              pending_[b.addr] = core::DeviceAllocator::kRestoredUseStream;
        r_.start_restored = true;
        r_.peak_reserved = uint64_t(a_.stats().reserved_bytes[core::kAll].current);
        r_.peak_at_us = d.count() ? d.t[0] : 0;
        start.clear();
      }
      std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>> live;  // addr → (bytes, stream)
      for (const SegmentData& s : start)
        for (const BlockData& b : s.blocks)
          if (b.state != ST_INACTIVE) live.push_back({b.addr, {b.requested ? b.requested : b.size, s.stream}});
      std::sort(live.begin(), live.end());
      for (auto& [addr, bs] : live) {
        if (!malloc(addr, bs.first, bs.second, d.count() ? d.t[0] : 0)) break;
        r_.start_blocks++;
      }
    }
    for (const MarkerData& mk : d.markers) markers_.push_back(&mk);
    std::stable_sort(markers_.begin(), markers_.end(), [](auto* a, auto* b) { return a->t_us < b->t_us; });
  }

  // Replays events [next, n); false once an OOM stopped it.
  bool run(size_t n, const Model* m) {
    n = std::min(n, d_.count());
    for (; next_ < n && !r_.have_oom; next_++) {
      const size_t i = next_;
      if (m) markers_before(*m, d_.t[i]);
      switch (d_.action[i]) {
        case ACT_ALLOC: malloc(d_.addr[i], d_.size[i] - d_.waste[i], d_.stream[i], d_.t[i]); break;
        case ACT_FREE_REQUESTED:
          if (i + 1 < d_.count() && d_.action[i + 1] == ACT_FREE_COMPLETED && d_.addr[i + 1] == d_.addr[i]) {
            free(d_.addr[i]);
            next_++, r_.events++;  // the completion is this free
          } else {
            free_pending(d_.addr[i]);
          }
          break;
        case ACT_FREE_COMPLETED: complete(d_.addr[i]); break;
        default: break;
      }
      r_.events++;
    }
    if (m && next_ == d_.count() && !r_.have_oom) markers_before(*m, INT64_MAX);
    return !r_.have_oom;
  }

  PolicyReplayResult& result() {
    const core::DeviceStats st = a_.stats();
    r_.peak_reserved = std::max<uint64_t>(r_.peak_reserved, uint64_t(st.reserved_bytes[core::kAll].peak));
    r_.peak_allocated = uint64_t(st.allocated_bytes[core::kAll].peak);
    return r_;
  }
  core::DeviceAllocator& allocator() { return a_; }

 private:
  bool malloc(uint64_t addr, uint64_t bytes, uint64_t stream, int64_t t_us) {
    void* p = nullptr;
    if (bytes > capacity_) {  // more than the device (also keeps untrusted sizes far from overflow)
      oom(bytes, t_us);
      return false;
    }
    try {
      p = a_.malloc(size_t(bytes), stream, 0);
    } catch (const core::OutOfMemory&) {
      oom(bytes, t_us);
      return false;
    }
    ptrs_[addr] = p;
    const uint64_t reserved = uint64_t(a_.stats().reserved_bytes[core::kAll].current);
    if (reserved > r_.peak_reserved) r_.peak_reserved = reserved, r_.peak_at_us = t_us;
    return true;
  }
  void free(uint64_t addr) {
    auto it = ptrs_.find(addr);
    if (it == ptrs_.end()) return;  // allocated before the data began, or never served
    a_.free(it->second);
    ptrs_.erase(it);
  }
  void free_pending(uint64_t addr) {
    auto it = ptrs_.find(addr);
    if (it == ptrs_.end()) return;
    const core::Stream use = kPendingStreams + pending_count_++;
    a_.record_stream(it->second, use);
    a_.free(it->second);
    pending_[addr] = use;
    ptrs_.erase(it);
  }
  void complete(uint64_t addr) {
    auto it = pending_.find(addr);
    if (it != pending_.end()) {
      sim_.complete_events(it->second);
      pending_.erase(it);
      return;
    }
    free(addr);  // a completion without its request in the data (a trace that begins between them)
  }
  // Note [OOM cause]: after the OOM ladder has released every cached segment and page it could, a
  // shortage is when tensors and the request together exceed the capacity (no policy could serve
  // it); otherwise the memory exists but this policy's layout cannot give it one block:
  // fragmentation.
  void oom(uint64_t bytes, int64_t t_us) {
    const core::DeviceStats st = a_.stats();
    ReplayOom& o = r_.oom;
    r_.have_oom = true;
    o.t_us = t_us;
    o.requested = bytes;
    o.reserved = uint64_t(st.reserved_bytes[core::kAll].current);
    o.allocated = uint64_t(st.allocated_bytes[core::kAll].current);
    const uint64_t need = o.allocated + core::round_size(bytes);
    o.fragmentation = need <= capacity_;
    const int64_t t0 = d_.count() ? d_.t[0] : t_us;
    std::string s = seconds(t_us, t0) + " after the first recorded event, a " + core::format_size(bytes) +
                    " request fails under " + core::policy_name(policy_) + " on a " + core::format_size(capacity_) +
                    " device: tensors hold " + core::format_size(o.allocated) + " and the allocator reserves " +
                    core::format_size(o.reserved) + " after releasing what it could. ";
    if (o.fragmentation)
      s += "Fragmentation: " + core::format_size(capacity_ - o.allocated) +
           " is not held by tensors, enough for the request, but this policy cannot make one block of it.";
    else
      s += "Shortage: tensors and the request need " + core::format_size(need) +
           ", more than the device has; no allocator policy fits it.";
    o.sentence = s;
  }
  void markers_before(const Model& m, int64_t t) {
    for (; next_marker_ < markers_.size() && markers_[next_marker_]->t_us < t; next_marker_++) {
      const MarkerData& mk = *markers_[next_marker_];
      if (mk.kind == 3) {  // empty_cache: the run's own, unless the OOM ladder's
        // The detail is JSON the decoder wrote ({"origin": …}): parsed, never searched (Note [One JSON codec]).
        json::Value detail;
        const json::Value* origin = json::parse(mk.detail_json, &detail, nullptr) ? detail.find("origin") : nullptr;
        bool oom_retry = origin && origin->is_string() && origin->as_string() == "out-of-memory retry";
        if (!oom_retry) a_.empty_cache(nullptr, nullptr, 0);
        continue;
      }
      if (mk.kind > 2) continue;  // snapshot, oom, notice: not phase markers
      core::AllocatorState s;
      s.capacity = capacity_;
      s.policy = policy_;
      s.segments = a_.segments();
      const std::string& label = m.strings[mk.label];
      r_.markers.push_back({mk.t_us,
                            mk.kind == 1   ? label + " (begin)"
                            : mk.kind == 2 ? label + " (end)"
                                           : label,
                            core::WhatIf(std::move(s)).empty_cache()});
    }
  }

  const DeviceData& d_;
  core::SimBackend sim_;
  core::DeviceAllocator a_;
  core::Policy policy_;
  uint64_t capacity_;
  static constexpr core::Stream kPendingStreams = core::Stream(1) << 63;  // one per deferred free
  std::unordered_map<uint64_t, void*> ptrs_;
  std::unordered_map<uint64_t, core::Stream> pending_;  // addr → the stream its deferred free waits on
  uint64_t pending_count_ = 0;
  std::vector<const MarkerData*> markers_;
  size_t next_ = 0, next_marker_ = 0;
  PolicyReplayResult r_;
};

uint64_t reserved_peak_up_to(const DeviceData& d, size_t n) {
  int64_t peak = d.start_reserved;
  for (size_t i = 0; i < n && i < d.reserved.size(); i++) peak = std::max(peak, d.reserved[i]);
  return peak > 0 ? uint64_t(peak) : 0;
}

}  // namespace

PolicyReplayResult replay_policy(const Model& m, int device, core::Policy policy, uint64_t capacity) {
  const DeviceData& d = device_of(m, device);
  try {
    Replayer r(d, policy, capacity ? capacity : device_capacity(d));
    r.run(d.count(), &m);
    return r.result();
  } catch (const core::BackendError& e) {  // the simulated device refused something the data asked
    throw std::runtime_error(std::string("cannot replay this run on the simulated device: ") + e.what());
  }
}

std::string replay_json(const PolicyReplayResult& r) {
  json::Writer j;
  j.open('{').kvs("policy", core::policy_name(r.policy)).kvu("capacityBytes", r.capacity);
  j.kvu("peakReservedBytes", r.peak_reserved).kvu("peakAllocatedBytes", r.peak_allocated);
  j.kvd("ratio", r.peak_allocated ? double(r.peak_reserved) / double(r.peak_allocated) : 0)
      .kv("peakAtUs", r.peak_at_us);
  j.key("emptyCacheAtMarkers").open('[');
  for (const auto& mk : r.markers)
    j.item().open('{').kv("tUs", mk.t_us).kvs("name", mk.name).kvu("releasesBytes", mk.releases).close('}');
  j.close(']').key("oom");
  if (!r.have_oom) {
    j.raw("null");
  } else {
    const ReplayOom& o = r.oom;
    j.open('{').kv("tUs", o.t_us).kvu("requestedBytes", o.requested).kvu("reservedBytes", o.reserved);
    j.kvu("allocatedBytes", o.allocated)
        .kvs("cause", o.fragmentation ? "fragmentation" : "shortage")
        .kvs("sentence", o.sentence)
        .close('}');
  }
  j.kvu("events", r.events).kvu("startBlocks", r.start_blocks).kvb("startRestored", r.start_restored);
  return j.close('}').s;
}

static std::string what_if(const Model& m, int device, double t_us, const WhatIfQuery& q);

std::string what_if_json(const Model& m, int device, double t_us, const WhatIfQuery& q) {
  try {
    return what_if(m, device, t_us, q);
  } catch (const core::BackendError& e) {
    throw std::runtime_error(std::string("cannot ask the allocator on the simulated device: ") + e.what());
  }
}

static std::string what_if(const Model& m, int device, double t_us, const WhatIfQuery& q) {
  const DeviceData& d = device_of(m, device);
  const DataPolicy data = data_policy(m);
  const core::Policy policy = q.have_policy ? q.policy : data.policy;
  const uint64_t capacity = q.capacity ? q.capacity : device_capacity(d);
  const size_t n = events_up_to(d, t_us);
  core::AllocatorState s;
  s.capacity = capacity;
  s.policy = policy;
  const bool same_kind = core::policy_options(policy).expandable == core::policy_options(data.policy).expandable;
  if (same_kind) {
    s.segments = to_core_segments(state_after(d, n), device);
    s.reserved_peak = reserved_peak_up_to(d, n);
  } else {
    // Note [What-if]: a policy with the other kind of segments cannot continue from this state; the
    // run up to t_us is replayed under it instead (Note [Policy replay]).
    Replayer r(d, policy, capacity);
    if (!r.run(n, nullptr))
      throw std::runtime_error(std::string("under ") + core::policy_name(policy) +
                               " this run fails before that moment: " + r.result().oom.sentence);
    s.segments = r.allocator().segments();
    s.reserved_peak = r.result().peak_reserved;
  }
  std::unique_ptr<core::WhatIf> w;
  try {
    w = std::make_unique<core::WhatIf>(std::move(s));
  } catch (const core::RestoreError& e) {
    throw std::runtime_error(std::string("cannot ask the ") + core::policy_name(policy) +
                             " allocator about this state: " + e.what());
  }
  const core::Stream stream = w->default_stream();
  json::Writer j;
  j.open('{').kvs("policy", core::policy_name(policy)).kvs("policySource", data.source);
  j.kvu("reservedBytes", w->reserved()).kvu("emptyCacheReleasesBytes", w->empty_cache());
  j.kvu("largestWithoutGrowthBytes", w->largest_without_growth(stream));
  j.key("requests").open('[');
  for (uint64_t bytes : q.requests) {
    core::RequestAnswer a = w->request(size_t(bytes), stream);
    j.item()
        .open('{')
        .kvu("bytes", bytes)
        .kvs("outcome", core::outcome_name(a.outcome))
        .kvu("growsByBytes", a.grows_by)
        .close('}');
  }
  j.close(']').kvs("dataPolicy", core::policy_name(data.policy)).kvu("capacityBytes", capacity).kvu("stream", stream);
  j.kvs("stateFrom", same_kind ? "restored" : "replayed");
  return j.close('}').s;
}

}  // namespace gpumem
