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
  uint64_t a = x.m(5 * MiB, 1);   // a 20 MiB segment on stream 1
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
  // PyTorch names what it asked the driver for (a 1.5 MiB request needs a 20 MiB large segment).
  CHECK(msg.rfind("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 10.00 MiB", 0) == 0);
  CHECK(msg.find("The request was for 1.50 MiB; the allocator had to reserve 20.00 MiB for it.") != std::string::npos);
  CHECK(msg.find("5.00 MiB is allocated to tensors and 5.00 MiB is reserved but unallocated "
                 "(largest free cached block: 1024.00 KiB)") != std::string::npos);
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
  // PyTorch's bounds are inclusive (size <= 1024 → bytes, <= 1 MiB → KiB, <= 1 GiB → MiB).
  CHECK_EQ(format_size(1024), std::string("1024 bytes"));
  CHECK_EQ(format_size(1025), std::string("1.00 KiB"));
  CHECK_EQ(format_size(MiB), std::string("1024.00 KiB"));
  CHECK_EQ(format_size(GiB), std::string("1024.00 MiB"));
  CHECK_EQ(format_size(1024ull * 1024 * 1024 * 800000000), std::string("800000000.00 GiB"));
}

static bool has(const std::string& msg, const char* part) { return msg.find(part) != std::string::npos; }

// PyTorch's test_out_of_memory: 1024^3 * 8000000000 bytes must fail with its 1 EB guard.
TEST(oom_at_or_above_one_exabyte_is_pytorchs_guard_and_changes_nothing) {
  Fx x(40 * MiB);
  fake::set_recording(true);
  x.m(MiB);
  const uint64_t reserved = uint64_t(x.reserved());
  for (uint64_t n : {kOneExaByte, uint64_t(1024ull * 1024 * 1024 * 8000000000ull), ~uint64_t(0)}) {
    std::string msg = oom_text(x, n);
    CHECK(msg.rfind("CUDA out of memory. Tried to allocate more than 1EB memory. The request is for " +
                        std::to_string(n) + " bytes",
                    0) == 0);
    CHECK(has(msg, "GPU 0 has a total capacity of 40.00 MiB"));
    CHECK(has(msg, "Cause: the request itself."));
  }
  // An argument check, as in PyTorch: no OOM counted or recorded, nothing reserved.
  CHECK_EQ(x.st().num_ooms, int64_t(0));
  CHECK_EQ(x.st().num_alloc_retries, int64_t(0));
  CHECK_EQ(uint64_t(x.reserved()), reserved);
  auto recs = fake::take();
  fake::set_recording(false);
  CHECK_EQ(of_type(recs, fmt::REC_OOM).size(), size_t(0));
  // Just below 1 EB the allocator itself refuses, with PyTorch's other opening.
  std::string msg = oom_text(x, kOneExaByte - 512);
  CHECK(msg.rfind("CUDA out of memory. Tried to allocate 1073741824.00 GiB. GPU 0 has a total capacity of", 0) == 0);
  CHECK_EQ(x.st().num_ooms, int64_t(1));
}

// PyTorch's test_out_of_memory, first half, after a fraction of 1.0 was set (as its fraction tests
// leave it): the request exceeds the device; the fraction (the whole device) is not the cause.
TEST(oom_larger_than_the_device_with_fraction_one_blames_the_request) {
  Fx x(40 * MiB);
  x.a.set_memory_fraction(1.0);
  x.m(MiB);
  std::string msg = oom_text(x, 1024ull * 1024 * 1024 * 800000000);
  CHECK(msg.rfind("CUDA out of memory. Tried to allocate 800000000.00 GiB. GPU 0 has a total capacity of 40.00 MiB "
                  "of which 38.00 MiB is free. 40.00 MiB allowed;",
                  0) == 0);
  CHECK(has(msg, "Cause: the request is larger than the whole GPU (800000000.00 GiB > 40.00 MiB)."));
  CHECK(!has(msg, "fraction"));
}

TEST(oom_with_fraction_one_and_memory_short_is_a_shortage) {
  Fx x(40 * MiB);
  x.a.set_memory_fraction(1.0);
  x.m(30 * MiB);
  std::string msg = oom_text(x, 20 * MiB);
  CHECK(msg.rfind("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 40.00 MiB of which "
                  "10.00 MiB is free. 40.00 MiB allowed; Of the memory",
                  0) == 0);
  CHECK(has(msg, "Cause: a shortage."));
  CHECK(!has(msg, "fraction"));
}

TEST(oom_refused_by_a_fraction_below_one_says_so_with_the_cap) {
  Fx x(40 * MiB);
  x.a.set_memory_fraction(0.5);  // a 20 MiB cap on a device with 30 MiB still free
  x.m(10 * MiB);
  std::string msg = oom_text(x, 12 * MiB);
  CHECK(msg.rfind("CUDA out of memory. Tried to allocate 12.00 MiB. GPU 0 has a total capacity of 40.00 MiB of which "
                  "30.00 MiB is free. 20.00 MiB allowed;",
                  0) == 0);
  CHECK(has(msg, "The memory-fraction cap is 20.00 MiB (per-process memory fraction 0.5)."));
  CHECK(has(msg, "Cause: the per-process memory fraction."));
  // Without the cap the device serves it.
  x.a.set_memory_fraction(1.0);
  CHECK(x.m(12 * MiB) != 0);
}

TEST(oom_larger_than_the_device_under_a_fraction_blames_the_request) {
  Fx x(40 * MiB);
  x.a.set_memory_fraction(0.5);
  std::string msg = oom_text(x, 64 * MiB);
  CHECK(has(msg, "Cause: the request is larger than the whole GPU (64.00 MiB > 40.00 MiB)."));
  CHECK(!has(msg, "Cause: the per-process memory fraction"));
}

TEST(oom_in_expandable_mode_reports_the_pages_it_needed) {
  Fx x(40 * MiB, true);
  x.m(30 * MiB);
  std::string msg = oom_text(x, 20 * MiB);
  CHECK(msg.rfind("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 40.00 MiB", 0) == 0);
  CHECK(has(msg, "Cause: a shortage."));
}

// After a failed growth the device holds exactly what the allocator reserves. The 30 % / 90 %
// script in both segment kinds: the expandable growth maps ~70 % of the device page by page before the
// driver refuses, and must give every one of those pages back (with a synchronize first) before it throws;
// the ladder's retry maps and unmaps them again. Note [Settled samples] in device_sampler.cc.
TEST(failed_growth_leaves_no_page_mapped) {
  for (const bool expandable : {false, true}) {
    Fx x(80 * 20 * MiB, expandable);
    const uint64_t held = x.m(24 * 20 * MiB);  // 30 %
    const uint64_t maps_before = x.sim.driver_allocs();
    oom_text(x, 72 * 20 * MiB);  // 90 %
    CHECK_EQ(x.sim.used(0), uint64_t(x.reserved()));
    CHECK_EQ(x.reserved(), int64_t(24 * 20 * MiB));
    uint64_t free_b = 0, total_b = 0;
    CHECK(x.sim.mem_get_info(0, &free_b, &total_b));
    CHECK_EQ(total_b - free_b, uint64_t(24 * 20 * MiB));
    // The failed expandable growth did map pages (the rollback is what keeps the device clean).
    if (expandable) CHECK(x.sim.driver_allocs() > maps_before);
    // The allocator stays usable and keeps its accounting.
    x.f(x.m(20 * MiB));
    x.f(held);
  }
}
