"""Backward on the forward line (Note [Backward on the forward line] and Note [Learned steps] in
native/allocator/src/backward_links.h), with PyTorch played by ctypes and a C helper: three steps whose forward ops
make autograd nodes (one allocating after making its node, one in place making its node and allocating nothing, one
no op end files), each followed by a backward whose nodes are evaluated on frameless threads, as autograd's are. The
first step is learned with the op callback on; the second is known, with the callback off; the third takes another
path through the model. Each backward allocation must carry its forward op's frames, its node and the backward()
caller's frames. Run: python3 test/native/recorder/test_backward_links.py"""
import ctypes
import json
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as cap  # noqa: E402
import common  # noqa: E402

KIB = 1024
FORWARD_THREAD = 7
NO_NUMBER = 2**64 - 1  # AccumulateGrad's sequence number
COUNT = ctypes.CFUNCTYPE(ctypes.c_uint64)
SWITCH = ctypes.CFUNCTYPE(None, ctypes.c_int)


class Torch:
    """What the observer extension passes the library: the thread's next sequence number, its id, the op callback's
    switch (its calls are kept; while off, ops end without calling the library), and the node the thread evaluates
    (the helper's thread-local)."""

    def __init__(self, helper):
        self.next = 0
        self.on = True
        self.switched = []

        def switch(on):
            self.switched.append(on)
            self.on = bool(on)

        self.cbs = (COUNT(lambda: self.next), COUNT(lambda: FORWARD_THREAD), SWITCH(switch),
                    ctypes.cast(helper.current_node, ctypes.c_void_p))


def conv(lib, torch):
    torch.next += 1  # the op makes its node, then allocates its output
    p = lib.gpumem_malloc(16 * KIB, 0, None)  # CONV-LINE
    if torch.on:
        lib.gpumem_op_end()
    return p


def relu_(lib, torch):
    torch.next += 1  # an in-place op: a node, no allocation; the op callback at its end, while it is on
    if torch.on:
        lib.gpumem_op_end()  # RELU-LINE


def other(lib, torch):
    torch.next += 1  # another path through the model: an allocating op where the in-place one was
    return lib.gpumem_malloc(2 * KIB, 0, None)  # OTHER-LINE


def unrecorded(lib, torch):
    torch.next += 1  # a node no op end files (a Python Function's): the next allocation files it
    return lib.gpumem_malloc(1 * KIB, 0, None)  # NEXT-ALLOC


def view(lib, torch):
    torch.next += 1  # a view: a node, no allocation
    if torch.on:
        lib.gpumem_op_end()  # VIEW-LINE


def forward(lib, torch, path="A"):
    """A: conv, relu_, unrecorded. B: `other` where relu_ was. C: A, then a view before the loss."""
    ptrs = [conv(lib, torch)]
    if path == "B":
        ptrs.append(other(lib, torch))
    else:
        relu_(lib, torch)
    ptrs.append(unrecorded(lib, torch))
    if path == "C":
        view(lib, torch)
    return ptrs


def backward(lib, helper, nodes, out):
    lib.gpumem_backward_begin()  # BACKWARD-LINE
    for seq, name, size, after in nodes:
        ptrs = (ctypes.c_void_p * 2)()
        assert helper.node_on_native_thread(ctypes.cast(lib.gpumem_malloc, ctypes.c_void_p), FORWARD_THREAD, seq, name,
                                            size, after, ptrs) == 0
        out += [p for p in ptrs if p]
    lib.gpumem_backward_end()


RECOMPUTE = """
def unpack(lib, size):
    return lib.gpumem_malloc(size, 0, None)  # the checkpointed forward, run again
"""


