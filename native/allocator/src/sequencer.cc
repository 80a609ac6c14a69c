// sequencer.cc — Note [Deferred observation] in sequencer.h.
#include "sequencer.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "writer.h"

namespace gpumem::rec::sequencer {
namespace {

struct Item {
  uint8_t kind;  // kEvent, kRecord or kFreePair
  uint8_t type;  // the record's
  uint8_t device;
  uint8_t pad;
  uint16_t flags;
  uint16_t bytes;
  union {
    Event ev;
    unsigned char payload[kMaxPayload];
  };
};
constexpr uint8_t kEvent = 0, kRecord = 1, kFreePair = 2;  // kFreePair: Note [Folded frees]

// The producers' side and the drainer's side on cache lines of their own: an allocating thread's push then touches
// only lines no other thread writes between two drains.
struct alignas(64) State {
  std::mutex mu;  // in, and every change of `on`: held for a push or a swap only
  std::vector<Item> in;
  std::atomic<bool> on{false};        // the thread runs; read without the lock where a stale answer is harmless
  std::atomic<bool> started{false};   // apply is set
  std::atomic<uint32_t> wake{kWake};  // Note [Probe switches]: read by every push, so on the producers' line
  alignas(64) std::condition_variable cv;
  alignas(64) std::mutex drain_mu;  // one drainer at a time, so batches are applied in the order they were queued
  std::vector<Item> out;
  Apply apply = nullptr;
  std::thread thread;
  uint64_t events = 0, records = 0, drains = 0, max_depth = 0, folded = 0;  // under drain_mu
  std::atomic<uint64_t> full_drains{0};
  std::atomic<uint32_t> period_ms{5};  // Note [Probe switches]
};
State& S() {
  static State* s = new State();  // never destroyed: trace entries may come from atexit
  return *s;
}

void write_now(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes) {
  writer::append(type, device, flags, payload, bytes, nullptr, 0, writer::pinned_type(type));
}

void apply_one(State& s, const Item& it) {
  if (it.kind == kEvent) {
    s.events++;
    s.apply(it.ev);
    return;
  }
  if (it.kind == kFreePair) {  // Note [Folded frees]: the pair as it came, each with its own time
    Event e = it.ev;
    e.action = kFreeRequested;
    e.stack = 0;
    s.apply(e);
    e.action = kFreeCompleted;
    e.t_ns = it.ev.t_ns + it.ev.stack;
    s.apply(e);
    s.events += 2;
    s.folded++;
    return;
  }
  s.records++;
  write_now(it.type, it.device, it.flags, it.payload, it.bytes);
}

// Under s.mu: folds a FREE_COMPLETED into the queue's last item when that is the same thread's FREE_REQUESTED of the
// same block (Note [Folded frees]); false if it is anything else.
bool fold_locked(State& s, const Event& e) {
  if (e.action != kFreeCompleted || s.in.empty()) return false;
  Item& back = s.in.back();
  const Event& r = back.ev;
  if (back.kind != kEvent || r.action != kFreeRequested || r.stack != 0 || r.thread != e.thread ||
      r.device != e.device || r.addr != e.addr || r.size != e.size || r.stream != e.stream || e.t_ns < r.t_ns ||
      e.t_ns - r.t_ns > UINT32_MAX)
    return false;
  back.kind = kFreePair;
  back.ev.stack = uint32_t(e.t_ns - r.t_ns);
  return true;
}

// Queues `it`; false when no sequencer runs. A queue at kMaxItems is drained by the thread that filled it.
bool enqueue(const Item& it) {
  State& s = S();
  size_t n;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.on.load(std::memory_order_relaxed)) return false;
    if (it.kind == kEvent && fold_locked(s, it.ev)) return true;
    s.in.push_back(it);
    n = s.in.size();
  }
  if (n == s.wake.load(std::memory_order_relaxed)) s.cv.notify_one();
  if (n >= kMaxItems) {
    s.full_drains.fetch_add(1, std::memory_order_relaxed);
    drain();
  }
  return true;
}

