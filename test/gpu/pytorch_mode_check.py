#!/usr/bin/env python3
"""The PyTorch-allocator mode's GPU check: the mode, chosen by `auto`, keeps the run as it is natively.

    python3 test/gpu/pytorch_mode_check.py [--out DIR] [--rounds N]      (stage `pytorch-mode` of run_all.sh)

Natively and under `python3 -m gpumem run` with the default `--allocator auto` (workloads in
test/gpu/workloads/pytorch_mode/):
 1 benchmark      ResNet-18 with cudnn.benchmark=True: auto picks pytorch, benchmark stays on, median step
                  within 2 % of native (runs interleaved, median of per-round ratios)
 2 graphs         torch.compile(mode="reduce-overhead"): outputs identical to native; the capture's state
                  record shows the graph pool's segments (private pool ids)
 3 expandable     PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True keeps expandable segments; the capture
                  opens (gpumem summary via $GPUMEM_NODE dist/cli.js, when Node is there)
 4 async          PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync keeps its backend; the capture opens
 5 exact          in the expandable run (pytorch mode): per-line bytes at the peak and the peak equal
                  PyTorch's own _dump_snapshot of the same process, byte for byte (rule below)
 6 empty-cache    Empty Cache through the control channel leaves nothing for torch.cuda.empty_cache()
 7 oom            an OOM writes REC_OOM followed by a state record (reason OOM)
 8 overhead       GPT-2 small and ResNet-50 step ratios vs native and vs history-only (PyTorch's
                  _record_memory_history(stacks="python")); target: observed ≤ history + 1 %
10 features       under the default `gpumem run` (auto), a MemPool, _set_memory_metadata with the user's
                  own history, an out-of-memory observer and memory_stats() (Lightning's DeviceStatsMonitor) give
                  the same facts as natively
11 compile-stderr a torch.compile script (default and reduce-overhead, a module with its own hook)
                  and an FSDP2 training (fully_shard, a world of one), natively and under `gpumem run` (auto and
                  lens): stderr equal line by line besides gpumem's own lines, outputs identical, the user's hook
                  called as often, max_memory_allocated equal under auto
 9 attribution    the leaky convnet, the cudnn.benchmark ResNet-18 and the reduce-overhead MLP under
                  `--allocator pytorch` and `--allocator lens`; `gpumem summary --json` of each: top lines at the
                  peak compared line by line (within 1 % of the peak), `<no user frame>` ≤ 1 % of the peak in the
                  PyTorch-allocator mode, no inductor-generated file as a line, the leak finding and its keeper
                  equal. The lens runs the compiled MLP without CUDA graphs (by design), so there only the lines
                  are compared, not their bytes.
Prints PASS/FAIL/SKIP per item; JSON in $OUT/pytorch-mode/result.json. A watchdog (faulthandler) ends the
script with every thread's stack before the stage's limit.

Rule of `exact`: PyTorch's frames for autograd-thread allocations are empty; the lens attributes them to
the line that called backward() (DESIGN §3). So: every line equal except the backward() line, whose
capture bytes equal the pickle's bytes at that line plus the pickle's frameless bytes; peaks equal.
"""
import argparse
import faulthandler
import glob
import json
import os
import pickle
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WL = os.path.join(HERE, "workloads", "pytorch_mode")
PY_DIR = os.path.join(ROOT, "native", "python")
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "replay"))
import gpumem_records as R  # noqa: E402

RESULTS = {}


def emit(name, status, **facts):
    RESULTS[name] = dict(facts, status=status)
    print("%s %s %s" % (status, name, json.dumps(facts, default=str)[:1500]), flush=True)


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_") and k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")}
    env.update(extra or {})
    return env


def result_of(proc):
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise AssertionError("no RESULT line (rc %d):\n%s" % (proc.returncode, proc.stderr[-3000:]))


def _abs(argv):
    # Absolute script paths, so frames (ours and PyTorch's) name files under WL.
    return [os.path.join(WL, argv[0])] + list(argv[1:])


def native(argv, env=None, timeout=300):
    return subprocess.run([sys.executable] + _abs(argv), env=clean_env(env), capture_output=True, text=True, timeout=timeout, cwd=WL)


