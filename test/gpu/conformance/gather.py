#!/usr/bin/env python3
"""Runs the conformance workloads (workloads.py) natively and under `gpumem run` in both allocator modes, and
gathers each run's capture (gzipped) and the truth the workload measured in the same run, as the fixtures of the
CPU conformance suite (test/fixtures/conformance/, test/unit/conformance.test.mjs).

    python3 test/gpu/conformance/gather.py --out DIR [--scale smoke|full] [--jobs 6] [--only NAME…] [--limit 500]

Runs are independent processes, several at a time on the one GPU (nothing here times a step, and each process's
allocator sees only its own requests). The observer extension is built before the first run of the default mode,
so `auto` takes PyTorch's allocator in every run. Writes DIR/fixtures/<workload>-<run>.{capture.gz,truth.json},
DIR/logs/<workload>-<run>.log and DIR/gather.json (what ran, its exit code and seconds).
"""
import faulthandler
import os
import sys

# a stall comes back as a stack, below run_all.sh's stage limit
faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "560")), exit=True)
LIMIT = int(next((sys.argv[i + 1] for i, a in enumerate(sys.argv) if a == "--limit"), "500"))
import argparse
import concurrent.futures
import glob
import gzip
import json
import shutil
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HERE = os.path.dirname(os.path.abspath(__file__))
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
PY = sys.executable

EXPANDABLE = "expandable_segments:True"
SPLIT = "max_split_size_mb:64,roundup_power2_divisions:4"
GC = "garbage_collection_threshold:0.6"
ASYNC = "backend:cudaMallocAsync"

# workload → its PYTORCH_CUDA_ALLOC_CONF, and the runs: native (PyTorch alone, the workload's conf), native-<name>
# (PyTorch alone under another conf, for the advice's predictions), lens and auto (under gpumem run).
PLAN = {
    "lm_varlen": ("", ["native", "native-expandable", "lens", "auto"]),
    "convnet_benchmark": ("", ["native", "native-expandable", "lens", "auto"]),
    "compile_graphs": ("", ["native", "lens", "auto"]),
    "mempool": ("", ["native", "lens", "auto"]),
    "expandable": (EXPANDABLE, ["native", "native-fixed", "lens", "auto"]),
    "alloc_conf": (SPLIT, ["native", "native-fixed", "lens", "auto"]),
    "gc_threshold": (GC, ["native", "lens", "auto"]),
    "llama_accumulate": ("", ["native", "lens", "auto"]),
    "retained_regnet": ("", ["lens", "auto"]),
    "retained_densenet": ("", ["lens", "auto"]),
    "retained_opt": ("", ["lens", "auto"]),
    "generate": ("", ["lens", "auto"]),
    "zero_size": ("", ["native", "lens", "auto"]),
    # figures only: PyTorch's figures without per-allocation events, three ways
    "figures_async": (ASYNC, ["native", "auto"]),
    "figures_only": ("", ["auto-figures"]),
    "figures_record": ("", ["auto-record2"]),
}
FIGURES_WORKLOAD = "llama_accumulate"  # what the three figures-only runs run (no cudnn.benchmark: they run beside others)
CONF_OF_RUN = {"native-expandable": EXPANDABLE, "native-fixed": ""}
# cudnn.benchmark tries workspaces as large as the free memory (under cudaMallocAsync it took 139 GiB of an H200): its
# runs go one at a time, after the others, so that no other process meets an empty GPU.
ALONE = {"convnet_benchmark"}
DEADLINE = [float("inf")]  # the gather's end: a run that would pass it is cut short (its truth is then missing)


