// test_caching.cc — rounding, pools, splitting/merging, best fit, stream isolation, events, stats.
#include "../../../native/format/gpumem_format.h"
#include "fixture.h"

using namespace gpumem::core;
namespace fmt = gpumem::fmt;
using namespace t;

TEST(rounds_to_512_bytes_and_counts_requested_separately) {
  Fx x;
  x.m(1);
  CHECK_EQ(x.allocated(), int64_t(512));
  x.m(513);
  CHECK_EQ(x.allocated(), int64_t(512 + 1024));
  CHECK_EQ(x.st().requested_bytes[kAll].current, int64_t(1 + 513));
  CHECK_EQ(x.st().allocation[kSmallPool].current, int64_t(2));
}

TEST(zero_byte_requests_get_distinct_real_blocks) {
  Fx x;
  uint64_t p = x.m(0), q = x.m(0);
  CHECK(p != 0 && q != 0 && p != q);
  CHECK_EQ(q - p, uint64_t(512));  // consecutive minimum-size blocks of one small segment
  CHECK_EQ(x.allocated(), int64_t(1024));
  CHECK_EQ(x.st().requested_bytes[kAll].current, int64_t(0));
  x.f(p);
  x.f(q);
  CHECK_EQ(x.allocated(), int64_t(0));
}

TEST(small_requests_share_a_2_MiB_segment_and_split_contiguously) {
  Fx x;
  uint64_t a = x.m(1000), b = x.m(3000);
  CHECK_EQ(x.reserved(), int64_t(2 * MiB));
  CHECK_EQ(b - a, uint64_t(1024));
  CHECK_EQ(x.st().segment[kSmallPool].current, int64_t(1));
  CHECK_EQ(x.st().inactive_split[kSmallPool].current, int64_t(1));
  CHECK_EQ(x.st().inactive_split_bytes[kSmallPool].current, int64_t(2 * MiB - 1024 - 3072));
}

TEST(large_requests_use_20_MiB_segments_below_10_MiB_and_exact_ones_above) {
  Fx x;
  x.m(MiB + 1);
  CHECK_EQ(x.st().reserved_bytes[kLargePool].current, int64_t(20 * MiB));
  x.m(12 * MiB + 1, 1);  // own segment rounded up to 2 MiB: 14 MiB (stream 1: the 19 MiB left on
                         // stream 0 would otherwise serve it)
  CHECK_EQ(x.st().reserved_bytes[kLargePool].current, int64_t(34 * MiB));
  CHECK_EQ(x.st().segment[kLargePool].current, int64_t(2));
  CHECK_EQ(x.st().num_device_alloc, int64_t(2));
}

TEST(large_blocks_split_only_when_more_than_1_MiB_remains) {
  Fx x;
  uint64_t a = x.m(9 * MiB);  // 20 MiB segment: 11 MiB remain, split off
  CHECK_EQ(x.st().inactive_split_bytes[kLargePool].current, int64_t(11 * MiB));
  uint64_t b = x.m(10 * MiB + 512 * KiB);  // ≥10 MiB, but the 11 MiB block fits: 0.5 MiB left, no split
  CHECK_EQ(b, a + 9 * MiB);
  CHECK_EQ(x.allocated(), int64_t(20 * MiB));
  CHECK_EQ(x.reserved(), int64_t(20 * MiB));
  CHECK_EQ(x.st().inactive_split[kLargePool].current, int64_t(0));
}

TEST(frees_coalesce_with_free_neighbours) {
  Fx x;
  uint64_t a = x.m(1024), b = x.m(1024), c = x.m(1024);
  const int64_t rest = int64_t(2 * MiB - 3 * 1024);
  x.f(b);
  CHECK_EQ(x.st().inactive_split[kAll].current, int64_t(2));
  CHECK_EQ(x.st().inactive_split_bytes[kAll].current, rest + 1024);
  x.f(a);  // merges with b
  CHECK_EQ(x.st().inactive_split[kAll].current, int64_t(2));
  CHECK_EQ(x.st().inactive_split_bytes[kAll].current, rest + 2048);
  x.f(c);  // merges with a+b and the tail: the segment is whole again
  CHECK_EQ(x.st().inactive_split[kAll].current, int64_t(0));
  CHECK_EQ(x.st().inactive_split_bytes[kAll].current, int64_t(0));
  auto segs = x.a.segments();
  CHECK_EQ(segs.size(), size_t(1));
  CHECK_EQ(segs[0].blocks.size(), size_t(1));
  CHECK_EQ(segs[0].blocks[0].size, uint64_t(2 * MiB));
  CHECK_EQ(x.m(2 * 1024), a);  // the merged block is reused from its start
}

