#!/usr/bin/env python3
"""CPU benchmark of the PyTorch-allocator mode's per-event path (no GPU, no torch): gpumem_observe_event fed
alloc / free_requested / free_completed for 700 rotating addresses, as PyTorch's trace tracker calls it, with a
capture file (what `gpumem run` in that mode does). Not a test: it prints ns per event, the median of rounds,
each round a fresh process.

    make -C native/allocator && python3 test/bench/allocator/observer_events.py [--rounds 5] [--so PATH]

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
typedef int (*Cfg)(const char*);
typedef int (*Start)(void*, void*);
typedef int (*Ev)(int, int, uint64_t, uint64_t, uint64_t, uint32_t, uint64_t);
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
  auto cfg = (Cfg)dlsym(h, "gpumem_configure");
  auto start = (Start)dlsym(h, "gpumem_observe_start");
  auto ev = (Ev)dlsym(h, "gpumem_observe_event");
  if (cfg(argv[2]) != 0) return 2;
  start(nullptr, nullptr);
  const int n = 2000000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) {
    const uint64_t a = 0x7f0000000000ull + uint64_t(i % 700) * 4096, size = 2048 + uint64_t(i % 7) * 512;
    ev(0, 0, a, size, 0, 1, 0);  // ALLOC
    ev(0, 1, a, size, 0, 0, 0);  // FREE_REQUESTED
    ev(0, 2, a, size, 0, 0, 0);  // FREE_COMPLETED
  }
  auto t1 = std::chrono::steady_clock::now();
  std::printf("%.1f\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / (3.0 * n));
  return 0;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", default=os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    with tempfile.TemporaryDirectory(prefix="gpumem-observer-bench-") as tmp:
        exe = os.path.join(tmp, "driver")
        with open(exe + ".cc", "w") as f:
            f.write(DRIVER)
        subprocess.run([cxx, "-O2", "-o", exe, exe + ".cc", "-ldl"], check=True)
        ns = []
        for r in range(args.rounds):
            capture = os.path.join(tmp, "c%d.gpumem" % r)
            cfg = '{"capture_path": "%s", "trace_entries": 0, "stacks": true, "sample_interval_ms": 0}' % capture
            out = subprocess.run([exe, args.so, cfg], capture_output=True, text=True, check=True).stdout
            ns.append(float(re.findall(r"[\d.]+", out)[-1]))
            os.unlink(capture)
        print("ns per event: median %.1f, rounds %s" % (statistics.median(ns), " ".join("%.1f" % x for x in ns)))


if __name__ == "__main__":
    main()
