#!/usr/bin/env python3
"""Drives the lens allocator (libgpumem_allocator.so, simulated device) through ctypes, so the reader's
tests get captures written by the real writer, plus the allocator's own PyTorch-schema pickle of the
same moment (gpumem_snapshot) as the independent reference.

    sim_workload.py LIB.so OUT.gpumem OUT.pickle fixed|expandable STEPS [SEED]

Random mallocs and frees (sizes across the small and large pools), then empty_cache and a snapshot.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402  (the C API's ctypes signatures, one copy)


def main():
    lib_path, capture, pickle_path, segments, steps = sys.argv[1:6]
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    lib = common.load(lib_path)
    common.configure(lib, capture_path=capture, sim_capacity=1 << 30, segments=segments, stacks=True)
    rng = random.Random(seed)
    live = []
    for _ in range(int(steps)):
        if live and (rng.random() < 0.5 or len(live) > 40):
            p, s = live.pop(rng.randrange(len(live)))
            lib.gpumem_free(p, s, 0, None)
        else:
            s = rng.choice([100, 4096, 70000, 1 << 20, 3 << 20, 25 << 20])
            live.append((lib.gpumem_malloc(s, 0, None), s))
    lib.gpumem_reset()  # torch.cuda.empty_cache()
    if lib.gpumem_snapshot(pickle_path.encode()) < 0:
        sys.exit("gpumem_snapshot failed: %s" % lib.gpumem_last_error().decode())
    lib.gpumem_shutdown(0)


if __name__ == "__main__":
    main()
