#!/usr/bin/env python3
"""Probe: where the lens allocator's step-time overhead on ResNet-50 (bf16, batch 64)
goes, while settling (steps 5–20) and after (steps 30+). Not a test: it prints per-step-window ratios and what the
profiler sees, for Note [ResNet-50 overhead] in native/allocator/README.md.

    python3 test/gpu/probes/resnet_overhead.py [--so PATH] [--rounds 3] [--steps 60] [--out DIR]

1. Interleaved rounds (Note [Interleaved rounds] in bench_allocator.py) of native, ours-bare (allocator alone)
   and gpumem-run (the real bootstrap): every step timed from step 1, with the driver allocations each step made,
   so the settling window shows whether it is driver calls (cudaMalloc/cuMemMap), recording or the host.
2. One profiled run each of native and gpumem-run over steps 5–20 (torch.profiler, CPU + CUDA runtime): the CUDA
   runtime/driver calls by count and total host time, and the top CPU operators, to name where the time goes.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "400")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(GPU))
sys.path.insert(0, GPU)


def child(args):
    import torch
    import bench_allocator as b

    lib = b.setup("native" if args.config == "gpumem-run" else args.config, args.so)
    native = b._bootstrap_native()
    stats = ((lambda: b.lens_stats(lib)) if lib is not None else (lambda: native.stats(0)) if native is not None
             else torch.cuda.memory_stats)  # noqa: E731
    torch.manual_seed(0)
    step = b.step_fn("resnet50")
    out = {"config": args.config, "times_ms": [], "driver_allocs": [], "host_ms": [], "driver_frees": [],
           "trim_syncs": [], "page_moves": []}
    keys = (("driver_allocs", "num_device_alloc"), ("driver_frees", "num_device_free"),
            ("trim_syncs", "num_trim_syncs"), ("page_moves", "num_page_moves"))
    prof = None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    for i in range(args.steps):
        if prof is not None and i == 4:
            prof.__enter__()
        s0 = stats()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        out["times_ms"].append(round((time.perf_counter() - t0) * 1e3, 3))
        out["host_ms"].append(round((t1 - t0) * 1e3, 3))
        s1 = stats()
        for name, key in keys:
            out[name].append(s1.get(key, 0) - s0.get(key, 0))
        if prof is not None and i == 19:
            prof.__exit__(None, None, None)
            rows = []
            for e in prof.key_averages():
                rows.append({"name": e.key, "count": e.count, "self_cpu_us": e.self_cpu_time_total,
                             "cpu_us": e.cpu_time_total})
            rows.sort(key=lambda r: -r["self_cpu_us"])
            out["profile_top"] = rows[:40]
            out["profile_runtime"] = [r for r in rows if r["name"].startswith(("cuda", "cu"))][:40]
            prof = None
    out["stack_info"] = b._stack_info()
    return out


def run(config, so, steps, profile=False):
    import bench_allocator as b

    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--config", config, "--so", so,
           "--steps", str(steps)] + (["--profile"] if profile else [])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if config == "gpumem-run":
        sys.path.insert(0, os.path.join(ROOT, "native", "python"))
        from gpumem import _launch
        env = _launch.workload_env(tempfile.mkdtemp(prefix="gpumem-probe-"), so, user_roots=[HERE], base=env, allocator_mode="lens")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": "exit %d: %s" % (p.returncode, p.stderr[-1500:])}


def window(times, lo, hi):
    w = times[lo:hi]
    return statistics.median(w) if w else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", default=os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--config", default="native")
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a)), flush=True)
        return 0
    configs = ["native", "ours-bare", "gpumem-run"]
    rounds = []
    for r in range(a.rounds):
        k = r % len(configs)
        rounds.append({c: run(c, a.so, a.steps) for c in configs[k:] + configs[:k]})
    res = {"rounds": rounds, "windows": {}}
    for name, lo, hi in (("settling 5-20", 4, 20), ("after 30", 29, a.steps), ("last 20", a.steps - 20, a.steps)):
        for c in configs[1:]:
            ratios = []
            for rd in rounds:
                if "error" in rd[c] or "error" in rd["native"]:
                    continue
                ratios.append(window(rd[c]["times_ms"], lo, hi) / window(rd["native"]["times_ms"], lo, hi))
            res["windows"]["%s %s/native" % (name, c)] = {"median": statistics.median(ratios) if ratios else None,
                                                          "rounds": [round(x, 4) for x in ratios]}
            # the fastest steps: the step without a shared host's interference
            mins = [min(rd[c]["times_ms"][lo:hi]) / min(rd["native"]["times_ms"][lo:hi]) for rd in rounds
                    if "error" not in rd[c] and "error" not in rd["native"]]
            res["windows"]["%s %s/native min" % (name, c)] = {"median": statistics.median(mins) if mins else None,
                                                              "rounds": [round(x, 4) for x in mins]}
        for c in configs:
            res["windows"]["%s %s driver_allocs/step" % (name, c)] = [
                sum(rd[c]["driver_allocs"][lo:hi]) / max(1, hi - lo) for rd in rounds if "error" not in rd[c]]
            for extra in ("trim_syncs", "page_moves", "driver_frees"):
                res["windows"]["%s %s %s/step" % (name, c, extra)] = [
                    sum(rd[c][extra][lo:hi]) / max(1, hi - lo) for rd in rounds if "error" not in rd[c]]
            res["windows"]["%s %s host_ms" % (name, c)] = [window(rd[c]["host_ms"], lo, hi) for rd in rounds
                                                           if "error" not in rd[c]]
    for c in configs:
        errs = [rd[c]["error"] for rd in rounds if "error" in rd[c]]
        if errs:
            res["windows"]["%s errors" % c] = errs[:1]
    res["profile"] = {c: run(c, a.so, 24, profile=True) for c in ("native", "gpumem-run")}
    for k, v in res["windows"].items():
        print(k, json.dumps(v))
    for c, p in res["profile"].items():
        print("=== profile %s (steps 5-20): runtime calls" % c)
        for r in p.get("profile_runtime", [])[:20]:
            print("  %-40s n=%6d self_cpu=%9.0f us" % (r["name"][:40], r["count"], r["self_cpu_us"]))
        print("=== profile %s: top self CPU" % c)
        for r in p.get("profile_top", [])[:20]:
            print("  %-40s n=%6d self_cpu=%9.0f us" % (r["name"][:40], r["count"], r["self_cpu_us"]))
        if "error" in p:
            print("  error:", p["error"])
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "resnet_overhead.json"), "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
