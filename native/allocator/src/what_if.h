// what_if.h — ask the allocator's own policy, on the simulated device, what it would do from a given
// state: how much empty_cache() would release, whether a request is served from the cache, grows
// the device's memory or fails, and the largest request served without growth.
//
// Note [What-if]: every sentence the tool says about what would fail or be released is computed
// here, never worded from a model of the allocator (DESIGN §6). A question runs on a fresh copy of
// the state (DeviceAllocator::restore, Note [Restored state]) so that asking changes nothing; the
// copy has the policy's options and the simulated device the capacity given.
//  - Growth means new device memory: bytes of fresh cuMemAlloc segments or cuMemMap pages
//    (SimBackend::new_device_bytes). A request that trim on growth serves by moving free pages
//    (Note [Page moves]) takes none: it is served from the cache. A request the OOM ladder serves
//    after waiting for pending frees takes none either.
//  - largest_without_growth bisects the request size (512 B steps) separately in the small pool's
//    range (≤ 1 MiB) and above it, because a large free block does not serve a small request. The
//    answer is monotone in the size within each range for every policy (fixed: one free block fits;
//    expandable: one free mapped block fits, or with trim enough movable free pages exist), so
//    bisection finds the largest; it costs about 30 copies. The largest free block of the stream is
//    tried first: when the allocator confirms it (served, and 512 B more not), two copies suffice.
//    With PyTorch's max_split_size set the answer is not monotone across it (an oversize block serves
//    only requests near its size), so the range is cut there and the largest oversize free block that
//    serves its own size is the answer above it (Note [PyTorch's settings] in device_allocator.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../format/json.h"
#include "device_allocator.h"
#include "sim_backend.h"

namespace gpumem::core {

// The allocator policies a what-if or a replay can use (Note [Policies] in what_if.cc).
enum class Policy { kPytorch, kPytorchExpandable, kLens, kLensNoTrim };
const char* policy_name(Policy p);  // "pytorch", "pytorch-expandable", "lens", "lens-no-trim"
bool parse_policy(const std::string& name, Policy* out);
bool is_pytorch(Policy p);  // PyTorch's allocator: the policies PYTORCH_CUDA_ALLOC_CONF settings apply to

// The policy's options; `settings` apply to the pytorch policies only (the lens allocator does not read them).
Options policy_options(Policy p, const PytorchSettings& settings = {});
Policy policy_of(const Options& o);

// Where a what-if starts: segments as DeviceAllocator::segments() reports them.
struct AllocatorState {
  uint64_t capacity = 0;  // the simulated device's memory (bytes)
  Policy policy = Policy::kLens;
  PytorchSettings settings;  // the pytorch policies' PYTORCH_CUDA_ALLOC_CONF settings
  std::vector<SegmentView> segments;
  uint64_t reserved_peak = 0;  // the run's reserved peak so far, if known (Note [Restored state])
};

enum class Outcome { kFromCache, kGrows, kOom };
const char* outcome_name(Outcome o);  // "from-cache", "grows", "oom"
struct RequestAnswer {
  Outcome outcome = Outcome::kFromCache;
  uint64_t grows_by = 0;        // new device memory taken (0 unless kGrows)
  uint64_t reserved_after = 0;  // reserved bytes after the request (before it, on OOM)
  std::string oom_message;      // the allocator's own message, on OOM
};

// One simulated device holding a restored state.
struct SimCopy {
  explicit SimCopy(const AllocatorState& s);
  SimBackend sim;
  DeviceAllocator allocator;
};

class WhatIf {
 public:
  // Restores the state once to check it (throws RestoreError with the reason).
  explicit WhatIf(AllocatorState state);
  const AllocatorState& state() const { return state_; }
  uint64_t reserved() const { return reserved_; }
  uint64_t empty_cache() const;  // bytes empty_cache() would release
  RequestAnswer request(size_t bytes, Stream stream) const;
  uint64_t largest_without_growth(Stream stream) const;
  // The stream of the largest free block (the one a large request most likely runs on), else 0.
  Stream default_stream() const;
  std::unique_ptr<SimCopy> copy() const { return std::make_unique<SimCopy>(state_); }

 private:
  AllocatorState state_;
  uint64_t reserved_ = 0;
};

}  // namespace gpumem::core