def tracked(out, argv, env=None, allocator="auto", timeout=300, wait=True):
    e = clean_env(env)
    e["PYTHONPATH"] = PY_DIR
    cmd = [sys.executable, "-m", "gpumem", "run", "--allocator", allocator, "--allocator-so", SO, "--out", out,
           "--sample-ms", "100", "--"] + _abs(argv)
    if not wait:
        return subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=WL)
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout, cwd=WL)


def mode_line(stderr):
    return next((l for l in stderr.splitlines() if l.startswith("gpumem: allocator mode")), None)


def capture_in(out):
    """The workload's own capture: under torch.compile, inductor's compile workers initialise CUDA too and leave a
    capture of a header and a device each, so the largest capture of the latest session is the workload's."""
    sessions = sorted(glob.glob(os.path.join(out, "*")))
    caps = glob.glob(os.path.join(sessions[-1], "capture-*.gpumem")) if sessions else []
    if not caps:
        raise AssertionError("no capture under %s" % out)
    return max(caps, key=os.path.getsize)


# ---- reading a capture (the format's own Python mirror, independent of the addon) -------------------------
STATE = struct.Struct("<QIII I".replace(" ", ""))
STATE_SEG = struct.Struct("<QQQQQIHHII")
STATE_BLOCK = struct.Struct("<QQQIB3x")


def read(path):
    with open(path, "rb") as f:
        header, _, recs = R.read_capture(f.read())
    strings, frames, stacks, events = {}, {}, {}, []
    for (t, dev, flags, payload, _raw) in recs:
        if t == R.REC_STRING:
            sid, n = R.STRING.unpack_from(payload)
            strings[sid] = payload[8:8 + n].decode("utf-8", "replace")
        elif t == R.REC_FRAME:
            fid, fi, fn, line = R.FRAME.unpack_from(payload)
            frames[fid] = (fi, fn, line)
        elif t == R.REC_STACK:
            sid, sflags, n = R.STACK.unpack_from(payload)
            stacks[sid] = (sflags, struct.unpack_from("<%dI" % n, payload, 12))
        else:
            events.append((t, dev, flags, payload))
    return header, strings, frames, stacks, events


def states(events):
    out = []
    for (t, dev, flags, payload) in events:
        if t != R.REC_STATE:
            continue
        _t, sid, reason, nseg, _ = STATE.unpack_from(payload)
        off, segs = STATE.size, []
        for _ in range(nseg):
            addr, size, stream, p0, p1, stack, sflags, _pad, nb, _pad2 = STATE_SEG.unpack_from(payload, off)
            off += STATE_SEG.size + nb * STATE_BLOCK.size
            segs.append({"addr": addr, "size": size, "pool": (p0, p1), "flags": sflags})
        out.append({"reason": reason, "device": dev, "segments": segs})
    return out


def capture_lines(path, user_dir):
    """Peak of requested bytes (ALLOC − FREE_REQUESTED) and bytes per innermost user line at its first moment, from
    the capture; also the backward() line(s) seen. Requested, as PyTorch's history counts: since Note [Observed block
    sizes] a record's size is PyTorch's block (the request rounded to 512 B, or a whole unsplit block) and its
    requested field is the trace entry's size."""
    header, strings, frames, stacks, events = read(path)
    boot = header.get("bootstrap_dir", PY_DIR)

    def line_of(stack):
        sflags, fids = stacks.get(stack, (0, ()))
        for fid in fids:
            fi, _fn, line = frames[fid]
            name = strings.get(fi, "")
            if name.startswith(user_dir + os.sep) and not name.startswith(boot + os.sep):
                return "%s:%d" % (os.path.basename(name), line), bool(sflags & R.STACK_BACKWARD)
        return None, bool(sflags & R.STACK_BACKWARD)

    live, cur, peak, at = {}, 0, 0, {}
    backward_lines = set()
    for (t, dev, flags, payload) in events:
        if t == R.REC_ALLOC:
            _t, addr, _block, size, _st, stack, _thr = R.BLOCK_EVENT.unpack_from(payload)
            live[addr] = (size, stack)
            cur += size
        elif t == R.REC_FREE_REQUESTED:
            _t, addr, size, _req, _st, stack, _thr = R.BLOCK_EVENT.unpack_from(payload)
            if addr in live:
                cur -= live.pop(addr)[0]
            continue
        else:
            continue
        if cur > peak:
            peak, at = cur, {}
            for size, stack in live.values():
                key, bw = line_of(stack)
                if bw and key:
                    backward_lines.add(key)
                at[key or "<none>"] = at.get(key or "<none>", 0) + size
    return peak, at, backward_lines, header


