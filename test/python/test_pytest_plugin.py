"""The pytest plugin (`pytest -p gpumem`, gpumem/_pytest.py) run by real pytest subprocesses, on the stand-in torch
with the real lens allocator on the simulated device (GPUMEM_BACKEND=sim): budgets that hold and budgets that
fail, with the figures each test measured itself through torch.cuda.max_memory_allocated(), the lines at the peak,
the per-test report, a budget written wrong, a test that crashes the process, and the plugin under `gpumem run`."""
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


def run_pytest(tests, args=(), env=None, under_run=False, name="test_budgets.py"):
    work = support.new_dir("pt")
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(tests))
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEM_", "PYTHON"))}
    full.update({"PYTHONPATH": os.pathsep.join([str(support.PY_DIR), str(support.FAKE_TORCH)]),
                 "GPUMEM_ALLOCATOR_SO": str(support.REAL_SO), "GPUMEM_BACKEND": "sim", "GPUMEM_ALLOCATOR": "lens",
                 "GPUMEM_SAMPLE_MS": "0", "SEEN": os.path.join(work, "seen.jsonl")})
    full.update(env or {})
    cmd = ["-m", "pytest", "-p", "gpumem", "-p", "no:cacheprovider", "-q", name] + list(args)
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
            self.assertEqual(row["peak_allocated"], seen[name]["peak"], name)
            self.assertEqual(row["capture_peak"], seen[name]["peak"], name)  # the capture's replay agrees
        self.assertEqual(done["test_fits"]["peak_allocated"], 300032 + 200192)
        self.assertEqual(done["test_over_budget"]["peak_allocated"], 4 << 20)
        self.assertEqual(done["test_leaks"]["left_allocated"], 4096)
        self.assertEqual(done["test_fits"]["left_allocated"], 0)
        self.assertEqual(done["test_no_budget"]["peak_allocated"], 4096 + (5 << 20))  # the leak still lives

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
        self.assertIn("gpu_memory: peak allocated 4.00 MiB exceeds the budget peak=1.00 MiB by 3.00 MiB", big)
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
        self.assertRegex(table, r"test_budgets.py::test_fits\s+488 KiB\s+\S+ \w+\s+0 B")
        self.assertRegex(table, r"test_budgets.py::test_over_budget\s+4.00 MiB\s+\S+ \w+\s+0 B")
        self.assertRegex(table, r"test_budgets.py::test_leaks\s+4.00 KiB\s+\S+ \w+\s+4.00 KiB")

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
            self.assertEqual(row["peak_allocated"], seen[name]["peak"], name)


if __name__ == "__main__":
    unittest.main()
