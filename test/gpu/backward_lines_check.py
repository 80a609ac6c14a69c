#!/usr/bin/env python3
"""Backward on the forward line, on the GPU (Note [Backward on the forward line] in
native/allocator/src/backward_links.h): the product's attribution of backward's allocations against a reference
that shares nothing with its mechanism, in both modes, and what the links cost.

    python3 test/gpu/backward_lines_check.py --out DIR [--stage smoke|truth|cost] [--models …] [--modes lens auto]

truth: each model of workloads/backward_models.py runs under `gpumem run` in each mode. At the backward peak of its
last step (the highest allocated between the two stamps around loss.backward(), from the capture's events), every
live allocation made during that backward is compared with the reference (workloads/backward_models.py's docstring):
- line: the allocation's line (innermost frame of the workload's file) = the reference node's forward traceback's
  innermost frame of that file, or, made by no node, the backward() line. Target: >= 99 % of the bytes;
- op: the innermost frame before the <module>/<backward> pseudo-frames = the innermost frame of the node's forward
  traceback (checkpoint recomputations left out: they run the checkpointed ops, not the node's own);
- module: the <module> pseudo-frame = the leaf module whose output the node is, where it is one.
The last step must also be one the library replayed from the step it learned (Note [Learned steps]: no miss, every
step after the first known). smoke: the same on the two small models, fewer steps. cost: test/gpu/bench_allocator.py's
step time of GPT-2 small and ResNet-50 under `gpumem run` in both modes, with the links and with
GPUMEM_BACKWARD_LINKS=0, and the default mode without them twice (the run's noise floor), in interleaved rounds.
self-time: the same pairs with GPUMEM_SELF_TIME=1: host time the links add a step, measured inside each process.
Results: DIR/backward_lines.json (and .txt); each run's capture and truth under DIR/runs/.
"""
import faulthandler
import os
import sys

# a stall comes back as a stack, before the stage's limit in run_all.sh (the cost stage sets a longer one)
faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "280")), exit=True)
import argparse
import bisect
import collections
import concurrent.futures
import glob
import gzip
import json
import shutil
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "native", "recorder"))
from capture import Capture  # noqa: E402  (the spec-only reader of the recorder's tests)

SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
WORKLOAD = os.path.join(HERE, "workloads", "backward_models.py")
PY = sys.executable
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "native", "python"), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="2")


def run_logged(cmd, env, log_path, deadline):
    """Runs `cmd` with its output in `log_path`, until `deadline` at the latest; (exit code or "timeout", seconds)."""
    t0 = time.time()
    with open(log_path, "w") as log:
        try:
            rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                timeout=max(10, deadline - time.time())).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return rc, round(time.time() - t0, 1)


def run_one(model, mode, out, steps, deadline):
    tag = "%s-%s" % (model, mode)
    work = os.path.join(out, "runs", tag)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    truth = os.path.join(work, "truth.json")
    env = dict(ENV, GPUMEM_WATCHDOG_S=str(max(30, int(deadline - time.time()) - 10)))
    cmd = [PY, "-m", "gpumem", "run", "--allocator", mode, "--allocator-so", SO, "--out", work, "--", PY, WORKLOAD,
           model, "--truth", truth, "--steps", str(steps)]
    rc, seconds = run_logged(cmd, env, os.path.join(work, "log.txt"), deadline)
    caps = sorted(glob.glob(os.path.join(work, "*", "capture-*.gpumem")), key=os.path.getsize)
    got = {"model": model, "mode": mode, "rc": rc, "seconds": seconds}
    # Note [Learned steps]: steps learned with the op callback on, steps known (replayed with it off), misses
    with open(os.path.join(work, "log.txt"), errors="replace") as f:
        links = [line[6:] for line in f if line.startswith("LINKS ")]
    got["links"] = json.loads(links[-1]) if links else None
    if caps and os.path.exists(truth):
        shutil.copy(caps[-1], os.path.join(work, "capture.gpumem"))
        try:
            got.update(analyse(os.path.join(work, "capture.gpumem"), truth, os.path.join(work, "answer.json")))
        except Exception as exc:  # one run's surprise must not hide the others'
            got["error"] = "%s: %s" % (type(exc).__name__, exc)
    else:
        got["error"] = "no capture or no truth (see runs/%s/log.txt)" % tag
        with open(os.path.join(work, "log.txt")) as f:
            got["log_tail"] = f.read()[-1500:]
    return got


