#!/usr/bin/env python3
"""A small state where trim on growth matters, made by the lens allocator itself (libgpumem_allocator.so on
its simulated device, through ctypes), then what the real allocator does next: the ground truth the what-if
engine's answers are checked against.

    trim_state.py LIB.so OUT.gpumem [--no-trim] [--then-malloc BYTES | --then-empty-cache]

Expandable segments (20 MiB pages in the large pool): 20 MiB, 20 MiB and 14 MiB tensors, then the first is
freed. Reserved sits at its peak (60 MiB) with a whole free page at the start and a 6 MiB free tail: a 25 MiB
request fits in the free bytes (26 MiB) but in no free block. With --then-*, the script continues on a second
run of the same steps (the capture of the first run ends at the state) and prints, as JSON, reserved memory
before and after the request or empty_cache().
"""
import argparse
import ctypes
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402

MiB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("capture")
    ap.add_argument("--no-trim", action="store_true")
    ap.add_argument("--then-malloc", type=int)
    ap.add_argument("--then-empty-cache", action="store_true")
    a = ap.parse_args()
    lib = common.load(a.lib)
    lib.gpumem_reserved.restype, lib.gpumem_reserved.argtypes = ctypes.c_uint64, [ctypes.c_int]
    cfg = dict(capture_path=a.capture, sim_capacity=1 << 30, segments="expandable", stacks=False)
    if a.no_trim:
        cfg["trim_on_growth"] = False
    common.configure(lib, **cfg)
    x1 = lib.gpumem_malloc(20 * MiB, 0, None)
    lib.gpumem_malloc(20 * MiB, 0, None)
    lib.gpumem_malloc(14 * MiB, 0, None)
    lib.gpumem_free(x1, 20 * MiB, 0, None)
    before = lib.gpumem_reserved(0)
    out = {"reserved_before": before}
    if a.then_malloc:
        p = lib.gpumem_malloc(a.then_malloc, 0, None)
        out.update(ok=bool(p), reserved_after=lib.gpumem_reserved(0))
    elif a.then_empty_cache:
        b, c = ctypes.c_uint64(), ctypes.c_uint64()
        if lib.gpumem_empty_cache(0, ctypes.byref(b), ctypes.byref(c), 0) != 0:
            sys.exit("empty_cache failed: %s" % lib.gpumem_last_error().decode())
        out.update(reserved_after=c.value)
    print(json.dumps(out))
    lib.gpumem_shutdown(0)


if __name__ == "__main__":
    main()
