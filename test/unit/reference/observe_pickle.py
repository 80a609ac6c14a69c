#!/usr/bin/env python3
"""The PyTorch-allocator mode's conversion, driven on a real snapshot pickle (issue 15), and the same
pickle's own answer computed independently, for test/unit/observer.test.mjs.

    observe_pickle.py convert LIB PICKLE CAPTURE   feed device_traces through gpumem_observe_event (the
                                                   conversion the live trace tracker uses) into CAPTURE
    observe_pickle.py expect PICKLE                 from the trace alone: the allocated peak and, at the
                                                   first moment it is reached, bytes per innermost user line

Rules of `expect` (the issue's): allocated +size at alloc, −size at free_requested of a block the trace
handed out (blocks from before the trace started are not counted either way); user frames are those
under the sources' folder (/home/user/project), innermost first as PyTorch lists them.
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


def expect(snap):
    live, cur, peak, at_peak = {}, 0, 0, {}
    for e in snap["device_traces"][0]:
        a = e["action"]
        if a == "alloc":
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
    from gpumem import _native, _observe

    native = _native.Allocator(lib)
    native.configure({"capture_path": capture, "sample_interval_ms": 0, "user_roots": [USER_ROOT],
                      "header": {"allocator_mode": "pytorch", "allocator_mode_reason": "converted from a snapshot pickle",
                                 "torch_version": "2.11.0+cu130",
                                 "pytorch_expandable_segments": bool(snap.get("allocator_settings", {}).get("expandable_segments"))}})
    obs = _observe.Observer(native)
    obs.start(None, None)
    obs.device(0, "NVIDIA H200", 0, "")
    recorded, dropped, _ = _observe.feed_trace(obs, snap["device_traces"][0], 0)
    info = obs.info()
    native.shutdown(0)
    return {"recorded": recorded, "dropped": dropped, "info": info}


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
