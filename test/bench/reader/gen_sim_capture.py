#!/usr/bin/env python3
"""A large capture for the reader's benchmark, written by the real lens allocator (simulated device):

    gen_sim_capture.py LIB.so OUT.gpumem EVENTS

A steady training-like loop (batches of activations allocated, then freed, weights kept), every
allocation with its Python stack, until EVENTS block/segment events are recorded.
"""
import ctypes
import json
import random
import sys


def main():
    lib_path, out, events = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lib = ctypes.CDLL(lib_path)
    lib.gpumem_malloc.restype = ctypes.c_void_p
    lib.gpumem_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    lib.gpumem_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    lib.gpumem_configure.argtypes = [ctypes.c_char_p]
    lib.gpumem_last_error.restype = ctypes.c_char_p
    cfg = {"capture_path": out, "backend": "sim", "sim_capacity": 8 << 30, "segments": "fixed", "stacks": True,
           "sample_interval_ms": 0}
    if lib.gpumem_configure(json.dumps(cfg).encode()) != 0:
        sys.exit("gpumem_configure failed: %s" % lib.gpumem_last_error().decode())
    lib.gpumem_init(1)
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
