"""Note [Lockstep rounds] (test/gpu/bench_allocator.py): the step benchmark's children take turns. The real Gate
and run_lockstep, with children that log when each turn of theirs starts and ends instead of timing a model."""
import json
import os
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = os.path.join(os.path.dirname(HERE), "gpu")
sys.path.insert(0, GPU)
import bench_allocator  # noqa: E402  (imports no torch at module level)

# A child as child_steps is, without torch: set-up, then per model a build turn, warm-up turns, blocks of steps.
CHILD = r"""
import json, os, sys, time
sys.path.insert(0, %(gpu)r)
from bench_allocator import Gate
log = open(os.environ["LOG"], "a")
name = os.environ["NAME"]
def mark(what):
    log.write(json.dumps([name, what, time.monotonic()]) + "\n"); log.flush()
if os.environ.get("CRASH_AT_SETUP"):
    sys.exit(3)
gate = Gate.from_env()
steps = 0
for model in ("a", "b"):
    gate.turn(); mark("start")
    for i in range(3):  # warm-up: one step a turn, or gate.warmup_block steps (Note [Warm-up turns])
        if i and i %% gate.warmup_block == 0:
            mark("end"); gate.turn(); mark("start")
        time.sleep(0.002); steps += 1
    for i in range(10):
        if i %% gate.block == 0:
            mark("end"); gate.turn(); mark("start")
        time.sleep(0.002); steps += 1
    mark("end")
gate.turn()
print("RESULT " + json.dumps({"steps": steps, "name": name}))
"""


class LockstepTest(unittest.TestCase):
    def run_round(self, configs, block, crash=(), warmup_block=1):
        tmp = tempfile.mkdtemp(prefix="lockstep-test-")
        log = os.path.join(tmp, "log")
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(CHILD % {"gpu": GPU})
        real = bench_allocator.child_command

        def fake(kind, config, so, model=None, env_extra=None):
            env = dict(os.environ, LOG=log, NAME=config)
            if config in crash:
                env["CRASH_AT_SETUP"] = "1"
            return [sys.executable, script], env, None

        bench_allocator.child_command = fake
        try:
            results = bench_allocator.run_lockstep(configs, "unused.so", block, timeout=60, warmup_block=warmup_block)
        finally:
            bench_allocator.child_command = real
        with open(log) as f:
            rows = [json.loads(line) for line in f]
        return results, rows

    def test_turns_never_overlap_and_rotate(self):
        results, rows = self.run_round(["native", "lens", "auto"], block=4)
        for c in ("native", "lens", "auto"):
            self.assertEqual(results[c], {"steps": 26, "name": c})
        # every start is followed by that child's own end before anyone else starts
        turns = []
        for row in sorted(rows, key=lambda r: r[2]):
            if row[1] == "start":
                self.assertTrue(not turns or turns[-1][1] is not None, "a turn began inside another: %r" % row)
                turns.append([row[0], None])
            else:
                self.assertEqual(turns[-1], [row[0], None], "a turn ended that was not running: %r" % row)
                turns[-1][1] = row[2]
        # per model: the build turn, 2 more warm-up turns, ceil(10 / 4) = 3 blocks
        for c in ("native", "lens", "auto"):
            self.assertEqual(sum(1 for t in turns if t[0] == c), 2 * (1 + 2 + 3))
        # rotation: the first of each pass moves on by one, so no configuration always goes first
        firsts = [turns[i][0] for i in range(0, len(turns), 3)]
        self.assertEqual(firsts[:4], ["native", "lens", "auto", "native"])

    @staticmethod
    def turns_of(rows):
        turns = []
        for row in sorted(rows, key=lambda r: r[2]):
            if row[1] == "start":
                turns.append(row[0])
        return turns

    def test_warm_up_back_to_back(self):
        """Note [Warm-up turns]: with warmup_block 3 the whole warm-up runs in the build turn, back to back."""
        results, rows = self.run_round(["native", "auto"], block=4, warmup_block=3)
        self.assertEqual(results["native"], {"steps": 26, "name": "native"})
        turns = self.turns_of(rows)
        # per model: the build turn (with the 3 warm-up steps) and ceil(10 / 4) = 3 blocks
        self.assertEqual(turns.count("native"), 2 * (1 + 3))
        self.assertEqual(turns.count("auto"), 2 * (1 + 3))  # one step a turn: 2 * (1 + 2 + 3), the test above

    def test_a_child_that_dies_ends_its_turns_not_the_round(self):
        t0 = time.monotonic()
        results, rows = self.run_round(["native", "lens"], block=5, crash=("lens",))
        self.assertEqual(results["native"], {"steps": 26, "name": "native"})
        self.assertIn("exit 3", results["lens"]["error"])
        self.assertFalse(any(r[0] == "lens" for r in rows))
        self.assertLess(time.monotonic() - t0, 30)


if __name__ == "__main__":
    unittest.main()


class TurnCpusTest(unittest.TestCase):
    """Note [Turn CPUs]: at each turn the main thread, PyTorch's autograd threads (by their name) and every other
    thread go to their own CPU sets."""

    def test_threads_placed_by_role(self):
        import ctypes
        import threading

        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("needs two CPUs")
        libc = ctypes.CDLL(None)
        ready, stop = threading.Barrier(3), threading.Event()
        tids = {}

        def worker(name):
            if name:
                libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME, as PyTorch names its device threads
            tids[name or "other"] = threading.get_native_id()
            ready.wait()
            stop.wait(10)

        threads = [threading.Thread(target=worker, args=(n,)) for n in ("pt_autograd_0", "")]
        for t in threads:
            t.start()
        ready.wait()
        before = os.sched_getaffinity(0)
        try:
            main, autograd, rest = {cpus[0]}, {cpus[1]}, set(cpus[1:])
            bench_allocator.place_threads(main, autograd, rest)
            self.assertEqual(os.sched_getaffinity(threading.get_native_id()), main)
            self.assertEqual(os.sched_getaffinity(tids["pt_autograd_0"]), autograd)
            self.assertEqual(os.sched_getaffinity(tids["other"]), rest)
        finally:
            stop.set()
            for t in threads:
                t.join()
            os.sched_setaffinity(0, before)

    def test_gate_reads_its_places(self):
        old = dict(os.environ)
        try:
            os.environ["GPUMEM_BENCH_GATE"] = "7,10"
            os.environ["GPUMEM_BENCH_TURN_CPUS"] = "0;2;4,6,8"
            g = bench_allocator.Gate.from_env()
            self.assertEqual((g.fd, g.block, g.places), (7, 10, ({0}, {2}, {4, 6, 8})))
            self.assertEqual(g.warmup_block, 1)
            os.environ["GPUMEM_BENCH_GATE"] = "7,10,10"
            self.assertEqual(bench_allocator.Gate.from_env().warmup_block, 10)
            del os.environ["GPUMEM_BENCH_TURN_CPUS"]
            self.assertIsNone(bench_allocator.Gate.from_env().places)
        finally:
            os.environ.clear()
            os.environ.update(old)
