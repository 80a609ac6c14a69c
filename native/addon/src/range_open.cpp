// range_open.cpp — the rows of a time window of a snapshot pickle, and the allocator state at its start.
//
// Note [Range-first open]: a 3 GB pickle (40 M events) cannot be held whole in 1.5 GB, and most questions are
// about a few steps of it. The user picks a window on the first view's overview (Note [First view] in
// overview.cpp; "Load this range", or the command that asks for a time window) and the reader opens that
// window only: the pickle VM still reads every byte (front to back, the input dropped behind it), but a trace
// entry outside the window never becomes a row, so what is held is the window's rows plus a few tables the
// size of the live set. The model of the window must answer as a full open does for any moment in it
// (timeline, peak, top lines, state): PyTorch's semantics give the state at a moment only from the final state
// (the pickle's segments) by undoing every later event (replay.cpp). Undoing cannot be streamed, so:
//   - the state at the window's start is the final state with the events from the window's start on undone.
//     Per address only the events before that address's first alloc matter (undoing an alloc removes the
//     block whatever came later), so each address keeps just that chain (a free_requested and a
//     free_completed, typically) and addresses whose first event is an alloc are dropped at their free: the
//     tables stay the size of the live set. A free_requested undone takes its alloc's stack and size (as
//     replay.cpp does through the pairing link): for an alloc before the window, the table of allocs before
//     the window not yet paired (paired as Model::derive pairs: the last alloc at that address).
//     Segment events are rare and kept whole, then undone in reverse.
//   - the start figures are the final ones less the deltas from the window's start on (as import_snapshot
//     computes a pickle's start from its whole trace), so allocated/reserved are those of the full open.
//   - the window's model replays forward only, from that state (DeviceData::forward_only): undoing inside the
//     window would need links to allocs before it, which it does not hold.
// Times are made monotonic as the full open does (a running maximum in pickle order), so the window is the
// same set of events. Limits, each refused with a message rather than answered wrongly: one device's trace,
// entries the parse keeps as dicts (named twice), traces without time_us.
#include "range_open.h"

#include <algorithm>
#include <stdexcept>

#include "replay.h"

