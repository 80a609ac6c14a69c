// capture_index.h — the overview a capture's REC_INDEX carries (Note [Capture index] in gpumem_format.h), built
// from the records in file order. One implementation for both sides: the writer (native/allocator/src/writer.cc)
// feeds it every record it writes and writes the result at a clean close; a reader feeds it the records of a
// capture that has no index (older writers, a process that died, a live capture), so both give the same figures.
//
// The rules are the reader's (native/addon: capture_decoder.cpp and Model::derive): allocated rises by a REC_ALLOC's
// size and falls by a REC_FREE_REQUESTED's (restated ones too), reserved rises by REC_SEGMENT_ALLOC/MAP and falls by
// REC_SEGMENT_FREE/UNMAP (an expandable segment's alloc/free records carry no bytes: its pages are mapped), both start
// at 0; events are block and segment events plus requested snapshots (REC_STATE reason 0); the peak is the first
// event that reaches the maximum; the time range also covers the device's markers, samples, OOMs, empty caches,
// notices and losses (each a marker of the reader's).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gpumem_format.h"

namespace gpumem::fmt {

class IndexBuilder {
 public:
  struct Device {
    IndexDevice d{};
    std::vector<IndexBucket> slots;  // kIndexBuckets, dense from origin_ns; t_ns == ~0 when empty
    int64_t a = 0, r = 0;            // current allocated / reserved
    bool any_event = false, any_range = false;
  };

  // One whole record (header + payload).
  void observe(uint8_t type, uint8_t device, uint16_t flags, const uint8_t* p, uint32_t n) {
    switch (type) {
      case REC_ALLOC:
      case REC_FREE_REQUESTED:
      case REC_FREE_COMPLETED: {
        if (n < sizeof(BlockEvent)) return;
        BlockEvent e;
        std::memcpy(&e, p, sizeof e);
        Device& d = dev(device);
        if (type == REC_ALLOC) d.a = (int64_t)((uint64_t)d.a + e.size);
        if (type == REC_FREE_REQUESTED) d.a = (int64_t)((uint64_t)d.a - e.size);
        event(d, e.t_ns);
        return;
      }
      case REC_SEGMENT_ALLOC:
      case REC_SEGMENT_FREE:
      case REC_SEGMENT_MAP:
      case REC_SEGMENT_UNMAP: {
        if (n < sizeof(SegmentEvent)) return;
        if ((type == REC_SEGMENT_ALLOC || type == REC_SEGMENT_FREE) && (flags & kSegExpandable)) return;
        SegmentEvent e;
        std::memcpy(&e, p, sizeof e);
        Device& d = dev(device);
        if (type == REC_SEGMENT_ALLOC || type == REC_SEGMENT_MAP)
          d.r = (int64_t)((uint64_t)d.r + e.size);
        else
          d.r = (int64_t)((uint64_t)d.r - e.size);
        event(d, e.t_ns);
        return;
      }
      case REC_STATE: {
        if (n < sizeof(StateRec)) return;
        StateRec s;
        std::memcpy(&s, p, sizeof s);
        if (s.reason != 0) return;
        event(dev(device), s.t_ns);  // a requested snapshot is an event of the trace (and a marker)
        return;
      }
      case REC_OOM:
        if (n < sizeof(OomRec)) return;
        dev(device).d.ooms++;
        range(dev(device), load_t(p));
        return;
      case REC_MARKER:
      case REC_DEVICE_SAMPLE:
      case REC_EMPTY_CACHE:
      case REC_NOTICE:
      case REC_LOST:
        if (n < 8) return;
        range(dev(device), load_t(p));
        return;
      default: return;
    }
  }

  // Every whole record of `bytes` (a writer's batch, or a file's records); returns the bytes consumed.
  size_t observe_all(const uint8_t* bytes, size_t size) {
    size_t pos = 0;
    while (pos + sizeof(RecordHeader) <= size) {
      RecordHeader h;
      std::memcpy(&h, bytes + pos, sizeof h);
      if (h.payload_bytes > kMaxPayload || pos + sizeof h + h.payload_bytes > size) break;
      observe(h.type, h.device, h.flags, bytes + pos + sizeof h, h.payload_bytes);
      pos += sizeof h + h.payload_bytes;
    }
    return pos;
  }

  // The REC_INDEX payload (IndexRec, then per device IndexDevice + its non-empty buckets). With max_bytes, the
  // buckets are folded in pairs (their width doubled) until the payload fits: a budgeted capture's index is part of
  // its budget (Note [Budget as a cap]: the writer gives it a sixteenth), so a 256 KiB capture does not end with a
  // 229 KiB index of 4096 buckets.
  std::string payload(uint64_t t_ns, size_t max_bytes = 0) const {
    if (max_bytes) {
      auto size_of = [](const std::map<uint8_t, Device>& ds) {
        size_t n = sizeof(IndexRec);
        for (const auto& [idx, d] : ds) {
          n += sizeof(IndexDevice);
          for (const IndexBucket& b : d.slots)
            if (b.t_ns != kEmpty) n += sizeof(IndexBucket);
        }
        return n;
      };
      if (size_of(devices_) > max_bytes) {
        IndexBuilder folded = *this;
        for (uint32_t width = kIndexBuckets; width > 1 && size_of(folded.devices_) > max_bytes; width /= 2)
          for (auto& [idx, d] : folded.devices_) fold(d);
        return folded.payload(t_ns, 0);
      }
    }
    std::string out;
    IndexRec ir{(uint32_t)devices_.size(), (uint16_t)sizeof(IndexDevice), (uint16_t)sizeof(IndexBucket), t_ns};
    out.append(reinterpret_cast<const char*>(&ir), sizeof ir);
    for (const auto& [idx, d] : devices_) {
      IndexDevice id = finished(d);
      std::vector<IndexBucket> used;
      for (const IndexBucket& b : d.slots)
        if (b.t_ns != kEmpty) used.push_back(b);
      id.nbuckets = (uint32_t)used.size();
      out.append(reinterpret_cast<const char*>(&id), sizeof id);
      if (!used.empty()) out.append(reinterpret_cast<const char*>(used.data()), used.size() * sizeof(IndexBucket));
    }
    return out;
  }

