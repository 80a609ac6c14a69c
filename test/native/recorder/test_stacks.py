"""Python stacks at allocation time: frames of the calling functions with their real file/line/name,
threads with their own stacks, and frameless (autograd-like) threads attributed to the thread in
backward() with kStackBackward. Run: python3 test/native/recorder/test_stacks.py"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as cap  # noqa: E402
import common  # noqa: E402

KIB = 1024


def inner(lib, size):
    return lib.gpumem_malloc(size, 0, None)  # ALLOC-INNER


def outer(lib, size):
    return inner(lib, size)  # CALL-INNER


def in_thread(lib, out):
    out.append(lib.gpumem_malloc(3 * KIB, 0, None))  # ALLOC-THREAD


def backward_like(lib, helper):
    lib.gpumem_backward_begin()  # BACKWARD-BEGIN
    p = helper.alloc_on_native_thread(ctypes.cast(lib.gpumem_malloc, ctypes.c_void_p), 5 * KIB)
    lib.gpumem_backward_end()
    return p


def scenario_stacks(path):
    lib = common.load()
    common.configure(lib, capture_path=path)
    ptrs = [outer(lib, 1 * KIB)]
    out = []
    t = threading.Thread(target=in_thread, args=(lib, out))
    t.start()
    t.join()
    ptrs += out
    helper = ctypes.CDLL(common.NATIVE_THREAD_SO)
    helper.alloc_on_native_thread.restype = ctypes.c_void_p
    helper.alloc_on_native_thread.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    ptrs.append(backward_like(lib, helper))
    # Outside a backward bracket a frameless thread has no stack at all.
    ptrs.append(helper.alloc_on_native_thread(ctypes.cast(lib.gpumem_malloc, ctypes.c_void_p), 7 * KIB))
    for p in ptrs:
        lib.gpumem_free(p, 0, 0, None)
    lib.gpumem_shutdown(0)


def scenario_no_stacks(path):
    lib = common.load()
    common.configure(lib, capture_path=path, stacks=False)
    lib.gpumem_free(outer(lib, 1 * KIB), 0, 0, None)
    lib.gpumem_shutdown(0)


# ---- The GIL-free walk against the public API (Note [GIL-free walk]) --------------------------------
# Shapes of Python stacks that a frame walker can get wrong: generators, coroutines, recursion past the
# 256-frame cut, comprehensions (inlined in 3.12), lambdas, class bodies, exception handlers, several
# lines of one function, another thread. Each runs three times so that later rounds are answered from
# the per-thread cache.
def gen_alloc(lib, n):
    for i in range(n):
        yield lib.gpumem_malloc((20 + i) * KIB, 0, None)


async def coro_alloc(lib):
    return lib.gpumem_malloc(40 * KIB, 0, None)


def recurse(lib, depth):
    return recurse(lib, depth - 1) if depth else lib.gpumem_malloc(50 * KIB, 0, None)


def two_lines(lib):
    a = lib.gpumem_malloc(60 * KIB, 0, None)
    b = lib.gpumem_malloc(61 * KIB, 0, None)
    return [a, b]


def in_except(lib):
    try:
        raise ValueError("x")
    except ValueError:
        return lib.gpumem_malloc(70 * KIB, 0, None)


def shapes(lib):
    ptrs = []
    ptrs += list(gen_alloc(lib, 3))
    c = coro_alloc(lib)
    try:
        c.send(None)
    except StopIteration as done:
        ptrs.append(done.value)
    ptrs.append(recurse(lib, 300))
    ptrs.append(recurse(lib, 10))
    ptrs += [lib.gpumem_malloc((80 + i) * KIB, 0, None) for i in range(2)]
    ptrs.append((lambda: lib.gpumem_malloc(90 * KIB, 0, None))())
    ptrs += two_lines(lib)
    ptrs.append(in_except(lib))

    class Body:
        p = lib.gpumem_malloc(100 * KIB, 0, None)
    ptrs.append(Body.p)
    out = []
    t = threading.Thread(target=in_thread, args=(lib, out))
    t.start()
    t.join()
    return ptrs + out


def scenario_shapes(path):
    lib = common.load()
    common.configure(lib, capture_path=path)
    for _ in range(3):
        for p in shapes(lib):
            lib.gpumem_free(p, 0, 0, None)
    print("INFO " + json.dumps(common.stack_info(lib)))
    lib.gpumem_shutdown(0)


class StackTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "c.gpumem")
        self.src = os.path.abspath(__file__)

    def tearDown(self):
        self.dir.cleanup()

    def alloc_by_requested(self, c):
        return {a["requested"]: a for a in c.blocks("alloc")}

    @unittest.skipUnless(common.NATIVE_THREAD_SO, "GPUMEM_NATIVE_THREAD_SO not built")
    def test_frames_lines_threads_and_backward(self):
        common.run_scenario(self.src, "stacks", self.path)
        c = cap.Capture(self.path)
        allocs = self.alloc_by_requested(c)
        this = os.path.realpath(self.src)

        def frames(a):
            return [(os.path.realpath(f), fn, line) for f, fn, line in c.stacks[a["stack"]][1]]

        # Main thread: innermost first: inner → outer → scenario_stacks.
        fr = frames(allocs[1 * KIB])
        self.assertEqual(fr[0], (this, "inner", common.marker_line(self.src, "ALLOC-INNER")))
        self.assertEqual(fr[1], (this, "outer", common.marker_line(self.src, "CALL-INNER")))
        self.assertEqual(fr[2][:2], (this, "scenario_stacks"))
        self.assertEqual(c.stacks[allocs[1 * KIB]["stack"]][0], 0)
        self.assertEqual(allocs[1 * KIB]["thread"], 0)

        # A Python thread has its own frames, ending in threading's bootstrap, and its own number.
        fr = frames(allocs[3 * KIB])
        self.assertEqual(fr[0], (this, "in_thread", common.marker_line(self.src, "ALLOC-THREAD")))
        self.assertTrue(fr[-1][0].endswith("threading.py"), fr[-1])
        self.assertNotEqual(allocs[3 * KIB]["thread"], 0)

        # Frameless thread inside the bracket: the bracketing thread's stack, flagged backward.
        bw = allocs[5 * KIB]
        flags, bframes = c.stacks[bw["stack"]]
        self.assertEqual(flags, 1)  # kStackBackward
        self.assertEqual((os.path.realpath(bframes[0][0]),) + bframes[0][1:],
                         (this, "backward_like", common.marker_line(self.src, "BACKWARD-BEGIN")))
        self.assertNotEqual(bw["thread"], 0)
        # Frameless thread outside any bracket: no stack.
        self.assertEqual(allocs[7 * KIB]["stack"], 0)

        # Identical call sites intern to the same stack id (second malloc through outer()).
        self.assertEqual(len(set(c.stacks)), len(c.of("stack")))
        self.assertEqual(c.records[-1][0], "end")

    def resolved_stacks(self, gil_free):
        env = dict(os.environ, GPUMEM_GIL_FREE_WALK="1" if gil_free else "0")
        r = subprocess.run([sys.executable, self.src, "--scenario", "shapes", self.path], env=env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        info = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("INFO ")][0][5:])
        c = cap.Capture(self.path)
        return info, [(a["requested"], c.stacks[a["stack"]]) for a in c.blocks("alloc")]

    def test_gil_free_walk_reproduces_the_public_api(self):
        info_public, public = self.resolved_stacks(False)
        info_fast, fast = self.resolved_stacks(True)
        self.assertFalse(info_public["gil_free_walk"])
        self.assertEqual(info_public["gil_free_answers"], 0)
        # Every allocation's stack, frame for frame (file, function, line) and flags, is the same.
        self.assertEqual(len(fast), 3 * 14)
        self.assertEqual(fast, public)
        # The deep recursion was cut to the innermost 256 frames by both.
        deep = [st for req, st in fast if req == 50 * KIB and len(st[1]) > 20]
        self.assertEqual({len(st[1]) for st in deep}, {256})
        if sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)):
            self.assertTrue(info_fast["gil_free_walk"], info_fast)
            self.assertEqual(info_fast["mismatches"], 0)
            # Rounds 2 and 3 of the main thread's shapes come from the cache (the thread is new each
            # round, so its one allocation walks with the GIL each time).
            self.assertGreaterEqual(info_fast["gil_free_answers"], 2 * 13)

    def test_stacks_false_records_no_stack(self):
        common.run_scenario(self.src, "no_stacks", self.path)
        c = cap.Capture(self.path)
        self.assertEqual([a["stack"] for a in c.blocks("alloc")], [0])
        self.assertEqual(c.of("stack"), [])
        self.assertFalse(c.header["stacks"])


if __name__ == "__main__":
    common.main({"stacks": scenario_stacks, "no_stacks": scenario_no_stacks, "shapes": scenario_shapes})
