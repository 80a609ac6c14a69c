"""The pytest plugin (`pytest -p gpumem`, gpumem/_pytest.py) run by real pytest subprocesses, on the stand-in torch
with the real lens allocator on the simulated device (GPUMEM_BACKEND=sim), and in the observed mode with a stand-in
trace tracker: budgets that hold and budgets that fail, with the figures each test measured itself through
torch.cuda.max_memory_allocated() and memory_allocated(), each test's own peak and lines at it whatever ran before
it (two orders of one file, both modes), what was live at its start, PyTorch's counters once the capture records no
allocation, the per-test report, a budget written wrong, a test that crashes the process, and the plugin under
`gpumem run`."""
import json
import os
import re
import subprocess
import sys
import textwrap
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _format as F  # noqa: E402

TESTS = r'''
import json, os
import pytest, torch

keep = []


def seen(name):
    """What the test itself measures, as a user would: PyTorch's own peak (the plugin reset it when the test began)."""
    with open(os.environ["SEEN"], "a") as f:
        f.write(json.dumps({"test": name, "peak": torch.cuda.max_memory_allocated(),
                            "allocated": torch.cuda.memory_allocated()}) + "\n")


@pytest.mark.gpu_memory(peak="1MiB", leak="0")
def test_fits():
    a = torch.empty(300000, device="cuda")   # FITS-A
    b = torch.empty(200000, device="cuda")   # FITS-B
    del a
    seen("test_fits")
    del b


@pytest.mark.gpu_memory(leak="0")
def test_first_matmul():
    y = torch._fake_matmul(4096)  # the process's first matmul: cuBLAS's workspace stays, as on the GPU
    del y
    seen("test_first_matmul")


@pytest.mark.gpu_memory(peak="1MiB")
def test_over_budget():
    a = torch.empty(3 << 20, device="cuda")  # BIG-A
    b = torch.empty(1 << 20, device="cuda")  # BIG-B
    seen("test_over_budget")


@pytest.mark.gpu_memory(leak="0")
def test_leaks():
    keep.append(torch.empty(4096, device="cuda"))  # LEAK
    seen("test_leaks")


def test_no_budget():
    x = torch.empty(5 << 20, device="cuda")
    seen("test_no_budget")
'''


# A test that leaves 32 MiB live in a module global, tests after it that allocate their own, and one that frees the
# leftover before it allocates: run in both orders (explicit node ids), each test's figures are its own.
ORDER_TESTS = r'''
import json, os
import pytest, torch

keep = []


def own(name, before):
    """The bytes the test allocated itself, as it measures them: allocated now minus before its allocation."""
    with open(os.environ["SEEN"], "a") as f:
        f.write(json.dumps({"test": name, "own": torch.cuda.memory_allocated() - before}) + "\n")


def test_leaves_32mib():
    before = torch.cuda.memory_allocated()
    keep.append(torch.empty(32 << 20, device="cuda"))  # LEAVES
    own("test_leaves_32mib", before)


@pytest.mark.gpu_memory(peak="64KiB", leak="0")
def test_small():
    before = torch.cuda.memory_allocated()
    x = torch.empty(4096, device="cuda")  # SMALL
    own("test_small", before)
    del x


@pytest.mark.gpu_memory(peak="1MiB")
def test_over():
    before = torch.cuda.memory_allocated()
    x = torch.empty(2 << 20, device="cuda")  # OVER
    own("test_over", before)
    del x


@pytest.mark.gpu_memory(peak="20MiB")
def test_rebuilds():
    keep.clear()  # what an earlier test left, when one ran before it
    before = torch.cuda.memory_allocated()
    y = torch.empty(16 << 20, device="cuda")  # REBUILDS
    own("test_rebuilds", before)
    del y
'''
ORDER = ["test_leaves_32mib", "test_small", "test_over", "test_rebuilds"]

