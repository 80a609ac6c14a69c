#!/usr/bin/env python3
"""CPU benchmark of the recording hot path (no GPU): the lens allocator on its simulated device, called
through ctypes (which, like PyTorch's op bindings, releases the GIL around the call) from a Python "model"
whose allocations come from many call sites at a realistic depth. Not a test: it prints figures.

    make -C native/allocator && python3 test/bench/allocator/stack_overhead.py [--steps 200] [--depth 22]

Configurations, each in its own process (the allocator is configured once per process):
  none       nothing recorded (no capture file, no trace ring): the allocator alone
  ring       no capture file; the trace ring for PyTorch-format snapshots, with stacks (the default
             of a bare install_lens)
  events     capture file, no stacks
  stacks     capture file with Python stacks (what `gpumem run` does)
The figure is ns per malloc+free pair, the median of rounds; "stacks - none" is what recording costs a
workload per allocation, and times allocations per step gives its share of a step.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "native", "recorder"))
import common  # noqa: E402


def child(config, steps, depth, sites):
    lib = common.load()
    cfg = {"sim_capacity": 8 << 30}
    if config in ("none", "events-noring", "stacks-noring"):
        cfg["trace_entries"] = 0
    if config not in ("none", "ring"):
        cfg["capture_path"] = os.path.join(tempfile.mkdtemp(prefix="gpumem-bench-"), "c.gpumem")
        cfg["stacks"] = config.startswith("stacks")
    common.configure(lib, **cfg)
    malloc, free = lib.gpumem_malloc, lib.gpumem_free
    sizes = [(i * 7919) % (4 << 20) + 512 for i in range(sites)]

    # One function per call site, as a model's layers are distinct code: each allocates once and keeps
    # its output alive until the "step" ends, like activations saved for backward.
    live = []

    def make_op(i):
        src = "def op_%d(live):\n    live.append(malloc(%d, 0, None))\n" % (i, sizes[i])
        ns = {"malloc": malloc}
        exec(compile(src, "<model layer %d>" % i, "exec"), ns)
        return ns["op_%d" % i]

    ops = [make_op(i) for i in range(sites)]

    def nest(level, fn):
        return fn() if level == 0 else nest(level - 1, fn)

    def forward():
        for op in ops:
            op(live)

    def step():
        nest(depth, forward)
        for p in live:
            free(p, 0, 0, None)
        live.clear()

    for _ in range(20):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        step()
        times.append((time.perf_counter_ns() - t0) / sites)
    info = common.stack_info(lib)
    lib.gpumem_shutdown(0)
    return {"ns_per_pair": statistics.median(times), "min": min(times), "stack_info": info}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--depth", type=int, default=22, help="Python frames between the step and the layers")
    ap.add_argument("--sites", type=int, default=300, help="distinct allocation sites per step")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.steps, args.depth, args.sites)))
        return 0
    configs = ("none", "ring", "events", "events-noring", "stacks", "stacks-noring")
    rounds = []
    for _ in range(args.rounds):
        r = {}
        for c in configs:
            p = subprocess.run([sys.executable, __file__, "--child", c, "--steps", str(args.steps), "--depth",
                                str(args.depth), "--sites", str(args.sites)], capture_output=True, text=True)
            line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            if not line:
                sys.exit("child %s failed: %s" % (c, p.stderr[-2000:]))
            res = json.loads(line[0][7:])
            r[c] = res["ns_per_pair"]
            if c == "stacks":
                info = res["stack_info"]
        rounds.append(r)
    med = {c: statistics.median(r[c] for r in rounds) for c in configs}
    print(json.dumps({"ns_per_malloc_free": {c: round(v) for c, v in med.items()},
                      "recording_cost_ns": {c: round(med[c] - med["none"]) for c in configs[1:]},
                      "depth": args.depth, "sites": args.sites, "stack_info": info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
