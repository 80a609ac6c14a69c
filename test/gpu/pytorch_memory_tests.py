#!/usr/bin/env python3
"""PyTorch's own CUDA memory tests, natively and under `gpumem run`, compared.

    python3 test/gpu/pytorch_memory_tests.py [--out DIR] [--modes native native-expandable lens-fixed lens]

Needs .carry/pytorch-tests/test_cuda.py (made by test/gpu/extract_pytorch_tests.py; carried, never
committed) and dist/native/libgpumem_allocator.so. One process per mode runs every test:
  native              PyTorch's allocator, default settings
  native-expandable   PyTorch's allocator, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  lens-fixed          `gpumem run --segments fixed` (the lens with PyTorch's default segment policy)
  lens                `gpumem run` with its defaults (expandable segments), as a new user runs it
Each lens mode is held to the native mode with the same segment policy (lens-fixed ← native, lens ←
native-expandable); where only some modes run, a lens mode falls back to `native`.

Prints one line per test with every mode's outcome, then `PASS` or `FAIL`: FAIL if a test passes in
the native mode and fails under the lens, unless KNOWN_EXCEPTIONS gives a reason. Writes
DIR/pytorch-tests/<mode>.json (per-test outcomes), <mode>.log and summary.json.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "270")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import json
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY_DIR = os.path.join(ROOT, "native", "python")
TESTS = os.path.join(ROOT, ".carry", "pytorch-tests", "test_cuda.py")
RUNNER = os.path.join(ROOT, "test", "gpu", "pytorch_tests_runner.py")
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
MODES = ("native", "native-expandable", "lens-fixed", "lens")
REFERENCE = {"lens-fixed": "native", "lens": "native-expandable"}

# Failures under the lens that PyTorch itself makes unavoidable for any pluggable allocator.
KNOWN_EXCEPTIONS = {
    "TestCudaMallocAsync.test_notifies_oom":
        "torch._C._cuda_attach_out_of_memory_observer raises for every pluggable allocator "
        "(CUDAPluggableAllocator::attachOutOfMemoryObserver: 'does not yet support').",
    "TestMemPool.test_mempool_empty_cache":
        "torch.cuda.MemPool() calls createOrIncrefPool, which PyTorch does not offer to pluggable allocators; "
        "gpumem raises a RuntimeError naming the PyTorch-allocator mode instead.",
}


def _user_pythonpath():
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != PY_DIR]


def _env(mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.pop("PYTORCH_ALLOC_CONF", None)
    paths = ([PY_DIR] if mode.startswith("lens") else []) + _user_pythonpath()
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    if mode == "native-expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    return env


def run_mode(mode, out, timeout):
    result = os.path.join(out, mode + ".json")
    argv = [sys.executable, RUNNER, TESTS, "--json", result]
    if mode.startswith("lens"):
        segments = "fixed" if mode == "lens-fixed" else None
        argv = [sys.executable, "-m", "gpumem", "run", "--out", os.path.join(out, mode + "-session"), "--allocator", "lens", "--allocator-so", SO] + (
            ["--segments", segments] if segments else []) + ["--"] + argv
    t0 = time.monotonic()
    with open(os.path.join(out, mode + ".log"), "w") as log:
        try:
            proc = subprocess.run(argv, env=_env(mode), stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                                  cwd=os.path.dirname(TESTS))
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    seconds = round(time.monotonic() - t0, 1)
    if not os.path.exists(result):
        return {"code": code, "seconds": seconds, "tests": None}
    with open(result) as f:
        data = json.load(f)
    return {"code": code, "seconds": seconds, "tests": data["tests"], "torch": data.get("torch")}


def compare(runs):
    """(lines, failures): one line per test, and the tests that pass natively and fail under the lens."""
    names = sorted({t for r in runs.values() if r["tests"] for t in r["tests"]})
    modes = list(runs)
    width = max([len(n) for n in names] + [10])
    lines = ["%-*s  %s" % (width, "test", "  ".join("%-17s" % m for m in modes))]
    failures = []
    for name in names:
        cells = []
        for m in modes:
            t = (runs[m]["tests"] or {}).get(name)
            cells.append("%-17s" % (t["outcome"] if t else "missing"))
        lines.append("%-*s  %s" % (width, name, "  ".join(cells)))
        for lens_mode, ref in REFERENCE.items():
            if lens_mode not in runs:
                continue
            ref = ref if ref in runs else "native"
            if ref not in runs or not runs[ref]["tests"]:
                continue
            native = runs[ref]["tests"].get(name, {}).get("outcome")
            lens = (runs[lens_mode]["tests"] or {}).get(name, {"outcome": "missing", "detail": runs[lens_mode]["code"]})
            if native == "pass" and lens["outcome"] != "pass":
                known = KNOWN_EXCEPTIONS.get(name)
                lines.append("    %s: passes in %s, %s in %s: %s" % (
                    "EXCEPTION" if known else "REGRESSION", ref, lens["outcome"], lens_mode,
                    known or lens.get("detail", "")))
                if not known:
                    failures.append({"test": name, "reference": ref, "mode": lens_mode, "outcome": lens["outcome"],
                                     "detail": lens.get("detail", "")})
    return lines, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="pytorch-tests-"))
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--timeout", type=int, default=150, help="seconds per mode")
    args = ap.parse_args()
    out = os.path.join(args.out, "pytorch-tests")
    os.makedirs(out, exist_ok=True)
    if not os.path.exists(TESTS):
        print("FAIL missing %s: run test/gpu/extract_pytorch_tests.py and carry .carry/pytorch-tests" % TESTS)
        return 2
    try:
        import torch
    except ImportError:
        print("SKIP no torch on this machine: nothing to compare")
        return 0
    if not torch.cuda.is_available():
        print("SKIP no CUDA device (torch %s): nothing to compare" % torch.__version__)
        return 0
    if any(m.startswith("lens") for m in args.modes) and not os.path.exists(SO):
        print("FAIL missing %s: make -C native/allocator and carry dist/native" % SO)
        return 2
    runs = {}
    for mode in args.modes:
        runs[mode] = run_mode(mode, out, args.timeout)
        r = runs[mode]
        counts = {}
        for t in (r["tests"] or {}).values():
            counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
        print("%s: exit %s in %ss, %s" % (mode, r["code"], r["seconds"], counts or "no results (see %s.log)" % mode),
              flush=True)
    lines, failures = compare(runs)
    print("\n".join(lines))
    broken = [m for m, r in runs.items() if r["tests"] is None]
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"modes": {m: {k: v for k, v in r.items() if k != "tests"} for m, r in runs.items()},
                   "failures": failures, "broken_modes": broken, "table": lines}, f, indent=1)
    if failures or broken:
        print("FAIL %d test(s) pass natively and fail under the lens%s" % (
            len(failures), "; no results from " + ", ".join(broken) if broken else ""))
        return 1
    print("PASS every test that passes natively passes under the lens (%d modes, %d known exceptions)"
          % (len(runs), len(KNOWN_EXCEPTIONS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
