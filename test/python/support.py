"""Shared helpers for the bootstrap tests: build the stub allocator, run one workload subprocess with
the bootstrap on PYTHONPATH and the stand-in torch next to it, read back the stub's call log."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY_DIR = ROOT / "native" / "python"
FAKE_TORCH = ROOT / "test" / "python" / "fake_torch"
REAL_SO = ROOT / "dist" / "native" / "libgpumem_allocator.so"
# A real step benchmark's rounds (ResNet-50 on an H200: native, a second native process, and recording the first 10
# steps; reduced to host, median and step times), for the benchmark's statistics (test_bench_paired_view, _table).
BENCH_STEPS_FIXTURE = str(ROOT / "test" / "fixtures" / "bench_steps_resnet50_h200.json")
BENCH_RECORD10 = "gpumem-run-auto:GPUMEM_RECORD_STEPS=10"


def bench_step_rounds():
    """BENCH_STEPS_FIXTURE's step_rounds (bench_allocator.py's JSON), a fresh copy each call."""
    with open(BENCH_STEPS_FIXTURE) as f:
        return json.load(f)["step_rounds"]

_tmp_root = tempfile.mkdtemp(prefix="gpumem-pytest-")
atexit.register(shutil.rmtree, _tmp_root, True)
_stub = None


def stub_so():
    """The stub allocator (stub_allocator.c), compiled once per test run."""
    global _stub
    if _stub is None:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise unittest.SkipTest("no C compiler to build the stub allocator (apt-get install gcc)")
        out = os.path.join(_tmp_root, "libstub_allocator.so")
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", out, str(Path(__file__).with_name("stub_allocator.c")), "-lpthread"],
                       check=True)
        _stub = out
    return _stub


def fake_nvml_dir():
    """A folder holding fake_nvml.c built as libnvidia-ml.so.1, for LD_LIBRARY_PATH (the sampler dlopens that name)."""
    folder = os.path.join(_tmp_root, "fake-nvml")
    lib = os.path.join(folder, "libnvidia-ml.so.1")
    if not os.path.exists(lib):
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise unittest.SkipTest("no C compiler to build the stand-in NVML (apt-get install gcc)")
        os.makedirs(folder, exist_ok=True)
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", lib, str(Path(__file__).with_name("fake_nvml.c"))], check=True)
    return folder


def fake_tracker_figures():
    """fake_tracker_figures.c built: a stand-in for the tracker extension's C reader (gpumem_tracker_figures)."""
    lib = os.path.join(_tmp_root, "fake-tracker-figures", "fake_tracker_figures.so")
    if not os.path.exists(lib):
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise unittest.SkipTest("no C compiler to build the stand-in figures reader (apt-get install gcc)")
        os.makedirs(os.path.dirname(lib), exist_ok=True)
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", lib, str(Path(__file__).with_name("fake_tracker_figures.c")),
                        "-lpthread"], check=True)
    return lib


def real_so_or_skip(test):
    if not REAL_SO.exists():
        test.skipTest("dist/native/libgpumem_allocator.so is not built (make -C native/allocator); real-allocator tests skipped")
    return str(REAL_SO)


def new_dir(prefix="t"):
    return tempfile.mkdtemp(prefix=prefix, dir=_tmp_root)


class Run:
    def __init__(self, proc, session, script):
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr
        self.session = session
        self.script = script

    def files(self):
        return sorted(os.listdir(self.session))

    def capture(self):
        caps = [f for f in self.files() if f.startswith("capture-")]
        if len(caps) != 1:
            raise AssertionError("expected one capture, found %r\nstderr:\n%s" % (caps, self.err))
        return os.path.join(self.session, caps[0])

    def log(self):
        """The stub's call log (the 'capture'), one entry per line."""
        with open(self.capture()) as f:
            return f.read().splitlines()

    def json_out(self):
        return json.loads(self.out.strip().splitlines()[-1])


def workload_env(session, so, extra_paths=(), env=None, fake_torch=True):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEM_", "FAKE_TORCH", "PYTHON"))}
    paths = [str(PY_DIR)] + list(extra_paths) + ([str(FAKE_TORCH)] if fake_torch else [])
    base.update({
        "GPUMEM_SESSION_DIR": session,
        "GPUMEM_ALLOCATOR_SO": so,
        "GPUMEM_SAMPLE_MS": "0",
        # These tests exercise the lens allocator's bootstrap; test_mode.py covers `auto`.
        "GPUMEM_ALLOCATOR": "lens",
        "PYTHONPATH": os.pathsep.join(paths),
    })
    base.update(env or {})
    return base


def run_script(source, args=(), env=None, so=None, extra_paths=(), cwd=None, stdin=None, module=None, timeout=60,
               name="script.py"):
    """Write `source` to a fresh folder and run it like `python3 script.py args` (or -m module)."""
    work = new_dir("w")
    script = os.path.join(work, name)
    with open(script, "w") as f:
        f.write(textwrap.dedent(source))
    session = new_dir("s")
    os.chmod(session, 0o700)
    full_env = workload_env(session, so or stub_so(), extra_paths, env)
    if module:
        full_env["PYTHONPATH"] += os.pathsep + work
        argv = [sys.executable, "-m", module] + list(args)
    else:
        argv = [sys.executable, script] + list(args)
    proc = subprocess.run(argv, env=full_env, cwd=cwd or work, input=stdin, capture_output=True, text=True, timeout=timeout)
    return Run(proc, session, script)


def start_workload(source, so, args=(), env=None, cwd_is_work=False):
    """A workload script in a fresh folder, started under the bootstrap with a fresh private session folder
    (pipes on stdin/stdout/stderr, so the test can talk to it while it runs); `args` may be a function of the
    work folder. Returns (proc, work, session); the script is work/train.py."""
    work = new_dir("w")
    script = os.path.join(work, "train.py")
    with open(script, "w") as f:
        f.write(source)
    session = new_dir("s")
    os.chmod(session, 0o700)
    proc = subprocess.Popen([sys.executable, script, *(args(work) if callable(args) else args)], env=workload_env(session, so, env=env), cwd=work if cwd_is_work else None,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, work, session


def line_of(path, marker):
    """1-based line number of the line containing `marker` (so tests never hard-code line numbers)."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if marker in line:
                return i
    raise AssertionError("%s not found in %s" % (marker, path))


def read_capture(path):
    """(header JSON, [(type, payload bytes)]) of a capture, framed by the generated format module
    (native/format/gpumem_format.h): the tests never spell a record layout themselves."""
    if str(PY_DIR) not in sys.path:
        sys.path.insert(0, str(PY_DIR))
    from gpumem import _format as F

    with open(path, "rb") as f:
        data = f.read()
    _, _, header, pos = F.read_header(data)
    return header, [(rtype, payload) for _, rtype, _, _, payload in F.records(data, pos)]
