#!/usr/bin/env python3
"""Probe (not a test): does PyTorch's allocated-at-step-end wander in a training loop that keeps
nothing, so that the leak keeper's "grown at 3 step ends in a row" rule (Note [Leak keeper search]) fires with no
leak, and do the requested bytes stay flat (Note [Keeper reads requested bytes])?

    python3 test/gpu/probes/keeper_streaks.py [--steps 80]      (≈ 40 s, natively: no gpumem)

Prints, per model, the step ends at which each reading would have armed a search, and the distinct values seen.
"""
import argparse
import faulthandler
import json
import os
import sys

faulthandler.dump_traceback_later(150, exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_allocator import step_fn  # noqa: E402


def arms(values, growing=3):
    """Step ends (1-based) at which a streak of `growing` rises is complete, the rule without its cool-down."""
    out, streak = [], 0
    for i in range(1, len(values)):
        streak = streak + 1 if values[i] > values[i - 1] else 0
        if streak >= growing:
            out.append(i + 1)
            streak = 0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--models", nargs="*", default=["resnet50", "gpt2"])
    args = ap.parse_args()
    import torch

    for model in args.models:
        torch.manual_seed(0)
        step = step_fn(model)
        allocated, requested = [], []
        for _ in range(args.steps):
            step()
            st = torch.cuda.memory_stats()
            allocated.append(st["allocated_bytes.all.current"])
            requested.append(st["requested_bytes.all.current"])
        torch.cuda.synchronize()
        print(json.dumps({"model": model, "steps": args.steps,
                          "arms_by_allocated": arms(allocated), "arms_by_requested": arms(requested),
                          "distinct_allocated": len(set(allocated[3:])), "distinct_requested": len(set(requested[3:])),
                          "allocated_spread_mib": round((max(allocated[3:]) - min(allocated[3:])) / 2**20, 2),
                          "requested_spread_mib": round((max(requested[3:]) - min(requested[3:])) / 2**20, 2)}),
              flush=True)
        del step
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
