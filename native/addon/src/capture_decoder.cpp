#include "capture_decoder.h"

#include <chrono>
#include <cstddef>
#include <cstring>
#include <system_error>
#include <vector>

#include "gpumem_format.h"
// The allocator's small JSON parser (header-only): the header JSON is parsed strictly, never searched.
#include "json.h"

namespace gpumem {

namespace f = gpumem::fmt;

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

// Record types whose payload starts with `u64 t_ns` (every type but the interned tables).
bool timed(uint8_t type) {
  switch (type) {
    case f::REC_ALLOC:
    case f::REC_FREE_REQUESTED:
    case f::REC_FREE_COMPLETED:
    case f::REC_SEGMENT_ALLOC:
    case f::REC_SEGMENT_FREE:
    case f::REC_SEGMENT_MAP:
    case f::REC_SEGMENT_UNMAP:
    case f::REC_EMPTY_CACHE:
    case f::REC_OOM:
    case f::REC_STATE:
    case f::REC_DEVICE_SAMPLE:
    case f::REC_MARKER:
    case f::REC_NOTICE:
    case f::REC_STATS:
    case f::REC_DEVICE:
    case f::REC_LOST:
    case f::REC_END: return true;
    default: return false;
  }
}

uint8_t pool_of(uint16_t flags) {
  if (flags & f::kPoolPrivate) return POOL_PRIVATE;
  if (flags & f::kPoolSmall) return POOL_SMALL;
  return POOL_LARGE;
}

// A notice marker's detail: {"level":"warning"}.
std::string level_warning() {
  json::Writer j;
  return j.open('{').kvs("level", "warning").close('}').s;
}

}  // namespace

bool CaptureDecoder::looks_like_capture(const uint8_t* data, size_t len) {
  return len >= 6 && memcmp(data, f::kMagic, 6) == 0;
}

int64_t CaptureDecoder::to_us(uint64_t t_ns) const {
  int64_t wall = (int64_t)((uint64_t)wall_anchor_ns_ + (t_ns - (uint64_t)mono_anchor_ns_));
  return wall / 1000 - (wall % 1000 < 0 ? 1 : 0);  // floor division, no negation (INT64_MIN)
}

uint32_t CaptureDecoder::str(uint32_t id) const {
  uint32_t v = 0;
  return strings_.get(id, v) ? v : 0;
}

uint32_t CaptureDecoder::stack(uint32_t id) const {
  uint32_t v = 0;
  return stacks_.get(id, v) ? v : 0;
}

