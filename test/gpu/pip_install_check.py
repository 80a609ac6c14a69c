#!/usr/bin/env python3
"""The pip package on a GPU machine, as its user installs it: a fresh venv with the system's packages (for torch),
`pip install ./native/python` offline (the allocator built from source with this machine's compiler, within the
glibc floor: native/floor/README.md), then from the installed package alone (no PYTHONPATH, nothing of this
checkout on sys.path): the console script, the observer build, an out-of-memory error under the lens reaching the
script as torch.OutOfMemoryError, `gpumem run` on a training script (a capture in its session folder), and the pytest
plugin by its entry point (no -p gpumem) on test/gpu/workloads/test_budgets_gpu.py: 2 passed, 1 failed over budget.

    python3 test/gpu/pip_install_check.py [--out DIR]

Writes DIR/pip_install.json (each step's command, exit code and last lines) and prints PASS/FAIL lines.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "400")), exit=True)  # a stall comes back as a stack
import argparse
import glob
import json
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OOM = """import faulthandler; faulthandler.dump_traceback_later(90, exit=True)
import torch
try:
    torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print("OOM caught (OutOfMemoryError):", str(e).splitlines()[0])
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix="gpumem-pip-")
    venv = os.path.join(top, "venv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("GPUMEM_")}
    env["PYTHONUNBUFFERED"] = "1"
    work = os.path.join(top, "work")  # the scripts run from here: nothing of the checkout beside them
    os.makedirs(work)
    shutil.copy(os.path.join(ROOT, "test", "gpu", "workloads", "train_mlp.py"), work)
    shutil.copy(os.path.join(ROOT, "test", "gpu", "workloads", "test_budgets_gpu.py"), work)
    with open(os.path.join(work, "oom.py"), "w") as f:
        f.write(OOM)
    steps = []

    def step(name, cmd, timeout=240, cwd=work, want=None):
        try:
            r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
            rc, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out = "timeout", str(e)
        except OSError as e:  # a step whose program an earlier failure never made: recorded, the rest go on
            rc, out = "not run", str(e)
        ok = want(rc, out) if want else rc == 0
        steps.append({"step": name, "cmd": cmd, "rc": rc, "ok": ok, "tail": out[-2500:]})
        print("%s %s (rc %s)" % ("PASS" if ok else "FAIL", name, rc), flush=True)
        if not ok:
            print(out[-1500:], flush=True)
        return out

    made = step("venv", [sys.executable, "-m", "venv", "--system-site-packages", venv], timeout=120)
    if steps[-1]["ok"]:
        py, bin_ = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin")
        # The user's torch: where this interpreter is itself a venv (the GPU machine's), --system-site-packages reaches
        # the base Python's packages, not this one's; a .pth names this interpreter's site-packages in the new venv, as
        # a user's environment with torch in it would have them.
        import site
        new_site = subprocess.run([py, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                                  text=True).stdout.strip()
        if new_site:
            with open(os.path.join(new_site, "outer-torch.pth"), "w") as f:
                f.write("\n".join(p for p in site.getsitepackages() if os.path.isdir(p)) + "\n")
        has_pip = subprocess.run([py, "-m", "pip", "--version"], capture_output=True).returncode == 0
        # A venv made without ensurepip has no pip of its own: this interpreter's pip installs into it (--python)
        pip = [py, "-m", "pip"] if has_pip else [sys.executable, "-m", "pip", "--python", py]
        step("pip install ./native/python", pip + ["install", "--no-index", "--no-build-isolation", "--no-deps",
                                                   os.path.join(ROOT, "native", "python")], timeout=300, cwd=top)
        step("gpumem --help", [os.path.join(bin_, "gpumem"), "--help"], want=lambda rc, o: rc == 0 and "run" in o)
        step("the installed package is used", [py, "-c", "import gpumem, sys; print(gpumem.__file__)"],
             want=lambda rc, o: rc == 0 and venv in o)
        step("gpumem build-observer", [os.path.join(bin_, "gpumem"), "build-observer"], timeout=240)
        step("lens OOM as torch.OutOfMemoryError", [os.path.join(bin_, "gpumem"), "run", "--allocator", "lens", "--out",
                                                    os.path.join(top, "s-oom"), "--", py, "oom.py"], timeout=120,
             want=lambda rc, o: "OOM caught (OutOfMemoryError)" in o)
        step("gpumem run train_mlp.py", [os.path.join(bin_, "gpumem"), "run", "--out", os.path.join(top, "s-run"), "--", py,
                                         "train_mlp.py"], timeout=180,
             want=lambda rc, o: rc == 0 and bool(glob.glob(os.path.join(top, "s-run", "*", "capture-*.gpumem"))))
        step("pytest by the entry point", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_budgets_gpu.py"],
             timeout=180, want=lambda rc, o: "1 failed, 2 passed" in o and "exceeds the budget peak=32.0 MiB" in o)
    else:
        print(made[-2000:])
    ok = all(s["ok"] for s in steps)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "pip_install.json"), "w") as f:
        json.dump({"ok": ok, "steps": steps}, f, indent=1)
    print("%s pip-install" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
