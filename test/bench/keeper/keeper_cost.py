#!/usr/bin/env python3
"""What the leak keeper costs (Note [Leak keeper search] in native/python/gpumem/_keeper.py), off the GPU:

    python3 test/bench/keeper/keeper_cost.py [--objects N] [--kept K]

- per step end without a search: KeeperWatch.step_end() on a flat allocated figure (what every step pays);
- one search on a heap of N extra gc-tracked objects (a large program: modules, dicts, lists) with K tensors with
  graphs kept in a list: the arm pass (gc.get_objects() scan) and the confirm pass (gc.get_referrers, naming, the
  graph walk), each bounded by GPUMEM_KEEPER_MS.
Tensors are the stand-in torch's (test/python/fake_torch) when PyTorch is not installed: the scan's cost is one
isinstance per gc object either way. Prints one JSON line."""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "native", "python"))


def stand_in_torch():
    import types

    torch = types.ModuleType("torch")

    class Tensor:
        def __init__(self, n, node=None):
            self.n, self.grad_fn, self.requires_grad = n, node, False

        def get_device(self):
            return 0

        def data_ptr(self):
            return id(self)

        def numel(self):
            return self.n

        def element_size(self):
            return 1

    class Node:
        def __init__(self):
            self.next_functions = ()

    torch.Tensor, torch.Node = Tensor, Node
    sys.modules["torch"] = torch
    return torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=1_000_000)
    ap.add_argument("--kept", type=int, default=100, help="tensors kept before the search starts")
    ap.add_argument("--dicts", action="store_true", help="keep {'loss': t} per step (the search climbs to the list)")
    a = ap.parse_args()
    torch = stand_in_torch()
    from gpumem._keeper import KeeperWatch

    notes = []
    w = KeeperWatch(notes.append, cooldown=10**9)
    n = 200_000
    t0 = time.perf_counter()
    for _ in range(n):
        w.step_end(1000)  # flat: no growth, no search
    per_step_us = (time.perf_counter() - t0) / n * 1e6

    heap = [{"k": i, "v": [i]} for i in range(a.objects // 3)]  # ≈ N tracked objects (dicts and lists)
    history = []
    w = KeeperWatch(notes.append)
    allocated = 1 << 30
    for _ in range(a.kept):  # kept before the watch sees growth
        t = torch.Tensor(512, torch.Node())
        history.append({"loss": t} if a.dicts else t)
    for step in range(8):
        loss = torch.Tensor(512, torch.Node())
        history.append({"loss": loss} if a.dicts else loss)
        allocated += 512
        w.step_end(allocated)
    import gc

    result = {"per_step_end_us": round(per_step_us, 3), "gc_objects": len(gc.get_objects()),
              "passes_ms": [round(s * 1000, 2) for s in w.seconds], "found": [(r["container"], r["tensors"]) for r in w.results],
              "budget_ms": w.budget_ms, "python": sys.version.split()[0]}
    del heap
    print(json.dumps(result))


if __name__ == "__main__":
    main()
