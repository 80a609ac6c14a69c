#!/usr/bin/env python3
"""Probe (not a test): where the PyTorch-allocator mode's step time goes.

    python3 test/gpu/probes/observer_cost.py [--rounds 3] [--out DIR] [--parts resnet18 overhead]

Configurations run as separate processes, interleaved per round (Note [Interleaved rounds] in
test/gpu/README.md); each prints its median step time and the ratio to native is taken per round, then the
median over rounds:
  native                native PyTorch
  history               native + _record_memory_history(stacks="python") from the start (the cost target's yardstick)
  observed              gpumem run --allocator pytorch (everything on)
  observed-nomodules    + GPUMEM_MODULE_PATHS=0 (no global module hooks)
  observed-nostacks     + --no-stacks (no context recorder, no stack capture)
  observed-bare         no module hooks, no stacks, no keeper: the tracker and recorder alone
Workloads: resnet18 = test/gpu/workloads/pytorch_mode/resnet_benchmark.py (cudnn.benchmark, ~6 ms steps);
overhead = test/gpu/workloads/pytorch_mode/overhead.py (GPT-2 small and ResNet-50).
"""
import argparse
import faulthandler
import json
import os
import statistics
import subprocess
import sys
import tempfile

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "560")), exit=True)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
WL = os.path.join(ROOT, "test", "gpu", "workloads", "pytorch_mode")
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")

CONFIGS = {
    "native": ([], {}),
    "history": (None, {}),
    "observed": (["--allocator", "pytorch"], {}),
    "observed-nomodules": (["--allocator", "pytorch"], {"GPUMEM_MODULE_PATHS": "0"}),
    "observed-nostacks": (["--allocator", "pytorch", "--no-stacks"], {}),
    "observed-bare": (["--allocator", "pytorch", "--no-stacks"], {"GPUMEM_MODULE_PATHS": "0", "GPUMEM_KEEPER": "0"}),
}
PARTS = {"resnet18": ["resnet_benchmark.py", "60"], "overhead": ["overhead.py"], "micro": ["alloc_micro.py"]}


def run(config, argv, out):
    gp, extra = CONFIGS[config]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_") or k == "GPUMEM_WATCHDOG_S"}
    env.update(extra)
    script = [os.path.join(WL, argv[0])] + argv[1:]
    if config == "history":
        cmd = [sys.executable] + script + ["--history"]
    elif gp == []:
        cmd = [sys.executable] + script
    else:
        env["PYTHONPATH"] = os.path.join(ROOT, "native", "python")
        cmd = [sys.executable, "-m", "gpumem", "run", "--allocator-so", SO, "--out", tempfile.mkdtemp(dir=out)] + gp + ["--"] + script
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=WL)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            return {k: v for k, v in r.items() if isinstance(v, float)} or {"median_ms": r["median_ms"]}
    raise RuntimeError("%s %s: rc %d\n%s" % (config, argv, p.returncode, p.stderr[-2000:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "observer-cost"))
    ap.add_argument("--parts", nargs="+", default=list(PARTS))
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = {}
    run("observed", ["resnet_benchmark.py", "5"], a.out)  # builds the observer once, untimed
    for part in a.parts:
        rows = []
        for r in range(a.rounds):
            order = a.configs[r % len(a.configs):] + a.configs[:r % len(a.configs)]
            row = {c: run(c, PARTS[part], a.out) for c in order}
            rows.append(row)
            print(part, "round", r, json.dumps(row), flush=True)
        keys = sorted(rows[0]["native"])
        table = {}
        for c in a.configs:
            table[c] = {k: round(statistics.median(row[c][k] / row["native"][k] for row in rows), 4) for k in keys}
            table[c]["ms"] = {k: [round(row[c][k], 3) for row in rows] for k in keys}
        results[part] = table
        print("\n%s: median over %d rounds of the per-round ratio to native" % (part, a.rounds))
        for c in a.configs:
            print("  %-20s %s   ms %s" % (c, "  ".join("%s ×%.3f" % (k, table[c][k]) for k in keys), table[c]["ms"]), flush=True)
    with open(os.path.join(a.out, "observer_cost.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