def pseudo(frame):
    return frame[0].startswith("<")


def same_module(ours, ref, ref_class):
    """The product names a module by its path under the outermost module whose forward ran (Note [Module paths] in
    native/python/gpumem/_modules.py): a stage the workload called directly (`m.classifier(p)`) is the root of its own
    paths, and a leaf so called is named by its class."""
    return bool(ours) and (ours == ref or ref.endswith("." + ours) or ours == ref_class)


def analyse(capture_path, truth_path, answer_path):
    """The figures of one run (module docstring), and the reference's answer for each allocation compared."""
    truth = json.load(open(truth_path))
    me = os.path.realpath(truth["file"])
    c = Capture(capture_path)
    events = sorted([(e["offset"], 1, e) for e in c.blocks("alloc")] +
                    [(e["offset"], -1, e) for e in c.blocks("free_requested")], key=lambda x: x[0])
    t0, t1 = truth["bw_t0"], truth["bw_t1"]
    cur, peak, peak_at, live = 0, -1, None, {}
    for k, (off, sign, e) in enumerate(events):
        if sign > 0:
            live[e["addr"]] = e
            cur += e["size"]
        else:
            a = live.pop(e["addr"], None)
            cur -= a["size"] if a else 0
        if t0 <= e["t"] <= t1 and cur > peak:
            peak, peak_at = cur, k
    if peak_at is None:
        raise RuntimeError("no event between the backward's stamps")
    live = {}
    for off, sign, e in events[:peak_at + 1]:
        if sign > 0:
            live[e["addr"]] = e
        else:
            live.pop(e["addr"], None)
    t_peak = events[peak_at][2]["t"]
    made = [a for a in live.values() if t0 <= a["t"] <= t_peak]
    # the reference: each node's [pre, post] stamps on its autograd thread
    pre = {}
    spans = []
    for t, kind, i in truth["stamps"]:
        if kind == 0:
            pre[i] = t
        elif i in pre:
            spans.append((pre.pop(i), t, i))
    spans.sort()
    nodes = truth["nodes"]

    def node_in_apply(t):  # strict: between the node's pre-hook and hook
        best = None
        for a, b, i in spans:  # the innermost span holding t (nodes nest in a reentrant backward)
            if a > t:
                break
            if t <= b and (best is None or a >= best[0]):
                best = (a, b, i)
        return best[2] if best else None

    begins = sorted((a, i) for a, b, i in spans)

    def node_at(t):  # the node being evaluated: the last one whose pre-hook ran (its evaluation goes on after its hook)
        k = bisect.bisect_right(begins, (t, float("inf"))) - 1
        return begins[k][1] if k >= 0 else None

    def of_me(frames):  # the capture's frames: (file, function, line), innermost first
        return next(([f[0], f[2]] for f in frames if os.path.realpath(f[0]) == me), None)

    def of_me_tb(tb):  # a traceback's frames: [file, line, function], outermost first
        return next(([f[0], f[1]] for f in reversed(tb) if os.path.realpath(f[0]) == me), None)

    # every allocation made during the backward, live at the peak or not: the line only
    all_bytes = all_match = 0
    all_misses = collections.Counter()
    all_recomputed, all_answer = [0, 0], []
    for off, sign, e in events:
        if sign > 0 and t0 <= e["t"] <= t1:
            i = node_at(e["t"])
            ref = of_me_tb(nodes[i]["tb"]) if i is not None and nodes[i]["tb"] else [me, truth["backward_line"]]
            all_bytes += e["size"]
            fl, fr = c.stacks.get(e["stack"], (0, []))
            all_recomputed[0] += e["size"] if fl & 4 else 0
            all_answer.append(dict(t_ns=e["t"], addr=e["addr"], size=e["size"], line=ref and [os.path.basename(ref[0]), ref[1]],
                                   node=nodes[i]["name"] if i is not None else None))
            if of_me(fr) == ref:
                all_match += e["size"]
                all_recomputed[1] += e["size"] if fl & 4 else 0
            else:
                all_misses[(tuple(ref or ()), tuple(of_me(fr) or ()), nodes[i]["name"] if i is not None else None,
                            fl, tuple(tuple(f) for f in fr[:5]))] += e["size"]

    fig = dict(backward_peak_allocated=peak, backward_bytes=0, linked_bytes=0, line_match_bytes=0,
               op_checked_bytes=0, op_match_bytes=0, module_checked_bytes=0, module_match_bytes=0,
               recomputed_bytes=0, by_node_bytes=0, allocations=len(made), strict_line_match_bytes=0)
    misses, answer, module_misses = [], [], []
    for a in made:
        flags, frames = c.stacks.get(a["stack"], (0, []))
        size = a["size"]
        fig["backward_bytes"] += size
        linked = bool(flags & 2)
        recomputed = bool(flags & 4)
        fig["linked_bytes"] += size if linked else 0
        fig["recomputed_bytes"] += size if recomputed else 0
        i = node_at(a["t"])
        ref_tb = nodes[i]["tb"] if i is not None else []
        ref_line = of_me_tb(ref_tb) if ref_tb else [me, truth["backward_line"]]
        if i is not None:
            fig["by_node_bytes"] += size
        ours_line = of_me(frames)
        j = node_in_apply(a["t"])
        strict = of_me_tb(nodes[j]["tb"]) if j is not None and nodes[j]["tb"] else [me, truth["backward_line"]]
        fig["strict_line_match_bytes"] += size if ours_line == strict else 0
        if ours_line == ref_line:
            fig["line_match_bytes"] += size
        elif len(misses) < 8 or size > misses[-1]["size"]:
            misses.append(dict(size=size, ours=ours_line, ref=ref_line, node=nodes[i]["name"] if i is not None else None,
                               frames=frames[:6], flags=flags))
            misses.sort(key=lambda m: -m["size"])
            del misses[8:]
        ours_op = frames[0] if frames and linked and not pseudo(frames[0]) else None
        ref_op = ref_tb[-1] if ref_tb else None
        if ref_op and not recomputed:
            fig["op_checked_bytes"] += size
            if ours_op and [ours_op[0], ours_op[2]] == [ref_op[0], ref_op[1]]:
                fig["op_match_bytes"] += size
        ours_module = next((f[1] for f in frames if f[0] == "<module>"), None)
        ref_module = nodes[i]["leaf_module"] if i is not None else None
        if ref_module:
            fig["module_checked_bytes"] += size
            fig["module_match_bytes"] += size if same_module(ours_module, ref_module, nodes[i].get("leaf_class")) else 0
            if not same_module(ours_module, ref_module, nodes[i].get("leaf_class")) and len(module_misses) < 5:
                module_misses.append(dict(size=size, ours=ours_module, ref=ref_module, node=nodes[i]["name"]))
        answer.append(dict(t_ns=a["t"], addr=a["addr"], size=size, line=ref_line and [os.path.basename(ref_line[0]), ref_line[1]],
                           op=ref_op and [os.path.basename(ref_op[0]), ref_op[1], ref_op[2]],
                           node=nodes[i]["name"] if i is not None else None, module=ref_module))
    pct = lambda n, d: round(100.0 * n / d, 3) if d else None  # noqa: E731
    fig.update(line_match_pct=pct(fig["line_match_bytes"], fig["backward_bytes"]),
               strict_line_match_pct=pct(fig["strict_line_match_bytes"], fig["backward_bytes"]),
               op_match_pct=pct(fig["op_match_bytes"], fig["op_checked_bytes"]),
               module_match_pct=pct(fig["module_match_bytes"], fig["module_checked_bytes"]),
               linked_pct=pct(fig["linked_bytes"], fig["backward_bytes"]), misses=misses, module_misses=module_misses,
               all_backward_bytes=all_bytes, all_line_match_pct=pct(all_match, all_bytes),
               all_recomputed_bytes=all_recomputed[0], all_recomputed_match_bytes=all_recomputed[1],
               all_misses=[dict(bytes=b, ref=k[0], ours=k[1], node=k[2], flags=k[3], frames=k[4])
                           for k, b in all_misses.most_common(6)],
               peak_t_ns=t_peak, truth_max_allocated=truth.get("max_allocated"))
    with open(answer_path, "w") as f:
        json.dump(dict(model=truth["model"], file=os.path.basename(me), backward_line=truth["backward_line"],
                       bw_t0=t0, bw_t1=t1, peak_t_ns=t_peak, backward_peak_allocated=peak, allocations=answer,
                       all_allocations=all_answer), f)
    return fig