def pickle_lines(path, user_dir):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    live, cur, peak, at = {}, 0, 0, {}
    for e in snap["device_traces"][0]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
            cur += e["size"]
        elif e["action"] == "free_requested" and e["addr"] in live:
            cur -= live.pop(e["addr"])["size"]
            continue
        else:
            continue
        if cur > peak:
            peak, at = cur, {}
            for x in live.values():
                key = next(("%s:%d" % (os.path.basename(fr["filename"]), fr["line"]) for fr in x.get("frames") or []
                            if fr["filename"].startswith(user_dir + os.sep)), "<none>")
                at[key] = at.get(key, 0) + x["size"]
    return peak, at


def summary_opens(capture):
    node = os.environ.get("GPUMEM_NODE") or "node"
    cli = os.path.join(ROOT, "dist", "cli.js")
    if not os.path.exists(cli):
        return None, "dist/cli.js is not here"
    try:
        p = subprocess.run([node, cli, "summary", capture], capture_output=True, text=True, timeout=120)
    except OSError as exc:
        return None, "no Node (%s)" % exc
    return p.returncode == 0 and "allocator: pytorch" in p.stdout.lower(), (p.stdout[:1200] + p.stderr[-600:])


# ---- the items -----------------------------------------------------------------------------------------------
def check_graphs(out):
    ref = os.path.join(out, "graphs-native.pt")
    mine = os.path.join(out, "graphs-tracked.pt")
    n = native(["compiled.py", ref], timeout=400)
    t = tracked(os.path.join(out, "graphs"), ["compiled.py", mine], timeout=400)
    rn, rt = result_of(n), result_of(t)
    import torch

    a, b = torch.load(ref), torch.load(mine)
    identical = len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
    st = states(read(capture_in(os.path.join(out, "graphs")))[4])
    private = [s for s in st for seg in s["segments"] if seg["flags"] & R.POOL_PRIVATE]
    pools = sorted({seg["pool"] for s in st for seg in s["segments"] if seg["flags"] & R.POOL_PRIVATE})
    ok = identical and rt["mode"] == "pytorch" and bool(rt["graph_pools"]) and bool(private)
    emit("graphs", "PASS" if ok else "FAIL", outputs_identical=identical, mode_line=mode_line(t.stderr),
         torch_graph_pools_native=rn["graph_pools"], torch_graph_pools_tracked=rt["graph_pools"],
         capture_private_pools=[list(p) for p in pools], stderr_tail=t.stderr.strip().splitlines()[-4:])


def check_benchmark(out, rounds):
    """Target: ×1.05 of native. The lent machines' minute-to-minute noise is ±15 % on these 13 ms steps,
    so each round runs native and tracked back to back (order alternating) and the ratio is taken per round, of
    medians and of 10th percentiles (steps without interference); the verdict is on the p10 ratio's median."""
    ratios, p10s, nat, trk, last = [], [], [], [], None
    for r in range(rounds):
        pair = {}
        for which in (("native", "tracked") if r % 2 == 0 else ("tracked", "native")):
            if which == "native":
                pair[which] = result_of(native(["resnet_benchmark.py", "60"]))
            else:
                last = tracked(os.path.join(out, "bench-%d" % r), ["resnet_benchmark.py", "60"])
                pair[which] = result_of(last)
        n, rt = pair["native"], pair["tracked"]
        nat.append([round(n["median_ms"], 3), round(n["p10_ms"], 3)])
        trk.append([round(rt["median_ms"], 3), round(rt["p10_ms"], 3)])
        ratios.append(rt["median_ms"] / n["median_ms"])
        p10s.append(rt["p10_ms"] / n["p10_ms"])
    ratio, ratio_p10 = statistics.median(ratios), statistics.median(p10s)
    ok = rt["benchmark"] is True and rt["mode"] == "pytorch" and ratio_p10 <= 1.05
    emit("benchmark", "PASS" if ok else "FAIL", benchmark_on=rt["benchmark"], mode_line=mode_line(last.stderr),
         native_ms_median_p10=nat, tracked_ms_median_p10=trk, ratio_median=round(ratio, 4), ratio_p10=round(ratio_p10, 4),
         ratios=[round(x, 4) for x in ratios], ratios_p10=[round(x, 4) for x in p10s])


