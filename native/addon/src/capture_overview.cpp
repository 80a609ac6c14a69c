// capture_overview.cpp — the first view of a .gpumem capture.
//
// Note [Capture first view]: the snapshot panel paints a pickle's overview before the full open (Note [First
// view], overview.cpp); a capture gets the same message, from its own index. A capture written by a writer of
// minor ≥ 6 that closed cleanly ends with REC_INDEX + REC_END (Note [Capture index] in gpumem_format.h): this reads
// the header (for the clock anchors), the last 32 bytes (the END, whose index_bytes says where the index starts)
// and the index, so the first view costs the same for 1 MiB and for 1 GiB. Without an index — an older writer, a
// process that died (no END), a live capture, an index that does not check out — it runs the writer's own
// IndexBuilder (capture_index.h) over the records, as the writer would have: a tree-less pass that decodes no
// stack, interns nothing and stops at the first incomplete or oversized record (a truncated capture gives the
// view of what it holds, "complete": false). Either way the per-device figures (events, time range, peaks, end
// state) are the full open's (test/unit/capture-index.test.mjs), the REC_STATS samples' where the full open reads them
// (a capture whose events stopped at MARK_EVENTS_OFF, a device with figures only: Note [Figures after the events in the
// index] in capture_index.h; test/unit/overview-after-events.test.mjs); the buckets are the index's, resampled to the
// panel's: each panel bucket holds the min/max of every index bucket that overlaps it (and the value carried across
// it), an envelope of the full open's buckets, never narrower.
//
// Note [Rank row from the index]: a rank of `gpumem summary DIR…` and of the ranks view is one row (host, rank, device
// and its name, peaks, OOMs, the top line at the peak) and one allocated/reserved series; before the index
// sections every rank was a full open, only for the top line at the peak. The writer's index now carries what the
// row needs beyond its devices (Note [Index sections] in gpumem_format.h: the lines at the peak by the reader's rules,
// Note [Lines at the peak in the index] in capture_index.h; the REC_DEVICE names; the losses), and this first view
// hands it over as "row" with the parsed header, so a rank costs its header, its last 32 bytes and its index, whatever
// its size (rankRowOfIndex in src/core/analyses/ranks/index.ts). "row" is left out when the full open would say more
// than the index can: a header that is not a JSON object or lacks the clock anchors (a header problem), and the
// rank row falls back to the full open too when the recorder lost events (each REC_LOST is a problem of the full
// open) or the index has no sections (the first minor-6 writers); pickles have no index at all. With index_only, a
// capture without an index is an error rather than a pass over its records: the caller opens it in full anyway.
#include "capture_overview.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "capture_index.h"
#include "gpumem_format.h"
#include "json.h"
#include "overview.h"

