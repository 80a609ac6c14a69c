#!/usr/bin/env python3
"""What reading the requested bytes costs at every step end under PyTorch's allocator (live_bytes in
native/python/gpumem/_keeper.py), off the GPU: the nested stats dict read by key, against torch.cuda.memory_stats(),
which flattens it in Python first (PyTorch 2.11's algorithm, repeated below). Both start from the same nested dict,
of the shape torch._C._cuda_memoryStats returns (13 figures × all/small_pool/large_pool × current/peak/allocated/
freed, and the counters), so the C++ side, which both pay, is left out. Interleaved rounds in one run:

    python3 test/bench/keeper/live_bytes_read.py [--reads 20000] [--rounds 5]"""
import argparse
import collections
import statistics
import time

FIGURES = ["allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes", "active_bytes",
           "inactive_split_bytes", "requested_bytes", "oversize_allocations", "oversize_segments"]
COUNTERS = ["num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free",
            "max_split_size"]


def nested_stats():
    out = {f: {p: {"current": 3 << 20, "peak": 5 << 20, "allocated": 9 << 20, "freed": 6 << 20}
               for p in ("all", "small_pool", "large_pool")} for f in FIGURES}
    out.update({c: 0 for c in COUNTERS})
    return out


def memory_stats(nested):
    """torch.cuda.memory_stats(): the nested dict flattened to "a.b.c" keys, sorted, as an OrderedDict."""
    result = []

    def _recurse_add_to_result(prefix, obj):
        if isinstance(obj, dict):
            if len(prefix) > 0:
                prefix += "."
            for k, v in obj.items():
                _recurse_add_to_result(prefix + k, v)
        else:
            result.append((prefix, obj))
    _recurse_add_to_result("", nested)
    result.sort()
    return collections.OrderedDict(result)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    stats = nested_stats()
    reads = {
        "memory_stats()": lambda: memory_stats(stats).get("requested_bytes.all.current"),
        "nested dict": lambda: ((stats.get("requested_bytes") or {}).get("all") or {}).get("current"),
    }
    assert len({f() for f in reads.values()}) == 1
    per = {k: [] for k in reads}
    for r in range(args.rounds):
        for k in (list(reads) if r % 2 == 0 else list(reversed(reads))):
            f = reads[k]
            t0 = time.perf_counter()
            for _ in range(args.reads):
                f()
            per[k].append((time.perf_counter() - t0) / args.reads * 1e6)
    for k, v in per.items():
        print("%-15s µs a read %s  median %.2f" % (k, " ".join("%.2f" % x for x in v), statistics.median(v)))
    print("saved a step end: %.1f µs" % (statistics.median(per["memory_stats()"]) - statistics.median(per["nested dict"])))


if __name__ == "__main__":
    main()
