#!/usr/bin/env python3
"""Probe (not a test): what PyTorch's allocator costs per alloc/free once a trace tracker is attached
and returns at once, in ONE process, before and after; the state a run is left in after the recorded steps (Note
[Recorded steps] in native/python/gpumem/_recorded_steps.py: PyTorch has no way to detach a tracker).

    python3 test/gpu/probes/tracker_entry_cost.py [--pairs 200000] [--blocks 5] [--out DIR]

Phases, each BLOCKS blocks of PAIRS `torch.empty(1024, device="cuda")` + `del` (all from the cache: no driver call):
  bare        PyTorch's allocator as a native run has it
  history     after _record_memory_history(context="state", stacks="python") then _record_memory_history(None): what
              a history switched on and off leaves (our recorder's recordHistory does the same)
  tracker     after attaching a tracker that returns at once (the product's own after its flag turns)
No detach, so no `bare` again after `tracker`: the spread of each phase's blocks is the drift check.
Prints per phase the median ns a pair and the ratio to `bare`; a RESULT line, also $OUT/tracker_entry_cost.json.
A ResNet-50 b64 step makes ~765 pairs (about 2,300 trace entries), so (tracker − bare) × 765 is what the attached
tracker costs a step; the host time the recorded-steps runs keep after the stop is +1–3 ms (H100, 2026-11-28):
if this is a tenth of it, the tracker is not the cause.
"""
import argparse
import faulthandler
import json
import os
import statistics
import sys
import tempfile

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

from bench_allocator import attach_noop_tracker  # noqa: E402
from workloads.pytorch_mode.alloc_micro import pair_us  # noqa: E402

# after that import, whose own watchdog (240 s) would otherwise replace this probe's
faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)


def blocks(n_blocks, pairs):
    """ns a pair, one value a block (alloc_micro.pair_us's loop: `torch.empty(1024, device="cuda")` + `del`)."""
    return [pair_us(blocks=1, n=pairs) * 1e3 for _ in range(n_blocks)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", tempfile.gettempdir()))
    a = ap.parse_args()
    torch.empty(1, device="cuda")
    blocks(1, a.pairs // 4)  # warm: the cached block, the interpreter's caches
    phases = {"bare": blocks(a.blocks, a.pairs)}
    torch.cuda.memory._record_memory_history(enabled="all", context="state", stacks="python", max_entries=1)
    torch.cuda.memory._record_memory_history(enabled=None)
    phases["history"] = blocks(a.blocks, a.pairs)
    attach_noop_tracker()
    phases["tracker"] = blocks(a.blocks, a.pairs)
    base = statistics.median(phases["bare"])
    result = {"pairs": a.pairs, "blocks": a.blocks, "torch": torch.__version__, "phases": {}}
    for name, ns in phases.items():
        med = statistics.median(ns)
        result["phases"][name] = {"ns_per_pair": round(med, 1), "blocks": [round(x, 1) for x in ns],
                                  "ratio_to_bare": round(med / base, 4), "extra_ns": round(med - base, 1),
                                  "extra_ms_per_resnet50_step": round((med - base) * 765 / 1e6, 3)}
        print("%-8s %8.1f ns a pair (blocks %s)  ×%.3f  %+.1f ns, %+.3f ms a ResNet-50 step" % (
            name, med, " ".join("%.0f" % x for x in ns), med / base, med - base, (med - base) * 765 / 1e6))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "tracker_entry_cost.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
