#!/usr/bin/env python3
"""Probe (not a test): where the default mode's host time per step goes. ResNet-50 (or --model), one
lockstep round (Note [Lockstep rounds] in ../bench_allocator.py) of native, PyTorch's history ring alone and the
default mode with its parts turned off one by one; then the same with cProfile on, by Python function. Prints a
compact table; the full JSON goes to $OUT/host_parts.json.

    python3 test/gpu/probes/host_parts.py [--model resnet50] [--steps 60]
"""
import argparse
import faulthandler
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "bench_allocator.py")
PARTS = ["native", "native-ring", "gpumem-run-auto", "gpumem-run-auto:GPUMEM_STACKS=0",
         "gpumem-run-auto:GPUMEM_STACKS=0,GPUMEM_MODULE_PATHS=0,GPUMEM_KEEPER=0", "gpumem-run-auto:GPUMEM_SELF_TIME=1"]
PROFILED = ["native:GPUMEM_BENCH_CPROFILE=1", "gpumem-run-auto:GPUMEM_BENCH_CPROFILE=1"]


def bench(configs, model, steps, so):
    out = subprocess.run([sys.executable, BENCH, "--so", so, "--only", "steps", "--models", model, "--rounds", "1",
                          "--steps", str(steps), "--cpus", "6", "--lockstep", "10", "--step-configs"] + configs,
                         capture_output=True, text=True, env=dict(os.environ, GPUMEM_WATCHDOG_S="200"))
    for line in out.stdout.splitlines():
        if line.startswith('{"step_rounds"'):
            return json.loads(line)["step_rounds"][0]
    raise SystemExit("bench failed: %s" % out.stderr[-2000:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--so", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "dist", "native",
                                                 "libgpumem_allocator.so"))
    a = ap.parse_args()
    result = {"parts": bench(PARTS, a.model, a.steps, a.so)}
    for c, r in result["parts"].items():
        m = r.get(a.model, {})
        print("%-70s median %6.2f host %6.2f cpu %6.2f self %s" % (c, m.get("median_ms", 0), m.get("host_ms", 0),
                                                                   m.get("cpu_ms", 0), m.get("self_us_per_step") or r.get("error", "")))
    result["profiled"] = bench(PROFILED, a.model, max(20, a.steps // 2), a.so)
    for c, r in result["profiled"].items():
        print("== cProfile", c)
        for row in (r.get(a.model, {}).get("profile_top") or [])[:30]:
            print("   %7.3f ms own %7.3f cum %8.1f calls  %s" % tuple(row))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "host_parts.json"), "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "280")), exit=True)
    main()
