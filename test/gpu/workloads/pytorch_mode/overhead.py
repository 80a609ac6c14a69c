"""Workload: median step times of GPT-2 small and ResNet-50 (test/gpu/bench_allocator.py's
steps) with optional PyTorch history (--history: _record_memory_history(stacks="python")). The
PyTorch-allocator mode is this same script under `gpumem run --allocator pytorch`. One RESULT line."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)
import json
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import torch  # noqa: E402
from bench_allocator import step_fn  # noqa: E402


def main():
    history = "--history" in sys.argv
    torch.cuda.init()
    if history:
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
    out = {}
    for name in ("gpt2", "resnet50"):
        torch.manual_seed(0)
        step = step_fn(name)
        for _ in range(10):
            step()
        torch.cuda.synchronize()
        ts = []
        for _ in range(30):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) * 1e3)
        out[name] = statistics.median(ts)
        del step
        torch.cuda.empty_cache()
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
