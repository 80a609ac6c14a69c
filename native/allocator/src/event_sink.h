// event_sink.h — where the caching core sends what it did. The core knows nothing of recording: it
// is given an EventSink (the null sink unless one is attached) and emits capture records to it, the way
// PyTorch's allocator calls the trace trackers attached with attachAllocatorTraceTracker. The recorder
// is one sink (recorder.cc); tests attach their own.
//
// Note [Sink calls under the device lock]: emit() is called WITH the device lock held (that is what
// keeps a device's records in allocator order), so a sink must not take the GIL, block on I/O or call
// back into the allocator there. after_oom() is called WITHOUT it (the OOM path releases the lock
// first), so a sink may read the allocator's state there. Note [Lock hierarchy] in README.md.
#pragma once
#include <atomic>
#include <cstdint>

namespace gpumem::core {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Whether the sink wants records at all: one relaxed load, checked before a record is built, so an
  // idle sink costs the hot path nothing else.
  bool wants_events() const { return wants_.load(std::memory_order_relaxed); }
  // One capture record (RecordHeader fields + payload, native/format/gpumem_format.h).
  virtual void emit(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes) = 0;
  // After an OOM of `device`, its REC_OOM already emitted and the device lock released; called whether
  // or not the sink wants events (a sink may keep states apart from its event stream).
  virtual void after_oom(int device) {}

 protected:
  void set_wants_events(bool on) { wants_.store(on, std::memory_order_relaxed); }

 private:
  std::atomic<bool> wants_{false};
};

// Wants nothing, drops everything: the core's sink until another is attached.
inline EventSink& null_sink() {
  struct Null final : EventSink {
    void emit(uint8_t, uint8_t, uint16_t, const void*, uint32_t) override {}
  };
  static Null* n = new Null;  // never destroyed: frees may arrive from atexit handlers
  return *n;
}

}  // namespace gpumem::core
