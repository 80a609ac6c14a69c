// backward_links.cc — Note [Backward on the forward line] and Note [Learned steps] in backward_links.h.
#include "backward_links.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

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
std::atomic<CurrentFn> g_current{nullptr};
std::atomic<int> g_backwards{0};  // open backward() brackets
constexpr uint64_t kUnfiled = ~0ull;
thread_local uint64_t t_filed = kUnfiled;  // the thread's next sequence number at its last filing

std::atomic<int> g_op_callback_on{1};  // as the extension adds it
void switch_op_callback(int on) {
  if (g_op_callback_on.exchange(on) != on)
    if (SwitchFn sw = g_switch.load()) sw(on);
}

// Files sequence numbers [lo, hi) of the calling thread; `link(s)` gives each one's (stack, module), stack 0: none.
template <class LinkOf>
void file_each(uint64_t lo, uint64_t hi, LinkOf link) {
  if (hi - lo > kRing) lo = hi - kRing;
  CountFn thread = g_thread.load(std::memory_order_relaxed);
  Ring* r = thread ? ring_for(thread()) : nullptr;
  if (!r) return;
  for (uint64_t s = lo; s < hi; s++) {
    uint32_t stack, module;
    link(s, &stack, &module);
    if (!stack) continue;
    Link& l = r->links[s % kRing];
    l.seq.store(~0ull, std::memory_order_relaxed);
    l.stack.store(stack, std::memory_order_relaxed);
    l.module.store(module, std::memory_order_relaxed);
    l.seq.store(s, std::memory_order_release);
  }
}

void file(uint64_t lo, uint64_t hi, uint32_t stack, uint32_t module) {
  if (!stack) return;
  file_each(lo, hi, [&](uint64_t, uint32_t* st, uint32_t* mo) { *st = stack, *mo = module; });
}

// ---- Note [Learned steps]: the main thread's state, touched by that thread alone ------------------------------
enum class Mode { kLearn, kKnown, kAlwaysOn };
// What a step's node (by its offset from the step's first sequence number) was filed under, and the stack and module
// of the first allocation after it was made and before the next node (an allocating op's own output, or the next
// allocation after a view: either way, what a replay must meet there).
struct Learned {
  uint32_t stack = 0, module = 0;
  uint32_t next_stack = 0, next_module = 0;
  bool next_seen = false;
};
std::atomic<int> g_main_claimed{0};
thread_local bool t_main = false;
std::atomic<int> g_mode{int(Mode::kLearn)};  // read by any thread's backward bracket
bool g_whole = false;                        // learning since a step's first node
uint64_t g_base = 0;                         // the step's first sequence number
uint64_t g_checked = 0;                      // the sequence numbers below it have met their first allocation
std::vector<Learned> g_learning;             // this step's, by offset from g_base
std::vector<Learned> g_known;                // the step learned last
int g_missed_running = 0;                    // steps with a miss since a step replayed whole
bool g_missed_this_step = false;
std::atomic<uint64_t> g_learned_steps{0}, g_known_steps{0}, g_misses{0};

Mode mode() { return Mode(g_mode.load(std::memory_order_relaxed)); }
void set_mode(Mode m) { g_mode.store(int(m), std::memory_order_relaxed); }

bool main_forward() { return t_main && g_backwards.load(std::memory_order_relaxed) == 0; }

// The learned entry of sequence number `s` (grown as the step goes); null past what a step may keep.
Learned* learning(uint64_t s) {
  if (!g_whole || s < g_base) return nullptr;
  if (s - g_base >= kRing) {  // a step too large to keep: learned no more
    g_whole = false;
    return nullptr;
  }
  if (g_learning.size() <= s - g_base) g_learning.resize(s - g_base + 1);
  return &g_learning[s - g_base];
}

void learn_filing(uint64_t lo, uint64_t hi, uint32_t stack, uint32_t module) {
  for (uint64_t s = lo; s < hi; s++)
    if (Learned* l = learning(s)) l->stack = stack, l->module = module;
}

// A check failed: this allocation's unfiled nodes go under its stack, the callback comes on, and the rest of the step
// is filed exactly (the next step is learned from its start).
void miss() {
  g_misses.fetch_add(1, std::memory_order_relaxed);
  g_missed_this_step = true;
  g_whole = false;
  set_mode(Mode::kLearn);
  switch_op_callback(1);
}

