// oom_message.h — the text of our out-of-memory exception: PyTorch's opening, then a diagnosis.
#pragma once
#include <cstdint>
#include <string>

namespace gpumem::core {

struct OomFacts {
  int device = 0;
  uint64_t requested = 0;   // bytes asked for
  uint64_t rounded = 0;     // after 512 B rounding
  uint64_t alloc_size = 0;  // what the driver would have had to provide
  uint64_t reserved = 0, allocated = 0, largest_free = 0, limit = 0;
  uint64_t device_free = 0, device_total = 0;
  bool device_known = false, capturing = false, expandable = false;
};

// "1.50 GiB", "512 bytes": PyTorch's format_size (binary units, two decimals).
std::string format_size(uint64_t bytes);
// Starts "CUDA out of memory. Tried to allocate X." and says whether the cause is a shortage, the
// memory-fraction cap, or fragmentation, with the numbers that show it and what to do.
std::string oom_message(const OomFacts& f);

}  // namespace gpumem::core
