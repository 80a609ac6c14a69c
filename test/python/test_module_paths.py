"""Module paths from frames (Note [Module paths from frames] in native/allocator/src/module_marks.h, Note [Module
paths] in gpumem/_modules.py), end to end on the CPU: the real allocator (sim backend) under the bootstrap, a
nested model of the stand-in torch.nn whose forwards allocate. The capture must hold, before each allocation,
the MARK_MODULE_* marks that nest like the forwards around it, named by path; nothing is called per module call
(no global hook is registered)."""
import json
import os
import struct
import sys
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _format as F  # noqa: E402

WORKLOAD = r"""
import json, sys, torch
from torch import nn

class Attn(nn.Module):
    def forward(self, n):
        return torch.empty(n, device="cuda")                     # ATTN

class MLP(nn.Module):
    def forward(self, n):
        helper = lambda: self                                    # `self` captured by a closure: a cell
        return torch.empty(2 * n, device="cuda")                 # MLP

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()
        self.mlp = MLP()
    def forward(self, n):
        return [self.attn(n), self.mlp(n)]

class Head:                                                      # a forward(self) that is no module
    def forward(self, n):
        return torch.empty(n, device="cuda")                     # HEAD

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.ModuleList([Block(), Block()])
    def forward(self, n):
        out = [b(n) for b in self.h]
        loose = Attn()                                           # not registered under GPT
        out.append(loose(n))
        out.append(Head().forward(n))
        return out

model = GPT()
keep = []
for step in range(2):
    keep.append(model(1 << 12))
    keep.append(torch.empty(3 << 12, device="cuda"))             # LOSS: outside every module
from gpumem._state import STATE
print(json.dumps({"stacks": STATE.native.stack_info()}))
"""


# The marks follow the table when it changes (a module collected and another made at its address: the workload
# changes the table as that does, through the library's learn, on a live module) and open again after backward()
# closed them, whatever the module thread remembers between two allocations with the same chain. A cache of the
# chain's answers there (tried 2026-11-27) saved 26 ns an allocation on the CPU machine and was not kept; this
# test is what such a cache must pass.
SAME_CHAIN_WORKLOAD = r"""
import ctypes, json, sys, torch
from torch import nn
from gpumem._state import STATE

class First(nn.Module):
    def forward(self, n):
        return torch.empty(n, device="cuda")                     # FIRST

keep = []
a = First()
keep.append(a(1 << 13))
keep.append(a(1 << 13))                                          # the same chain again
torch.autograd.backward(keep[-1])                                # closes First
keep.append(a(1 << 13))                                          # ... so it opens again
learn = STATE.native.lib.gpumem_modules_learn
learn.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
learn(id(a), b"Renamed")                                         # as if another module now lived at this address
keep.append(a(1 << 13))
print(json.dumps({"ok": True}))
"""


# Inference: no optimizer ever steps, so the optimizer walk never tags; the first forward of a root tags its tree's
# weights (Note [Weights from the first forward] in gpumem/_tags.py), once, before that forward's first allocation.
WEIGHTS_WORKLOAD = r"""
import json, torch
from torch import nn

class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_parameter("weight", torch.empty(1 << 10, device="cuda"))
        self.register_buffer("running_mean", torch.empty(1 << 9, device="cuda"))
        self.register_buffer("cpu_table", torch.empty(1 << 9, device="cpu"))   # not on the GPU: no tag
    def forward(self, n):
        return torch.empty(n, device="cuda")                     # NORM

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Norm(), Norm()
        self.register_parameter("embed", torch.empty(3 << 10, device="cuda"))
        self.head = self.embed                                   # tied: one storage, tagged once
        self._parameters["head"] = self.embed
    def forward(self, n):
        return [self.a(n), self.b(n)]

net = Net()
out = [net(1 << 12) for _ in range(3)]                           # three forwards: tagged at the first only
weights = {"parameter": sorted(t.data_ptr() for t in net.parameters()),
           "buffer": sorted(b.data_ptr() for b in net.buffers() if b.get_device() >= 0)}
print(json.dumps(weights))
"""


def module_events(recs):
    """[("B"|"E", path) or ("alloc", size)] in capture order."""
    strings, events = {}, []
    for t, p in recs:
        if t == F.REC_STRING:
            sid, n = struct.unpack_from("<II", p)
            strings[sid] = p[8:8 + n].decode()
        elif t == F.REC_MARKER:
            _t, name, kind = struct.unpack_from("<QII", p)
            if kind in (F.MARK_MODULE_BEGIN, F.MARK_MODULE_END):
                events.append(("B" if kind == F.MARK_MODULE_BEGIN else "E", strings[name]))
        elif t == F.REC_ALLOC:
            events.append(("alloc", F.BlockEvent.unpack_dict(p)["size"]))
    return events


