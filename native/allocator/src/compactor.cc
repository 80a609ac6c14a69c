// compactor.cc — see compactor.h and FORMAT.md §5.
//
// Note [Capture budget]: a budgeted capture keeps, for the whole run, what the tool shows about the whole run, and
// full detail only where users look.
// - Whole run, exact: every record but block events and REC_STATS stays verbatim (tables, segment events, so
//   reserved bytes at every moment; device samples, so device-used; markers, snapshots, tags, notices, empty cache,
//   OOM and state records). Block events are replaced by restated events at the moments users open: the first event
//   that reached a new global peak of the device's allocated bytes (so the peak, its time and every allocation live
//   then with its stack — the per-line self/inclusive/backward bytes at the peak — are exact), every OOM and state
//   record, and the range's end (the base of the full-detail window). Allocation count and bytes per stack go into
//   REC_LINE_TOTALS; allocated/reserved between moments into REC_TIMELINE buckets (min/max, ~512 per range, so the
//   timeline's resolution degrades with the age of the range, never to nothing).
// - Full detail: every event of the most recent window (about half the budget), and every event of a moment above.
// - Peak detail is throttled by construction: one restated peak per device per compacted range (the range's highest
//   allocated, if above all earlier ranges), written when the range is compacted, so warm-up's many small new peaks
//   cost nothing; the peak found in a later range replaces nothing (the earlier one stays a moment).
// - Off the hot path: the allocating threads append to the writer's buffer as before; the writer thread alone reads
//   the file back, compacts and renames the rewritten file over the old one.
// - Steady-state encoding (one iteration's pattern, then deviations) was measured and not taken: see the figures in
//   test/bench/budget/README.md. In short, a restated range already costs ~0 bytes per step for block events, so the
//   history a budget holds is bounded by what must stay verbatim (markers, samples, segment events), not by events;
//   a pattern encoding would only lengthen the full-detail window (the window holds ~budget/2 of raw events), at the
//   price of a second decoder in every reader and a step detector in the writer.
// Note [Pending frees across a cut]: a block whose free was requested but has not completed (a record_stream
// block, or any block when a range ends between its free_requested and its free_completed) is still in its segment
// and not allocated. The compactor keeps it in `live` as pending, and a restate gives the reader that state too
// (alloc + free_requested, or a lone free_requested). Dropped instead, the verbatim free_completed that opens the
// next window would complete a block the reader never had; a reader that rebuilds a moment by undoing events from
// a later one (replay.cpp) then sees that block pending all the way back to the peak.
#include "compactor.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "../../format/gpumem_format.h"