void run() {
  // Signals go to the workload's threads, never to this one.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  // Note [Thread names]: every thread of ours is named "gpumem-<job>" (observe, writer, sampler, control). An
  // unnamed thread inherits the process's name ("python3"): `top -H`, the benchmarks' thread rows and a profile by
  // thread (test/gpu/probes/perf_host.sh) then mix its work into the workload's main thread.
  pthread_setname_np(pthread_self(), "gpumem-observe");
  State& s = S();
  std::unique_lock<std::mutex> lk(s.mu);
  while (s.on.load()) {
    s.cv.wait_for(lk, std::chrono::milliseconds(s.period_ms.load(std::memory_order_relaxed)),
                  [&] { return !s.on.load() || s.in.size() >= s.wake.load(std::memory_order_relaxed); });
    if (!s.on.load()) break;
    lk.unlock();
    drain();
    lk.lock();
  }
}

}  // namespace

bool start(Apply apply) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.on.load() || s.thread.joinable()) return false;
  s.apply = apply;
  s.started.store(true, std::memory_order_release);
  s.in.reserve(kWake * 2);
  s.out.reserve(kWake * 2);
  s.on.store(true);
  s.thread = std::thread(run);
  return true;
}

bool running() { return S().on.load(); }

void set_cadence(uint32_t period_ms, uint32_t wake_items) {
  State& s = S();
  if (period_ms) s.period_ms.store(period_ms);
  if (wake_items) s.wake.store(std::min<uint32_t>(wake_items, kMaxItems));
}

bool push(const Event& e) {
  Item it;  // no zeroing: an event fills all it uses
  it.kind = kEvent;
  it.ev = e;
  return enqueue(it);
}

void record(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes) {
  // The lens mode has no queue (enqueue() would say so too, under a lock).
  if (S().on.load(std::memory_order_relaxed) && bytes <= kMaxPayload) {
    Item it{};
    it.kind = kRecord;
    it.type = type;
    it.device = device;
    it.flags = flags;
    it.bytes = uint16_t(bytes);
    std::memcpy(it.payload, payload, bytes);
    if (enqueue(it)) return;
  }
  drain();  // a record too big for the queue still comes after what is queued (nothing, with no sequencer)
  write_now(type, device, flags, payload, bytes);
}

void drain() {
  State& s = S();
  if (!s.started.load(std::memory_order_acquire)) return;  // never started: nothing was ever queued
  std::lock_guard<std::mutex> dl(s.drain_mu);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.in.empty()) return;
    s.out.swap(s.in);
  }
  s.max_depth = std::max<uint64_t>(s.max_depth, s.out.size());
  for (const Item& it : s.out) apply_one(s, it);
  s.out.clear();
  s.drains++;
}

void stop() {
  State& s = S();
  std::thread t;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.on.store(false);
    t = std::move(s.thread);
  }
  s.cv.notify_all();
  if (t.joinable()) t.join();  // apply() never stops the sequencer, so this is never its own thread
  drain();                     // whatever was queued before `running` fell; nothing is queued after
}

void forget_after_fork() {
  State& s = S();
  // Only the forking thread exists here: the parent's thread, and any lock another thread held at the fork, are
  // gone. So everything is made anew over the old objects, which are left as they were (a joinable std::thread
  // must not be destroyed, a held mutex not used, a vector mid-push not touched).
  new (&s.mu) std::mutex();
  new (&s.drain_mu) std::mutex();
  new (&s.cv) std::condition_variable();
  new (&s.thread) std::thread();
  new (&s.in) std::vector<Item>();
  new (&s.out) std::vector<Item>();
  s.on.store(false);
}

Counters counters() {
  State& s = S();
  std::lock_guard<std::mutex> dl(s.drain_mu);
  return Counters{s.events, s.records, s.drains, s.full_drains.load(), s.max_depth, s.folded};
}

}  // namespace gpumem::rec::sequencer
