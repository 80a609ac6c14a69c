#!/usr/bin/env python3
"""Probe (not a test): what each part of the recording costs a step, in ONE process, so the
cuDNN algorithms cudnn.benchmark picked, the process's CPUs and the machine's minute stay the same across parts
(between two processes of one configuration a ResNet-50 step's host time differs by ±1.5–3 ms on the lent hosts:
A/A rounds, H100, 2026-11-27).

    python3 -m gpumem run [--allocator pytorch|lens] -- python3 test/gpu/probes/observer_parts.py [--model resnet18|resnet50|gpt2]

Blocks of steps alternate between configurations of the running instrumentation (interleaved, repeated):
  all           everything the mode does
  -modules      module marks off (Note [Module paths from frames])
  -tags         the optimizer's tag walk skipped (Note [Categories])
  -stacks       the context recorder off (PyTorch-allocator mode only). The tracker then still takes each
                allocation's stack from the GIL-free cache (stacks::capture_if_gil_held), without module marks, and a
                call site new since gets none: in a settled loop, a "gather in the tracker" design (stacks taken by the
                tracker itself), less its module marks
  -python       modules, tags and (where they can be) stacks all off: the per-event cost alone
  -walk         -python, and no stack walked at all (the tracker's take_stack walks the GIL-free cache in -python):
                what is left is the queue, its drain and the writer (PyTorch-allocator mode only)
  -events       -python, and the tracker's entries return at once (Note [Probe switches] in c_api.cc: PyTorch still
                builds them): the PyTorch-allocator mode's whole per-event path off, the nearest this process gets to
                native (PyTorch-allocator mode only)
  -threads      everything on, but the observer thread drains every 500 ms (and at 2^17 entries) instead of every 5
                ms, and the writer writes every 2 s: what our background threads' wake-ups cost the workload's
  all'          all again: the paired ratios' own noise (an A/A state)
  drain:N, flush:N  everything on, the observer thread draining every N ms, or the writer writing every N ms
Prints per configuration the median step ms and the median host ms a step issues in (step() returning, before the
synchronize: what the tool adds to the host shows there first), each with its ratio to `all`; RESULT line with the
table, also written to $OUT/observer_parts_<mode>_<model>.json when OUT is set. Its in-process figures in
test/gpu/README.md (host ms, ResNet-50, blocks of 10 × 8, H100, 2026-11-27) came from a copy since folded in here.
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
    ap.add_argument("--states", default="", help="comma-separated states to run besides all (default: every one)")
    a = ap.parse_args()
    from bench_allocator import step_fn

    step = step_fn("resnet18-benchmark" if a.model == "resnet18" else a.model)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    from gpumem import _markers, _modules, _observer_history
    from gpumem._observer_live import LIVE
    from gpumem._state import STATE

    lib = STATE.native.lib
    resolver = _modules._keep[0] if _modules._keep else None
    tracker = LIVE.tracker

    def set_stacks(on):  # as _HistoryView.apply_ours does, with our stacks on or off
        hv = _observer_history.VIEW
        skip = hv.skip if hv.on else list(_observer_history.RING_ACTIONS)
        tracker.record(on, hv.user_stacks, min(hv.max_entries, 2 ** 62), hv.when, skip)

    probe = STATE.native.probe_set()

    def configure(name):
        if name == "all'":
            return configure("all")
        if name.startswith(("drain:", "flush:")):
            configure("all")
            what, ms = name.split(":")
            probe(b"drain_ms" if what == "drain" else b"flush_ms", int(ms))
            return
        off = {"all": (), "-modules": ("modules",), "-tags": ("tags",), "-stacks": ("stacks",),
               "-python": ("modules", "tags", "stacks"), "-walk": ("modules", "tags", "stacks", "walk"),
               "-events": ("modules", "tags", "stacks", "events"),
               "-threads": ("threads",)}[name]
        if resolver is not None:
            lib.gpumem_modules_enable(_modules._RESOLVER() if "modules" in off else resolver)
        _markers._walking = "tags" not in off
        if tracker is not None:
            set_stacks("stacks" not in off)
        if probe is not None:
            probe(b"observe_hold", 1 if "events" in off else 0)
            probe(b"stacks", 0 if "walk" in off else 1)
            quiet = "threads" in off
            probe(b"drain_ms", 500 if quiet else 5)
            probe(b"drain_wake", (1 << 17) - 1 if quiet else 4096)
            probe(b"flush_ms", 2000 if quiet else 50)

    # the lens allocator's stacks are set once, at configure: its -stacks cannot be switched here
    names = ["all", "-modules", "-tags"] + (["-stacks"] if tracker is not None else []) + ["-python"]
    names += (["-walk", "-events"] if tracker is not None and probe is not None else []) + (["-threads"] if probe is not None else [])
    if a.states:
        names = ["all"] + [n for n in a.states.split(",") if (n in names or n == "all'" or (probe is not None and n.startswith(
            ("drain:", "flush:")))) and n != "all"]
    times = {n: [] for n in names}
    every = {n: [] for n in names}
    host = {n: [] for n in names}
    host_blocks = {n: [] for n in names}  # per cycle: the block's median host ms (paired with all's of that cycle)
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
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                ts.append((time.perf_counter() - t0) * 1e3)
                host[n].append((t1 - t0) * 1e3)
            times[n].append(statistics.median(ts))
            host_blocks[n].append(statistics.median(host[n][-a.block:]))
            every[n].extend(ts)
    configure("all")
    base = statistics.median(times["all"])
    p10 = {n: sorted(v)[len(v) // 10] for n, v in every.items()}
    host_all = statistics.median(host["all"])
    table = {n: {"ms": round(statistics.median(v), 3), "vs_all": round(statistics.median(v) / base, 4),
                 "p10_ms": round(p10[n], 3), "p10_vs_all": round(p10[n] / p10["all"], 4),
                 "host_ms": round(statistics.median(host[n]), 3),
                 "host_vs_all": round(statistics.median(host[n]) / host_all, 4),
                 # the median over cycles of this state's block against all's block of the same cycle: the minute's
                 # host speed cancels
                 "host_vs_all_paired": round(statistics.median(
                     b / h for b, h in zip(host_blocks[n], host_blocks["all"])), 4),
                 "blocks": [round(x, 3) for x in v], "host_blocks": [round(x, 3) for x in host_blocks[n]]}
             for n, v in times.items()}
    for n, t in table.items():
        print("%-10s median %.3f ms ×%.4f of all; p10 %.3f ms ×%.4f; host %.3f ms ×%.4f (paired ×%.4f)"
              % (n, t["ms"], t["vs_all"], t["p10_ms"], t["p10_vs_all"], t["host_ms"], t["host_vs_all"],
                 t["host_vs_all_paired"]), flush=True)
    result = {"model": a.model, "tracker": tracker is not None, "parts": table}
    print("RESULT " + json.dumps(result), flush=True)
    if os.environ.get("OUT"):
        mode = "pytorch" if tracker is not None else "lens"
        with open(os.path.join(os.environ["OUT"], "observer_parts_%s_%s.json" % (mode, a.model)), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
