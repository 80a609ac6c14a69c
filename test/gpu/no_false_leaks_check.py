#!/usr/bin/env python3
"""The check that a training loop which keeps nothing gets no leak finding and no keeper search, in both
allocator modes: test/gpu/workloads/steady_training.py (GPT-2 small, then ResNet-50) under `gpumem run`, then
`gpumem summary --json` of each capture.

    python3 test/gpu/no_false_leaks_check.py [--steps 60] [--out DIR] [--node PATH]

PyTorch's allocated bytes at step end wander with which cached block each request meets (Note [Keeper reads
requested bytes] in native/python/gpumem/_keeper.py), and so do a line's blocks in the PyTorch-allocator mode's
capture (Note [Leak rule] in src/core/analyses/steps/leaks.ts). PASS per mode and model when the summary has no
leak finding and the keeper made no search. Also printed, for the record: the step ends at which the leak rule
would have fired on the blocks' bytes (the rule before it read requested bytes) and on the requested bytes, per
line, from the capture's step table (test/gpu/step_lines.mjs). Writes no_false_leaks.json; exits 1 on a failure.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "400")), exit=True)
import argparse
import glob
import json
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIN_GROWING_STEPS = 3  # src/core/analyses/steps/leaks.ts


def runs_of_growth(v, growing=MIN_GROWING_STEPS):
    """Whether the leak rule fires on series v: ≥ `growing` strict increases in a row."""
    streak = 0
    for i in range(1, len(v)):
        streak = streak + 1 if v[i] > v[i - 1] else 0
        if streak >= growing:
            return True
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default=os.environ.get("GPUMEM_NODE", "node"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-no-false-leaks"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--models", nargs="+", default=["gpt2", "resnet50"])
    ap.add_argument("--modes", nargs="+", default=["pytorch", "lens"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "native", "python"), PYTHONUNBUFFERED="1",
               GPUMEM_WATCHDOG_S="150")
    results, ok_all = {}, True
    for mode in a.modes:
        for model in a.models:
            name = "%s-%s" % (model, mode)
            session = os.path.join(a.out, name)
            run = subprocess.run([sys.executable, "-m", "gpumem", "run", "--allocator", mode, "--allocator-so",
                                  os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"), "--out", session, "--",
                                  sys.executable, os.path.join(ROOT, "test", "gpu", "workloads", "steady_training.py"),
                                  "--model", model, "--steps", str(a.steps)], capture_output=True, text=True, env=env)
            lines = [l for l in run.stdout.splitlines() if l.startswith("RESULT ")]
            if run.returncode != 0 or not lines:
                print("FAIL %s: the workload failed: %s" % (name, run.stderr[-2000:]))
                ok_all = False
                continue
            result = json.loads(lines[0][7:])
            capture = sorted(glob.glob(os.path.join(session, "*", "capture-*.gpumem")))[-1]
            out = subprocess.run([a.node, os.path.join(ROOT, "dist", "cli.js"), "summary", capture, "--json"],
                                 capture_output=True, text=True)
            s = json.loads(out.stdout)
            dev = [d for d in s["steps"] if d["steps"]][0]
            ends = [str(x["end_us"]) for x in dev["steps"]]
            table = json.loads(subprocess.run([a.node, os.path.join(ROOT, "test", "gpu", "step_lines.mjs"), capture,
                                               str(dev["device"])] + ends, capture_output=True, text=True).stdout)
            by_blocks = ["%s:%d" % (os.path.basename(l["file"]), l["line"]) for l in table["lines"] if runs_of_growth(l["bytesAtEnds"])]
            by_requested = ["%s:%d" % (os.path.basename(l["file"]), l["line"]) for l in table["lines"]
                            if runs_of_growth(l.get("requestedAtEnds", l["bytesAtEnds"]))]
            allocated = result["allocated_at_step_end"]
            r = {"steps": len(dev["steps"]), "leaks": [[l["file"], l["line"], l["growth_per_step_bytes"]] for l in dev["leaks"]],
                 "keeper_searches": result["keeper_searches"],
                 "rule_on_blocks_fires_on": by_blocks, "rule_on_requested_fires_on": by_requested,
                 "allocated_distinct": len(set(allocated[3:])), "allocated_spread": max(allocated[3:]) - min(allocated[3:]),
                 "allocated_rises_3_in_a_row": runs_of_growth(allocated),
                 "requested_distinct": len(set(result["requested_at_step_end"][3:]))}
            ok = r["steps"] == a.steps and not r["leaks"] and r["keeper_searches"] == 0
            ok_all &= ok
            results[name] = r
            print("%s %s: %s" % ("PASS" if ok else "FAIL", name, json.dumps(r)), flush=True)
    with open(os.path.join(a.out, "no_false_leaks.json"), "w") as f:
        json.dump(results, f, indent=1)
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