def check_expandable_exact_empty_oom(out):
    d = os.path.join(out, "exp")
    os.makedirs(d, exist_ok=True)
    hs = os.path.join(d, "hs")
    os.makedirs(hs, exist_ok=True)
    pk = os.path.join(d, "pytorch.pickle")
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    n = native(["train_small.py"], env=env)
    p = tracked(os.path.join(d, "s"), ["train_small.py", "--history", pk, "--handshake", hs, "--oom"], env=env, wait=False)
    deadline = time.time() + 240
    while not os.path.exists(os.path.join(hs, "ready")) and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    reply = None
    if os.path.exists(os.path.join(hs, "ready")):
        session = sorted(glob.glob(os.path.join(d, "s", "*")))[-1]
        c = subprocess.run([sys.executable, "-m", "gpumem", "empty-cache", "--session", session, "--json"],
                           env=dict(clean_env(), PYTHONPATH=PY_DIR), capture_output=True, text=True, timeout=60)
        try:
            reply = json.loads(c.stdout.strip().splitlines()[0])
        except Exception:
            reply = {"error": c.stdout + c.stderr}
    open(os.path.join(hs, "done"), "w").close()
    so, se = p.communicate(timeout=120)
    rt = result_of(subprocess.CompletedProcess(p.args, p.returncode, so, se))
    rn = result_of(n)
    cap = capture_in(os.path.join(d, "s"))
    opens, text = summary_opens(cap)
    keeps = rt["expandable_segments"] is True and rn["expandable_segments"] is True and rt["mode"] == "pytorch"
    emit("expandable", ("PASS" if keeps and opens else "FAIL") if opens is not None else ("PASS" if keeps else "FAIL"),
         expandable_native=rn["expandable_segments"], expandable_tracked=rt["expandable_segments"], mode_line=mode_line(se),
         summary_opens=opens, summary=text if not opens else text[:400])
    # exact
    cpeak, cat, bwl, _h = capture_lines(cap, WL)
    ppeak, pat = pickle_lines(pk, WL)
    bw = sorted(bwl)
    diffs = {}
    for k in set(cat) | set(pat):
        if k == "<none>":
            continue
        want = pat.get(k, 0) + (pat.get("<none>", 0) if k in bwl else 0)
        if cat.get(k, 0) != want:
            diffs[k] = {"capture": cat.get(k, 0), "pickle": pat.get(k, 0)}
    ok = cpeak == ppeak and not diffs and cat.get("<none>", 0) == 0 and len(bwl) <= 1
    emit("exact", "PASS" if ok else "FAIL", peak_capture=cpeak, peak_pickle=ppeak, backward_line=bw,
         capture_lines=cat, pickle_lines=pat, differences=diffs)
    # empty cache
    ok = bool(reply and reply.get("ok")) and rt["reserved_after_torch"] == rt["reserved_after_channel"] and \
        reply.get("reserved_before", -1) > reply.get("reserved_after", -1) and rt["reserved_after_channel"] < rt["reserved_before"]
    emit("empty-cache", "PASS" if ok else "FAIL", reply=reply, reserved_before=rt.get("reserved_before"),
         after_channel=rt.get("reserved_after_channel"), after_torch_empty_cache=rt.get("reserved_after_torch"))
    # OOM
    _h, _s, _f, _st, events = read(cap)
    kinds = [t for (t, _d, _fl, _p) in events if t in (R.REC_OOM, R.REC_STATE)]
    oom_at = kinds.index(R.REC_OOM) if R.REC_OOM in kinds else -1
    st = states(events)
    ok = rt.get("oom") is True and oom_at >= 0 and oom_at + 1 < len(kinds) and kinds[oom_at + 1] == R.REC_STATE and any(s["reason"] == 1 for s in st)
    emit("oom", "PASS" if ok else "FAIL", caught=rt.get("oom"), oom_records=kinds.count(R.REC_OOM),
         state_reasons=[s["reason"] for s in st])


def check_async(out):
    env = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    rn = result_of(native(["train_small.py"], env=env))
    t = tracked(os.path.join(out, "async"), ["train_small.py"], env=env)
    rt = result_of(t)
    opens, text = summary_opens(capture_in(os.path.join(out, "async")))
    keeps = rn["backend"] == rt["backend"] == "cudaMallocAsync" and rt["mode"] == "pytorch"
    emit("async", ("PASS" if keeps and opens else "FAIL") if opens is not None else ("PASS" if keeps else "FAIL"),
         backend_native=rn["backend"], backend_tracked=rt["backend"], mode_line=mode_line(t.stderr),
         summary_opens=opens, summary=text[:600], stderr_tail=t.stderr.strip().splitlines()[-3:])


