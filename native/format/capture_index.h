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
//
// Note [Lines at the peak in the index]: the sections of Note [Index sections] follow the reader's rules too. A line
// is the innermost user frame of a REC_STACK (the rule of user_frames.h, with the header's own directories), fixed
// when the stack record is read, as Model::intern_stack fixes it. A REC_ALLOC makes its address live with its size and
// line (a second REC_ALLOC of a live address leaves the first live for good, as Model::derive's pairing does); a
// REC_FREE_REQUESTED of a live address ends it. What was live at the peak is kept without a copy per new peak: the
// changes per line since the last peak are pending, and a new peak adds them to the lines at the peak, so each event
// is counted once whatever the number of peaks.
//
// Note [Figures after the events in the index]: where the reader reads REC_STATS (Notes [Figures from stats] and
// [Figures after the events] in native/addon/src/model.h), so does this, by the reader's rules, so that a first view
// and the full open agree; a capture without MARK_EVENTS_OFF whose devices all have events gets the same index as
// before, byte for byte (the samples are kept apart and read by none of its devices).
//  - In the index's layout as it is (FORMAT.md §6; no field added): a device of figures only is one with events 0 and
//    buckets, and last_event_ns says where a device's buckets end (below).
//  - After the events (the first MARK_EVENTS_OFF, at T_off; process-wide, so for every device): a device with events
//    and a sample at or after T_off has, from T_off on, the samples' figures. Its buckets are the events' up to T_off
//    and the samples' from it, on one grid: the samples go in their own slots (folded with the events'), each bucket
//    with the value carried in from the sample before and the peak rise since it, and at the end the two are merged
//    slot by slot, the bucket T_off falls in spanning both (its last value the samples'); the first sample's bucket
//    also holds the events' figures at T_off (carried in), and the peak it reports where that rose above the events'
//    peak up to T_off (or the sample before it, if that said more). Events after T_off (none from the recorder: it
//    drops them) count, as in the reader, in the device's events, range and peaks but not in its buckets: the events'
//    buckets as they were at T_off are kept when the first such event comes. The peak is the samples' first that is
//    strictly higher than the events' (a tie keeps the events' peak and its time), the reserved peak the higher of the
//    two, the end state the last sample's, and the time range reaches the last sample. last_event_ns is where the
//    buckets end: the last sample's time (the first view's buckets reach it; a reader of an older addon reads the
//    same field the same way).
//  - Figures only (a device with no event at all, and memory in a sample: the reader's figures_only()): the device is
//    in the index with events 0 and its samples as its buckets, on a grid of their own from its first sample that is
//    not all zeros (before it, allocated and reserved are 0, as the reader shows them: the first view fills the
//    columns before its first bucket with 0); its peak is the highest peak_allocated, at the first sample that
//    reported it; peak_reserved and the end state are the last sample's; the range covers every sample, and
//    last_event_ns is the last sample's time (first_event_ns stays 0: events == 0). The grid is dropped at the
//    device's first event (then it is not figures only). A device whose samples are all zeros is left as it was (no
//    entry of its own): the reader does not show it (Note [Devices with no events]).
//  - "At or after T_off" is the reader's, in its microseconds (the header's clock anchors, as CaptureDecoder::to_us),
//    so a sample in the marker's microsecond counts as after it and an event in it as before.
//  - Read in file order, as written: samples and the marker come from different threads and their times may step
//    back slightly (FORMAT.md §3), so when the marker is read, a device's last sample taken at or after it is one of
//    the samples after it (samples are milliseconds apart: one at most). A sample read before its device's first
//    event is not one of them (the recorder writes no event after T_off: a device without events then has none). A
//    budgeted capture's index is fed the records before compaction (FORMAT.md §6): its samples are the run's, where
//    a compacted range of the file keeps none.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumem_format.h"
#include "id_map.h"
#include "json.h"
#include "user_frames.h"