// An allocation of the main thread's forward, its thread's next sequence number `next`: learns or checks the first
// allocation after the step's last node; false when the known step is no longer this one.
bool allocation_met(uint64_t next, uint32_t stack, uint32_t module) {
  if (next <= g_base || !stack) return true;  // no node of this step yet, or no stack to compare
  const uint64_t k = next - 1;
  if (mode() == Mode::kLearn) {
    Learned* l = learning(k);
    if (l && !l->next_seen) l->next_stack = stack, l->next_module = module, l->next_seen = true;
    return true;
  }
  if (mode() != Mode::kKnown || k < g_checked) return true;
  g_checked = k + 1;
  if (k - g_base >= g_known.size()) return false;
  const Learned& l = g_known[k - g_base];
  return l.next_seen && l.next_stack == stack && l.next_module == module;
}

void file_known(uint64_t lo, uint64_t hi) {
  if (lo < g_base || hi - g_base > g_known.size()) return;
  file_each(lo, hi, [&](uint64_t s, uint32_t* st, uint32_t* mo) {
    const Learned& l = g_known[s - g_base];
    *st = l.stack, *mo = l.module;
  });
}

// The calling thread's next sequence number in `hi`; false unconnected. A thread's first look takes it for the main
// one when no thread is yet (until a backward() says otherwise): its step starts there.
bool look(uint64_t* hi) {
  CountFn next = g_next.load(std::memory_order_relaxed);
  if (!next) return false;
  *hi = next();
  if (t_filed == kUnfiled) {
    int none = 0;
    if (g_main_claimed.compare_exchange_strong(none, 1)) {
      t_main = true;
      g_base = g_checked = *hi;
      g_whole = true;
    }
  }
  return true;
}

// The nodes made since the thread's last filing, [lo, hi); false when none (or on its first look: its earlier nodes
// are no recorded op's).
bool unfiled(uint64_t hi, uint64_t* lo) {
  if (t_filed == kUnfiled || hi <= t_filed) {
    t_filed = hi;
    return false;
  }
  *lo = t_filed;
  t_filed = hi;
  return true;
}

// The main thread's step ends where its backward() begins (`next`: its next sequence number then): a step learned
// whole becomes the known one; a known one files what no allocation filed, and is checked by its node count.
void step_ends(uint64_t next) {
  if (mode() == Mode::kKnown) {
    if (t_filed != kUnfiled && t_filed < next) file_known(t_filed, next);  // a last view before the loss, say
    if (next < g_base || next - g_base != g_known.size()) {
      g_misses.fetch_add(1, std::memory_order_relaxed);
      g_missed_this_step = true;
      set_mode(Mode::kLearn);
    } else {
      g_known_steps.fetch_add(1, std::memory_order_relaxed);
      if (!g_missed_this_step) g_missed_running = 0;  // a step replayed whole
    }
  } else if (mode() == Mode::kLearn && g_whole && next > g_base && next - g_base <= kRing) {  // a step with nodes
    g_learning.resize(next - g_base);  // nodes no allocation or op end filed stay unlinked, in both
    g_known.swap(g_learning);
    g_learned_steps.fetch_add(1, std::memory_order_relaxed);
    set_mode(Mode::kKnown);
  }
  if (g_missed_this_step && ++g_missed_running >= kGiveUp) set_mode(Mode::kAlwaysOn);
  g_missed_this_step = false;
  t_filed = next;  // what backward's own forward makes (create_graph) files itself
}

}  // namespace

void connect(CountFn next_sequence, CountFn thread_id, SwitchFn op_callback, CurrentFn current_node) {
  g_thread.store(thread_id);
  g_switch.store(op_callback);
  g_current.store(current_node);
  g_next.store(next_sequence);
  stacks::set_current_node(current_node ? &current : nullptr);
}