namespace gpumem {

bool RangeFilter::on_entry(int64_t raw_t, uint8_t act, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack,
                           uint8_t pool, int64_t& t_out) {
  saw_time |= raw_t != INT64_MIN;
  if (act == ACT_ALLOC)
    live_at_end_.insert(addr);
  else if (act == ACT_FREE_REQUESTED)
    live_at_end_.erase(addr);
  int64_t t = raw_t == INT64_MIN ? last_t_ : std::max(raw_t, last_t_);
  last_t_ = t_out = t;
  if (t < w_.from_us) {
    before++;
    if (act == ACT_ALLOC)
      pre_live_[addr] = Alloc{size, stack};
    else if (act == ACT_FREE_REQUESTED)
      pre_live_.erase(addr);
    return false;
  }
  if (!started_) {
    started_ = true;
    for (const auto& [a, al] : pre_live_) start_allocs_.push_back(DeviceData::StartAlloc{a, al.size, al.stack});
    std::sort(start_allocs_.begin(), start_allocs_.end(), [](const auto& x, const auto& y) { return x.addr < y.addr; });
  }
  switch (act) {
    case ACT_ALLOC: {
      sum_alloc_ += size;
      auto [it, fresh] = chains_.try_emplace(addr);
      it->second.closed = true;
      (void)fresh;
      break;
    }
    case ACT_FREE_REQUESTED:
    case ACT_FREE_COMPLETED: {
      if (act == ACT_FREE_REQUESTED) sum_freed_ += size;
      auto it = chains_.find(addr);
      if (it != chains_.end() && it->second.closed) {
        // A block allocated from the window's start on: its free changes nothing before; forget the address
        // once the block is gone (its next event is an alloc again), unless the chain holds earlier events.
        if (act == ACT_FREE_COMPLETED && it->second.ev.empty()) chains_.erase(it);
        break;
      }
      Ev e{act, false, size, stack, {0, 0}};
      if (act == ACT_FREE_REQUESTED) {
        auto p = pre_live_.find(addr);
        if (p != pre_live_.end()) e.linked = true, e.link = p->second, pre_live_.erase(p);
      }
      chains_[addr].ev.push_back(e);
      break;
    }
    case ACT_SEGMENT_ALLOC:
    case ACT_SEGMENT_MAP:
    case ACT_SEGMENT_FREE:
    case ACT_SEGMENT_UNMAP:
      (act == ACT_SEGMENT_ALLOC || act == ACT_SEGMENT_MAP ? sum_seg_in_ : sum_seg_out_) += size;
      segs_.push_back(SegEv{act, pool, addr, size, stream, stack});
      break;
    default: break;
  }
  if (t > w_.to_us) {
    after++;
    return false;
  }
  kept++;
  return true;
}

void RangeFilter::finish(DeviceData& d) const {
  // Note [Untraced blocks], as import_snapshot marks them in a full open.
  for (auto& g : d.final_segments)
    for (auto& b : g.blocks) b.untraced = b.state == ST_ALLOCATED && !live_at_end_.count(b.addr);
  AllocState s = AllocState::from_segments(d.final_segments);
  int64_t alloc = 0, res = 0;
  for (const auto& g : d.final_segments) {
    res = wrap_add(res, g.size);
    for (const auto& b : g.blocks)
      if (b.state == ST_ALLOCATED) alloc = wrap_add(alloc, b.size);
  }
  d.start_allocated = wrap_add(wrap_sub(alloc, sum_alloc_), sum_freed_);
  d.start_reserved = wrap_add(wrap_sub(res, sum_seg_in_), sum_seg_out_);
  // Segments: undone in reverse, as AllocState::undo does.
  for (size_t k = segs_.size(); k > 0; k--) {
    const SegEv& e = segs_[k - 1];
    if (e.act == ACT_SEGMENT_ALLOC || e.act == ACT_SEGMENT_MAP)
      s.remove_range(e.addr, e.size);
    else
      s.add_range(e.addr, RangeInfo{e.size, e.stream, e.stack, e.pool, e.act == ACT_SEGMENT_UNMAP, 0, 0});
  }
  // Blocks: each address's chain undone in reverse from what the later events left (nothing, behind an alloc).
  for (const auto& [addr, c] : chains_) {
    bool present = false;
    LiveBlock x{};
    if (!c.closed) {
      auto it = s.blocks.find(addr);
      if (it != s.blocks.end()) present = true, x = it->second;
    }
    for (size_t k = c.ev.size(); k > 0; k--) {
      const Ev& e = c.ev[k - 1];
      if (e.act == ACT_FREE_COMPLETED) {
        if (!present) present = true, x = LiveBlock{e.size, e.size, e.stack, ST_PENDING_FREE};
      } else if (present) {
        x.state = ST_ALLOCATED;
        if (e.linked) x.stack = e.link.stack, x.requested = e.link.size;
      } else {
        present = true;
        x = LiveBlock{e.size, e.linked ? e.link.size : e.size, e.linked ? e.link.stack : e.stack, ST_ALLOCATED};
      }
    }
    if (present)
      s.blocks[addr] = x;
    else
      s.blocks.erase(addr);
  }
  std::vector<SegmentData> start = s.materialize(d.index);
  // The state at the window's end (what "at the end" means for this model): forward from its start, or, when the
  // window reaches the trace's end, the pickle's own (it carries figures a replay does not: requested sizes of
  // inactive blocks), as the full open shows it there.
  if (after > 0) {
    AllocState f = AllocState::from_segments(start);
    for (size_t i = 0; i < d.count(); i++) f.apply(d, i);
    d.final_segments = f.materialize(d.index);
  }
  d.checkpoints.clear();
  d.checkpoints.emplace_back(0, std::move(start));
  d.start_empty = false;
  d.have_final = true;
  d.final_after = d.count();
  d.forward_only = true;
  d.window_start_allocs = start_allocs_;
}

}  // namespace gpumem
