"""On the GPU: per-cell figures of a small training notebook (IPython's InteractiveShell in-process,
`%load_ext gpumem`, `%%gpumem`) and per-test figures of a pytest file (a test that fits, one over budget, one that
leaks) under `pytest -p gpumem`, each compared with `torch.cuda.max_memory_allocated()` measured inside the cell or
test: the figure's max_memory_allocated (the allocator's counter, equal by construction), its own peak (Note [Piece
figures] in native/python/gpumem/_meter.py: no cell or test here frees what was live at its start, so it is
max_memory_allocated minus what was live at the start) and the peak replayed from the capture (Note [Windows] in
native/python/gpumem/_window.py), within 1 %. Both allocator modes: lens, and auto (PyTorch's allocator observed
where the observer builds). test/gpu/conformance/pytest_order_check.py runs tests in two orders.

    python3 test/gpu/notebook_pytest_check.py --out DIR      (run_all.sh stage `notebooks`; tiny workloads, < 3 min)

Prints one PASS/FAIL line per check and writes DIR/notebooks.json.

The lent H100 image has torch and pytest but no IPython (seen 2026-11-26), and only Debian's apt reaches the
outside here: bring IPython from Debian's pure-Python packages into a folder and carry it,
    cd /tmp && apt-get download python3-ipython python3-traitlets python3-decorator python3-jedi python3-parso \
        python3-matplotlib-inline python3-pexpect python3-ptyprocess python3-prompt-toolkit python3-wcwidth \
        python3-stack-data python3-executing python3-asttokens python3-pure-eval python3-pickleshare python3-backcall
    for f in /tmp/*.deb; do dpkg -x $f /tmp/x; done; mv /tmp/x/usr/lib/python3/dist-packages .carry/pylibs
and the workloads find it on PYTHONPATH (after the bootstrap's folder)."""
import argparse
import faulthandler
import json
import os
import subprocess
import sys
import textwrap

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "170")), exit=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY_DIR = os.path.join(ROOT, "native", "python")
TOL = 0.01

NOTEBOOK = [
    "%load_ext gpumem",
    """
    import torch, torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    seen = {}
    seen[2] = torch.cuda.max_memory_allocated()
    """,
    """
    for step in range(5):
        x = torch.randn(256, 512, device="cuda")
        y = torch.randint(0, 10, (256,), device="cuda")
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    seen[3] = torch.cuda.max_memory_allocated()
    """,
    """
    %%gpumem
    with torch.no_grad():
        big = torch.randn(4096, 4096, device="cuda")
        out = model[0](torch.randn(8192, 512, device="cuda"))
        del big
    torch.cuda.synchronize()
    seen[4] = torch.cuda.max_memory_allocated()
    """,
    """
    history = [model(torch.randn(256, 512, device="cuda")).sum() for _ in range(3)]
    seen[5] = torch.cuda.max_memory_allocated()
    """,
]

DRIVER = r'''
import faulthandler, json, sys
faulthandler.dump_traceback_later(120, exit=True)
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
for src in json.loads(sys.argv[1]):
    r = ip.run_cell(src, store_history=True)
    if r.error_in_exec is not None or r.error_before_exec is not None:
        print("CELL ERROR", repr(r.error_in_exec or r.error_before_exec), flush=True)
from gpumem import _ipython
print("ROWS " + json.dumps({"rows": _ipython.CELLS, "seen": ip.user_ns.get("seen")}))
'''

PYTEST_FILE = r'''
import faulthandler, json, os
import pytest, torch
faulthandler.dump_traceback_later(100, exit=True)
keep = []


def seen(name):
    torch.cuda.synchronize()
    with open(os.environ["SEEN"], "a") as f:
        f.write(json.dumps({"test": name, "peak": torch.cuda.max_memory_allocated()}) + "\n")


@pytest.mark.gpu_memory(peak="64MiB", leak="0")
def test_fits():
    w = torch.randn(1024, 1024, device="cuda")
    y = (w @ w).relu().sum()
    seen("test_fits")


@pytest.mark.gpu_memory(peak="16MiB")
def test_over_budget():
    a = torch.randn(4096, 2048, device="cuda")   # 32 MiB
    b = a @ a.t()                                # 64 MiB
    seen("test_over_budget")


@pytest.mark.gpu_memory(leak="0")
def test_leaks():
    keep.append(torch.randn(1024, 1024, device="cuda"))  # 4 MiB kept
    seen("test_leaks")
'''

RESULTS = []


def check(name, ok, **facts):
    RESULTS.append(dict(name=name, ok=bool(ok), **facts))
    print("%s %s %s" % ("PASS" if ok else "FAIL", name, json.dumps(facts, default=str)), flush=True)


def line_of(text, marker):
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def close(a, b):
    return b is not None and a is not None and abs(a - b) <= TOL * max(abs(b), 1)


PYLIBS = os.path.join(ROOT, ".carry", "pylibs")