size_t CaptureDecoder::feed_header(Model& m, const uint8_t* data, size_t len) {
  if (len < sizeof(f::FileHeader)) {
    if (len >= 6 && !looks_like_capture(data, len))
      throw CaptureError(
          "this file is not a GPU Memory Lens capture (no GPUMEM magic); open a .gpumem file written by the lens "
          "allocator");
    return 0;
  }
  f::FileHeader fh = load<f::FileHeader>(data);
  if (memcmp(fh.magic, f::kMagic, 8) != 0)
    throw CaptureError(
        "this file is not a GPU Memory Lens capture (its first bytes are not the GPUMEM magic); open a .gpumem file "
        "written by the lens allocator");
  if (fh.major > f::kMajor)
    throw CaptureError("this capture uses format " + std::to_string(fh.major) + "." + std::to_string(fh.minor) +
                       ", newer than this version of GPU Memory Lens understands (" + std::to_string(f::kMajor) +
                       ".x); update the extension to open it");
  if (fh.major < 1)
    throw CaptureError("this capture declares format version 0, which was never released; the file is damaged");
  if (fh.json_bytes > f::kMaxHeaderJson)
    throw CaptureError("this capture's header claims " + std::to_string(fh.json_bytes) +
                       " bytes of JSON (more than the format allows); the file is damaged at byte 12");
  if (len < sizeof fh + fh.json_bytes) return 0;
  minor_ = fh.minor;
  m.format = "gpumem-capture";
  m.header_json.assign(reinterpret_cast<const char*>(data + sizeof fh), fh.json_bytes);
  // Note [Strict header]: the header JSON is parsed as JSON (json.h), never searched for substrings: a
  // key inside a string value (an argv element, a path) must not be mistaken for the key itself. A header
  // that is not a JSON object is damage (FORMAT.md §4); the records after it are still read, so what the
  // workload recorded is not lost to a bad header, but the problem is reported.
  json::Value h;
  std::string err;
  if (!json::parse(m.header_json, &h, &err) || !h.is_object()) {
    m.problems.push_back(Problem{sizeof fh,
                                 "the capture header is not a JSON object (" +
                                     (err.empty() ? std::string("not an object") : err) +
                                     "); identity, clock anchors and settings are unknown",
                                 "header"});
    h = json::Value::object();
    m.header_json = "{}";
  }
  auto int_of = [&](const char* key, int64_t& out) {
    const json::Value* v = h.find(key);
    if (!v || !v->is_int()) return false;
    out = v->as_int();
    return true;
  };
  // Note [Clock anchors]: events carry CLOCK_MONOTONIC ns; the header pairs one monotonic reading with
  // the wall clock so times share PyTorch's time_us axis. Without anchors, monotonic time is shown.
  int64_t mono = 0, wall = 0;
  if (int_of("mono_anchor_ns", mono) && int_of("wall_anchor_ns", wall)) {
    mono_anchor_ns_ = mono, wall_anchor_ns_ = wall;
  } else {
    m.problems.push_back(
        Problem{12, "the capture header has no clock anchors; times are the workload's monotonic clock, not wall time",
                "header"});
  }
  const json::Value* boot = h.find("bootstrap_dir");
  if (boot && boot->is_string() && boot->as_string().size() > 1) {
    std::string bootstrap = boot->as_string();
    while (bootstrap.size() > 1 && bootstrap.back() == '/') bootstrap.pop_back();
    m.non_user_dirs.push_back(bootstrap);
  }
  // Where torch.compile wrote its generated code when the run moved inductor's cache (TORCHINDUCTOR_CACHE_DIR):
  // not the user's lines either (Note [User frames]; the default cache's torchinductor_* name is in the rule).
  const json::Value* generated = h.find("generated_code_dirs");
  if (generated && generated->is_array())
    for (const json::Value& d : generated->items())
      if (d.is_string() && d.as_string().size() > 1) m.non_user_dirs.push_back(d.as_string());
  header_done_ = true;
  return sizeof fh + fh.json_bytes;
}

// Note [Prefault helper]: even as 2 MiB pages (Note [Huge columns]), the kernel zeroing the ~290 MB of columns of a
// 256 MiB budgeted capture was a third of its read, on the reading thread. For a first read of a big capture
// (≥ 32 MiB) a helper thread maps the event columns a little ahead of the decoder (madvise(MADV_POPULATE_WRITE),
// Note [Bulk prefault] in model.h), so the zeroing runs beside the decode where a second core is free. It maps no
// further than 2^18 events past what was decoded, so a capture with fewer events than its size suggests keeps its
// unused reservation unmapped; it is stopped and joined when feed() returns. The derived columns are left to
// derive(), after the file is unmapped: mapping them during the decode raised B's peak RSS by 90 MiB.
void CaptureDecoder::start_prefault(DeviceData& d) {
  prefault_dev_ = &d;
  progress_.store(d.count(), std::memory_order_relaxed);
  prefaulting_.store(true);
  try {
    std::vector<std::pair<void*, size_t>> cols = d.spare_columns();
    cols.resize(8);  // the event columns (spare_columns lists them first)
    prefault_ = std::thread([this, cols = std::move(cols), capacity = d.t.capacity()] {
      prefault_columns_ahead(cols, capacity, progress_, prefaulting_);
    });
  } catch (const std::system_error&) {
    prefaulting_.store(false);
    prefault_dev_ = nullptr;
  }
}

void CaptureDecoder::stop_prefault() {
  prefaulting_.store(false);
  if (prefault_.joinable()) prefault_.join();
  prefault_dev_ = nullptr;
}

