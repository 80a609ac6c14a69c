#!/usr/bin/env python3
"""Write a large PyTorch snapshot pickle by repeating a real one's device trace N times, streaming.

Usage: stream_scale.py IN.pickle OUT.pickle N

The same snapshot as ../shared/tools/scale_snapshot.py makes (each copy shifted in time by the trace's span and in
address by 64 GiB, the last copy at the original addresses so it matches `segments`), but never held whole: that
tool builds the scaled trace in Python (~15 GB for a 3 GB pickle); this one keeps one batch of entries at a time.

How: the outer structure (the top-level dict, `device_traces`, each device's list) is written opcode by opcode;
each batch of entries is pickled (protocol 3, unframed) as a list by a Pickler whose memo is cleared first, and
its list wrapper is cut off: what remains, MARK items APPENDS, appends the batch to the device list on the stack.
Within a batch, frames are shared (memo references, as in PyTorch's own pickles); each batch names them again.
Only plain Python data is used: no torch.
"""
import io
import pickle
import sys

BATCH = 20000
HEAD = b"\x80\x03]q\x00"  # PROTO 3, EMPTY_LIST, BINPUT 0: the batch list's wrapper (memo cleared: index 0)


def chunk(pickler, buf, obj):
    """obj's pickle opcodes alone (no PROTO, no STOP), memo cleared first."""
    buf.seek(0)
    buf.truncate()
    pickler.clear_memo()
    pickler.dump(obj)
    b = buf.getvalue()
    assert b[:2] == b"\x80\x03" and b[-1:] == b".", "unexpected pickle framing"
    return b[2:-1]


def entries_of(pickler, buf, items):
    """MARK items APPENDS for a non-empty list of entries (appended to the list below on the stack)."""
    b = chunk(pickler, buf, items)
    b = b"\x80\x03" + b  # as dumped: cut the wrapper off the full form
    assert b.startswith(HEAD), "unexpected list header"
    return b[len(HEAD):]


def main(src, dst, copies):
    with open(src, "rb") as f:
        snap = pickle.load(f)
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=3)
    traces = snap.get("device_traces") or []
    ann = snap.get("external_annotations") or []
    events = 0
    with open(dst, "wb") as out:
        out.write(b"\x80\x03}(")  # PROTO 3, EMPTY_DICT, MARK
        for key, value in snap.items():
            if key in ("device_traces", "external_annotations"):
                continue
            out.write(chunk(pickler, buf, key) + chunk(pickler, buf, value))
        out.write(chunk(pickler, buf, "device_traces") + b"](")  # EMPTY_LIST, MARK
        new_ann = []
        for trace in traces:
            out.write(b"]")
            if not trace:
                continue
            body = [e for e in trace if e["action"] != "snapshot"]
            tail = [e for e in trace if e["action"] == "snapshot"]
            start = min(e["time_us"] for e in trace)
            span = max(e["time_us"] for e in trace) - start + 1000
            shift = 1 << 36
            batch = []
            for k in range(copies):
                dt, da = k * span, -(copies - 1 - k) * shift
                for e in body:
                    ne = dict(e)
                    ne["time_us"] = e["time_us"] + dt
                    if e.get("addr") and e["action"] != "oom":
                        ne["addr"] = e["addr"] + da
                    batch.append(ne)
                    if len(batch) >= BATCH:
                        out.write(entries_of(pickler, buf, batch))
                        events += len(batch)
                        batch = []
            for e in tail:
                ne = dict(e)
                ne["time_us"] = e["time_us"] + (copies - 1) * span
                batch.append(ne)
            if batch:
                out.write(entries_of(pickler, buf, batch))
                events += len(batch)
            new_ann = [dict(a, time_us=a["time_us"] + k * span) for k in range(copies) for a in ann if "time_us" in a]
        out.write(b"e")  # APPENDS: the device lists into device_traces
        if "external_annotations" in snap:
            out.write(chunk(pickler, buf, "external_annotations") + chunk(pickler, buf, new_ann if traces else ann))
        out.write(b"u.")  # SETITEMS, STOP
    print(dst, "events:", events)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