def summary_json(capture):
    node = os.environ.get("GPUMEM_NODE") or "node"
    p = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", capture, "--json"], capture_output=True,
                       text=True, timeout=180)
    if p.returncode != 0:
        raise AssertionError("gpumem summary failed: %s" % (p.stderr or p.stdout)[-1500:])
    return json.loads(p.stdout)


def lines_at_peak(summary):
    """{'file:line': bytes} at device 0's peak, '<no user frame>' included; and the peak."""
    d0 = summary["devices"][0]
    lines = {}
    for l in summary.get("top_lines", []):
        key = "%s:%d" % (os.path.basename(l["file"]), l["line"]) if l["file"] != "<no user frame>" else "<no user frame>"
        if "torchinductor_" in l["file"]:
            key = "torchinductor_:" + key  # a generated file shown as a user's line (must not happen)
        lines[key] = lines.get(key, 0) + l["bytes_at_peak"]
    return lines, d0["peak_allocated_bytes"]


def leaks_of(summary):
    out = []
    for s in summary.get("steps") or []:
        for l in s.get("leaks", []):
            k = l.get("keeper") or {}
            out.append({"line": "%s:%d" % (os.path.basename(l["file"]), l["line"]) if l["file"] != "<no user frame>" else "<no user frame>",
                        "growth": l["growth_per_step_bytes"],
                        "keeper": "%s:%d" % (os.path.basename(k["file"]), k["line"]) if k else None})
    return sorted(out, key=lambda x: -x["growth"])


ATTRIBUTION_WORKLOADS = (
    ("leaky-convnet", [os.path.join("..", "leak_history.py"), "--model", "convnet", "--steps", "8"], True),
    ("benchmark-resnet18", ["resnet_benchmark.py", "10"], True),
    ("reduce-overhead-mlp", ["compiled.py", "OUTFILE"], False),  # lens: no CUDA graphs, bytes differ by design
)


def check_attribution(out, only=None):
    rows, ok_all = {}, True
    for name, argv, same_run in ATTRIBUTION_WORKLOADS:
        if only and name not in only:
            continue
        per = {}
        for mode in ("pytorch", "lens"):
            d = os.path.join(out, "attr-%s-%s" % (name, mode))
            args = [a if a != "OUTFILE" else os.path.join(out, "%s-%s.pt" % (name, mode)) for a in argv]
            t0 = time.time()
            p = tracked(d, args, allocator=mode, timeout=300)
            if p.returncode != 0:
                raise AssertionError("%s under %s failed (rc %d): %s" % (name, mode, p.returncode, p.stderr[-2500:]))
            summ = summary_json(capture_in(d))
            lines, peak = lines_at_peak(summ)
            per[mode] = {"lines": lines, "peak": peak, "leaks": leaks_of(summ), "seconds": round(time.time() - t0, 1),
                         "stderr": [l for l in p.stderr.splitlines() if l.startswith("gpumem:")][:6]}
        pt, ln = per["pytorch"], per["lens"]
        peak = max(pt["peak"], ln["peak"])
        table, bad = [], []
        for key in sorted(set(pt["lines"]) | set(ln["lines"]), key=lambda k: -max(pt["lines"].get(k, 0), ln["lines"].get(k, 0))):
            a, b = pt["lines"].get(key, 0), ln["lines"].get(key, 0)
            if max(a, b) < 0.001 * peak:
                continue
            diff = abs(a - b) / peak
            row = {"line": key, "pytorch_mode": a, "lens_mode": b, "diff_of_peak": round(diff, 5)}
            table.append(row)
            if same_run and diff > 0.01:
                bad.append("%s differs by %.2f %% of the peak" % (key, 100 * diff))
            if not same_run and (a == 0) != (b == 0) and max(a, b) >= 0.01 * peak:
                bad.append("%s is a line in one mode only" % key)
        none_share = pt["lines"].get("<no user frame>", 0) / max(1, pt["peak"])
        if none_share > 0.01:
            bad.append("<no user frame> holds %.2f %% of the peak in the PyTorch-allocator mode" % (100 * none_share))
        generated = [l for l in pt["lines"] if "torchinductor_" in l]
        if generated:
            bad.append("generated files shown as lines: %s" % generated)
        leak_pt = [(x["line"], x["keeper"]) for x in pt["leaks"]]
        leak_ln = [(x["line"], x["keeper"]) for x in ln["leaks"]]
        if leak_pt != leak_ln:
            bad.append("leak findings differ: pytorch %s, lens %s" % (leak_pt, leak_ln))
        # Within 1 % of the leak's total growth per step (the lens counts 512-byte blocks, PyTorch's trace the
        # requested bytes: a 1 KiB finding beside a 400 MiB one differs by rounding alone).
        total = max(sum(x["growth"] for x in pt["leaks"]), sum(y["growth"] for y in ln["leaks"]), 1)
        for x, y in zip(pt["leaks"], ln["leaks"]):
            if abs(x["growth"] - y["growth"]) > 0.01 * total:
                bad.append("leak growth on %s differs: %d vs %d" % (x["line"], x["growth"], y["growth"]))
        ok = not bad
        ok_all = ok_all and ok
        rows[name] = {"status": "PASS" if ok else "FAIL", "problems": bad, "peak_pytorch": pt["peak"], "peak_lens": ln["peak"],
                      "no_user_frame_share": round(none_share, 5), "lines": table[:12], "leaks_pytorch": pt["leaks"][:4],
                      "leaks_lens": ln["leaks"][:4], "seconds": {m: per[m]["seconds"] for m in per},
                      "gpumem_lines": {m: per[m]["stderr"] for m in per}}
        print("  %s %s: peak %d (pytorch) / %d (lens), no user frame %.3f %%%s" % (
            rows[name]["status"], name, pt["peak"], ln["peak"], 100 * none_share, ("; " + "; ".join(bad)) if bad else ""), flush=True)
        for r in table[:8]:
            print("     %-28s %14d %14d  %.4f" % (r["line"], r["pytorch_mode"], r["lens_mode"], r["diff_of_peak"]), flush=True)
    emit("attribution", "PASS" if ok_all else "FAIL", **rows)


