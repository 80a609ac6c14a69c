"""Benchmark (not a test): the optimizer walk's cost per step (Note [Batched tags] in native/python/gpumem/_tags.py),
the batched walk against the one-call-per-tag walk it replaced, interleaved rounds in one run, through the real .so
(sim backend, capture on). Each step gives every parameter a new gradient object, as zero_grad(set_to_none=True)
and backward() do; the time of making them is measured alone and subtracted.
    python3 test/bench/allocator/tag_walk.py [--params 161] [--steps 1500] [--rounds 5]
Prints µs per step of each walk, round by round, the medians and their ratio."""
import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
import weakref

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "native", "python"))
from gpumem._tags import TAG_GRADIENT, TAG_OPTIMIZER_STATE, TAG_PARAMETER, TagWalk  # noqa: E402


class Tensor:
    """What the walk reads of a torch tensor."""
    __slots__ = ("ptr", "n", "grad", "__weakref__")

    def __init__(self, ptr, n):
        self.ptr, self.n, self.grad = ptr, n, None

    def get_device(self):
        return 0

    def data_ptr(self):
        return self.ptr

    def numel(self):
        return self.n

    def element_size(self):
        return 4


class Optimizer:
    def __init__(self, n):
        self.param_groups = [{"params": [Tensor(0x20000000 + i * 4096, 1000) for i in range(n)]}]
        self.state = {}


class OneCallPerTag:
    """The walk before Note [Batched tags]: a ctypes call per tag, a weak reference with a callback per tensor."""

    def __init__(self, tag):
        self._tag, self._seen, self._walks = tag, {}, {}

    def walk(self, optimizer):
        n = self._walks.get(id(optimizer), 0)
        self._walks[id(optimizer)] = n + 1
        if n >= 3 and n % 16:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._see(p.grad, TAG_GRADIENT)
            return
        for group in optimizer.param_groups:
            for p in group["params"]:
                self._see(p, TAG_PARAMETER)
                if p.grad is not None:
                    self._see(p.grad, TAG_GRADIENT)
        for state in optimizer.state.values():
            for v in state.values():
                self._see(v, TAG_OPTIMIZER_STATE)

    def _see(self, t, category):
        device = t.get_device()
        key, ptr = id(t), t.data_ptr()
        entry = self._seen.get(key)
        if entry is not None and entry[1] == ptr and entry[0]() is t:
            return
        self._tag(ptr, t.numel() * t.element_size(), category, device)
        self._seen[key] = (weakref.ref(t, lambda _, k=key, seen=self._seen: seen.pop(k, None)), ptr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=int, default=161)  # ResNet-50's
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--so", default=os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"))
    args = ap.parse_args()
    lib = ctypes.CDLL(args.so)
    lib.gpumem_configure.argtypes = [ctypes.c_char_p]
    lib.gpumem_tag.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_int]
    lib.gpumem_tags.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    folder = tempfile.mkdtemp(prefix="gpumem-tag-walk-")
    cfg = {"backend": "sim", "sim_capacity": 1 << 30, "capture_path": os.path.join(folder, "c.gpumem"),
           "sample_interval_ms": 0}
    assert lib.gpumem_configure(json.dumps(cfg).encode()) == 0, lib.gpumem_last_error()
    lib.gpumem_init(1)
    fn, many = lib.gpumem_tag, lib.gpumem_tags
    walks = {
        "one call per tag": OneCallPerTag(lambda a, n, c, d: fn(a, n, c, None, d)).walk,
        "batched": TagWalk(lambda items: many((ctypes.c_uint64 * len(items))(*items), len(items) // 4)).walk,
    }
    opt = Optimizer(args.params)
    params = opt.param_groups[0]["params"]

    def new_grads():
        for p in params:
            p.grad = None
        for p in params:
            p.grad = Tensor(0x10000000 + (p.ptr & 0xFFFFFF), 1000)

    def timed(walk):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            new_grads()
            if walk:
                walk(opt)
        return time.perf_counter() - t0

    for walk in walks.values():  # warm: the full walks, the first tags
        timed(walk)
    per = {k: [] for k in walks}
    for r in range(args.rounds):
        for k in (list(walks) if r % 2 == 0 else list(reversed(walks))):
            base = timed(None)
            per[k].append((timed(walks[k]) - base) / args.steps * 1e6)
    for k, v in per.items():
        print("%-18s µs/step %s  median %.1f" % (k, " ".join("%.0f" % x for x in v), statistics.median(v)))
    print("ratio batched / one call per tag: %.2f" % (statistics.median(per["batched"]) / statistics.median(per["one call per tag"])))
    lib.gpumem_shutdown(0)


if __name__ == "__main__":
    main()