def build_observer():
    t = time.time()
    p = subprocess.run([PY, "-m", "gpumem", "build-observer"], env=ENV, capture_output=True, text=True)
    return {"rc": p.returncode, "seconds": round(time.time() - t, 1), "tail": (p.stdout + p.stderr)[-600:]}


# "noise": the default mode without the links against a second process of the same (GPUMEM_AA is read by nothing):
# the run's own noise floor, in the same rounds.
PAIRS = {"auto": ("gpumem-run-auto:GPUMEM_BACKWARD_LINKS=0", "gpumem-run-auto"),
         "lens": ("gpumem-run:GPUMEM_BACKWARD_LINKS=0", "gpumem-run"),
         "noise": ("gpumem-run-auto:GPUMEM_BACKWARD_LINKS=0", "gpumem-run-auto:GPUMEM_BACKWARD_LINKS=0,GPUMEM_AA=1")}


def cost_ratios(bench):
    """Per mode and model: step time and host CPU time a step with the links over without, per round (Note [Interleaved
    rounds] in bench_allocator.py: both ran back to back in each round) and their median."""
    import statistics

    rounds = bench.get("step_rounds") or []
    out = {}
    for mode, (off, on) in PAIRS.items():
        for model in ("gpt2", "resnet50"):
            for stat in ("median_ms", "cpu_ms", "p10_ms"):
                per = []
                for r in rounds:
                    a, b = r.get(off, {}).get(model, {}).get(stat), r.get(on, {}).get(model, {}).get(stat)
                    per.append(round(b / a, 4) if a and b else None)
                ok = [x for x in per if x is not None]
                out["%s_%s_%s" % (mode, model, stat[:-3])] = {"median": round(statistics.median(ok), 4) if ok else None,
                                                             "rounds": per}
            ms = [r.get(on, {}).get(model, {}).get("median_ms") for r in rounds]
            out["%s_%s_step_ms" % (mode, model)] = ms
    return out


