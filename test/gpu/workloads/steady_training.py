#!/usr/bin/env python3
"""A training loop that keeps nothing from step to step (GPT-2 small 16×512 with AdamW, or ResNet-50 b64 with SGD,
bf16 autocast: test/gpu/bench_allocator.py's step), for test/gpu/no_false_leaks_check.py.

    python3 steady_training.py [--model gpt2|resnet50] [--steps N]

Prints RESULT {...}: per step end torch.cuda.memory_allocated() and the requested bytes, and the leak keeper's
searches when run under `gpumem run` (Note [Leak keeper search]).
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)
import argparse
import json
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("gpt2", "resnet50"), default="gpt2")
    ap.add_argument("--steps", type=int, default=60)
    a = ap.parse_args()
    import torch
    from bench_allocator import step_fn

    torch.manual_seed(0)
    step = step_fn(a.model)
    allocated, requested = [], []
    for _ in range(a.steps):
        step()
        st = torch.cuda.memory_stats()
        allocated.append(st.get("allocated_bytes.all.current"))
        requested.append(st.get("requested_bytes.all.current"))
    torch.cuda.synchronize()
    keeper = sys.modules.get("gpumem._keeper")
    w = getattr(keeper, "_WATCH", None) if keeper else None
    print("RESULT " + json.dumps({"allocated_at_step_end": allocated, "requested_at_step_end": requested,
                                  "keeper_searches": None if w is None else w.searches}), flush=True)


if __name__ == "__main__":
    main()
