#include "replay.h"

#include <algorithm>

namespace gpumem {

AllocState AllocState::from_segments(const std::vector<SegmentData>& segs) {
  AllocState s;
  for (const auto& g : segs) {
    s.ranges[g.addr] = RangeInfo{g.size, g.stream, g.stack, g.pool, g.expandable, g.pool_id0, g.pool_id1};
    for (const auto& b : g.blocks)
      if (b.state != ST_INACTIVE) s.blocks[b.addr] = LiveBlock{b.size, b.requested, b.stack, b.state, b.untraced};
  }
  return s;
}

void AllocState::add_range(uint64_t addr, const RangeInfo& r) {
  if (r.size == 0) return;
  remove_range(addr, r.size);  // a re-mapped range replaces whatever the state thought was there
  ranges[addr] = r;
}

void AllocState::remove_range(uint64_t addr, uint64_t size) {
  uint64_t end = addr + size;
  auto it = ranges.upper_bound(addr);
  if (it != ranges.begin()) --it;
  while (it != ranges.end() && it->first < end) {
    uint64_t ra = it->first, re = ra + it->second.size;
    if (re <= addr) {
      ++it;
      continue;
    }
    RangeInfo info = it->second;
    it = ranges.erase(it);
    if (ra < addr) {
      RangeInfo left = info;
      left.size = addr - ra;
      ranges[ra] = left;
    }
    if (re > end) {
      RangeInfo right = info;
      right.size = re - end;
      it = ranges.emplace(end, right).first;
      ++it;
    }
  }
}

void AllocState::apply(const DeviceData& d, size_t i) {
  uint64_t a = d.addr[i], sz = d.size[i];
  switch (d.action[i]) {
    case ACT_ALLOC: blocks[a] = LiveBlock{sz, sz - d.waste[i], d.stack[i], ST_ALLOCATED}; break;
    case ACT_FREE_REQUESTED: {
      auto it = blocks.find(a);
      if (it != blocks.end())
        it->second.state = ST_PENDING_FREE;
      else
        blocks[a] = LiveBlock{sz, sz, d.stack[i], ST_PENDING_FREE};
      break;
    }
    case ACT_FREE_COMPLETED: blocks.erase(a); break;
    case ACT_SEGMENT_ALLOC:
    case ACT_SEGMENT_MAP: {
      auto pool = d.segment_pools.find(uint32_t(i));
      const std::pair<uint64_t, uint64_t> id =
          pool == d.segment_pools.end() ? std::pair<uint64_t, uint64_t>{} : pool->second;
      add_range(a,
                RangeInfo{sz, d.stream[i], d.stack[i], d.pool[i], d.action[i] == ACT_SEGMENT_MAP, id.first, id.second});
      break;
    }
    case ACT_SEGMENT_FREE:
    case ACT_SEGMENT_UNMAP: remove_range(a, sz); break;
    default: break;
  }
}

void AllocState::undo(const DeviceData& d, size_t i) {
  uint64_t a = d.addr[i], sz = d.size[i];
  switch (d.action[i]) {
    case ACT_ALLOC: blocks.erase(a); break;
    case ACT_FREE_REQUESTED: {
      auto it = blocks.find(a);
      uint32_t j = d.link[i];
      uint32_t stk = j != kNoLink ? d.stack[j] : d.stack[i];
      uint64_t req = j != kNoLink ? d.size[j] - d.waste[j] : sz;
      if (it != blocks.end()) {
        // Undoing its free_completed made it pending with that event's stack (the free's, or none: the
        // PyTorch-allocator mode records none for completions); an allocated block has its alloc's stack.
        it->second.state = ST_ALLOCATED;
        if (j != kNoLink) it->second.stack = stk, it->second.requested = req;
      } else {
        blocks[a] = LiveBlock{sz, req, stk, ST_ALLOCATED};
      }
      break;
    }
    case ACT_FREE_COMPLETED: {
      // Before its free completed the block was pending; its alloc (if in the trace) is undone later.
      auto it = blocks.find(a);
      if (it == blocks.end()) blocks[a] = LiveBlock{sz, sz, d.stack[i], ST_PENDING_FREE};
      break;
    }
    case ACT_SEGMENT_ALLOC:
    case ACT_SEGMENT_MAP: remove_range(a, sz); break;
    case ACT_SEGMENT_FREE:
    case ACT_SEGMENT_UNMAP: {
      auto pool = d.segment_pools.find(uint32_t(i));
      const std::pair<uint64_t, uint64_t> id =
          pool == d.segment_pools.end() ? std::pair<uint64_t, uint64_t>{} : pool->second;
      add_range(
          a, RangeInfo{sz, d.stream[i], d.stack[i], d.pool[i], d.action[i] == ACT_SEGMENT_UNMAP, id.first, id.second});
      break;
    }
    default: break;
  }
}

std::vector<SegmentData> AllocState::materialize(int device) const {
  (void)device;
  std::vector<SegmentData> out;
  for (auto it = ranges.begin(); it != ranges.end();) {
    SegmentData s;
    s.addr = it->first;
    s.size = it->second.size;
    s.stream = it->second.stream;
    s.stack = it->second.stack;
    s.pool = it->second.pool;
    s.expandable = it->second.expandable;
    s.pool_id0 = it->second.pool_id0;
    s.pool_id1 = it->second.pool_id1;
    ++it;
    while (s.expandable && it != ranges.end() && it->first == s.addr + s.size && it->second.expandable &&
           it->second.stream == s.stream && it->second.pool == s.pool) {
      s.size += it->second.size;
      ++it;
    }
    uint64_t end = s.addr + s.size, cursor = s.addr;
    for (auto b = blocks.lower_bound(s.addr); b != blocks.end() && b->first < end; ++b) {
      if (b->first > cursor) s.blocks.push_back(BlockData{cursor, b->first - cursor, 0, 0, ST_INACTIVE});
      s.blocks.push_back(BlockData{b->first, b->second.size, b->second.requested, b->second.stack, b->second.state,
                                   b->second.untraced});
      cursor = std::max(cursor, b->first + b->second.size);
    }
    if (cursor < end) s.blocks.push_back(BlockData{cursor, end - cursor, 0, 0, ST_INACTIVE});
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<SegmentData> state_after(const DeviceData& d, size_t n) {
  n = std::min(n, d.count());
  if (d.have_final && n == d.final_after) return d.final_segments;
  if (!d.replay_cache) d.replay_cache = std::make_shared<ReplayCache>();
  ReplayCache& cache = *d.replay_cache;
  // Forward bases: the empty start of a capture, its REC_STATE checkpoints, states cached earlier.
  static const std::vector<SegmentData> kEmpty;
  long fwd_from = -1;
  const std::vector<SegmentData>* file_base = nullptr;
  const AllocState* cached = nullptr;
  if (d.start_empty) fwd_from = 0, file_base = &kEmpty;
  for (const auto& [at, segs] : d.checkpoints)
    if (at <= n && (long)at >= fwd_from) fwd_from = (long)at, file_base = &segs;
  auto it = cache.states.upper_bound(n);
  if (it != cache.states.begin() && (long)std::prev(it)->first >= fwd_from) {
    --it;
    fwd_from = (long)it->first, cached = &it->second, file_base = nullptr;
  }
  bool can_back = d.have_final && d.final_after >= n && !d.forward_only;
  size_t back_cost = can_back ? d.final_after - n : SIZE_MAX;
  if (fwd_from < 0 && can_back && back_cost > kReplayCheckpointEvery) {
    // A pickle's start is known only by undoing its whole trace: do that once, then replay forward
    // from cached states (a 1 M-event pickle answers any moment in a fraction of a trace).
    AllocState s = AllocState::from_segments(d.final_segments);
    for (size_t i = d.final_after; i > 0; i--) s.undo(d, i - 1);
    cached = &cache.states.emplace(0, std::move(s)).first->second;
    fwd_from = 0;
  }
  size_t fwd_cost = fwd_from >= 0 ? n - (size_t)fwd_from : SIZE_MAX;
  if (fwd_from < 0 && !can_back) return {};
  if (back_cost < fwd_cost) {
    AllocState s = AllocState::from_segments(d.final_segments);
    for (size_t i = d.final_after; i > n; i--) s.undo(d, i - 1);
    return s.materialize(d.index);
  }
  AllocState s = cached ? *cached : AllocState::from_segments(*file_base);
  for (size_t i = (size_t)fwd_from; i < n; i++) {
    s.apply(d, i);
    if ((i + 1) % kReplayCheckpointEvery == 0 && !cache.states.count(i + 1)) cache.states.emplace(i + 1, s);
  }
  return s.materialize(d.index);
}

FragFigures fragmentation(const std::vector<SegmentData>& segs) {
  FragFigures f;
  for (const auto& s : segs) {
    f.reserved += s.size;
    uint64_t seg_free = 0;
    bool any_active = false;
    for (const auto& b : s.blocks) {
      f.blocks++;
      if (b.state == ST_ALLOCATED) {
        f.allocated += b.size;
        f.allocated_blocks++;
        if (b.requested && b.requested <= b.size) f.rounding_waste += b.size - b.requested;
        any_active = true;
      } else if (b.state == ST_PENDING_FREE) {
        f.pending_free += b.size;
        any_active = true;
      } else {
        f.free_blocks++;
        seg_free += b.size;
        f.largest_free = std::max(f.largest_free, b.size);
      }
    }
    if (any_active)
      f.split_remainder += seg_free;
    else
      f.cached_free += seg_free;
  }
  return f;
}

}  // namespace gpumem