namespace gpumem {
namespace {

namespace f = fmt;

template <class T>
T load(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

struct Clock {
  int64_t mono = 0, wall = 0;
  // As CaptureDecoder::to_us.
  int64_t us(uint64_t t_ns) const {
    int64_t w = (int64_t)((uint64_t)wall + (t_ns - (uint64_t)mono));
    return w / 1000 - (w % 1000 < 0 ? 1 : 0);
  }
};

using Devices = std::vector<std::pair<f::IndexDevice, std::vector<f::IndexBucket>>>;

// Note [Index sections] (gpumem_format.h): what the index carries after its devices.
struct Sections {
  bool top_lines = false, device_names = false, losses = false;
  uint32_t lines = 0;
  std::vector<std::pair<std::string, f::IndexLine>> top;
  std::vector<std::pair<std::string, f::IndexDeviceName>> names;
  f::IndexLosses lost{};
  bool all() const { return top_lines && device_names && losses; }
};

// A section of `len` bytes at b: its Head (with n), then n Entry records, each followed by its string of
// (entry.*str_len) bytes; false when one overruns the section.
template <class Head, class Entry>
bool named_entries(const uint8_t* b, size_t len, uint32_t Entry::*str_len, Head* head,
                   std::vector<std::pair<std::string, Entry>>* out) {
  if (len < sizeof(Head)) return false;
  *head = load<Head>(b);
  size_t at = sizeof(Head);
  for (uint32_t k = 0; k < head->n; k++) {
    if (len - at < sizeof(Entry)) return false;
    auto e = load<Entry>(b + at);
    at += sizeof e;
    if (e.*str_len > len - at) return false;
    out->emplace_back(std::string(reinterpret_cast<const char*>(b + at), e.*str_len), e);
    at += e.*str_len;
  }
  return true;
}

// The sections in [p, p + n); false when one does not check out (then none is used).
bool read_sections(const uint8_t* p, size_t n, Sections* out) {
  size_t pos = 0;
  while (n - pos >= sizeof(f::IndexSection)) {
    auto h = load<f::IndexSection>(p + pos);
    pos += sizeof h;
    if (h.bytes > n - pos) return false;
    const uint8_t* b = p + pos;
    const size_t len = h.bytes;
    pos += len;
    switch (h.kind) {
      case f::IDX_TOP_LINES: {
        f::IndexTopLines t;
        if (!named_entries(b, len, &f::IndexLine::file_len, &t, &out->top)) return false;
        out->lines = t.lines, out->top_lines = true;
        break;
      }
      case f::IDX_DEVICE_NAMES: {
        f::IndexDeviceNames t;
        if (!named_entries(b, len, &f::IndexDeviceName::name_len, &t, &out->names)) return false;
        out->device_names = true;
        break;
      }
      case f::IDX_LOSSES:
        if (len < sizeof(f::IndexLosses)) return false;
        out->lost = load<f::IndexLosses>(b), out->losses = true;
        break;
      default: break;  // a kind of a newer writer
    }
  }
  return true;
}

// The REC_INDEX named by the END at the file's end; false when there is none or it does not check out.
bool read_index(const uint8_t* data, size_t size, size_t data_start, Devices* out, Sections* sections) {
  constexpr size_t kTail = sizeof(f::RecordHeader) + sizeof(f::EndRec);
  if (size < data_start + kTail) return false;
  auto eh = load<f::RecordHeader>(data + size - kTail);
  if (eh.type != f::REC_END || eh.payload_bytes != sizeof(f::EndRec)) return false;
  auto er = load<f::EndRec>(data + size - sizeof(f::EndRec));
  const size_t end_at = size - kTail;
  if (er.index_bytes < sizeof(f::RecordHeader) + sizeof(f::IndexRec) || er.index_bytes > end_at - data_start)
    return false;
  const size_t at = end_at - er.index_bytes;
  auto ih = load<f::RecordHeader>(data + at);
  if (ih.type != f::REC_INDEX || sizeof ih + ih.payload_bytes != er.index_bytes) return false;
  const uint8_t* p = data + at + sizeof ih;
  const size_t n = ih.payload_bytes;
  auto ir = load<f::IndexRec>(p);
  if (ir.device_bytes < sizeof(f::IndexDevice) || ir.bucket_bytes < sizeof(f::IndexBucket)) return false;
  size_t pos = sizeof ir;
  for (uint32_t k = 0; k < ir.ndevices; k++) {
    if (n - pos < ir.device_bytes) return false;
    auto d = load<f::IndexDevice>(p + pos);
    pos += ir.device_bytes;
    if (d.nbuckets > (n - pos) / ir.bucket_bytes) return false;
    std::vector<f::IndexBucket> b(d.nbuckets);
    for (uint32_t i = 0; i < d.nbuckets; i++, pos += ir.bucket_bytes) b[i] = load<f::IndexBucket>(p + pos);
    out->emplace_back(d, std::move(b));
  }
  if (!read_sections(p + pos, n - pos, sections)) *sections = Sections{};
  return true;
}

}  // namespace

std::string capture_overview_json(const uint8_t* data, size_t size, int buckets, bool index_only,
                                  const OverviewWindow* window) {
  if (size < sizeof(f::FileHeader) || memcmp(data, f::kMagic, sizeof f::kMagic) != 0)
    throw std::runtime_error("capture overview: not a capture");
  auto fh = load<f::FileHeader>(data);
  if (fh.major != f::kMajor || fh.json_bytes > f::kMaxHeaderJson || size < sizeof fh + fh.json_bytes)
    throw std::runtime_error("capture overview: a header this pass does not read");
  // buckets 0: the figures alone, no series (a rank row's first pass, Note [Rank row from the index]).
  if (buckets < 0 || buckets > 1 << 20) throw std::runtime_error("capture overview: buckets out of range");
  const size_t data_start = sizeof fh + fh.json_bytes;
  Clock clock;
  const std::string header_text(reinterpret_cast<const char*>(data + sizeof fh), fh.json_bytes);
  bool header_whole = false;  // a JSON object with clock anchors: the full open reports no header problem
  {
    json::Value h;
    std::string err;
    if (json::parse(header_text, &h, &err) && h.is_object()) {
      const json::Value* m = h.find("mono_anchor_ns");
      const json::Value* w = h.find("wall_anchor_ns");
      if (m && w && m->is_int() && w->is_int()) clock.mono = m->as_int(), clock.wall = w->as_int(), header_whole = true;
    }
  }
  Devices devs;
  Sections sections;
  bool from_index = read_index(data, size, data_start, &devs, &sections);
  if (!from_index && index_only) throw std::runtime_error("capture overview: the capture has no index");
  bool complete = from_index;
  if (!from_index) {
    devs.clear();
    f::IndexBuilder b(false);  // the figures and buckets only
    b.header(header_text);     // its clock anchors (Note [Figures after the events in the index])
    size_t used = data_start + b.observe_all(data + data_start, size - data_start);
    devs = b.devices();
    // Complete when the records end at the file's end with an END (a capture of an older writer that closed).
    constexpr size_t kOldEnd = sizeof(f::RecordHeader) + 16;
    complete = used == size && size >= data_start + kOldEnd;
    if (complete) {
      // The last record is an END of 16 to 24 bytes: find it by trying each size the format has had.
      bool ended = false;
      for (uint32_t pb : {16u, 20u, 24u})
        if (size >= data_start + sizeof(f::RecordHeader) + pb) {
          auto h = load<f::RecordHeader>(data + size - sizeof(f::RecordHeader) - pb);
          ended |= h.type == f::REC_END && h.payload_bytes == pb;
        }
      complete = ended;
    }
  }

  json::Writer j;
  j.open('{').kvs("source", from_index ? "index" : "scan").kvb("complete", complete).key("devices").open('[');
  for (const auto& [d, bk] : devs) {
    // A device without events is shown where its buckets are its samples' (figures only, Note [Figures after the
    // events in the index]), as the full open shows it (Note [Figures from stats]).
    if (d.events == 0 && bk.empty()) continue;
    const double range_t0 = (double)clock.us(d.range_first_ns), range_t1 = (double)clock.us(d.range_last_ns);
    double t0 = range_t0, t1 = range_t1;
    if (window) t0 = window->t0_us, t1 = window->t1_us;
    if (!(t1 > t0)) t1 = t0 + 1;
    // On a window (a shared axis, Note [Rank row from the index]) the device's end state is carried to its own end, not
    // the window's: after its last moment a finished rank recorded nothing, and its columns stay 0.
    const double carry_end = window ? std::max(range_t1, range_t0) : t1;
    const double w = (t1 - t0) / std::max(buckets, 1);
    auto col = [&](double t_us) {
      double k = std::floor((t_us - t0) / w);
      return (int)std::min<double>(buckets - 1, std::max<double>(0, k));
    };
    constexpr int64_t kHi = std::numeric_limits<int64_t>::max(), kLo = std::numeric_limits<int64_t>::min();
    std::vector<int64_t> amin(buckets, kHi), amax(buckets, kLo), rmin(buckets, kHi), rmax(buckets, kLo);
    auto widen = [&](int k0, int k1, int64_t alo, int64_t ahi, int64_t rlo, int64_t rhi) {
      for (int k = k0; k <= k1; k++) {
        amin[k] = std::min(amin[k], alo), amax[k] = std::max(amax[k], ahi);
        rmin[k] = std::min(rmin[k], rlo), rmax[k] = std::max(rmax[k], rhi);
      }
    };
    // Where the buckets end: the last event, or the last sample where the samples carry the figures (capture_index.h).
    const double last_event = (double)clock.us(d.last_event_ns);
    // Before the first event: the start (0), carried into the bucket of the first event. Figures only: 0 before the
    // first sample, whose bucket starts from its own figures (the reader's figures_timeline).
    if (!bk.empty() && buckets) {
      const int first = col((double)clock.us(bk[0].t_ns));
      if (d.events)
        widen(0, first, 0, 0, 0, 0);
      else if (first > 0)
        widen(0, first - 1, 0, 0, 0, 0);
    }
    for (size_t i = 0; buckets && i < bk.size(); i++) {
      const f::IndexBucket& b = bk[i];
      const double s = (double)clock.us(b.t_ns);
      const double e = std::min((double)clock.us(b.t_ns + d.bucket_ns), last_event);
      const double next = i + 1 < bk.size() ? (double)clock.us(bk[i + 1].t_ns) : carry_end;
      widen(col(s), col(std::max(s, e)), b.allocated_min, b.allocated_max, b.reserved_min, b.reserved_max);
      widen(col(s), col(std::max(s, next)), b.allocated_last, b.allocated_last, b.reserved_last, b.reserved_last);
    }
    for (int k = 0; k < buckets; k++)
      if (amin[k] == kHi) amin[k] = amax[k] = rmin[k] = rmax[k] = 0;  // not reached: every column is covered
    j.open('{').kv("device", (int64_t)d.device).kv("events", (int64_t)d.events);
    j.kvd("rangeT0Us", range_t0).kvd("rangeT1Us", range_t1);
    j.kvd("t0Us", t0).kvd("t1Us", t1).kv("buckets", buckets);
    j.kv("peakAllocatedBytes", d.peak_allocated).kv("peakReservedBytes", d.peak_reserved);
    j.kv("peakAtTimeUs", clock.us(d.peak_allocated_ns ? d.peak_allocated_ns : d.first_event_ns));
    j.kv("startAllocatedBytes", 0).kv("endAllocatedBytes", d.end_allocated);
    j.kv("ooms", (int64_t)d.ooms);
    if (window)
      write_overview_series(j, {}, amax, {}, rmax);  // the ranks view draws the max series only
    else
      write_overview_series(j, amin, amax, rmin, rmax);
    j.close('}');
  }
  j.close(']');
  // Note [Rank row from the index]: what a rank row needs beyond the devices above, when the index carries it.
  if (from_index && sections.all() && header_whole) {
    j.key("row").open('{').key("header").raw(header_text);
    j.kvu("lines", sections.lines).key("topLines").open('[');
    for (const auto& [file, l] : sections.top)
      j.open('{').kvs("file", file).kvu("line", l.line).kvu("bytesAtPeak", l.bytes).close('}');
    j.close(']').key("devices").open('[');
    for (const auto& [d, bk] : devs)
      j.open('{')
          .kv("device", (int64_t)d.device)
          .kvu("events", d.events)
          .kvu("ooms", d.ooms)
          .kv("peakAllocatedBytes", d.peak_allocated)
          .kv("peakReservedBytes", d.peak_reserved)
          .close('}');
    j.close(']').key("deviceNames").open('[');
    for (const auto& [name, d] : sections.names)
      j.open('{').kv("device", (int64_t)d.device).kvs("name", name).kvu("totalBytes", d.total_bytes).close('}');
    j.close(']').kvu("lostRecords", sections.lost.records).kvu("lostEvents", sections.lost.events).close('}');
  }
  j.close('}');
  return j.s;
}

}  // namespace gpumem
