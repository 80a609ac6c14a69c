#!/usr/bin/env python3
"""On one GPU: `--budget 8MiB` is a cap, from both CLIs, in both allocator modes.

    python3 test/gpu/budget_check.py [--seconds 120] [--node PATH] [--out DIR]

Runs test/gpu/workloads/fast_steps.py (a few ms a step) for --seconds, five runs at once on the one GPU (device time
is scarce; the workload's allocations do not depend on its speed, so each run has the same peak and lines at it):
  auto-node-8MiB  `node dist/cli.js run --budget 8MiB`          (auto: PyTorch's allocator, observed)
  auto-py-8MiB    `python3 -m gpumem run --budget 8MiB`
  auto-py-full    `python3 -m gpumem run --budget 0`            (unbounded: the reference)
  lens-node-8MiB  `node dist/cli.js run --allocator lens --budget 8MiB`
  lens-py-full    `python3 -m gpumem run --allocator lens --budget 0`
A 3-second run first builds the observer once (load_inline, cached). Then `gpumem summary --json` of each capture.
PASS/FAIL: every budgeted capture ≤ 8 MiB and says what it compacted; its peak allocated and its top lines at the
peak (file, line, bytes) equal the unbounded run's of the same mode. Writes OUT/result.json and the summaries.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "310")), exit=True)  # a stall comes back as a stack
import argparse
import glob
import json
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from summaries_check import FAILED, ROOT, check, env, find_node  # noqa: E402

WORKLOAD = os.path.join(HERE, "workloads", "fast_steps.py")
BUDGET = 8 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--node", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "budget"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    node = find_node(a.node)
    e = env()
    cli = [node, os.path.join(ROOT, "dist", "cli.js"), "run"]
    py = [sys.executable, "-m", "gpumem", "run"]
    work = [sys.executable, WORKLOAD, str(a.seconds)]
    runs = {
        "auto-node-8MiB": cli + ["--budget", "8MiB"],
        "auto-py-8MiB": py + ["--budget", "8MiB"],
        "auto-py-full": py + ["--budget", "0"],
        "lens-node-8MiB": cli + ["--allocator", "lens", "--budget", "8MiB"],
        "lens-py-full": py + ["--allocator", "lens", "--budget", "0"],
    }
    t0 = time.time()
    warm = subprocess.run(py + ["--out", os.path.join(a.out, "warm"), "--"] + [sys.executable, WORKLOAD, "3"],
                          capture_output=True, text=True, env=e)
    print("warm-up (observer build) %.0f s rc=%d %s" % (time.time() - t0, warm.returncode, warm.stderr[-600:]), flush=True)

    t0 = time.time()
    procs = {}
    for name, argv in runs.items():
        log = open(os.path.join(a.out, name + ".log"), "w")
        procs[name] = (subprocess.Popen(argv + ["--out", os.path.join(a.out, name), "--"] + work, stdout=log, stderr=subprocess.STDOUT,
                                        env=e, text=True), log)
    for name, (p, log) in procs.items():
        p.wait()
        log.close()
    print("runs %.0f s" % (time.time() - t0), flush=True)

    res = {}
    for name in runs:
        with open(os.path.join(a.out, name + ".log")) as f:
            text = f.read()
        result = [json.loads(l[7:]) for l in text.splitlines() if l.startswith("RESULT ")]
        caps = sorted(glob.glob(os.path.join(a.out, name, "*", "capture-*.gpumem")))
        check(name + " ran and left one capture", procs[name][0].returncode == 0 and result and len(caps) == 1,
              "rc=%s caps=%s %s" % (procs[name][0].returncode, caps, text[-500:]))
        if not caps:
            continue
        js = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", "--json", caps[0]], capture_output=True, text=True)
        txt = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", caps[0]], capture_output=True, text=True)
        with open(os.path.join(a.out, name + ".summary.txt"), "w") as f:
            f.write(txt.stdout + txt.stderr)
        check(name + " summary opens", js.returncode == 0 and txt.returncode == 0, (js.stderr + txt.stderr)[-300:])
        doc = json.loads(js.stdout) if js.returncode == 0 else {}
        budget = doc.get("integrity", {}).get("budget")
        res[name] = dict(bytes=os.path.getsize(caps[0]), workload=result[0] if result else None,
                         peak=[d.get("peak_allocated_bytes") for d in doc.get("devices", [])],
                         top=[(l["file"], l["line"], l["bytes_at_peak"]) for l in doc.get("top_lines", [])],
                         budget=budget, sentences=doc.get("integrity", {}).get("sentences", []))
        r = res[name]
        print("%s: %d steps, %.2f ms/step, capture %d B (%.2f MiB), peak %s, top %s" % (
            name, (r["workload"] or {}).get("steps", 0), (r["workload"] or {}).get("ms_per_step", 0), r["bytes"], r["bytes"] / 2**20,
            r["peak"], r["top"][:3]), flush=True)

    for name, r in res.items():  # the tool's peak is PyTorch's own (Note [Observed block sizes] for auto)
        want = (r["workload"] or {}).get("max_allocated")
        check(name + " peak equals torch.cuda.max_memory_allocated()", bool(r["peak"]) and r["peak"][0] == want,
              "%s vs %s" % (r["peak"], want))
    for mode in ("auto", "lens"):
        full = res.get(mode + "-py-full")
        for name in [n for n in res if n.startswith(mode) and n.endswith("8MiB")]:
            r = res[name]
            check(name + " within 8 MiB", r["bytes"] <= BUDGET, "%d bytes" % r["bytes"])
            check(name + " says what it compacted", bool(r["budget"]) and r["budget"].get("events_compacted", 0) > 0,
                  json.dumps(r["budget"])[:300])
            if full:
                check(name + " peak equals the unbounded run's", r["peak"] == full["peak"] and r["peak"] and r["peak"][0],
                      "%s vs %s" % (r["peak"], full["peak"]))
                check(name + " top lines equal the unbounded run's", r["top"] == full["top"] and len(r["top"]) > 0,
                      "%s vs %s" % (r["top"], full["top"]))
                check(name + " top lines name the workload", any(f.endswith("fast_steps.py") for f, _, _ in r["top"]), str(r["top"][:3]))
    res["failed"] = FAILED
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(res, f, indent=2)
    print("RESULT %s" % ("PASS" if not FAILED else "FAIL: " + ", ".join(FAILED)), flush=True)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
