// backward_links.cc — Note [Backward on the forward line] in backward_links.h.
#include "backward_links.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "module_marks.h"
#include "stack_capture.h"

namespace gpumem::rec::links {
namespace {

// One sequence number's link. A reader checks `seq` before and after reading the ids: the ring may be overwriting
// that slot for a number kRing later.
struct Link {
  std::atomic<uint64_t> seq{~0ull};
  std::atomic<uint32_t> stack{0}, module{0};
};

struct Ring {
  std::atomic<uint64_t> thread{0};
  std::unique_ptr<Link[]> links;
};
constexpr int kMaxForwardThreads = 8;  // more forward threads than this go unlinked
Ring g_rings[kMaxForwardThreads];
std::atomic<int> g_nrings{0};
std::mutex g_rings_mu;  // adding a ring only

std::atomic<uint64_t> g_run{0}, g_linked{0};

Ring* find_ring(uint64_t thread) {
  const int n = g_nrings.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (g_rings[i].thread.load(std::memory_order_relaxed) == thread) return &g_rings[i];
  return nullptr;
}

Ring* ring_for(uint64_t thread) {
  if (Ring* r = find_ring(thread)) return r;
  std::lock_guard<std::mutex> lk(g_rings_mu);
  if (Ring* r = find_ring(thread)) return r;
  const int n = g_nrings.load(std::memory_order_relaxed);
  if (n == kMaxForwardThreads) return nullptr;
  g_rings[n].links.reset(new Link[kRing]);
  g_rings[n].thread.store(thread, std::memory_order_relaxed);
  g_nrings.store(n + 1, std::memory_order_release);
  return &g_rings[n];
}

std::atomic<CountFn> g_next{nullptr}, g_thread{nullptr};
std::atomic<SwitchFn> g_switch{nullptr};
std::atomic<int> g_backwards{0};  // open backward() brackets
constexpr uint64_t kUnfiled = ~0ull;
thread_local uint64_t t_filed = kUnfiled;  // the thread's next sequence number at its last filing

void file(uint64_t lo, uint64_t hi, uint32_t stack, uint32_t module) {
  if (hi - lo > kRing) lo = hi - kRing;
  CountFn thread = g_thread.load(std::memory_order_relaxed);
  Ring* r = thread ? ring_for(thread()) : nullptr;
  if (!r || !stack) return;
  for (uint64_t s = lo; s < hi; s++) {
    Link& l = r->links[s % kRing];
    l.seq.store(~0ull, std::memory_order_relaxed);
    l.stack.store(stack, std::memory_order_relaxed);
    l.module.store(module, std::memory_order_relaxed);
    l.seq.store(s, std::memory_order_release);
  }
}

// The nodes made since the last filing, [lo, hi); false when none (or the thread's first look: its earlier nodes
// are no recorded op's).
bool unfiled(uint64_t* lo, uint64_t* hi) {
  CountFn next = g_next.load(std::memory_order_relaxed);
  if (!next) return false;
  *hi = next();
  if (t_filed == kUnfiled || *hi <= t_filed) {
    t_filed = *hi;
    return false;
  }
  *lo = t_filed;
  t_filed = *hi;
  return true;
}

}  // namespace

void connect(CountFn next_sequence, CountFn thread_id, SwitchFn op_callback) {
  g_thread.store(thread_id);
  g_switch.store(op_callback);
  g_next.store(next_sequence);
}

void on_stack(uint32_t stack, uint32_t module) {
  uint64_t lo, hi;
  if (unfiled(&lo, &hi)) file(lo, hi, stack, module);
}

void op_end() {
  uint64_t lo, hi;
  if (!unfiled(&lo, &hi)) return;
  uint32_t stack, module = 0;
  if (modules::wanted()) {
    stacks::ModuleChain chain;
    stack = stacks::capture(&chain);
    module = modules::innermost_path(chain);
  } else {
    stack = stacks::capture();
  }
  file(lo, hi, stack, module);
}

void backward_begins() {
  if (g_backwards.fetch_add(1) == 0)
    if (SwitchFn sw = g_switch.load()) sw(0);
}

void backward_ends() {
  int was = g_backwards.load();
  while (was > 0 && !g_backwards.compare_exchange_weak(was, was - 1)) {}
  if (was == 1)
    if (SwitchFn sw = g_switch.load()) sw(1);
}

void node_begin(uint64_t forward_thread, int64_t seq, const char* name) {
  uint32_t stack = 0, module = 0;
  if (seq >= 0) {
    g_run.fetch_add(1, std::memory_order_relaxed);
    if (Ring* r = find_ring(forward_thread)) {
      const Link& l = r->links[uint64_t(seq) % kRing];
      if (l.seq.load(std::memory_order_acquire) == uint64_t(seq)) {
        stack = l.stack.load(std::memory_order_relaxed);
        module = l.module.load(std::memory_order_relaxed);
        if (l.seq.load(std::memory_order_acquire) != uint64_t(seq)) stack = module = 0;  // overwritten meanwhile
      }
    }
    if (stack) g_linked.fetch_add(1, std::memory_order_relaxed);
  }
  // Node names are few; this thread keeps their ids.
  thread_local std::unordered_map<std::string, uint32_t> names;
  uint32_t name_id = 0;
  if (name) {
    auto it = names.find(name);
    name_id = it != names.end() ? it->second : names.emplace(name, stacks::intern_string(name)).first->second;
  }
  stacks::node_begin(stack, module, name_id);
}

void node_end() { stacks::node_end(); }

uint64_t nodes_run() { return g_run.load(); }
uint64_t nodes_linked() { return g_linked.load(); }

}  // namespace gpumem::rec::links
