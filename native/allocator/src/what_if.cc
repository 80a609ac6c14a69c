// what_if.cc — see Note [What-if] in what_if.h.
#include "what_if.h"

#include <algorithm>
#include <cstdlib>

#include "../../format/gpumem_format.h"
#include "oom_message.h"

namespace gpumem::core {

// Note [Policies]: the four policies a user can compare, as allocator options.
//  pytorch             PyTorch's caching allocator: our fixed segments (same rounding, pools, splitting
//                      and OOM ladder), with the PYTORCH_CUDA_ALLOC_CONF settings it is given (Note
//                      [PyTorch's settings] in device_allocator.h; by default PyTorch's defaults).
//  pytorch-expandable  the same with expandable_segments:True: expandable segments whose free pages stay
//                      mapped until empty_cache, and PyTorch's best fit among them (PyTorch opens another
//                      reservation when one is full; we keep one larger one, Note [Expandable reservation]).
//  lens                our default: expandable segments with trim on growth (Note [Trim on growth]).
//  lens-no-trim        expandable without trim: `gpumem run --no-trim` (our best fit: the smallest block).
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

bool is_pytorch(Policy p) { return p == Policy::kPytorch || p == Policy::kPytorchExpandable; }

Options policy_options(Policy p, const PytorchSettings& settings) {
  Options o;
  o.expandable = p != Policy::kPytorch;
  o.trim_on_growth = p == Policy::kLens;
  if (is_pytorch(p)) {
    o.max_split_size = settings.max_split_size;
    o.max_non_split_rounding = settings.max_non_split_rounding;
    o.roundup_power2_divisions = settings.roundup_power2_divisions;
    o.expandable_fit = p == Policy::kPytorchExpandable;
  }
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

SimCopy::SimCopy(const AllocatorState& s)
    : sim(1, s.capacity), allocator(0, sim, policy_options(s.policy, s.settings)) {
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
  // The largest free block of the stream in each pool's range: the answer whenever no trim moves
  // pages (fixed segments, expandable without trim, below the reserved peak). It is only a guess
  // until the allocator confirms it (served, and 512 B more not); otherwise bisection decides.
  uint64_t free_large = 0, free_small = 0;
  for (const SegmentView& s : state_.segments) {
    if (s.stream != stream) continue;
    const bool small = (s.flags & fmt::kPoolSmall) != 0;
    for (const BlockView& b : s.blocks)
      if (b.state == fmt::BLOCK_INACTIVE)
        (small ? free_small : free_large) = std::max(small ? free_small : free_large, b.size);
  }
  // Largest n in [lo, hi] (multiples of 512) with from_cache(n), assuming it holds for a prefix.
  auto search = [&](uint64_t lo, uint64_t hi, uint64_t guess) -> uint64_t {
    if (hi < lo) return 0;
    if (guess >= lo && guess < hi && from_cache(guess) && !from_cache(guess + kMinBlockSize)) return guess;
    if (!from_cache(lo)) return 0;
    if (from_cache(hi)) return hi;
    uint64_t good = lo / kMinBlockSize, bad = hi / kMinBlockSize;  // in 512 B units
    while (bad - good > 1) {
      const uint64_t mid = good + (bad - good) / 2;
      (from_cache(mid * kMinBlockSize) ? good : bad) = mid;
    }
    return good * kMinBlockSize;
  };
  // A request no larger than the reserved memory is the most the cache can serve.
  uint64_t top = reserved_ / kMinBlockSize * kMinBlockSize;
  uint64_t oversize = 0;
  const uint64_t max_split = is_pytorch(state_.policy) ? state_.settings.max_split_size : kNoMaxSplit;
  if (max_split != kNoMaxSplit) {
    // Note [PyTorch's settings]: an oversize block serves only requests within max_non_split_rounding below it, so
    // "served from the cache" is not monotone across max_split_size: below it bisection decides among the blocks
    // that split; at or above it the largest such block serves a request of its own size.
    for (const SegmentView& s : state_.segments)
      if (s.stream == stream && !(s.flags & fmt::kPoolSmall))
        for (const BlockView& b : s.blocks)
          if (b.state == fmt::BLOCK_INACTIVE && b.size >= max_split && b.size > oversize && from_cache(b.size))
            oversize = b.size;
    top = std::min<uint64_t>(top, (max_split - 1) / kMinBlockSize * kMinBlockSize);
  }
  const uint64_t large =
      reserved_ > kSmallSize ? std::max(oversize, search(kSmallSize + kMinBlockSize, top, free_large)) : 0;
  return large ? large : search(kMinBlockSize, kSmallSize, std::min(free_small, kSmallSize));
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
