// self_time.h — where the recording's host time goes, measured inside the workload (issue 26's probe).
//
// Note [Self time]: step time under the tool on the lent H100 host varies by more than the 1 % being sought
// (a ResNet-50 step is near host-bound there, and the host's speed differs by ±15 % between processes of the same
// configuration), so the cost of each recording source is also measured where it is spent: the TSC cycles inside
// each part, per thread, summed. Off unless GPUMEM_SELF_TIME=1 (then two rdtsc per part per event, ≈ 15 ns);
// read through gpumem_stack_info ("self_time": ns and calls per part). A probe, not a feature: nothing reads it
// but the benchmarks (test/gpu/bench_allocator.py prints it).
#pragma once
#include <x86intrin.h>

#include <cstdint>
#include <string>

namespace gpumem::rec::self_time {

enum Part : int {
  kMalloc,   // gpumem_malloc, all of it (stack, device lock, core, records)
  kFree,     // gpumem_free, all of it
  kStack,    // the Python stack (GIL-free walk and cache, or the GIL walk)
  kModules,  // the module chain's marks (Note [Module paths from frames])
  kEmit,     // one record to the writer and the snapshot ring
  kObserve,  // observer: one PyTorch trace entry to records (under PyTorch's allocator lock)
  kGather,   // observer: PyTorch's context recorder calling us (the stack, before its lock)
  kParts
};

bool on();
void add(Part p, uint64_t cycles);
std::string json();  // {"malloc": {"ns": …, "calls": …}, …}

class Scope {
 public:
  explicit Scope(Part p) : p_(p), t0_(on() ? __rdtsc() : 0) {}
  ~Scope() {
    if (t0_) add(p_, __rdtsc() - t0_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Part p_;
  uint64_t t0_;
};

}  // namespace gpumem::rec::self_time
