// fake_recorder.h — the recorder as the tests see it: every emitted record is kept for inspection.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

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

void set_recording(bool on);
std::vector<Record> take();      // records emitted since the last take, in order
void set_stack(uint32_t stack);  // what capture_stack() returns on this thread
int state_writes();              // write_state calls so far
size_t last_state_segments();    // segments core::snapshot_segments returned in the last write_state

}  // namespace fake
