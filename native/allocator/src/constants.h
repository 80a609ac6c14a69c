// constants.h — the sizes that shape caching, the same values as PyTorch's CUDACachingAllocator
// (c10/core/AllocatorConfig.h in 2.11) so that our block layout matches what users know.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gpumem::core {

constexpr size_t kMinBlockSize = 512;           // every size is rounded up to a multiple of this
constexpr size_t kSmallSize = 1ull << 20;       // requests ≤ 1 MiB go to the small pool
constexpr size_t kSmallBuffer = 2ull << 20;     // small-pool segments are 2 MiB
constexpr size_t kMinLargeAlloc = 10ull << 20;  // requests < 10 MiB share 20 MiB segments
constexpr size_t kLargeBuffer = 20ull << 20;    // the shared large segment size
constexpr size_t kRoundLarge = 2ull << 20;      // larger requests get their own segment, rounded to 2 MiB

// Expandable segments map physical memory in pages of these sizes (PyTorch uses the same two).
constexpr size_t kSmallPage = kSmallBuffer;
constexpr size_t kLargePage = kLargeBuffer;
// Note [Expandable reservation] (device_allocator.cc): an expandable segment reserves this many times
// the device's memory of address space.
constexpr uint64_t kExpandableRangeFactor = 4;
// Note [Futile trims] (device_allocator.h): trims on growth allowed after each new high of demand.
constexpr int kTrimsPerDemand = 4;
// Under memory pressure (a growth would take reserved memory above this many tenths of the device or its limit),
// trims may synchronize, and each reserved peak is defended this many times.
constexpr uint64_t kPressedTenths = 9;
constexpr int kTrimsPerPressedPeak = 16;
// Note [PyTorch's settings] (device_allocator.h): roundup_power2_divisions has one value per power-of-two interval of
// request sizes, from below 2 MiB (index 0, PyTorch's key "1") to 32 GiB and above (index 15, key "32768").
constexpr size_t kRoundupIntervals = 16;
constexpr uint64_t kNoMaxSplit = UINT64_MAX;  // max_split_size unset: blocks of any size may split

using Stream = uint64_t;  // cudaStream_t as an integer (0 = legacy default stream)
using Event = uint64_t;   // a backend's event handle as an integer
// PyTorch's MempoolId_t: (first, second); (0, 0) means the default pools.
struct PoolId {
  uint64_t first = 0, second = 0;
  bool operator<(const PoolId& o) const { return first != o.first ? first < o.first : second < o.second; }
  bool operator==(const PoolId& o) const { return first == o.first && second == o.second; }
};

inline size_t round_size(size_t size) {
  return size < kMinBlockSize ? kMinBlockSize : (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

// Bytes to take from the driver for a (rounded) request when no cached block fits.
inline size_t allocation_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

}  // namespace gpumem::core
