// stats.h — the allocator's counters in PyTorch 2.11's memory_stats() schema (122 keys).
#pragma once
#include <cstdint>
#include <string>

namespace gpumem::core {

// One counter as PyTorch keeps it: current value, its peak, and accumulated increases/decreases.
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n) {
    if (n < 0) return decrease(-n);
    current += n;
    allocated += n;
    if (current > peak) peak = current;
  }
  void decrease(int64_t n) {
    if (n < 0) return increase(-n);
    current -= n;
    freed += n;
  }
  void reset_peak() { peak = current; }
  void reset_accumulated() { allocated = freed = 0; }
};

enum StatType { kAll = 0, kSmallPool = 1, kLargePool = 2, kNumStatTypes = 3 };

struct DeviceStats {
  Stat allocation[kNumStatTypes];      // blocks handed out and not yet freed
  Stat segment[kNumStatTypes];         // driver allocations (expandable: mapped runs)
  Stat active[kNumStatTypes];          // allocated + pending-free blocks
  Stat inactive_split[kNumStatTypes];  // free blocks of split fixed segments (not releasable)
  Stat allocated_bytes[kNumStatTypes];
  Stat reserved_bytes[kNumStatTypes];
  Stat active_bytes[kNumStatTypes];
  Stat inactive_split_bytes[kNumStatTypes];
  Stat requested_bytes[kNumStatTypes];           // bytes callers asked for, before rounding
  Stat oversize_allocations, oversize_segments;  // always 0: max_split_size is not supported (unset)
  int64_t num_alloc_retries = 0, num_ooms = 0, num_sync_all_streams = 0, num_device_alloc = 0, num_device_free = 0;
  // Beyond PyTorch's schema (the bootstrap's memory_stats() drops them, Note [Stats schema]): trims
  // on growth that synchronized a stream, and pages they moved instead (Note [Page moves]).
  int64_t num_trim_syncs = 0, num_page_moves = 0;
  int64_t max_split_size = -1;  // PyTorch reports SIZE_MAX (unset) as -1

  void reset_peak();
  void reset_accumulated();
  // {"active.all.allocated": N, ...}: every key, sorted like torch.cuda.memory_stats().
  std::string to_json() const;
};

}  // namespace gpumem::core
