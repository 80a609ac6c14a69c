#!/usr/bin/env python3
"""Probe (not a test): per thread of the process, how often it wakes up and how much CPU it takes a
training step, read from /proc/self/task/<tid>/{status,stat,schedstat} over STEPS steps, phase after phase in ONE
process. Counters, not timings: the step benchmark showed a process under `gpumem run --record-steps 10` making 6.1
voluntary context switches a ResNet-50 step after the stop against native's 3.1 (H100, 2026-11-28), and
the autograd thread, which never waits for the GPU, takes CPU time that is its work alone.

    python3 test/gpu/probes/thread_wakeups.py [--model resnet50] [--steps 100] [--phases bare,bare,tracker,tracker]
    python3 -m gpumem run --record-steps 3 -- python3 test/gpu/probes/thread_wakeups.py --phases bare,trim

Phases (STEPS steps each, in the order given, after a 20-step warm-up):
  bare     nothing done before it (under gpumem: what the product leaves running, after the stop with --record-steps)
  tracker  a trace tracker that returns at once is attached before the phase (bench_allocator.NOOP_TRACKER; for
           good: PyTorch has no detach)
  trim     malloc_trim(0) before the phase: whether the C heap's state after the recording is what costs
Prints per phase the median host ms a step issues in and one line per thread name (threads of one name summed; the
main thread is "main"): voluntary and involuntary switches, minor faults and CPU ms (schedstat, ns exact), each a
step; RESULT line, also $OUT/thread_wakeups_<native|gpumem>_<model>.json when OUT is set. The figures of 2026-11-28
(H100) in test/gpu/README.md came from this probe and a copy of its phases (tracker_threads.py at 5ea00de) since folded in here.
"""
import argparse
import ctypes
import faulthandler
import json
import os
import statistics
import sys
import threading

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

FIELDS = ("voluntary", "involuntary", "minflt", "cpu_ns")


def threads():
    """{thread name: [voluntary, involuntary, minflt, cpu_ns]} so far, threads of one name summed."""
    me = str(threading.get_native_id())
    out = {}
    for tid in os.listdir("/proc/self/task"):
        base = "/proc/self/task/%s/" % tid
        try:
            with open(base + "status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
            with open(base + "stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()  # after the name: state ppid … flags minflt (index 7)
            with open(base + "schedstat") as f:
                cpu_ns = int(f.read().split()[0])
        except OSError:  # the thread ended meanwhile
            continue
        name = "main" if tid == me else status["Name"].strip()
        row = out.setdefault(name, [0, 0, 0, 0])
        for i, v in enumerate((int(status["voluntary_ctxt_switches"]), int(status["nonvoluntary_ctxt_switches"]),
                               int(stat[7]), cpu_ns)):
            row[i] += v
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--phases", default="bare")
    a = ap.parse_args()
    from bench_allocator import attach_noop_tracker, step_fn, timed_steps

    step = step_fn(a.model)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    state = getattr(sys.modules.get("gpumem._state"), "STATE", None)
    tag = "gpumem" if state is not None and state.native is not None else "native"
    attached = False
    phases = []
    for phase in a.phases.split(","):
        if phase == "tracker" and not attached:
            attach_noop_tracker()
            attached = True
        elif phase == "trim":
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        step()
        torch.cuda.synchronize()
        before = threads()
        host, _ = timed_steps(step, a.steps)
        after = threads()
        table = {}
        for name, row in after.items():
            was = before.get(name, [0, 0, 0, 0])
            d = {k: (row[i] - was[i]) / a.steps for i, k in enumerate(FIELDS)}
            table[name] = {"voluntary": round(d["voluntary"], 2), "involuntary": round(d["involuntary"], 2),
                           "minflt": round(d["minflt"], 2), "cpu_ms": round(d["cpu_ns"] / 1e6, 3)}
        phases.append({"phase": phase, "host_ms": round(statistics.median(host), 3), "threads": table})
        print("%-7s %-8s host %.3f ms a step" % (tag, phase, phases[-1]["host_ms"]), flush=True)
        for name, t in sorted(table.items(), key=lambda kv: -kv[1]["cpu_ms"]):
            print("%-7s %-8s %-18s voluntary %6.2f  involuntary %5.2f  minflt %6.2f  cpu %7.3f ms  (a step)"
                  % (tag, phase, name, t["voluntary"], t["involuntary"], t["minflt"], t["cpu_ms"]), flush=True)
    result = {"model": a.model, "under": tag, "steps": a.steps, "phases": phases}
    print("RESULT " + json.dumps(result), flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "thread_wakeups_%s_%s.json" % (tag, a.model)), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
