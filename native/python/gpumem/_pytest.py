"""pytest plugin: GPU memory budgets per test (`pytest -p gpumem`, or installed: the package's pytest11 entry point;
gpumem/__init__.py names this module in `pytest_plugins`, so importing gpumem alone never imports pytest).

    @pytest.mark.gpu_memory(peak="2GiB", leak="0")
    def test_forward(): ...

Note [pytest budgets]:
- What a test is: its call phase. Its peak allocated is its own: what the test allocated above what was live when
  its call began (fixtures' setup and earlier tests' leftovers not counted, Note [Piece figures] in _meter.py), so
  a verdict does not depend on the order the tests run in; what was live at its start is in its row, the report
  and the failure message. Left allocated is allocated after the call minus before it, after a gc.collect(), so
  reference cycles the test made are not leaks, and with cuBLAS's workspaces freed before both readings, as
  PyTorch's own leak check does (_free_library_caches). A test that fails on its own is not judged again (its
  traceback keeps its frames' tensors alive).
- Where the figures come from: Note [Piece figures] in _meter.py; where the lines come from: Note [Windows] in
  _window.py. Under `gpumem run` the plugin uses that run's capture; otherwise it starts tracking itself
  (Note [Tracking from inside]) in a session folder under --gpumem-out (default .gpumem in the rootdir), before
  conftest files load, so `import torch` there still gets the allocator mode of a script.
- A budget written wrong fails the collection with one line (pytest's usage error), naming the test, the
  argument and the rule of sizes every other size input of the tool follows (Note [Size input]).
- A process that crashes loses nothing recorded so far: the capture reaches the disk every 50 ms, each test
  opens a begin marker in it, and each test's row (`pytest-<pid>.jsonl` in the session folder) is written and
  flushed before the next test starts, with a "running" row first, so the crashing test is named too.
- The rows' schema (the "done" row): peak_allocated is the test's own peak and allocated_before what was live at
  its start, with max_memory_allocated (PyTorch's figure, both together) and peak_from (Note [Piece figures]). A
  row without allocated_before was written before the peak became the test's own: its peak_allocated is PyTorch's
  figure, and readers show it as that (src/core/views/testing/budgets.ts).
- The verdict is a row too: after the call phase (and after a setup that failed or skipped) a "result" row holds
  pytest's own outcome (passed / failed / skipped), the phase, and the failure text pytest prints (a budget's
  message or the test's own traceback), so a reader of the session folder (the VS Code Testing view, Note
  [Testing view] in src/glue/testing/controller.ts) says what pytest said without parsing its output.

Note [Dormant plugin]: an installed package registers the plugin with every pytest run in its environment (the
pytest11 entry point, named gpumem, so `-p gpumem` finds it registered and adds nothing). There it stays dormant: it
adds its options and marker and looks once at the collected tests' markers; nothing else runs (no torch import, no
tracking, no hook per test) unless it is asked for. Asked by name (`-p gpumem`, PYTEST_PLUGINS=gpumem) or by --gpumem-report, it starts tracking before the
conftest files load, as always. Otherwise, a collected test carrying the gpu_memory marker wakes it at the end of
the collection: tracking starts then, with the test modules imported (torch too, usually, but CUDA not yet
initialised, so every allocator mode can still be chosen; where CUDA was, PyTorch's allocator is observed from then
on, as Note [Tracking from inside] says).
"""
import gc
import json
import os
import sys

import pytest

from . import _meter, _settings
from ._state import STATE

MARKER = ("gpu_memory(peak=None, leak=None): fail the test when the GPU memory it allocates (above what was live at its "
          "start) peaks over `peak` or it leaves more than `leak` allocated (bytes or binary units: 2GiB, 512MiB, 0)")


def pytest_addoption(parser):
    group = parser.getgroup("gpumem", "GPU Memory Lens")
    group.addoption("--gpumem-report", action="store_true", default=False,
                    help="print a per-test table: peak allocated (the test's own), live at its start, left allocated, peak reserved")
    group.addoption("--gpumem-out", default=None, metavar="DIR",
                    help="folder for the session folder when pytest runs outside `gpumem run` (default: .gpumem in the rootdir)")
    group.addoption("--gpumem-top", type=int, default=5, metavar="N", help="lines at the peak in a failure message (default 5)")




