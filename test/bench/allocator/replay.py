#!/usr/bin/env python3
"""Replays a capture's allocations (alloc / free completed, in file order) through the lens allocator on
its simulated device, once per segment strategy, and prints peak reserved / peak allocated and the
driver calls each strategy needed. A real workload's memory behaviour, recorded once on a GPU, can then
be studied on a laptop: the allocator's placement code is the same, only the device is simulated.

    make -C native/allocator && python3 test/bench/allocator/replay.py CAPTURE [--device 0]

Strategies: fixed · expandable · expandable+trim (Note [Trim on growth], with Note [Futile trims]).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "native", "recorder"))
import capture as cap  # noqa: E402
import common  # noqa: E402

STRATEGIES = {"fixed": {"segments": "fixed", "trim_on_growth": False},
              "expandable": {"segments": "expandable", "trim_on_growth": False},
              "expandable+trim": {"segments": "expandable", "trim_on_growth": True}}


def ops_of(path, device):
    """[(kind, key, requested, stream)] in file order; key = the recorded address."""
    c = cap.Capture(path)
    ops = []
    for name, dev, _flags, payload, _off in c.records:
        if dev != device or name not in ("alloc", "free_completed"):
            continue
        _t, addr, _size, req, stream, _stack, _thread = cap.BLOCK.unpack_from(payload)
        ops.append(("a" if name == "alloc" else "f", addr, req, stream))
    return ops, c.header


def child(path, device, strategy, capacity):
    lib = common.load()
    lib.gpumem_stats_json.restype = ctypes.c_size_t
    lib.gpumem_stats_json.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    common.configure(lib, sim_capacity=capacity, trace_entries=0, stacks=False, **STRATEGIES[strategy])
    ops, _ = ops_of(path, device)
    live = {}
    buf = ctypes.create_string_buffer(1 << 16)

    def stats():
        lib.gpumem_stats_json(0, buf, len(buf))
        return json.loads(buf.value.decode())

    # Driver calls (maps + unmaps, or cudaMalloc + cudaFree) in each tenth of the replay: a strategy
    # that keeps remapping in a workload's steady state shows calls in every tenth, not just the first.
    tenths, mark, last = [], max(1, len(ops) // 10), 0
    for i, (kind, addr, req, stream) in enumerate(ops):
        if i and i % mark == 0:
            st = stats()
            calls = st["num_device_alloc"] + st["num_device_free"]
            tenths.append(calls - last)
            last = calls
        if kind == "a":
            live[addr] = lib.gpumem_malloc(req, 0, ctypes.c_void_p(stream or None))
        elif addr in live:
            lib.gpumem_free(live.pop(addr), req, 0, None)
    s = stats()
    return {"driver_calls_by_tenth": tenths,"peak_reserved": s["reserved_bytes.all.peak"], "peak_allocated": s["allocated_bytes.all.peak"],
            "ratio": round(s["reserved_bytes.all.peak"] / max(1, s["allocated_bytes.all.peak"]), 4),
            "driver_allocs": s["num_device_alloc"], "driver_frees": s["num_device_free"], "allocations": len(ops) // 2}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    ap.add_argument("--capacity", type=int, default=144 << 30, help="simulated device bytes (default: an H200)")
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.capture, args.device, args.child, args.capacity)))
        return 0
    out = {}
    for st in args.strategies:
        p = subprocess.run([sys.executable, __file__, args.capture, "--device", str(args.device), "--capacity",
                            str(args.capacity), "--child", st], capture_output=True, text=True)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        out[st] = json.loads(line[0][7:]) if line else {"error": p.stderr[-800:]}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
