#!/usr/bin/env python3
"""Issue 26's check of figures only (Note [Figures only] in native/python/gpumem/_observe.py) and of the reader's
figures for a capture without events (Note [Figures from stats] in native/addon/src/model.h), on real torch.

    python3 test/gpu/figures_only_check.py [--out DIR]          (stage `figures-only` of run_all.sh)

A ResNet-18 training loop (bf16 autocast, 30 steps), natively and under `python3 -m gpumem run`:
 1 same-run      `--figures-only`: the same losses as natively, bit for bit, and the same max_memory_allocated()
 2 no-events     its capture's header says "events": false; it holds no allocation or segment event and no tag, and
                 it holds PyTorch's figures (REC_STATS)
 3 peak          `gpumem summary --json` of it (dist/cli.js with $GPUMEM_NODE): the peak allocated is the workload's
                 own torch.cuda.max_memory_allocated(), and the summary says what was not recorded
 4 async         PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync under the default settings (the stats source, no
                 events either): the same peak rule
Prints PASS/FAIL/SKIP per item; JSON in $OUT/figures-only/result.json. A watchdog (faulthandler) ends the script with
every thread's stack before the stage's limit.
"""
import argparse
import faulthandler
import glob
import json
import os
import subprocess
import sys
import tempfile

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "280")), exit=True)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY_DIR = os.path.join(ROOT, "native", "python")
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
sys.path.insert(0, PY_DIR)
from gpumem import _format as F  # noqa: E402

WORKLOAD = r"""
import faulthandler, json, os, time
faulthandler.dump_traceback_later(120, exit=True)
import torch, torchvision
torch.manual_seed(0)
model = torchvision.models.resnet18().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 3, 224, 224, device="cuda")
y = torch.randint(0, 1000, (64,), device="cuda")
losses = []
for _ in range(30):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
torch.cuda.synchronize()
time.sleep(0.6)  # a sample of the figures after the last step (every 200 ms)
print("RESULT " + json.dumps({"losses": losses, "max_allocated": torch.cuda.max_memory_allocated(),
                              "backend": torch.cuda.memory.get_allocator_backend()}), flush=True)
"""


def run(script, out_dir, tracked, extra_env=None, flags=()):
    env = dict(os.environ, PYTHONPATH=PY_DIR, **(extra_env or {}))
    cmd = [sys.executable, script]
    if tracked:
        cmd = [sys.executable, "-m", "gpumem", "run", "--allocator-so", SO, "--out", out_dir, *flags, "--", *cmd[1:]]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=200)
    result = next((json.loads(l[7:]) for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    captures = sorted(glob.glob(os.path.join(out_dir, "*", "*.gpumem"))) if tracked else []
    return r, result, captures[-1] if captures else None


def records_of(path):
    with open(path, "rb") as f:
        data = f.read()
    _, _, header, at = F.read_header(data)
    return header, [(t, p) for _, t, _, _, p in F.records(data, at)]


def summary_json(capture):
    node = os.environ.get("GPUMEM_NODE")
    if not node:
        return None
    r = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", "--json", capture], capture_output=True,
                       text=True, timeout=120)
    return json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr[-400:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", tempfile.mkdtemp()))
    a = ap.parse_args()
    out = os.path.join(a.out, "figures-only")
    os.makedirs(out, exist_ok=True)
    script = os.path.join(out, "train_resnet18.py")
    with open(script, "w") as f:
        f.write(WORKLOAD)
    res = {}

    def say(name, ok, detail):
        res[name] = {"ok": ok, "detail": detail}
        print("%s %s: %s" % ("SKIP" if ok is None else "PASS" if ok else "FAIL", name, detail), flush=True)

    rn, native, _ = run(script, out, False)
    rf, fig, cap = run(script, os.path.join(out, "figures"), True, flags=["--figures-only"])
    if native is None or fig is None or cap is None:
        say("same-run", False, "a run failed: native rc %d, figures-only rc %d\n%s" % (rn.returncode, rf.returncode,
                                                                                      (rn.stderr + rf.stderr)[-1500:]))
    else:
        same = native["losses"] == fig["losses"] and native["max_allocated"] == fig["max_allocated"]
        say("same-run", same, "losses equal: %s; max_memory_allocated %d natively, %d under figures only" % (
            native["losses"] == fig["losses"], native["max_allocated"], fig["max_allocated"]))
        header, recs = records_of(cap)
        kinds = {t for t, _ in recs}
        events = kinds & {F.REC_ALLOC, F.REC_FREE_REQUESTED, F.REC_FREE_COMPLETED, F.REC_SEGMENT_ALLOC, F.REC_TAG}
        stats = [F.StatsRec.unpack_dict(p) for t, p in recs if t == F.REC_STATS]
        say("no-events", header.get("events") is False and not events and bool(stats),
            "header events=%r, event or tag record types present: %s, %d REC_STATS, last peak %d" % (
                header.get("events"), sorted(events), len(stats), stats[-1]["peak_allocated"] if stats else -1))
        s = summary_json(cap)
        if s is None:
            say("peak", None, "no $GPUMEM_NODE to run dist/cli.js")
        else:
            dev = (s.get("devices") or [{}])[0]
            said = (s.get("identity") or {}).get("not_recorded") or []
            say("peak", dev.get("peak_allocated_bytes") == fig["max_allocated"] and bool(said),
                "summary peak %s against max_memory_allocated %d; not recorded: %s" % (
                    dev.get("peak_allocated_bytes"), fig["max_allocated"], said[:1] or s.get("error")))
    ra, asy, acap = run(script, os.path.join(out, "async"), True,
                        extra_env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    if asy is None or acap is None:
        say("async", False, "the cudaMallocAsync run failed (rc %d)\n%s" % (ra.returncode, ra.stderr[-1500:]))
    else:
        s = summary_json(acap)
        if s is None:
            say("async", None, "no $GPUMEM_NODE to run dist/cli.js")
        else:
            dev = (s.get("devices") or [{}])[0]
            say("async", asy["backend"] == "cudaMallocAsync" and dev.get("peak_allocated_bytes") == asy["max_allocated"],
                "backend %s; summary peak %s against max_memory_allocated %d" % (
                    asy["backend"], dev.get("peak_allocated_bytes"), asy["max_allocated"]))
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0 if all(r["ok"] is not False for r in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
