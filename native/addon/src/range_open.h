// range_open.h — open a time window of a PyTorch snapshot pickle without holding the rest:
// see Note [Range-first open] in range_open.cpp.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model.h"

namespace gpumem {

// A time window [from_us, to_us] of the trace (times as the model shows them: made monotonic).
struct TimeWindow {
  int64_t from_us = INT64_MIN, to_us = INT64_MAX;
  bool whole() const { return from_us == INT64_MIN && to_us == INT64_MAX; }
};

class RangeFilter {
 public:
  explicit RangeFilter(TimeWindow w) : w_(w) {}
  // The next trace entry, in pickle order, with its raw time (INT64_MIN: none). Returns whether it is kept as a
  // row; t_out is its monotonic time (what the model's trace() would make it).
  bool on_entry(int64_t raw_t, uint8_t act, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack, uint8_t pool,
                int64_t& t_out);
  // After the parse: the device's rows are the window; gives it the allocator state at the window's start and
  // its start figures, as a full open has them at that moment.
  void finish(DeviceData& d) const;
  const TimeWindow& window() const { return w_; }
  size_t before = 0, kept = 0, after = 0;
  bool saw_time = false;  // an entry had a time_us

 private:
  struct Alloc {
    uint64_t size;
    uint32_t stack;
  };
  struct Ev {
    uint8_t act;
    bool linked;
    uint64_t size;
    uint32_t stack;
    Alloc link;
  };
  // Events of one address from the window's start on, up to its first alloc (closed: that alloc was seen).
  struct Chain {
    std::vector<Ev> ev;
    bool closed = false;
  };
  struct SegEv {
    uint8_t act, pool;
    uint64_t addr, size, stream;
    uint32_t stack;
  };
  TimeWindow w_;
  int64_t last_t_ = 0;
  std::unordered_map<uint64_t, Alloc> pre_live_;  // allocs before the window not yet paired with a free
  std::unordered_map<uint64_t, Chain> chains_;
  std::vector<DeviceData::StartAlloc> start_allocs_;  // pre_live_ at the window's start
  bool started_ = false;
  std::vector<SegEv> segs_;  // segment events from the window's start on (rare)
  uint64_t sum_alloc_ = 0, sum_freed_ = 0, sum_seg_in_ = 0, sum_seg_out_ = 0;  // from the window's start on
  // Addresses whose last alloc/free_requested of the whole trace is an alloc: the trace's allocations live at its end
  // (Note [Untraced blocks]: the final state's other allocated blocks have no history), the size of the live set.
  std::unordered_set<uint64_t> live_at_end_;
};

}  // namespace gpumem
