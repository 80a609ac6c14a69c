// test_pytorch_settings.cc — the PYTORCH_CUDA_ALLOC_CONF settings the pytorch policies model (Note [PyTorch's
// settings] in device_allocator.h): roundup_power2_divisions, max_split_size and its OOM step, PyTorch's best fit
// among expandable blocks; a private pool's own empty cache; and the sim's recorded addresses (Note [Recorded
// addresses] in sim_backend.h). Every expected figure follows from PyTorch 2.11's rules by hand.
#include "fixture.h"
#include "what_if.h"

using namespace gpumem::core;
using namespace t;

namespace {
Options with_divisions(uint32_t d, size_t from = 0, size_t to = kRoundupIntervals) {
  Options o;
  for (size_t i = from; i < to; i++) o.roundup_power2_divisions[i] = d;
  return o;
}
Options with_max_split(uint64_t bytes) {
  Options o;
  o.max_split_size = bytes;
  return o;
}
struct Px {  // one simulated device with the given options (fixture.h's Fx takes the lens's)
  SimBackend sim;
  DeviceAllocator a;
  Px(Options o, uint64_t capacity = GiB) : sim(1, capacity), a(0, sim, o) {}
  uint64_t m(size_t n, Stream s = 0) {
    const uint64_t p = reinterpret_cast<uint64_t>(a.malloc(n, s, 0));
    CHECK_EQ(a.check_invariants(), std::string());
    return p;
  }
  void f(uint64_t p) {
    CHECK(a.free(reinterpret_cast<void*>(p)));
    CHECK_EQ(a.check_invariants(), std::string());
  }
  int64_t allocated() { return a.stats().allocated_bytes[kAll].current; }
  int64_t reserved() { return a.stats().reserved_bytes[kAll].current; }
};
}  // namespace

TEST(roundup_power2_divisions_rounds_to_the_next_of_n_steps_between_powers_of_two) {
  Px x(with_divisions(4));
  x.m(1200);  // not above 512 × 4: 512 B rounding as without the setting
  CHECK_EQ(x.allocated(), int64_t(1536));
  x.m(5000);  // 4096 .. 8192 in 4 steps of 1 KiB: 5120
  CHECK_EQ(x.allocated(), int64_t(1536 + 5120));
  x.m(4096);  // a power of two stays
  CHECK_EQ(x.allocated(), int64_t(1536 + 5120 + 4096));
  x.m(9 * MiB + 1);  // 8 .. 16 MiB in steps of 2 MiB: 10 MiB
  CHECK_EQ(x.allocated(), int64_t(1536 + 5120 + 4096 + 10 * MiB));
  CHECK_EQ(x.a.stats().requested_bytes[kAll].current, int64_t(1200 + 5000 + 4096 + 9 * MiB + 1));
}

TEST(roundup_power2_divisions_apply_per_interval_of_the_request_size) {
  // Only the interval of 8 MiB ("8" in PyTorch's dict: index 3) rounds in 2 steps; the others by 512 B.
  Px x(with_divisions(2, 3, 4));
  x.m(9 * MiB + 1);
  CHECK_EQ(x.allocated(), int64_t(12 * MiB));
  x.m(3 * MiB + 1);  // the "2" interval: no divisions
  CHECK_EQ(x.allocated(), int64_t(12 * MiB + 3 * MiB + 512));
}

TEST(max_split_size_keeps_oversize_blocks_whole_and_for_requests_within_20_MiB_of_them) {
  Px x(with_max_split(64 * MiB));
  uint64_t a = x.m(100 * MiB);
  x.f(a);
  uint64_t b = x.m(90 * MiB);  // oversize and within kLargeBuffer: the cached block, unsplit
  CHECK_EQ(b, a);
  CHECK_EQ(x.allocated(), int64_t(100 * MiB));
  CHECK_EQ(x.reserved(), int64_t(100 * MiB));
  x.f(b);
  uint64_t c = x.m(70 * MiB);  // oversize, but the block is 30 MiB larger: a segment of its own
  CHECK(c != a);
  CHECK_EQ(x.reserved(), int64_t(170 * MiB));
  x.m(30 * MiB);  // below max_split_size: oversize blocks never serve it
  CHECK_EQ(x.reserved(), int64_t(200 * MiB));
  CHECK_EQ(x.a.stats().num_device_alloc, int64_t(3));
}

TEST(without_max_split_size_the_same_requests_split_the_cached_block) {
  Px x(Options{});
  uint64_t a = x.m(100 * MiB);
  x.f(a);
  CHECK_EQ(x.m(70 * MiB), a);  // split: 30 MiB remain in the segment
  CHECK_EQ(x.allocated(), int64_t(70 * MiB));
  CHECK_EQ(x.reserved(), int64_t(100 * MiB));
}