TEST(best_fit_picks_the_smallest_free_block_that_fits) {
  Fx x;
  uint64_t big = x.m(8 * KiB), sep1 = x.m(512), small = x.m(4 * KiB), sep2 = x.m(512);
  (void)sep1, (void)sep2;
  x.f(big);
  x.f(small);
  CHECK_EQ(x.m(4 * KiB), small);
  CHECK_EQ(x.m(6 * KiB), big);
}

TEST(blocks_are_reused_only_on_their_allocation_stream) {
  Fx x;
  uint64_t a = x.m(4096, 1);
  x.f(a);
  uint64_t b = x.m(4096, 2);
  CHECK(b != a);
  CHECK_EQ(x.reserved(), int64_t(4 * MiB));  // stream 2 needed its own segment
  CHECK_EQ(x.m(4096, 1), a);
}

TEST(record_stream_defers_reuse_until_the_event_completes) {
  Fx x;
  fake::set_recording(true);
  uint64_t p = x.m(4096, 1);
  x.a.record_stream(reinterpret_cast<void*>(p), 2);
  x.a.record_stream(reinterpret_cast<void*>(p), 1);  // the owning stream adds nothing
  x.f(p);
  CHECK_EQ(x.sim.live_events(), size_t(1));
  CHECK_EQ(x.allocated(), int64_t(0));
  CHECK_EQ(x.st().active_bytes[kAll].current, int64_t(4096));  // still active: pending free
  auto segs = x.a.segments();
  CHECK_EQ(int(segs[0].blocks[0].state), int(fmt::BLOCK_ACTIVE_PENDING_FREE));
  uint64_t q = x.m(4096, 1);
  CHECK(q != p);  // not reused before the event
  x.sim.complete_events(2);
  uint64_t r = x.m(4096, 1);  // this malloc processes the completed event first
  CHECK_EQ(r, p);
  CHECK_EQ(x.sim.live_events(), size_t(0));
  auto recs = fake::take();
  fake::set_recording(false);
  auto req = of_type(recs, fmt::REC_FREE_REQUESTED), done = of_type(recs, fmt::REC_FREE_COMPLETED);
  CHECK_EQ(req.size(), size_t(1));
  CHECK_EQ(done.size(), size_t(1));
  CHECK_EQ(done[0].as<fmt::BlockEvent>().addr, p);
  CHECK_EQ(done[0].as<fmt::BlockEvent>().requested, uint64_t(4096));
  // order: the completion comes after the second alloc (q) and before the third (r)
  size_t i_done = 0, i_allocs = 0;
  for (size_t i = 0; i < recs.size(); i++) {
    if (recs[i].type == fmt::REC_FREE_COMPLETED) i_done = i_allocs;
    if (recs[i].type == fmt::REC_ALLOC) i_allocs++;
  }
  CHECK_EQ(i_done, size_t(2));
  (void)q;
}

TEST(empty_cache_releases_only_whole_free_segments) {
  Fx x;
  fake::set_recording(true);
  uint64_t small = x.m(4096), big = x.m(5 * MiB);
  uint64_t small2 = x.m(4096);
  x.f(big);
  x.f(small2);
  uint64_t before = 0, after = 0;
  x.a.empty_cache(&before, &after, 1);
  x.inv();
  CHECK_EQ(before, uint64_t(22 * MiB));
  CHECK_EQ(after, uint64_t(2 * MiB));  // the small segment still holds `small`
  CHECK_EQ(x.st().num_device_free, int64_t(1));
  CHECK_EQ(x.sim.used(0), uint64_t(2 * MiB));
  auto recs = fake::take();
  fake::set_recording(false);
  auto ec = of_type(recs, fmt::REC_EMPTY_CACHE);
  CHECK_EQ(ec.size(), size_t(1));
  CHECK_EQ(ec[0].as<fmt::EmptyCacheRec>().reserved_after, uint64_t(2 * MiB));
  CHECK_EQ(ec[0].as<fmt::EmptyCacheRec>().origin, uint32_t(1));
  auto sf = of_type(recs, fmt::REC_SEGMENT_FREE);
  CHECK_EQ(sf.size(), size_t(1));
  CHECK_EQ(sf[0].as<fmt::SegmentEvent>().size, uint64_t(20 * MiB));
  CHECK_EQ(sf[0].flags, uint16_t(fmt::kPoolLarge));
  x.f(small);
  x.empty();
  CHECK_EQ(x.reserved(), int64_t(0));
}

