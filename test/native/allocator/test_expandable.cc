// test_expandable.cc — expandable segments: pages mapped on demand at the lowest free address,
// unmapped on empty_cache and in the OOM ladder.
#include "../../../native/format/gpumem_format.h"
#include "fixture.h"

#include <cstdio>
#include <random>
#include <utility>
#include <vector>

using namespace gpumem::core;
namespace fmt = gpumem::fmt;
using namespace t;

TEST(expandable_maps_pages_on_demand) {
  Fx x(GiB, true);
  fake::set_recording(true);
  uint64_t s = x.m(MiB);  // small pool: one 2 MiB page
  CHECK_EQ(x.reserved(), int64_t(2 * MiB));
  uint64_t l = x.m(30 * MiB);  // large pool: two 20 MiB pages
  CHECK_EQ(x.st().reserved_bytes[kLargePool].current, int64_t(40 * MiB));
  CHECK_EQ(x.allocated(), int64_t(31 * MiB));          // expandable blocks split exactly
  CHECK_EQ(x.a.segments().size(), size_t(2));          // two mapped runs, one per pool
  CHECK_EQ(x.st().segment[kAll].current, int64_t(0));  // Note [Segment stat]: PyTorch never counts them
  auto recs = fake::take();
  fake::set_recording(false);
  auto maps = of_type(recs, fmt::REC_SEGMENT_MAP);
  CHECK_EQ(maps.size(), size_t(2));
  CHECK_EQ(maps[0].as<fmt::SegmentEvent>().addr, s);
  CHECK_EQ(maps[0].as<fmt::SegmentEvent>().size, uint64_t(2 * MiB));
  CHECK_EQ(maps[1].as<fmt::SegmentEvent>().addr, l);
  CHECK_EQ(maps[1].as<fmt::SegmentEvent>().size, uint64_t(40 * MiB));
  CHECK_EQ(maps[1].flags, uint16_t(fmt::kPoolLarge | fmt::kSegExpandable));
  CHECK_EQ(of_type(recs, fmt::REC_SEGMENT_ALLOC).size(), size_t(0));
}

TEST(expandable_grows_contiguously_into_the_next_page) {
  Fx x(GiB, true);
  uint64_t a = x.m(15 * MiB), b = x.m(15 * MiB);
  CHECK_EQ(b, a + 15 * MiB);  // 5 MiB left in page 0 + page 1 mapped right after it
  CHECK_EQ(x.reserved(), int64_t(40 * MiB));
  CHECK_EQ(x.a.segments().size(), size_t(1));                // one contiguous mapped run
  CHECK_EQ(x.st().segment[kLargePool].current, int64_t(0));  // Note [Segment stat]
  auto segs = x.a.segments();
  CHECK_EQ(segs.size(), size_t(2 - 1));
  CHECK_EQ(segs[0].size, uint64_t(40 * MiB));
  CHECK_EQ(segs[0].blocks.size(), size_t(3));
}

TEST(expandable_empty_cache_unmaps_free_pages_and_remaps_at_the_lowest_address) {
  Fx x(GiB, true);
  fake::set_recording(true);
  uint64_t keep = x.m(MiB);
  uint64_t a = x.m(30 * MiB);
  x.f(a);
  x.empty();
  CHECK_EQ(x.reserved(), int64_t(2 * MiB));
  CHECK_EQ(x.sim.used(0), uint64_t(2 * MiB));
  CHECK_EQ(x.st().segment[kLargePool].current, int64_t(0));
  auto unmaps = of_type(fake::take(), fmt::REC_SEGMENT_UNMAP);
  fake::set_recording(false);
  CHECK_EQ(unmaps.size(), size_t(1));
  CHECK_EQ(unmaps[0].as<fmt::SegmentEvent>().addr, a);
  CHECK_EQ(unmaps[0].as<fmt::SegmentEvent>().size, uint64_t(40 * MiB));
  CHECK_EQ(x.m(30 * MiB), a);
  (void)keep;
}

