#!/usr/bin/env python3
"""On one GPU: a long real training loop under `gpumem run` with the default capture budget (1 GiB).

    python3 test/gpu/long_run_check.py [--minutes 10] [--native-minutes 1] [--node PATH] [--out DIR]

1. native: test/gpu/workloads/long_train.py (GPT-2 small, bf16, AdamW) for --native-minutes; its minute-1 median
   step time is the baseline;
2. lens: the same loop under `python -m gpumem run` (default budget) for --minutes;
3. `gpumem summary` (text and --json, via $GPUMEM_NODE / --node and dist/cli.js) of the capture.
Prints the capture size, the median step time of every minute (lens) against native, and PASS/FAIL for:
  - the capture is at most the budget (1 GiB) and, when the run outgrew it, says what it compacted (integrity.budget);
  - step time does not grow with the run: lens at the last whole minute ≤ lens at minute 1 × 1.10;
  - the capture opens: the summary has the peak, and its top lines at the peak name long_train.py with a line
    number (the peak's allocations with their source lines), and the same for `LONG_RUN_LINE`'s line.
Writes OUT/result.json. Total time ≈ minutes + native minutes + 1.5 min (model setup, summary).
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "730")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import json
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from summaries_check import FAILED, ROOT, SO, check, env, find_node  # noqa: E402

WORKLOAD = os.path.join(HERE, "workloads", "long_train.py")
BUDGET = 1 << 30


def minutes_of(text):
    return {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^MINUTE (\d+) median_ms=([\d.]+) steps=\d+$", text, re.M)}


def marker_line(path, tag):
    with open(path) as f:
        return next(i + 1 for i, line in enumerate(f) if line.rstrip().endswith("# " + tag))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--native-minutes", type=float, default=1.1)
    ap.add_argument("--node", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "long-run"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    node = find_node(a.node)
    e = env()

    t0 = time.time()
    nat = subprocess.run([sys.executable, WORKLOAD, str(a.native_minutes * 60)], capture_output=True, text=True, env=e)
    native = minutes_of(nat.stdout)
    print("native (%.0f s): %s" % (time.time() - t0, native), flush=True)
    check("native loop ran", nat.returncode == 0 and 1 in native, nat.stderr[-400:])

    t0 = time.time()
    session_root = os.path.join(a.out, "session")
    lens = subprocess.run([sys.executable, "-m", "gpumem", "run", "--allocator", "lens", "--allocator-so", SO, "--out", session_root, "--",
                           sys.executable, WORKLOAD, str(a.minutes * 60)], capture_output=True, text=True, env=e)
    lm = minutes_of(lens.stdout)
    print("lens (%.0f s): %s" % (time.time() - t0, lm), flush=True)
    check("lens loop ran", lens.returncode == 0 and "DONE" in lens.stdout, lens.stderr[-400:])
    caps = sorted(os.path.join(r, f) for r, _, fs in os.walk(session_root) for f in fs if f.endswith(".gpumem"))
    check("one capture", len(caps) == 1, str(caps))
    if not caps:
        return finish(a, {})
    cap = caps[0]
    size = os.path.getsize(cap)
    print("capture %s: %.1f MiB" % (cap, size / 2**20), flush=True)
    check("capture within the default budget", size <= BUDGET, "%d bytes" % size)

    last = max(lm) if lm else 0
    if 1 in lm and last > 1 and 1 in native:
        print("step time: native minute 1 %.2f ms; lens minute 1 %.2f ms (x%.3f), minute %d %.2f ms (x%.3f)" % (
            native[1], lm[1], lm[1] / native[1], last, lm[last], lm[last] / native[1]), flush=True)
        check("step time does not grow with the run", lm[last] <= lm[1] * 1.10,
              "minute %d %.2f ms vs minute 1 %.2f ms" % (last, lm[last], lm[1]))
    else:
        check("minutes measured", False, "lens %s native %s" % (lm, native))

    t0 = time.time()
    js = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", "--json", cap], capture_output=True, text=True)
    txt = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", cap], capture_output=True, text=True)
    opened_s = time.time() - t0
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(txt.stdout + txt.stderr)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        f.write(js.stdout + js.stderr)
    doc = json.loads(js.stdout) if js.returncode == 0 else {}
    print("summary (text and --json) in %.1f s" % opened_s, flush=True)
    devs = [d for d in doc.get("devices", []) if d.get("peak_allocated_bytes")]
    check("summary has the peak", bool(devs), js.stderr[-300:])
    lines = doc.get("top_lines", [])
    ours = [l for l in lines if l.get("file", "").endswith("long_train.py") and l.get("line", 0) > 0]
    check("top lines at the peak name long_train.py lines", bool(ours), json.dumps(lines[:3]))
    want = marker_line(WORKLOAD, "LONG_RUN_LINE")
    check("the forward's line holds bytes at the peak", any(l["line"] == want and l.get("bytes_at_peak", 0) > 0 for l in ours),
          "line %d" % want)
    budget = doc.get("integrity", {}).get("budget")
    sentences = doc.get("integrity", {}).get("sentences", [])
    print("integrity: %s" % sentences, flush=True)
    if budget:
        check("budget info says what is aggregated", budget["budget_bytes"] == BUDGET and budget["events_compacted"] > 0,
              json.dumps(budget)[:300])
    finish(a, dict(capture_bytes=size, native_minutes=native, lens_minutes=lm, summary_s=opened_s, budget=budget,
                   peak_bytes=[d["peak_allocated_bytes"] for d in devs], top_lines=lines[:5]))


def finish(a, result):
    result["failed"] = FAILED
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(result, f, indent=2)
    print("RESULT %s" % ("PASS" if not FAILED else "FAIL: " + ", ".join(FAILED)), flush=True)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