def check_features(out):
    rn = result_of(native(["pytorch_features.py"]))
    t = tracked(os.path.join(out, "features"), ["pytorch_features.py"])
    rt = result_of(t)
    differ = {k: [rn.get(k), rt.get(k)] for k in set(rn) | set(rt) if k != "mode" and rn.get(k) != rt.get(k)}
    ok = not differ and rt["mode"] == "pytorch" and rn.get("oom_observer_calls", 0) >= 1 and rn["pool_segments"] >= 1
    emit("features", "PASS" if ok else "FAIL", native=rn, tracked=rt, differ=differ, mode_line=mode_line(t.stderr))


def _user_lines(stderr):
    return [l for l in stderr.splitlines() if not l.startswith("gpumem:")]


def check_compile_stderr(out, allocators=("auto", "lens")):
    """Nothing of the tool is visible to the user's program. A torch.compile script (default and
    reduce-overhead, a module with its own forward hook) and an FSDP2 training, natively and under `gpumem run`
    (the default auto, and the lens): stderr equal line by line besides gpumem's own lines, outputs identical, the
    user's hook called as often, max_memory_allocated() equal (under PyTorch's allocator: the lens counts its own
    blocks, and runs reduce-overhead without CUDA graphs)."""
    import difflib

    import torch

    def fresh_caches(name):
        # Each run compiles from nothing: with inductor's and Triton's caches warm from the other run, the second
        # one skips compile_fx (no TF32 warning, no autotuning allocations) and the diff would compare two runs
        # that did different work.
        d = os.path.join(out, "inductor-cache-" + name)
        return {"TORCHINDUCTOR_CACHE_DIR": d, "TRITON_CACHE_DIR": os.path.join(d, "triton")}

    all_ok, facts = True, {}
    for script in ("compile_stderr.py", "fsdp2_stderr.py"):
        name = script[:-3]
        ref = os.path.join(out, name + "-native.pt")
        n = native([script, ref], env=fresh_caches(name + "-native"), timeout=400)
        rn = result_of(n)
        en = _user_lines(n.stderr)
        a = torch.load(ref)
        for alloc in allocators:
            mine = os.path.join(out, "%s-%s.pt" % (name, alloc))
            t = tracked(os.path.join(out, "cs-%s-%s" % (name, alloc)), [script, mine], env=fresh_caches(name + "-" + alloc),
                        allocator=alloc, timeout=400)
            rt = result_of(t)
            b = torch.load(mine)
            identical = len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
            et = _user_lines(t.stderr)
            diff = list(difflib.unified_diff(en, et, "native", "gpumem run", lineterm="", n=0))
            want_mode = "pytorch" if alloc == "auto" else alloc
            ok = identical and not diff and rn["hook_calls"] == rt["hook_calls"] and rt["mode"] == want_mode and \
                (alloc != "auto" or rn["max_allocated"] == rt["max_allocated"])
            all_ok = all_ok and ok
            facts["%s/%s" % (name, alloc)] = {
                "ok": ok, "outputs_identical": identical, "stderr_diff": diff[:40], "hook_calls": [rn["hook_calls"], rt["hook_calls"]],
                "max_allocated": [rn["max_allocated"], rt["max_allocated"]], "mode": rt["mode"],
                "native_stderr_lines": len(en), "tracked_stderr_lines": len(et),
                "gpumem_lines": [l for l in t.stderr.splitlines() if l.startswith("gpumem:")][:6]}
            print("  %s %s/%s: outputs %s, stderr diff %d lines, hook calls %s, max_allocated %s" % (
                "ok" if ok else "FAIL", name, alloc, "identical" if identical else "DIFFER", len(diff),
                [rn["hook_calls"], rt["hook_calls"]], [rn["max_allocated"], rt["max_allocated"]]), flush=True)
    emit("compile-stderr", "PASS" if all_ok else "FAIL", **facts)