TEST(expandable_unmaps_only_whole_free_pages) {
  Fx x(GiB, true);
  uint64_t a = x.m(10 * MiB), b = x.m(25 * MiB), c = x.m(10 * MiB);  // pages 0..2 ([0,60) MiB)
  CHECK_EQ(x.reserved(), int64_t(60 * MiB));
  x.f(b);  // free [10, 35): covers no whole page ([0,20) and [20,40) hold a and c partly)
  x.empty();
  CHECK_EQ(x.reserved(), int64_t(60 * MiB));
  x.f(a);  // free [0, 35): page 0 is whole now
  x.empty();
  CHECK_EQ(x.reserved(), int64_t(40 * MiB));
  CHECK_EQ(x.a.segments().size(), size_t(1));
  x.f(c);
  x.empty();
  CHECK_EQ(x.reserved(), int64_t(0));
  CHECK_EQ(x.st().num_device_alloc, int64_t(3));
  CHECK_EQ(x.st().num_device_free, int64_t(3));
}

TEST(expandable_oom_ladder_reuses_another_streams_free_pages) {
  Fx x(60 * MiB, true);
  uint64_t a = x.m(35 * MiB, 1);
  x.f(a);                         // stream 1 holds 40 MiB mapped but free
  uint64_t b = x.m(35 * MiB, 2);  // 40 + 40 > 60: unmap stream 1's pages, map stream 2's
  CHECK(b != 0);
  CHECK_EQ(x.reserved(), int64_t(40 * MiB));
  CHECK_EQ(x.st().num_alloc_retries, int64_t(1));
}

TEST(expandable_middle_page_joining_two_runs_lists_one_segment) {
  Fx x(GiB, true);
  uint64_t a = x.m(20 * MiB), b = x.m(20 * MiB), c = x.m(20 * MiB);
  CHECK_EQ(x.a.segments().size(), size_t(1));
  x.f(b);
  x.empty();  // page 1 unmapped: two runs
  CHECK_EQ(x.a.segments().size(), size_t(2));
  CHECK_EQ(x.st().segment[kLargePool].current, int64_t(0));  // Note [Segment stat]
  CHECK_EQ(x.m(20 * MiB), b);                                // remapped in the hole: one run again
  CHECK_EQ(x.a.segments().size(), size_t(1));
  (void)a, (void)c;
}

static void trim_case(bool trim, int64_t want_reserved) {
  Fx x(GiB, true, trim);
  uint64_t a = x.m(20 * MiB), b = x.m(5 * MiB);  // page 0 = a, page 1 = b + 15 MiB free
  x.f(a);                                        // page 0 wholly free, but too small for 30 MiB
  uint64_t c = x.m(30 * MiB);
  CHECK_EQ(c, b + 5 * MiB);  // lowest fitting run: after b, into a newly mapped page 2
  CHECK_EQ(x.reserved(), want_reserved);
  CHECK_EQ(x.st().reserved_bytes[kAll].peak, want_reserved);
}

TEST(expandable_trim_on_growth_unmaps_free_pages_before_raising_the_peak) { trim_case(true, int64_t(40 * MiB)); }
TEST(expandable_without_trim_keeps_free_pages_mapped) { trim_case(false, int64_t(60 * MiB)); }

// One "step": x3 cannot fit where x1 was while x2 lives. Returns the driver maps+unmaps it cost.
static int64_t trim_step(Fx& x, size_t big) {
  const int64_t before = x.st().num_device_alloc + x.st().num_device_free;
  uint64_t x1 = x.m(300 * MiB), x2 = x.m(100 * MiB);
  x.f(x1);
  uint64_t x3 = x.m(big);
  x.f(x2);
  x.f(x3);
  return x.st().num_device_alloc + x.st().num_device_free - before;
}

// Note [Futile trims]: a trim that pays off settles (later steps fit without one); a repeating step
// that would trim forever is cut off once kTrimsPerDemand trims followed the highest demand.
TEST(expandable_trim_that_pays_off_settles_without_more_remapping) {
  Fx x(4 * GiB, true, true);
  for (int i = 0; i < 3; i++) trim_step(x, 350 * MiB);
  CHECK_EQ(x.st().reserved_bytes[kAll].peak, int64_t(460 * MiB));  // 760 MiB without trimming
  for (int i = 0; i < 5; i++) CHECK_EQ(trim_step(x, 350 * MiB), int64_t(0));
}

