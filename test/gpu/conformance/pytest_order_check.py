#!/usr/bin/env python3
"""pytest budgets that do not depend on the order of the tests, on a real GPU (Note [pytest budgets] in
native/python/gpumem/_pytest.py, Note [Piece figures] in native/python/gpumem/_meter.py).

Runs test_order_budgets.py (beside this file: a test that leaves 32 MiB live in a module global, a 4 KiB test, a
16 MiB test with a budget of 20 MiB, a test over its budget) under `python3 -m pytest -p gpumem --gpumem-report` with
PYTHONPATH=native/python, in file order and reversed (explicit node ids), in both allocator modes (GPUMEM_ALLOCATOR=lens
and =pytorch: outside `gpumem run` the plugin starts tracking itself with the environment's settings, Note [Tracking
from inside]). The observer extension is built first (`python3 -m gpumem build-observer`: at once when it is built
already), so the pytorch runs observe PyTorch's allocator through the trace tracker. The four runs go at once.

    python3 test/gpu/conformance/pytest_order_check.py [--out DIR] [--modes lens,pytorch]

Writes DIR/pytest_order.json (DIR: --out, else $OUT): per mode, per order, per test the verdict, the peak (the test's
own), where it was counted (peak_from), what was live at its start, the top line at its peak, and what the test
measured itself (its own bytes and allocated at its start, from torch.cuda.memory_allocated()); then the problems
found. Exits 1 when verdicts or peaks differ between the orders, a peak is not the test's own bytes or was not counted
from the capture, a top line is not the test's own, the live-at-start figure is not what the test saw, or the report
lacks it. Needs pytest and torch on the machine; under 2 minutes (tiny tensors, the runs side by side).
"""
import faulthandler

faulthandler.dump_traceback_later(150, exit=True)  # a stall comes back as a stack, well inside the device call
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PY_DIR = os.path.join(ROOT, "native", "python")
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
TEST_FILE = os.path.join(HERE, "test_order_budgets.py")
FILE_NAME = os.path.basename(TEST_FILE)
ORDER = ["test_leaves_32mib", "test_4kib", "test_16mib", "test_over_budget"]
VERDICTS = {"test_leaves_32mib": "passed", "test_4kib": "passed", "test_16mib": "passed", "test_over_budget": "failed"}
MARKS = {"test_leaves_32mib": "# LEAVES", "test_4kib": "# SMALL", "test_16mib": "# MEDIUM", "test_over_budget": "# OVER"}
RUN_TIMEOUT_S = 100

sys.path.insert(0, PY_DIR)
from gpumem import _format as F  # noqa: E402  the capture's header, for the mode a run took
from gpumem._meter import fmt  # noqa: E402  sizes as the report writes them


def env_for(mode, seen):
    # GPUMEM_BACKEND passes through for a dry run off the GPU: GPUMEM_BACKEND=sim, the stand-in torch
    # (test/python/fake_torch) on PYTHONPATH, --modes lens
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_") or k == "GPUMEM_BACKEND"}
    env.update(PYTHONPATH=os.pathsep.join([PY_DIR] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
               GPUMEM_ALLOCATOR=mode, GPUMEM_ALLOCATOR_SO=SO, ORDER_CHECK_SEEN=seen, PYTHONUNBUFFERED="1")
    return env


def line_of(marker):
    with open(TEST_FILE) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line)


def build_observer():
    p = subprocess.run([sys.executable, "-m", "gpumem", "build-observer"], env=env_for("pytorch", os.devnull),
                       capture_output=True, text=True, timeout=110)
    return {"rc": p.returncode, "out": (p.stdout + p.stderr).strip()[-600:]}


