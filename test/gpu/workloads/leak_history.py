"""The leak workload: a training loop that keeps its losses with their graphs (history.append(loss)).
Prints RESULT {...}: allocated memory at every step end (torch.cuda.memory_allocated(), the lens's own figure
under `gpumem run`) and the forward line's number, so the check can compare the tool's finding with it.
--model convnet: a convnet whose backward(retain_graph=True) keeps every step's saved activations
alive through history, the "leaky convnet" the PyTorch-allocator mode is compared with the lens on.

    python3 leak_history.py [--steps N] [--model mlp|convnet]
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import gc
import inspect
import json

import torch
import torch.nn.functional as F


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 64, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(64, 64, 3, padding=1)
        self.conv3 = torch.nn.Conv2d(64, 128, 3, padding=1, stride=2)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.conv3(x))
        return self.head(x.mean(dim=(2, 3)))


def setup(name):
    """(model, optimizer, x, y, loss function, backward keeps the graph)"""
    if name == "convnet":
        model = ConvNet().cuda()
        x, y = torch.randn(32, 3, 224, 224, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
        return model, torch.optim.SGD(model.parameters(), lr=1e-3), x, y, F.cross_entropy, True
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
    x, y = torch.randn(256, 1024, device="cuda"), torch.randn(256, 1024, device="cuda")
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4), x, y, F.mse_loss, False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--model", choices=("mlp", "convnet"), default="mlp")
    a = ap.parse_args()
    torch.manual_seed(0)
    model, opt, x, y, loss_fn, retain = setup(a.model)
    history = []
    at_end = []
    forward_line = inspect.currentframe().f_lineno + 3
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)  # the forward line: its loss is kept below, graph and all
        history.append(loss)
        loss.backward(retain_graph=retain)
        opt.step()
        torch.cuda.synchronize()
        at_end.append(torch.cuda.memory_allocated())
    # the line the bootstrap's leak keeper must name (Note [Leak keeper search]): where history is appended to
    keeper_line = next(i for i, l in enumerate(inspect.getsource(inspect.getmodule(main)).splitlines(), 1)
                       if l.strip().startswith("history.append(loss)"))
    print("RESULT " + json.dumps({"forward_line": forward_line, "keeper_line": keeper_line, "allocated_at_step_end": at_end,
                                  "steps": a.steps, "kept": len(history), "model": a.model,
                                  "max_allocated": torch.cuda.max_memory_allocated(),
                                  "mode": os.environ.get("GPUMEM_ALLOCATOR")}), flush=True)
    try:  # under `gpumem run`: what the keeper search's passes took (arm, confirm), in ms
        from gpumem import _keeper
    except ImportError:
        return
    w = _keeper._WATCH
    if w is not None:
        print("KEEPER " + json.dumps({"passes_ms": [round(s * 1000, 3) for s in w.seconds], "found": len(w.results),
                                      "gc_objects": len(gc.get_objects())}), flush=True)


if __name__ == "__main__":
    main()
