// fake_core.cc — a stand-in for the allocator core (allocator_api.h) so the recorder's unit tests run
// without the caching allocator: one device with fixed figures and a counter of empty_cache calls.
#include <atomic>

#include "allocator_api.h"

namespace gpumem::core {

std::atomic<int> g_fake_empty_cache_calls{0};

std::vector<SegmentView> snapshot_segments(int device) {
  if (device > 0) return {};
  SegmentView s{0, 1 << 20, 2 << 20, 0, 0, 0, 0, 1, {}};
  s.blocks.push_back(BlockView{1 << 20, 512, 500, 0, 1});
  s.blocks.push_back(BlockView{(1 << 20) + 512, (2 << 20) - 512, 0, 0, 0});
  return {s};
}
int device_count() { return 1; }
Figures figures(int) { return Figures{512, 2 << 20, 512, 500, 512, 2 << 20, 0, 0}; }
void empty_cache(int, uint64_t* before, uint64_t* after, int) {
  g_fake_empty_cache_calls++;
  *before = 2 << 20;
  *after = 0;
}
bool device_memory(int, uint64_t* free_b, uint64_t* total_b) {
  *free_b = 1ull << 29;
  *total_b = 1ull << 30;
  return true;
}
void settled(int, const std::function<void()>& read) { read(); }
DeviceIdentity device_identity(int device) { return {device == 0 ? "fake device" : "", ""}; }

}  // namespace gpumem::core
