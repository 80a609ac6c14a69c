#!/usr/bin/env python3
"""The PyTorch-allocator mode's conversion, driven on a real snapshot pickle, and the same
pickle's own answer computed independently, for test/unit/observer.test.mjs.

    observe_pickle.py convert LIB PICKLE CAPTURE   feed device_traces through gpumem_observe_event (the
                                                   conversion the live trace tracker uses) into CAPTURE
    observe_pickle.py expect PICKLE                 from the trace alone: the allocated peak and, at the
                                                   first moment it is reached, bytes per innermost user line

Rules of `expect` (the issue's): allocated +block at alloc, −block at free_requested of a block the trace
handed out (blocks from before the trace started are not counted either way); user frames are those
under the sources' folder (/home/user/project), innermost first as PyTorch lists them. A block is what
PyTorch's allocated_bytes count, not the trace's requested size (Note [Observed block sizes] in
native/allocator/src/observer.cc), worked out here on its own from the pickle's segments: the request
rounded to 512 B, or (large pool) the whole free run up to the next block in use or the segment's end when
splitting would leave 1 MiB or less. `convert` also returns the blocks the capture leaves live, to be compared
with the pickle's own final blocks (PyTorch's sizes, the independent answer).
"""
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "native", "python"))
USER_ROOT = "/home/user/project"


def innermost_user(frames):
    for f in frames or []:
        if f.get("filename", "").startswith(USER_ROOT + "/"):
            return "%s:%d" % (f["filename"], f.get("line", 0))
    return None


def survivors(snap):
    """Blocks in use at the end that the trace never handed out nor freed: there before it started."""
    touched = {e["addr"] for e in snap["device_traces"][0] if e["action"] in ("alloc", "free_requested", "free_completed")}
    return {b["address"]: b["size"] for s in snap["segments"] for b in s["blocks"]
            if b["state"] != "inactive" and b["address"] not in touched}


def fixed_segments(snap):
    """Fixed segments over the trace: those at the end (less the ones segment_alloc made), plus segment_alloc's."""
    segs = {s["address"]: s["total_size"] for s in snap["segments"] if not s.get("is_expandable")}
    for e in snap["device_traces"][0]:
        if e["action"] in ("segment_alloc", "segment_free"):
            segs.pop(e["addr"], None)
    return segs


def block_of(segs, used, addr, requested):
    rounded = 512 if requested < 512 else (requested + 511) // 512 * 512
    if rounded <= 1 << 20:
        return rounded
    seg = next(((a, n) for a, n in segs.items() if a <= addr < a + n), None)
    if seg is None:
        return rounded
    end = min([seg[0] + seg[1]] + [a for a in used if addr < a < seg[0] + seg[1]])
    free = end - addr
    return rounded if free < rounded or free - rounded > 1 << 20 else free


def expect(snap):
    live, cur, peak, at_peak = {}, 0, 0, {}
    segs = fixed_segments(snap)
    used = dict(survivors(snap))  # address → block, every block in use (pending frees too)
    for e in snap["device_traces"][0]:
        a = e["action"]
        if a == "segment_alloc":
            segs[e["addr"]] = e["size"]
            continue
        if a == "segment_free":
            segs.pop(e["addr"], None)
            continue
        if a == "free_completed":
            used.pop(e["addr"], None)
            continue
        if a == "alloc":
            used.pop(e["addr"], None)
            e = dict(e, size=block_of(segs, used, e["addr"], e["size"]))
            used[e["addr"]] = e["size"]
            live[e["addr"]] = e
            cur += e["size"]
        elif a == "free_requested" and e["addr"] in live:
            cur -= live.pop(e["addr"])["size"]
        else:
            continue
        if cur > peak:
            peak = cur
            at_peak = {}
            for x in live.values():
                k = innermost_user(x.get("frames"))
                if k:
                    at_peak[k] = at_peak.get(k, 0) + x["size"]
    return {"peak": peak, "lines": at_peak}


def convert(lib, snap, capture):
    from gpumem import _native, _observer_api

    native = _native.Allocator(lib)
    native.configure({"capture_path": capture, "sample_interval_ms": 0, "user_roots": [USER_ROOT],
                      "header": {"allocator_mode": "pytorch", "allocator_mode_reason": "converted from a snapshot pickle",
                                 "torch_version": "2.11.0+cu130",
                                 "pytorch_expandable_segments": bool(snap.get("allocator_settings", {}).get("expandable_segments"))}})
    obs = _observer_api.Observer(native)
    obs.start(None, None)
    obs.device(0, "NVIDIA H200", 0, "")
    # The allocator as it stood when the trace began, as a state the observer reads its layout from (the live
    # tracker writes one from PyTorch's snapshot when it starts): the fixed segments and the blocks already in use.
    before = survivors(snap)
    segs = fixed_segments(snap)
    obs.state(0, 1, [{"device": 0, "address": a, "total_size": n, "stream": 0, "segment_type": "large",
                      "blocks": [{"address": b, "size": m, "state": "active_allocated"} for b, m in before.items() if a <= b < a + n]}
                     for a, n in segs.items()])
    recorded, dropped, _ = _observer_api.feed_trace(obs, snap["device_traces"][0], 0)
    info = obs.info()
    native.shutdown(0)
    # The blocks the capture leaves live (handed out by the trace, never freed), with the sizes it recorded.
    from gpumem import _format as F

    with open(capture, "rb") as f:
        data = f.read()
    _, _, _, off = F.read_header(data)
    live = {}
    for _, rtype, _, _, payload in F.records(data, off):
        if rtype == F.REC_ALLOC:
            r = F.BlockEvent.unpack_dict(payload)
            live[r["addr"]] = r["size"]
        elif rtype == F.REC_FREE_REQUESTED:
            live.pop(F.BlockEvent.unpack_dict(payload)["addr"], None)
    final = {b["address"]: b["size"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"}
    return {"recorded": recorded, "dropped": dropped, "info": info,
            "live": {str(a): n for a, n in sorted(live.items())},
            "pytorch": {str(a): final.get(a) for a, _ in sorted(live.items())}}


def main():
    cmd = sys.argv[1]
    if cmd == "convert":
        lib, path, capture = sys.argv[2:5]
        with open(path, "rb") as f:
            print(json.dumps(convert(lib, pickle.load(f), capture)))
    elif cmd == "expect":
        with open(sys.argv[2], "rb") as f:
            print(json.dumps(expect(pickle.load(f))))
    else:
        sys.exit("usage: observe_pickle.py convert LIB PICKLE CAPTURE | expect PICKLE")


if __name__ == "__main__":
    main()
