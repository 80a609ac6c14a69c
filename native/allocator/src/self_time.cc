// self_time.cc — Note [Self time] in self_time.h.
#include "self_time.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "../../format/json.h"
#include "clock.h"

namespace gpumem::rec::self_time {
namespace {

const bool g_on = [] {
  const char* e = std::getenv("GPUMEM_SELF_TIME");
  return e && std::strcmp(e, "1") == 0;
}();

// Per thread, so that the hot path touches no shared cache line; read (racily, whole words) by json().
struct Counters {
  std::atomic<uint64_t> cycles[kParts];
  std::atomic<uint64_t> calls[kParts];
};
std::mutex g_mu;
std::vector<Counters*>& all() {
  static auto* v = new std::vector<Counters*>();  // leaked: threads end in any order
  return *v;
}
Counters& mine() {
  thread_local Counters* c = [] {
    auto* n = new Counters();  // leaked with its thread's figures, which outlive it
    for (int i = 0; i < kParts; i++) n->cycles[i] = 0, n->calls[i] = 0;
    std::lock_guard<std::mutex> lk(g_mu);
    all().push_back(n);
    return n;
  }();
  return *c;
}

// TSC cycles per ns, measured once against the monotonic clock (constant_tsc on the hosts we run on).
double cycles_per_ns() {
  static const double r = [] {
    const uint64_t n0 = clock::now_ns(), c0 = ticks();
    timespec ts{0, 20'000'000};
    nanosleep(&ts, nullptr);
    const uint64_t n1 = clock::now_ns(), c1 = ticks();
    return n1 > n0 ? double(c1 - c0) / double(n1 - n0) : 1.0;
  }();
  return r;
}

const char* const kNames[kParts] = {"malloc", "free", "stack", "modules", "emit", "observe", "gather", "apply"};

}  // namespace

bool on() { return g_on; }

void add(Part p, uint64_t cycles) {
  Counters& c = mine();
  c.cycles[p].store(c.cycles[p].load(std::memory_order_relaxed) + cycles, std::memory_order_relaxed);
  c.calls[p].store(c.calls[p].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

std::string json() {
  uint64_t cycles[kParts] = {}, calls[kParts] = {};
  {
    std::lock_guard<std::mutex> lk(g_mu);
    for (Counters* c : all())
      for (int i = 0; i < kParts; i++) {
        cycles[i] += c->cycles[i].load(std::memory_order_relaxed);
        calls[i] += c->calls[i].load(std::memory_order_relaxed);
      }
  }
  json::Writer j;
  j.open('{').kvb("on", g_on);
  if (g_on) {
    const double r = cycles_per_ns();
    for (int i = 0; i < kParts; i++) {
      j.key(kNames[i]).open('{').kvu("ns", uint64_t(double(cycles[i]) / r)).kvu("calls", calls[i]);
      j.close('}');
    }
  }
  return j.close('}').s;
}

}  // namespace gpumem::rec::self_time
