#!/usr/bin/env python3
"""Reference implementation of the snapshot summary, in plain Python, for the reader's tests.

    python3 snapshot_summary.py FILE.pickle [--non-user-dir DIR]   → the `gpumem summary FILE --json` document

--non-user-dir: frames under DIR are not user code either (a capture header's bootstrap_dir: the lens
bootstrap's own frames, which the reader skips so attribution lands on the user's line).

It follows the issue's definitions literally and shares no code with the native reader, so the tests
compare two independent computations from the same file. Decisions the issue leaves open are the same as
the reader's and are marked "Decision".

Which frames are the user's is not re-decided here: Note [User frames] has one rule, and its Python
implementation (gpumem._where.is_user_file, the bootstrap's, tested against native/format/user_frames_cases.json
like the reader's C++ one) is what this script uses. It is still independent of the reader's code.
"""
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
from gpumem._where import is_user_file  # noqa: E402  (Note [User frames]: the one rule)

NON_USER_DIRS = []


def is_user(path):
    # An empty file name or a pseudo-file ('<string>') is no user frame; NON_USER_DIRS are the tool's own.
    return is_user_file(path, NON_USER_DIRS)


def innermost_user(frames):
    for f in frames or []:  # frames are innermost first
        if is_user(f.get("filename", "")):
            return (f.get("filename", ""), f.get("line", 0))
    return ("<no user frame>", 0)


def summarize(snap):
    if isinstance(snap, list):  # memory_snapshot(): segments only
        snap = {"segments": snap}
    segments = snap.get("segments", [])
    traces = snap.get("device_traces", [])
    devices = sorted({s.get("device", 0) for s in segments} | {i for i, t in enumerate(traces) if t})
    out = {"format": "pytorch-pickle", "devices": [], "top_lines": []}
    top = {}
    for dev in devices:
        segs = [s for s in segments if s.get("device", 0) == dev]
        blocks = [b for s in segs for b in s.get("blocks", [])]
        allocated = sum(b["size"] for b in blocks if b.get("state") == "active_allocated")
        trace = [e for e in (traces[dev] if dev < len(traces) else []) if isinstance(e, dict)]
        start = allocated - sum(e["size"] for e in trace if e.get("action") == "alloc") + sum(
            e["size"] for e in trace if e.get("action") == "free_requested")
        cur = peak = start
        peak_index = -1
        for i, e in enumerate(trace):
            a = e.get("action")
            if a == "alloc":
                cur += e["size"]
            elif a == "free_requested":
                cur -= e["size"]
            if cur > peak:  # Decision: the first event that reaches the maximum
                peak, peak_index = cur, i
        # Decision: when the start value is the peak, no event reached it: report the first event's time.
        peak_t = trace[peak_index].get("time_us", 0) if peak_index >= 0 else (trace[0].get("time_us", 0) if trace else 0)
        inactive = [b["size"] for b in blocks if b.get("state") == "inactive"]
        out["devices"].append({
            "device": dev,
            "reserved_bytes": sum(s.get("total_size", 0) for s in segs),
            "allocated_bytes": allocated,
            "segments": len(segs),
            "blocks": len(blocks),
            "allocated_blocks": sum(1 for b in blocks if b.get("state") == "active_allocated"),
            "largest_free_block_bytes": max(inactive) if inactive else 0,
            "events": len(trace),
            "peak_allocated_bytes": peak,
            "peak_at_time_us": peak_t,
        })
        # Allocations made in the trace and live at the peak: alloc at or before it, freed after it.
        live = {}
        for i, e in enumerate(trace[: peak_index + 1]):
            if e.get("action") == "alloc":
                live[e["addr"]] = e
            elif e.get("action") == "free_requested":
                live.pop(e["addr"], None)
        for e in live.values():
            key = innermost_user(e.get("frames"))
            top[key] = top.get(key, 0) + e["size"]
    rows = sorted(top.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1]))
    out["top_lines"] = [{"file": f, "line": l, "bytes_at_peak": b} for (f, l), b in rows]
    return out


if __name__ == "__main__":
    if "--non-user-dir" in sys.argv:
        NON_USER_DIRS.append(sys.argv[sys.argv.index("--non-user-dir") + 1])
    with open(sys.argv[1], "rb") as fh:
        print(json.dumps(summarize(pickle.load(fh))))