def bench_rounds(out, deadline, configs, rounds, steps):
    cmd = [PY, os.path.join(HERE, "bench_allocator.py"), "--so", SO, "--only", "steps", "--models", "gpt2", "resnet50",
           "--step-configs"] + configs + ["--rounds", str(rounds), "--steps", str(steps), "--cpus", "6",
                                          "--lockstep", "10", "--turn-cpus"]
    rc, seconds = run_logged(cmd, dict(ENV, OUT=out), os.path.join(out, "cost.log"), deadline)
    # the rounds the bench printed, also when it was cut short (its JSON is written at its end only)
    with open(os.path.join(out, "cost.log")) as f:
        return rc, seconds, [json.loads(line)["result"] for line in f if line.startswith('{"round"')]


def cost(out, deadline, rounds, steps):
    configs = list(dict.fromkeys(c for pair in PAIRS.values() for c in pair))
    rc, seconds, got = bench_rounds(out, deadline, configs, rounds, steps)
    return {"rc": rc, "seconds": seconds, "rounds": len(got), "ratios": cost_ratios({"step_rounds": got})}


# The recording part that encloses everything the links do at an allocation (Note [Self time] in
# native/allocator/src/self_time.h): PyTorch's context recorder calling us (default mode), our malloc (lens).
ENCLOSING = {"auto": "gather", "lens": "malloc"}