class ModulePathsFromFramesTest(unittest.TestCase):
    def test_the_chain_cache_follows_the_table_and_reopens_after_backward(self):
        so = support.real_so_or_skip(self)
        run = support.run_script(SAME_CHAIN_WORKLOAD, so=so, env={"GPUMEM_BACKEND": "sim"})
        self.assertEqual(run.code, 0, run.err)
        _, recs = support.read_capture(run.capture())
        n = 1 << 13  # backward()'s own allocation (the stand-in's autograd thread) is 4096 bytes
        got = [e for e in module_events(recs) if e[0] != "alloc" or e[1] == n]
        self.assertEqual(got, [("B", "First"), ("alloc", n), ("alloc", n),
                               ("E", "First"),                      # backward() closes it
                               ("B", "First"), ("alloc", n),        # the same chain after backward: opened again
                               ("E", "First"), ("B", "Renamed"), ("alloc", n)],  # the table's new answer
                         "module marks around each allocation")

    def test_the_first_forward_tags_the_weights_of_a_model_with_no_optimizer(self):
        so = support.real_so_or_skip(self)
        run = support.run_script(WEIGHTS_WORKLOAD, so=so, env={"GPUMEM_BACKEND": "sim"})
        self.assertEqual(run.code, 0, run.err)
        want = json.loads(run.out.strip().splitlines()[-1])
        _, recs = support.read_capture(run.capture())
        tags = [F.TagRec.unpack_dict(p) for t, p in recs if t == F.REC_TAG]
        got = {"parameter": sorted(x["addr"] for x in tags if x["category"] == F.TAG_PARAMETER),
               "buffer": sorted(x["addr"] for x in tags if x["category"] == F.TAG_BUFFER)}
        self.assertEqual(got, want, "each CUDA parameter and buffer once, by category")
        self.assertEqual(len(want["parameter"]), 3)  # a.weight, b.weight, embed (= head)
        self.assertEqual(sorted(x["size"] for x in tags), sorted([1 << 10, 1 << 10, 3 << 10, 1 << 9, 1 << 9]))
        # before the first forward's first allocation: the tags come right before it in the capture
        first_norm_alloc = next(i for i, (t, p) in enumerate(recs) if t == F.REC_ALLOC and F.BlockEvent.unpack_dict(p)["size"] == 1 << 12)
        self.assertTrue(all(i < first_norm_alloc for i, (t, _) in enumerate(recs) if t == F.REC_TAG))

    def test_marks_nest_like_the_forwards_around_each_allocation(self):
        so = support.real_so_or_skip(self)
        run = support.run_script(WORKLOAD, so=so, env={"GPUMEM_BACKEND": "sim"})
        self.assertEqual(run.code, 0, run.err)
        header, recs = support.read_capture(run.capture())
        events = module_events(recs)
        # Each allocation with the modules open around it, as the marks before it leave them.
        opened, seen = [], []
        for e in events:
            if e[0] == "B":
                opened.append(e[1])
            elif e[0] == "E":
                self.assertEqual(opened[-1], e[1], "ends nest like calls: %r" % events)
                opened.pop()
            else:
                seen.append((e[1], tuple(opened)))
        n = 1 << 12
        attn, mlp, loss = n, 2 * n, 3 * n  # the stand-in's torch.empty(n) takes n bytes
        # ModuleList is iterated, never called: `h` has no forward of its own, so no mark; the loose Attn is named
        # under its caller; Head.forward is no module's (its allocation counts under GPT).
        one_step = [(attn, ("GPT", "h.0", "h.0.attn")), (mlp, ("GPT", "h.0", "h.0.mlp")),
                    (attn, ("GPT", "h.1", "h.1.attn")), (mlp, ("GPT", "h.1", "h.1.mlp")),
                    (attn, ("GPT", "GPT.Attn")), (attn, ("GPT",)), (loss, ())]
        self.assertEqual(seen, one_step * 2)
        self.assertEqual(opened, [])  # the loss allocation closed every module
        stacks = json.loads(run.out.strip().splitlines()[-1])["stacks"]
        self.assertEqual(stacks["mismatches"], 0)


if __name__ == "__main__":
    unittest.main()