TEST(empty_cache_waits_for_pending_events) {
  Fx x;
  uint64_t p = x.m(4096, 1);
  x.a.record_stream(reinterpret_cast<void*>(p), 3);
  x.f(p);
  x.empty();  // synchronizes the event, completes the free, then releases the segment
  CHECK_EQ(x.reserved(), int64_t(0));
  CHECK_EQ(x.sim.live_events(), size_t(0));
  CHECK_EQ(x.st().num_sync_all_streams, int64_t(1));
}

TEST(events_carry_sizes_streams_pools_and_stacks) {
  Fx x;
  fake::set_recording(true);
  x.m(3000, 7, 42);
  auto recs = fake::take();
  fake::set_recording(false);
  CHECK_EQ(recs.size(), size_t(3));  // segment alloc, alloc, stats
  CHECK_EQ(int(recs[0].type), int(fmt::REC_SEGMENT_ALLOC));
  auto seg = recs[0].as<fmt::SegmentEvent>();
  CHECK_EQ(seg.size, uint64_t(2 * MiB));
  CHECK_EQ(seg.stream, uint64_t(7));
  CHECK_EQ(seg.stack, uint32_t(42));
  CHECK_EQ(int(recs[1].type), int(fmt::REC_ALLOC));
  auto al = recs[1].as<fmt::BlockEvent>();
  CHECK_EQ(al.addr, seg.addr);
  CHECK_EQ(al.size, uint64_t(3072));
  CHECK_EQ(al.requested, uint64_t(3000));
  CHECK_EQ(al.stream, uint64_t(7));
  CHECK_EQ(al.stack, uint32_t(42));
  CHECK_EQ(recs[1].flags, uint16_t(fmt::kPoolSmall));
  CHECK_EQ(int(recs[2].type), int(fmt::REC_STATS));
  CHECK_EQ(recs[2].as<fmt::StatsRec>().allocated, uint64_t(3072));
  CHECK_EQ(recs[2].as<fmt::StatsRec>().reserved, uint64_t(2 * MiB));
}

TEST(peak_and_accumulated_stats_reset) {
  Fx x;
  uint64_t a = x.m(MiB), b = x.m(MiB);
  x.f(a);
  auto s = x.st();
  CHECK_EQ(s.allocated_bytes[kAll].peak, int64_t(2 * MiB));
  CHECK_EQ(s.allocated_bytes[kAll].allocated, int64_t(2 * MiB));
  CHECK_EQ(s.allocated_bytes[kAll].freed, int64_t(MiB));
  x.a.reset_peak_stats();
  CHECK_EQ(x.st().allocated_bytes[kAll].peak, int64_t(MiB));
  x.a.reset_accumulated_stats();
  s = x.st();
  CHECK_EQ(s.allocated_bytes[kAll].allocated, int64_t(0));
  CHECK_EQ(s.allocated_bytes[kAll].freed, int64_t(0));
  CHECK_EQ(s.num_device_alloc, int64_t(0));
  CHECK_EQ(s.allocated_bytes[kAll].current, int64_t(MiB));
  x.f(b);
  CHECK_EQ(x.st().allocated_bytes[kAll].freed, int64_t(MiB));
}

TEST(memory_fraction_caps_reserved_memory) {
  Fx x(100 * MiB);
  x.a.set_memory_fraction(0.5);
  CHECK_EQ(x.a.limit(), uint64_t(50 * MiB));
  x.m(40 * MiB);
  bool threw = false;
  try {
    x.m(12 * MiB);  // 40 + 12 > 50 although the device has 60 MiB free
  } catch (const OutOfMemory& e) {
    threw = true;
    std::string msg = e.what();
    CHECK(msg.rfind("CUDA out of memory. Tried to allocate 12.00 MiB.", 0) == 0);
    CHECK(msg.find("memory-fraction cap is 50.00 MiB") != std::string::npos);
    CHECK(msg.find("Cause: the per-process memory fraction") != std::string::npos);
  }
  CHECK(threw);
  CHECK_EQ(x.sim.used(0), uint64_t(40 * MiB));
  x.m(10 * MiB);  // fits under the cap
  CHECK_EQ(x.reserved(), int64_t(50 * MiB));
}
