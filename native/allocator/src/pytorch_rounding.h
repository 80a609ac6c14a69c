// pytorch_rounding.h — how PyTorch 2.11's CUDACachingAllocator sizes a block, under the settings the user gave it
// (PYTORCH_CUDA_ALLOC_CONF's roundup_power2_divisions and max_split_size_mb, as torch.cuda.memory._snapshot()'s
// "allocator_settings" reports them after PyTorch parsed them). Header-only, no dependencies beyond json.h.
//
// Note [PyTorch's block sizes]: PyTorch's allocated_bytes count blocks, not requests. A request is rounded
// (round_size: to 512 B, or, for a size interval with N > 1 roundup_power2_divisions, up to the next of N equal
// divisions of its power-of-two interval), and a cached block is split only when the remainder is worth keeping
// (should_split: small pool ≥ 512 B; large pool > 1 MiB, and only for requests below max_split_size, so a request at
// or above it takes the whole free block, which may be up to 20 MiB larger). The observer sizes each block it records
// this way (Note [Observed block sizes] in observer.cc), so a capture's allocated is memory_allocated() under these
// settings too: on an H200, T5 under max_split_size_mb:64,roundup_power2_divisions:4 was 5.6 % short at step end
// with 512 B rounding alone.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "../../format/json.h"

namespace gpumem::pytorch {

constexpr uint64_t kMinBlockSize = 512;
constexpr uint64_t kSmallSize = 1ull << 20;
constexpr uint64_t kNoMaxSplit = UINT64_MAX;
constexpr int kIntervals = 16;  // 1 MiB … 32 GiB: PyTorch's roundup_power2_divisions_ table

struct Rounding {
  uint64_t max_split_size = kNoMaxSplit;
  std::array<uint32_t, kIntervals> divisions{};  // 0 or 1: plain 512 B rounding in that interval

  bool is_default() const {
    if (max_split_size != kNoMaxSplit) return false;
    for (uint32_t d : divisions)
      if (d > 1) return false;
    return true;
  }

  // c10::cuda::CUDACachingAllocator::round_size
  uint64_t round(uint64_t size) const {
    if (size < kMinBlockSize) return kMinBlockSize;
    const uint64_t div = divisions_for(size);
    if (div > 1 && size > kMinBlockSize * div) return next_division(size, div);
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
  }

  // should_split for a large-pool block: the remainder after a request of `size` (already rounded) is kept apart
  bool splits_large(uint64_t size, uint64_t remaining) const { return size < max_split_size && remaining > kSmallSize; }

  // From _snapshot()["allocator_settings"]: {"max_split_size": bytes, "roundup_power2_divisions": {"1": n, "2": n, …,
  // "32768": n}} (keys: each interval's start in MiB). Missing or odd members keep PyTorch's defaults.
  static Rounding from_settings(const json::Value& s) {
    Rounding r;
    if (!s.is_object()) return r;
    if (const json::Value* m = s.find("max_split_size"); m && m->is_number() && m->as_double() > 0 &&
                                                         m->as_double() < 1.8e19)
      r.max_split_size = uint64_t(m->as_double());
    if (const json::Value* d = s.find("roundup_power2_divisions"); d && d->is_object())
      for (const auto& [key, v] : d->members()) {
        if (!v.is_number()) continue;
        const uint64_t mib = std::strtoull(key.c_str(), nullptr, 10);
        for (int i = 0; i < kIntervals; i++)
          if (mib == (1ull << i)) r.divisions[size_t(i)] = uint32_t(std::max<int64_t>(0, v.as_int()));
      }
    return r;
  }

 private:
  static int log2_floor(uint64_t v) { return 63 - __builtin_clzll(v); }

  // roundup_power2_divisions(size): the interval of size, from 1 MiB (index 0) to 32 GiB (index 15)
  uint64_t divisions_for(uint64_t size) const {
    const int log_size = log2_floor(size), start = 20, end = 36;
    int index = log_size > start ? log_size - start : 0;
    if (index > end - start) index = end - start;
    if (index >= kIntervals) index = kIntervals - 1;
    return divisions[size_t(index)];
  }

  // roundup_power2_next_division
  static uint64_t next_division(uint64_t size, uint64_t div) {
    if ((size & (size - 1)) == 0) return size;
    const uint64_t floor = 1ull << log2_floor(size);
    const uint64_t step = floor >> log2_floor(div);
    if (step == 0) return floor << 1;
    const uint64_t base = size & ~(step - 1);
    return base == size ? size : base + step;
  }
};

}  // namespace gpumem::pytorch
