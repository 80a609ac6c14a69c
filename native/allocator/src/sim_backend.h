// sim_backend.h — a simulated device for CPU tests and for replaying captures.
//
// Note [Simulated memory]: addresses are arithmetic only (no host memory is allocated), so a
// simulated "terabyte" costs nothing and nobody may write through the pointers. Addresses are
// deterministic: each device has its own 64 TiB window (room for many expandable reservations of
// kExpandableRangeFactor × capacity, Note [Expandable reservation]), every driver allocation takes the
// next 2 MiB-aligned range of it and ranges are never reused, so a replay always sees the same numbers
// and a stale pointer can never alias a new segment. Capacity counts bytes held from the driver
// (segments and mapped pages), like device memory.
//
// Note [Adopted memory]: a what-if restores an allocator state recorded elsewhere (a capture, a
// PyTorch pickle; Note [Restored state] in restore.cc) at its own addresses. adopt_* enter those
// segments, reservations and pages as if this device had handed them out (they count against
// capacity); later allocations skip every adopted range, wherever it lies.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "backend.h"

namespace gpumem::core {

class SimBackend final : public Backend {
 public:
  SimBackend(int devices, uint64_t capacity_per_device);

  const char* name() const override { return "sim"; }
  int device_count() override { return devices_; }
  bool mem_get_info(int device, uint64_t* free_b, uint64_t* total_b) override;
  uint64_t total_memory(int device) override {
    check_device(device);
    return capacity_;
  }
  // A fixed identity: captures of simulated runs say so, and NVML never matches it.
  DeviceIdentity identity(int device) override {
    check_device(device);
    return {"simulated device", ""};
  }
  bool malloc(int device, size_t size, bool capturing, uint64_t* addr) override;
  void free(int device, uint64_t addr) override;
  Event record_event(int device, Stream stream) override;
  bool query_event(int device, Event event) override;
  void synchronize_event(int device, Event event) override;
  void destroy_event(int device, Event event) override;
  void synchronize_stream(int device, Stream stream) override;
  bool reserve_address(int device, size_t size, size_t alignment, uint64_t* addr) override;
  bool map_page(int device, uint64_t addr, size_t size, bool capturing) override;
  void unmap_page(int device, uint64_t addr, size_t size) override;
  bool remap_page(int device, uint64_t from, uint64_t to, size_t size, Stream stream) override;
  void free_address(int device, uint64_t addr, size_t size) override;

  // ---- Test controls and observations ----
  static constexpr uint64_t kWindow = 1ull << 46;
  static uint64_t base(int device) { return 0x100000000000ull + uint64_t(device) * kWindow; }
  // Events recorded on `stream` (or on every stream) complete now, as if the GPU caught up.
  void complete_events(Stream stream);
  void complete_all_events();
  size_t live_events() const;
  // Simulated graph capture: while on, the backend counts calls the driver would reject.
  void set_capturing(bool on);
  uint64_t capture_violations() const;  // event calls, frees or non-relaxed allocations during capture
  uint64_t used(int device) const;
  uint64_t driver_allocs() const;  // cuMemAlloc + cuMemMap calls that succeeded
  uint64_t driver_frees() const;   // cuMemFree + cuMemUnmap calls
  // Pages unmapped with no stream synchronized since the last map, or (a page moved away, Note
  // [Page moves]) before an event recorded on its stream after the move was seen complete: work
  // queued earlier could still be using them.
  uint64_t unsynchronized_unmaps() const;
  uint64_t stream_synchronizations() const;
  uint64_t remaps() const;  // remap_page calls that succeeded
  bool is_mapped(int device, uint64_t addr) const;
  // Bytes of new device memory handed out (cuMemAlloc sizes and cuMemMap of fresh pages; a page
  // move, remap_page, takes none): what a what-if calls growth (Note [What-if]).
  uint64_t new_device_bytes() const;
  // Note [Slow page maps]: each map_page that maps takes this long more (it waits after mapping, outside
  // the backend's lock), as a large growth does on a real device (cuMemCreate + cuMemMap of gigabytes take a
  // while): a sampler beside it can read the device halfway (the test_samples.py). 0 = at once.
  void set_map_delay_us(uint32_t us) { map_delay_us_ = us; }

  // ---- Note [Adopted memory]: false when the capacity cannot hold it; throws on overlaps ----
  bool adopt_segment(int device, uint64_t addr, size_t size);  // as if cuMemAlloc had returned it
  void adopt_range(int device, uint64_t addr, size_t size);    // as if cuMemAddressReserve had
  bool adopt_page(int device, uint64_t addr, size_t size);     // a mapped page inside an adopted range

 private:
  struct SimEvent {
    int device;
    Stream stream;
    bool done;
  };
  void check_device(int device) const;
  void saw_done(Event event);                                         // under mu_
  void check_mappable(int device, uint64_t addr, size_t size) const;  // under mu_
  // Maps a fresh physical page at addr if the capacity allows (under mu_; map_page and adopt_page).
  bool map_fresh(int device, uint64_t addr, size_t size);
  uint64_t take_range(int device, size_t size, size_t alignment);
  void adopt(int device, uint64_t addr, size_t size);  // under mu_: records an occupied range

  const int devices_;
  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::vector<uint64_t> cursor_, used_;
  std::vector<std::map<uint64_t, size_t>> segments_;   // per device: addr → size (cuMemAlloc)
  std::vector<std::map<uint64_t, size_t>> pages_;      // per device: mapped page addr → size
  std::vector<std::map<uint64_t, size_t>> ranges_;     // per device: reserved VA ranges
  std::vector<std::map<uint64_t, uint64_t>> adopted_;  // per device: adopted [addr, end) (Note [Adopted memory])
  std::map<Event, SimEvent> events_;
  // Per device: a stream was synchronized since the last page was mapped (a simple model: unmapping
  // without any synchronization since the memory was mapped is certainly unsafe).
  std::vector<uint8_t> synced_;
  // Physical pages: per device, a mapped address's page id; per id, the addresses mapping it (page
  // moves map one page at two addresses, Note [Page moves]). And per device, for an address moved
  // away, its stream and the first event id recorded after the move.
  std::vector<std::map<uint64_t, uint64_t>> phys_of_;
  std::map<uint64_t, int> phys_refs_;
  uint64_t next_phys_ = 1;
  std::vector<std::map<uint64_t, std::pair<Stream, Event>>> moved_from_;
  // Per device and stream: every event below this id, recorded there, is known complete.
  std::vector<std::map<Stream, Event>> done_below_;
  uint64_t syncs_ = 0, remaps_ = 0;
  uint64_t unsynced_unmaps_ = 0;
  Event next_event_ = 1;
  bool capturing_ = false;
  std::atomic<uint32_t> map_delay_us_{0};
  uint64_t violations_ = 0, allocs_ = 0, frees_ = 0, new_bytes_ = 0;
};

}  // namespace gpumem::core
