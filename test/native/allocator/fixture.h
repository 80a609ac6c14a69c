// fixture.h — one simulated device and its caching allocator, with the invariants checked after
// every operation the test performs through it.
#pragma once
#include <string>

#include "../check.h"
#include "device_allocator.h"
#include "fake_sink.h"
#include "sim_backend.h"

namespace t {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

struct Fx {
  gpumem::core::SimBackend sim;
  gpumem::core::DeviceAllocator a;
  explicit Fx(uint64_t capacity = GiB, bool expandable = false, bool trim_on_growth = false,
              int trims_per_demand = gpumem::core::kTrimsPerDemand)
      : sim(1, capacity), a(0, sim, gpumem::core::Options{expandable, trim_on_growth, trims_per_demand}, fake::sink()) {
    fake::take();
  }
  uint64_t m(size_t n, gpumem::core::Stream s = 0, uint32_t stack = 0) {
    void* p = a.malloc(n, s, stack);
    inv();
    return reinterpret_cast<uint64_t>(p);
  }
  void f(uint64_t p) {
    CHECK(a.free(reinterpret_cast<void*>(p)));
    inv();
  }
  void inv() {
    CHECK_EQ(a.check_invariants(), std::string());
    CHECK_EQ(sim.unsynchronized_unmaps(), uint64_t(0));
  }
  gpumem::core::DeviceStats st() { return a.stats(); }
  int64_t allocated() { return st().allocated_bytes[gpumem::core::kAll].current; }
  int64_t reserved() { return st().reserved_bytes[gpumem::core::kAll].current; }
  void empty() {
    uint64_t b, af;
    a.empty_cache(&b, &af, 0);
    inv();
  }
};

// Records of one type among `recs`.
inline std::vector<fake::Record> of_type(const std::vector<fake::Record>& recs, uint8_t type) {
  std::vector<fake::Record> out;
  for (auto& r : recs)
    if (r.type == type) out.push_back(r);
  return out;
}

}  // namespace t
