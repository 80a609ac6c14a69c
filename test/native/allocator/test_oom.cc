// test_oom.cc — the OOM ladder, the exception text and its numbers, and recovery afterwards.
#include "../../../native/format/gpumem_format.h"
#include "fixture.h"
#include "oom_message.h"

using namespace gpumem::core;
namespace fmt = gpumem::fmt;
using namespace t;

static std::string oom_text(Fx& x, size_t n, Stream s = 0) {
  try {
    x.m(n, s);
  } catch (const OutOfMemory& e) {
    x.inv();
    return e.what();
  }
  throw t::Failure("expected an OutOfMemory for " + std::to_string(n) + " bytes");
}

TEST(oom_ladder_frees_cached_segments_and_retries) {
  Fx x(60 * MiB);
  fake::set_recording(true);
  uint64_t a = x.m(5 * MiB, 1);  // a 20 MiB segment on stream 1
  x.f(a);                         // cached, unused by stream 2
  uint64_t b = x.m(50 * MiB, 2);  // 20 + 50 > 60: the ladder releases the cached segment, then succeeds
  CHECK(b != 0);
  CHECK_EQ(x.st().num_alloc_retries, int64_t(1));
  CHECK_EQ(x.st().num_ooms, int64_t(0));
  CHECK_EQ(x.reserved(), int64_t(50 * MiB));
  auto recs = fake::take();
  fake::set_recording(false);
  auto ec = of_type(recs, fmt::REC_EMPTY_CACHE);
  CHECK_EQ(ec.size(), size_t(1));
  CHECK_EQ(ec[0].as<fmt::EmptyCacheRec>().origin, uint32_t(2));
  CHECK_EQ(ec[0].as<fmt::EmptyCacheRec>().reserved_before, uint64_t(20 * MiB));
  CHECK_EQ(ec[0].as<fmt::EmptyCacheRec>().reserved_after, uint64_t(0));
}

TEST(oom_ladder_completes_pending_frees_first) {
  Fx x(40 * MiB);
  uint64_t a = x.m(30 * MiB, 1);
  x.a.record_stream(reinterpret_cast<void*>(a), 2);
  x.f(a);  // pending on stream 2's event
  // The ladder synchronizes the event, which returns the block to the cache, releases the now whole
  // segment and retries (PyTorch's order): the request is served from a fresh 30 MiB segment.
  CHECK(x.m(30 * MiB, 1) != 0);
  CHECK_EQ(x.st().num_sync_all_streams, int64_t(1));
  CHECK_EQ(x.st().num_alloc_retries, int64_t(1));
  CHECK_EQ(x.reserved(), int64_t(30 * MiB));
  CHECK_EQ(x.sim.live_events(), size_t(0));
}

TEST(oom_from_shortage_says_so_and_the_allocator_stays_usable) {
  Fx x(40 * MiB);
  fake::set_recording(true);
  x.m(30 * MiB);
  std::string msg = oom_text(x, 20 * MiB, 5);
  CHECK(msg.rfind("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 40.00 MiB "
                  "of which 10.00 MiB is free.",
                  0) == 0);
  CHECK(msg.find("30.00 MiB is allocated to tensors and 0 bytes is reserved but unallocated") != std::string::npos);
  CHECK(msg.find("Cause: a shortage.") != std::string::npos);
  CHECK_EQ(x.st().num_ooms, int64_t(1));
  auto recs = fake::take();
  fake::set_recording(false);
  auto oom = of_type(recs, fmt::REC_OOM);
  CHECK_EQ(oom.size(), size_t(1));
  auto r = oom[0].as<fmt::OomRec>();
  CHECK_EQ(r.requested, uint64_t(20 * MiB));
  CHECK_EQ(r.device_free, uint64_t(10 * MiB));
  CHECK_EQ(r.device_total, uint64_t(40 * MiB));
  CHECK_EQ(r.reserved, uint64_t(30 * MiB));
  CHECK_EQ(r.allocated, uint64_t(30 * MiB));
  CHECK_EQ(r.largest_free, uint64_t(0));
  CHECK_EQ(r.stream, uint64_t(5));
  CHECK_EQ(r.limit, uint64_t(0));
  CHECK(x.m(MiB) != 0);  // a 2 MiB small segment still fits
}

TEST(oom_from_fragmentation_names_the_cached_bytes_and_largest_block) {
  Fx x(10 * MiB);
  std::vector<uint64_t> ps;
  for (int i = 0; i < 10; i++) ps.push_back(x.m(MiB));  // five 2 MiB small segments, full
  for (int i = 0; i < 10; i += 2) x.f(ps[i]);           // 5 MiB free, in 1 MiB pieces
  std::string msg = oom_text(x, 1536 * KiB);
  CHECK(msg.find("5.00 MiB is allocated to tensors and 5.00 MiB is reserved but unallocated "
                 "(largest free cached block: 1.00 MiB)") != std::string::npos);
  CHECK(msg.find("Cause: fragmentation.") != std::string::npos);
  CHECK(msg.find("expandable") != std::string::npos);
  CHECK_EQ(x.st().num_alloc_retries, int64_t(1));  // the ladder ran once and found nothing to release
  CHECK_EQ(x.reserved(), int64_t(10 * MiB));
}

TEST(format_size_uses_binary_units_like_pytorch) {
  CHECK_EQ(format_size(512), std::string("512 bytes"));
  CHECK_EQ(format_size(1536), std::string("1.50 KiB"));
  CHECK_EQ(format_size(20 * MiB), std::string("20.00 MiB"));
  CHECK_EQ(format_size(3 * GiB + GiB / 4), std::string("3.25 GiB"));
}
