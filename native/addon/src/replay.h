// Allocator state replay: segments and blocks at any event position, forward from a known state
// (capture start or a REC_STATE checkpoint) or backward from the final state (pickles, like memory_viz).
//
// Note [State as ranges and live blocks]: the state keeps the reserved address ranges and the active
// blocks (allocated or pending free) only; inactive blocks are the gaps between active blocks inside a
// segment. PyTorch merges adjacent free blocks of a segment, so the gaps are exactly its inactive blocks.
// Expandable segments are kept as mapped ranges and merged when adjacent, like PyTorch reports them.
#pragma once
#include <map>
#include <vector>

#include "model.h"

namespace gpumem {

struct RangeInfo {
  uint64_t size, stream;
  uint32_t stack;
  uint8_t pool;
  bool expandable;
  uint64_t pool_id0, pool_id1;
};

struct LiveBlock {
  uint64_t size, requested;
  uint32_t stack;
  uint8_t state;
  bool untraced = false;  // Note [Untraced blocks]: kept from the final state back to the start
};

struct AllocState {
  std::map<uint64_t, RangeInfo> ranges;
  std::map<uint64_t, LiveBlock> blocks;

  static AllocState from_segments(const std::vector<SegmentData>& segs);
  void add_range(uint64_t addr, const RangeInfo& r);
  void remove_range(uint64_t addr, uint64_t size);
  void apply(const DeviceData& d, size_t i);
  void undo(const DeviceData& d, size_t i);
  std::vector<SegmentData> materialize(int device) const;
};

struct ReplayCache {
  std::map<size_t, AllocState> states;  // event index → state after events [0, index)
};
constexpr size_t kReplayCheckpointEvery = size_t(1) << 18;

// State after events [0, n) of a device.
std::vector<SegmentData> state_after(const DeviceData& d, size_t n);

// Pool of a segment the trace creates: PyTorch's small pool uses 2 MiB segments (and 2 MiB pages when
// expandable); large segments are ≥ 10 MiB (20 MiB pages), so the size tells them apart.
inline uint8_t pool_from_size(uint64_t size) { return size <= (2u << 20) ? POOL_SMALL : POOL_LARGE; }

struct FragFigures {
  uint64_t reserved = 0, allocated = 0, largest_free = 0, free_blocks = 0, cached_free = 0, split_remainder = 0,
           rounding_waste = 0, pending_free = 0, blocks = 0, allocated_blocks = 0;
};
FragFigures fragmentation(const std::vector<SegmentData>& segs);

}  // namespace gpumem
