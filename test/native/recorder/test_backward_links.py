"""Backward on the forward line (Note [Backward on the forward line] in native/allocator/src/backward_links.h), with
PyTorch played by ctypes callbacks: a forward whose ops make autograd nodes (one allocating after making its node,
one making its node and allocating nothing, a view), then a backward whose nodes run on a frameless thread, as
autograd's do. Each backward allocation must carry its forward op's frames, its node and the backward() caller's
frames. Run: python3 test/native/recorder/test_backward_links.py"""
import ctypes
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
COUNT = ctypes.CFUNCTYPE(ctypes.c_uint64)
SWITCH = ctypes.CFUNCTYPE(None, ctypes.c_int)


class Torch:
    """What the observer extension passes the library: the thread's next sequence number, its id, the op callback's
    switch (its calls are kept)."""

    def __init__(self):
        self.next = 0
        self.switched = []
        self.cbs = (COUNT(lambda: self.next), COUNT(lambda: FORWARD_THREAD), SWITCH(self.switched.append))


def conv(lib, torch):
    torch.next += 1  # the op makes its node (sequence number 0), then allocates its output
    return lib.gpumem_malloc(16 * KIB, 0, None)  # CONV-LINE


def relu_(lib, torch):
    torch.next += 1  # an in-place op: a node (1), no allocation; the op callback at its end
    lib.gpumem_op_end()  # RELU-LINE


def unrecorded(lib, torch):
    torch.next += 1  # a node (2) made with the op callback off: filed by the next allocation
    return lib.gpumem_malloc(1 * KIB, 0, None)  # NEXT-ALLOC


def backward(lib, helper, torch, out):
    lib.gpumem_backward_begin()  # BACKWARD-LINE
    nodes = [(0, b"ConvolutionBackward0", 5 * KIB, 9 * KIB), (1, b"ThresholdBackward1", 6 * KIB, 0),
             (2, b"CloneBackward0", 4 * KIB, 0), (-1, b"torch::autograd::AccumulateGrad", 7 * KIB, 0),
             (99, b"UnknownBackward0", 8 * KIB, 0)]
    for seq, name, size, after in nodes:
        ptrs = (ctypes.c_void_p * 2)()
        rc = helper.node_on_native_thread(ctypes.cast(lib.gpumem_malloc, ctypes.c_void_p),
                                          ctypes.cast(lib.gpumem_node_begin, ctypes.c_void_p),
                                          ctypes.cast(lib.gpumem_node_end, ctypes.c_void_p), FORWARD_THREAD, seq, name,
                                          size, after, ptrs)
        assert rc == 0
        out += [p for p in ptrs if p]
    lib.gpumem_backward_end()


RECOMPUTE = """
def unpack(lib, size):
    return lib.gpumem_malloc(size, 0, None)  # the checkpointed forward, run again
"""


def recompute_in_node(lib, folder, out):
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
    lib.gpumem_node_begin(FORWARD_THREAD, 0, b"AddmmBackward0")
    out.append(mod.unpack(lib, 3 * KIB))
    lib.gpumem_node_end()


def scenario_links(path):
    lib = common.load()
    lib.gpumem_links_connect.argtypes = [COUNT, COUNT, SWITCH]
    lib.gpumem_node_begin.argtypes = [ctypes.c_uint64, ctypes.c_int64, ctypes.c_char_p]
    common.configure(lib, capture_path=path)
    torch = Torch()
    lib.gpumem_links_connect(*torch.cbs)
    lib.gpumem_op_end()  # the thread's first look: nodes made before are no recorded op's
    helper = ctypes.CDLL(common.NATIVE_THREAD_SO)
    helper.node_on_native_thread.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_uint64, ctypes.c_int64, ctypes.c_char_p,
                                                                      ctypes.c_size_t, ctypes.c_size_t,
                                                                      ctypes.POINTER(ctypes.c_void_p)]
    ptrs = [conv(lib, torch)]
    relu_(lib, torch)
    ptrs.append(unrecorded(lib, torch))
    backward(lib, helper, torch, ptrs)
    print("SWITCHED", torch.switched)
    lib.gpumem_backward_begin()  # RECOMPUTE-BACKWARD
    t = threading.Thread(target=recompute_in_node, args=(lib, os.path.dirname(path), ptrs))
    t.start()
    t.join()
    lib.gpumem_backward_end()
    for p in ptrs:
        lib.gpumem_free(p, 0, 0, None)
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

        def caller_frames_follow(frames, k):
            self.assertEqual(frames[k + 1], (this, "backward", line("BACKWARD-LINE")))

        # A node made by an op that allocated after making it: the allocation's frames.
        flags, fr = stack(5 * KIB)
        self.assertEqual(flags, 3)  # kStackBackward | kStackLinked
        self.assertEqual(fr[0], (this, "conv", line("CONV-LINE")))
        k = fr.index(("<backward>", "ConvolutionBackward0", 0))
        self.assertEqual(fr[1:k][0][1], "scenario_links")
        caller_frames_follow(fr, k)
        # An in-place op's node: filed at the op's end, under its own line.
        flags, fr = stack(6 * KIB)
        self.assertEqual((flags, fr[0]), (3, (this, "relu_", line("RELU-LINE"))))
        self.assertIn(("<backward>", "ThresholdBackward1", 0), fr)
        # A node no op end filed: the next allocation of its thread files it, under that allocation's line.
        flags, fr = stack(4 * KIB)
        self.assertEqual((flags, fr[0]), (3, (this, "unrecorded", line("NEXT-ALLOC"))))
        # After a node's apply() and before the next node, its thread's allocations are still that node's (Note
        # [Node's evaluation]): the engine's validate_outputs and input buffers.
        self.assertEqual(stack(9 * KIB), stack(5 * KIB))
        # AccumulateGrad (no sequence number) and a node whose forward was never filed: the backward() caller's stack.
        for size in (7 * KIB, 8 * KIB):
            flags, fr = stack(size)
            self.assertEqual((flags, fr[0]), (1, (this, "backward", line("BACKWARD-LINE"))))
        # The op callback is switched off while the backward() bracket is open, and on again after.
        self.assertIn("SWITCHED [0, 1]", out)
        # The forward's own allocations are the forward's (no backward flag).
        self.assertEqual(stack(16 * KIB)[0], 0)
        # A recomputation in a node (Python frames of torch's checkpoint module on the autograd thread): its own
        # frames first, then the node's forward op, the node, and the backward() caller; flagged recomputed.
        flags, fr = stack(3 * KIB)
        self.assertEqual(flags, 1 | 2 | 4)  # kStackBackward | kStackLinked | kStackRecomputed
        self.assertTrue(fr[0][0].endswith(os.path.join("torch", "utils", "checkpoint.py")) and fr[0][1] == "unpack", fr[0])
        self.assertIn((this, "conv", line("CONV-LINE")), fr)
        k = fr.index(("<backward>", "AddmmBackward0", 0))
        self.assertLess(fr.index((this, "conv", line("CONV-LINE"))), k)
        self.assertEqual(fr[k + 1], (this, "scenario_links", line("RECOMPUTE-BACKWARD")))


if __name__ == "__main__":
    common.main({"links": scenario_links})
