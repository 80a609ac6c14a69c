// allocator.h — the process-wide allocator (allocator.cc): the configuration, the backend it selects,
// one DeviceAllocator per device, and the EventSink they all emit to. The C API (c_api.cc) drives it;
// the recorder reads it through allocator_api.h. It depends on nothing outside the core.
#pragma once
#include <string>
#include <vector>

#include "../../format/json.h"
#include "allocator_api.h"
#include "device_allocator.h"
#include "event_sink.h"

namespace gpumem::core {

// Applies the core's keys of gpumem_configure's JSON ("backend", "sim_capacity", "sim_devices",
// "sim_map_delay_us", "segments", "trim_on_growth"); they may change only before the first allocation. Other keys are
// ignored.
bool configure(const json::Value& config, std::string* err);

// Where the devices send their records (the null sink by default). Only before the devices exist (the
// first allocation or gpumem_init); false after, when the sink in place stays.
bool set_event_sink(EventSink& sink);

// Creates the backend and the devices once; throws BackendError when the driver cannot be used.
void ensure_ready();
// The allocator of `device` (creating them all first); throws std::runtime_error for an unknown device.
DeviceAllocator& device_allocator(int device);
// Devices selected by `device` (-1 = all); empty before the allocator exists.
std::vector<DeviceAllocator*> selected(int device);

}  // namespace gpumem::core
