#!/usr/bin/env python3
"""Probe for issue 26 (not a test): which threads of the process wake up, and how much CPU each takes, per training
step, read from /proc/self/task/*/status and stat over STEPS steps after a warm-up. The step benchmark showed a
process under `gpumem run --record-steps 10` making 6.1 voluntary context switches a ResNet-50 step after the stop
against native's 3.1, and 0.7 minor faults against 0.2 (bench_allocator.json of test/gpu/README.md's run E): counters,
not timings, so one short run says which thread they belong to.

    python3 test/gpu/probes/thread_wakeups.py [--model resnet50] [--steps 100]
    python3 -m gpumem run --record-steps 3 -- python3 test/gpu/probes/thread_wakeups.py

Prints one line per thread name (threads of one name summed): voluntary and involuntary switches, minor faults and
CPU ms, each a step; RESULT line, also $OUT/thread_wakeups_<native|gpumem>_<model>.json when OUT is set.
"""
import argparse
import faulthandler
import json
import os
import sys

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def threads():
    """{tid: (name, voluntary, involuntary, minflt, cpu_s)} of this process's threads now."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/status" % tid) as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
            with open("/proc/self/task/%s/stat" % tid) as f:
                stat = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # stat after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        out[tid] = (status["Name"].strip(), int(status["voluntary_ctxt_switches"]),
                    int(status["nonvoluntary_ctxt_switches"]), int(stat[7]), (int(stat[11]) + int(stat[12])) / TICK)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--steps", type=int, default=100)
    a = ap.parse_args()
    from bench_allocator import step_fn

    step = step_fn(a.model)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    before = threads()
    for _ in range(a.steps):
        step()
        torch.cuda.synchronize()
    after = threads()
    rows = {}
    for tid, (name, vol, invol, flt, cpu) in after.items():
        b = before.get(tid, (name, 0, 0, 0, 0.0))
        r = rows.setdefault(name, [0, 0, 0, 0.0, 0])
        r[0] += vol - b[1]
        r[1] += invol - b[2]
        r[2] += flt - b[3]
        r[3] += cpu - b[4]
        r[4] += 1
    n = float(a.steps)
    table = {name: {"threads": r[4], "voluntary": round(r[0] / n, 2), "involuntary": round(r[1] / n, 2),
                    "minflt": round(r[2] / n, 2), "cpu_ms": round(r[3] / n * 1e3, 3)} for name, r in rows.items()}
    state = getattr(sys.modules.get("gpumem._state"), "STATE", None)
    tag = "gpumem" if state is not None and state.native is not None else "native"
    for name, t in sorted(table.items(), key=lambda kv: -kv[1]["voluntary"]):
        print("%-7s %-18s ×%d  voluntary %6.2f  involuntary %5.2f  minflt %6.2f  cpu %7.3f ms  (a step)"
              % (tag, name, t["threads"], t["voluntary"], t["involuntary"], t["minflt"], t["cpu_ms"]), flush=True)
    result = {"model": a.model, "under": tag, "steps": a.steps, "threads": table}
    print("RESULT " + json.dumps(result), flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "thread_wakeups_%s_%s.json" % (tag, a.model)), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