def env_for(work, mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    env.update(PYTHONPATH=os.pathsep.join([PY_DIR] + ([PYLIBS] if os.path.isdir(PYLIBS) else [])), GPUMEM_ALLOCATOR=mode, GPUMEM_ALLOCATOR_SO=os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"),
               HOME=os.environ.get("HOME", work), IPYTHONDIR=os.path.join(work, ".ipython"))
    return env


def notebook(out, mode):
    work = os.path.join(out, "notebook-" + mode)
    os.makedirs(work, exist_ok=True)
    cells = [textwrap.dedent(c).strip() for c in NOTEBOOK]
    p = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(cells)], cwd=work, env=env_for(work, mode),
                       capture_output=True, text=True, timeout=150)
    with open(os.path.join(work, "log.txt"), "w") as f:
        f.write(p.stdout + "\n--- stderr\n" + p.stderr)
    rows_line = [l for l in p.stdout.splitlines() if l.startswith("ROWS ")]
    check("notebook %s: ran" % mode, p.returncode == 0 and rows_line and "CELL ERROR" not in p.stdout, rc=p.returncode,
          stderr=p.stderr[-600:])
    if not rows_line:
        return
    got = json.loads(rows_line[0][5:])
    seen = {int(k): v for k, v in (got["seen"] or {}).items()}
    for cell, inside in sorted(seen.items()):
        rows = [r for r in got["rows"] if r["cell"] == cell and (r.get("magic") or cell != 4)]
        if not rows:
            check("notebook %s cell %d: measured" % (mode, cell), False)
            continue
        r = rows[0]
        check("notebook %s cell %d: max_memory_allocated as in the cell" % (mode, cell), close(r["max_memory_allocated"], inside),
              figure=r["max_memory_allocated"], inside=inside, added_allocated=r["added_allocated"], added_reserved=r["added_reserved"])
        check("notebook %s cell %d: its own peak = max_memory_allocated above what was live at its start" % (mode, cell),
              close(r["peak_allocated"], inside - r["allocated_before"]), peak=r["peak_allocated"], peak_from=r["peak_from"],
              before=r["allocated_before"], inside=inside)
        check("notebook %s cell %d: capture's peak within 1 %%" % (mode, cell), close(r["capture_peak"], inside),
              capture_peak=r["capture_peak"], inside=inside, top=r["lines"][:3])
    train = [r for r in got["rows"] if r["cell"] == 3]
    check("notebook %s: the training cell's top line is in the cell" % mode,
          train and train[0]["lines"] and train[0]["lines"][0][0].startswith("cell [3] line"), top=train and train[0]["lines"][:3])


def pytest_file(out, mode):
    work = os.path.join(out, "pytest-" + mode)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "test_budget_gpu.py"), "w") as f:
        f.write(PYTEST_FILE)
    env = env_for(work, mode)
    env["SEEN"] = os.path.join(work, "seen.jsonl")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "gpumem", "-p", "no:cacheprovider", "-q", "--gpumem-report",
                        "test_budget_gpu.py"], cwd=work, env=env, capture_output=True, text=True, timeout=150)
    with open(os.path.join(work, "log.txt"), "w") as f:
        f.write(p.stdout + "\n--- stderr\n" + p.stderr)
    check("pytest %s: 1 passed, 2 failed" % mode, p.returncode == 1 and "2 failed, 1 passed" in p.stdout
          and "FAILED test_budget_gpu.py::test_over_budget" in p.stdout and "FAILED test_budget_gpu.py::test_leaks" in p.stdout,
          rc=p.returncode, tail=p.stdout[-1500:], stderr=p.stderr[-600:])
    check("pytest %s: the over-budget message names its lines and the capture" % mode,
          "test_budget_gpu.py:%d in test_over_budget" % line_of(PYTEST_FILE, "# 64 MiB") in p.stdout and "capture: " in p.stdout)
    try:
        with open(env["SEEN"]) as f:
            seen = {r["test"]: r["peak"] for r in map(json.loads, f)}
        sessions = os.path.join(work, ".gpumem")
        (session,) = [os.path.join(sessions, d) for d in os.listdir(sessions)]
        (rows_file,) = [f for f in os.listdir(session) if f.startswith("pytest-")]
        with open(os.path.join(session, rows_file)) as f:
            rows = {r["test"].split("::")[1]: r for r in map(json.loads, f) if r["status"] == "done"}
    except (OSError, ValueError) as exc:
        check("pytest %s: rows and in-test figures" % mode, False, error=repr(exc))
        return
    for name, inside in sorted(seen.items()):
        r = rows.get(name, {})
        check("pytest %s %s: max_memory_allocated as in the test" % (mode, name), close(r.get("max_memory_allocated"), inside),
              figure=r.get("max_memory_allocated"), inside=inside, left=r.get("left_allocated"))
        check("pytest %s %s: its own peak = max_memory_allocated above what was live at its start" % (mode, name),
              close(r.get("peak_allocated"), inside - r.get("allocated_before", 0)), peak=r.get("peak_allocated"),
              peak_from=r.get("peak_from"), before=r.get("allocated_before"), inside=inside)
        check("pytest %s %s: capture's peak within 1 %%" % (mode, name), close(r.get("capture_peak"), inside),
              capture_peak=r.get("capture_peak"), inside=inside, top=r.get("lines", [])[:3])
    check("pytest %s test_leaks: left 4 MiB" % mode, rows.get("test_leaks", {}).get("left_allocated") == 4 << 20,
          left=rows.get("test_leaks", {}).get("left_allocated"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-notebooks"))
    ap.add_argument("--modes", default="lens,auto")
    args = ap.parse_args()
    out = os.path.join(args.out, "notebooks")
    os.makedirs(out, exist_ok=True)
    probe = subprocess.run([sys.executable, "-c", "import IPython, pytest, torch"], env=env_for(out, "lens"),
                           capture_output=True, text=True)
    check("IPython, pytest and torch importable", probe.returncode == 0, error=probe.stderr.strip().splitlines()[-1:],
          hint="bring Debian's python3-ipython and its dependencies into .carry/pylibs (this file's docstring) and carry .carry")
    if probe.returncode != 0:
        with open(os.path.join(out, "notebooks.json"), "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)
        return 1
    for mode in args.modes.split(","):
        notebook(out, mode)
        pytest_file(out, mode)
    with open(os.path.join(out, "notebooks.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)
    failed = [r["name"] for r in RESULTS if not r["ok"]]
    print("notebooks: %d checks, %d failed%s" % (len(RESULTS), len(failed), (": " + "; ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