# The observed mode (GPUMEM_ALLOCATOR=pytorch) on the stand-in torch, whose native allocator has no counters and no
# trace tracker: PyTorch's counters (allocated, its peak and the peak's reset) and a stand-in for the tracker
# extension (it cannot be built against the stand-in), which hands each allocation and free to the observer with the
# allocating thread's stack, as the real one does from PyTorch's context recorder (Note [Observer stacks]). It lies
# in a site-packages folder, as torch does, so that its frames are not the user's (Note [User frames]).
OBSERVED = {"conftest.py": "import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), 'site-packages'))\n"
                           "import observed_allocator\n",
            "site-packages/observed_allocator.py": r'''
import ctypes as c
import torch
import gpumem._observe as observe

EVENT = c.CFUNCTYPE(c.c_int, c.c_int, c.c_int, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint32, c.c_uint64)


class Tracker:
    def attach(self, event, take, gather, label):
        self.event, self.take, self.gather = EVENT(event), c.CFUNCTYPE(c.c_uint32, c.c_int)(take), c.CFUNCTYPE(c.c_uint32)(gather)

    def record(self, ours_on, user_stacks, max_entries, when, skip):
        return "6"


tracker = Tracker()
observe.build_tracker = lambda torch: (tracker, None)
live, peak = torch._C.native_live, [0]
alloc, free = torch._C._alloc, torch._C._free


def _alloc(size):
    tracker.gather()                      # PyTorch's context recorder, before the allocator's lock
    ptr = alloc(size)
    tracker.event(0, 0, ptr, size, 0, tracker.take(0), 0)
    peak[0] = max(peak[0], sum(live.values()))
    return ptr


def _free(ptr, size):
    tracker.event(0, 1, ptr, size, 0, 0, 0)
    free(ptr, size)
    tracker.event(0, 2, ptr, size, 0, 0, 0)


def reset(device=None):
    peak[0] = sum(live.values())


torch._C._alloc, torch._C._free = _alloc, _free
for m in (torch.cuda, torch.cuda.memory):
    m.memory_allocated = lambda device=None: sum(live.values())
    m.max_memory_allocated = lambda device=None: peak[0]
    m.reset_peak_memory_stats = reset
    m._snapshot = lambda *a, **k: {"segments": [], "device_traces": [[]]}
'''}


def run_pytest(tests, args=(), env=None, under_run=False, name="test_budgets.py", targets=None, files=None):
    """pytest -p gpumem on `tests` written as `name`, running `targets` (node ids, in that order) or the whole file;
    `files`: more files of the folder, {relative path: text}."""
    work = support.new_dir("pt")
    for rel, text in (files or {}).items():
        os.makedirs(os.path.dirname(os.path.join(work, rel)), exist_ok=True)
        with open(os.path.join(work, rel), "w") as f:
            f.write(text)
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(tests))
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEM_", "PYTHON"))}
    full.update({"PYTHONPATH": os.pathsep.join([str(support.PY_DIR), str(support.FAKE_TORCH)]),
                 "GPUMEM_ALLOCATOR_SO": str(support.REAL_SO), "GPUMEM_BACKEND": "sim", "GPUMEM_ALLOCATOR": "lens",
                 "GPUMEM_SAMPLE_MS": "0", "SEEN": os.path.join(work, "seen.jsonl")})
    full.update(env or {})
    cmd = ["-m", "pytest", "-p", "gpumem", "-p", "no:cacheprovider", "-q"] + list(targets or [name]) + list(args)
    if under_run:
        cmd = ["-m", "gpumem", "run", "--out", os.path.join(work, "runs"), "--backend", "sim", "--allocator", "lens", "--"] + cmd
    proc = subprocess.run([sys.executable] + cmd, cwd=work, env=full, capture_output=True, text=True, timeout=120)
    return proc, work


def sessions(folder):
    return [os.path.join(folder, d) for d in sorted(os.listdir(folder))] if os.path.isdir(folder) else []


def rows(session):
    (name,) = [f for f in os.listdir(session) if f.startswith("pytest-") and f.endswith(".jsonl")]
    with open(os.path.join(session, name)) as f:
        return [json.loads(line) for line in f]


def seen_of(work):
    with open(os.path.join(work, "seen.jsonl")) as f:
        return {r["test"]: r for r in map(json.loads, f)}


