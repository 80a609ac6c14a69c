// fake_sink.cc — the test sink (see fake_sink.h).
#include "fake_sink.h"

#include <atomic>
#include <mutex>

#include "allocator_api.h"

namespace {

class Sink final : public gpumem::core::EventSink {
 public:
  void emit(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes) override {
    fake::Record r{type, device, flags, {}};
    r.payload.insert(r.payload.end(), (const uint8_t*)payload, (const uint8_t*)payload + bytes);
    std::lock_guard<std::mutex> g(mu);
    records.push_back(std::move(r));
  }
  void after_oom(int device) override {
    // Like the recorder: it reads the allocator through core::, which takes the device lock, so this
    // deadlocks if the OOM path still holds it.
    state_segments = gpumem::core::snapshot_segments(device).size();
    states++;
  }
  void set(bool on) { set_wants_events(on); }

  std::mutex mu;
  std::vector<fake::Record> records;
  std::atomic<int> states{0};
  std::atomic<size_t> state_segments{0};
};

Sink& the_sink() {
  static Sink* s = new Sink;
  return *s;
}

}  // namespace

namespace fake {
gpumem::core::EventSink& sink() { return the_sink(); }
void set_recording(bool v) { the_sink().set(v); }
std::vector<Record> take() {
  Sink& s = the_sink();
  std::lock_guard<std::mutex> g(s.mu);
  std::vector<Record> out;
  out.swap(s.records);
  return out;
}
int state_writes() { return the_sink().states; }
size_t last_state_segments() { return the_sink().state_segments; }
}  // namespace fake
