// what_if.cc — see Note [What-if] in what_if.h.
#include "what_if.h"

#include <algorithm>

#include "../../format/gpumem_format.h"
#include "oom_message.h"

namespace gpumem::core {

// Note [Policies]: the four policies a user can compare, as allocator options.
//  pytorch             PyTorch's default caching allocator: our fixed segments (same rounding, pools,
//                      splitting and OOM ladder; max_split_size and garbage collection unset).
//  pytorch-expandable  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: expandable segments whose
//                      free pages stay mapped until empty_cache (PyTorch opens another reservation
//                      when one is full; we keep one larger one, Note [Expandable reservation]).
//  lens                our default: expandable segments with trim on growth (Note [Trim on growth]).
//  lens-no-trim        expandable without trim: `gpumem run --no-trim`, the same as pytorch-expandable.
const char* policy_name(Policy p) {
  switch (p) {
    case Policy::kPytorch: return "pytorch";
    case Policy::kPytorchExpandable: return "pytorch-expandable";
    case Policy::kLens: return "lens";
    case Policy::kLensNoTrim: return "lens-no-trim";
  }
  return "?";
}

bool parse_policy(const std::string& name, Policy* out) {
  for (Policy p : {Policy::kPytorch, Policy::kPytorchExpandable, Policy::kLens, Policy::kLensNoTrim}) {
    if (name == policy_name(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

Options policy_options(Policy p) {
  Options o;
  o.expandable = p != Policy::kPytorch;
  o.trim_on_growth = p == Policy::kLens;
  return o;
}

Policy policy_of(const Options& o) {
  if (!o.expandable) return Policy::kPytorch;
  return o.trim_on_growth ? Policy::kLens : Policy::kLensNoTrim;
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kFromCache: return "from-cache";
    case Outcome::kGrows: return "grows";
    case Outcome::kOom: return "oom";
  }
  return "?";
}

SimCopy::SimCopy(const AllocatorState& s) : sim(1, s.capacity), allocator(0, sim, policy_options(s.policy)) {
  allocator.restore(s.segments, s.reserved_peak);
}

WhatIf::WhatIf(AllocatorState state) : state_(std::move(state)) {
  if (state_.capacity == 0) throw RestoreError("a what-if needs the device's capacity in bytes");
  reserved_ = uint64_t(copy()->allocator.stats().reserved_bytes[kAll].current);
}

uint64_t WhatIf::empty_cache() const {
  auto c = copy();
  uint64_t before = 0, after = 0;
  c->allocator.empty_cache(&before, &after, 0);
  return before - after;
}

RequestAnswer WhatIf::request(size_t bytes, Stream stream) const {
  RequestAnswer a;
  if (bytes > state_.capacity) {  // more than the device: no policy serves it (and sizes stay far from overflow)
    a.outcome = Outcome::kOom;
    a.reserved_after = reserved_;
    a.oom_message = "CUDA out of memory. Tried to allocate " + format_size(bytes) + ", more than the device's " +
                    format_size(state_.capacity) + ".";
    return a;
  }
  auto c = copy();
  const uint64_t new_before = c->sim.new_device_bytes();
  try {
    c->allocator.malloc(bytes, stream, 0);
  } catch (const OutOfMemory& e) {
    a.outcome = Outcome::kOom;
    a.oom_message = e.what();
    a.reserved_after = uint64_t(c->allocator.stats().reserved_bytes[kAll].current);
    return a;
  }
  a.grows_by = c->sim.new_device_bytes() - new_before;
  a.outcome = a.grows_by ? Outcome::kGrows : Outcome::kFromCache;
  a.reserved_after = uint64_t(c->allocator.stats().reserved_bytes[kAll].current);
  return a;
}

uint64_t WhatIf::largest_without_growth(Stream stream) const {
  auto from_cache = [&](uint64_t n) { return request(size_t(n), stream).outcome == Outcome::kFromCache; };
  // Largest n in [lo, hi] (multiples of 512) with from_cache(n), assuming it holds for a prefix.
  auto bisect = [&](uint64_t lo, uint64_t hi) -> uint64_t {
    if (hi < lo || !from_cache(lo)) return 0;
    uint64_t good = lo / kMinBlockSize, bad = hi / kMinBlockSize + 1;  // in 512 B units
    if (from_cache(hi)) return hi;
    bad = hi / kMinBlockSize;
    while (bad - good > 1) {
      const uint64_t mid = good + (bad - good) / 2;
      (from_cache(mid * kMinBlockSize) ? good : bad) = mid;
    }
    return good * kMinBlockSize;
  };
  // A request no larger than the reserved memory is the most the cache can serve.
  const uint64_t large = reserved_ > kSmallSize ? bisect(kSmallSize + kMinBlockSize, reserved_ / kMinBlockSize * kMinBlockSize) : 0;
  return large ? large : bisect(kMinBlockSize, kSmallSize);
}

Stream WhatIf::default_stream() const {
  uint64_t best = 0;
  Stream stream = 0;
  for (const SegmentView& s : state_.segments)
    for (const BlockView& b : s.blocks)
      if (b.state == fmt::BLOCK_INACTIVE && b.size > best) best = b.size, stream = s.stream;
  return stream;
}

}  // namespace gpumem::core
