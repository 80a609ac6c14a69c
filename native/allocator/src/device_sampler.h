// device_sampler.h — device-wide memory as nvidia-smi shows it (NVML, opened at run time) and the
// thread that samples it periodically. What a sampling pass writes is the caller's (recorder.cc): this
// file only reads devices and keeps time.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "../../format/gpumem_format.h"

namespace gpumem::rec::sampler {

// Used/total of `device`: NVML, matched to the CUDA device by PCI bus id so that CUDA_VISIBLE_DEVICES cannot mix
// devices up; else the backend's free/total. process_used is always 0 (Note [One NVML call a sample]).
// total == 0 when neither knows. The memory figure and t_ns are read under the device lock (Note [Settled
// samples] in device_sampler.cc): never while a growth is halfway.
fmt::DeviceSampleRec sample_device(int device, const std::string& pci_bus_id);

// Starts the sampling thread (once): `pass` runs at once and then every `interval_ms` until stop().
// Takes no lock of its own while `pass` runs.
void start(uint32_t interval_ms, std::function<void()> pass);
bool running();
void stop();  // wakes and joins the thread; idempotent

}  // namespace gpumem::rec::sampler