def check_overhead(out, rounds):
    per = {"native": [], "history": [], "observed": []}
    for r in range(rounds):
        per["native"].append(result_of(native(["overhead.py"])))
        per["history"].append(result_of(native(["overhead.py", "--history"])))
        per["observed"].append(result_of(tracked(os.path.join(out, "ovh-%d" % r), ["overhead.py"], allocator="pytorch")))
    facts, ok = {}, True
    for m in ("gpt2", "resnet50"):
        vs_native = statistics.median(per["observed"][i][m] / per["native"][i][m] for i in range(rounds))
        hist = statistics.median(per["history"][i][m] / per["native"][i][m] for i in range(rounds))
        facts[m] = {"observed_vs_native": round(vs_native, 4), "history_vs_native": round(hist, 4),
                    "observed_vs_history": round(vs_native / hist, 4),
                    "ms": {k: [round(x[m], 3) for x in v] for k, v in per.items()}}
        ok = ok and vs_native <= hist + 0.01
    emit("overhead", "PASS" if ok else "FAIL", target="observed/native <= history/native + 0.01", **facts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "pytorch-mode"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--workloads", nargs="*", help="attribution: only these workloads")
    ap.add_argument("--watchdog", type=int, default=int(os.environ.get("GPUMEM_WATCHDOG_S", "400")),
                    help="seconds before every thread's stack is dumped and the check ends (below the stage's limit)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not os.path.exists(SO):
        subprocess.run(["make", "-C", os.path.join(ROOT, "native", "allocator"), "-j4"], check=True)
    faulthandler.dump_traceback_later(a.watchdog, exit=True)
    items = [("graphs", lambda: check_graphs(a.out)),  # first: builds the observer once (its 25 s are not timed)
             ("attribution", lambda: check_attribution(a.out, a.workloads)),
             ("features", lambda: check_features(a.out)),
             ("compile-stderr", lambda: check_compile_stderr(a.out)),
             ("expandable", lambda: check_expandable_exact_empty_oom(a.out)),
             ("async", lambda: check_async(a.out)),
             ("benchmark", lambda: check_benchmark(a.out, a.rounds)),
             ("overhead", lambda: check_overhead(a.out, a.rounds))]
    for name, fn in items:
        if a.only and name not in a.only:
            continue
        t0 = time.time()
        try:
            fn()
        except Exception as exc:
            emit(name, "FAIL", error="%s: %s" % (type(exc).__name__, str(exc)[-2500:]))
        print("  (%s took %.0f s)" % (name, time.time() - t0), flush=True)
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)
    bad = [k for k, v in RESULTS.items() if v["status"] == "FAIL"]
    print("pytorch-mode: %d items, %d failed%s" % (len(RESULTS), len(bad), (": " + ", ".join(bad)) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
