// stats.cc — peak/accumulated resets and the memory_stats() JSON.
#include "stats.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "../../format/json.h"

namespace gpumem::core {

void DeviceStats::reset_peak() {
  for (Stat* s : {allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
                  inactive_split_bytes, requested_bytes})
    for (int t = 0; t < kNumStatTypes; t++) s[t].reset_peak();
  oversize_allocations.reset_peak();
  oversize_segments.reset_peak();
}

// Like PyTorch's resetAccumulatedStats: the allocated/freed totals and the event counters.
void DeviceStats::reset_accumulated() {
  for (Stat* s : {allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
                  inactive_split_bytes, requested_bytes})
    for (int t = 0; t < kNumStatTypes; t++) s[t].reset_accumulated();
  oversize_allocations.reset_accumulated();
  oversize_segments.reset_accumulated();
  num_alloc_retries = num_ooms = num_sync_all_streams = num_device_alloc = num_device_free = 0;
  num_trim_syncs = num_page_moves = 0;
}

std::string DeviceStats::to_json() const {
  std::vector<std::pair<std::string, int64_t>> kv;
  auto add_stat = [&](const std::string& key, const Stat& s) {
    kv.emplace_back(key + ".current", s.current);
    kv.emplace_back(key + ".peak", s.peak);
    kv.emplace_back(key + ".allocated", s.allocated);
    kv.emplace_back(key + ".freed", s.freed);
  };
  const std::pair<const char*, const Stat*> arrays[] = {{"allocation", allocation},
                                                        {"segment", segment},
                                                        {"active", active},
                                                        {"inactive_split", inactive_split},
                                                        {"allocated_bytes", allocated_bytes},
                                                        {"reserved_bytes", reserved_bytes},
                                                        {"active_bytes", active_bytes},
                                                        {"inactive_split_bytes", inactive_split_bytes},
                                                        {"requested_bytes", requested_bytes}};
  const char* types[kNumStatTypes] = {"all", "small_pool", "large_pool"};
  for (auto& a : arrays)
    for (int t = 0; t < kNumStatTypes; t++) add_stat(std::string(a.first) + "." + types[t], a.second[t]);
  add_stat("oversize_allocations", oversize_allocations);
  add_stat("oversize_segments", oversize_segments);
  kv.emplace_back("num_alloc_retries", num_alloc_retries);
  kv.emplace_back("num_ooms", num_ooms);
  kv.emplace_back("num_sync_all_streams", num_sync_all_streams);
  kv.emplace_back("num_device_alloc", num_device_alloc);
  kv.emplace_back("num_device_free", num_device_free);
  kv.emplace_back("num_trim_syncs", num_trim_syncs);
  kv.emplace_back("num_page_moves", num_page_moves);
  kv.emplace_back("max_split_size", max_split_size);
  std::sort(kv.begin(), kv.end());
  json::Writer j;
  j.open('{');
  for (const auto& [key, value] : kv) j.kv(key, value);
  return j.close('}').s;
}

}  // namespace gpumem::core
