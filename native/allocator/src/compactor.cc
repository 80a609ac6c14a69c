// compactor.cc — see compactor.h and FORMAT.md §5.
//
// Note [Capture budget]: a budgeted capture keeps, for the whole run, what the tool shows about the whole run, and
// full detail only where users look.
// - Whole run, exact: every record but block events, REC_STATS and tags stays verbatim in a range (tables, segment
//   events, so reserved bytes at every moment; device samples, so device-used; markers, snapshots, notices, empty
//   cache, OOM and state records); Note [Budget as a cap] thins older ranges further. Block events are replaced by
//   restated events at the moments users open: the first event that reached a new global peak of the device's allocated
//   bytes (so the peak, its time and every allocation live then with its stack — the per-line self/inclusive/backward
//   bytes at the peak — are exact), every OOM and state record, and the range's end (the base of the full-detail
//   window). Allocation count and bytes per stack go into REC_LINE_TOTALS; allocated/reserved between moments into
//   REC_TIMELINE buckets (min/max, ~512 per range, so the timeline's resolution degrades with the age of the range,
//   never to nothing).
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
//
// Note [Budget as a cap]: the verbatim records grow with the steps (a 2.8 ms step writes ~1 KB of
// markers, tags and samples), so compaction alone let a fast-step run outgrow any budget (8 MiB → 21.2 MB in 40 s).
// The writer makes room before each write of at most budget/8 bytes (writer.cc make_room), most detail kept first:
//   1. once the compacted ranges take more than a quarter of the budget, they are merged into one range and thinned
//      (Compactor::merge: a fresh compactor replays them, restated events included, from the capture's start);
//   2. the oldest part of the window is compacted as before, keeping up to half the budget in full detail;
//   3. if that is not room enough, the whole window is compacted, then the history merged again.
// What a merge thins, and why it loses no whole-run figure:
// - block events: restated again at the merged range's moments (its highest allocated, OOMs, states, its end);
//   restated events are not counted as compacted events and draw no timeline (between moments they are no state
//   the run had); the old ranges' REC_TIMELINE buckets, REC_LINE_TOTALS and REC_AGGREGATED counts are folded into
//   the merged range's (bucket min/max merge exactly; totals add), so peaks, top lines and per-line totals stay.
//   The old buckets stay as they were while they fit in a 64th of the budget (≥ 512), then go on one grid of
//   doubling width until they do: the timeline's resolution degrades with the length of the history, never to
//   nothing;
// - device samples: per bucket (~512 per range) the one of highest device-used, so the device-used peak stays and
//   the curve keeps its shape at the range's resolution;
// - phase begins and module marks: dropped, except the ones open at a restated moment, written again around that
//   moment's allocations (they are what a reader reads those allocations in; between moments no allocation is left
//   for them to describe);
// - tags: never verbatim in a compacted range, first level included (Note [Tags of restated blocks]).
// Kept whole: tables, step facts (the step table and the leak findings number every step), instant/range/snapshot
// markers, segment events (reserved at every moment, the segment map at the peak), notices, empty cache, OOM,
// state and lost records. They are what is left when no thinning makes room, and the budget is then exceeded by
// them alone (48 bytes a step of step facts: 8 MiB holds ~170 k steps with nothing else).
// Not exact in a compacted range (first level too): which untagged live blocks at a restated moment are
// activations or temporaries, and their module. The reader decides both from where an allocation and its free
// fall among the phases and module marks; a restated block's allocation sits at the moment, not where it was
// made, so a forward activation restated at the peak reads as "other" (the same bytes, in another row).
// Parameters, gradients and optimizer state are exact (tags).
//
// Note [Tags of restated blocks]: the reader gives a tag's category to the allocation live at its address, for
// the allocation's whole life. Left verbatim in a compacted range, a tag would fall where the reader has no block
// (its allocation compacted away) and be ignored. So the compactor keeps each block's last tag with the block and
// writes it right after the block's restated allocation, again when the block gains a new tag, and, for a block
// that dies before the next moment after a new tag, at that moment before its restated free (`lateTags`). A peak
// reached inside a restated moment (a merge) is restated after the whole moment is read, so the moment's own tags
// are with their blocks.
//
// Note [Labels of restated blocks]: a REC_USER_METADATA labels the block events of its thread that follow it (Note
// [User metadata] in gpumem_format.h). Label records stay verbatim in a compacted range, but a restated allocation
// sits at its moment, after labels its block never had. So the compactor keeps with each block the label its thread
// had at its allocation, and before a restated allocation whose thread's label (as a reader has it there) differs,
// writes that thread's label record stamped with the moment, flagged kRestated; after the moment's restated events,
// a kRestated record gives each such thread its label back. A merge replays these records to follow the labels, and
// drops them (they surround restated events, which it restates anew); restated frees get the label a reader has at
// the moment: only allocations keep theirs exactly.
//
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

