#!/usr/bin/env python3
"""A large capture for the reader's benchmark, written by the real lens allocator (simulated device):

    gen_sim_capture.py LIB.so OUT.gpumem EVENTS

A steady training-like loop (batches of activations allocated, then freed, weights kept), every
allocation with its Python stack, until EVENTS block/segment events are recorded.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402


def main():
    lib_path, out, events = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lib = common.load(lib_path)
    common.configure(lib, capture_path=out, sim_capacity=8 << 30, segments="fixed", stacks=True)
    malloc, free = lib.gpumem_malloc, lib.gpumem_free
    rng = random.Random(0)
    sizes = [512, 4096, 65536, 1 << 20, 3 << 20, 12 << 20]
    weights = [(malloc(s, 0, None), s) for s in sizes * 20]
    done = 0
    while done < events:
        batch = [rng.choice(sizes) for _ in range(64)]
        live = [(malloc(s, 0, None), s) for s in batch]  # forward
        for p, s in reversed(live):                      # backward frees activations
            free(p, s, 0, None)
        done += 64 * 3  # alloc + free_requested + free_completed
    for p, s in weights:
        free(p, s, 0, None)
    lib.gpumem_shutdown(0)


if __name__ == "__main__":
    main()
