// snapshot_pickle.h — PyTorch 2.11 snapshot pickles (torch.cuda.memory._snapshot() schema) built from
// the allocator's current segments and an in-memory ring of recent events.
//
// Note [Trace ring]: PyTorch keeps the last `max_entries` trace entries per device; we keep the last
// N events per device (configure "trace_entries", default 100 000; 0 = no device_traces) in a fixed
// ring fed by emit(), so the pickle needs nothing from the capture file and works without one.
#pragma once
#include <cstdint>
#include <string>

namespace gpumem::rec::snap {

struct Settings {
  size_t trace_entries = 100000;
  bool expandable_segments = false;  // for allocator_settings
  uint64_t mono_anchor_ns = 0;       // CLOCK_MONOTONIC ns at wall_anchor_ns: converts t_ns to time_us
  uint64_t wall_anchor_ns = 0;
};
void configure(const Settings& s);

// Feeds the ring: block/segment/OOM records as emit() receives them (other types are ignored).
void on_event(uint8_t type, uint8_t device, const void* payload, uint32_t bytes);
// record_function ranges → external_annotations (stage START/END).
void on_annotation(bool begin, const std::string& name, int device, uint64_t t_ns);
// The label of `thread`'s block events from now on (Note [User metadata] in gpumem_format.h): their trace entries'
// user_metadata, as PyTorch's own ring keeps it. "" clears it.
void on_user_metadata(uint32_t thread, const std::string& text);
// A 'snapshot' trace entry on every device, as PyTorch adds when a snapshot is taken.
void on_snapshot(uint64_t t_ns);

// The complete pickle (protocol 4) of the allocator's state now. Calls core::snapshot_segments: never
// with a device lock held.
std::string build();

}  // namespace gpumem::rec::snap
