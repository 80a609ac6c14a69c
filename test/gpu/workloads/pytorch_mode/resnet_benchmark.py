"""Workload: a ResNet-18 training loop that turns on cudnn.benchmark, as torchvision's and timm's
training references do. Prints one RESULT line (median step ms, whether benchmark mode is still on)."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)
import json
import statistics
import sys
import time

import torch
import torchvision

torch.backends.cudnn.benchmark = True


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 60
    if "--history" in sys.argv:  # PyTorch's own history with Python stacks (the observer's cost yardstick)
        torch.cuda.init()
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
    model = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (64,), device="cuda")
    times = []
    for i in range(steps + 15):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= 15:
            times.append((time.perf_counter() - t0) * 1e3)
    print("RESULT " + json.dumps({"median_ms": statistics.median(times), "p10_ms": sorted(times)[len(times) // 10],
                                  "benchmark": torch.backends.cudnn.benchmark,
                                  "backend": torch.cuda.memory.get_allocator_backend(),
                                  "mode": os.environ.get("GPUMEM_ALLOCATOR")}))


if __name__ == "__main__":
    main()
