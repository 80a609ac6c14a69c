// oom_message.cc — see oom_message.h.
#include "oom_message.h"

#include <cstdio>

namespace gpumem::core {

std::string format_size(uint64_t bytes) {
  char buf[64];
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (bytes < (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.2f KiB", double(bytes) / 1024.0);
  else if (bytes < (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / 1073741824.0);
  return buf;
}

std::string oom_message(const OomFacts& f) {
  const uint64_t cached = f.reserved - f.allocated;  // reserved but unallocated
  std::string m = "CUDA out of memory. Tried to allocate " + format_size(f.requested) + ". GPU " +
                  std::to_string(f.device);
  if (f.device_known)
    m += " has a total capacity of " + format_size(f.device_total) + " of which " + format_size(f.device_free) +
         " is free.";
  else
    m += ": the driver's free/total figures are unavailable.";
  m += " Of the memory reserved by the lens allocator (" + format_size(f.reserved) + "), " +
       format_size(f.allocated) + " is allocated to tensors and " + format_size(cached) +
       " is reserved but unallocated (largest free cached block: " + format_size(f.largest_free) + ").";
  if (f.limit) m += " The memory-fraction cap is " + format_size(f.limit) + ".";
  m += " ";
  if (f.capturing) {
    m += "A CUDA graph capture is underway, so cached memory could not be released to make room; "
         "allocate what the graph needs before capturing or capture with a smaller batch.";
  } else if (f.limit && f.reserved + f.alloc_size > f.limit) {
    m += "Cause: the per-process memory fraction. The request needs " + format_size(f.alloc_size) +
         " more reserved memory, which would exceed the cap; raise it with "
         "torch.cuda.set_per_process_memory_fraction() or free tensors.";
  } else if (cached >= f.rounded) {
    m += "Cause: fragmentation. The cache holds " + format_size(cached) + " free, more than the " +
         format_size(f.rounded) + " requested, but no free block of this stream is large enough (largest " +
         format_size(f.largest_free) + ")";
    m += f.expandable ? ", and the free pages could not be remapped into one range. Free long-lived tensors "
                        "allocated between short-lived ones, or allocate large buffers first."
                      : ". Setting gpuMemoryLens.segmentStrategy to \"expandable\" lets freed pages be "
                        "reused for any size.";
  } else {
    m += "Cause: a shortage. Live tensors hold " + format_size(f.allocated) +
         " and the cache could not cover the rest; reduce the batch size or model size, or free tensors "
         "you no longer need (del them). torch.cuda.empty_cache() will not help.";
  }
  return m;
}

}  // namespace gpumem::core
