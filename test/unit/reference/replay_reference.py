#!/usr/bin/env python3
"""Plain-Python answers to the reader's time queries, for its tests (one JSON document on stdout).

    replay_reference.py series FILE T…          allocated/reserved after every event with time_us ≤ T
    replay_reference.py buckets FILE T0 T1 N    timeline min/max per bucket (rule below)
    replay_reference.py live_lines FILE T       bytes of trace allocations live at T, by innermost user line
    replay_reference.py spans FILE              number of allocation lifetimes (allocs + frees of older blocks)
    replay_reference.py ooms FILE               each oom with the allocator figures just before it
    replay_reference.py first_times FILE        the first time_us of every non-empty device trace
    replay_reference.py compare A B             are two pickles equal; the first differing path if not

Same rules as the issue: allocated +size at alloc, −size at free_requested, starting from the snapshot's
allocated bytes minus the trace's net; reserved likewise from Σ total_size with segment_alloc/map (+) and
segment_free/unmap (−). Bucket rule: bucket k covers [T0 + k·w, T0 + (k+1)·w) (the last one includes
T1); its min/max include the value carried in from before the bucket.
"""
import json
import math
import pickle
import sys

from snapshot_summary import innermost_user


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def series(snap, dev=0):
    segs = [s for s in snap.get("segments", []) if s.get("device", 0) == dev]
    trace = snap["device_traces"][dev]
    alloc = sum(b["size"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated")
    res = sum(s["total_size"] for s in segs)
    for e in trace:
        a = e["action"]
        if a == "alloc":
            alloc -= e["size"]
        elif a == "free_requested":
            alloc += e["size"]
        elif a in ("segment_alloc", "segment_map"):
            res -= e["size"]
        elif a in ("segment_free", "segment_unmap"):
            res += e["size"]
    start = (alloc, res)
    out = []
    for e in trace:
        a = e["action"]
        if a == "alloc":
            alloc += e["size"]
        elif a == "free_requested":
            alloc -= e["size"]
        elif a in ("segment_alloc", "segment_map"):
            res += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            res -= e["size"]
        out.append((e["time_us"], alloc, res))
    return start, out


def value_at(start, ser, t):
    cur = start
    for (tu, a, r) in ser:
        if tu > t:
            break
        cur = (a, r)
    return cur


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "compare":
        a, b = load(path), load(sys.argv[3])
        print(json.dumps({"equal": a == b, "first_difference": first_difference(a, b, "")}))
        return
    snap = load(path)
    if cmd == "series":
        start, ser = series(snap)
        res = []
        for t in sys.argv[3:]:
            a, r = value_at(start, ser, float(t))
            res.append({"allocated": a, "reserved": r})
        print(json.dumps(res))
    elif cmd == "buckets":
        t0, t1, n = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
        start, ser = series(snap)
        w = (t1 - t0) / n
        out = {"allocatedMin": [], "allocatedMax": [], "reservedMin": [], "reservedMax": []}
        for k in range(n):
            ta = t0 + k * w
            tb = t1 if k == n - 1 else t0 + (k + 1) * w
            lo = math.ceil(ta)
            carried = start
            inside = []
            for (tu, a, r) in ser:
                if tu < lo:
                    carried = (a, r)
                elif (tu <= tb if k == n - 1 else tu < math.ceil(tb)):
                    inside.append((a, r))
            vals = [carried] + inside
            out["allocatedMin"].append(min(v[0] for v in vals))
            out["allocatedMax"].append(max(v[0] for v in vals))
            out["reservedMin"].append(min(v[1] for v in vals))
            out["reservedMax"].append(max(v[1] for v in vals))
        print(json.dumps(out))
    elif cmd == "live_lines":
        t = float(sys.argv[3])
        live = {}
        for e in snap["device_traces"][0]:
            if e["time_us"] > t:
                break
            if e["action"] == "alloc":
                live[e["addr"]] = e
            elif e["action"] == "free_requested":
                live.pop(e["addr"], None)
        lines = {}
        for e in live.values():
            k = "%s:%d" % innermost_user(e.get("frames"))
            lines[k] = lines.get(k, 0) + e["size"]
        print(json.dumps(lines))
    elif cmd == "spans":
        live, n = set(), 0
        for e in snap["device_traces"][0]:
            if e["action"] == "alloc":
                live.add(e["addr"])
                n += 1
            elif e["action"] == "free_requested":
                if e["addr"] in live:
                    live.discard(e["addr"])
                else:
                    n += 1
        print(json.dumps({"spans": n}))
    elif cmd == "first_times":
        # The summary's time origin: the first trace entry of each device that has one.
        print(json.dumps([t[0]["time_us"] for t in snap.get("device_traces", []) if t]))
    elif cmd == "ooms":
        start, ser = series(snap)
        out, prev = [], start
        for i, e in enumerate(snap["device_traces"][0]):
            if e["action"] == "oom":
                a, r = prev
                out.append({"requestedBytes": e["size"], "deviceFreeBytes": e["device_free"], "allocatedBytes": a,
                            "reservedBytes": r, "verdict": "fragmentation" if r - a >= e["size"] else "shortage",
                            "timeUs": e["time_us"]})
            prev = ser[i][1:]
        print(json.dumps(out))


def first_difference(a, b, path):
    if type(a) is not type(b):
        return "%s: %s vs %s" % (path, type(a).__name__, type(b).__name__)
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return "%s.%s: only in %s" % (path, k, "first" if k in a else "second")
            d = first_difference(a[k], b[k], "%s.%s" % (path, k))
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return "%s: length %d vs %d" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    return None if a == b else "%s: %r vs %r" % (path, a, b)


if __name__ == "__main__":
    main()
