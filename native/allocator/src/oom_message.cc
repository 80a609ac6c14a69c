// oom_message.cc — see oom_message.h.
#include "oom_message.h"

#include <cstdio>

namespace gpumem::core {

std::string format_size(uint64_t bytes) {
  char buf[64];
  if (bytes <= 1024)
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (bytes <= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.2f KiB", double(bytes) / 1024.0);
  else if (bytes <= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / 1073741824.0);
  return buf;
}

static std::string fraction_text(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", fraction);
  return buf;
}

std::string exabyte_message(int device, uint64_t requested, uint64_t device_total) {
  std::string m = "CUDA out of memory. Tried to allocate more than 1EB memory. The request is for " +
                  std::to_string(requested) + " bytes (" + format_size(requested) + "), larger than any GPU";
  if (device_total) m += ": GPU " + std::to_string(device) + " has a total capacity of " + format_size(device_total);
  m += ". Cause: the request itself. Check the shape and dtype of the tensor being created (a size "
       "computed from an overflowed or uninitialised value is the usual culprit).";
  return m;
}

std::string oom_message(const OomFacts& f) {
  const uint64_t cached = f.reserved - f.allocated;  // reserved but unallocated
  const bool capped = f.limit != 0 && f.fraction < 1.0;
  std::string m =
      "CUDA out of memory. Tried to allocate " + format_size(f.alloc_size) + ". GPU " + std::to_string(f.device);
  if (f.device_known)
    m += " has a total capacity of " + format_size(f.device_total) + " of which " + format_size(f.device_free) +
         " is free.";
  else
    m += ": the driver's free/total figures are unavailable.";
  if (f.limit) m += " " + format_size(f.limit) + " allowed;";
  if (f.alloc_size != f.requested)
    m += " The request was for " + format_size(f.requested) + "; the allocator had to reserve " +
         format_size(f.alloc_size) + " for it.";
  m += " Of the memory reserved by the lens allocator (" + format_size(f.reserved) + "), " + format_size(f.allocated) +
       " is allocated to tensors and " + format_size(cached) +
       " is reserved but unallocated (largest free cached block: " + format_size(f.largest_free) + ").";
  if (capped)
    m += " The memory-fraction cap is " + format_size(f.limit) + " (per-process memory fraction " +
         fraction_text(f.fraction) + ").";
  m += " ";
  if (f.capturing) {
    m += "A CUDA graph capture is underway, so cached memory could not be released to make room; "
         "allocate what the graph needs before capturing or capture with a smaller batch.";
  } else if (f.device_known && f.rounded > f.device_total) {
    // Nothing held or cached matters: the device could never hold it (whatever the fraction). The
    // request, not its segment: a small request whose segment outgrows a tiny device is not "too large".
    m += "Cause: the request is larger than the whole GPU (" + format_size(f.rounded) + " > " +
         format_size(f.device_total) +
         "). No setting or freeing can make it fit; check the shape and dtype "
         "of the tensor being created.";
  } else if (capped && f.reserved + f.alloc_size > f.limit) {
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
