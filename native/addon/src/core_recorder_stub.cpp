// The allocator core (native/allocator/src) reports its events to gpumem::rec; inside the reader it
// runs on the simulated device for what-if questions and replays (policy_replay.cpp), where nothing
// is recorded. These definitions say so: never recording, no stacks, no state records.
// (Once the core emits to an event sink it is given, issue 14, this file goes.)
#include <time.h>

#include <cstdint>
#include <string>

#include "recorder.h"

namespace gpumem::rec {
uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
bool recording() { return false; }
uint32_t capture_stack() { return 0; }
uint32_t thread_number() { return 0; }
void emit(uint8_t, uint8_t, uint16_t, const void*, uint32_t) {}
void emit2(uint8_t, uint8_t, uint16_t, const void*, uint32_t, const void*, uint32_t) {}
int64_t write_state(int, uint32_t) { return -1; }
}  // namespace gpumem::rec
