#!/usr/bin/env python3
"""The check of figures only (Note [Figures only] in native/python/gpumem/_observe.py) and of the reader's
figures for a capture without events (Note [Figures from stats] in native/addon/src/model.h), on real torch.

    python3 test/gpu/figures_only_check.py [--out DIR]          (stage `figures-only` of run_all.sh)

A ResNet-18 training loop (bf16 autocast, 30 steps), natively and under `python3 -m gpumem run`:
 1 same-run      `--figures-only`: the same losses as natively, bit for bit, and the same max_memory_allocated()
 2 no-events     its capture's header says "events": false; it holds no allocation or segment event and no tag, and
                 it holds PyTorch's figures (REC_STATS), read by the library's sampler (no Python poll thread: Note
                 [Figures on the sampler's thread])
 3 peak          `gpumem summary --json` of it (dist/cli.js with $GPUMEM_NODE): the peak allocated is the workload's
                 own torch.cuda.max_memory_allocated(), and the summary says what was not recorded
 4 async         PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync under the default settings (the stats source, no
                 events either): the same peak rule
 5 record-steps  `--record-steps 5` (Note [Recorded steps] in native/python/gpumem/_recorded_steps.py): the same losses and
                 max_memory_allocated() as natively; MARK_EVENTS_OFF between the 5th and 6th optimizer.step facts;
                 allocation events and tags before it, none after; the samples after it carry PyTorch's peak
 6 steps-peak    its `gpumem summary --json`: the peak is the workload's max_memory_allocated(), the not-recorded sentence
                 names the 5 steps, and the categories at the recorded peak hold parameters and activations by module
                 (their peak's allocated bytes printed beside max_memory_allocated())
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
import sys, threading
observe = sys.modules.get("gpumem._observe")  # who read PyTorch's figures (Note [Figures on the sampler's thread])
print("RESULT " + json.dumps({"losses": losses, "max_allocated": torch.cuda.max_memory_allocated(),
                              "backend": torch.cuda.memory.get_allocator_backend(),
                              "figures_by": getattr(observe, "figures_by", None),
                              "threads": sorted(t.name for t in threading.enumerate())}), flush=True)
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


def device_and_sentences(summary):
    """The first device's row and the not-recorded sentences of a `gpumem summary --json`."""
    return (summary.get("devices") or [{}])[0], (summary.get("identity") or {}).get("not_recorded") or []


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
        say("no-events", header.get("events") is False and not events and bool(stats) and fig["figures_by"] == "sampler"
            and "gpumem-stats-poll" not in fig["threads"],
            "header events=%r, event or tag record types present: %s, %d REC_STATS, last peak %d; figures read by %s, "
            "Python threads %s" % (header.get("events"), sorted(events), len(stats),
                                   stats[-1]["peak_allocated"] if stats else -1, fig["figures_by"], fig["threads"]))
        s = summary_json(cap)
        if s is None:
            say("peak", None, "no $GPUMEM_NODE to run dist/cli.js")
        else:
            dev, said = device_and_sentences(s)
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
    rr, rec, rcap = run(script, os.path.join(out, "steps"), True, flags=["--record-steps", "5"])
    if native is None or rec is None or rcap is None:
        say("record-steps", False, "the --record-steps run failed (rc %d)\n%s" % (rr.returncode, rr.stderr[-1500:]))
    else:
        header, recs = records_of(rcap)
        strings = {}
        for t, p in recs:
            if t == F.REC_STRING:
                r = F.StringRec.unpack_dict(p[:F.StringRec.size])
                strings[r["id"]] = p[F.StringRec.size:F.StringRec.size + r["len"]].decode("utf-8", "replace")
        marks = [(i, F.MarkerRec.unpack_dict(p)) for i, (t, p) in enumerate(recs) if t == F.REC_MARKER]
        offs = [i for i, m in marks if m["kind"] == F.MARK_EVENTS_OFF]
        steps = [i for i, m in marks if m["kind"] == F.MARK_STEP and strings.get(m["name"]) == "optimizer.step"]
        per = (F.REC_ALLOC, F.REC_FREE_REQUESTED, F.REC_FREE_COMPLETED, F.REC_TAG)
        off = offs[0] if offs else len(recs)
        before = sum(1 for t, _ in recs[:off] if t == F.REC_ALLOC)
        after = sum(1 for t, _ in recs[off:] if t in per)
        later = [F.StatsRec.unpack_dict(p) for t, p in recs[off:] if t == F.REC_STATS]
        placed = len(offs) == 1 and len(steps) == 30 and steps[4] < off < steps[5]
        same = native["losses"] == rec["losses"] and native["max_allocated"] == rec["max_allocated"]
        say("record-steps", same and placed and before > 0 and after == 0 and bool(later) and
            later[-1]["peak_allocated"] == rec["max_allocated"] and header.get("record_steps") == 5 and
            rec["figures_by"] == "sampler" and "gpumem-stats-poll" not in rec["threads"],
            "losses equal: %s; max_memory_allocated %d natively, %d; events off %s (between steps 5 and 6: %s); %d "
            "allocations before, %d events or tags after; %d samples after, last peak %d; header record_steps %r; "
            "figures after the stop read by %s, Python threads %s" % (
                native["losses"] == rec["losses"], native["max_allocated"], rec["max_allocated"], bool(offs), placed,
                before, after, len(later), later[-1]["peak_allocated"] if later else -1, header.get("record_steps"),
                rec["figures_by"], rec["threads"]))
        s = summary_json(rcap)
        if s is None:
            say("steps-peak", None, "no $GPUMEM_NODE to run dist/cli.js")
        else:
            dev, said = device_and_sentences(s)
            cat = next(iter(s.get("categories") or []), {}) or {}
            peak = cat.get("peak") or {}
            b = peak.get("bytes") or {}
            mods = peak.get("activations_by_module") or []
            say("steps-peak", dev.get("peak_allocated_bytes") == rec["max_allocated"] and
                any("first 5 steps" in x for x in said) and cat.get("has_tags") and bool(mods) and
                all((b.get(k) or 0) > 0 for k in ("parameter", "activation")),
                "summary peak %s against max_memory_allocated %d; categories at the recorded peak (%s allocated): %s, "
                "%d modules (top %s); not recorded: %s" % (
                    dev.get("peak_allocated_bytes"), rec["max_allocated"], peak.get("allocated_bytes"),
                    json.dumps(b), len(mods), mods[:1], said[:1] or s.get("error")))
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0 if all(r["ok"] is not False for r in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
