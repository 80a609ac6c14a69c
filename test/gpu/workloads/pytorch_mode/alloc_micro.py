"""Probe workload (test/gpu/probes/observer_cost.py, part `micro`): the CPU cost of one CUDA
allocation + free (µs per pair, median of blocks) as this process is configured, and how many allocations
one cudnn.benchmark ResNet-18 step makes. Under `gpumem run --allocator pytorch` it also A/B-tests, in this
same process, the observer's own switches: PyTorch's trace ring kept empty through skip_actions, and the
context recorder off. One RESULT line."""
import faulthandler
import json
import os
import statistics
import sys
import time

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)

import torch  # noqa: E402

ALL_ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
               "segment_unmap", "snapshot", "oom"]


def pair_us(blocks=7, n=5000):
    out = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(n):
            x = torch.empty(1024, device="cuda")
            del x
        out.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(out)


def allocs_per_step():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from bench_allocator import step_fn

    step = step_fn("resnet18-benchmark")
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
    step()
    torch.cuda.synchronize()
    return torch.cuda.memory_stats().get("allocation.all.allocated", 0) - before


def main():
    torch.cuda.init()
    for _ in range(2000):
        torch.empty(1024, device="cuda")
    out = {"pair_us": pair_us()}
    try:
        from gpumem import _observer_history
        from gpumem._observer_live import LIVE
    except ImportError:
        LIVE = None
    tracker = LIVE.tracker if LIVE else None
    if tracker is not None:
        info0 = LIVE.obs.info()["peak_allocated"]
        tracker.record(True, 0, 1, 1, ALL_ACTIONS)
        out["pair_us_ring_skipped"] = pair_us()
        x = torch.empty(64 << 20, device="cuda")
        out["tracker_sees_with_ring_skipped"] = float(LIVE.obs.info()["peak_allocated"] > info0)
        del x
        out["ring_entries_with_skip"] = float(len(_observer_history.raw_snapshot(torch)["device_traces"][0]))
        tracker.record(False, 0, 1, 0, [])
        out["pair_us_no_recorder"] = pair_us()
        tracker.record(True, 0, 1, 1, [])
        out["pair_us_again"] = pair_us()
    out["allocs_per_step"] = float(allocs_per_step())
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
