#!/usr/bin/env python3
"""Probe: what the leak keeper's graph walk (Note [Keeper graph walk] in
native/python/gpumem/_keeper_search.py) finds on real torch, on the leaky convnet of test/gpu/workloads/leak_history.py
(backward(retain_graph=True), then history.append(loss)). Not a test: it prints one JSON line that says whether real
torch shows what the Note assumes. Needs a GPU and torch; runs without `gpumem run` (plain PyTorch allocator).

    python3 test/gpu/probes/keeper_walk_probe.py [--steps 6] [--kept 4]

What it prints (PROBE {...}):
- node_types: each grad_fn class met and the `_saved_*` / saved_tensors names dir() lists for it, and which of
  them read as tensors (ReluBackward0: _saved_result; ConvolutionBackward0: _saved_input, _saved_weight; …);
- walk: the bytes, address count and completeness _held_bytes gives for the first `kept` losses, and the time;
  on torch 2.11 the Note expects 7 storages a kept step (≈ 980 MiB: 392 + 392 + 196 MiB of ReLU results), no
  missing ones, and extra_bytes == extra_expected;
- expected: the storages the Note says it must find per kept step (the three ReLU results, the mean's output, the
  log-softmax result, NLL's total weight, the loss) and which of them are missing from the walk's addresses;
  shared: x and y must NOT be in them (every step's graph saves them);
- side_effects: warnings raised during the walk, and torch.cuda.memory_allocated() before and after it (equal:
  unpacking saved tensors allocates nothing).
A faulthandler watchdog dumps every thread's stack and exits if the probe stalls.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "120")), exit=True)
import argparse
import json
import sys
import time
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
from gpumem import _keeper_search  # noqa: E402


class ConvNet(torch.nn.Module):  # the same net as test/gpu/workloads/leak_history.py --model convnet
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 64, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(64, 64, 3, padding=1)
        self.conv3 = torch.nn.Conv2d(64, 128, 3, padding=1, stride=2)
        self.head = torch.nn.Linear(128, 10)
        self.seen = []

    def forward(self, x):
        r1 = F.relu(self.conv1(x))
        r2 = F.relu(self.conv2(r1))
        r3 = F.relu(self.conv3(r2))
        m = r3.mean(dim=(2, 3))
        self.seen.append({"relu1": r1, "relu2": r2, "relu3": r3, "mean": m})
        return self.head(m)


def storage(t):
    return t.untyped_storage().data_ptr(), (t.untyped_storage().nbytes() + 511) // 512 * 512


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--kept", type=int, default=4)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = ConvNet().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 3, 224, 224, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
    history, expected = [], []
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        ls = F.log_softmax(logits, 1)
        loss = F.nll_loss(ls, y)
        history.append(loss)
        loss.backward(retain_graph=True)
        opt.step()
        seen = model.seen.pop()
        step = {k: storage(v) for k, v in seen.items()}
        step["log_softmax"] = storage(ls)
        step["loss"] = storage(loss)
        expected.append(step)
        del seen, logits, ls, loss
    torch.cuda.synchronize()

    # what each node type lists and reads (the walk's own view of the graph)
    node_types, stack, met = {}, [history[0].grad_fn], set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in met:
            continue
        met.add(id(n))
        names = [s for s in dir(n) if s.startswith("_saved_") or s == "saved_tensors"]
        tensors = []
        for s in names:
            try:
                v = getattr(n, s)
            except Exception as e:
                tensors.append("%s: %s" % (s, type(e).__name__))
                continue
            if isinstance(v, torch.Tensor) or (isinstance(v, (tuple, list)) and any(isinstance(t, torch.Tensor) for t in v)):
                tensors.append(s)
        node_types[type(n).__name__] = {"saved_names": names, "tensors": tensors,
                                        "has_variable": hasattr(n, "variable")}
        stack.extend(f for f, _ in (n.next_functions or ()))

    before = torch.cuda.memory_allocated()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        nbytes, addrs, complete, _all_listed, own = _keeper_search.held_bytes(history[:a.kept], _keeper_search.Budget(1000))
        seconds = time.perf_counter() - t0
    after = torch.cuda.memory_allocated()
    listed = set(addrs)
    missing = [{"step": i + 1, "what": k, "bytes": n} for i, step in enumerate(expected[:a.kept])
               for k, (p, n) in step.items() if p not in listed]
    want = sum(n for step in expected[:a.kept] for _, n in step.values())
    print("PROBE " + json.dumps({
        "torch": torch.__version__,
        "node_types": node_types,
        "walk": {"bytes": nbytes, "addrs": len(addrs), "own": len(own), "complete": complete, "ms": round(seconds * 1000, 3)},
        # the walk also counts NLL's total_weight (512 B a step, made inside nll_loss: its pointer is not known here)
        "expected": {"bytes": want, "per_step_storages": len(expected[0]), "missing": missing,
                     "extra_bytes": nbytes - want, "extra_expected": 512 * a.kept},
        "shared": {"x_listed": storage(x)[0] in listed, "y_listed": storage(y)[0] in listed},
        "side_effects": {"warnings": [str(w.message) for w in caught], "allocated_before": before,
                         "allocated_after": after},
    }, indent=1), flush=True)


if __name__ == "__main__":
    main()
