// test_graph.cc — CUDA graph private pools: routing by the capture filter, no event calls or driver
// frees during capture, memory kept until the pool is released.
#include "../../../native/format/gpumem_format.h"
#include "fixture.h"

using namespace gpumem::core;
namespace fmt = gpumem::fmt;
using namespace t;

static void graph_pool_case(bool expandable) {
  Fx x(GiB, expandable);
  const PoolId pool{1, 0};
  uint64_t outside = x.m(4096, 5);  // before the capture, default pool
  x.a.begin_allocate_to_pool(pool, [](Stream s) { return s == 5; });
  x.sim.set_capturing(true);
  fake::set_recording(true);
  uint64_t g1 = x.m(4096, 5), g2 = x.m(8 * MiB, 5);
  uint64_t other = x.m(4096, 6);  // another stream: not captured, default pool
  x.a.record_stream(reinterpret_cast<void*>(g1), 6);
  x.f(g1);  // pending, but no event may be recorded during capture
  x.f(outside);
  x.f(g2);  // back to the private pool, memory kept
  uint64_t again = x.m(8 * MiB, 5);
  CHECK_EQ(again, g2);  // reused inside the capture, from the private pool
  x.empty();            // must not free anything during capture
  auto recs = fake::take();
  fake::set_recording(false);
  x.sim.set_capturing(false);
  x.a.end_allocate_to_pool(pool);
  CHECK_EQ(x.sim.capture_violations(), uint64_t(0));
  CHECK_EQ(x.sim.live_events(), size_t(0));
  auto allocs = of_type(recs, expandable ? fmt::REC_SEGMENT_MAP : fmt::REC_SEGMENT_ALLOC);
  CHECK(!allocs.empty());
  CHECK(allocs[0].flags & fmt::kPoolPrivate);
  CHECK_EQ(allocs[0].as<fmt::SegmentEvent>().pool_id0, uint64_t(1));
  // After the capture: stream 5 allocations go to the default pool again.
  uint64_t after = x.m(8 * MiB, 5);
  CHECK(after != g2);
  x.f(after);
  x.f(again);
  x.f(other);
  int64_t private_bytes = expandable ? int64_t(2 * MiB + 20 * MiB) : int64_t(2 * MiB + 20 * MiB);
  x.empty();  // processes g1's deferred free; the private pool keeps its memory
  CHECK_EQ(x.reserved(), private_bytes);
  bool saw_private = false;
  for (auto& s : x.a.segments()) saw_private |= (s.pool0 == 1 && (s.flags & fmt::kPoolPrivate));
  CHECK(saw_private);
  x.a.release_pool(pool);
  x.empty();
  CHECK_EQ(x.reserved(), int64_t(0));
  CHECK(x.a.segments().empty());
}

TEST(graph_pool_capture_fixed_segments) { graph_pool_case(false); }

TEST(trim_on_growth_leaves_graph_private_pages_mapped) {
  Fx x(GiB, true, true);
  const PoolId pool{4, 0};
  x.a.begin_allocate_to_pool(pool, [](Stream s) { return s == 5; });
  x.sim.set_capturing(true);
  uint64_t g = x.m(20 * MiB, 5);
  x.f(g);  // freed during capture: the graph still uses this memory on every replay
  x.sim.set_capturing(false);
  x.a.end_allocate_to_pool(pool);
  x.m(100 * MiB);  // growth past the peak trims free pages, but not the private pool's
  CHECK_EQ(x.reserved(), int64_t(120 * MiB));
  bool private_mapped = false;
  for (auto& s : x.a.segments()) private_mapped |= s.pool0 == 4 && s.size == 20 * MiB;
  CHECK(private_mapped);
}
TEST(graph_pool_capture_expandable_segments) { graph_pool_case(true); }

TEST(oom_during_capture_skips_the_ladder_and_says_why) {
  Fx x(30 * MiB);
  uint64_t cached = x.m(5 * MiB);
  x.f(cached);  // 20 MiB cached, releasable only outside a capture
  x.a.begin_allocate_to_pool({2, 0}, [](Stream) { return true; });
  x.sim.set_capturing(true);
  std::string msg;
  try {
    x.m(15 * MiB);
  } catch (const OutOfMemory& e) {
    msg = e.what();
  }
  x.sim.set_capturing(false);
  CHECK(msg.find("A CUDA graph capture is underway") != std::string::npos);
  CHECK_EQ(x.sim.capture_violations(), uint64_t(0));
  CHECK_EQ(x.reserved(), int64_t(20 * MiB));
  x.a.end_allocate_to_pool({2, 0});
  CHECK(x.m(15 * MiB) != 0);  // outside the capture the ladder may release the cache
}
