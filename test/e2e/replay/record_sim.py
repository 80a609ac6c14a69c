"""Record a small capture with the real allocator on its simulated device (no GPU), for replay tests.

    python3 record_sim.py LIBGPUMEM_ALLOCATOR.so OUT.gpumem

Calls gpumem_malloc/gpumem_free through ctypes from the functions below, so the capture has the real
writer's records and the real stack capture's frames (this file's lines): weights held to the end,
activations allocated and freed every step (left cached: what Empty Cache releases).
"""
import ctypes
import json
import os
import sys

MiB = 1 << 20


def main():
    so = ctypes.CDLL(sys.argv[1])
    so.gpumem_malloc.restype = ctypes.c_void_p
    so.gpumem_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    so.gpumem_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    so.gpumem_last_error.restype = ctypes.c_char_p
    cfg = {"capture_path": os.path.abspath(sys.argv[2]), "backend": "sim", "stacks": True, "sample_interval_ms": 0,
           "user_roots": [os.path.dirname(os.path.abspath(__file__))], "header": {"argv": ["record_sim.py"]}}
    if so.gpumem_configure(json.dumps(cfg).encode()) != 0:
        sys.exit(f"record_sim: gpumem_configure failed: {so.gpumem_last_error().decode()}")
    so.gpumem_init(1)

    def weights():
        return so.gpumem_malloc(64 * MiB, 0, None)

    def activations():
        return [so.gpumem_malloc(8 * MiB, 0, None) for _ in range(4)]

    held = weights()
    for _ in range(3):
        for a in activations():
            so.gpumem_free(a, 8 * MiB, 0, None)
    so.gpumem_shutdown(0)
    return held


if __name__ == "__main__":
    main()
