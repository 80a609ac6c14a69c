#!/usr/bin/env python3
"""Probe for issue 26 (not a test): the CPU time each of the step's own threads (the main thread, PyTorch's autograd
thread) takes a training step, phase after phase in ONE process, from /proc/self/task/<tid>/schedstat (ns on a CPU).
The autograd thread never waits for the GPU, so its CPU time is its work alone, free of the synchronize's spin and of
the GPU's pace (thread_wakeups.py found it 11.4 ms a ResNet-50 step natively and 13.9 ms after the recorded steps of
`gpumem run --record-steps 3`, in two processes).

    python3 test/gpu/probes/tracker_threads.py --phases bare,bare,tracker,tracker
    python3 -m gpumem run --record-steps 3 -- python3 test/gpu/probes/tracker_threads.py --phases post,post,trim,trim

Phases (STEPS steps each, in the order given):
  bare / post  nothing done before it (bare natively, post after the recorded steps under gpumem)
  tracker      a trace tracker that returns at once is attached before the phase (bench_allocator.NOOP_TRACKER; the
               attach is for good: PyTorch has no detach), natively
  trim         malloc_trim(0) before the phase: whether the C heap's state after the recording is what costs
Prints per phase the main and autograd threads' CPU ms a step and the median host ms a step issues in; RESULT line,
also $OUT/tracker_threads_<native|gpumem>_<model>.json when OUT is set.
"""
import argparse
import ctypes
import faulthandler
import json
import os
import statistics
import sys
import tempfile
import threading
import time

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402


def cpu_ns():
    """{thread name: ns on a CPU so far}; the main thread is "main", PyTorch's autograd threads keep their names."""
    me = str(threading.get_native_id())
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/schedstat" % tid) as f:
                ns = int(f.read().split()[0])
            with open("/proc/self/task/%s/comm" % tid) as f:
                name = f.read().strip()
        except OSError:
            continue
        name = "main" if tid == me else name
        out[name] = out.get(name, 0) + ns
    return out


def attach_noop_tracker():
    from torch.utils.cpp_extension import load_inline

    from bench_allocator import NOOP_TRACKER

    folder = os.path.join(tempfile.gettempdir(), "gpumem-bench-noop-tracker")
    os.makedirs(folder, exist_ok=True)
    load_inline(name="gpumem_bench_noop_tracker", cpp_sources=[NOOP_TRACKER], functions=["attach"], with_cuda=True,
                build_directory=folder, verbose=False, extra_cflags=["-O2"]).attach()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--phases", default="bare,bare,tracker,tracker")
    a = ap.parse_args()
    from bench_allocator import step_fn

    step = step_fn(a.model)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    phases = []
    attached = False
    for name in a.phases.split(","):
        if name == "tracker" and not attached:
            attach_noop_tracker()
            attached = True
        elif name == "trim":
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        step()
        torch.cuda.synchronize()
        c0 = cpu_ns()
        host = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            host.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
        c1 = cpu_ns()
        threads = {k: round((c1[k] - c0.get(k, 0)) / a.steps / 1e6, 3) for k in c1 if c1[k] - c0.get(k, 0) > 0}
        row = {"phase": name, "host_ms": round(statistics.median(host), 3), "cpu_ms": threads}
        phases.append(row)
        print("%-8s host %.3f ms  main %.3f  autograd %.3f  (CPU ms a step; others %s)" % (
            name, row["host_ms"], threads.get("main", 0), threads.get("pt_autograd_0", 0),
            {k: v for k, v in threads.items() if k not in ("main", "pt_autograd_0")}), flush=True)
    state = getattr(sys.modules.get("gpumem._state"), "STATE", None)
    tag = "gpumem" if state is not None and state.native is not None else "native"
    result = {"model": a.model, "under": tag, "steps": a.steps, "phases": phases}
    print("RESULT " + json.dumps(result), flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "tracker_threads_%s_%s.json" % (tag, a.model)), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
