// allocator_api.h — what the allocator core offers the parts around it (recorder, samplers, control
// commands): read-only views and figures, empty_cache, device memory and identity. Implemented in
// allocator.cc.
//
// Every function takes the device lock(s) itself; never call these while holding a device lock
// (Note [Lock hierarchy] in native/allocator/README.md).
#pragma once
#include <stdint.h>

#include <functional>
#include <vector>

#include "backend.h"

namespace gpumem::core {

struct BlockView {
  uint64_t addr, size, requested;
  uint32_t stack;  // stack of the last hand-out (0 if never handed out)
  uint8_t state;   // fmt::BlockState
};

struct SegmentView {
  int device;
  uint64_t addr, size, stream, pool0, pool1;  // pool0/pool1: graph pool id, (0,0) for the default pools
  uint32_t stack;                             // stack that created the segment
  uint16_t flags;                             // fmt::kPool* | fmt::kSegExpandable
  std::vector<BlockView> blocks;              // address order, covering the whole segment
};

// All segments of `device` (-1 = all devices), in address order per device.
std::vector<SegmentView> snapshot_segments(int device);

// Devices the allocator manages (0 before gpumem_init / the first malloc).
int device_count();

struct Figures {
  uint64_t allocated, reserved, active, requested, peak_allocated, peak_reserved, num_ooms, num_alloc_retries;
};
// Summed over all devices when device == -1.
Figures figures(int device);

// Release every fully free cached segment (after pending events); device -1 = all.
// origin as in fmt::EmptyCacheRec (0 torch.cuda.empty_cache, 1 control channel, 2 OOM ladder).
void empty_cache(int device, uint64_t* before, uint64_t* after, int origin);

// The driver's (or simulated device's) free/total bytes; false if unknown. Takes only the backend's lock.
bool device_memory(int device, uint64_t* free_b, uint64_t* total_b);

// Runs `read` under `device`'s lock, when no growth, release or rollback of it is halfway (Note [Settled
// samples] in device_sampler.cc); with no lock for a device the allocator does not manage (none yet, or the
// PyTorch-allocator mode). The exception to "never call these while holding a device lock": `read` runs
// under it, so it may call device_memory and the driver's or NVML's queries, nothing else of the allocator.
void settled(int device, const std::function<void()>& read);

// The backend's name and PCI bus id of `device` (empty before the allocator exists or when unknown).
DeviceIdentity device_identity(int device);

}  // namespace gpumem::core
