#!/usr/bin/env python3
"""Probe for issue 25 (not a test): the PyTorch-allocator mode's step-time cost split into its parts, in ONE
process, so the cuDNN algorithms cudnn.benchmark picked and the machine's minute stay the same across parts.

    python3 -m gpumem run --allocator pytorch -- python3 test/gpu/probes/observer_parts.py [--model resnet18|gpt2]

Blocks of steps alternate between configurations of the running instrumentation (interleaved, repeated):
  all           everything the mode does
  -modules      module marks off (Note [Module paths from frames])
  -tags         the optimizer's tag walk skipped (Note [Categories])
  -stacks       the context recorder off (no stack per allocation; the tracker stays)
  -python       modules, tags and stacks all off: the tracker's per-event cost alone
Prints the median step ms of each and its ratio to `all`; RESULT line with the table.
"""
import argparse
import faulthandler
import json
import os
import statistics
import sys
import time

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "200")), exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--block", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--blocks-only", action="store_true", help="also print p10 and min per configuration")
    a = ap.parse_args()
    from bench_allocator import step_fn

    step = step_fn("resnet18-benchmark" if a.model == "resnet18" else a.model)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    from gpumem import _markers, _modules, _observe
    from gpumem._state import STATE

    lib = STATE.native.lib
    resolver = _modules._keep[0] if _modules._keep else None
    tracker = _observe._tracker

    def configure(name):
        off = {"all": (), "-modules": ("modules",), "-tags": ("tags",), "-stacks": ("stacks",),
               "-python": ("modules", "tags", "stacks")}[name]
        if resolver is not None:
            lib.gpumem_modules_enable(_modules._RESOLVER() if "modules" in off else resolver)
        _markers._walking = "tags" not in off
        if tracker is not None:
            tracker.record("stacks" not in off, 0, 1, 1, [])

    names = ["all", "-modules", "-tags", "-stacks", "-python"]
    times = {n: [] for n in names}
    every = {n: [] for n in names}
    for r in range(a.repeats):
        for n in (names[r % len(names):] + names[:r % len(names)]):
            configure(n)
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            ts = []
            for _ in range(a.block):
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                ts.append((time.perf_counter() - t0) * 1e3)
            times[n].append(statistics.median(ts))
            every[n].extend(ts)
    configure("all")
    base = statistics.median(times["all"])
    p10 = {n: sorted(v)[len(v) // 10] for n, v in every.items()}
    table = {n: {"ms": round(statistics.median(v), 3), "vs_all": round(statistics.median(v) / base, 4),
                 "p10_ms": round(p10[n], 3), "p10_vs_all": round(p10[n] / p10["all"], 4), "blocks": [round(x, 3) for x in v]}
             for n, v in times.items()}
    for n, t in table.items():
        print("%-10s median %.3f ms ×%.4f of all; p10 %.3f ms ×%.4f   %s" % (n, t["ms"], t["vs_all"], t["p10_ms"], t["p10_vs_all"], t["blocks"]), flush=True)
    print("RESULT " + json.dumps({"model": a.model, "tracker": tracker is not None, "parts": table}), flush=True)


if __name__ == "__main__":
    main()
