// fake_recorder.cc — implements gpumem::rec for the tests (see fake_recorder.h).
#include "fake_recorder.h"

#include <time.h>

#include <atomic>
#include <mutex>
#include <string>

#include "allocator_api.h"
#include "recorder.h"

namespace {
std::mutex mu;
std::vector<fake::Record> records;
std::atomic<bool> on{false};
thread_local uint32_t t_stack = 0;
thread_local std::string t_error;
std::atomic<int> states{0};
std::atomic<size_t> state_segments{0};
}  // namespace

namespace fake {
void set_recording(bool v) { on = v; }
std::vector<Record> take() {
  std::lock_guard<std::mutex> g(mu);
  std::vector<Record> out;
  out.swap(records);
  return out;
}
void set_stack(uint32_t s) { t_stack = s; }
int state_writes() { return states; }
size_t last_state_segments() { return state_segments; }
}  // namespace fake

namespace gpumem::rec {
uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
bool recording() { return on; }
uint32_t capture_stack() { return t_stack; }
uint32_t thread_number() { return 0; }
void emit(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes) {
  emit2(type, device, flags, payload, bytes, nullptr, 0);
}
void emit2(uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an, const void* b, uint32_t bn) {
  fake::Record r{type, device, flags, {}};
  r.payload.insert(r.payload.end(), (const uint8_t*)a, (const uint8_t*)a + an);
  if (b) r.payload.insert(r.payload.end(), (const uint8_t*)b, (const uint8_t*)b + bn);
  std::lock_guard<std::mutex> g(mu);
  records.push_back(std::move(r));
}
bool configure(const char*, std::string*) { return true; }
void on_init(int) {}
int64_t write_state(int device, uint32_t) {
  // Like the real recorder: it reads the allocator through core::, which takes the device lock, so
  // this deadlocks if the OOM path still holds it.
  state_segments = gpumem::core::snapshot_segments(device).size();
  states++;
  return -1;
}
void set_last_error(const std::string& msg) { t_error = msg; }
const char* last_error() { return t_error.c_str(); }
}  // namespace gpumem::rec