void Compactor::merge(const RecordSource& compacted, uint64_t budget_bytes, std::string* out) {
  Compactor m(budget_bytes);
  m.thin_ = true;
  m.compact(compacted, out);
}

void Compactor::compact(const RecordSource& source, std::string* out) {
  // Pass 1: time range, each device's first event reaching the range's highest allocated, and (thinning) the
  // device samples worth keeping.
  struct Peak {
    int64_t allocated = 0, max = INT64_MIN;
    uint64_t at = UINT64_MAX;  // record index
  };
  struct Sample {
    uint64_t t, used, index;
    uint8_t device;
  };
  std::map<uint8_t, Peak> peaks;
  std::vector<Sample> samples;
  uint64_t index = 0, tBegin = UINT64_MAX, tEnd = 0;
  for (auto& [d, dev] : devs_) peaks[d].allocated = dev.allocated;
  source([&](const RecordView& r) {
    uint64_t t;
    if (timeOf(r, &t)) tBegin = std::min(tBegin, t), tEnd = std::max(tEnd, t);
    if (r.type == f::REC_AGGREGATED && r.n >= sizeof(f::AggregatedRec)) {
      auto a = load<f::AggregatedRec>(r.payload);
      tBegin = std::min(tBegin, a.t_begin_ns), tEnd = std::max(tEnd, a.t_end_ns);
    }
    if ((r.type == f::REC_ALLOC || r.type == f::REC_FREE_REQUESTED) && r.n >= sizeof(f::BlockEvent)) {
      Peak& p = peaks[r.device];
      auto e = load<f::BlockEvent>(r.payload);
      p.allocated += r.type == f::REC_ALLOC ? int64_t(e.size) : -int64_t(e.size);
      if (p.allocated > p.max) p.max = p.allocated, p.at = index;
    }
    if (thin_ && r.type == f::REC_DEVICE_SAMPLE && r.n >= sizeof(f::DeviceSampleRec)) {
      auto e = load<f::DeviceSampleRec>(r.payload);
      samples.push_back({e.t_ns, e.used, index, r.device});
    }
    index++;
  });
  if (tBegin > tEnd) tBegin = tEnd;
  const uint64_t bucketNs = std::max<uint64_t>(1000000, (tEnd - tBegin) / 512 + 1);
  auto bucketOf = [&](uint64_t t) { return tBegin + (t > tBegin ? (t - tBegin) / bucketNs * bucketNs : 0); };
  // Thinning keeps, per device and bucket, the sample of the highest device-used (the first such), so the
  // device-used peak and the timeline's shape stay; a sample's place in the file is its own.
  std::vector<bool> keepSample;
  if (thin_) {
    std::map<std::pair<uint8_t, uint64_t>, const Sample*> best;
    for (const Sample& x : samples) {
      auto& b = best[{x.device, bucketOf(x.t)}];
      if (!b || x.used > b->used) b = &x;
    }
    keepSample.assign(index, false);
    for (auto& [k, x] : best) keepSample[x->index] = true;
  }

  struct Work {
    std::map<uint64_t, Live> emitted;  // what a reader has: blocks as of the last restate
    std::map<uint64_t, f::TimelineBucket> buckets;
    std::map<uint64_t, std::vector<f::TimelineBucket>> oldBuckets;  // merging: the ranges' buckets by width
    uint64_t oldWidth = 0;
    std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> lines;  // stack → count, bytes
  };
  std::map<uint8_t, Work> work;
  uint64_t events = 0, bytes = 0;
  uint32_t restated = 0, peaksKept = 0;
  // Thinning: the context markers (phase, open modules) that restated allocations are read in.
  std::vector<std::pair<uint8_t, f::MarkerRec>> openModules;
  bool phaseOpen = false;
  std::pair<uint8_t, f::MarkerRec> phase{};
  // Tags that fell in a block the reader has, which then died before a restate could write them: written first at
  // the next restate (a reader gives a tag to its block's whole life, so one that comes late still counts).
  std::vector<std::pair<uint8_t, f::TagRec>> lateTags;
  // A peak reached inside a restated moment (a merge): restated once the moment's events and tags are all read.
  struct PeakAt {
    bool due = false;
    uint8_t device = 0;
    uint64_t t = 0;
  } peakDue;
  auto labelOf = [&](uint32_t thread) -> uint32_t {
    auto it = labels_.find(thread);
    return it == labels_.end() ? 0u : it->second;
  };
  auto setLabel = [&](uint32_t thread, uint32_t text) {
    if (text)
      labels_[thread] = text;
    else
      labels_.erase(thread);
  };
  auto devWork = [&](uint8_t d) -> Work& {
    auto it = work.find(d);
    if (it == work.end()) it = work.emplace(d, Work{devs_[d].live, {}, {}, 0, {}}).first;
    return it->second;
  };
  // After it, a reader's live blocks of device d are those of the moment t, allocated or pending alike.
  auto restate = [&](uint8_t d, uint64_t t) {
    Dev& dev = devs_[d];
    Work& w = devWork(d);
    // removed: what the reader has and must lose (pending ones need only their completion); requested: blocks that
    // stay but whose free was requested since; added: blocks the reader must gain (pending ones then requested);
    // retagged: blocks that stay but gained a tag.
    std::vector<std::pair<uint64_t, const Live*>> removed, requested, added, retagged;
    for (const auto& [addr, b] : w.emitted) {
      auto it = dev.live.find(addr);
      if (it == dev.live.end() || !it->second.same_block(b) || (b.pending && !it->second.pending)) {
        removed.push_back({addr, &b});
        continue;
      }
      if (!b.pending && it->second.pending) requested.push_back({addr, &it->second});
      if (it->second.tagged && (!b.tagged || std::memcmp(&b.tag, &it->second.tag, sizeof b.tag) != 0))
        retagged.push_back({addr, &it->second});
    }
    for (const auto& [addr, b] : dev.live) {
      auto it = w.emitted.find(addr);
      if (it == w.emitted.end() || !it->second.same_block(b) || (it->second.pending && !b.pending))
        added.push_back({addr, &b});
    }
    for (auto it = lateTags.begin(); it != lateTags.end();) {
      if (it->first != d) {
        ++it;
        continue;
      }
      put(out, f::REC_TAG, d, 0, &it->second, sizeof it->second);
      it = lateTags.erase(it);
    }
    if (thin_ && !added.empty()) {
      // The context a reader gives these allocations: the open phase and modules of the moment.
      if (phaseOpen) put(out, f::REC_MARKER, phase.first, 0, &phase.second, sizeof phase.second);
      for (auto& [md, mk] : openModules) put(out, f::REC_MARKER, md, 0, &mk, sizeof mk);
    }
    auto event = [&](uint8_t type, uint64_t addr, const Live& b) {
      f::BlockEvent e{t, addr, b.size, b.requested, b.stream, b.stack, b.thread};
      put(out, type, d, uint16_t(b.flags | f::kRestated), &e, sizeof e);
      restated++;
    };
    auto tag = [&](const Live& b) {
      f::TagRec tr = b.tag;
      tr.t_ns = t;
      put(out, f::REC_TAG, d, 0, &tr, sizeof tr);
    };
    // Note [Labels of restated blocks]: threads whose label this moment changes, with the label to give back.
    std::map<uint32_t, uint32_t> relabelled;
    auto label = [&](uint32_t thread, uint32_t text) {
      f::UserMetadataRec lr{t, text, thread};
      put(out, f::REC_USER_METADATA, 0, f::kRestated, &lr, sizeof lr);
      setLabel(thread, text);
    };
    // Address order (the maps'): the same moment restated twice writes the same bytes.
    for (auto& [addr, b] : removed) {
      if (!b->pending) event(f::REC_FREE_REQUESTED, addr, *b);
      event(f::REC_FREE_COMPLETED, addr, *b);
    }
    for (auto& [addr, b] : requested) event(f::REC_FREE_REQUESTED, addr, *b);
    for (auto& [addr, b] : added) {
      if (labelOf(b->thread) != b->label) {
        relabelled.emplace(b->thread, labelOf(b->thread));
        label(b->thread, b->label);
      }
      event(f::REC_ALLOC, addr, *b);
      if (b->tagged) tag(*b);
      if (b->pending) event(f::REC_FREE_REQUESTED, addr, *b);
    }
    for (auto& [addr, b] : retagged) tag(*b);
    for (auto& [thread, text] : relabelled)
      if (labelOf(thread) != text) label(thread, text);
    if (thin_ && !added.empty()) {
      for (auto it = openModules.rbegin(); it != openModules.rend(); ++it) {
        f::MarkerRec end = it->second;
        end.kind = f::MARK_MODULE_END;
        put(out, f::REC_MARKER, it->first, 0, &end, sizeof end);
      }
    }
    w.emitted = dev.live;
  };
  auto bucket = [&](Work& w, uint64_t start) -> f::TimelineBucket& {
    auto it = w.buckets.find(start);
    if (it == w.buckets.end())
      it = w.buckets.emplace(start, f::TimelineBucket{start, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN}).first;
    return it->second;
  };
  auto sampleAt = [&](uint8_t d, uint64_t t) {
    Dev& dev = devs_[d];
    auto& b = bucket(devWork(d), bucketOf(t));
    b.allocated_min = std::min(b.allocated_min, dev.allocated),
    b.allocated_max = std::max(b.allocated_max, dev.allocated);
    b.reserved_min = std::min(b.reserved_min, dev.reserved), b.reserved_max = std::max(b.reserved_max, dev.reserved);
  };

  auto restatePeak = [&](uint8_t d, uint64_t t) {
    restate(d, t);
    peaksKept++;
  };

  // Pass 2.
  index = 0;
  source([&](const RecordView& r) {
    const uint64_t i = index++;
    if (peakDue.due) {
      const bool inMoment =
          (isBlock(r.type) && (r.flags & f::kRestated)) || ((r.type == f::REC_TAG || r.type == f::REC_USER_METADATA) &&
                                                            r.n >= 8 && load<uint64_t>(r.payload) == peakDue.t);
      if (!inMoment) peakDue.due = false, restatePeak(peakDue.device, peakDue.t);
    }
    if (isBlock(r.type) && r.n >= sizeof(f::BlockEvent)) {
      auto e = load<f::BlockEvent>(r.payload);
      const bool original = !(r.flags & f::kRestated);
      Dev& dev = devs_[r.device];
      devWork(r.device);
      if (r.type == f::REC_ALLOC) {
        Live b{e.size, e.requested, e.stream, e.stack, e.thread, uint16_t(r.flags & ~f::kRestated)};
        b.label = labelOf(e.thread);
        auto old = dev.live.find(e.addr);
        // A restated allocation of a block the model has (a merge): its tag stays with it.
        if (old != dev.live.end() && old->second.same_block(b) && !original)
          b.tag = old->second.tag, b.tagged = old->second.tagged;
        dev.live[e.addr] = b;
        dev.allocated += int64_t(e.size);
        if (original) {
          auto& l = work[r.device].lines[e.stack];
          l.first++, l.second += e.size;
        }
      } else if (r.type == f::REC_FREE_REQUESTED) {
        auto it = dev.live.find(e.addr);
        if (it != dev.live.end()) it->second.pending = true;
        dev.allocated -= int64_t(e.size);
      } else {
        auto it = dev.live.find(e.addr);
        if (it != dev.live.end() && it->second.pending) {
          const Live& b = it->second;
          auto em = devWork(r.device).emitted.find(e.addr);
          if (b.tagged && em != devWork(r.device).emitted.end() && em->second.same_block(b) &&
              (!em->second.tagged || std::memcmp(&em->second.tag, &b.tag, sizeof b.tag) != 0))
            lateTags.push_back({r.device, b.tag});
          dev.live.erase(it);
        }
      }
      // Restated events (a merge) replace nothing of the run and draw nothing: between moments they are no state
      // the run had, and the ranges' own buckets hold what it had.
      if (original) {
        events++;
        bytes += sizeof(f::RecordHeader) + r.n;
        sampleAt(r.device, e.t_ns);
      }
      auto pk = peaks.find(r.device);
      if (pk != peaks.end() && pk->second.at == i && pk->second.max > dev.best) {
        dev.best = pk->second.max;
        if (original)
          restatePeak(r.device, e.t_ns);
        else
          peakDue = {true, r.device, e.t_ns};
      }
      return;
    }
    if (r.type == f::REC_STATS) {
      bytes += sizeof(f::RecordHeader) + r.n;
      return;
    }
    // Note [Labels of restated blocks]: a label goes on verbatim; the ones written around restated allocations are
    // followed (the blocks read in the merge carry them) and dropped with those events.
    if (r.type == f::REC_USER_METADATA && r.n >= sizeof(f::UserMetadataRec)) {
      auto lr = load<f::UserMetadataRec>(r.payload);
      setLabel(lr.thread, lr.text);
      if (r.flags & f::kRestated) return;
    }
    // Note [Tags of restated blocks]: a tag goes with its block, and is written again after the block's restated
    // allocation (at the moments the reader has the block live) instead of where the bootstrap wrote it, when a
    // compacted range has no allocation for it to fall in. A tag in no live block names nothing: dropped.
    if (r.type == f::REC_TAG && r.n >= sizeof(f::TagRec)) {
      auto tr = load<f::TagRec>(r.payload);
      Dev& dev = devs_[r.device];
      auto it = dev.live.upper_bound(tr.addr);
      if (it != dev.live.begin() && (--it, tr.addr < it->first + it->second.size))
        it->second.tag = tr, it->second.tagged = true;
      bytes += sizeof(f::RecordHeader) + r.n;
      return;
    }
    if (thin_) {
      switch (r.type) {
        case f::REC_DEVICE_SAMPLE:
          if (keepSample[i]) break;
          bytes += sizeof(f::RecordHeader) + r.n;
          return;
        case f::REC_MARKER:
          if (r.n >= sizeof(f::MarkerRec)) {
            auto mk = load<f::MarkerRec>(r.payload);
            if (mk.kind == f::MARK_STEP) phaseOpen = false;
            if (mk.kind == f::MARK_PHASE) phase = {r.device, mk}, phaseOpen = true;
            if (mk.kind == f::MARK_MODULE_BEGIN) openModules.push_back({r.device, mk});
            if (mk.kind == f::MARK_MODULE_END) {
              for (auto it = openModules.rbegin(); it != openModules.rend(); ++it)
                if (it->second.name == mk.name) {
                  openModules.erase(std::next(it).base(), openModules.end());
                  break;
                }
            }
            if (mk.kind == f::MARK_PHASE || mk.kind == f::MARK_MODULE_BEGIN || mk.kind == f::MARK_MODULE_END) {
              bytes += sizeof(f::RecordHeader) + r.n;
              return;
            }
          }
          break;
        case f::REC_TIMELINE:
          if (r.n >= sizeof(f::TimelineRec)) {
            auto tr = load<f::TimelineRec>(r.payload);
            Work& w = devWork(r.device);
            w.oldWidth = std::max(w.oldWidth, tr.bucket_ns);
            auto& group = w.oldBuckets[tr.bucket_ns];
            for (uint32_t k = 0; k < tr.nbuckets && sizeof tr + (k + 1) * sizeof(f::TimelineBucket) <= r.n; k++)
              group.push_back(load<f::TimelineBucket>(r.payload + sizeof tr + k * sizeof(f::TimelineBucket)));
          }
          return;
        case f::REC_LINE_TOTALS:
          if (r.n >= sizeof(f::LineTotalsRec)) {
            auto lr = load<f::LineTotalsRec>(r.payload);
            Work& w = devWork(r.device);
            for (uint32_t k = 0; k < lr.n && sizeof lr + (k + 1) * sizeof(f::LineTotal) <= r.n; k++) {
              auto lt = load<f::LineTotal>(r.payload + sizeof lr + k * sizeof(f::LineTotal));
              auto& l = w.lines[lt.stack];
              l.first += lt.count, l.second += lt.bytes;
            }
          }
          return;
        case f::REC_AGGREGATED:
          if (r.n >= sizeof(f::AggregatedRec)) {
            auto a = load<f::AggregatedRec>(r.payload);
            events += a.events, bytes += a.bytes;
          }
          return;
        default: break;
      }
    }
    if (isSegment(r.type) && r.n >= sizeof(f::SegmentEvent)) {
      auto e = load<f::SegmentEvent>(r.payload);
      Dev& dev = devs_[r.device];
      bool up = r.type == f::REC_SEGMENT_ALLOC || r.type == f::REC_SEGMENT_MAP;
      dev.reserved += up ? int64_t(e.size) : -int64_t(e.size);
      if (!thin_) sampleAt(r.device, e.t_ns);  // merging: the ranges' buckets hold reserved already
    }
    if ((r.type == f::REC_OOM || r.type == f::REC_STATE) && r.n >= 8 && devs_.count(r.device))
      restate(r.device, load<uint64_t>(r.payload));
    put(out, r.type, r.device, r.flags, r.payload, r.n);
  });

  if (peakDue.due) restatePeak(peakDue.device, peakDue.t);
  // The end of the range: the base of the full-detail window.
  for (auto& [d, w] : work) {
    restate(d, tEnd);
    auto timeline = [&](uint64_t width, const std::vector<f::TimelineBucket>& bs) {
      f::TimelineRec tr{width, uint32_t(bs.size()), 0};
      put(out, f::REC_TIMELINE, d, 0, &tr, sizeof tr, bs.data(), uint32_t(bs.size() * sizeof(f::TimelineBucket)));
    };
    size_t old = 0;
    for (auto& [width, bs] : w.oldBuckets) old += bs.size();
    // Merging: the old ranges' buckets as they were (one REC_TIMELINE per width) while they fit in a 64th of the
    // budget (≥ 512), so a merge costs the timeline no resolution until the history is long; then on one grid of
    // twice the widest width, doubled until they fit.
    const size_t cap = std::max<size_t>(512, budget_ / 64 / sizeof(f::TimelineBucket));
    if (old && old <= cap) {
      for (auto& [width, bs] : w.oldBuckets) timeline(width, bs);
    } else if (old) {
      for (uint64_t width = std::max<uint64_t>(w.oldWidth, 1000000) * 2;; width *= 2) {
        w.buckets.clear();
        for (auto& [ow, bs] : w.oldBuckets)
          for (const auto& ob : bs) {
            const uint64_t start = tBegin + (ob.t_ns > tBegin ? (ob.t_ns - tBegin) / width * width : 0);
            auto& b = bucket(w, start);
            b.allocated_min = std::min(b.allocated_min, ob.allocated_min);
            b.allocated_max = std::max(b.allocated_max, ob.allocated_max);
            b.reserved_min = std::min(b.reserved_min, ob.reserved_min);
            b.reserved_max = std::max(b.reserved_max, ob.reserved_max);
          }
        if (w.buckets.size() <= cap) {
          std::vector<f::TimelineBucket> bs;
          for (auto& [start, b] : w.buckets) bs.push_back(b);
          timeline(width, bs);
          break;
        }
      }
    } else if (!w.buckets.empty()) {
      std::vector<f::TimelineBucket> bs;
      for (auto& [start, b] : w.buckets) bs.push_back(b);
      timeline(bucketNs, bs);
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
