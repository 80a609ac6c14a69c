// pytorch_settings.h — PyTorch's CUDACachingAllocator rounding and the PYTORCH_CUDA_ALLOC_CONF settings it reads, as
// one small piece of the core: the pytorch policies (device_allocator), the what-if's policies (what_if) and the
// observer of PyTorch's own allocator (observer.cc, above the core) use these and nothing else of the core's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "../../format/json.h"
#include "constants.h"

namespace gpumem::core {

// PYTORCH_CUDA_ALLOC_CONF settings the pytorch policies model (Note [PyTorch's settings] in device_allocator.h);
// expandable_segments is the policy's own. Defaults: PyTorch's.
struct PytorchSettings {
  uint64_t max_split_size = kNoMaxSplit;
  uint64_t max_non_split_rounding = kLargeBuffer;
  std::array<uint32_t, kRoundupIntervals> roundup_power2_divisions{};
  bool operator==(const PytorchSettings& o) const {
    return max_split_size == o.max_split_size && max_non_split_rounding == o.max_non_split_rounding &&
           roundup_power2_divisions == o.roundup_power2_divisions;
  }
};

// The typed settings of torch.cuda.memory._snapshot()["allocator_settings"] (PyTorch's own parse of
// PYTORCH_CUDA_ALLOC_CONF): max_split_size (bytes; -1 or SIZE_MAX: none), max_non_split_rounding (bytes, where it is
// reported) and roundup_power2_divisions (an object {"1": n, "2": n, … "32768": n} by interval start in MiB, a list of
// one value per interval, or one value for all). Members it does not carry, or cannot read, keep PyTorch's defaults.
PytorchSettings pytorch_settings_from_json(const json::Value& settings);

// The block size PyTorch's CUDACachingAllocator gives a request (its round_size) under roundup_power2_divisions (Note
// [PyTorch's settings] in device_allocator.h); all zeros: 512 B rounding. The pytorch policies and the observer of
// PyTorch's allocator (Note [Observed block sizes] in observer.cc) size blocks with it.
size_t pytorch_round(size_t requested, const std::array<uint32_t, kRoundupIntervals>& divisions_by_interval);

}  // namespace gpumem::core
