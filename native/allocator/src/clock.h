// clock.h — the stamps every record carries: the monotonic clock and a small per-thread number. A leaf
// shared by the core and the recorder, so that both stamp records with the same clock.
#pragma once
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace gpumem::clock {

// CLOCK_MONOTONIC in ns (FORMAT.md: every t_ns).
inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// CLOCK_REALTIME in ns (the header's wall-clock anchor).
inline uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// 0 for the process's main thread, 1, 2, … for others in order of their first record.
inline uint32_t thread_number() {
  static std::atomic<uint32_t> next{1};
  thread_local uint32_t n = pid_t(::syscall(SYS_gettid)) == ::getpid() ? 0u : next.fetch_add(1);
  return n;
}

}  // namespace gpumem::clock
