// fake_sink.h — an EventSink for the tests: every emitted record is kept for inspection.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "event_sink.h"

namespace fake {

struct Record {
  uint8_t type, device;
  uint16_t flags;
  std::vector<uint8_t> payload;
  template <typename T>
  T as() const {
    T v;
    std::memcpy(&v, payload.data(), sizeof v);
    return v;
  }
};

gpumem::core::EventSink& sink();  // the one test sink (fixtures and the façade test attach it)
void set_recording(bool on);      // whether the sink wants events
std::vector<Record> take();       // records emitted since the last take, in order
int state_writes();               // after_oom calls so far
size_t last_state_segments();     // segments core::snapshot_segments returned in the last after_oom

}  // namespace fake
