// sim_backend.cc — see Note [Simulated memory] in sim_backend.h.
#include "sim_backend.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace gpumem::core {

SimBackend::SimBackend(int devices, uint64_t capacity_per_device)
    : devices_(devices),
      capacity_(capacity_per_device),
      cursor_(devices, 0),
      used_(devices, 0),
      segments_(devices),
      pages_(devices),
      ranges_(devices),
      adopted_(devices),
      synced_(devices, 1),
      phys_of_(devices),
      moved_from_(devices),
      done_below_(devices) {
  if (devices < 1 || devices > 64) throw BackendError("sim_devices must be between 1 and 64");
}

void SimBackend::check_device(int device) const {
  if (device < 0 || device >= devices_)
    throw BackendError("device " + std::to_string(device) + " does not exist (the simulated backend has " +
                       std::to_string(devices_) + ")");
}

uint64_t SimBackend::take_range(int device, size_t size, size_t alignment) {
  uint64_t a = alignment ? alignment : kSmallBuffer;
  uint64_t off = (cursor_[device] + a - 1) / a * a;
  // Note [Adopted memory]: step over adopted ranges that the next range would overlap.
  const auto& adopted = adopted_[device];
  for (;;) {
    if (off + size > kWindow) throw BackendError("simulated address window exhausted");
    const uint64_t lo = base(device) + off, hi = lo + size;
    auto it = adopted.lower_bound(hi);  // first adopted range starting at or after hi
    if (it == adopted.begin() || std::prev(it)->second <= lo) break;
    off = (std::prev(it)->second - base(device) + a - 1) / a * a;
  }
  cursor_[device] = off + size;
  return base(device) + off;
}

void SimBackend::adopt(int device, uint64_t addr, size_t size) {
  auto& adopted = adopted_[device];
  auto it = adopted.lower_bound(addr + size);
  if (size == 0 || addr + size < addr || (it != adopted.begin() && std::prev(it)->second > addr))
    throw BackendError("sim: adopted memory overlaps memory adopted before (or wraps around)");
  adopted[addr] = addr + size;
}

bool SimBackend::adopt_segment(int device, uint64_t addr, size_t size) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (size > capacity_ - used_[device]) return false;
  adopt(device, addr, size);
  segments_[device][addr] = size;
  used_[device] += size;
  return true;
}

void SimBackend::adopt_range(int device, uint64_t addr, size_t size) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  adopt(device, addr, size);
  ranges_[device][addr] = size;
}

bool SimBackend::adopt_page(int device, uint64_t addr, size_t size) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  check_mappable(device, addr, size);
  return map_fresh(device, addr, size);
}

bool SimBackend::map_fresh(int device, uint64_t addr, size_t size) {
  if (size > capacity_ - used_[device]) return false;
  pages_[device][addr] = size;
  phys_of_[device][addr] = next_phys_;
  phys_refs_[next_phys_++] = 1;
  used_[device] += size;
  return true;
}

uint64_t SimBackend::new_device_bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  return new_bytes_;
}

bool SimBackend::mem_get_info(int device, uint64_t* free_b, uint64_t* total_b) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  *free_b = capacity_ - used_[device];
  *total_b = capacity_;
  return true;
}

bool SimBackend::malloc(int device, size_t size, bool capturing, uint64_t* addr) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (capturing_ && !capturing) violations_++;  // the real driver would invalidate the capture
  if (size > capacity_ - used_[device]) return false;
  const bool preferred = preferred_size_ == size && free_outside_windows(device, preferred_addr_, size);
  *addr = preferred ? preferred_addr_ : take_range(device, size, kSmallBuffer);
  preferred_size_ = 0;
  segments_[device][*addr] = size;
  used_[device] += size;
  allocs_++;
  new_bytes_ += size;
  return true;
}

void SimBackend::prefer_address(uint64_t addr, size_t size) {
  std::lock_guard<std::mutex> g(mu_);
  preferred_addr_ = addr, preferred_size_ = size;
}

bool SimBackend::free_outside_windows(int device, uint64_t addr, size_t size) const {
  const uint64_t end = addr + size;
  if (size == 0 || end < addr || (addr < base(devices_) && end > base(0))) return false;  // the sim's own windows
  auto overlaps = [&](const auto& by_addr, auto end_of) {
    auto it = by_addr.lower_bound(end);
    return it != by_addr.begin() && end_of(*std::prev(it)) > addr;
  };
  auto sized = [](const std::pair<const uint64_t, size_t>& e) { return e.first + e.second; };
  return !overlaps(segments_[device], sized) && !overlaps(ranges_[device], sized) &&
         !overlaps(adopted_[device], [](const std::pair<const uint64_t, uint64_t>& e) { return e.second; });
}

void SimBackend::free(int device, uint64_t addr) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (capturing_) violations_++;
  auto it = segments_[device].find(addr);
  if (it == segments_[device].end()) throw BackendError("sim: cuMemFree of an address never allocated");
  used_[device] -= it->second;
  segments_[device].erase(it);
  frees_++;
}

Event SimBackend::record_event(int device, Stream stream) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (capturing_) violations_++;
  Event e = next_event_++;
  events_[e] = SimEvent{device, stream, false};
  return e;
}

bool SimBackend::query_event(int device, Event event) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (capturing_) violations_++;
  auto it = events_.find(event);
  if (it == events_.end()) throw BackendError("sim: query of a destroyed event");
  if (it->second.done) saw_done(event);
  return it->second.done;
}

void SimBackend::synchronize_event(int device, Event event) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (capturing_) violations_++;
  auto it = events_.find(event);
  if (it == events_.end()) throw BackendError("sim: synchronize on a destroyed event");
  it->second.done = true;  // waiting for an event means the GPU got there
  saw_done(event);
}