  // Per device, as the index would carry it (for a reader without an index): the figures and non-empty buckets.
  std::vector<std::pair<IndexDevice, std::vector<IndexBucket>>> devices() const {
    std::vector<std::pair<IndexDevice, std::vector<IndexBucket>>> out;
    for (const auto& [idx, d] : devices_) {
      std::vector<IndexBucket> used;
      for (const IndexBucket& b : d.slots)
        if (b.t_ns != kEmpty) used.push_back(b);
      IndexDevice id = finished(d);
      id.nbuckets = (uint32_t)used.size();
      out.emplace_back(id, std::move(used));
    }
    return out;
  }

  static constexpr uint64_t kEmpty = ~0ull;

 private:
  static uint64_t load_t(const uint8_t* p) {
    uint64_t t;
    std::memcpy(&t, p, 8);
    return t;
  }
  Device& dev(uint8_t device) {
    auto it = devices_.find(device);
    if (it != devices_.end()) return it->second;
    Device& d = devices_[device];
    d.d.device = device;
    d.slots.assign(kIndexBuckets, IndexBucket{kEmpty, 0, 0, 0, 0, 0, 0});
    return d;
  }
  static IndexDevice finished(const Device& d) {
    IndexDevice id = d.d;
    id.end_allocated = d.a, id.end_reserved = d.r;
    return id;
  }
  static void range(Device& d, uint64_t t) {
    if (!d.any_range) {
      d.d.range_first_ns = d.d.range_last_ns = t, d.any_range = true;
      return;
    }
    d.d.range_first_ns = std::min(d.d.range_first_ns, t), d.d.range_last_ns = std::max(d.d.range_last_ns, t);
  }
  // Doubles the bucket width, folding pairs, until `t` falls in the last slot or before.
  static void widen(Device& d, uint64_t t) {
    while (t - d.d.origin_ns >= d.d.bucket_ns * kIndexBuckets) fold(d);
  }
  // Folds the buckets in pairs into the first half, doubling their width.
  static void fold(Device& d) {
    {
      for (uint32_t k = 0; k < kIndexBuckets / 2; k++) {
        IndexBucket a = d.slots[2 * k], b = d.slots[2 * k + 1];
        IndexBucket m{kEmpty, 0, 0, 0, 0, 0, 0};
        if (a.t_ns != kEmpty && b.t_ns != kEmpty) {
          m = a;
          m.allocated_min = std::min(a.allocated_min, b.allocated_min);
          m.allocated_max = std::max(a.allocated_max, b.allocated_max);
          m.reserved_min = std::min(a.reserved_min, b.reserved_min);
          m.reserved_max = std::max(a.reserved_max, b.reserved_max);
          m.allocated_last = b.allocated_last, m.reserved_last = b.reserved_last;
        } else if (a.t_ns != kEmpty) {
          m = a;
        } else if (b.t_ns != kEmpty) {
          m = b;
        }
        if (m.t_ns != kEmpty) m.t_ns = d.d.origin_ns + (uint64_t)k * d.d.bucket_ns * 2;
        d.slots[k] = m;
      }
      for (uint32_t k = kIndexBuckets / 2; k < kIndexBuckets; k++) d.slots[k] = IndexBucket{kEmpty, 0, 0, 0, 0, 0, 0};
      d.d.bucket_ns *= 2;
    }
  }
  static void event(Device& d, uint64_t t) {
    int64_t before_a = d.any_event ? d.d.end_allocated : 0, before_r = d.any_event ? d.d.end_reserved : 0;
    if (!d.any_event) {
      d.any_event = true;
      d.d.first_event_ns = d.d.last_event_ns = t;
      d.d.origin_ns = t;
      d.d.bucket_ns = 1024;  // ~1 µs; doubles as the run grows
    }
    if (t < d.d.last_event_ns) t = d.d.last_event_ns;  // file order is time order per device (FORMAT.md §3)
    d.d.last_event_ns = t;
    d.d.events++;
    range(d, t);
    widen(d, t);
    const uint64_t k = (t - d.d.origin_ns) / d.d.bucket_ns;
    IndexBucket& b = d.slots[k];
    if (b.t_ns == kEmpty) {
      // The value carried in counts, as in the reader's timeline buckets.
      b = IndexBucket{d.d.origin_ns + k * d.d.bucket_ns, before_a, before_a, before_r, before_r, before_a, before_r};
    }
    b.allocated_min = std::min(b.allocated_min, d.a), b.allocated_max = std::max(b.allocated_max, d.a);
    b.reserved_min = std::min(b.reserved_min, d.r), b.reserved_max = std::max(b.reserved_max, d.r);
    b.allocated_last = d.a, b.reserved_last = d.r;
    if (d.a > d.d.peak_allocated) d.d.peak_allocated = d.a, d.d.peak_allocated_ns = t;
    if (d.r > d.d.peak_reserved) d.d.peak_reserved = d.r;
    d.d.end_allocated = d.a, d.d.end_reserved = d.r;  // the value after the previous event, for the next carry
  }

  std::map<uint8_t, Device> devices_;
};

}  // namespace gpumem::fmt