namespace gpumem::rec::compactor {
namespace {
namespace f = gpumem::fmt;

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void put(std::string* out, uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an,
         const void* b = nullptr, uint32_t bn = 0) {
  f::RecordHeader h{type, device, flags, an + bn};
  out->append(reinterpret_cast<const char*>(&h), sizeof h);
  out->append(static_cast<const char*>(a), an);
  if (bn) out->append(static_cast<const char*>(b), bn);
}

bool isBlock(uint8_t t) { return t == f::REC_ALLOC || t == f::REC_FREE_REQUESTED || t == f::REC_FREE_COMPLETED; }
bool isSegment(uint8_t t) { return t >= f::REC_SEGMENT_ALLOC && t <= f::REC_SEGMENT_UNMAP; }

// The record's time, if its payload starts with one.
bool timeOf(const RecordView& r, uint64_t* t) {
  switch (r.type) {
    case f::REC_STRING:
    case f::REC_FRAME:
    case f::REC_STACK:
    case f::REC_TIMELINE:
    case f::REC_LINE_TOTALS:
    case f::REC_AGGREGATED: return false;
    default:
      if (r.n < 8) return false;
      *t = load<uint64_t>(r.payload);
      return true;
  }
}
}  // namespace

void Compactor::compact(const RecordSource& source, std::string* out) {
  // Pass 1: time range, and each device's first event reaching the range's highest allocated.
  struct Peak {
    int64_t allocated = 0, max = INT64_MIN;
    uint64_t at = UINT64_MAX;  // record index
  };
  std::map<uint8_t, Peak> peaks;
  uint64_t index = 0, tBegin = UINT64_MAX, tEnd = 0;
  for (auto& [d, dev] : devs_) peaks[d].allocated = dev.allocated;
  source([&](const RecordView& r) {
    uint64_t t;
    if (timeOf(r, &t)) tBegin = std::min(tBegin, t), tEnd = std::max(tEnd, t);
    if ((r.type == f::REC_ALLOC || r.type == f::REC_FREE_REQUESTED) && r.n >= sizeof(f::BlockEvent)) {
      Peak& p = peaks[r.device];
      auto e = load<f::BlockEvent>(r.payload);
      p.allocated += r.type == f::REC_ALLOC ? int64_t(e.size) : -int64_t(e.size);
      if (p.allocated > p.max) p.max = p.allocated, p.at = index;
    }
    index++;
  });
  if (tBegin > tEnd) tBegin = tEnd;
  const uint64_t bucketNs = std::max<uint64_t>(1000000, (tEnd - tBegin) / 512 + 1);

  struct Work {
    std::unordered_map<uint64_t, Live> emitted;  // what a reader has: live blocks as of the last restate
    std::vector<f::TimelineBucket> buckets;
    std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> lines;  // stack → count, bytes
  };
  std::map<uint8_t, Work> work;
  uint64_t events = 0, bytes = 0;
  uint32_t restated = 0, peaksKept = 0;
  auto devWork = [&](uint8_t d) -> Work& {
    auto it = work.find(d);
    if (it == work.end()) it = work.emplace(d, Work{devs_[d].live, {}, {}}).first;
    return it->second;
  };
  // After it, a reader's live blocks of device d are those of the moment t, allocated or pending alike.
  auto restate = [&](uint8_t d, uint64_t t) {
    Dev& dev = devs_[d];
    Work& w = devWork(d);
    // removed: what the reader has and must lose (pending ones need only their completion); requested: blocks that
    // stay but whose free was requested since; added: blocks the reader must gain (pending ones then requested).
    std::vector<std::pair<uint64_t, Live>> removed, requested, added;
    for (const auto& [addr, b] : w.emitted) {
      auto it = dev.live.find(addr);
      if (it == dev.live.end() || !it->second.same_block(b) || (b.pending && !it->second.pending))
        removed.push_back({addr, b});
      else if (!b.pending && it->second.pending)
        requested.push_back({addr, it->second});
    }
    for (const auto& [addr, b] : dev.live) {
      auto it = w.emitted.find(addr);
      if (it == w.emitted.end() || !it->second.same_block(b) || (it->second.pending && !b.pending))
        added.push_back({addr, b});
    }
    // Address order: the same moment restated twice writes the same bytes.
    auto by_addr = [](auto& a, auto& b) { return a.first < b.first; };
    std::sort(removed.begin(), removed.end(), by_addr);
    std::sort(requested.begin(), requested.end(), by_addr);
    std::sort(added.begin(), added.end(), by_addr);
    auto event = [&](uint8_t type, uint64_t addr, const Live& b) {
      f::BlockEvent e{t, addr, b.size, b.requested, b.stream, b.stack, b.thread};
      put(out, type, d, uint16_t(b.flags | f::kRestated), &e, sizeof e);
      restated++;
    };
    for (auto& [addr, b] : removed) {
      if (!b.pending) event(f::REC_FREE_REQUESTED, addr, b);
      event(f::REC_FREE_COMPLETED, addr, b);
    }
    for (auto& [addr, b] : requested) event(f::REC_FREE_REQUESTED, addr, b);
    for (auto& [addr, b] : added) {
      event(f::REC_ALLOC, addr, b);
      if (b.pending) event(f::REC_FREE_REQUESTED, addr, b);
    }
    w.emitted = dev.live;
  };
  auto sample = [&](uint8_t d, uint64_t t) {
    Dev& dev = devs_[d];
    Work& w = devWork(d);
    uint64_t start = tBegin + (t > tBegin ? (t - tBegin) / bucketNs * bucketNs : 0);
    if (w.buckets.empty() || w.buckets.back().t_ns != start)
      w.buckets.push_back({start, dev.allocated, dev.allocated, dev.reserved, dev.reserved});
    auto& b = w.buckets.back();
    b.allocated_min = std::min(b.allocated_min, dev.allocated),
    b.allocated_max = std::max(b.allocated_max, dev.allocated);
    b.reserved_min = std::min(b.reserved_min, dev.reserved), b.reserved_max = std::max(b.reserved_max, dev.reserved);
  };

  // Pass 2.
  index = 0;
  source([&](const RecordView& r) {
    const uint64_t i = index++;
    if (isBlock(r.type) && r.n >= sizeof(f::BlockEvent)) {
      auto e = load<f::BlockEvent>(r.payload);
      Dev& dev = devs_[r.device];
      devWork(r.device);
      if (r.type == f::REC_ALLOC) {
        dev.live[e.addr] = Live{e.size, e.requested, e.stream, e.stack, e.thread, uint16_t(r.flags & ~f::kRestated)};
        dev.allocated += int64_t(e.size);
        if (!(r.flags & f::kRestated)) {
          auto& l = work[r.device].lines[e.stack];
          l.first++, l.second += e.size;
        }
      } else if (r.type == f::REC_FREE_REQUESTED) {
        auto it = dev.live.find(e.addr);
        if (it != dev.live.end()) it->second.pending = true;
        dev.allocated -= int64_t(e.size);
      } else {
        auto it = dev.live.find(e.addr);
        if (it != dev.live.end() && it->second.pending) dev.live.erase(it);
      }
      events++;
      bytes += sizeof(f::RecordHeader) + r.n;
      sample(r.device, e.t_ns);
      auto pk = peaks.find(r.device);
      if (pk != peaks.end() && pk->second.at == i && pk->second.max > dev.best) {
        dev.best = pk->second.max;
        restate(r.device, e.t_ns);
        peaksKept++;
      }
      return;
    }
    if (r.type == f::REC_STATS) {
      bytes += sizeof(f::RecordHeader) + r.n;
      return;
    }
    if (isSegment(r.type) && r.n >= sizeof(f::SegmentEvent)) {
      auto e = load<f::SegmentEvent>(r.payload);
      Dev& dev = devs_[r.device];
      bool up = r.type == f::REC_SEGMENT_ALLOC || r.type == f::REC_SEGMENT_MAP;
      dev.reserved += up ? int64_t(e.size) : -int64_t(e.size);
      sample(r.device, e.t_ns);
    }
    if ((r.type == f::REC_OOM || r.type == f::REC_STATE) && r.n >= 8 && devs_.count(r.device))
      restate(r.device, load<uint64_t>(r.payload));
    put(out, r.type, r.device, r.flags, r.payload, r.n);
  });

  // The end of the range: the base of the full-detail window.
  for (auto& [d, w] : work) {
    restate(d, tEnd);
    if (!w.buckets.empty()) {
      f::TimelineRec tr{bucketNs, uint32_t(w.buckets.size()), 0};
      put(out, f::REC_TIMELINE, d, 0, &tr, sizeof tr, w.buckets.data(),
          uint32_t(w.buckets.size() * sizeof(f::TimelineBucket)));
    }
    std::vector<f::LineTotal> lines;
    for (auto& [stack, cb] : w.lines) lines.push_back({stack, 0, cb.first, cb.second});
    std::sort(lines.begin(), lines.end(), [](auto& a, auto& b) { return a.stack < b.stack; });
    if (!lines.empty()) {
      f::LineTotalsRec lr{uint32_t(lines.size()), 0};
      put(out, f::REC_LINE_TOTALS, d, 0, &lr, sizeof lr, lines.data(), uint32_t(lines.size() * sizeof(f::LineTotal)));
    }
  }
  f::AggregatedRec ar{tBegin, tEnd, events, bytes, budget_, restated, peaksKept};
  put(out, f::REC_AGGREGATED, 0, 0, &ar, sizeof ar);
  ranges_++;
}

}  // namespace gpumem::rec::compactor