void SimBackend::destroy_event(int device, Event event) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (events_.erase(event) == 0) throw BackendError("sim: double destroy of an event");
}

bool SimBackend::reserve_address(int device, size_t size, size_t alignment, uint64_t* addr) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (alignment & (alignment - 1))  // the driver rejects these (CUDA_ERROR_INVALID_VALUE)
    throw BackendError("sim: cuMemAddressReserve alignment must be a power of two");
  *addr = take_range(device, size, alignment);
  ranges_[device][*addr] = size;
  return true;
}

// What cuMemMap would reject: a range outside one reservation, or over a mapped page.
void SimBackend::check_mappable(int device, uint64_t addr, size_t size) const {
  auto r = ranges_[device].upper_bound(addr);
  if (r == ranges_[device].begin() || addr + size > std::prev(r)->first + std::prev(r)->second)
    throw BackendError("sim: cuMemMap outside a reserved range");
  if (pages_[device].count(addr)) throw BackendError("sim: cuMemMap over a mapped page");
}

bool SimBackend::map_page(int device, uint64_t addr, size_t size, bool capturing) {
  {
    std::lock_guard<std::mutex> g(mu_);
    check_device(device);
    if (capturing_ && !capturing) violations_++;
    check_mappable(device, addr, size);
    if (!map_fresh(device, addr, size)) return false;
    allocs_++;
    new_bytes_ += size;
    synced_[device] = 0;
  }
  if (const uint32_t us = map_delay_us_.load(std::memory_order_relaxed))
    std::this_thread::sleep_for(std::chrono::microseconds(us));  // Note [Slow page maps]
  return true;
}

void SimBackend::unmap_page(int device, uint64_t addr, size_t size) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (capturing_) violations_++;
  auto it = pages_[device].find(addr);
  if (it == pages_[device].end() || it->second != size)
    throw BackendError("sim: cuMemUnmap must cover exactly one mapped page");
  auto moved = moved_from_[device].find(addr);
  if (moved != moved_from_[device].end()) {
    // Safe once an event recorded on the page's stream after the move is known complete.
    auto done = done_below_[device].find(moved->second.first);
    if (done == done_below_[device].end() || done->second <= moved->second.second) unsynced_unmaps_++;
    moved_from_[device].erase(moved);
  } else if (!synced_[device]) {
    unsynced_unmaps_++;
  }
  auto phys = phys_of_[device].find(addr);
  if (--phys_refs_[phys->second] == 0) {  // no other address holds the physical page
    phys_refs_.erase(phys->second);
    used_[device] -= size;
  }
  phys_of_[device].erase(phys);
  pages_[device].erase(it);
  frees_++;
}

bool SimBackend::remap_page(int device, uint64_t from, uint64_t to, size_t size, Stream stream) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (capturing_) violations_++;
  auto it = pages_[device].find(from);
  if (it == pages_[device].end() || it->second != size)
    throw BackendError("sim: cuMemRetainAllocationHandle needs the start of one mapped page of that size");
  check_mappable(device, to, size);
  pages_[device][to] = size;
  const uint64_t phys = phys_of_[device].at(from);
  phys_of_[device][to] = phys;
  phys_refs_[phys]++;
  moved_from_[device][from] = {stream, next_event_};
  allocs_++;
  remaps_++;
  synced_[device] = 0;
  return true;
}

void SimBackend::saw_done(Event event) {
  const SimEvent& e = events_.at(event);
  Event& below = done_below_[e.device][e.stream];
  below = std::max(below, event + 1);
}

void SimBackend::synchronize_stream(int device, Stream stream) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  if (capturing_) violations_++;
  synced_[device] = 1;
  Event& below = done_below_[device][stream];
  below = std::max(below, next_event_);
  syncs_++;
}

uint64_t SimBackend::stream_synchronizations() const {
  std::lock_guard<std::mutex> g(mu_);
  return syncs_;
}

uint64_t SimBackend::remaps() const {
  std::lock_guard<std::mutex> g(mu_);
  return remaps_;
}

bool SimBackend::is_mapped(int device, uint64_t addr) const {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  return pages_[device].count(addr) != 0;
}

uint64_t SimBackend::unsynchronized_unmaps() const {
  std::lock_guard<std::mutex> g(mu_);
  return unsynced_unmaps_;
}

void SimBackend::free_address(int device, uint64_t addr, size_t) {
  std::lock_guard<std::mutex> g(mu_);
  check_device(device);
  ranges_[device].erase(addr);
}

void SimBackend::complete_events(Stream stream) {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& e : events_)
    if (e.second.stream == stream) e.second.done = true;
}
void SimBackend::complete_all_events() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& e : events_) e.second.done = true;
}
size_t SimBackend::live_events() const {
  std::lock_guard<std::mutex> g(mu_);
  return events_.size();
}
void SimBackend::set_capturing(bool on) {
  std::lock_guard<std::mutex> g(mu_);
  capturing_ = on;
}
uint64_t SimBackend::capture_violations() const {
  std::lock_guard<std::mutex> g(mu_);
  return violations_;
}
uint64_t SimBackend::used(int device) const {
  std::lock_guard<std::mutex> g(mu_);
  return used_.at(device);
}
uint64_t SimBackend::driver_allocs() const {
  std::lock_guard<std::mutex> g(mu_);
  return allocs_;
}
uint64_t SimBackend::driver_frees() const {
  std::lock_guard<std::mutex> g(mu_);
  return frees_;
}

}  // namespace gpumem::core