def _free_library_caches():
    """cuBLAS keeps a workspace per handle and stream, made at the first matmul of the process (32 MiB on an H100,
    torch 2.11) and kept for the next: seen on the GPU as a 32 MiB "leak" of the first test that multiplied.
    PyTorch's own leak check (CudaMemoryLeakCheck in torch.testing._internal.common_utils) frees it before each
    reading; so does the plugin, before a test begins and before its "left allocated" is read."""
    torch = sys.modules.get("torch")
    clear = getattr(getattr(torch, "_C", None), "_cuda_clearCublasWorkspaces", None)
    if clear is None or not torch.cuda.is_initialized():
        return
    try:
        clear()
    except Exception:  # never break the user's test
        pass

class Budget:
    __slots__ = ("peak", "leak")

    def __init__(self, peak, leak):
        self.peak, self.leak = peak, leak


def parse_budget(mark, nodeid):
    """A Budget from a gpu_memory marker, or raise pytest.UsageError with one line."""
    unknown = [k for k in mark.kwargs if k not in ("peak", "leak")]
    if mark.args or unknown:
        raise pytest.UsageError("%s: gpu_memory takes peak= and leak= only, got %s" % (
            nodeid, ", ".join([repr(a) for a in mark.args] + ["%s=" % k for k in unknown])))
    got = {}
    for key in ("peak", "leak"):
        value = mark.kwargs.get(key)
        if value is None:
            got[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            size = _settings._NOT_A_SIZE
        elif isinstance(value, int):
            size = value if value >= 0 else _settings._NOT_A_SIZE
        else:
            size = _settings.read_size(value)
        if isinstance(size, str):
            raise pytest.UsageError("%s: gpu_memory(%s=%r) is not a size: %s" % (nodeid, key, value, size))
        got[key] = size
    return Budget(got["peak"], got["leak"])


class Plugin:
    def __init__(self, config):
        self.config = config
        self.meter = _meter.Meter()
        self.rows = []            # (nodeid, figures)
        self.budgets = {}         # nodeid → Budget
        self.results = None       # the jsonl file

    # ---- collection -------------------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            mark = item.get_closest_marker("gpu_memory")
            if mark is not None:
                self.budgets[item.nodeid] = parse_budget(mark, item.nodeid)

    # ---- running ----------------------------------------------------------------------------------------
    def _write(self, row):
        if STATE.settings is None:  # not tracked at all: no session folder to write in
            return
        try:
            if self.results is None:
                path = os.path.join(STATE.settings.session_dir, "pytest-%d.jsonl" % os.getpid())
                self.results = open(path, "a")
            self.results.write(json.dumps(row) + "\n")
            self.results.flush()
            os.fsync(self.results.fileno())
        except OSError:
            pass

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        self._write({"test": item.nodeid, "status": "running", "capture": STATE.capture})
        _free_library_caches()
        piece = self.meter.begin(item.nodeid)
        outcome = yield
        failed = outcome.excinfo is not None
        if not failed:
            gc.collect()
            _free_library_caches()
        fig = self.meter.end(piece, top=self.config.getoption("gpumem_top"))
        item._gpumem = (fig, failed)
        self.rows.append((item.nodeid, fig))
        self._write({"test": item.nodeid, "status": "done", "peak_allocated": fig.peak_allocated,
                     "allocated_before": fig.allocated_before, "max_memory_allocated": fig.max_memory_allocated,
                     "peak_from": fig.peak_from, "peak_reserved": fig.peak_reserved, "left_allocated": fig.added_allocated,
                     "capture_peak": fig.capture_peak, "capture": fig.capture, "lines": [list(r) for r in fig.lines]})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        try:
            if call.when == "call":
                self._budget(item, report)
        finally:
            if call.when == "call" or (call.when == "setup" and not report.passed):
                self._write({"test": item.nodeid, "status": "result", "when": call.when, "outcome": report.outcome,
                             "message": report.longreprtext if report.failed else ""})

    def _budget(self, item, report):
        got = getattr(item, "_gpumem", None)
        budget = self.budgets.get(item.nodeid)
        if got is None or budget is None or report.failed:
            return
        fig, _failed = got
        problems = []
        if budget.peak is not None and fig.peak_allocated > budget.peak:
            problems.append("peak allocated %s exceeds the budget peak=%s by %s" % (
                _meter.fmt(fig.peak_allocated), _meter.fmt(budget.peak), _meter.fmt(fig.peak_allocated - budget.peak)))
        if budget.leak is not None and fig.added_allocated > budget.leak:
            problems.append("the test left %s allocated (budget leak=%s)" % (_meter.fmt(fig.added_allocated), _meter.fmt(budget.leak)))
        if not problems:
            return
        lines = ["gpu_memory: " + "; ".join(problems),
                 "live at the test's start: %s, not counted (what fixtures and earlier tests hold)" % _meter.fmt(fig.allocated_before)]
        if fig.lines:
            lines.append("top lines at the test's peak (its own allocations, %s):" % _meter.fmt(fig.peak_allocated))
            root = str(self.config.rootpath) if hasattr(self.config, "rootpath") else os.getcwd()
            lines += _meter.fmt_lines(fig.lines, show=lambda f, ln: "%s:%d" % (_rel(f, root), ln))
        lines.append("capture: %s" % (fig.capture or "none (memory tracking is off; see the line at the start of the session)"))
        report.outcome = "failed"
        report.longrepr = "\n".join(lines)

    # ---- the report -------------------------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if self.config.getoption("gpumem_report") and self.rows:
            tr.write_sep("=", "GPU memory per test")
            w = max(len(n) for n, _ in self.rows)
            row = "%-*s  %14s  %14s  %14s  %14s"
            tr.write_line(row % (w, "test", "peak allocated", "live at start", "left allocated", "peak reserved"))
            for nodeid, fig in self.rows:
                tr.write_line(row % (w, nodeid, _meter.fmt(fig.peak_allocated), _meter.fmt(fig.allocated_before),
                                     _meter.fmt(fig.added_allocated), _meter.fmt(fig.peak_reserved)))
            tr.write_line("peak allocated: what the test allocated above what was live at its start; peak reserved: "
                          "the process's allocator cache, shared by all tests")
        if STATE.configured and STATE.capture:
            tr.write_line("gpumem: capture %s" % STATE.capture)

    def pytest_unconfigure(self, config):
        if self.results is not None:
            self.results.close()
            self.results = None


def _rel(path, root):
    try:
        r = os.path.relpath(path, root)
        return path if r.startswith("..") else r
    except ValueError:
        return path


def _start(config, out=None):
    root = str(getattr(config, "rootpath", os.getcwd()))
    line = _meter.start_tracking(out or os.path.join(root, ".gpumem"), "pytest")
    if line:
        import sys

        sys.stderr.write(line + "\n")


def _asked(config):
    """Named with -p or PYTEST_PLUGINS, or --gpumem-report given (Note [Dormant plugin])."""
    ns = config.known_args_namespace
    named = list(getattr(ns, "plugins", None) or []) + os.environ.get("PYTEST_PLUGINS", "").split(",")
    return any(p.strip() in ("gpumem", "gpumem._pytest") for p in named) or bool(getattr(ns, "gpumem_report", False))


def _wake(config):
    _start(config, config.getoption("gpumem_out"))  # no-op when already started (or under gpumem run)
    if not config.pluginmanager.has_plugin("gpumem-budgets"):
        config.pluginmanager.register(Plugin(config), "gpumem-budgets")
    return config.pluginmanager.get_plugin("gpumem-budgets")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # Before conftest.py files import torch (Note [pytest budgets]).
    if _asked(early_config):
        _start(early_config, getattr(early_config.known_args_namespace, "gpumem_out", None))


def pytest_configure(config):
    config.addinivalue_line("markers", MARKER)
    if _asked(config):
        _wake(config)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    # Dormant until a marked test is collected (Note [Dormant plugin]); awake, Plugin reads the budgets itself.
    if config.pluginmanager.has_plugin("gpumem-budgets"):
        return
    if any(item.get_closest_marker("gpu_memory") is not None for item in items):
        _wake(config).pytest_collection_modifyitems(session, config, items)
