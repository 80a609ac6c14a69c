#!/usr/bin/env python3
"""A workload whose capture writer hits a file size limit (RLIMIT_FSIZE), written by the real lens allocator
(libgpumem_allocator.so, simulated device): the capture ends with the writer's REC_END reason 1, and the
workload's stderr carries the one "gpumem: capture stopped at …" line. For the reader's tests.

    writer_failure_workload.py LIB.so OUT.gpumem LIMIT_BYTES
"""
import os
import random
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402  (the C API's ctypes signatures, one copy)


def churn(lib, rng, n):
    live = []
    for _ in range(n):
        if live and rng.random() < 0.5:
            lib.gpumem_free(live.pop(rng.randrange(len(live))), 0, 0, None)
        else:
            live.append(lib.gpumem_malloc(rng.choice([512, 4096, 700 << 10, 3 << 20]), 0, None))
    for p in live:
        lib.gpumem_free(p, 0, 0, None)


def main():
    lib_path, capture, limit = sys.argv[1:4]
    lib = common.load(lib_path)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), resource.RLIM_INFINITY))
    common.configure(lib, capture_path=capture)
    rng = random.Random(7)
    churn(lib, rng, 4000)
    time.sleep(0.3)  # the writer flushes every 50 ms: it has met the limit by now
    churn(lib, rng, 1000)  # the workload goes on
    print("workload continued")
    lib.gpumem_shutdown(0)


if __name__ == "__main__":
    main()
