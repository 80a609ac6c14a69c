#!/usr/bin/env python3
"""On one GPU: the monitors people already use keep working under `gpumem run`.

    python3 test/gpu/monitors_check.py [--out DIR]

test/gpu/workloads/lightning_stats.py (Lightning, DeviceStatsMonitor, CSVLogger) natively, under
`python3 -m gpumem run --allocator pytorch` and under `--allocator lens`. PASS/FAIL:
- each run logs the same memory-stat keys as the native run (DeviceStatsMonitor's torch.cuda.memory_stats());
- PyTorch-allocator mode: the last logged allocated_bytes.all.current / reserved_bytes.all.current / peaks equal the
  native run's (the same allocator, untouched);
- lens: the logged allocated figures equal the native run's (the lens counts blocks as PyTorch does; reserved is the
  lens's own and is only printed).
Writes OUT/monitors.json.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "280")), exit=True)  # a stall comes back as a stack
import argparse
import json
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from summaries_check import FAILED, SO, check, env  # noqa: E402

WORKLOAD = os.path.join(HERE, "workloads", "lightning_stats.py")


def run(argv):
    out = tempfile.mkdtemp(prefix="gpumem-monitors-")
    r = subprocess.run(argv + [sys.executable, WORKLOAD, out], capture_output=True, text=True, env=env(), timeout=200)
    res = next((json.loads(l[7:]) for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    return r, res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-monitors"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = {}
    for name, prefix in (("native", []),
                         ("pytorch", [sys.executable, "-m", "gpumem", "run", "--allocator", "pytorch", "--out", os.path.join(a.out, "pt"), "--"]),
                         ("lens", [sys.executable, "-m", "gpumem", "run", "--allocator", "lens", "--allocator-so", SO, "--out", os.path.join(a.out, "lens"), "--"])):
        r, res = run(prefix)
        check(name + " run logged memory stats", r.returncode == 0 and res and res["keys"], (r.stderr[-600:] if r.returncode else ""))
        results[name] = res
    nat = results.get("native") or {}
    for name in ("pytorch", "lens"):
        res = results.get(name) or {}
        missing = sorted(set(nat.get("keys", [])) - set(res.get("keys", [])))
        extra = sorted(set(res.get("keys", [])) - set(nat.get("keys", [])))
        check("%s logs the native keys (%d)" % (name, len(nat.get("keys", []))), bool(nat.get("keys")) and not missing and not extra,
              "missing %s extra %s" % (missing[:5], extra[:5]))
        want = ["allocated_bytes.all.current", "allocated_bytes.all.peak"] + (["reserved_bytes.all.current", "reserved_bytes.all.peak"] if name == "pytorch" else [])
        for w in want:
            k = next((k for k in nat.get("last", {}) if k.endswith(w)), None)
            got, exp = (res.get("last", {}).get(k), nat.get("last", {}).get(k)) if k else (None, None)
            check("%s %s equals native" % (name, w), k is not None and got == exp, "%s vs %s" % (got, exp))
        print("%s: reserved_bytes.all.peak %s (native %s)" % (name, next((v for k, v in res.get("last", {}).items() if k.endswith("reserved_bytes.all.peak")), None),
                                                             next((v for k, v in nat.get("last", {}).items() if k.endswith("reserved_bytes.all.peak")), None)), flush=True)
    results["failed"] = FAILED
    with open(os.path.join(a.out, "monitors.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("RESULT %s" % ("PASS" if not FAILED else "FAIL: " + ", ".join(FAILED)), flush=True)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