namespace gpumem::fmt {

class IndexBuilder {
 public:
  struct Live {
    uint64_t size;
    uint32_t line;
  };
  // A REC_STATS sample's figures (Note [Figures after the events in the index]).
  struct Sample {
    uint64_t t;            // as written
    int64_t a, r, pa, pr;  // allocated, reserved, peak_allocated, peak_reserved
  };
  // The events' buckets and figures at T_off, kept when the device's first event after it comes.
  struct AtOff {
    std::vector<IndexBucket> slots;
    int64_t a, r, peak_a, peak_r;
  };
  struct Device {
    IndexDevice d{};
    std::vector<IndexBucket> slots;  // kIndexBuckets, dense from origin_ns; t_ns == ~0 when empty
    int64_t a = 0, r = 0;            // current allocated / reserved
    bool any_event = false, any_range = false;
    // Note [Lines at the peak in the index]: live allocations by address; per line id, the bytes and allocations
    // live at the peak, and the changes since it (pending, for the lines in `dirty`).
    std::unordered_map<uint64_t, Live> live;
    std::vector<int64_t> peak_bytes, peak_count, pending_bytes, pending_count;
    std::vector<uint32_t> dirty;
    std::vector<uint8_t> is_dirty;
    // Note [Figures after the events in the index]: the samples at or after T_off, on the events' grid (empty: none
    // read), the first and last of them (grid times: first_t, last_t), their time range and peaks, and the peaks of
    // the sample before the first (if any).
    std::optional<AtOff> at_off;
    std::vector<IndexBucket> after;
    Sample first_after{}, last_after{};
    uint64_t first_t = 0, last_t = 0, after_t0 = 0, after_t1 = 0, after_peak_ns = 0;
    int64_t after_peak_a = 0, after_peak_r = 0;
    bool before = false;
    int64_t before_pa = 0, before_pr = 0;
  };
  // Note [Figures after the events in the index]: a device's samples, kept apart from its Device (a device with
  // samples alone is in the index only when they are all it has, and say something): the last one, the time range of
  // all, and while the device has no event its figures only, on a grid of their own (g: origin_ns and bucket_ns; no
  // slots until a sample that is not all zeros).
  struct Figures {
    bool any = false, memory = false, any_prev = false;
    Sample last{}, prev{};  // the last sample read, and the one before it
    uint64_t t0 = 0, t1 = 0, grid_t = 0, peak_ns = 0;
    int64_t peak = -1;
    IndexDevice g{};
    std::vector<IndexBucket> slots;
  };

  // lines = false: the figures and buckets only (a first view's pass over a capture without an index), no sections.
  explicit IndexBuilder(bool lines = true) : lines_(lines) {}

  // The capture's header JSON: the tool's own directories, which are never the user's lines (Note [User frames]), and
  // the clock anchors, which say the reader's microsecond of a time (Note [Figures after the events in the index]).
  void header(std::string_view json_text) {
    json::Value h;
    std::string err;
    internal_dirs_.clear();
    mono_ = wall_ = 0;
    if (!json::parse(std::string(json_text), &h, &err) || !h.is_object()) return;
    internal_dirs_ = internal_dirs_of_header(h);
    const json::Value* m = h.find("mono_anchor_ns");
    const json::Value* w = h.find("wall_anchor_ns");
    if (m && w && m->is_int() && w->is_int()) mono_ = m->as_int(), wall_ = w->as_int();
  }