size_t CaptureDecoder::feed(Model& m, const uint8_t* data, size_t len) {
  fresh_read_ = offset_ == 0;
  size_t used = feed_records(m, data, len);
  stop_prefault();
  return used;
}

size_t CaptureDecoder::feed_records(Model& m, const uint8_t* data, size_t len) {
  if (damaged_) return 0;
  size_t pos = 0;
  if (!header_done_) {
    pos = feed_header(m, data, len);
    if (!header_done_) {
      pending_ = len;
      return 0;
    }
    records_++;
    offset_ += pos;
  }
  while (true) {
    if (len - pos < sizeof(f::RecordHeader)) break;
    f::RecordHeader h = load<f::RecordHeader>(data + pos);
    if (h.payload_bytes > f::kMaxPayload || h.type == 0) {
      damaged_ = true;
      m.problems.push_back(Problem{offset_, "the capture is damaged at byte " + std::to_string(offset_) +
                                                " (a record of type " + std::to_string(h.type) + " claims " +
                                                std::to_string(h.payload_bytes) + " bytes); " +
                                                std::to_string(len - pos) + " bytes after it were not read"});
      pos = len;
      break;
    }
    if (len - pos - sizeof h < h.payload_bytes) break;  // incomplete: wait for the rest
    if (!record(m, h.type, h.device, h.flags, data + pos + sizeof h, h.payload_bytes, offset_)) {
      damaged_ = true;
      m.problems.back().message += "; " + std::to_string(len - pos) + " bytes from there on were not read";
      pos = len;
      break;
    }
    if (timed(h.type) && h.payload_bytes >= 8) m.saw_time(to_us(load<uint64_t>(data + pos + sizeof h)));
    if (prefault_dev_ && (++published_ & 0xFFFF) == 0)
      progress_.store(prefault_dev_->count(), std::memory_order_relaxed);
    pos += sizeof h + h.payload_bytes;
    offset_ += sizeof h + h.payload_bytes;
    if (h.type != f::REC_DEVICE_SAMPLE && h.type != f::REC_STATS) records_++;  // Note [Poll counts records]
  }
  pending_ = len - pos;
  return pos;
}