def job(name, run, scale, out):
    conf, _ = PLAN[name]
    conf = CONF_OF_RUN.get(run, conf)
    workload = FIGURES_WORKLOAD if name.startswith("figures_") else name
    tag = "%s-%s" % (name, run)
    work = os.path.join("/tmp", "conformance", tag)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    truth = os.path.join(work, "truth.json")
    env = dict(os.environ, PYTHONUNBUFFERED="1", CONFORMANCE_TRUTH=truth, OMP_NUM_THREADS="2",
               GPUMEM_WATCHDOG_S=str(LIMIT - 40))
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    cmd = [PY, os.path.join(HERE, "workloads.py"), workload, "--scale", scale]
    if run != "native" and not run.startswith("native-"):
        env["PYTHONPATH"] = os.path.join(ROOT, "native", "python")
        mode = "lens" if run == "lens" else "auto"
        extra = {"auto-figures": ["--figures-only"], "auto-record2": ["--record-steps", "2"]}.get(run, [])
        cmd = [PY, "-m", "gpumem", "run", "--allocator", mode, "--allocator-so", SO, "--out", work] + extra + ["--"] + cmd
    t0 = time.time()
    with open(os.path.join(out, "logs", tag + ".log"), "w") as log:
        log.write("$ %s\nPYTORCH_CUDA_ALLOC_CONF=%s\n" % (" ".join(cmd), conf))
        log.flush()
        try:
            left = DEADLINE[0] - time.time()
            rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=max(5, left)).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    got = {"workload": name, "run": run, "conf": conf, "rc": rc, "seconds": round(time.time() - t0, 1)}
    fix = os.path.join(out, "fixtures")
    if os.path.exists(truth):
        shutil.copy(truth, os.path.join(fix, tag + ".truth.json"))
        got["truth"] = True
    # the workload's own capture: the largest of the session's (torch.compile's workers make their own)
    caps = sorted(glob.glob(os.path.join(work, "*", "capture-*.gpumem")), key=os.path.getsize)
    if caps:
        with open(caps[-1], "rb") as src, gzip.open(os.path.join(fix, tag + ".capture.gz"), "wb", 9) as dst:
            shutil.copyfileobj(src, dst)
        got["capture_bytes"] = os.path.getsize(caps[-1])
        got["captures"] = len(caps)
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", choices=("smoke", "full"), default="full")
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--full", nargs="*", default=(), help="workloads run at full scale whatever --scale says")
    ap.add_argument("--limit", type=int, default=500, help="seconds for the whole gather")
    a = ap.parse_args()
    for d in ("fixtures", "logs"):
        os.makedirs(os.path.join(a.out, d), exist_ok=True)
    names = [n for n in PLAN if not a.only or n in a.only]
    jobs = [(n, r) for n in names for r in PLAN[n][1]]
    alone = [j for j in jobs if j[0] in ALONE]
    native = [j for j in jobs if j[1].startswith("native") and j not in alone]
    tracked = [j for j in jobs if not j[1].startswith("native") and j not in alone]
    t0 = time.time()
    DEADLINE[0] = t0 + a.limit
    results = []

    def record(r):
        results.append(r)
        print(json.dumps(r), flush=True)
        with open(os.path.join(a.out, "gather.json"), "w") as g:
            json.dump({"scale": a.scale, "seconds": round(time.time() - t0, 1), "runs": results}, g, indent=1)

    def run(n, r):
        return job(n, r, "full" if n in a.full else a.scale, a.out)

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "native", "python"))
        build = pool.submit(subprocess.run, [PY, "-m", "gpumem", "build-observer"], env=env, capture_output=True, text=True)
        futures = [pool.submit(run, n, r) for n, r in native]
        b = build.result()
        with open(os.path.join(a.out, "logs", "build-observer.log"), "w") as f:
            f.write(b.stdout + b.stderr)
        record({"build_observer_rc": b.returncode, "seconds": round(time.time() - t0, 1)})
        futures += [pool.submit(run, n, r) for n, r in tracked]
        for f in concurrent.futures.as_completed(futures):
            record(f.result())
    for n, r in alone:
        record(run(n, r))
    print("gathered %d runs in %.0f s" % (len(results) - 1, time.time() - t0))


if __name__ == "__main__":
    main()
