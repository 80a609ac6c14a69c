#!/usr/bin/env python3
"""Probe (not a test): what still costs a step after the recorded steps (Note [Recorded steps] in
native/python/gpumem/_recorded_steps.py), in ONE process. Across processes (H100, 2026-11-27) a
ResNet-50 step after the stop still issued ~1.2 ms slower than under figures only, and a trace tracker that does
nothing (native-tracker) cost nothing; this finds which part is left.

    python3 -m gpumem run --record-steps 10 -- python3 test/gpu/probes/recorded_steps_parts.py [--model resnet50]

After 20 steps (the stop at the 10th), blocks of steps alternate between states of what is left running:
  left        as the product leaves it after the stop
  left'       the same again: the paired ratios' own noise
  -history    PyTorch's recordHistory explicitly off (the tracker extension's record(False, …)); put back as the
              product had it after the block (apply_ours)
  -poll       the stats poll (_StatsPoll.poll) does nothing
  -keeper     the leak keeper's step end is off
  -marks      the step facts, phases and backward() bracket's native calls are no-ops
  -hooks      our optimizer pre/post hooks out of torch's global hook dicts (marks, keeper, step count)
Prints per state the median host ms a step issues in and its paired ratio to `left` (the median over cycles of the
state's block against left's block of the same cycle), then µs a call of the parts on this torch (a mark, the keeper's
read, PyTorch's nested stats dict, memory_allocated()) and whether the tracker extension's figures() equal the dict's
(Note [Figures without the dict] in native/python/gpumem/_observer_figures.py); RESULT line, also
$OUT/recorded_steps_parts_<model>.json. The figures of 2026-11-28 (H100) in test/gpu/README.md came from a copy of
this probe (post_stop_parts.py at 5ea00de) since folded in here.
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


def micro(fn, n=2000):
    """µs a call of fn, after one call."""
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return round((time.perf_counter() - t0) / n * 1e6, 3)


def figures_check(torch, figures, keeper):
    """Note [Figures without the dict]: the extension's six numbers against the nested dict's, at one moment."""
    torch.cuda.synchronize()
    st = torch.cuda.memory_stats_as_nested_dict(0)
    want = tuple(st[k]["all"][f] for k, f in (("allocated_bytes", "current"), ("reserved_bytes", "current"),
                                              ("allocated_bytes", "peak"), ("reserved_bytes", "peak")))
    want += (st["num_ooms"], st["requested_bytes"]["all"]["current"])
    got = figures.figures_now(torch, 0)
    return {"from_extension": getattr(figures.LIVE.tracker, "figures", None) is not None, "got": list(got),
            "want": list(want), "equal": tuple(got) == want, "keeper_requested": keeper.live_bytes(torch)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--block", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=24)
    a = ap.parse_args()
    from bench_allocator import step_fn, timed_steps

    step = step_fn(a.model)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    from gpumem import _keeper, _observer_figures, _observer_history
    from gpumem._observer_live import LIVE
    from gpumem._state import STATE

    info0 = STATE.native.stack_info()
    native = STATE.native
    lib = native.lib
    real_mark = native.mark
    real_begin, real_end = lib.gpumem_backward_begin, lib.gpumem_backward_end
    real_poll = _observer_figures._StatsPoll.poll
    watch = _keeper.watch()

    opt_mod = sys.modules["torch.optim.optimizer"]
    ours = [(table, {k: v for k, v in table.items() if getattr(v, "__module__", "").startswith("gpumem")})
            for table in (opt_mod._global_optimizer_pre_hooks, opt_mod._global_optimizer_post_hooks)]

    def configure(name):
        _observer_history.VIEW.apply_ours()  # as the product left it
        for table, hooks in ours:
            for k, v in hooks.items():
                if name == "-hooks":
                    table.pop(k, None)
                else:
                    table[k] = v
        _observer_figures._StatsPoll.poll = real_poll
        if watch is not None:
            watch.off = False
        native.mark = real_mark
        lib.gpumem_backward_begin, lib.gpumem_backward_end = real_begin, real_end
        if name == "-history":
            LIVE.tracker.record(False, 0, 1, 0, list(_observer_history.RING_ACTIONS))
        elif name == "-poll":
            _observer_figures._StatsPoll.poll = lambda self: None
        elif name == "-keeper" and watch is not None:
            watch.off = True
        elif name == "-marks":
            native.mark = lambda *args, **kwargs: None
            lib.gpumem_backward_begin = lib.gpumem_backward_end = lambda: None

    names = ["left", "left'", "-history", "-poll", "-keeper", "-marks", "-hooks"]
    host = {n: [] for n in names}
    blocks = {n: [] for n in names}
    for r in range(a.repeats):
        for n in names[r % len(names):] + names[:r % len(names)]:
            configure(n)
            for _ in range(2):
                step()
            torch.cuda.synchronize()
            hs, _ = timed_steps(step, a.block)
            host[n].extend(hs)
            blocks[n].append(statistics.median(hs))
    configure("left")
    table = {n: {"host_ms": round(statistics.median(host[n]), 3),
                 "paired_vs_left": round(statistics.median(b / l for b, l in zip(blocks[n], blocks["left"])), 4)}
             for n in names}
    for n, t in table.items():
        print("%-9s host %.3f ms  paired ×%.4f of left" % (n, t["host_ms"], t["paired_vs_left"]), flush=True)
    info1 = native.stack_info()
    timings = {"mark_us": micro(lambda: native.mark("probe", 0)),
               "keeper_live_bytes_us": micro(lambda: _keeper.live_bytes(torch)),
               "figures_now_us": micro(lambda: _observer_figures.figures_now(torch, 0)),
               "nested_stats_us": micro(lambda: torch.cuda.memory_stats_as_nested_dict()),
               "memory_allocated_us": micro(lambda: torch.cuda.memory_allocated())}
    figures = figures_check(torch, _observer_figures, _keeper)
    print("µs a call: %s\nfigures: %s" % (timings, figures), flush=True)
    result = {"model": a.model, "parts": table, "micro": timings, "figures": figures, "events_off": LIVE.events_off,
              "gil_free_answers": [info0.get("gil_free_answers"), info1.get("gil_free_answers")],
              "queue": LIVE.obs.info().get("queue") if LIVE.obs is not None else None}
    print("RESULT " + json.dumps(result), flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "recorded_steps_parts_%s.json" % a.model), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
