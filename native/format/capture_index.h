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
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
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
  };

  // lines = false: the figures and buckets only (a first view's pass over a capture without an index), no sections.
  explicit IndexBuilder(bool lines = true) : lines_(lines) {}

  // The capture's header JSON: the tool's own directories, which are never the user's lines (Note [User frames]).
  void header(std::string_view json_text) {
    json::Value h;
    std::string err;
    internal_dirs_.clear();
    if (json::parse(std::string(json_text), &h, &err) && h.is_object()) internal_dirs_ = internal_dirs_of_header(h);
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
    std::vector<std::pair<IndexDevice, std::vector<IndexBucket>>> ds;
    for (const auto& [idx, d] : devices_) ds.emplace_back(finished(d), d.slots);
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
  // A damaged time (2^63 ns) would double the width until `bucket_ns * kIndexBuckets` wraps to 0 and loop for ever
  // (found by fuzz_capture): the width stops at the largest that does not wrap, and such a time lands in the last slot.
  static void widen(Device& d, uint64_t t) {
    constexpr uint64_t kWidest = (~0ull / kIndexBuckets) / 2;
    while (t - d.d.origin_ns >= d.d.bucket_ns * kIndexBuckets && d.d.bucket_ns <= kWidest) fold(d);
  }
  // Folds the buckets in pairs into the first half, doubling their width.
  static void fold(Device& d) { fold(d.d, d.slots); }
  static void fold(IndexDevice& dd, std::vector<IndexBucket>& slots) {
    for (uint32_t k = 0; k < kIndexBuckets / 2; k++) {
      IndexBucket a = slots[2 * k], b = slots[2 * k + 1];
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
      if (m.t_ns != kEmpty) m.t_ns = dd.origin_ns + (uint64_t)k * dd.bucket_ns * 2;
      slots[k] = m;
    }
    for (uint32_t k = kIndexBuckets / 2; k < kIndexBuckets; k++) slots[k] = IndexBucket{kEmpty, 0, 0, 0, 0, 0, 0};
    dd.bucket_ns *= 2;
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