// A step after which trimming at every new reserved peak never settles (found by a random search of
// step shapes: without the limit all 20 late steps of 30 unmap and remap pages).
// `scale` in percent stretches every size (a longer sequence).
static int64_t churn_step(Fx& x, size_t scale = 100) {
  const int64_t before = x.st().num_device_alloc + x.st().num_device_free;
  uint64_t a = x.m(80 * MiB * scale / 100), b = x.m(300 * MiB * scale / 100), c = x.m(180 * MiB * scale / 100);
  x.f(b);
  uint64_t d = x.m(380 * MiB * scale / 100);
  x.f(a);
  x.f(d);
  x.f(c);
  return x.st().num_device_alloc + x.st().num_device_free - before;
}

// Returns how many of `steps` churn steps moved pages.
static int churn(Fx& x, int steps, int settled_after, size_t scale = 100) {
  int trimming_steps = 0;
  for (int i = 0; i < steps; i++) {
    const int64_t moves = x.st().num_page_moves;
    const int64_t calls = churn_step(x, scale);
    if (x.st().num_page_moves > moves) trimming_steps++;
    if (i >= settled_after) CHECK_EQ(calls, int64_t(0));  // settled: no driver calls at all
  }
  return trimming_steps;
}

TEST(expandable_trims_stop_once_demand_stops_rising) {
  Fx x(16 * GiB, true, true);
  // The step's demand is the same every time: the trims after its first high are all it gets.
  const int trimming_steps = churn(x, 60, kTrimsPerDemand);
  CHECK(trimming_steps >= 1 && trimming_steps <= kTrimsPerDemand);
  std::printf("  (%d of 60 steps trimmed)\n", trimming_steps);
  // Unbounded, the same steps trim on and on (the shape the budget exists for).
  Fx y(16 * GiB, true, true, 1 << 30);
  CHECK(churn(y, 60, 60) > 40);
}

// A new high of demand (a longer sequence, a larger batch) refills the budget: trims run again and settle again.
TEST(expandable_trims_resume_when_demand_rises) {
  Fx x(16 * GiB, true, true);
  churn(x, 30, kTrimsPerDemand);
  const int64_t moves = x.st().num_page_moves;
  const int again = churn(x, 40, kTrimsPerDemand, 130);  // every size ×1.3: demand above any so far
  CHECK(again >= 1 && again <= kTrimsPerDemand);
  CHECK(x.st().num_page_moves > moves);
  std::printf("  (%d of 40 longer steps trimmed)\n", again);
}

// ResNet-50 b64's shape on an H100 (torch 2.11): the small pool's free pages and the large pool's growth took turns,
// a 20 MiB large page trimmed for 2 MiB of small growth and ten small pages (a stream synchronization each time) for
// the large pool's next growth, in most of its first 80 steps. Trims only move pages of the same pool and stream now:
// no step synchronizes, and the layout holds from the second step on.
TEST(expandable_small_and_large_pools_do_not_trade_pages) {
  Fx x(4 * GiB, true, true);
  const uint64_t syncs = x.sim.stream_synchronizations();
  for (int step = 0; step < 40; step++) {
    const int64_t calls = x.st().num_device_alloc + x.st().num_device_free;
    std::vector<uint64_t> small;
    for (int i = 0; i < 12; i++) small.push_back(x.m(MiB));  // 6 small pages
    uint64_t l = x.m(20 * MiB);
    for (uint64_t p : small) x.f(p);  // the small pages go free
    uint64_t l2 = x.m(20 * MiB);      // the large pool grows: old rule trimmed small pages
    x.f(l);
    std::vector<uint64_t> more;
    for (int i = 0; i < 12; i++) more.push_back(x.m(MiB));
    x.f(l2);
    for (uint64_t p : more) x.f(p);
    if (step >= 1) CHECK_EQ(x.st().num_device_alloc + x.st().num_device_free, calls);
  }
  CHECK_EQ(x.sim.stream_synchronizations(), syncs);
  CHECK_EQ(x.st().num_trim_syncs, int64_t(0));
}

