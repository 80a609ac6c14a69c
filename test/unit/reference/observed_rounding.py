#!/usr/bin/env python3
"""A capture of PyTorch's allocator observed under roundup_power2_divisions and max_split_size_mb (the settings as
PyTorch's _snapshot() reports them), for test/unit/observer.test.mjs: the blocks the observer records must be
PyTorch's (Note [PyTorch's block sizes] in native/allocator/src/observer.cc).

    observed_rounding.py LIB CAPTURE

Independently of the observer, this script sizes each block as CUDACachingAllocator.cpp does (round_size with
roundup_power2_next_division; should_split: a large block is split only for a request below max_split_size that
leaves more than 1 MiB) and prints JSON: each request with the block PyTorch would give it.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "native", "python"))

MiB = 1 << 20
SEGMENT = 0x7F0000000000
USER = "/home/user/project/train.py"
ALLOC, SEGMENT_ALLOC = 0, 3
SETTINGS = {"max_split_size": 64 * MiB, "expandable_segments": False,
            "roundup_power2_divisions": {str(1 << i): 4 for i in range(16)}}


def pytorch_round(size, divisions=4):
    if size < 512:
        return 512
    if size > 512 * divisions and size & (size - 1):
        floor = 1 << (size.bit_length() - 1)
        step = floor >> (divisions.bit_length() - 1)
        base = size & ~(step - 1)
        return size if base == size else base + step
    return (size + 511) // 512 * 512


def main():
    from gpumem import _native, _observer_api

    lib, capture = sys.argv[1:3]
    native = _native.Allocator(lib)
    native.configure({"capture_path": capture, "sample_interval_ms": 0, "user_roots": ["/home/user/project"],
                      "header": {"allocator_mode": "pytorch", "allocator_mode_reason": "test", "torch_version": "2.11.0"}})
    obs = _observer_api.Observer(native)
    obs.start(None, None)

    class Memory:  # what Observer.rounding reads from torch
        @staticmethod
        def _snapshot():
            return {"allocator_settings": SETTINGS}

    class Cuda:
        memory = Memory

    class Torch:
        cuda = Cuda

    assert obs.rounding(Torch)
    obs.device(0, "NVIDIA H200", 140 << 30, "")
    stack = obs.stack_of_frames([[USER, "train", 10], [USER, "<module>", 60]])
    rows = []
    # one 200 MiB segment: a 1.3 MiB request (rounded up to the next quarter of its power-of-two interval), then a
    # 9.1 MiB one, split off as they come; then a 100 MiB segment whose 70 MiB request is at or above max_split_size:
    # never split, the whole segment is its block
    obs.event(0, SEGMENT_ALLOC, SEGMENT, 200 * MiB, 0, stack)
    at = SEGMENT
    for request in (1300 * 1024, 9100 * 1024 + 7):
        obs.event(0, ALLOC, at, request, 0, stack)
        rows.append({"request": request, "block": pytorch_round(request)})
        at += pytorch_round(request)
    big = SEGMENT + (1 << 30)
    obs.event(0, SEGMENT_ALLOC, big, 100 * MiB, 0, stack)
    obs.event(0, ALLOC, big, 70 * MiB, 0, stack)
    rows.append({"request": 70 * MiB, "block": 100 * MiB})
    native.shutdown(0)
    from gpumem import _format as F

    with open(capture, "rb") as f:
        data = f.read()
    _, _, _, off = F.read_header(data)
    recorded = [F.BlockEvent.unpack_dict(p) for _, t, _, _, p in F.records(data, off) if t == F.REC_ALLOC]
    print(json.dumps({"rows": rows, "recorded": [{"request": r["requested"], "block": r["size"]} for r in recorded]}))


if __name__ == "__main__":
    main()
