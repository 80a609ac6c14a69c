#!/usr/bin/env python3
"""The GPU check of `gpumem advise`: the advice is applied and the measured peak compared with the
prediction (target: within 10 %).

    python3 test/gpu/advice_check.py [--node PATH] [--out DIR] [--capacity-gib 24]

1. Checkpointing and batch size: test/gpu/workloads/advice_train.py (GPT-2 small, seq 512) under `gpumem run` at
   batch 8 and batch 16; `gpumem advise A.gpumem B.gpumem --capacity 24GiB --json`.
   (a) the checkpoint item's module: the script run natively at batch 8 with --checkpoint MODULE; measured
       torch.cuda.max_memory_allocated() against predicted peak allocated;
   (b) the batch-size item's batch: run natively (expandable_segments:True, like the lens runs measured) at
       that batch with the device capped at the capacity (set_per_process_memory_fraction); it must not run out
       of memory, and its peak allocated is compared.
2. Allocator policy: test/gpu/workloads/gpt2_varlen.py under `gpumem run --segments fixed` (PyTorch's policy);
   `gpumem advise --json`; (c) the policy it recommends, run natively with the item's environment
   (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): measured max_memory_reserved() against predicted peak
   reserved. The unchanged script is run natively too (INFO: the capture's own peak against it).
Prints one PASS/FAIL line per check and writes advice_check.json (and the advice JSON) under --out. Exits 1
on any FAIL; an advice item missing where the check expects one is a FAIL (the tool did not see what it
should), stated with the advice's notOffered reasons."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "540")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import glob
import json
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
TRAIN = os.path.join(ROOT, "test", "gpu", "workloads", "advice_train.py")
VARLEN = os.path.join(ROOT, "test", "gpu", "workloads", "gpt2_varlen.py")
TOL = 0.10
GiB = 1 << 30
results = {"checks": {}, "commands": []}
failed = []


def sh(argv, env_extra=None, timeout=400):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env_extra or {}))
    results["commands"].append(" ".join(["%s=%s" % kv for kv in (env_extra or {}).items()] + [os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in argv]))
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv[:6]), r.returncode, r.stderr[-3000:]))
    return r.stdout


def result_of(stdout):
    return json.loads([l for l in stdout.splitlines() if l.startswith("RESULT ")][-1][7:])


def lens(out, script_args, *flags):
    root = os.path.join(out, "sessions")
    before = set(glob.glob(os.path.join(root, "*", "capture-*.gpumem")))
    stdout = sh([sys.executable, "-m", "gpumem", "run", "--allocator", "lens", "--allocator-so", SO, "--out", root, *flags, "--", sys.executable, *script_args],
                {"PYTHONPATH": os.path.join(ROOT, "native", "python")})
    new = sorted(set(glob.glob(os.path.join(root, "*", "capture-*.gpumem"))) - before, key=os.path.getmtime)
    return result_of(stdout), new[-1]


def advise(node, out, name, *args):
    text = sh([node, os.path.join(ROOT, "dist", "cli.js"), "advise", *args, "--json"])
    with open(os.path.join(out, "%s.json" % name), "w") as f:
        f.write(text)
    with open(os.path.join(out, "%s.txt" % name), "w") as f:
        f.write(sh([node, os.path.join(ROOT, "dist", "cli.js"), "advise", *args]))
    return json.loads(text)


def compare(name, predicted, measured, extra=None, info=False):
    """info: a figure worth seeing beside the checks (not a prediction the advice offers): INFO, never FAIL"""
    err = abs(measured - predicted) / measured if measured else 1.0
    ok = err <= TOL and not (extra or {}).get("oom")
    results["checks"][name] = dict(predicted=predicted, measured=measured, error=err, ok=ok, info=info, **(extra or {}))
    print("%s %s: predicted %.3f GiB, measured %.3f GiB (%.2f %% apart)%s" % (
        "INFO" if info else "PASS" if ok else "FAIL", name, predicted / GiB, measured / GiB, 100 * err,
        "" if not extra else " " + json.dumps(extra)))
    if not ok and not info:
        failed.append(name)


def missing(name, advice, why):
    results["checks"][name] = {"ok": False, "missing": why, "notOffered": advice.get("notOffered")}
    print("FAIL %s: %s; not offered: %s" % (name, why, advice.get("notOffered")))
    failed.append(name)


def item(advice, *kinds):
    return next((i for i in advice["items"] if i["kind"] in kinds), None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default=os.environ.get("GPUMEM_NODE", "node"))
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "advice"))
    ap.add_argument("--capacity-gib", type=int, default=24)
    ap.add_argument("--seq", type=int, default=512)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cap = a.capacity_gib * GiB
    seq = ["--seq", str(a.seq), "--steps", "4"]

    # 1. checkpointing and batch size
    # batches 8 and 16: at batch 4 the optimizer step's peak can rival the forward's, and the line is only
    # about the batch-driven peak
    r4, cap4 = lens(a.out, [TRAIN, "--batch", "8", *seq])
    r8, cap8 = lens(a.out, [TRAIN, "--batch", "16", *seq])
    results["baseline"] = {"lens_b8": r4, "lens_b16": r8}
    adv = advise(a.node, a.out, "advice-train", cap4, cap8, "--batches", "8,16", "--capacity", "%dGiB" % a.capacity_gib)
    native4 = result_of(sh([sys.executable, TRAIN, "--batch", "8", *seq]))
    results["baseline"]["native_b8"] = native4
    # the capture's own peak allocated is what the predictions start from: it must be the native one
    compare("baseline-peak-allocated (capture vs native)", adv["recordedPeakAllocatedBytes"], native4["peak_allocated"], info=True)
    ck = item(adv, "checkpoint")
    if ck:
        module = ck["apply"]["checkpointModule"]
        r = result_of(sh([sys.executable, TRAIN, "--batch", "8", *seq, "--checkpoint", module]))
        compare("checkpoint %s" % module, ck["predicted"]["peakAllocatedBytes"], r["peak_allocated"], {"wrapped": r["wrapped"], "oom": r["oom"]})
    else:
        missing("checkpoint", adv, "no checkpoint item")
    bs = item(adv, "batch-size")
    if bs:
        b = bs["apply"]["batch"]
        # expandable segments: the measured runs ran under the lens allocator (expandable segments), and the
        # advice assumes the same allocator settings
        r = result_of(sh([sys.executable, TRAIN, "--batch", str(b), *seq, "--capacity", str(cap)], {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}))
        compare("batch %d fits %d GiB" % (b, a.capacity_gib), bs["predicted"]["peakAllocatedBytes"], r["peak_allocated"],
                {"oom": r["oom"], "peak_reserved": r["peak_reserved"], "predicted_reserved": bs["predicted"]["peakReservedBytes"]})
    else:
        missing("batch-size", adv, "no batch-size item")

    # 2. allocator policy
    steps = ["--steps", "20"]
    rv, capv = lens(a.out, [VARLEN, *steps], "--segments", "fixed")
    advp = advise(a.node, a.out, "advice-varlen", capv)
    nat = result_of(sh([sys.executable, VARLEN, *steps]))
    results["baseline"]["varlen_lens_fixed"] = rv
    results["baseline"]["varlen_native"] = nat
    compare("recorded peak reserved under --segments fixed vs native", advp["recordedPeakReservedBytes"], nat["peak_reserved"], info=True)
    pol = item(advp, "allocator-policy", "avoid-oom")
    if pol:
        env = dict([pol["apply"]["env"].split("=", 1)]) if pol["apply"].get("env") else {}
        if pol["apply"]["policy"].startswith("lens"):
            r, _ = lens(a.out, [VARLEN, *steps], *(["--no-trim"] if pol["apply"]["policy"] == "lens-no-trim" else []))
        else:
            r = result_of(sh([sys.executable, VARLEN, *steps], env))
        compare("policy %s" % pol["apply"]["policy"], pol["predicted"]["peakReservedBytes"], r["peak_reserved"], {"env": env})
    else:
        missing("allocator-policy", advp, "no allocator-policy item")

    results["pass"] = not failed
    with open(os.path.join(a.out, "advice_check.json"), "w") as f:
        json.dump(results, f, indent=2)
    print("PASS advice" if not failed else "FAIL advice: %s" % ", ".join(failed))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
