#!/usr/bin/env python3
"""The replay check, on the development machine, from the varlen stage's results:

    bash test/gpu/run_all.sh varlen            # on the device: GPT-2 with varying lengths, three ways
    python3 test/gpu/replay_validate.py OUT    # here (needs dist/cli.js and node): OUT is that run's $OUT

`gpumem replay --policy pytorch` of the capture made under the lens allocator (OUT/varlen/session) must
predict the peak reserved of the same script run natively (OUT/varlen/native.txt), and `--policy
pytorch-expandable` that of the native run with expandable_segments:True (native-expandable.txt), each within
3 %. Prints one PASS/FAIL line per policy with predicted and measured bytes; exits 1 on any failure."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "200")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import glob
import json
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOLERANCE = 0.03


def result(path):
    for line in open(path):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit("%s has no RESULT line" % path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "")
    node = os.environ.get("GPUMEM_NODE", "node")
    varlen = os.path.join(out, "varlen")
    captures = sorted(glob.glob(os.path.join(varlen, "session", "*", "capture-*.gpumem")))
    if not captures:
        raise SystemExit("no capture under %s/session: run `bash test/gpu/run_all.sh varlen` on the device first" % varlen)
    failed = 0
    for policy, measured_file in (("pytorch", "native.txt"), ("pytorch-expandable", "native-expandable.txt")):
        measured = result(os.path.join(varlen, measured_file))["peak_reserved"]
        r = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "replay", captures[-1], "--policy", policy, "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("gpumem replay failed: %s" % r.stderr)
        predicted = json.loads(r.stdout)["replays"][0]["peak_reserved_bytes"]
        error = abs(predicted - measured) / measured
        ok = error <= TOLERANCE
        failed += not ok
        print("%s %s: predicted peak reserved %d, measured %d (%.2f %%)" % ("PASS" if ok else "FAIL", policy, predicted, measured, 100 * error))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
