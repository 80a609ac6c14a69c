#!/usr/bin/env python3
"""On one GPU: memory labels (torch.cuda.memory._set_memory_metadata) reach the capture under both
allocator modes, on the allocations PyTorch itself labels.

    python3 test/gpu/metadata_check.py [--out DIR] [--node NODE]

test/gpu/workloads/labels.py natively (PyTorch's own labels: the reference, from the workload's own memory
history), under `python3 -m gpumem run --allocator lens` and under `--allocator pytorch`. Each capture is read with
`node dist/cli.js summary --json` and exported with `node dist/cli.js export CAPTURE --pickle` (the reader's
per-allocation user_metadata). PASS/FAIL per check:
- native: PyTorch labels 12 and 14 MiB "stage=train", 18 MiB "stage=eval", the other thread's 16 MiB and the 22 MiB
  after clearing "" (the label is the calling thread's);
- each mode: the workload's own view equals the native one (_get_memory_metadata() on each thread, its own
  _snapshot()'s user_metadata per size: under the lens that is our shim and our snapshot ring);
- each mode: the exported capture labels each of those allocations as PyTorch did; `summary --json` lists the
  labels (user_metadata rows: stage=train 2 allocations / 26 MiB, stage=eval 1 / 18 MiB) and its text a
  "Memory labels" section;
- pytorch mode: the observer ran as the trace tracker (the C++ path that reads TraceEntry::user_metadata_).
Writes OUT/metadata.json. Needs dist/ (cli.js, native/) and Node ($GPUMEM_NODE or .carry/node/node.xz).
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "280")), exit=True)  # a stall comes back as a stack
import argparse  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from summaries_check import FAILED, ROOT, SO, captures, check, env, find_node, summarize  # noqa: E402

WORKLOAD = os.path.join(HERE, "workloads", "labels.py")
MiB = 1 << 20
# PyTorch's labels (size in MiB → user_metadata) as the workload sets them; the native run must agree.
EXPECTED = {"12": "stage=train", "14": "stage=train", "16": "", "18": "stage=eval", "22": ""}


def run(prefix):
    r = subprocess.run(prefix + [sys.executable, WORKLOAD], capture_output=True, text=True, env=env(), timeout=200)
    res = next((json.loads(line[7:]) for line in r.stdout.splitlines() if line.startswith("RESULT ")), None)
    return r, res


def exported_labels(node, capture, dest):
    """size in MiB → user_metadata of the exported capture's alloc entries of the workload's sizes."""
    out = os.path.join(dest, "export.pickle")
    r = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "export", capture, "--pickle", out], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("gpumem export failed: %s" % (r.stdout + r.stderr)[-1500:])
    with open(out, "rb") as f:
        snap = pickle.load(f)
    labels = {}
    for trace in snap["device_traces"]:
        for e in trace:
            if e["action"] == "alloc" and e["size"] % MiB == 0 and str(e["size"] // MiB) in EXPECTED:
                labels[str(e["size"] // MiB)] = e.get("user_metadata", "")
    return labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-metadata"))
    ap.add_argument("--node", default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    node = find_node(a.node)
    results = {}
    # The PyTorch-allocator mode's observer, built ahead (the first build takes ~25 s on an H100): the run then
    # attaches the trace tracker at once instead of waiting for the build inside the workload.
    b = subprocess.run([sys.executable, "-m", "gpumem", "build-observer", "--json"], capture_output=True, text=True, env=env(), timeout=250)
    results["build_observer"] = (b.stdout + b.stderr)[-600:]
    print("build-observer rc=%d %s" % (b.returncode, b.stdout.strip()[-300:]), flush=True)
    r, native = run([])
    check("native run", r.returncode == 0 and native is not None, r.stderr[-800:] if r.returncode else "")
    native = native or {}
    results["native"] = native
    check("native: PyTorch labels the allocations per calling thread", native.get("snapshot_labels") == EXPECTED,
          json.dumps(native.get("snapshot_labels")))
    for mode in ("lens", "pytorch"):
        dest = os.path.join(a.out, mode)
        os.makedirs(dest, exist_ok=True)
        prefix = [sys.executable, "-m", "gpumem", "run", "--allocator", mode, "--out", os.path.join(dest, "session")]
        if mode == "lens":
            prefix += ["--allocator-so", SO]
        r, res = run(prefix + ["--"])
        res = res or {}
        out = results[mode] = {"workload": res, "stderr_tail": r.stderr[-1500:]}
        check("%s: run" % mode, r.returncode == 0 and bool(res), r.stderr[-800:] if r.returncode else "")
        check("%s: the run was in %s mode" % (mode, mode), res.get("mode") == mode, "mode=%s source=%s" % (res.get("mode"), res.get("source")))
        if mode == "pytorch":
            check("pytorch: the observer is the trace tracker (reads TraceEntry::user_metadata_)", res.get("source") == "tracker",
                  "source=%s" % res.get("source"))
        check("%s: _get_memory_metadata() per thread as natively" % mode,
              (res.get("main_get"), res.get("worker_get")) == (native.get("main_get"), native.get("worker_get")),
              "main %r worker %r (native %r %r)" % (res.get("main_get"), res.get("worker_get"), native.get("main_get"), native.get("worker_get")))
        check("%s: the workload's own _snapshot() labels as natively" % mode, res.get("snapshot_labels") == native.get("snapshot_labels"),
              json.dumps(res.get("snapshot_labels")))
        caps = captures(os.path.join(dest, "session"))
        check("%s: one capture" % mode, len(caps) == 1, str(caps))
        if len(caps) != 1:
            continue
        try:
            got = exported_labels(node, caps[0], dest)
            out["exported_labels"] = got
            check("%s: the capture labels each allocation as PyTorch did" % mode, got == EXPECTED, json.dumps(got))
            text, doc = summarize(node, caps[0], dest, "summary")
        except Exception as exc:  # noqa: BLE001 - a failed reader is a failed check, the other mode still runs
            check("%s: read the capture" % mode, False, str(exc)[-800:])
            continue
        rows = {row["label"]: row for row in doc.get("user_metadata", [])}
        out["user_metadata"] = doc.get("user_metadata")
        check("%s: summary --json lists the labels" % mode, set(rows) == {"stage=train", "stage=eval"}, json.dumps(doc.get("user_metadata")))
        train, ev = rows.get("stage=train", {}), rows.get("stage=eval", {})
        check("%s: stage=train: 2 allocations, 26 MiB" % mode, (train.get("allocations"), train.get("allocated_bytes")) == (2, 26 * MiB),
              json.dumps(train))
        check("%s: stage=eval: 1 allocation, 18 MiB" % mode, (ev.get("allocations"), ev.get("allocated_bytes")) == (1, 18 * MiB), json.dumps(ev))
        check("%s: the summary text has the labels" % mode, "Memory labels" in text and "stage=train" in text and "stage=eval" in text)
    results["failed"] = FAILED
    with open(os.path.join(a.out, "metadata.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("RESULT %s" % ("PASS" if not FAILED else "FAIL: " + ", ".join(FAILED)), flush=True)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