// Note [Page moves]: trim_case's growth takes page 0's physical memory to page 2 on the same stream:
// no stream synchronization, no new physical memory, and page 0's address is unmapped only once an
// event recorded after the move completed.
TEST(expandable_trim_moves_a_same_stream_page_without_synchronizing) {
  Fx x(GiB, true, true);
  fake::set_recording(true);
  uint64_t a = x.m(20 * MiB), b = x.m(5 * MiB);
  x.f(a);
  const uint64_t syncs = x.sim.stream_synchronizations(), allocs = x.sim.driver_allocs();
  fake::take();
  uint64_t c = x.m(30 * MiB);  // pages 1 (free tail) + 2; page 2 is page 0's memory
  CHECK_EQ(c, b + 5 * MiB);
  CHECK_EQ(x.sim.stream_synchronizations(), syncs);
  CHECK_EQ(x.sim.remaps(), uint64_t(1));
  CHECK_EQ(x.st().num_page_moves, int64_t(1));
  CHECK_EQ(x.st().num_trim_syncs, int64_t(0));
  CHECK_EQ(x.sim.driver_allocs(), allocs + 1);  // the remap's cuMemMap, no cuMemCreate
  CHECK_EQ(x.sim.used(0), uint64_t(40 * MiB));  // one physical page shared by two addresses
  CHECK_EQ(x.reserved(), int64_t(40 * MiB));
  CHECK(x.sim.is_mapped(0, a));  // the old address waits for its event
  auto recs = fake::take();
  fake::set_recording(false);
  auto unmaps = of_type(recs, fmt::REC_SEGMENT_UNMAP), maps = of_type(recs, fmt::REC_SEGMENT_MAP);
  CHECK_EQ(unmaps.size(), size_t(1));  // the capture sees the move as page 0 out, page 2 in
  CHECK_EQ(unmaps[0].as<fmt::SegmentEvent>().addr, a);
  CHECK_EQ(maps.size(), size_t(1));
  CHECK_EQ(maps[0].as<fmt::SegmentEvent>().addr, a + 40 * MiB);
  x.f(x.m(MiB));  // a malloc before the GPU got there leaves the old address alone
  CHECK(x.sim.is_mapped(0, a));
  x.sim.complete_events(0);
  x.f(x.m(MiB));  // the next malloc after it unmaps it (Fx checks the unmap was safe)
  CHECK(!x.sim.is_mapped(0, a));
  CHECK_EQ(x.sim.used(0), uint64_t(40 * MiB) + 2 * MiB);  // + the small pool's page
  CHECK_EQ(x.sim.live_events(), size_t(0));
}

// Another stream's free page cannot move (its kernels are not ordered after ours) and unmapping it would cost a stream
// synchronization: a growth leaves it mapped (Note [Futile trims]); only the OOM ladder takes it, when memory runs out
// (expandable_oom_ladder_reuses_another_streams_free_pages).
TEST(expandable_trim_leaves_another_streams_pages) {
  Fx x(GiB, true, true);
  uint64_t a = x.m(20 * MiB, 1);
  x.f(a);  // stream 1's page is free; stream 2 grows
  const uint64_t syncs = x.sim.stream_synchronizations();
  x.m(20 * MiB, 2);
  CHECK_EQ(x.sim.remaps(), uint64_t(0));
  CHECK_EQ(x.sim.stream_synchronizations(), syncs);
  CHECK_EQ(x.st().num_trim_syncs, int64_t(0));
  CHECK(x.sim.is_mapped(0, a));
  CHECK_EQ(x.reserved(), int64_t(40 * MiB));
}

// Near the device's limit (Note [Futile trims] (3)) memory matters more than a synchronization: the same growth as
// above, on a 42 MiB device, takes stream 1's page (it would still fit without: this is not the OOM ladder).
TEST(expandable_trim_under_pressure_synchronizes_for_another_streams_pages) {
  Fx x(42 * MiB, true, true);
  uint64_t a = x.m(20 * MiB, 1);
  x.f(a);
  const uint64_t syncs = x.sim.stream_synchronizations();
  x.m(20 * MiB, 2);
  CHECK_EQ(x.sim.stream_synchronizations(), syncs + 1);
  CHECK_EQ(x.st().num_trim_syncs, int64_t(1));
  CHECK_EQ(x.st().num_alloc_retries, int64_t(0));
  CHECK(!x.sim.is_mapped(0, a));
  CHECK_EQ(x.reserved(), int64_t(20 * MiB));
}