def run(out, mode, order):
    """One pytest run: what it printed, its rows and what each test measured itself."""
    work = os.path.join(out, "%s-%s" % (mode, order.replace(" ", "-")))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    shutil.copy(TEST_FILE, work)  # its own folder: no conftest or ini file of the repository applies
    seen = os.path.join(work, "seen.jsonl")
    names = ORDER if order == "file order" else ORDER[::-1]
    cmd = [sys.executable, "-m", "pytest", "-p", "gpumem", "-p", "no:cacheprovider", "-q", "--gpumem-report"] + \
          ["%s::%s" % (FILE_NAME, n) for n in names]
    try:
        p = subprocess.run(cmd, cwd=work, env=env_for(mode, seen), capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, stdout, stderr = "timeout", exc.stdout or "", exc.stderr or ""
        stdout, stderr = [s.decode("utf-8", "replace") if isinstance(s, bytes) else s for s in (stdout, stderr)]
    with open(os.path.join(work, "log.txt"), "w") as f:
        f.write("$ %s\n%s\n--- stderr\n%s" % (" ".join(cmd), stdout, stderr))
    rows, header = [], {}
    sessions = os.path.join(work, ".gpumem")
    for d in sorted(os.listdir(sessions)) if os.path.isdir(sessions) else []:
        for name in sorted(os.listdir(os.path.join(sessions, d))):
            if name.startswith("pytest-") and name.endswith(".jsonl"):
                with open(os.path.join(sessions, d, name)) as f:
                    rows += [json.loads(line) for line in f if line.strip()]
    capture = next((r.get("capture") for r in rows if r.get("capture")), None)
    if capture and os.path.exists(capture):
        with open(capture, "rb") as f:
            header = F.read_header(f.read())[2]
    measured = {}
    if os.path.exists(seen):
        with open(seen) as f:
            measured = {r["test"]: r for r in map(json.loads, f)}
    return {"rc": rc, "names": names, "stdout": stdout, "stderr_tail": stderr[-1500:], "rows": rows,
            "mode_taken": header.get("allocator_mode"), "mode_reason": header.get("allocator_mode_reason"),
            "measured": measured, "work": work}


def tests_of(r):
    """Per test: verdict, peak, where it was counted, live at start, top line, and what the test measured itself."""
    out = {}
    for name in ORDER:
        done = next((x for x in r["rows"] if x["status"] == "done" and x["test"].endswith("::" + name)), {})
        result = next((x for x in r["rows"] if x["status"] == "result" and x["test"].endswith("::" + name)), {})
        lines = done.get("lines") or []
        out[name] = {
            "verdict": result.get("outcome"),
            "peak": done.get("peak_allocated"),
            "peak_from": done.get("peak_from"),
            "live_at_start": done.get("allocated_before"),
            "max_memory_allocated": done.get("max_memory_allocated"),
            "left_allocated": done.get("left_allocated"),
            "top_line": ("%s:%d in %s (%d B)" % (os.path.basename(lines[0][0]), lines[0][1], lines[0][2], lines[0][3])
                         if lines else None),
            "top_line_where": [os.path.basename(lines[0][0]), lines[0][1], lines[0][2]] if lines else None,
            "lines": len(lines),
            "own_bytes_measured": (r["measured"].get(name) or {}).get("own"),
            "start_measured": (r["measured"].get(name) or {}).get("start"),
            "message": result.get("message", "").split("\ncapture: ")[0],
        }
    return out


def problems_of(mode, runs):
    found = []
    for order, r in runs.items():
        where = "%s, %s" % (mode, order)
        if r["rc"] != 1:
            found.append("%s: pytest exited %s (1 expected: one test over its budget); see %s/log.txt" % (where, r["rc"], r["work"]))
        if r["mode_taken"] != mode:
            found.append("%s: the run took allocator mode %r (%s)" % (where, r["mode_taken"], r["mode_reason"]))
        if "live at start" not in r["stdout"]:
            found.append("%s: the --gpumem-report table has no live-at-start column" % where)
        for name, t in r["tests"].items():
            at = "%s, %s" % (where, name)
            if t["verdict"] != VERDICTS[name]:
                found.append("%s: verdict %s, %s expected" % (at, t["verdict"], VERDICTS[name]))
            if t["peak"] is None or t["peak"] != t["own_bytes_measured"]:
                found.append("%s: peak %s is not the test's own bytes %s" % (at, t["peak"], t["own_bytes_measured"]))
            if t["peak_from"] != "capture":
                found.append("%s: the peak was counted from %s, not the capture" % (at, t["peak_from"]))
            if t["live_at_start"] != t["start_measured"]:
                found.append("%s: live at start %s, the test saw %s" % (at, t["live_at_start"], t["start_measured"]))
            if t["top_line_where"] != [FILE_NAME, line_of(MARKS[name]), name] or t["lines"] != 1:
                found.append("%s: the lines at its peak are not its own allocation alone: %s (%d lines)" % (at, t["top_line"], t["lines"]))
            row = re.search(r"^%s::%s\s+(\S+ \S+)\s+(\S+ \S+)\s+" % (re.escape(FILE_NAME), name), r["stdout"], re.M)
            if t["live_at_start"] is not None and (row is None or row.group(2) != fmt(t["live_at_start"])):
                found.append("%s: the report's row does not give %s live at start: %s" % (at, fmt(t["live_at_start"]), row and row.group(0)))
        over = r["tests"]["test_over_budget"]
        if over["live_at_start"] is not None and "live at the test's start: %s" % fmt(over["live_at_start"]) not in over["message"]:
            found.append("%s: the failure message does not give what was live at the test's start: %r" % (where, over["message"]))
    first, rev = runs.get("file order"), runs.get("reversed")
    if first and rev:
        for name in ORDER:
            a, b = first["tests"][name], rev["tests"][name]
            for key in ("verdict", "peak", "top_line"):
                if a[key] != b[key]:
                    found.append("%s, %s: %s differs between the orders: %s (file order) against %s (reversed)" % (mode, name, key, a[key], b[key]))
        if first["tests"]["test_4kib"]["live_at_start"] != 32 << 20:
            found.append("%s: test_4kib should start with the 32 MiB test_leaves_32mib left live in file order, not %s"
                         % (mode, first["tests"]["test_4kib"]["live_at_start"]))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT") or "/tmp/gpumem-pytest-order")
    ap.add_argument("--modes", default="lens,pytorch")
    args = ap.parse_args()
    out = os.path.join(args.out, "pytest_order")
    os.makedirs(out, exist_ok=True)
    modes = args.modes.split(",")
    report = {"file": os.path.relpath(TEST_FILE, ROOT), "modes": {}, "problems": []}
    if not os.path.exists(SO):
        report["problems"].append("missing %s: build it here (make -C native/allocator) and carry dist/native" % SO)
    elif "pytorch" in modes:
        report["observer_build"] = build_observer()
        print("build-observer: %s" % json.dumps(report["observer_build"]), flush=True)
    if not report["problems"]:
        jobs = [(m, o) for m in modes for o in ("file order", "reversed")]
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            done = dict(zip(jobs, pool.map(lambda job: run(out, *job), jobs)))
        for mode in modes:
            runs = {o: done[(mode, o)] for o in ("file order", "reversed")}
            for r in runs.values():
                r["tests"] = tests_of(r)
            report["problems"] += problems_of(mode, runs)
            report["modes"][mode] = {o: {"rc": r["rc"], "node_ids": r["names"], "mode_taken": r["mode_taken"],
                                         "tests": r["tests"], "log": os.path.join(r["work"], "log.txt"),
                                         "stderr_tail": r["stderr_tail"]} for o, r in runs.items()}
    path = os.path.join(args.out, "pytest_order.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=str)
    for mode, runs in report["modes"].items():
        for order, r in runs.items():
            for name, t in r["tests"].items():
                print("%-7s %-10s %-18s %-6s peak %-10s (%s; measured %s) live at start %-10s top %s" % (
                    mode, order, name, t["verdict"], t["peak"], t["peak_from"], t["own_bytes_measured"],
                    t["live_at_start"], t["top_line"]))
    for p in report["problems"]:
        print("FAIL " + p)
    print("%s pytest-order: %d problems; %s" % ("PASS" if not report["problems"] else "FAIL", len(report["problems"]), path))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