void on_stack(uint32_t stack, uint32_t module) {
  uint64_t hi;
  if (!look(&hi)) return;
  const bool main = main_forward();
  if (main && !allocation_met(hi, stack, module)) miss();
  uint64_t lo;
  if (!unfiled(hi, &lo)) return;
  if (main && mode() == Mode::kKnown) return file_known(lo, hi);
  if (main && mode() == Mode::kLearn) learn_filing(lo, hi, stack, module);
  file(lo, hi, stack, module);
}

void op_end() {
  uint64_t hi, lo;
  if (!look(&hi) || !unfiled(hi, &lo)) return;
  uint32_t stack, module = 0;
  if (modules::wanted()) {
    stacks::ModuleChain chain;
    stack = stacks::capture(&chain);
    module = modules::innermost_path(chain);
  } else {
    stack = stacks::capture();
  }
  if (main_forward() && mode() == Mode::kLearn) learn_filing(lo, hi, stack, module);
  file(lo, hi, stack, module);
}

bool current(uint32_t* forward_stack, uint32_t* module_path, uint32_t* name) {
  CurrentFn fn = g_current.load(std::memory_order_relaxed);
  uint64_t seq = 0, thread = 0;
  const char* node_name = nullptr;
  if (!fn || !fn(&seq, &thread, &node_name)) return false;
  // A node's link is the same through its evaluation: the thread keeps the last one it found.
  thread_local uint64_t last_seq = kUnfiled, last_thread = 0;
  thread_local uint32_t last_stack = 0, last_module = 0, last_name = 0;
  const bool same = seq == last_seq && thread == last_thread;
  if (!same || !last_stack) {
    uint32_t stack = 0, module = 0;
    if (seq != kUnfiled)
      if (Ring* r = find_ring(thread)) {
        const Link& l = r->links[seq % kRing];
        if (l.seq.load(std::memory_order_acquire) == seq) {
          stack = l.stack.load(std::memory_order_relaxed);
          module = l.module.load(std::memory_order_relaxed);
          if (l.seq.load(std::memory_order_acquire) != seq) stack = module = 0;  // overwritten meanwhile
        }
      }
    if (!same && seq != kUnfiled) {
      g_run.fetch_add(1, std::memory_order_relaxed);
      if (stack) g_linked.fetch_add(1, std::memory_order_relaxed);
    }
    // Node names are few, and the extension keeps each one's string: this thread keeps their ids by address.
    thread_local std::unordered_map<const char*, uint32_t> names;
    uint32_t name_id = 0;
    if (node_name) {
      auto it = names.find(node_name);
      name_id =
          it != names.end() ? it->second : names.emplace(node_name, stacks::intern_string(node_name)).first->second;
    }
    last_seq = seq, last_thread = thread, last_stack = stack, last_module = module, last_name = name_id;
  }
  *forward_stack = last_stack, *module_path = last_module, *name = last_name;
  return true;
}

void backward_begins() {
  if (g_backwards.load() == 0) {
    if (t_main) {
      if (CountFn next = g_next.load()) step_ends(next());
    } else if (g_main_claimed.load()) {
      // The main thread (the first to look) is not the one calling backward(): no step is learned, the callback
      // stays on outside backward.
      set_mode(Mode::kAlwaysOn);
    }
  }
  if (g_backwards.fetch_add(1) == 0) switch_op_callback(0);
}

void backward_ends() {
  int was = g_backwards.load();
  while (was > 0 && !g_backwards.compare_exchange_weak(was, was - 1)) {}
  if (was != 1) return;
  if (t_main)
    if (CountFn next = g_next.load()) {  // the next step starts here
      g_base = g_checked = t_filed = next();
      g_learning.clear();
      g_whole = mode() == Mode::kLearn;
    }
  if (mode() != Mode::kKnown) switch_op_callback(1);
}

std::string json() {
  static const char* const kModes[] = {"learn", "known", "always_on"};
  return "{\"nodes\":" + std::to_string(g_run.load()) + ",\"nodes_linked\":" + std::to_string(g_linked.load()) +
         ",\"mode\":\"" + kModes[g_mode.load()] + "\",\"steps_learned\":" + std::to_string(g_learned_steps.load()) +
         ",\"steps_known\":" + std::to_string(g_known_steps.load()) + ",\"misses\":" + std::to_string(g_misses.load()) +
         "}";
}

}  // namespace gpumem::rec::links