def self_time(out, deadline, rounds, steps):
    """Host time the links add a step, measured inside each process (GPUMEM_SELF_TIME=1: the TSC cycles in each
    recording part), so the host's speed from one process to the next does not enter it: per mode and model, µs a step
    of the enclosing part with the links over without, and that as a share of the step's host CPU time."""
    import statistics

    pairs = {mode: tuple(c + ("," if ":" in c else ":") + "GPUMEM_SELF_TIME=1" for c in pair)
             for mode, pair in PAIRS.items() if mode in ENCLOSING}
    rc, seconds, got = bench_rounds(out, deadline, [c for pair in pairs.values() for c in pair], rounds, steps)
    res = {"rc": rc, "seconds": seconds, "rounds": len(got)}
    for mode, (off, on) in pairs.items():
        for model in ("gpt2", "resnet50"):
            added, share = [], []
            for r in got:
                a, b = r.get(off, {}).get(model, {}), r.get(on, {}).get(model, {})
                us = [x.get("self_us_per_step", {}).get(ENCLOSING[mode]) for x in (a, b)]
                if None not in us and b.get("cpu_ms"):
                    added.append(round(us[1] - us[0], 1))
                    share.append(round((us[1] - us[0]) / 1e3 / b["cpu_ms"] * 100, 2))
            res["%s_%s" % (mode, model)] = {"added_us": added, "pct_of_host_cpu": share,
                                            "median_us": statistics.median(added) if added else None}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--stage", default="truth", choices=("smoke", "truth", "cost", "self-time"))
    ap.add_argument("--models", nargs="+")
    ap.add_argument("--modes", nargs="+", default=["lens", "auto"])
    ap.add_argument("--limit", type=int, default=540)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench-steps", type=int, default=60)
    args = ap.parse_args()
    deadline = time.time() + args.limit - 20
    os.makedirs(args.out, exist_ok=True)
    res = {"stage": args.stage, "observer_build": build_observer()}
    if args.stage == "cost":
        res["cost"] = cost(args.out, deadline, args.rounds, args.bench_steps)
    elif args.stage == "self-time":
        res["self_time"] = self_time(args.out, deadline, args.rounds, args.bench_steps)
    else:
        models = args.models or (["reentrant", "efficientnet"] if args.stage == "smoke" else ["efficientnet", "bert", "neox"])
        steps = 2 if args.stage == "smoke" else 3
        jobs = [(m, mode) for m in models for mode in args.modes]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            res["runs"] = list(pool.map(lambda j: run_one(j[0], j[1], args.out, steps, deadline), jobs))
        # at or above 99 % on the reference's line, the measured step replayed from the learned one (no miss)
        ok = all(r.get("line_match_pct") is not None and r["line_match_pct"] >= 99.0 and (r.get("links") or {}).get(
            "misses") == 0 and (r.get("links") or {}).get("steps_known", 0) >= steps - 1 for r in res["runs"]
            if r["model"] != "reentrant")
        res["verdict"] = "PASS" if ok else "FAIL"
    # the runs' captures and answers for the CPU fixture (at most 8 files come back: one archive, smallest first)
    fx = sorted(glob.glob(os.path.join(args.out, "runs", "*", "capture.gpumem")), key=os.path.getsize)
    if fx:
        import tarfile

        with tarfile.open(os.path.join(args.out, "fixtures.tgz"), "w:gz") as tar:
            for cap in fx[:2]:
                tar.add(cap, arcname=os.path.basename(os.path.dirname(cap)) + ".gpumem")
            for ans in glob.glob(os.path.join(args.out, "runs", "*", "answer.json")):
                tar.add(ans, arcname=os.path.basename(os.path.dirname(ans)) + ".answer.json")
            for log in glob.glob(os.path.join(args.out, "runs", "*", "log.txt")):
                tar.add(log, arcname=os.path.basename(os.path.dirname(log)) + ".log")
    with open(os.path.join(args.out, "backward_lines.json"), "w") as f:
        json.dump(res, f, indent=1)
    for r in res.get("runs", []):
        keys = ("rc", "seconds", "backward_peak_allocated", "backward_bytes", "linked_pct", "line_match_pct",
                "strict_line_match_pct", "all_backward_bytes", "all_line_match_pct", "all_recomputed_bytes",
                "all_recomputed_match_bytes",
                "op_match_pct", "op_checked_bytes", "module_match_pct", "module_checked_bytes", "recomputed_bytes",
                "links", "error")
        print("%s-%s: %s" % (r["model"], r["mode"], " ".join("%s=%s" % (k, r.get(k)) for k in keys if k in r)))
        for m in r.get("misses", [])[:3]:
            print("   miss", m["size"], "ours", m["ours"], "ref", m["ref"], m["node"], m["frames"][:3], m["flags"])
        for m in r.get("all_misses", [])[:4]:
            print("   all-miss", m)
        for m in r.get("module_misses", [])[:3]:
            print("   module miss", m)
    for k, v in (res.get("cost", {}).get("ratios") or {}).items():
        print("cost", k, v)
    for k, v in res.get("self_time", {}).items():
        print("self_time", k, v)
    print("verdict", res.get("verdict"), "observer", res["observer_build"]["rc"], res["observer_build"]["seconds"], "s")


if __name__ == "__main__":
    main()
