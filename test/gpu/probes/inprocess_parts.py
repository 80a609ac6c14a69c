"""Probe (issue 26, not a test): what each recording part costs a ResNet-50 step, measured inside ONE process.

Between two processes of the same configuration the host time of a step differs by ±1.5–3 ms on the lent hosts
(the A/A rounds in test/gpu/README.md, eighth session), as much as the parts being sought. Here one process under
`gpumem run` switches parts off and on block by block (10 steps a block, the states in rotating order, CYCLES
times), so every state sees the same process, CPUs and minutes:
  all        everything the run records;
  no-stacks  the default mode's context recorder off (PyTorch's recordHistory off: _tracker.record(False, …)). The
             tracker then still takes each ALLOC's stack from the GIL-free cache (stacks::capture_if_gil_held), with
             no module marks, and a call site new since gets none: in a settled loop this state is the "gather in
             the tracker" design of test/gpu/README.md's eighth session, less its module marks;
  no-tags    the optimizer's tag walk off (Note [Batched tags]);
  neither    both off.
Under the lens allocator only the tag walk can be switched (its stacks are set once, at configure).
Prints and writes ($OUT/inprocess_parts_<mode>.json) per state the median host ms a step issues in and the median
step ms. Run: python3 -m gpumem run [--allocator lens] -- python3 test/gpu/probes/inprocess_parts.py
"""
import faulthandler
import json
import os
import statistics
import sys
import time

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

from bench_allocator import step_fn  # noqa: E402

CYCLES = int(os.environ.get("CYCLES", "8"))
BLOCK = 10
step = step_fn(os.environ.get("PROBE_MODEL", "resnet50"))
for _ in range(15):
    step()
torch.cuda.synchronize()

obs = sys.modules.get("gpumem._observe")
markers = sys.modules.get("gpumem._markers")
tracker = getattr(obs, "_tracker", None) if obs else None


def set_stacks(on):
    if tracker is None:
        return
    hv = obs._history_view
    skip = hv.skip if hv.on else list(obs.RING_ACTIONS)
    tracker.record(on, hv.user_stacks, min(hv.max_entries, 2 ** 62), hv.when, skip)


def set_tags(on):
    if markers is not None:
        markers._walking = on


states = {"all": (True, True), "no-tags": (True, False)}
if tracker is not None:
    states.update({"no-stacks": (False, True), "neither": (False, False)})
names = list(states)
host = {n: [] for n in names}
wall = {n: [] for n in names}
for c in range(CYCLES):
    k = c % len(names)
    for n in names[k:] + names[:k]:
        stacks_on, tags_on = states[n]
        set_stacks(stacks_on)
        set_tags(tags_on)
        step()  # the first step after a switch is not timed
        torch.cuda.synchronize()
        for _ in range(BLOCK):
            t0 = time.perf_counter()
            step()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            host[n].append((t1 - t0) * 1e3)
            wall[n].append((time.perf_counter() - t0) * 1e3)
set_stacks(True)
set_tags(True)
mode = "auto" if tracker is not None else "lens"
out = {"mode": mode, "cycles": CYCLES, "block": BLOCK,
       "host_ms": {n: round(statistics.median(v), 3) for n, v in host.items()},
       "step_ms": {n: round(statistics.median(v), 3) for n, v in wall.items()},
       "host_ms_by_cycle": {n: [round(statistics.median(v[i:i + BLOCK]), 3) for i in range(0, len(v), BLOCK)]
                            for n, v in host.items()}}
print(json.dumps(out), flush=True)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "inprocess_parts_%s.json" % mode), "w") as f:
        json.dump(out, f, indent=1)