def recompute_in_node(lib, helper, folder, out):
    """A checkpoint's recomputation: Python code on the autograd thread while a node runs (its saved tensor's unpack
    hook), from a file named as torch's checkpoint module is."""
    import importlib.util

    where = os.path.join(folder, "torch", "utils")
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, "checkpoint.py"), "w") as f:
        f.write(RECOMPUTE)
    spec = importlib.util.spec_from_file_location("fake_checkpoint", os.path.join(where, "checkpoint.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    helper.set_current_node(1, FORWARD_THREAD, 0, b"AddmmBackward0")
    out.append(mod.unpack(lib, 3 * KIB))
    helper.set_current_node(0, 0, 0, None)


# Per step: the backward's nodes (sequence number, name, bytes its apply() allocates, bytes allocated after it).
STEPS = [
    [(0, b"ConvolutionBackward0", 5 * KIB, 9 * KIB), (1, b"ThresholdBackward1", 6 * KIB, 0),
     (2, b"CloneBackward0", 4 * KIB, 0), (NO_NUMBER, b"torch::autograd::AccumulateGrad", 7 * KIB, 0),
     (99, b"UnknownBackward0", 8 * KIB, 0)],
    [(3, b"ConvolutionBackward0", 10 * KIB, 0), (4, b"ThresholdBackward1", 11 * KIB, 0),
     (5, b"CloneBackward0", 12 * KIB, 0)],
    [(6, b"ConvolutionBackward0", 13 * KIB, 0), (7, b"MulBackward0", 14 * KIB, 0), (8, b"CloneBackward0", 15 * KIB, 0)],
]


def connected(path):
    """The library recording to `path`, the helper, and PyTorch played (Torch) connected to the library; the calling
    thread has had its first look (nodes made before are no recorded op's)."""
    lib = common.load()
    lib.gpumem_links_connect.argtypes = [COUNT, COUNT, SWITCH, ctypes.c_void_p]
    common.configure(lib, capture_path=path)
    helper = ctypes.CDLL(common.NATIVE_THREAD_SO)
    helper.node_on_native_thread.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p,
                                             ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    helper.set_current_node.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p]
    torch = Torch(helper)
    lib.gpumem_links_connect(*torch.cbs)
    lib.gpumem_op_end()
    return lib, helper, torch


def links_info(lib):
    """The stack info's backward_links object (Note [Learned steps]'s counts), as JSON text."""
    buf = ctypes.create_string_buffer(1 << 16)
    lib.gpumem_stack_info(buf, len(buf))
    return json.dumps(json.loads(buf.value.decode())["backward_links"])


def scenario_links(path):
    lib, helper, torch = connected(path)
    ptrs = []
    for step, nodes in enumerate(STEPS):
        ptrs += forward(lib, torch, "B" if step == 2 else "A")
        backward(lib, helper, nodes, ptrs)
        print("SWITCHED", step, torch.switched)
    lib.gpumem_backward_begin()  # RECOMPUTE-BACKWARD
    t = threading.Thread(target=recompute_in_node, args=(lib, helper, os.path.dirname(path), ptrs))
    t.start()
    t.join()
    lib.gpumem_backward_end()
    print("LINKS " + links_info(lib))
    for p in ptrs:
        lib.gpumem_free(p, 0, 0, None)
    lib.gpumem_shutdown(0)


def scenario_paths(path):
    """Steps on changing paths (Note [Learned steps]): a known step whose node count differs (C), then known steps
    that miss (B) each time after one is learned, until the op callback stays on."""
    lib, _, torch = connected(path)
    for step, way in enumerate("AACABABABA"):
        on = torch.on
        for p in forward(lib, torch, way):
            lib.gpumem_free(p, 0, 0, None)
        lib.gpumem_backward_begin()
        lib.gpumem_backward_end()
        print("STEP %d %s callback=%s %s" % (step, way, on, links_info(lib)))
    lib.gpumem_shutdown(0)


class BackwardLinksTest(unittest.TestCase):
    @unittest.skipUnless(common.NATIVE_THREAD_SO, "GPUMEM_NATIVE_THREAD_SO not built")
    def test_backward_allocations_carry_their_forward_op(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.gpumem")
            out = common.run_scenario(os.path.abspath(__file__), "links", path)
            c = cap.Capture(path)
        this = os.path.realpath(__file__)
        line = lambda tag: common.marker_line(__file__, tag)  # noqa: E731
        allocs = {a["requested"]: a for a in c.blocks("alloc")}

        def stack(size):
            flags, frames = c.stacks[allocs[size]["stack"]]
            return flags, [(os.path.realpath(f) if not f.startswith("<") else f, fn, ln) for f, fn, ln in frames]

        def node_of(size, name, op, tag):
            """The allocation of `size` is backward's, linked (flags 3) to `op`'s line, node `name`, then the
            backward() caller's frames."""
            flags, fr = stack(size)
            self.assertEqual((flags, fr[0]), (3, (this, op, line(tag))), size)
            k = fr.index(("<backward>", name, 0))
            self.assertEqual(fr[k + 1], (this, "backward", line("BACKWARD-LINE")))
            return fr

        # Step 1, learned with the op callback on. A node made by an op that allocated after making it: the
        # allocation's frames (the forward's own frames follow).
        fr = node_of(5 * KIB, "ConvolutionBackward0", "conv", "CONV-LINE")
        self.assertEqual(fr[1][1], "forward")
        # An in-place op's node: filed at the op's end, under its own line.
        node_of(6 * KIB, "ThresholdBackward1", "relu_", "RELU-LINE")
        # A node no op end filed: the next allocation of its thread files it, under that allocation's line.
        node_of(4 * KIB, "CloneBackward0", "unrecorded", "NEXT-ALLOC")
        # Allocations while the engine still evaluates a node after its apply() (validate_outputs, input buffers) are
        # that node's: PyTorch's current node covers the whole evaluation.
        self.assertEqual(stack(9 * KIB), stack(5 * KIB))
        # AccumulateGrad (no sequence number) and a node whose forward was never filed: the backward() caller's stack.
        for size in (7 * KIB, 8 * KIB):
            flags, fr = stack(size)
            self.assertEqual((flags, fr[0]), (1, (this, "backward", line("BACKWARD-LINE"))))
        # The forward's own allocations are the forward's (no backward flag).
        self.assertEqual(stack(16 * KIB)[0], 0)
        # Note [Learned steps]: the callback goes off at the first backward() and stays off once the step is known.
        self.assertIn("SWITCHED 0 [0]", out)
        # Step 2, known, the callback off: the in-place op's end never reached the library, and its node is still on
        # its own line (from the learned step), not on the next allocation's.
        node_of(11 * KIB, "ThresholdBackward1", "relu_", "RELU-LINE")
        node_of(10 * KIB, "ConvolutionBackward0", "conv", "CONV-LINE")
        node_of(12 * KIB, "CloneBackward0", "unrecorded", "NEXT-ALLOC")
        self.assertIn("SWITCHED 1 [0]", out)
        # Step 3 takes another path: the allocation where none was learned misses, files its node under its own line,
        # and turns the callback on for the rest of the step; the next step is learned again.
        node_of(14 * KIB, "MulBackward0", "other", "OTHER-LINE")
        node_of(13 * KIB, "ConvolutionBackward0", "conv", "CONV-LINE")
        node_of(15 * KIB, "CloneBackward0", "unrecorded", "NEXT-ALLOC")
        self.assertIn("SWITCHED 2 [0, 1, 0, 1]", out)
        links = json.loads(out.split("LINKS ", 1)[1].splitlines()[0])
        self.assertEqual({k: links[k] for k in ("steps_learned", "steps_known", "misses", "mode")},
                         {"steps_learned": 1, "steps_known": 1, "misses": 1, "mode": "learn"})
        self.assertEqual((links["nodes"], links["nodes_linked"]), (11, 10))  # and AccumulateGrad, met unnumbered
        # A recomputation in a node (Python frames of torch's checkpoint module on the autograd thread): its own
        # frames first, then the node's forward op, the node, and the backward() caller; flagged recomputed.
        flags, fr = stack(3 * KIB)
        self.assertEqual(flags, 1 | 2 | 4)  # kStackBackward | kStackLinked | kStackRecomputed
        self.assertTrue(fr[0][0].endswith(os.path.join("torch", "utils", "checkpoint.py")) and fr[0][1] == "unpack", fr[0])
        self.assertIn((this, "conv", line("CONV-LINE")), fr)
        k = fr.index(("<backward>", "AddmmBackward0", 0))
        self.assertLess(fr.index((this, "conv", line("CONV-LINE"))), k)
        self.assertEqual(fr[k + 1], (this, "scenario_links", line("RECOMPUTE-BACKWARD")))

    def test_steps_learned_known_and_given_up(self):
        with tempfile.TemporaryDirectory() as d:
            out = common.run_scenario(os.path.abspath(__file__), "paths", os.path.join(d, "c.gpumem"))
        steps = {}
        for row in out.splitlines():
            if row.startswith("STEP "):
                _, n, way, on, rest = row.split(" ", 4)
                steps[int(n)] = (way, on == "callback=True", json.loads(rest))
        counts = lambda n: tuple(steps[n][2][k] for k in ("steps_learned", "steps_known", "misses"))  # noqa: E731
        # Learned with the callback on, then known with it off.
        self.assertEqual((steps[0][1], steps[0][2]["mode"], counts(0)), (True, "known", (1, 0, 0)))
        self.assertEqual((steps[1][1], counts(1)), (False, (1, 1, 0)))
        # One more node than the known step (a view before the loss): a miss at backward(), the next step learned.
        self.assertEqual((steps[2][1], steps[2][2]["mode"], counts(2)), (False, "learn", (1, 1, 1)))
        self.assertEqual((steps[3][1], steps[3][2]["mode"], counts(3)), (True, "known", (2, 1, 1)))
        # Another path each time a step is known: after misses in kGiveUp (4) steps with no step replayed whole
        # between them, the callback stays on.
        self.assertEqual((steps[4][2]["mode"], counts(4)), ("learn", (2, 1, 2)))
        self.assertEqual((steps[8][2]["mode"], counts(8)), ("always_on", (4, 1, 4)))
        self.assertEqual((steps[9][1], steps[9][2]["mode"], counts(9)), (True, "always_on", (4, 1, 4)))


if __name__ == "__main__":
    common.main({"links": scenario_links, "paths": scenario_paths})
