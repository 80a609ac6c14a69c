#!/usr/bin/env python3
"""Probe for issue 26 (not a test): what each part of ours still running after the recorded steps (Note [Recorded
steps] in native/python/gpumem/_observe.py) costs a step, in ONE process, so cuDNN's algorithms, the process's CPUs and
the machine's minute stay the same across parts. Run it after the stop:

    python3 -m gpumem run --record-steps 3 -- python3 test/gpu/probes/post_stop_parts.py [--model resnet50]
    python3 test/gpu/probes/post_stop_parts.py [--model resnet50]     # natively: the micro timings only

Blocks of steps alternate between states (interleaved, the order rotating):
  all       what the product leaves running after the stop
  -keeper   the leak keeper's step-end read (Note [Keeper reads requested bytes]) skipped
  -poll     the stats poll (PyTorch's nested stats at the sampling rate, on a Python thread) idle
  -marks    backward() unbracketed and no marker written (phases, step facts)
  -hooks    our optimizer pre/post hooks out of torch's global hook dicts (marks, keeper, step count)
  -python   all of the above: what is left is PyTorch's trace entries to our tracker, which returns at once (no detach)
  all'      all again (the A/A state)
Prints per state the median host ms a step issues in and its paired ratio to `all`, then micro timings of the parts
on this torch (µs a call); RESULT line, also $OUT/post_stop_parts_<model>.json when OUT is set.
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
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return round((time.perf_counter() - t0) / n * 1e6, 3)


def numa_pages():
    """Pages of this process by NUMA node (/proc/self/numa_maps): where its memory landed."""
    nodes = {}
    try:
        with open("/proc/self/numa_maps") as f:
            for line in f:
                for word in line.split():
                    if word[:1] == "N" and "=" in word and word[1:word.index("=")].isdigit():
                        node, n = word[1:].split("=")
                        nodes[node] = nodes.get(node, 0) + int(n)
    except OSError:
        pass
    return nodes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--block", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    from bench_allocator import step_fn

    step = step_fn(a.model)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    timings = {"nested_stats_us": micro(lambda: torch.cuda.memory_stats_as_nested_dict()),
               "memory_allocated_us": micro(lambda: torch.cuda.memory_allocated())}
    state = getattr(sys.modules.get("gpumem._state"), "STATE", None)
    gpumem = state is not None and state.native is not None
    result = {"model": a.model, "under_gpumem": False, "micro": timings, "numa_pages": numa_pages(),
              "cpus": sorted(os.sched_getaffinity(0))}
    if gpumem:
        from gpumem import _keeper, _markers, _observe
        from gpumem._state import STATE

        result["under_gpumem"] = True
        result["events_off"] = bool(_observe._events_off)
        timings["keeper_live_bytes_us"] = micro(lambda: _keeper.live_bytes(torch))
        timings["figures_now_us"] = micro(lambda: _observe.figures_now(torch, 0))
        # Note [Figures without the dict]: the extension's six numbers against the dict's, at one moment
        torch.cuda.synchronize()
        st = torch.cuda.memory_stats_as_nested_dict(0)
        want = tuple(st[k]["all"][f] for k, f in (("allocated_bytes", "current"), ("reserved_bytes", "current"),
                                                  ("allocated_bytes", "peak"), ("reserved_bytes", "peak")))
        want += (st["num_ooms"], st["requested_bytes"]["all"]["current"])
        got = _observe.figures_now(torch, 0)
        result["figures"] = {"from_extension": getattr(_observe._tracker, "figures", None) is not None,
                             "got": list(got), "want": list(want), "equal": tuple(got) == want,
                             "keeper_requested": _keeper.live_bytes(torch)}
        print("figures %s" % result["figures"], flush=True)
        timings["mark_us"] = micro(lambda: STATE.native.mark("probe", 0))
        opt_mod = sys.modules["torch.optim.optimizer"]
        ours_pre = {k: v for k, v in opt_mod._global_optimizer_pre_hooks.items() if getattr(v, "__module__", "").startswith("gpumem")}
        ours_post = {k: v for k, v in opt_mod._global_optimizer_post_hooks.items() if getattr(v, "__module__", "").startswith("gpumem")}
        raw = {"step_end": _keeper.step_end, "poll": _observe._StatsPoll.poll, "mark": STATE.native.mark,
               "backward": torch.autograd.backward}
        plain_backward = getattr(raw["backward"], "__wrapped__", raw["backward"])

        def configure(name):
            off = {"all": (), "all'": (), "-keeper": ("keeper",), "-poll": ("poll",), "-marks": ("marks",),
                   "-hooks": ("hooks",), "-python": ("keeper", "poll", "marks", "hooks")}[name]
            _keeper.step_end = (lambda source: None) if "keeper" in off else raw["step_end"]
            _observe._StatsPoll.poll = (lambda self: None) if "poll" in off else raw["poll"]
            STATE.native.mark = (lambda *args, **kw: True) if "marks" in off else raw["mark"]
            torch.autograd.backward = plain_backward if "marks" in off else raw["backward"]
            for table, ours in ((opt_mod._global_optimizer_pre_hooks, ours_pre),
                                (opt_mod._global_optimizer_post_hooks, ours_post)):
                for k, v in ours.items():
                    if "hooks" in off:
                        table.pop(k, None)
                    else:
                        table[k] = v
        names = ["all", "-keeper", "-poll", "-marks", "-hooks", "-python", "all'"]
    else:
        def configure(name):
            pass
        names = ["all"]
    host = {n: [] for n in names}
    wall = {n: [] for n in names}
    blocks = {n: [] for n in names}
    for r in range(a.repeats):
        for n in names[r % len(names):] + names[:r % len(names)]:
            configure(n)
            step()
            torch.cuda.synchronize()
            hs = []
            for _ in range(a.block):
                t0 = time.perf_counter()
                step()
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                wall[n].append((time.perf_counter() - t0) * 1e3)
                hs.append((t1 - t0) * 1e3)
            host[n].extend(hs)
            blocks[n].append(statistics.median(hs))
    configure("all")
    table = {}
    for n in names:
        table[n] = {"host_ms": round(statistics.median(host[n]), 3), "step_ms": round(statistics.median(wall[n]), 3),
                    "host_vs_all_paired": round(statistics.median(b / h for b, h in zip(blocks[n], blocks["all"])), 4)}
        print("%-8s host %.3f ms (paired ×%.4f of all), step %.3f ms" % (n, table[n]["host_ms"],
              table[n]["host_vs_all_paired"], table[n]["step_ms"]), flush=True)
    result["parts"] = table
    print("micro µs a call: %s" % timings, flush=True)
    print("RESULT " + json.dumps(result), flush=True)
    if os.environ.get("OUT"):
        tag = "gpumem" if gpumem else "native"
        with open(os.path.join(os.environ["OUT"], "post_stop_parts_%s_%s.json" % (tag, a.model)), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
