// oom_message.h — the text of our out-of-memory exception: PyTorch's opening, then a diagnosis.
//
// Note [PyTorch's OOM texts]: PyTorch's tests and users match on the opening of its messages
// (c10/cuda/CUDACachingAllocator.cpp, 2.4–2.11):
//   "CUDA out of memory. Tried to allocate more than 1EB memory."     (requests of 2^60 bytes or more)
//   "CUDA out of memory. Tried to allocate <format_size(alloc_size)>. GPU <n> has a total capacity of
//    <total> of which <free> is free. [<cap> allowed; ]"
// where alloc_size is what the allocator asked the driver for (the rounded request grown to a segment)
// and "<cap> allowed; " appears once a memory fraction was set. We reproduce those openings exactly,
// then say in our own words what held the memory and why the request failed. Every cause is computed
// from the facts below, never assumed.
#pragma once
#include <cstdint>
#include <string>

namespace gpumem::core {

// PyTorch refuses requests of 1 EB (2^60 bytes) or more before they reach any allocator.
constexpr uint64_t kOneExaByte = 1ull << 60;

struct OomFacts {
  int device = 0;
  uint64_t requested = 0;   // bytes asked for
  uint64_t rounded = 0;     // after 512 B rounding
  uint64_t alloc_size = 0;  // what the driver would have had to provide
  uint64_t reserved = 0, allocated = 0, largest_free = 0;
  uint64_t limit = 0;     // the memory-fraction cap in bytes; 0 = no fraction was ever set
  double fraction = 1.0;  // the per-process memory fraction (1.0: the whole device)
  uint64_t device_free = 0, device_total = 0;
  bool device_known = false, capturing = false, expandable = false;
};

// "1.50 GiB", "1024 bytes": PyTorch's format_size (binary units, two decimals, a unit's upper bound
// inclusive: 1024 bytes stays "1024 bytes", 1 MiB is "1024.00 KiB").
std::string format_size(uint64_t bytes);
// Starts "CUDA out of memory. Tried to allocate X. GPU N has a total capacity of T of which F is free."
// and says whether the cause is a request larger than the device, the memory-fraction cap (only a
// fraction below 1.0), fragmentation or a shortage, with the numbers that show it and what to do.
std::string oom_message(const OomFacts& f);
// PyTorch's 1 EB guard, then why: no device is that large. device_total 0 = unknown.
std::string exabyte_message(int device, uint64_t requested, uint64_t device_total);

}  // namespace gpumem::core
