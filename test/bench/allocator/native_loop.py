#!/usr/bin/env python3
"""CPU benchmark of one malloc+free pair through the lens allocator's C entry points, looped in C (no
Python between calls; ctypes releases the GIL around the loop, as PyTorch does around an op), on the
simulated device. One process per configuration; prints ns per pair. Not a test.

    make -C native/allocator native_thread && python3 test/bench/allocator/native_loop.py [CONFIG ...]

CONFIG: none (nothing recorded) · ring (trace ring, no stacks) · ring-stacks · events (capture file, no
stacks) · stacks (capture file with stacks: what `gpumem run` records)."""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "native", "recorder"))
import common  # noqa: E402

CONFIGS = {"none": {"trace_entries": 0}, "ring": {"stacks": False}, "ring-stacks": {"stacks": True},
           "events": {"file": True, "stacks": False}, "stacks": {"file": True, "stacks": True}}
HELPER = os.environ.get("GPUMEM_NATIVE_THREAD_SO") or os.path.join(ROOT, "native", "allocator", "build", "native_thread.so")


def child(name, n):
    lib = common.load()
    h = ctypes.CDLL(HELPER)
    h.alloc_free_loop.restype = ctypes.c_double
    h.alloc_free_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    cfg = dict(CONFIGS[name])
    if cfg.pop("file", False):
        cfg["capture_path"] = os.path.join(tempfile.mkdtemp(prefix="gpumem-bench-"), "c.gpumem")
    common.configure(lib, **cfg)
    m = ctypes.cast(lib.gpumem_malloc, ctypes.c_void_p)
    f = ctypes.cast(lib.gpumem_free, ctypes.c_void_p)
    ns = min(h.alloc_free_loop(m, f, n, 256) for _ in range(3))
    lib.gpumem_shutdown(0)
    return ns


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print("RESULT %f" % child(sys.argv[2], int(sys.argv[3])))
        return 0
    names = sys.argv[1:] or list(CONFIGS)
    out = {}
    for name in names:
        p = subprocess.run([sys.executable, __file__, "--child", name, "1000000"], capture_output=True, text=True)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        out[name] = round(float(line[0][7:]), 1) if line else "failed: " + p.stderr[-500:]
    print(json.dumps({"ns_per_malloc_free": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
