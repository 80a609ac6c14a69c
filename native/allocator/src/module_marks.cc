// module_marks.cc — Note [Module paths from frames] in module_marks.h.
#include "module_marks.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "../../format/gpumem_format.h"
#include "clock.h"
#include "sequencer.h"

namespace gpumem::rec::modules {
namespace {

constexpr uint32_t kNotAModule = 0;  // learned: this object is not a module (string id 0 is no string)

struct Table {
  std::mutex mu;
  std::unordered_map<const void*, uint32_t> path_of;  // self → interned path string id (or kNotAModule)
};
Table& table() {
  static Table* t = new Table();  // leaked: allocations may arrive from atexit
  return *t;
}

std::atomic<Resolver> g_resolve{nullptr};
std::atomic<bool> g_on{false};
pthread_t g_thread;
// The chain whose BEGIN marks are written and whose ENDs are not (path ids, outermost first). Only the
// module thread touches it (on_allocation), and close_all() under the same mutex.
std::mutex g_open_mu;
std::vector<uint32_t> g_open;

void write_mark(uint32_t path, uint32_t kind, uint64_t t) {
  fmt::MarkerRec r{t, path, kind};
  sequencer::record(fmt::REC_MARKER, 0, 0, &r, sizeof r);  // in its place among queued trace entries
}

// The path ids of `chain`; false if some `self` is not in the table yet.
bool lookup(const stacks::ModuleChain& chain, std::vector<uint32_t>* ids, std::vector<int>* unknown) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  ids->clear();
  for (int i = 0; i < chain.n; i++) {
    auto it = t.path_of.find(chain.selves[i]);
    if (it == t.path_of.end()) {
      if (unknown) unknown->push_back(i);
      continue;
    }
    if (it->second != kNotAModule) ids->push_back(it->second);
  }
  return !unknown || unknown->empty();
}

}  // namespace

void enable(Resolver resolve) {
  g_thread = pthread_self();
  g_resolve.store(resolve);
  g_on.store(resolve != nullptr, std::memory_order_release);
}

bool wanted() { return g_on.load(std::memory_order_acquire) && pthread_equal(pthread_self(), g_thread); }

void learn(const void* self, const char* path) {
  const uint32_t id = path && *path ? stacks::intern_string(path) : kNotAModule;
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  t.path_of[self] = id;
}

void forget(const void* self) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  t.path_of.erase(self);
}

namespace {
// The path ids of `chain`, outermost first, asking the resolver for `self`s not in the table yet.
void resolve(const stacks::ModuleChain& chain, std::vector<uint32_t>* ids) {
  thread_local std::vector<int> unknown;
  unknown.clear();
  if (lookup(chain, ids, &unknown)) return;
  Resolver resolve = g_resolve.load();
  if (resolve) {
    resolve(chain.selves, chain.n);  // learn() for each; the GIL is taken inside
    // `self`s the resolver found not to be modules: their code is no forward of a module.
    Table& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    for (int i : unknown) {
      auto it = t.path_of.find(chain.selves[i]);
      if (it != t.path_of.end() && it->second == kNotAModule) {
        t.path_of.erase(it);  // not kept: the address may hold a module later
        stacks::not_a_module_forward(chain.codes[i]);
      }
    }
  }
  lookup(chain, ids, nullptr);
}
}  // namespace

uint32_t innermost_path(const stacks::ModuleChain& chain) {
  if (!chain.read || !wanted()) return 0;
  thread_local std::vector<uint32_t> ids;
  resolve(chain, &ids);
  return ids.empty() ? 0 : ids.back();
}

uint32_t on_allocation(const stacks::ModuleChain& chain) {
  if (!chain.read || !wanted()) return 0;
  thread_local std::vector<uint32_t> ids;
  resolve(chain, &ids);
  const uint32_t innermost = ids.empty() ? 0 : ids.back();
  std::lock_guard<std::mutex> lk(g_open_mu);
  if (ids == g_open) return innermost;
  size_t common = 0;
  while (common < ids.size() && common < g_open.size() && ids[common] == g_open[common]) common++;
  const uint64_t t = clock::now_ns();
  for (size_t i = g_open.size(); i-- > common;) write_mark(g_open[i], fmt::MARK_MODULE_END, t);
  for (size_t i = common; i < ids.size(); i++) write_mark(ids[i], fmt::MARK_MODULE_BEGIN, t);
  g_open = ids;
  return innermost;
}

void close_all() {
  std::lock_guard<std::mutex> lk(g_open_mu);
  if (g_open.empty()) return;
  const uint64_t t = clock::now_ns();
  for (size_t i = g_open.size(); i-- > 0;) write_mark(g_open[i], fmt::MARK_MODULE_END, t);
  g_open.clear();
}

}  // namespace gpumem::rec::modules
