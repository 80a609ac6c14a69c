#!/usr/bin/env python3
"""A capture whose peak allocation is freed within the same microsecond (Note [Moment events] in
native/addon/src/categories.cpp), written through the observer's C API with explicit times, for
test/unit/moment-events.test.mjs.

    same_microsecond.py LIB CAPTURE

One 20 MiB segment; an 8 MiB block at 1 µs; a 4 MiB block at 2 µs (the peak, 12 MiB), its free requested and completed
100 and 200 ns later, in the same µs; the 8 MiB block freed at 5 µs. Prints {"capture": CAPTURE}.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "native", "python"))

MiB = 1 << 20


def main(lib, capture):
    from gpumem import _native, _observer_api

    a = _observer_api.ACTIONS
    native = _native.Allocator(lib)
    native.configure({"capture_path": capture, "sample_interval_ms": 0,
                      "header": {"allocator_mode": "pytorch", "allocator_mode_reason": "a test's events"}})
    obs = _observer_api.Observer(native)
    obs.start(None, None)
    obs.device(0, "test device", 0, "")
    base, t0 = 0x7F0000000000, 1_000_000_000_000  # ns
    obs.event(0, a["segment_alloc"], base, 20 * MiB, 0, 0, t0)
    obs.event(0, a["alloc"], base, 8 * MiB, 0, 0, t0 + 1000)
    obs.event(0, a["alloc"], base + 8 * MiB, 4 * MiB, 0, 0, t0 + 2000)
    obs.event(0, a["free_requested"], base + 8 * MiB, 4 * MiB, 0, 0, t0 + 2100)
    obs.event(0, a["free_completed"], base + 8 * MiB, 4 * MiB, 0, 0, t0 + 2200)
    obs.event(0, a["free_requested"], base, 8 * MiB, 0, 0, t0 + 5000)
    obs.event(0, a["free_completed"], base, 8 * MiB, 0, 0, t0 + 5100)
    native.shutdown(0)
    print(json.dumps({"capture": capture}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