  // One whole record (header + payload).
  void observe(uint8_t type, uint8_t device, uint16_t flags, const uint8_t* p, uint32_t n) {
    switch (type) {
      case REC_STRING: {
        if (!lines_ || n < sizeof(StringRec)) return;
        StringRec r;
        std::memcpy(&r, p, sizeof r);
        if (r.len > n - sizeof r) return;
        strings_[r.id].assign(reinterpret_cast<const char*>(p + sizeof r), r.len);
        return;
      }
      case REC_FRAME: {
        if (!lines_ || n < sizeof(FrameRec)) return;
        FrameRec r;
        std::memcpy(&r, p, sizeof r);
        // As the reader, the file as it reads at this record: a string not yet defined is "" (never the user's).
        frames_[r.id] = {file_key(r.file), r.line};
        return;
      }
      case REC_STACK: {
        if (!lines_ || n < sizeof(StackRec)) return;
        StackRec r;
        std::memcpy(&r, p, sizeof r);
        if (r.nframes > (n - sizeof r) / 4) return;
        uint32_t line = no_user_line();
        for (uint32_t k = 0; k < r.nframes; k++) {
          uint32_t fid;
          std::memcpy(&fid, p + sizeof r + 4 * k, 4);
          auto it = frames_.find(fid);
          if (it == frames_.end()) continue;  // the reader drops a frame it does not know
          if (is_user_file(it->second.first)) {
            line = line_id(it->second.first, it->second.second);
            break;
          }
        }
        stack_lines_.set(r.id, line);
        return;
      }
      case REC_DEVICE: {
        if (!lines_ || n < sizeof(DeviceRec)) return;
        DeviceRec r;
        std::memcpy(&r, p, sizeof r);
        auto it = strings_.find(r.name);
        names_[device] = {it == strings_.end() ? std::string() : it->second, r.total_bytes};
        return;
      }
      case REC_ALLOC:
      case REC_FREE_REQUESTED:
      case REC_FREE_COMPLETED: {
        if (n < sizeof(BlockEvent)) return;
        BlockEvent e;
        std::memcpy(&e, p, sizeof e);
        Device& d = dev(device);
        keep_events_at_off(d, e.t_ns);
        if (type == REC_ALLOC && !lines_) {
          d.a = (int64_t)((uint64_t)d.a + e.size);
        } else if (type == REC_FREE_REQUESTED && !lines_) {
          d.a = (int64_t)((uint64_t)d.a - e.size);
        } else if (type == REC_ALLOC) {
          d.a = (int64_t)((uint64_t)d.a + e.size);
          const uint32_t line = stack_line(e.stack);
          d.live[e.addr] = Live{e.size, line};
          change(d, line, (int64_t)e.size, 1);
        } else if (type == REC_FREE_REQUESTED) {
          d.a = (int64_t)((uint64_t)d.a - e.size);
          auto it = d.live.find(e.addr);
          if (it != d.live.end()) {
            change(d, it->second.line, -(int64_t)it->second.size, -1);
            d.live.erase(it);
          }
        }
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
        keep_events_at_off(d, e.t_ns);
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
        Device& d = dev(device);
        keep_events_at_off(d, s.t_ns);
        event(d, s.t_ns);  // a requested snapshot is an event of the trace (and a marker)
        return;
      }
      case REC_STATS: {
        if (n < sizeof(StatsRec)) return;
        StatsRec s;
        std::memcpy(&s, p, sizeof s);
        sample(device, Sample{s.t_ns, (int64_t)s.allocated, (int64_t)s.reserved, (int64_t)s.peak_allocated,
                              (int64_t)s.peak_reserved});
        return;
      }
      case REC_OOM:
        if (n < sizeof(OomRec)) return;
        dev(device).d.ooms++;
        range(dev(device), load_t(p));
        return;
      case REC_LOST:
        if (n < sizeof(LostRec)) return;
        {
          LostRec r;
          std::memcpy(&r, p, sizeof r);
          lost_records_++, lost_events_ += r.count;
        }
        range(dev(device), load_t(p));
        return;
      case REC_MARKER:
        if (n < 8) return;
        if (n >= sizeof(MarkerRec)) {
          MarkerRec m;
          std::memcpy(&m, p, sizeof m);
          if (m.kind == MARK_EVENTS_OFF) {
            if (off_) return;  // the first says from when; the reader shows no other
            events_off(m.t_ns);
          }
        }
        range(dev(device), load_t(p));
        return;
      case REC_DEVICE_SAMPLE:
      case REC_EMPTY_CACHE:
      case REC_NOTICE:
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

  // The REC_INDEX payload (IndexRec, then per device IndexDevice + its non-empty buckets, then the sections of Note
  // [Index sections], which do not fold and count towards max_bytes). With max_bytes, the
  // buckets are folded in pairs (their width doubled) until the payload fits: a budgeted capture's index is part of
  // its budget (Note [Budget as a cap]: the writer gives it a sixteenth), so a 256 KiB capture does not end with a
  // 229 KiB index of 4096 buckets.
  std::string payload(uint64_t t_ns, size_t max_bytes = 0) const {
    const std::string extra = lines_ ? sections() : std::string();
    std::vector<std::pair<IndexDevice, std::vector<IndexBucket>>> ds = outputs();
    if (max_bytes) {
      auto size_of = [&] {
        size_t n = sizeof(IndexRec) + extra.size();
        for (const auto& [id, slots] : ds) {
          n += sizeof(IndexDevice);
          for (const IndexBucket& b : slots)
            if (b.t_ns != kEmpty) n += sizeof(IndexBucket);
        }
        return n;
      };
      for (uint32_t width = kIndexBuckets; width > 1 && size_of() > max_bytes; width /= 2)
        for (auto& [id, slots] : ds) fold(id, slots);
    }
    std::string out;
    IndexRec ir{(uint32_t)ds.size(), (uint16_t)sizeof(IndexDevice), (uint16_t)sizeof(IndexBucket), t_ns};
    out.append(reinterpret_cast<const char*>(&ir), sizeof ir);
    for (auto& [id, slots] : ds) {
      std::vector<IndexBucket> used;
      for (const IndexBucket& b : slots)
        if (b.t_ns != kEmpty) used.push_back(b);
      id.nbuckets = (uint32_t)used.size();
      out.append(reinterpret_cast<const char*>(&id), sizeof id);
      if (!used.empty()) out.append(reinterpret_cast<const char*>(used.data()), used.size() * sizeof(IndexBucket));
    }
    return lines_ ? out + extra : out;  // Note [Index sections]
  }

  // Per device, as the index would carry it (for a reader without an index): the figures and non-empty buckets.
  std::vector<std::pair<IndexDevice, std::vector<IndexBucket>>> devices() const {
    std::vector<std::pair<IndexDevice, std::vector<IndexBucket>>> out = outputs();
    for (auto& [id, slots] : out) {
      slots.erase(std::remove_if(slots.begin(), slots.end(), [](const IndexBucket& b) { return b.t_ns == kEmpty; }),
                  slots.end());
      id.nbuckets = (uint32_t)slots.size();
    }
    return out;
  }

  // Note [Lines at the peak in the index]: every line live at a device's peak, summed over the devices, ranked as
  // the reader's summary ranks its top_lines (bytes, then file, then line).
  struct TopLine {
    std::string file;
    uint32_t line;
    uint64_t bytes;
  };
  std::vector<TopLine> top_lines() const {
    std::map<std::pair<std::string, uint32_t>, uint64_t> sum;
    for (const auto& [idx, d] : devices_) {
      for (size_t k = 0; k < d.peak_count.size(); k++) {
        if (d.peak_count[k] <= 0) continue;
        const auto& [file, line] = line_keys_[k];
        sum[{file == kNoUserFile ? std::string("<no user frame>") : files_[file].first, line}] +=
            (uint64_t)d.peak_bytes[k];
      }
    }
    std::vector<TopLine> out;
    out.reserve(sum.size());
    for (const auto& [k, bytes] : sum) out.push_back(TopLine{k.first, k.second, bytes});
    std::stable_sort(out.begin(), out.end(), [](const TopLine& a, const TopLine& b) {
      if (a.bytes != b.bytes) return a.bytes > b.bytes;
      if (a.file != b.file) return a.file < b.file;
      return a.line < b.line;
    });
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
    d.slots.assign(kIndexBuckets, none());
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
  static IndexBucket none() { return IndexBucket{kEmpty, 0, 0, 0, 0, 0, 0}; }
  // Doubles the bucket width, folding pairs, until `t` falls in the last slot or before.
  // A damaged time (2^63 ns) would double the width until `bucket_ns * kIndexBuckets` wraps to 0 and loop for ever
  // (found by fuzz_capture): the width stops at the largest that does not wrap, and such a time lands in the last slot.
  static bool narrow(const IndexDevice& g, uint64_t t) {
    constexpr uint64_t kWidest = (~0ull / kIndexBuckets) / 2;
    return t - g.origin_ns >= g.bucket_ns * kIndexBuckets && g.bucket_ns <= kWidest;
  }
  static void widen(Device& d, uint64_t t) {
    while (narrow(d.d, t)) fold(d);
  }
  static uint64_t slot(const IndexDevice& g, uint64_t t) {
    return std::min<uint64_t>((t - g.origin_ns) / g.bucket_ns, kIndexBuckets - 1);
  }
  // Folds the buckets in pairs into the first half, doubling their width (every grid of the device alike).
  static void fold(Device& d) {
    if (d.at_off) fold_slots(d.d, d.at_off->slots);
    if (!d.after.empty()) fold_slots(d.d, d.after);
    fold(d.d, d.slots);
  }
  static void fold(IndexDevice& dd, std::vector<IndexBucket>& slots) {
    fold_slots(dd, slots);
    dd.bucket_ns *= 2;
  }
  static void fold_slots(const IndexDevice& dd, std::vector<IndexBucket>& slots) {
    for (uint32_t k = 0; k < kIndexBuckets / 2; k++) {
      IndexBucket a = slots[2 * k], b = slots[2 * k + 1];
      IndexBucket m = none();
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
      if (m.t_ns != kEmpty) m.t_ns = dd.origin_ns + (uint64_t)k * dd.bucket_ns * 2;
      slots[k] = m;
    }
    for (uint32_t k = kIndexBuckets / 2; k < kIndexBuckets; k++) slots[k] = none();
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
    const uint64_t k = std::min<uint64_t>((t - d.d.origin_ns) / d.d.bucket_ns, kIndexBuckets - 1);
    IndexBucket& b = d.slots[k];
    if (b.t_ns == kEmpty) {
      // The value carried in counts, as in the reader's timeline buckets.
      b = IndexBucket{d.d.origin_ns + k * d.d.bucket_ns, before_a, before_a, before_r, before_r, before_a, before_r};
    }
    b.allocated_min = std::min(b.allocated_min, d.a), b.allocated_max = std::max(b.allocated_max, d.a);
    b.reserved_min = std::min(b.reserved_min, d.r), b.reserved_max = std::max(b.reserved_max, d.r);
    b.allocated_last = d.a, b.reserved_last = d.r;
    if (d.a > d.d.peak_allocated) d.d.peak_allocated = d.a, d.d.peak_allocated_ns = t, commit(d);
    if (d.r > d.d.peak_reserved) d.d.peak_reserved = d.r;
    d.d.end_allocated = d.a, d.d.end_reserved = d.r;  // the value after the previous event, for the next carry
  }

  // Note [Lines at the peak in the index]: the lines' changes since the last peak, made the lines at the peak.
  static void commit(Device& d) {
    for (uint32_t k : d.dirty) {
      d.peak_bytes[k] += d.pending_bytes[k], d.peak_count[k] += d.pending_count[k];
      d.pending_bytes[k] = d.pending_count[k] = 0, d.is_dirty[k] = 0;
    }
    d.dirty.clear();
  }
  static void change(Device& d, uint32_t line, int64_t bytes, int64_t count) {
    if (line >= d.pending_bytes.size()) {
      const size_t n = std::max<size_t>(line + 1, d.pending_bytes.size() * 2);
      d.peak_bytes.resize(n), d.peak_count.resize(n), d.pending_bytes.resize(n), d.pending_count.resize(n);
      d.is_dirty.resize(n);
    }
    d.pending_bytes[line] = (int64_t)((uint64_t)d.pending_bytes[line] + (uint64_t)bytes);
    d.pending_count[line] += count;
    if (!d.is_dirty[line]) d.is_dirty[line] = 1, d.dirty.push_back(line);
  }

  // Note [Figures after the events in the index] ------------------------------------------------------------------

  // The reader's microsecond of a time (CaptureDecoder::to_us).
  int64_t us(uint64_t t_ns) const {
    const int64_t w = (int64_t)((uint64_t)wall_ + (t_ns - (uint64_t)mono_));
    return w / 1000 - (w % 1000 < 0 ? 1 : 0);
  }

  // Before an event of d is counted: the first after T_off leaves the events' buckets and figures as they were then.
  void keep_events_at_off(Device& d, uint64_t t) {
    if (!off_ || d.at_off) return;
    if (d.any_event && t < d.d.last_event_ns) t = d.d.last_event_ns;  // as event() places it
    if (us(t) <= off_us_) return;
    d.at_off = AtOff{d.slots, d.a, d.r, d.d.peak_allocated, d.d.peak_reserved};
  }

  // The first MARK_EVENTS_OFF. Samples and markers are written from different threads, and their times may step
  // back slightly (FORMAT.md §3): a device's last sample read before the marker, taken at or after it, is after it.
  void events_off(uint64_t t_ns) {
    off_ = true, off_us_ = us(t_ns);
    for (auto& [idx, f] : figures_) {
      auto it = devices_.find(idx);
      if (f.any && it != devices_.end() && it->second.any_event && us(f.last.t) >= off_us_)
        after_sample(it->second, f.any_prev ? &f.prev : nullptr, f.last);
    }
  }

  void sample(uint8_t device, const Sample& x) {
    Figures& f = figures_[device];
    auto it = devices_.find(device);
    if (it != devices_.end() && it->second.any_event) {
      if (!f.slots.empty()) std::vector<IndexBucket>().swap(f.slots);  // not figures only: the device has events
      if (off_ && us(x.t) >= off_us_) after_sample(it->second, f.any ? &f.last : nullptr, x);
    } else {
      figures_only_sample(f, x);
    }
    f.t0 = f.any ? std::min(f.t0, x.t) : x.t, f.t1 = f.any ? std::max(f.t1, x.t) : x.t;
    f.prev = f.last, f.any_prev = f.any;
    f.last = x, f.any = true;
  }

  // A sample at or after T_off of a device with events (before: the device's sample before it, if any): on the
  // events' grid, in slots of its own.
  static void after_sample(Device& d, const Sample* before, const Sample& x) {
    const bool first = d.after.empty();
    uint64_t t = std::max(x.t, d.d.origin_ns);
    if (first) {
      d.after.assign(kIndexBuckets, none());
      d.before = before != nullptr;
      if (before) d.before_pa = before->pa, d.before_pr = before->pr;
      d.first_after = x, d.first_t = t;
      d.after_t0 = d.after_t1 = d.after_peak_ns = x.t;
      d.after_peak_a = x.pa, d.after_peak_r = x.pr;
    } else {
      t = std::max(t, d.last_t);  // file order is time order per device
      d.after_t0 = std::min(d.after_t0, x.t), d.after_t1 = std::max(d.after_t1, x.t);
      if (x.pa > d.after_peak_a) d.after_peak_a = x.pa, d.after_peak_ns = x.t;  // the first that said so
      d.after_peak_r = std::max(d.after_peak_r, x.pr);
    }
    widen(d, t);
    put(d.d, d.after, t, x, first ? nullptr : &d.last_after);  // the first's carry and rise: after_events()
    d.last_after = x, d.last_t = t;
  }

  // A sample of a device without events (yet): its figures only.
  static void figures_only_sample(Figures& f, const Sample& x) {
    if (x.pa > f.peak) f.peak = x.pa, f.peak_ns = x.t;    // the first that said so (from -1, as the reader's summary)
    if (x.a > 0 || x.r > 0 || x.pr > 0) f.memory = true;  // the reader's figures_only()
    uint64_t t = x.t;
    if (f.slots.empty()) {
      if (!x.a && !x.r && !x.pa && !x.pr) return;  // all zeros: 0, as before the first bucket
      f.g.origin_ns = t, f.g.bucket_ns = 1024;
      f.slots.assign(kIndexBuckets, none());
    } else if (t < f.grid_t) {
      t = f.grid_t;
    }
    f.grid_t = t;
    while (narrow(f.g, t)) fold(f.g, f.slots);
    put(f.g, f.slots, t, x, f.any ? &f.last : nullptr);
  }

  // A sample into its bucket of `slots` (on g's grid), as the reader's figures_timeline buckets it: the value carried
  // in from the sample before (prev; none: the sample's own), the sample's figures, and the peak it reports where that
  // rose since prev (allocated, reserved reached it between the two).
  static void put(const IndexDevice& g, std::vector<IndexBucket>& slots, uint64_t t, const Sample& x,
                  const Sample* prev) {
    const uint64_t k = slot(g, t);
    IndexBucket& b = slots[k];
    if (b.t_ns == kEmpty) {
      const Sample& in = prev ? *prev : x;
      b = IndexBucket{g.origin_ns + k * g.bucket_ns, in.a, in.a, in.r, in.r, in.a, in.r};
    }
    b.allocated_min = std::min(b.allocated_min, x.a), b.allocated_max = std::max(b.allocated_max, x.a);
    b.reserved_min = std::min(b.reserved_min, x.r), b.reserved_max = std::max(b.reserved_max, x.r);
    if (prev && x.pa > prev->pa) b.allocated_max = std::max(b.allocated_max, x.pa);
    if (prev && x.pr > prev->pr) b.reserved_max = std::max(b.reserved_max, x.pr);
    b.allocated_last = x.a, b.reserved_last = x.r;
  }

  // Per device, in device order, as the index carries it: its figures and every slot (empty: t_ns == kEmpty).
  std::vector<std::pair<IndexDevice, std::vector<IndexBucket>>> outputs() const {
    std::map<uint8_t, std::pair<IndexDevice, std::vector<IndexBucket>>> out;
    for (const auto& [idx, d] : devices_)
      out.emplace(idx, d.any_event && !d.after.empty() ? after_events(d) : std::make_pair(finished(d), d.slots));
    for (const auto& [idx, f] : figures_) {
      auto it = devices_.find(idx);
      const Device* d = it == devices_.end() ? nullptr : &it->second;
      if (f.memory && !(d && d->any_event)) out[idx] = figures_only(idx, f, d);
    }
    std::vector<std::pair<IndexDevice, std::vector<IndexBucket>>> v;
    v.reserve(out.size());
    for (auto& [idx, o] : out) v.push_back(std::move(o));
    return v;
  }

  // A device with events and samples after T_off: the events' buckets up to T_off and the samples' from it, merged.
  static std::pair<IndexDevice, std::vector<IndexBucket>> after_events(const Device& d) {
    // The events' buckets and figures at T_off (as they are, when no event came after it).
    std::vector<IndexBucket> slots = d.at_off ? d.at_off->slots : d.slots;
    const int64_t a = d.at_off ? d.at_off->a : d.a, r = d.at_off ? d.at_off->r : d.r;
    int64_t pa = d.at_off ? d.at_off->peak_a : d.d.peak_allocated, pr = d.at_off ? d.at_off->peak_r : d.d.peak_reserved;
    for (uint32_t k = 0; k < kIndexBuckets; k++) {
      const IndexBucket& s = d.after[k];
      IndexBucket& b = slots[k];
      if (s.t_ns == kEmpty) continue;
      if (b.t_ns == kEmpty) {
        b = s;
        continue;
      }
      b.allocated_min = std::min(b.allocated_min, s.allocated_min);
      b.allocated_max = std::max(b.allocated_max, s.allocated_max);
      b.reserved_min = std::min(b.reserved_min, s.reserved_min);
      b.reserved_max = std::max(b.reserved_max, s.reserved_max);
      b.allocated_last = s.allocated_last, b.reserved_last = s.reserved_last;  // the samples come after the events
    }
    // The first sample's bucket: the events' figures at T_off carried in, and the peak it reports where that rose
    // above the events' peak up to T_off (or the sample before it, if that said more).
    IndexBucket& b = slots[slot(d.d, d.first_t)];
    b.allocated_min = std::min(b.allocated_min, a), b.allocated_max = std::max(b.allocated_max, a);
    b.reserved_min = std::min(b.reserved_min, r), b.reserved_max = std::max(b.reserved_max, r);
    if (d.before) pa = std::max(pa, d.before_pa), pr = std::max(pr, d.before_pr);
    if (d.first_after.pa > pa) b.allocated_max = std::max(b.allocated_max, d.first_after.pa);
    if (d.first_after.pr > pr) b.reserved_max = std::max(b.reserved_max, d.first_after.pr);
    // The figures: every event's, then the samples'.
    IndexDevice id = finished(d);
    id.last_event_ns = std::max(id.last_event_ns, d.last_t);  // where the buckets end
    id.range_first_ns = std::min(id.range_first_ns, d.after_t0);
    id.range_last_ns = std::max(id.range_last_ns, d.after_t1);
    if (d.after_peak_a > id.peak_allocated) id.peak_allocated = d.after_peak_a, id.peak_allocated_ns = d.after_peak_ns;
    id.peak_reserved = std::max(id.peak_reserved, d.after_peak_r);
    id.end_allocated = d.last_after.a, id.end_reserved = d.last_after.r;
    return {id, std::move(slots)};
  }

  // A device with no event and memory in its samples: its samples' figures and buckets.
  static std::pair<IndexDevice, std::vector<IndexBucket>> figures_only(uint8_t idx, const Figures& f, const Device* d) {
    IndexDevice id = d ? finished(*d) : IndexDevice{};
    id.device = idx;
    id.last_event_ns = f.grid_t;  // where the buckets end (first_event_ns stays 0: no event)
    id.range_first_ns = d && d->any_range ? std::min(id.range_first_ns, f.t0) : f.t0;
    id.range_last_ns = d && d->any_range ? std::max(id.range_last_ns, f.t1) : f.t1;
    id.bucket_ns = f.g.bucket_ns, id.origin_ns = f.g.origin_ns;
    id.peak_allocated = f.peak, id.peak_allocated_ns = f.peak_ns;
    id.peak_reserved = f.last.pr;  // as the reader's current(): the last sample's
    id.end_allocated = f.last.a, id.end_reserved = f.last.r;
    return {id, f.slots};
  }

  // File names by content (ids of this builder, fixed when a frame is read, as the reader interns them).
  uint32_t file_key(uint32_t string_id) {
    auto s = strings_.find(string_id);
    std::string name = s == strings_.end() ? std::string() : s->second;
    auto [it, fresh] = file_ids_.try_emplace(name, (uint32_t)files_.size());
    if (fresh) files_.push_back({name, (int8_t)-1});
    return it->second;
  }
  bool is_user_file(uint32_t file) {
    auto& f = files_[file];
    if (f.second < 0) f.second = is_user_path(f.first, internal_dirs_) ? 1 : 0;
    return f.second == 1;
  }
  static constexpr uint32_t kNoUserFile = UINT32_MAX;
  uint32_t line_id(uint32_t file, uint32_t line) {
    auto [it, fresh] = line_ids_.try_emplace({file, line}, (uint32_t)line_keys_.size());
    if (fresh) line_keys_.push_back({file, line});
    return it->second;
  }
  uint32_t no_user_line() { return line_id(kNoUserFile, 0); }
  uint32_t stack_line(uint32_t stack) {
    uint32_t v;
    return stack_lines_.get(stack, v) ? v : no_user_line();  // an unknown stack is the reader's stack 0: no frames
  }
  // Stack id → line id (fmt::IdMap, id_map.h).

  // The sections of Note [Index sections], as appended after the devices.
  std::string sections() const {
    std::string out;
    auto put = [&out](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    auto section = [&](uint16_t kind, const std::string& body) {
      IndexSection h{kind, 0, (uint32_t)body.size()};
      put(&h, sizeof h);
      out += body;
    };
    {
      std::vector<TopLine> lines = top_lines();
      std::string body;
      IndexTopLines t{(uint32_t)std::min<size_t>(lines.size(), kIndexTopLines), (uint32_t)lines.size()};
      body.append(reinterpret_cast<const char*>(&t), sizeof t);
      for (uint32_t k = 0; k < t.n; k++) {
        IndexLine l{lines[k].bytes, lines[k].line, (uint32_t)lines[k].file.size()};
        body.append(reinterpret_cast<const char*>(&l), sizeof l);
        body += lines[k].file;
      }
      section(IDX_TOP_LINES, body);
    }
    {
      std::string body;
      IndexDeviceNames h{(uint32_t)names_.size(), 0};
      body.append(reinterpret_cast<const char*>(&h), sizeof h);
      for (const auto& [device, name] : names_) {
        IndexDeviceName n{device, (uint32_t)name.first.size(), name.second};
        body.append(reinterpret_cast<const char*>(&n), sizeof n);
        body += name.first;
      }
      section(IDX_DEVICE_NAMES, body);
    }
    {
      IndexLosses l{lost_records_, 0, lost_events_};
      section(IDX_LOSSES, std::string(reinterpret_cast<const char*>(&l), sizeof l));
    }
    return out;
  }

  std::map<uint8_t, Device> devices_;
  bool lines_ = true;
  // Note [Figures after the events in the index]
  std::map<uint8_t, Figures> figures_;
  bool off_ = false;  // a MARK_EVENTS_OFF read: the events stopped at off_us_ (the reader's µs)
  int64_t off_us_ = 0;
  int64_t mono_ = 0, wall_ = 0;  // the header's clock anchors
  // Note [Lines at the peak in the index]
  std::vector<std::string> internal_dirs_;
  std::unordered_map<uint32_t, std::string> strings_;                   // capture string id → text
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> frames_;  // capture frame id → (file, line)
  std::unordered_map<std::string, uint32_t> file_ids_;
  std::vector<std::pair<std::string, int8_t>> files_;  // file → (name, user: -1 not yet known)
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> line_ids_;
  std::vector<std::pair<uint32_t, uint32_t>> line_keys_;  // line id → (file, line)
  IdMap stack_lines_;
  std::map<uint32_t, std::pair<std::string, uint64_t>> names_;  // device → (name, total bytes)
  uint32_t lost_records_ = 0;
  uint64_t lost_events_ = 0;
};

}  // namespace gpumem::fmt
