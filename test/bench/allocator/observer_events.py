#!/usr/bin/env python3
"""CPU benchmark of the PyTorch-allocator mode's per-event path (no GPU, no torch): gpumem_observe_event fed
alloc / free_requested / free_completed for 700 rotating addresses, as PyTorch's trace tracker calls it, with a
capture file (what `gpumem run` in that mode does), through the inline entry and the tracker's queued one. Not a
test: it prints ns per event on the calling thread and until everything is written, the median of rounds, each
round a fresh process per entry.

    make -C native/allocator && python3 test/bench/allocator/observer_events.py [--rounds 5] [--work 16] [--so PATH]

On the GPU host the same path is measured inside real runs by GPUMEM_SELF_TIME=1 ("observe" in
test/gpu/bench_allocator.py's JSON); this one is for trying a change to it on any machine.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
DRIVER = r"""
#include <dlfcn.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
typedef int (*Cfg)(const char*);
typedef int (*Start)(void*, void*);
typedef int (*Ev)(int, int, uint64_t, uint64_t, uint64_t, uint32_t, uint64_t);
static int nop(int, int, uint64_t, uint64_t, uint64_t, uint32_t, uint64_t) { return 1; }
// The workload's own work between two trace entries, which leaves our data cold: `lines` random cache lines of a
// 64 MiB array, read and written.
static std::vector<uint64_t> g_big(8u << 20);
static uint64_t g_rng = 88172645463325252ull;
static inline void work(int lines) {
  for (int k = 0; k < lines; k++) {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    g_big[(g_rng % (g_big.size() / 8)) * 8] += 1;
  }
}
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
  auto cfg = (Cfg)dlsym(h, "gpumem_configure");
  auto start = (Start)dlsym(h, "gpumem_observe_start");
  const bool none = std::strcmp(argv[3], "none") == 0;
  auto ev = none ? &nop : (Ev)dlsym(h, argv[3]);
  const int lines = argc > 4 ? std::atoi(argv[4]) : 0;
  if (cfg(argv[2]) != 0) return 2;
  start(nullptr, nullptr);
  const int n = lines ? 300000 : 2000000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) {
    const uint64_t a = 0x7f0000000000ull + uint64_t(i % 700) * 4096, size = 2048 + uint64_t(i % 7) * 512;
    ev(0, 0, a, size, 0, 1, 0);  // ALLOC
    work(lines);
    ev(0, 1, a, size, 0, 0, 0);  // FREE_REQUESTED
    ev(0, 2, a, size, 0, 0, 0);  // FREE_COMPLETED
    work(lines);
  }
  auto t1 = std::chrono::steady_clock::now();
  typedef void (*Shutdown)(int);
  ((Shutdown)dlsym(h, "gpumem_shutdown"))(0);  // the queued entries applied and written
  auto t2 = std::chrono::steady_clock::now();
  std::printf("%.1f %.1f\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / (3.0 * n),
              std::chrono::duration<double, std::nano>(t2 - t0).count() / (3.0 * n));
  return 0;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", default=os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--entries", nargs="+", default=["gpumem_observe_event", "gpumem_observe_event_queued"],
                    help="the C entry points fed, interleaved per round: the inline one and the tracker's queued one "
                         "(Note [Deferred observation] in native/allocator/src/sequencer.h)")
    ap.add_argument("--work", type=int, default=0,
                    help="random cache lines of a 64 MiB array touched between entries, as the workload's own work "
                         "leaves our data cold (its time, measured alone in the same round, is subtracted)")
    args = ap.parse_args()
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    with tempfile.TemporaryDirectory(prefix="gpumem-observer-bench-") as tmp:
        exe = os.path.join(tmp, "driver")
        with open(exe + ".cc", "w") as f:
            f.write(DRIVER)
        subprocess.run([cxx, "-O2", "-o", exe, exe + ".cc", "-ldl"], check=True)
        entries = (["none"] if args.work else []) + args.entries
        ns = {e: [] for e in entries}
        total = {e: [] for e in entries}
        for r in range(args.rounds):
            for entry in entries:
                capture = os.path.join(tmp, "c%d.gpumem" % r)
                cfg = '{"capture_path": "%s", "trace_entries": 0, "stacks": true, "sample_interval_ms": 0}' % capture
                out = subprocess.run([exe, args.so, cfg, entry, str(args.work)], capture_output=True, text=True,
                                     check=True).stdout
                caller, whole = (float(x) for x in re.findall(r"[\d.]+", out)[-2:])
                if entry != "none" and args.work:
                    caller -= ns["none"][-1]
                    whole -= total["none"][-1]
                ns[entry].append(caller)
                total[entry].append(whole)
                os.unlink(capture)
        # caller: ns per event on the calling thread (what the allocating thread pays); until written: through the
        # shutdown, which applies whatever is still queued (the whole work, whichever thread did it).
        for entry in args.entries:  # "none": the work alone, already subtracted
            print("%s: ns per event on the caller: median %.1f (rounds %s); until written: median %.1f" % (
                entry, statistics.median(ns[entry]), " ".join("%.1f" % x for x in ns[entry]),
                statistics.median(total[entry])))

if __name__ == "__main__":
    main()