// Note [Record types]: every record type of gpumem_format.h is consumed by a case below, or ignored here
// with the reason; test/python/test_format_contract.py fails when a type is added without either.
//   Ignored: REC_INDEX — the whole run's overview for a first view (Note [Capture index], read by
//            capture_overview.cpp before the open); the open recomputes every figure from the events.
bool CaptureDecoder::record(Model& m, uint8_t type, uint8_t device, uint16_t flags, const uint8_t* p, uint32_t n,
                            uint64_t at) {
  auto too_short = [&](const char* what) {
    m.problems.push_back(Problem{at, std::string("the capture is damaged at byte ") + std::to_string(at) + ": a " +
                                         what + " record is shorter than its layout (" + std::to_string(n) +
                                         " bytes)"});
    return false;
  };
  switch (type) {
    case f::REC_STRING: {
      if (n < sizeof(f::StringRec)) return too_short("string");
      auto r = load<f::StringRec>(p);
      if (r.len > n - sizeof r) return too_short("string");
      strings_.set(r.id, m.intern(std::string_view(reinterpret_cast<const char*>(p + sizeof r), r.len)));
      return true;
    }
    case f::REC_FRAME: {
      if (n < sizeof(f::FrameRec)) return too_short("frame");
      auto r = load<f::FrameRec>(p);
      frames_.set(r.id, m.intern_frame(str(r.file), str(r.function), r.line));
      return true;
    }
    case f::REC_STACK: {
      if (n < sizeof(f::StackRec)) return too_short("stack");
      auto r = load<f::StackRec>(p);
      if (r.nframes > (n - sizeof r) / 4) return too_short("stack");
      std::vector<uint32_t> ids;
      ids.reserve(r.nframes);
      for (uint32_t k = 0; k < r.nframes; k++) {
        uint32_t fid;
        if (frames_.get(load<uint32_t>(p + sizeof r + 4 * k), fid)) ids.push_back(fid);
      }
      stacks_.set(r.id, m.intern_stack(ids, r.flags));
      return true;
    }
    case f::REC_ALLOC:
    case f::REC_FREE_REQUESTED:
    case f::REC_FREE_COMPLETED: {
      if (n < sizeof(f::BlockEvent)) return too_short("block event");
      auto e = load<f::BlockEvent>(p);
      uint8_t act = type == f::REC_ALLOC            ? ACT_ALLOC
                    : type == f::REC_FREE_REQUESTED ? ACT_FREE_REQUESTED
                                                    : ACT_FREE_COMPLETED;
      DeviceData& d = dev(m, device);
      if (flags & f::kRestated) d.restated.push_back((uint32_t)d.count());
      if (!labels_.empty()) {
        // Note [User metadata] (gpumem_format.h): the label of the event's thread, kept as a pickle's user_metadata.
        auto it = labels_.find(e.thread);
        if (it != labels_.end()) d.context_and_metadata[(uint32_t)d.count()] = {na_id_, it->second};
      }
      d.push_event(to_us(e.t_ns), act, e.addr, e.size, e.requested, e.stream, stack(e.stack), pool_of(flags));
      return true;
    }
    case f::REC_AGGREGATED: {
      if (n < sizeof(f::AggregatedRec)) return too_short("aggregated range");
      auto r = load<f::AggregatedRec>(p);
      m.aggregated.push_back(AggregatedRange{to_us(r.t_begin_ns), to_us(r.t_end_ns), r.events, r.bytes, r.budget_bytes,
                                             r.restated, r.peaks});
      m.saw_time(to_us(r.t_end_ns));
      return true;
    }
    case f::REC_TIMELINE: {
      if (n < sizeof(f::TimelineRec)) return too_short("timeline");
      auto r = load<f::TimelineRec>(p);
      if (r.nbuckets > (n - sizeof r) / sizeof(f::TimelineBucket)) return too_short("timeline");
      DeviceData& d = dev(m, device);
      for (uint32_t k = 0; k < r.nbuckets; k++) {
        auto b = load<f::TimelineBucket>(p + sizeof r + k * sizeof(f::TimelineBucket));
        d.compacted_timeline.push_back(DeviceData::Bucket{to_us(b.t_ns), to_us(b.t_ns + r.bucket_ns), b.allocated_min,
                                                          b.allocated_max, b.reserved_min, b.reserved_max});
      }
      return true;
    }
    case f::REC_LINE_TOTALS: {
      if (n < sizeof(f::LineTotalsRec)) return too_short("line totals");
      auto r = load<f::LineTotalsRec>(p);
      if (r.n > (n - sizeof r) / sizeof(f::LineTotal)) return too_short("line totals");
      DeviceData& d = dev(m, device);
      for (uint32_t k = 0; k < r.n; k++) {
        auto l = load<f::LineTotal>(p + sizeof r + k * sizeof(f::LineTotal));
        auto& t = d.compacted_lines[stack(l.stack)];
        t.first += l.count, t.second += l.bytes;
      }
      return true;
    }
    case f::REC_SEGMENT_ALLOC:
    case f::REC_SEGMENT_FREE:
    case f::REC_SEGMENT_MAP:
    case f::REC_SEGMENT_UNMAP: {
      if (n < sizeof(f::SegmentEvent)) return too_short("segment event");
      auto e = load<f::SegmentEvent>(p);
      DeviceData& d = dev(m, device);
      // Note [Expandable reservations]: an expandable segment's VA reservation holds no memory (PyTorch
      // reports only its mapped pages), so segment_alloc/free flagged expandable do not count as reserved.
      if ((type == f::REC_SEGMENT_ALLOC || type == f::REC_SEGMENT_FREE) && (flags & f::kSegExpandable)) return true;
      uint8_t act = type == f::REC_SEGMENT_ALLOC  ? ACT_SEGMENT_ALLOC
                    : type == f::REC_SEGMENT_FREE ? ACT_SEGMENT_FREE
                    : type == f::REC_SEGMENT_MAP  ? ACT_SEGMENT_MAP
                                                  : ACT_SEGMENT_UNMAP;
      const bool private_pool = e.pool_id0 || e.pool_id1;
      d.push_event(to_us(e.t_ns), act, e.addr, e.size, 0, e.stream, stack(e.stack),
                   private_pool ? uint8_t(POOL_PRIVATE) : pool_of(flags));
      if (private_pool) d.segment_pools[uint32_t(d.count() - 1)] = {e.pool_id0, e.pool_id1};
      return true;
    }
    case f::REC_EMPTY_CACHE: {
      if (n < sizeof(f::EmptyCacheRec)) return too_short("empty-cache");
      auto r = load<f::EmptyCacheRec>(p);
      static const char* origins[] = {"torch.cuda.empty_cache()", "Empty Cache command", "out-of-memory retry"};
      json::Writer detail;
      detail.open('{').kvu("reservedBefore", r.reserved_before).kvu("reservedAfter", r.reserved_after);
      detail.kvs("origin", r.origin < 3 ? origins[r.origin] : "unknown").close('}');
      dev(m, device).markers.push_back(MarkerData{to_us(r.t_ns), 3, m.intern("empty cache"), detail.s});
      return true;
    }
    case f::REC_OOM: {
      if (n < sizeof(f::OomRec)) return too_short("out-of-memory");
      auto r = load<f::OomRec>(p);
      DeviceData& d = dev(m, device);
      OomData o{to_us(r.t_ns), r.requested,    r.device_free,  r.device_total, r.reserved,
                r.allocated,   r.largest_free, stack(r.stack), true,           (uint32_t)d.count()};
      d.ooms.push_back(o);
      d.push_event(o.t_us, ACT_OOM, r.device_free, r.requested, 0, r.stream, o.stack, POOL_LARGE);
      json::Writer detail;
      detail.open('{').kvu("requestedBytes", r.requested).close('}');
      d.markers.push_back(MarkerData{o.t_us, 5, m.intern("out of memory"), detail.s});
      return true;
    }
    case f::REC_STATE: {
      if (n < sizeof(f::StateRec)) return too_short("state");
      auto r = load<f::StateRec>(p);
      size_t pos = sizeof r;
      std::vector<SegmentData> segs;
      for (uint32_t s = 0; s < r.nsegments; s++) {
        if (n - pos < sizeof(f::StateSegment)) return too_short("state");
        auto g = load<f::StateSegment>(p + pos);
        pos += sizeof g;
        SegmentData sd;
        sd.addr = g.addr, sd.size = g.size, sd.stream = g.stream, sd.pool_id0 = g.pool_id0, sd.pool_id1 = g.pool_id1;
        sd.stack = stack(g.stack), sd.pool = pool_of(g.flags), sd.expandable = (g.flags & f::kSegExpandable) != 0;
        if (g.nblocks > (n - pos) / sizeof(f::StateBlock)) return too_short("state");
        for (uint32_t b = 0; b < g.nblocks; b++, pos += sizeof(f::StateBlock)) {
          auto bl = load<f::StateBlock>(p + pos);
          sd.blocks.push_back(
              BlockData{bl.addr, bl.size, bl.requested, stack(bl.stack), (uint8_t)(bl.state <= 2 ? bl.state : 0)});
        }
        segs.push_back(std::move(sd));
      }
      DeviceData& d = dev(m, device);
      d.checkpoints.push_back({d.count(), segs});
      d.have_final = true;
      d.final_after = d.count();
      d.final_segments = std::move(segs);
      if (r.reason == 0) {
        // Like PyTorch's trace: a requested snapshot is a 'snapshot' entry whose size is the allocated bytes.
        uint64_t allocated = 0;
        for (const auto& g : d.final_segments)
          for (const auto& b : g.blocks)
            if (b.state == ST_ALLOCATED) allocated += b.size;
        int64_t t_us = to_us(r.t_ns);
        d.push_event(t_us, ACT_SNAPSHOT, 0, allocated, 0, 0, 0, POOL_LARGE);
        d.final_after = d.count();
        d.checkpoints.back().first = d.count();
        d.markers.push_back(MarkerData{t_us, 4, m.intern("snapshot"), ""});
      }
      return true;
    }
    case f::REC_DEVICE_SAMPLE: {
      if (n < sizeof(f::DeviceSampleRec)) return too_short("device sample");
      auto r = load<f::DeviceSampleRec>(p);
      dev(m, device).samples.push_back(SampleData{to_us(r.t_ns), r.used, r.total});
      return true;
    }
    case f::REC_MARKER: {
      if (n < sizeof(f::MarkerRec)) return too_short("marker");
      auto r = load<f::MarkerRec>(p);
      uint32_t name = str(r.name);
      // Phases are process-wide facts (written once, device 0): every device that has events gets the boundary
      // at its own event count, which is exact because the main thread appends the marker after its events.
      auto boundary = [&](uint8_t phase) {
        for (DeviceData* d : devs_)
          if (d) d->phases.push_back(PhaseMark{(uint32_t)d->count(), phase});
      };
      if (r.kind == f::MARK_PHASE) {
        const std::string& s = m.strings[name];
        if (s == "backward")
          boundary(PHASE_BACKWARD);
        else if (s == "optimizer")
          boundary(PHASE_OPTIMIZER);
        return true;  // not a marker users see
      }
      if (r.kind == f::MARK_MODULE_BEGIN || r.kind == f::MARK_MODULE_END) {
        // Like phases, process-wide: the forward's thread appends its marks after its own events.
        for (DeviceData* d : devs_)
          if (d) d->module_marks.push_back(ModuleMark{(uint32_t)d->count(), name, r.kind == f::MARK_MODULE_BEGIN});
        return true;  // not a marker users see (hundreds per step)
      }
      if (r.kind == f::MARK_EVENTS_OFF) {
        // Note [Figures after the events]: process-wide, so the model holds it for every device, those announced
        // later included; the first marker wins. Users see it as a notice (process-wide on device 0) that says why.
        if (m.events_off) return true;
        m.events_off = true;
        m.events_off_us = to_us(r.t_ns);
        const std::string& why = m.strings[name];
        std::string text = "allocations no longer recorded one by one";
        if (!why.empty()) text += " (" + why + ")";
        text += ": from here on, PyTorch's figures at each sample";
        json::Writer detail;
        detail.open('{').kvs("level", "info").close('}');
        dev(m, device).markers.push_back(MarkerData{m.events_off_us, 6, m.intern(text), detail.s});
        return true;
      }
      if (r.kind == f::MARK_STEP) {
        const std::string& s = m.strings[name];
        if (s == "backward" || s == "optimizer.step") boundary(PHASE_OTHER);
      }
      uint8_t kind = r.kind == f::MARK_BEGIN      ? 1
                     : r.kind == f::MARK_END      ? 2
                     : r.kind == f::MARK_SNAPSHOT ? 4
                     : r.kind == f::MARK_STEP     ? 7
                                                  : 0;
      dev(m, device).markers.push_back(MarkerData{to_us(r.t_ns), kind, name, ""});
      return true;
    }
    case f::REC_NOTICE: {
      if (n < sizeof(f::NoticeRec)) return too_short("notice");
      auto r = load<f::NoticeRec>(p);
      static const char* levels[] = {"info", "warning", "error"};
      json::Writer detail;
      detail.open('{').kvs("level", r.level < 3 ? levels[r.level] : "info").close('}');
      dev(m, device).markers.push_back(MarkerData{to_us(r.t_ns), 6, str(r.text), detail.s});
      return true;
    }
    case f::REC_TAG: {
      if (n < sizeof(f::TagRec)) return too_short("tag");
      auto r = load<f::TagRec>(p);
      if (r.category < f::TAG_PARAMETER || r.category > f::TAG_BUFFER) return true;  // a newer category
      DeviceData& d = dev(m, device);
      d.tags.push_back(TagData{(uint32_t)d.count(), r.addr, r.size, (uint8_t)r.category});
      return true;
    }
    case f::REC_USER_METADATA: {
      if (n < sizeof(f::UserMetadataRec)) return too_short("user metadata");
      auto r = load<f::UserMetadataRec>(p);
      if (r.text == 0) {
        labels_.erase(r.thread);
        return true;
      }
      uint32_t text = 0;
      if (!strings_.get(r.text, text)) text = m.intern("?");  // an unknown id: "unknown", as FORMAT.md §4 says
      if (labels_.empty()) na_id_ = m.intern("N/A");          // PyTorch's compile_context when there is none
      labels_[r.thread] = text;
      return true;
    }
    case f::REC_LOST: {
      if (n < sizeof(f::LostRec)) return too_short("lost-events");
      auto r = load<f::LostRec>(p);
      int64_t t_us = to_us(r.t_ns);
      // A LostRec is written when the next record gets through, so its time ends the loss. The loss began
      // after the last record that was written before it: that is where "lost from" points.
      if (m.lost_events == 0) m.first_lost_us = m.have_last_us ? std::min(m.last_us, t_us) : t_us;
      m.lost_events += r.count;
      m.problems.push_back(Problem{
          at,
          std::to_string(r.count) +
              " events were dropped by the recorder (its buffer bound was hit); figures after this point undercount",
          "lost"});
      dev(m, device).markers.push_back(
          MarkerData{t_us, 6, m.intern(std::to_string(r.count) + " events lost"), level_warning()});
      return true;
    }
    case f::REC_END: {
      // Minor ≤ 1 wrote 16 bytes (t_ns, exit_code, pad = 0): reason 0 (clean), no message.
      constexpr uint32_t kOldEnd = 16;
      if (n < kOldEnd) return too_short("end");
      f::EndRec r{};
      memcpy(&r, p, std::min<size_t>(n, sizeof r));
      if (n < offsetof(f::EndRec, index_bytes)) r.reason = 0, r.message = 0;  // minor ≤ 1: no reason, no message
      m.ended = true;
      m.end.seen = true;
      m.end.t_us = to_us(r.t_ns);
      m.end.exit_code = r.exit_code;
      m.end.reason = r.reason;
      m.end.message = r.message ? m.strings[str(r.message)] : "";
      m.saw_time(m.end.t_us);
      return true;
    }
    case f::REC_DEVICE: {
      if (n < sizeof(f::DeviceRec)) return too_short("device");
      auto r = load<f::DeviceRec>(p);
      DeviceIdentity& id = m.device_ids[device];
      id.name = m.strings[str(r.name)];
      id.total_bytes = r.total_bytes;
      id.pci_bus_id = r.pci_bus_id ? m.strings[str(r.pci_bus_id)] : "";
      return true;
    }
    case f::REC_STATS: {  // read where a device has no events, or after the events stop (Notes [Figures from stats],
                          // [Figures after the events])
      if (n < sizeof(f::StatsRec)) return too_short("stats");
      auto r = load<f::StatsRec>(p);
      dev(m, device).figures.push_back(FigureSample{to_us(r.t_ns), (int64_t)r.allocated, (int64_t)r.reserved,
                                                    (int64_t)r.peak_allocated, (int64_t)r.peak_reserved});
      return true;
    }
    case f::REC_INDEX: return true;  // ignored: Note [Record types]
    default:
      // Note [Strict about our own writer]: a record type this reader does not know is skipped only in a
      // capture of a newer minor version (Note [Versioning]); in one of this version or older, our writer
      // never writes it, so it is damage: reported with its offset and type, and reading stops there.
      if (minor_ > f::kMinor) return true;
      m.problems.push_back(Problem{
          at, "the capture is damaged at byte " + std::to_string(at) + ": record type " + std::to_string(type) +
                  " is not one that format " + std::to_string(f::kMajor) + "." + std::to_string(minor_) + " defines (" +
                  std::to_string(n) + "-byte payload); the capture was written by format " + std::to_string(f::kMajor) +
                  "." + std::to_string(minor_) + ", so this is damage, not a newer record"});
      return false;
  }
}

}  // namespace gpumem