TEST(max_split_size_frees_cached_oversize_segments_before_the_whole_cache) {
  // 200 MiB device: A (100 MiB, oversize) and C (30 MiB) cached, B (50 MiB) live. 80 MiB more does not fit; PyTorch
  // frees the smallest cached oversize segment that covers the request (A) and keeps C.
  Px x(with_max_split(64 * MiB), 200 * MiB);
  uint64_t a = x.m(100 * MiB), c = x.m(30 * MiB);
  x.m(50 * MiB);
  x.f(a), x.f(c);
  CHECK_EQ(x.reserved(), int64_t(180 * MiB));
  x.m(80 * MiB);
  CHECK_EQ(x.reserved(), int64_t(160 * MiB));  // C's 30 + B's 50 + 80
  CHECK_EQ(x.a.stats().num_alloc_retries, int64_t(0));
  // The same without the setting: the cached 100 MiB block serves it, split.
  Px y(Options{}, 200 * MiB);
  uint64_t ya = y.m(100 * MiB), yc = y.m(30 * MiB);
  y.m(50 * MiB);
  y.f(ya), y.f(yc);
  CHECK_EQ(y.m(80 * MiB), ya);
  CHECK_EQ(y.reserved(), int64_t(180 * MiB));
}

TEST(max_split_size_frees_the_largest_oversize_segments_until_they_add_up) {
  // No single cached oversize block covers 150 MiB: the largest ones of the stream go until they add up.
  Px x(with_max_split(64 * MiB), 300 * MiB);
  uint64_t a = x.m(70 * MiB), b = x.m(90 * MiB), c = x.m(100 * MiB);
  x.f(a), x.f(b), x.f(c);
  x.m(150 * MiB);  // 260 + 150 > 300: frees C (100) then B (90): 190 ≥ 150
  CHECK_EQ(x.reserved(), int64_t(70 * MiB + 150 * MiB));
  CHECK_EQ(x.a.stats().num_alloc_retries, int64_t(0));
}

TEST(pytorch_expandable_fit_skips_the_growing_end_of_a_segment) {
  // One large page: a (4 MiB) b (4 MiB) c (10 MiB), 2 MiB free at the end before unmapped pages; a and b freed leave
  // an 8 MiB hole. 1.5 MiB: our best fit takes the 2 MiB end, PyTorch's the hole (the end counts as large as it could
  // grow).
  for (const bool pytorch_fit : {false, true}) {
    Options o;
    o.expandable = true;
    o.expandable_fit = pytorch_fit;
    Px x(o);
    uint64_t a = x.m(4 * MiB), b = x.m(4 * MiB);
    x.m(10 * MiB);
    x.f(a), x.f(b);
    const uint64_t p = x.m(3 * MiB / 2);
    CHECK_EQ(p - a, pytorch_fit ? uint64_t(0) : uint64_t(18 * MiB));
    CHECK_EQ(x.reserved(), int64_t(20 * MiB));
  }
}

TEST(the_lens_policies_take_none_of_pytorchs_settings) {
  PytorchSettings s;
  s.max_split_size = 64 * MiB;
  s.roundup_power2_divisions.fill(4);
  for (Policy p : {Policy::kLens, Policy::kLensNoTrim}) {
    const Options o = policy_options(p, s);
    CHECK_EQ(o.max_split_size, kNoMaxSplit);
    CHECK_EQ(o.roundup_power2_divisions[0], uint32_t(0));
    CHECK(!o.expandable_fit);
  }
  const Options py = policy_options(Policy::kPytorchExpandable, s);
  CHECK_EQ(py.max_split_size, uint64_t(64 * MiB));
  CHECK_EQ(py.roundup_power2_divisions[15], uint32_t(4));
  CHECK(py.expandable_fit && py.expandable);
  CHECK(!policy_options(Policy::kPytorch, s).expandable_fit);
}

TEST(empty_pool_cache_releases_a_released_pool_and_nothing_else) {
  Px x(Options{});
  const PoolId pool{0, 1};
  uint64_t d = x.m(5 * MiB);  // the default pool's 20 MiB segment
  x.a.begin_allocate_to_pool(pool, [](Stream) { return true; });
  uint64_t p = x.m(30 * MiB);  // the pool's own segment
  x.a.end_allocate_to_pool(pool);
  x.f(p), x.f(d);
  x.a.empty_pool_cache(pool);  // not released yet: its owner still holds it
  CHECK_EQ(x.reserved(), int64_t(50 * MiB));
  x.a.release_pool(pool);
  x.a.empty_pool_cache(pool);
  CHECK_EQ(x.reserved(), int64_t(20 * MiB));  // the default pool's cached segment stays
}

TEST(a_preferred_address_is_taken_by_the_next_malloc_of_its_size_when_free) {
  Px x(Options{});
  const uint64_t there = 0x7f0000000000ull;
  x.sim.prefer_address(there, 20 * MiB);
  CHECK_EQ(x.m(5 * MiB), there);  // its 20 MiB segment
  x.sim.prefer_address(there + 64 * MiB, 20 * MiB);
  const uint64_t other = x.m(12 * MiB);  // a 12 MiB segment: not the preferred size
  CHECK(other != there + 64 * MiB);
  x.sim.prefer_address(there + 10 * MiB, 20 * MiB);  // overlaps the live segment: ignored
  const uint64_t third = x.m(19 * MiB);
  CHECK(third != there + 10 * MiB);
  x.sim.prefer_address(SimBackend::base(0), 20 * MiB);  // inside the sim's own window: ignored
  CHECK(x.m(19 * MiB) != SimBackend::base(0));
}