class PytestPluginTest(unittest.TestCase):
    def setUp(self):
        self.so = support.real_so_or_skip(self)

    def test_budgets_on_the_simulated_device(self):
        proc, work = run_pytest(TESTS, ["--gpumem-report"])
        out = proc.stdout
        self.assertEqual(proc.returncode, 1, out + proc.stderr)
        self.assertIn("2 failed, 3 passed", out)
        self.assertRegex(out, r"FAILED test_budgets.py::test_over_budget")
        self.assertRegex(out, r"FAILED test_budgets.py::test_leaks")
        self.assertNotIn("FAILED test_budgets.py::test_fits", out)
        (session,) = sessions(os.path.join(work, ".gpumem"))  # standalone: the plugin started tracking itself
        script = os.path.join(work, "test_budgets.py")
        seen = seen_of(work)

        # The figures are the ones each test measured itself (exact on the simulated device): 512-byte blocks.
        done = {r["test"].split("::")[1]: r for r in rows(session) if r["status"] == "done"}
        self.assertEqual(set(done), {"test_fits", "test_first_matmul", "test_over_budget", "test_leaks", "test_no_budget"})
        # the first matmul's cuBLAS workspace (4 MiB here) is freed before "left" is read, as PyTorch's leak check does
        self.assertEqual((done["test_first_matmul"]["left_allocated"], done["test_first_matmul"]["peak_allocated"]),
                         (0, (4 << 20) + 4096))
        for name, row in done.items():
            self.assertEqual(row["max_memory_allocated"], seen[name]["peak"], name)  # PyTorch's figure inside the test
            self.assertEqual(row["capture_peak"], seen[name]["peak"], name)  # the capture's replay agrees
            # the test's own peak, counted in the capture: no test here frees what was live at its start, so it is
            # PyTorch's figure minus what was live at the start
            self.assertEqual((row["peak_allocated"], row["peak_from"]), (seen[name]["peak"] - row["allocated_before"], "capture"), name)
        self.assertEqual(done["test_fits"]["peak_allocated"], 300032 + 200192)
        self.assertEqual(done["test_over_budget"]["peak_allocated"], 4 << 20)
        self.assertEqual(done["test_leaks"]["left_allocated"], 4096)
        self.assertEqual(done["test_fits"]["left_allocated"], 0)
        # the leak before it is live at its start, not its own
        self.assertEqual((done["test_no_budget"]["peak_allocated"], done["test_no_budget"]["allocated_before"]), (5 << 20, 4096))
        self.assertEqual([r[3] for r in done["test_no_budget"]["lines"]], [5 << 20])

        # pytest's verdict is a row too (the Testing view reads it): the outcome and the text pytest printed.
        result = {r["test"].split("::")[1]: r for r in rows(session) if r["status"] == "result"}
        self.assertEqual({n: r["outcome"] for n, r in result.items()},
                         {"test_fits": "passed", "test_first_matmul": "passed", "test_over_budget": "failed",
                          "test_leaks": "failed", "test_no_budget": "passed"})
        self.assertTrue(result["test_over_budget"]["message"].startswith(
            "gpu_memory: peak allocated 4.00 MiB exceeds the budget peak=1.00 MiB by 3.00 MiB\n"))
        self.assertIn(result["test_over_budget"]["message"], out)
        self.assertEqual(result["test_fits"]["message"], "")

        # The failure names the lines at the peak (file:line and bytes) and the capture.
        big = out.split("test_over_budget _")[1].split("test_leaks _")[0]
        self.assertIn("gpu_memory: peak allocated 4.00 MiB exceeds the budget peak=1.00 MiB by 3.00 MiB\n"
                      "live at the test's start: 0 B, not counted (what fixtures and earlier tests hold)\n"
                      "top lines at the test's peak (its own allocations, 4.00 MiB):\n", big)
        lines = re.findall(r"^\s+([\d.]+ \w+)\s+(\S+):(\d+) in (\w+)$", big, re.M)
        self.assertEqual(lines[:2], [("3.00 MiB", "test_budgets.py", str(support.line_of(script, "BIG-A")), "test_over_budget"),
                                     ("1.00 MiB", "test_budgets.py", str(support.line_of(script, "BIG-B")), "test_over_budget")])
        capture = re.search(r"^capture: (\S+)$", big, re.M).group(1)
        self.assertEqual(os.path.dirname(capture), session)
        self.assertTrue(os.path.isfile(capture))
        leak = out.split("test_leaks _")[1]
        self.assertIn("the test left 4.00 KiB allocated (budget leak=0 B)", leak)
        self.assertIn("test_budgets.py:%d in test_leaks" % support.line_of(script, "LEAK"), leak)

        # --gpumem-report: one row per test.
        table = out.split("GPU memory per test")[1]
        self.assertRegex(table, r"test\s+peak allocated\s+live at start\s+left allocated\s+peak reserved\n")
        self.assertRegex(table, r"test_budgets.py::test_fits\s+488 KiB\s+0 B\s+0 B\s+\S+ \w+\n")
        self.assertRegex(table, r"test_budgets.py::test_over_budget\s+4.00 MiB\s+0 B\s+0 B\s+\S+ \w+\n")
        self.assertRegex(table, r"test_budgets.py::test_leaks\s+4.00 KiB\s+0 B\s+4.00 KiB\s+\S+ \w+\n")
        self.assertRegex(table, r"test_budgets.py::test_no_budget\s+5.00 MiB\s+4.00 KiB\s+0 B\s+\S+ \w+\n")

        # Each test is a begin/end range in the capture.
        _, records = support.read_capture(capture)
        strings = {}
        marks = []
        for t, p in records:
            if t == F.REC_STRING:
                sid, n = F.StringRec.unpack_from(p)
                strings[sid] = p[8:8 + n].decode()
            elif t == F.REC_MARKER:
                _, nid, kind = F.MarkerRec.unpack_from(p)
                marks.append((strings[nid].split(" #")[0], kind))
        self.assertIn(("test_budgets.py::test_over_budget", F.MARK_BEGIN), marks)
        self.assertIn(("test_budgets.py::test_over_budget", F.MARK_END), marks)

    def order_runs(self, mode):
        """ORDER_TESTS run in file order and reversed, in one allocator mode: {order: what each run shows}."""
        runs = {}
        for order in ("file order", "reversed"):
            names = ORDER if order == "file order" else ORDER[::-1]
            proc, work = run_pytest(ORDER_TESTS, ["--gpumem-report"], name="test_order.py",
                                    targets=["test_order.py::" + n for n in names], env={"GPUMEM_ALLOCATOR": mode},
                                    files=OBSERVED if mode == "pytorch" else None)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            (session,) = sessions(os.path.join(work, ".gpumem"))
            got = rows(session)
            self.assertEqual([r["test"].split("::")[1] for r in got if r["status"] == "done"], names)  # the order asked
            with open(os.path.join(work, "seen.jsonl")) as f:
                own = {r["test"]: r["own"] for r in map(json.loads, f)}
            runs[order] = {"out": proc.stdout, "script": os.path.join(work, "test_order.py"), "own": own,
                           "done": {r["test"].split("::")[1]: r for r in got if r["status"] == "done"},
                           "result": {r["test"].split("::")[1]: r for r in got if r["status"] == "result"}}
        return runs

    def test_a_tests_figures_are_its_own_in_either_order(self):
        for mode in ("lens", "pytorch"):
            with self.subTest(mode=mode):
                self.check_order(mode)

    def check_order(self, mode):
        runs = self.order_runs(mode)
        for run in runs.values():
            header, _ = support.read_capture(run["done"]["test_small"]["capture"])
            self.assertEqual(header["allocator_mode"], mode)
        first, rev = runs["file order"], runs["reversed"]

        # The same verdicts in both orders: before, the small test failed its 64 KiB budget after the 32 MiB one.
        verdicts = {o: {n: r["outcome"] for n, r in runs[o]["result"].items()} for o in runs}
        self.assertEqual(verdicts["file order"], {"test_leaves_32mib": "passed", "test_small": "passed",
                                                  "test_over": "failed", "test_rebuilds": "passed"})
        self.assertEqual(verdicts["reversed"], verdicts["file order"])

        # The same figures: each test's peak is the bytes it allocated itself (as it measured them), from the
        # capture, and its lines at the peak are its own, in both orders.
        mine = {"test_leaves_32mib": (32 << 20, "LEAVES"), "test_small": (4096, "SMALL"), "test_over": (2 << 20, "OVER"),
                "test_rebuilds": (16 << 20, "REBUILDS")}
        for order, run in runs.items():
            for name, (size, mark) in mine.items():
                row = run["done"][name]
                self.assertEqual(run["own"][name], size, (order, name))
                self.assertEqual((row["peak_allocated"], row["peak_from"]), (size, "capture"), (order, name))
                self.assertEqual(row["lines"], [[run["script"], support.line_of(run["script"], mark), name, size]], (order, name))
        # What was live at each start differs with the order, and the row says it.
        self.assertEqual({n: r["allocated_before"] for n, r in first["done"].items()},
                         {"test_leaves_32mib": 0, "test_small": 32 << 20, "test_over": 32 << 20, "test_rebuilds": 32 << 20})
        self.assertEqual({n: r["allocated_before"] for n, r in rev["done"].items()},
                         {"test_leaves_32mib": 0, "test_small": 0, "test_over": 0, "test_rebuilds": 0})
        # The rebuilding test freed the leftover before allocating: PyTorch's counters alone would give it no peak
        # at all after the 32 MiB test (max_memory_allocated() stays at what was live at its start); left allocated
        # keeps its meaning, after minus before.
        self.assertEqual((first["done"]["test_rebuilds"]["max_memory_allocated"], first["done"]["test_rebuilds"]["left_allocated"]),
                         (32 << 20, -(32 << 20)))
        self.assertEqual((rev["done"]["test_rebuilds"]["max_memory_allocated"], rev["done"]["test_rebuilds"]["left_allocated"]),
                         (16 << 20, 0))
        for name in ("test_leaves_32mib", "test_small", "test_over"):
            self.assertEqual(first["done"][name]["left_allocated"], rev["done"][name]["left_allocated"], name)

        # The report and the failure message give what was live at the test's start.
        self.assertRegex(first["out"], r"test_order.py::test_small\s+4.00 KiB\s+32.0 MiB\s+0 B\s+\S+ \w+\n")
        self.assertRegex(rev["out"], r"test_order.py::test_small\s+4.00 KiB\s+0 B\s+0 B\s+\S+ \w+\n")
        for order, live in (("file order", "32.0 MiB"), ("reversed", "0 B")):
            message = runs[order]["result"]["test_over"]["message"]
            self.assertEqual(message.split("\ncapture: ")[0], "\n".join([
                "gpu_memory: peak allocated 2.00 MiB exceeds the budget peak=1.00 MiB by 1.00 MiB",
                "live at the test's start: %s, not counted (what fixtures and earlier tests hold)" % live,
                "top lines at the test's peak (its own allocations, 2.00 MiB):",
                "    2.00 MiB  test_order.py:%d in test_over" % support.line_of(runs[order]["script"], "OVER")]))
            self.assertIn(message, runs[order]["out"])

    def test_after_the_recorded_steps_the_peak_comes_from_pytorchs_counters(self):
        # The observed mode recording the first optimizer step only (Note [Recorded steps]): after it the capture has
        # no allocation, so a test's peak is PyTorch's max_memory_allocated() above what was live at its start.
        proc, work = run_pytest('''
            import pytest, torch
            from torch.optim.optimizer import Optimizer
            keep = []
            def test_recorded():
                keep.append(torch.empty(1 << 20, device="cuda"))  # RECORDED
            def test_step():
                Optimizer([]).step()
            @pytest.mark.gpu_memory(peak="1MiB")
            def test_after():
                x = torch.empty(2 << 20, device="cuda")
                del x
        ''', env={"GPUMEM_ALLOCATOR": "pytorch", "GPUMEM_RECORD_STEPS": "1"}, files=OBSERVED)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        (session,) = sessions(os.path.join(work, ".gpumem"))
        done = {r["test"].split("::")[1]: r for r in rows(session) if r["status"] == "done"}
        script = os.path.join(work, "test_budgets.py")
        pick = lambda r: (r["peak_allocated"], r["peak_from"], r["allocated_before"], r["max_memory_allocated"])  # noqa: E731
        self.assertEqual(pick(done["test_recorded"]), (1 << 20, "capture", 0, 1 << 20))
        self.assertEqual(done["test_recorded"]["lines"], [[script, support.line_of(script, "RECORDED"), "test_recorded", 1 << 20]])
        self.assertEqual(pick(done["test_step"]), (0, "counters", 1 << 20, 1 << 20))  # the step ended inside it
        self.assertEqual(pick(done["test_after"]), (2 << 20, "counters", 1 << 20, 3 << 20))
        self.assertEqual(done["test_after"]["lines"], [])
        _, records = support.read_capture(done["test_after"]["capture"])
        self.assertIn(F.MARK_EVENTS_OFF, [F.MarkerRec.unpack_from(p)[2] for t, p in records if t == F.REC_MARKER])
        self.assertIn("gpu_memory: peak allocated 2.00 MiB exceeds the budget peak=1.00 MiB by 1.00 MiB\n"
                      "live at the test's start: 1.00 MiB, not counted", proc.stdout)

    def test_a_budget_written_wrong_fails_the_collection_with_one_line(self):
        proc, _ = run_pytest('''
            import pytest
            @pytest.mark.gpu_memory(peak="2 GB?")
            def test_x():
                pass
        ''')
        self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)  # pytest's usage error
        errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
        self.assertEqual(errors, ["ERROR: test_budgets.py::test_x: gpu_memory(peak='2 GB?') is not a size: write bytes "
                                  "(85899345920) or a binary unit (80GiB, 512MiB, 1.5TiB)"])
        proc, _ = run_pytest('''
            import pytest
            @pytest.mark.gpu_memory(peak="2GB")
            def test_x():
                pass
        ''')
        self.assertIn("gpu_memory(peak='2GB') is not a size: GB is decimal; write GiB", proc.stderr)

    def test_a_test_that_crashes_the_process_loses_nothing_recorded(self):
        proc, work = run_pytest('''
            import os, signal, time
            import pytest, torch
            keep = []
            @pytest.mark.gpu_memory(peak="1GiB")
            def test_first():
                keep.append(torch.empty(1 << 20, device="cuda"))
            def test_crashes():
                keep.append(torch.empty(2 << 20, device="cuda"))  # CRASH-ALLOC
                time.sleep(0.2)   # the writer flushes every 50 ms
                os.kill(os.getpid(), signal.SIGSEGV)
            def test_never_runs():
                pass
        ''', ["-p", "no:faulthandler"])
        self.assertEqual(proc.returncode, -11, proc.stdout + proc.stderr)
        (session,) = sessions(os.path.join(work, ".gpumem"))
        got = rows(session)
        self.assertEqual([(r["test"].split("::")[1], r["status"]) for r in got],
                         [("test_first", "running"), ("test_first", "done"), ("test_first", "result"), ("test_crashes", "running")])
        self.assertEqual(got[1]["peak_allocated"], 1 << 20)
        self.assertEqual((got[2]["outcome"], got[2]["message"]), ("passed", ""))
        _, records = support.read_capture(got[3]["capture"])
        allocs = [F.BlockEvent.unpack_dict(p)["size"] for t, p in records if t == F.REC_ALLOC]
        self.assertEqual(allocs, [1 << 20, 2 << 20])  # the crashing test's allocation is in the capture

    def test_under_gpumem_run_the_plugin_uses_the_runs_capture(self):
        proc, work = run_pytest(TESTS, under_run=True)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(work, ".gpumem")))
        (session,) = sessions(os.path.join(work, "runs"))
        caps = [f for f in os.listdir(session) if f.endswith(".gpumem")]
        self.assertEqual(len(caps), 1)
        done = {r["test"].split("::")[1]: r for r in rows(session) if r["status"] == "done"}
        self.assertEqual(done["test_over_budget"]["peak_allocated"], 4 << 20)
        self.assertEqual(done["test_over_budget"]["capture"], os.path.join(session, caps[0]))
        seen = seen_of(work)
        for name, row in done.items():
            self.assertEqual(row["peak_allocated"], seen[name]["peak"] - row["allocated_before"], name)


if __name__ == "__main__":
    unittest.main()
