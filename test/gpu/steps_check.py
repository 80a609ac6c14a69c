#!/usr/bin/env python3
"""The GPU check for steps and leaks: test/gpu/workloads/leak_history.py under `gpumem run`, then
`gpumem summary --json` of its capture.

    python3 test/gpu/steps_check.py [--node PATH] [--out DIR]

PASS when: the tool finds as many steps as the loop ran (from the bootstrap's optimizer/backward facts, no user
code); it reports a leak finding on the forward line; the finding's growth per step is within 5 % of the growth
of torch.cuda.memory_allocated() per step measured in the workload (median of steps 3..N); allocated at each
step end in the summary equals the workload's own figure; the finding carries the keeper the bootstrap found (Note
[Leak keeper]): the container `history`, the `history.append(loss)` line, tied to the finding by address, with as many
tensors as were kept when the search armed (≥ 3) and their bytes (≥ 512 B each). Writes steps_check.json; exits 1 on
any failure."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "160")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import glob
import json
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default=os.environ.get("GPUMEM_NODE", "node"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-steps"))
    ap.add_argument("--steps", type=int, default=12)
    # With --model convnet (backward(retain_graph=True) keeps each step's saved activations alive
    # through the graphs `history` holds), the keeper must also be named on every leaking line, and those lines'
    # bytes counted as activations kept by the container, not "other".
    ap.add_argument("--model", choices=("mlp", "convnet"), default="mlp")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "native", "python"), PYTHONUNBUFFERED="1")
    session_root = os.path.join(a.out, "leak")
    run = subprocess.run([sys.executable, "-m", "gpumem", "run", "--allocator", "lens", "--allocator-so", os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"),
                          "--out", session_root, "--", sys.executable, os.path.join(ROOT, "test", "gpu", "workloads", "leak_history.py"),
                          "--steps", str(a.steps), "--model", a.model], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.exit("workload failed: %s" % run.stderr[-3000:])
    result = json.loads([l for l in run.stdout.splitlines() if l.startswith("RESULT ")][0][7:])
    capture = sorted(glob.glob(os.path.join(session_root, "*", "capture-*.gpumem")))[-1]
    out = subprocess.run([a.node, os.path.join(ROOT, "dist", "cli.js"), "summary", capture, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("gpumem summary failed: %s" % out.stderr[-3000:])
    text = subprocess.run([a.node, os.path.join(ROOT, "dist", "cli.js"), "summary", capture], capture_output=True, text=True).stdout
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(text)
    s = json.loads(out.stdout)
    dev = [d for d in s["steps"] if d["steps"]][0]
    measured = result["allocated_at_step_end"]
    growth = statistics.median(b - a_ for a_, b in zip(measured[2:], measured[3:]))
    # the script's findings, the forward line's first (the MLP leaks there alone; the convnet also on each line of
    # its forward whose activations the kept graphs save)
    leaks = sorted((l for l in dev["leaks"] if l["file"].endswith("leak_history.py")), key=lambda l: l["line"] != result["forward_line"])
    tool_ends = [r["allocated_at_end_bytes"] for r in dev["steps"]]
    keeper = leaks[0].get("keeper") if leaks else None
    k = keeper or {}
    checks = {
        "steps_found": [len(dev["steps"]), a.steps, dev["source"]],
        "leak_on_forward_line": [l["line"] for l in dev["leaks"]] + ["forward line %d" % result["forward_line"]],
        # every leaking line's growth together (the convnet leaks on each forward line its graphs save) against
        # the growth of torch.cuda.memory_allocated() at step end
        "growth_per_step": [sum(l["growth_per_step_bytes"] for l in leaks) if leaks else None, growth],
        "allocated_at_step_end": [tool_ends, measured],
        "keeper_names_append_line": [k.get("file"), k.get("line"), k.get("container"), k.get("match"), k.get("code"),
                                     "append line %d" % result["keeper_line"]],
        "keeper_holds_the_kept_losses": [k.get("tensors"), k.get("bytes"), k.get("step"), k.get("complete")],
    }
    ok = {
        "steps_found": len(dev["steps"]) == a.steps and dev["source"] == "optimizer",
        "leak_on_forward_line": bool(leaks) and leaks[0]["line"] == result["forward_line"],
        "growth_per_step": bool(leaks) and growth > 0 and abs(sum(l["growth_per_step_bytes"] for l in leaks) - growth) <= 0.05 * growth,
        "allocated_at_step_end": tool_ends == measured,
        "keeper_names_append_line": bool(keeper) and k["file"].endswith("leak_history.py") and k["line"] == result["keeper_line"]
        and k["container"] == "history" and k["match"] == "address",
        # armed at a step end s (the 3rd growing one), confirmed at s + 1: the s losses kept by then, 512 B each at least
        "keeper_holds_the_kept_losses": bool(keeper) and k["tensors"] >= 3 and k["tensors"] == k["step"] - 1
        and k["bytes"] >= 512 * k["tensors"],
    }
    if a.model == "convnet":
        big = [l for l in dev["leaks"] if l["growth_per_step_bytes"] >= 1 << 20]
        checks["keeper_on_every_large_leak"] = [[l["line"], l["growth_per_step_bytes"], bool(l.get("keeper")), l.get("category"),
                                                 l.get("kept_bytes")] for l in dev["leaks"]]
        ok["keeper_on_every_large_leak"] = bool(big) and all(l.get("keeper") for l in big)
        ok_kept = bool(big) and all(l.get("category") == "activation" and l.get("kept_bytes", 0) >= 0.9 * l["bytes_at_last_end"] for l in big)
        checks["kept_as_activations"] = [[l["line"], l.get("category"), l.get("kept_bytes"), l["bytes_at_last_end"]] for l in big]
        ok["kept_as_activations"] = ok_kept
    for k in checks:
        print("%s %s: %s" % ("PASS" if ok[k] else "FAIL", k, json.dumps(checks[k])))
    cost = [json.loads(l[7:]) for l in run.stdout.splitlines() if l.startswith("KEEPER ")]
    with open(os.path.join(a.out, "steps_check.json"), "w") as f:
        json.dump({"checks": checks, "ok": ok, "keeper_cost": cost[0] if cost else None}, f, indent=1)
    print("\n".join(l for l in text.splitlines() if l.startswith(("Steps", "  Leak", "  No leak"))))
    sys.exit(0 if all(ok.values()) else 1)


if __name__ == "__main__":
    main()
