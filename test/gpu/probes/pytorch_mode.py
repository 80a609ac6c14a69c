#!/usr/bin/env python3
"""Probe (PyTorch-allocator mode): how PyTorch's own caching allocator can be observed as it
runs, and what each way costs. Not a test: it prints the facts the design note quotes (Note [Observing
PyTorch's allocator] in native/python/README.md). Needs a GPU and torch; transformers/torchvision for steps.

    python3 test/gpu/probes/pytorch_mode.py [--out DIR]

1. Can a trace tracker be attached from an extension built on this machine (compiler, headers, build
   time)? Does it fire with history off, and does a TraceEntry carry PyTorch's gathered Python context
   when _record_memory_history(stacks="python") is on?
2. Step time (GPT-2 small, ResNet-50; configurations interleaved in one process): native; history with
   Python stacks; tracker only; history + tracker.
3. The OOM observer's arguments; the cost of polling _snapshot() with a full ring.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "400")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

TRACKER_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <atomic>
namespace CCA = c10::cuda::CUDACachingAllocator;
static std::atomic<bool> g_on{false};
static std::atomic<uint64_t> g_n{0}, g_alloc{0}, g_ctx{0}, g_seg{0};
void attach() {
  CCA::attachAllocatorTraceTracker([](const CCA::TraceEntry& te) {
    if (!g_on.load(std::memory_order_relaxed)) return;
    g_n.fetch_add(1, std::memory_order_relaxed);
    if (te.action_ == CCA::TraceEntry::ALLOC) g_alloc.fetch_add(te.size_, std::memory_order_relaxed);
    if (te.action_ == CCA::TraceEntry::SEGMENT_ALLOC || te.action_ == CCA::TraceEntry::SEGMENT_MAP) g_seg++;
    if (te.context_) g_ctx.fetch_add(1, std::memory_order_relaxed);
  });
}
void set_on(bool on) { g_on.store(on); }
std::vector<int64_t> counts() { return {(int64_t)g_n.load(), (int64_t)g_alloc.load(), (int64_t)g_ctx.load(), (int64_t)g_seg.load()}; }
"""


def tools():
    out = {}
    for cmd in (["g++", "--version"], ["c++", "--version"], ["ninja", "--version"], ["nvcc", "--version"]):
        p = shutil.which(cmd[0])
        out[cmd[0]] = subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0] if p else None
    return out


def build_tracker(torch):
    from torch.utils.cpp_extension import load_inline

    t0 = time.perf_counter()
    mod = load_inline(name="gpumem_probe_tracker", cpp_sources=[TRACKER_SRC], functions=["attach", "set_on", "counts"],
                      with_cuda=True, verbose=False, build_directory=_build_dir())
    return mod, time.perf_counter() - t0


def _build_dir():
    d = os.path.join("/tmp", "gpumem-probe-build")
    os.makedirs(d, exist_ok=True)
    return d


def step_of(torch, name):
    sys.path.insert(0, os.path.dirname(HERE))
    from bench_allocator import step_fn

    return step_fn(name)


def timed(torch, step, warmup, n):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--models", nargs="+", default=["gpt2", "resnet50"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import torch

    res = {"tools": tools(), "torch": torch.__version__}
    torch.cuda.init()
    try:
        mod, secs = build_tracker(torch)
        res["build_s"] = secs
        mod.attach()
        mod.set_on(True)
        x = torch.empty(1 << 20, device="cuda")
        del x
        res["fires_without_history"] = mod.counts()
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
        c0 = mod.counts()
        x = torch.empty(1 << 20, device="cuda")
        del x
        c1 = mod.counts()
        res["with_history_delta"] = [b - a for a, b in zip(c0, c1)]  # n, bytes, with context, segments
        torch.cuda.memory._record_memory_history(enabled=None)
        mod.set_on(False)
    except Exception as exc:
        mod = None
        res["tracker_error"] = "%s: %s" % (type(exc).__name__, str(exc)[-1500:])
    # OOM observer arguments.
    seen = []
    try:
        torch._C._cuda_attach_out_of_memory_observer(lambda *a: seen.append([str(type(v).__name__) for v in a] + [repr(a)[:300]]))
        try:
            torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        except Exception as exc:
            res["oom_text"] = str(exc)[:400]
        res["oom_observer"] = seen
    except Exception as exc:
        res["oom_observer_error"] = "%s: %s" % (type(exc).__name__, exc)
    # Polling cost of _snapshot() with a full ring of 100k entries.
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100_000)
    for _ in range(60_000):
        y = torch.empty(256, device="cuda")
        del y
    t0 = time.perf_counter()
    snap = torch.cuda.memory._snapshot()
    res["snapshot_100k_s"] = time.perf_counter() - t0
    res["snapshot_entries"] = sum(len(t) for t in snap.get("device_traces", []))
    torch.cuda.memory._record_memory_history(enabled=None)
    # Step time, configurations interleaved.
    configs = ["native", "history", "tracker", "history+tracker"] if mod else ["native", "history"]
    res["steps"] = {}
    for name in args.models:
        torch.manual_seed(0)
        step = step_of(torch, name)
        per = {c: [] for c in configs}
        for _ in range(args.rounds):
            for c in configs:
                if "history" in c:
                    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
                if mod:
                    mod.set_on("tracker" in c)
                per[c].append(timed(torch, step, 5, 20))
                if "history" in c:
                    torch.cuda.memory._record_memory_history(enabled=None)
                if mod:
                    mod.set_on(False)
        res["steps"][name] = {
            "median_ms": {c: statistics.median(v) for c, v in per.items()},
            "ratio_vs_native": {c: statistics.median(per[c][i] / per["native"][i] for i in range(args.rounds)) for c in configs},
        }
        print(name, json.dumps(res["steps"][name]))
    print(json.dumps({k: v for k, v in res.items() if k != "steps"}, indent=1))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "pytorch_mode_probe.json"), "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
