// self_time.h — where the recording's host time goes, measured inside the workload (the probe).
//
// Note [Self time]: step time under the tool on the lent H100 host varies by more than the 1 % being sought
// (a ResNet-50 step is near host-bound there, and the host's speed differs by ±15 % between processes of the same
// configuration), so the cost of each recording source is also measured where it is spent: the TSC cycles inside
// each part, per thread, summed. Off unless GPUMEM_SELF_TIME=1 (then two rdtsc per part per event, ≈ 15 ns);
// read through gpumem_stack_info ("self_time": ns and calls per part). A probe, not a feature: nothing reads it
// but the benchmarks (test/gpu/bench_allocator.py prints it).
#pragma once
#if (defined(__x86_64__) || defined(__i386__)) && !defined(GPUMEM_NO_TSC)
#include <x86intrin.h>
#endif

#include <cstdint>
#include <string>

#include "clock.h"

namespace gpumem::rec::self_time {

// The TSC where there is one (x86); elsewhere (aarch64: Grace Hopper) the monotonic clock, at 1 tick per ns
// (GPUMEM_NO_TSC builds that path on x86 too, to check it compiles).
inline uint64_t ticks() {
#if (defined(__x86_64__) || defined(__i386__)) && !defined(GPUMEM_NO_TSC)
  return __rdtsc();
#else
  return clock::now_ns();
#endif
}

enum Part : int {
  kMalloc,   // gpumem_malloc, all of it (stack, device lock, core, records)
  kFree,     // gpumem_free, all of it
  kStack,    // the Python stack (GIL-free walk and cache, or the GIL walk)
  kModules,  // the module chain's marks (Note [Module paths from frames])
  kEmit,     // one record to the writer and the snapshot ring
  kObserve,  // observer: one PyTorch trace entry to records (under PyTorch's allocator lock)
  kGather,   // observer: PyTorch's context recorder calling us (the stack, before its lock)
  kApply,    // observer: one queued trace entry to records, on the sequencer's thread (sequencer.h)
  kParts
};

bool on();
void add(Part p, uint64_t cycles);
std::string json();  // {"malloc": {"ns": …, "calls": …}, …}

class Scope {
 public:
  explicit Scope(Part p) : p_(p), t0_(on() ? ticks() : 0) {}
  ~Scope() {
    if (t0_) add(p_, ticks() - t0_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Part p_;
  uint64_t t0_;
};

}  // namespace gpumem::rec::self_time