TEST(expandable_growth_into_a_moving_page_waits_for_its_event) {
  Fx x(GiB, true, true);
  uint64_t a = x.m(20 * MiB), b = x.m(5 * MiB);
  x.f(a);
  uint64_t c = x.m(30 * MiB);  // page 0 moves to page 2
  x.f(c);
  x.f(b);
  // Everything is free; 60 MiB fits only from address a, across page 0, still moving.
  CHECK_EQ(x.m(60 * MiB), a);
  CHECK_EQ(x.sim.live_events(), size_t(0));
  CHECK_EQ(x.sim.used(0), uint64_t(60 * MiB));
  CHECK_EQ(x.reserved(), int64_t(60 * MiB));
}

TEST(expandable_empty_cache_and_graph_capture_finish_page_moves) {
  for (int capture = 0; capture < 2; capture++) {
    Fx x(GiB, true, true);
    uint64_t a = x.m(20 * MiB), b = x.m(5 * MiB);
    x.f(a);
    x.f(x.m(30 * MiB));
    CHECK(x.sim.is_mapped(0, a));
    if (capture) {
      x.a.begin_allocate_to_pool(PoolId{1, 0}, [](Stream) { return true; });
      x.inv();  // no move is pending while a capture runs
      x.a.end_allocate_to_pool(PoolId{1, 0});
      x.a.release_pool(PoolId{1, 0});
    } else {
      x.empty();
      CHECK_EQ(x.sim.used(0), uint64_t(20 * MiB));  // b's page only
    }
    CHECK(!x.sim.is_mapped(0, a));
    CHECK_EQ(x.sim.live_events(), size_t(0));
    x.f(b);
  }
}

// Page moves at random: large blocks on two streams, an unbounded trim budget so that trims keep running, events
// completing at random. Fx checks every invariant and that no old address was unmapped before its
// stream passed the move; at the end every physical page must be back.
TEST(random_page_moves_keep_every_invariant) {
  Fx x(2 * GiB, true, true, 1 << 30);  // no trim budget: every growth may move pages
  std::mt19937_64 rng(21);
  std::vector<std::pair<uint64_t, size_t>> live;
  for (int i = 0; i < 20000; i++) {
    const int op = int(rng() % 100);
    if (op < 50) {
      try {
        const size_t n = (1 + rng() % 60) * MiB - rng() % 3 * 4 * KiB;
        live.emplace_back(x.m(n, rng() % 2), n);
      } catch (const OutOfMemory&) {}
    } else if (op < 90 && !live.empty()) {
      const size_t k = rng() % live.size();
      x.f(live[k].first);
      live[k] = live.back();
      live.pop_back();
    } else if (op < 96) {
      x.sim.complete_events(rng() % 2);
    } else if (op < 99) {
      x.a.reset_peak_stats();  // a lower reserved peak: growths above it trim again (Note [Trim on growth])
    } else {
      x.empty();
    }
  }
  std::printf("  (%llu page moves, %llu stream synchronizations)\n", (unsigned long long)x.sim.remaps(),
              (unsigned long long)x.sim.stream_synchronizations());
  CHECK(x.sim.remaps() > 100);
  for (auto& [p, n] : live) x.f(p);
  x.empty();
  CHECK_EQ(x.reserved(), int64_t(0));
  CHECK_EQ(x.sim.used(0), uint64_t(0));
  CHECK_EQ(x.sim.live_events(), size_t(0));
}

// A large-pool growth takes movable large pages before small ones, which would cost a stream
// synchronization, even where the small pool's segment comes first.
TEST(expandable_trim_prefers_pages_that_can_move) {
  Fx x(GiB, true, true);
  uint64_t s = x.m(MiB);  // small page
  uint64_t a = x.m(20 * MiB), b = x.m(5 * MiB);
  x.f(s);
  x.f(a);  // a free small page and a free large page; the growth needs one large page
  x.m(30 * MiB);
  CHECK_EQ(x.st().num_page_moves, int64_t(1));
  CHECK_EQ(x.st().num_trim_syncs, int64_t(0));
  CHECK_EQ(x.st().reserved_bytes[kSmallPool].current, int64_t(2 * MiB));  // left alone
  (void)b;
}
