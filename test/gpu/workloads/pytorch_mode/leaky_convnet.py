"""Issue 25/27 workload: a convnet whose training loop keeps every step's loss with its graph
(backward(retain_graph=True), then history.append(loss)): each step's saved activations stay alive.
Prints RESULT {...} with the forward and keeper lines and torch's own peak.

    python3 leaky_convnet.py [--steps N]
"""
import argparse
import faulthandler
import inspect
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, padding=1)
        self.conv2 = nn.Conv2d(64, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 128, 3, padding=1, stride=2)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.conv3(x))
        return self.head(x.mean(dim=(2, 3)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = Net().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    history = []
    at_end = []
    forward_line = inspect.currentframe().f_lineno + 3
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)  # the forward line: its graph stays alive through history
        loss.backward(retain_graph=True)
        history.append(loss)
        opt.step()
        torch.cuda.synchronize()
        at_end.append(torch.cuda.memory_allocated())
    keeper_line = next(i for i, l in enumerate(inspect.getsource(inspect.getmodule(main)).splitlines(), 1)
                       if l.strip().startswith("history.append(loss)"))
    print("RESULT " + json.dumps({"forward_line": forward_line, "keeper_line": keeper_line, "allocated_at_step_end": at_end,
                                  "max_allocated": torch.cuda.max_memory_allocated(),
                                  "mode": os.environ.get("GPUMEM_ALLOCATOR")}), flush=True)


if __name__ == "__main__":
    main()
