// stress.h — randomized operations against one DeviceAllocator: a single-threaded run that checks
// every invariant after every operation, and a multi-threaded run (frees cross threads like autograd)
// that checks them periodically and verifies no two live blocks ever overlap.
#pragma once
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fixture.h"

namespace t {

struct Live {
  uint64_t addr, size;
};

inline size_t random_size(std::mt19937_64& rng) {
  // Log-uniform from 0 B to 32 MiB: mostly small, some large, a few huge and zero-byte requests.
  std::uniform_real_distribution<double> d(0, 25);
  size_t n = size_t(std::exp2(d(rng)));
  return rng() % 64 == 0 ? 0 : n;
}

// One step of the shared script; returns false if the allocator reported an error.
inline void random_step(Fx& x, std::mt19937_64& rng, std::vector<Live>& mine, std::mutex* shared_mu,
                        std::vector<Live>* shared) {
  using namespace gpumem::core;
  const int op = int(rng() % 100);
  const Stream stream = rng() % 3;
  if (op < 45) {
    size_t n = random_size(rng);
    try {
      uint64_t p = reinterpret_cast<uint64_t>(x.a.malloc(n, stream, 1));
      mine.push_back({p, round_size(n)});
    } catch (const OutOfMemory&) {}
  } else if (op < 85 && !mine.empty()) {
    size_t i = rng() % mine.size();
    Live l = mine[i];
    mine[i] = mine.back();
    mine.pop_back();
    if (shared && rng() % 4 == 0) {  // hand it to another thread to free (autograd-style)
      std::lock_guard<std::mutex> g(*shared_mu);
      shared->push_back(l);
    } else {
      if (!x.a.free(reinterpret_cast<void*>(l.addr))) throw t::Failure("free of a live block failed");
    }
  } else if (op < 92 && !mine.empty()) {
    x.a.record_stream(reinterpret_cast<void*>(mine[rng() % mine.size()].addr), 3 + rng() % 2);
  } else if (op < 97) {
    // Streams 3-4 carry record_stream events, 0-2 those of page moves (Note [Page moves]).
    x.sim.complete_events(rng() % 5);
  } else if (op < 99) {
    uint64_t b, a;
    x.a.empty_cache(&b, &a, 0);
  } else if (shared) {
    std::vector<Live> take;
    {
      std::lock_guard<std::mutex> g(*shared_mu);
      take.swap(*shared);
    }
    for (Live l : take)
      if (!x.a.free(reinterpret_cast<void*>(l.addr))) throw t::Failure("cross-thread free failed");
  }
}

inline void check_no_overlap(std::vector<Live> all) {
  std::sort(all.begin(), all.end(), [](const Live& a, const Live& b) { return a.addr < b.addr; });
  for (size_t i = 1; i < all.size(); i++)
    if (all[i - 1].addr + all[i - 1].size > all[i].addr) throw t::Failure("two live blocks overlap");
}

inline void run_single_thread(bool expandable, int ops, uint64_t seed, bool trim = false) {
  Fx x(256 * MiB, expandable, trim);
  std::mt19937_64 rng(seed);
  std::vector<Live> mine;
  for (int i = 0; i < ops; i++) {
    random_step(x, rng, mine, nullptr, nullptr);
    x.inv();
    if (i % 1000 == 0) check_no_overlap(mine);
  }
  for (Live l : mine) x.f(l.addr);
  x.empty();
  CHECK_EQ(x.allocated(), int64_t(0));
  CHECK_EQ(x.reserved(), int64_t(0));
  CHECK_EQ(x.sim.used(0), uint64_t(0));
  CHECK_EQ(x.sim.live_events(), size_t(0));
}

inline void run_threads(bool expandable, int threads, int ops_per_thread, bool trim = false) {
  Fx x(1 * GiB, expandable, trim);
  std::mutex shared_mu;
  std::vector<Live> shared;
  std::vector<std::vector<Live>> lives(threads);
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mu;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      try {
        for (int i = 0; i < ops_per_thread && !failed; i++) {
          random_step(x, rng, lives[t], &shared_mu, &shared);
          if (t == 0 && i % 20000 == 0) {
            std::string e = x.a.check_invariants();
            if (!e.empty()) throw t::Failure(e);
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> g(failure_mu);
        failure = e.what();
        failed = true;
      }
    });
  }
  for (auto& th : ts) th.join();
  if (failed) throw t::Failure(failure);
  std::vector<Live> all = shared;
  for (auto& l : lives) all.insert(all.end(), l.begin(), l.end());
  check_no_overlap(all);
  // The run must have reached the interesting paths, not just the fast one.
  auto s = x.st();
  if (s.num_ooms == 0 || s.num_alloc_retries == 0 || s.num_sync_all_streams == 0 || s.num_device_free == 0)
    throw t::Failure("stress did not exercise OOM/retry/sync/release: ooms " + std::to_string(s.num_ooms) +
                     ", retries " + std::to_string(s.num_alloc_retries));
  CHECK_EQ(x.st().allocation[gpumem::core::kAll].current, int64_t(all.size()));
  for (Live l : all) x.f(l.addr);
  x.empty();
  CHECK_EQ(x.reserved(), int64_t(0));
  CHECK_EQ(x.sim.live_events(), size_t(0));
}

}  // namespace t
