#!/usr/bin/env python3
"""The what-if GPU check: what the tool says the allocator would do, against what it then does.

    python3 test/gpu/what_if_check.py [--node PATH] [--out DIR]

Needs dist/ (cli.js and native/) built on the development machine and Node.js (carried: the device has none).
Two runs of test/gpu/workloads/what_if_state.py under `gpumem run` (the lens allocator, default policy):
 1. empty_cache: `gpumem summary --json` of the live capture says how much empty_cache() would release
    (Note [What-if]); then the Empty Cache command goes through the control socket: released == predicted.
 2. largest request: the same summary's largest request served without the device growing; the workload
    allocates exactly that: the device's free memory (cudaMemGetInfo) and reserved memory do not change.
Prints PASS/FAIL lines and a JSON summary; exits 1 on any failure."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "220")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import glob
import json
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOAD = os.path.join(ROOT, "test", "gpu", "workloads", "what_if_state.py")


def start(session_root, extra=()):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "native", "python"), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "gpumem", "run", "--allocator", "lens", "--allocator-so", os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"),
           "--out", session_root, "--", sys.executable, WORKLOAD, *extra]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    if not line.startswith("READY"):
        p.kill()
        raise RuntimeError("workload did not get ready: %r %s" % (line, p.stderr.read()[-2000:]))
    sessions = sorted(glob.glob(os.path.join(session_root, "*")))
    capture = glob.glob(os.path.join(sessions[-1], "capture-*.gpumem"))[0]
    time.sleep(0.5)  # the writer flushes every 50 ms
    return p, sessions[-1], capture, json.loads(line.split(" ", 1)[1])


def summary(node, capture):
    out = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", capture, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("gpumem summary failed: %s" % out.stderr[-2000:])
    s = json.loads(out.stdout)
    dev = [d for d in s["devices"] if d.get("what_if")][0]
    return dev["what_if"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default=os.environ.get("GPUMEM_NODE", "node"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-what-if"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results, failed = {}, 0

    # 1. empty_cache() released == predicted.
    p, session, capture, ready = start(os.path.join(args.out, "empty"))
    w = summary(args.node, capture)
    reply = subprocess.run([sys.executable, "-m", "gpumem", "empty-cache", "--session", session, "--json"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "native", "python")))
    r = json.loads(reply.stdout.splitlines()[0])
    released = r["reserved_before"] - r["reserved_after"]
    ok = released == w["empty_cache_releases_bytes"] and r["reserved_before"] == w["reserved_bytes"]
    failed += not ok
    results["empty_cache"] = {"predicted": w["empty_cache_releases_bytes"], "released": released, "reserved_before": r["reserved_before"],
                              "summary_reserved": w["reserved_bytes"], "policy": w["policy"], "ok": ok}
    print("%s empty_cache: predicted %d bytes, released %d (reserved %d -> %d, policy %s)"
          % ("PASS" if ok else "FAIL", w["empty_cache_releases_bytes"], released, r["reserved_before"], r["reserved_after"], w["policy"]))
    p.stdin.write("exit\n")
    p.stdin.flush()
    p.wait(timeout=60)

    # 2. The largest request said to be served without growth maps no new device memory.
    for at_peak in (False, True):
        p, session, capture, ready = start(os.path.join(args.out, "largest-%s" % ("peak" if at_peak else "below")),
                                           ["--at-peak"] if at_peak else [])
        w = summary(args.node, capture)
        size = w["largest_without_growth_bytes"]
        p.stdin.write("alloc %d\n" % size)
        p.stdin.flush()
        line = p.stdout.readline()
        res = json.loads(line.split(" ", 1)[1])
        grew = res["before"]["device_free"] - res["after"]["device_free"]
        ok = res["ok"] and grew == 0 and res["after"]["reserved"] == res["before"]["reserved"] and size > 0
        failed += not ok
        key = "largest_at_peak" if at_peak else "largest"
        results[key] = {"predicted_largest": size, "device_free_change": -grew, "reserved_before": res["before"]["reserved"],
                        "reserved_after": res["after"]["reserved"], "ok": ok, "error": res["error"], "policy": w["policy"]}
        print("%s %s: allocated %d bytes; device free changed by %d, reserved %d -> %d%s"
              % ("PASS" if ok else "FAIL", key, size, -grew, res["before"]["reserved"], res["after"]["reserved"],
                 "" if res["ok"] else " (" + res["error"] + ")"))
        p.stdin.write("exit\n")
        p.stdin.flush()
        p.wait(timeout=60)
    with open(os.path.join(args.out, "what_if_check.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("%d passed, %d failed" % (3 - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
