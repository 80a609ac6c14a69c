#!/usr/bin/env python3
"""Write a large PyTorch snapshot pickle by repeating a real one's device trace N times, streaming.

Usage: stream_scale.py IN.pickle OUT.pickle N

The same snapshot as ../shared/tools/scale_snapshot.py makes (each copy shifted in time by the trace's span and in
address by 64 GiB, the last copy at the original addresses so it matches `segments`; frames shared between copies
as in PyTorch's own pickles), in pickle.dump's protocol-4 opcodes (MEMOIZE, SHORT_BINUNICODE, APPENDS by 1000;
no FRAME opcodes, which are optional), but never held whole: that tool builds the scaled trace in Python (~15 GB
for a 3 GB pickle); this one writes each entry as it is made and holds the input only.

How: a small encoder that memoizes what pickle.dump memoizes, keeping alive only what is met again by identity
(strings, frames lists, frame dicts); a trace entry is memoized (its index counted) but not kept. Copies after the
first name every string and frame by memo reference, so each input entry's bytes are a template in which only
time_us and addr change: one join per entry. Only plain Python data is used: no torch.
"""
import pickle
import struct
import sys


def enc_int(v):
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -(2**31) <= v < 2**31:
        return b"J" + struct.pack("<i", v)
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


class Encoder:
    def __init__(self, out):
        self.out = out
        self.memo = {}  # id(obj) -> memo index, for objects met again
        self.keep = []  # those objects, alive so their ids stay theirs
        self.n = 0  # memo entries so far (MEMOIZE numbers them implicitly)
        self.buf = []

    def flush(self):
        if self.buf:
            self.out.write(b"".join(self.buf))
            self.buf.clear()  # the same list: callers hold its append

    def memoize(self, obj, keep=True):
        if keep:
            self.memo[id(obj)] = self.n
            self.keep.append(obj)
        self.n += 1
        self.buf.append(b"\x94")

    def enc(self, obj, keep=True):
        w = self.buf.append
        i = self.memo.get(id(obj))
        if i is not None:
            w(b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i))
            return
        t = type(obj)
        if obj is None:
            w(b"N")
        elif t is bool:
            w(b"\x88" if obj else b"\x89")
        elif t is int:
            w(enc_int(obj))
        elif t is float:
            w(b"G" + struct.pack(">d", obj))
        elif t is str:
            b = obj.encode("utf-8", "surrogatepass")
            w((b"\x8c" + bytes([len(b)]) if len(b) < 256 else b"X" + struct.pack("<I", len(b))) + b)
            self.memoize(obj)
        elif t is list:
            w(b"]")
            self.memoize(obj, keep)
            for s in range(0, len(obj), 1000):
                w(b"(")
                for x in obj[s : s + 1000]:
                    self.enc(x)
                w(b"e")
        elif t is tuple:
            if not obj:
                w(b")")
                return
            if len(obj) > 3:
                w(b"(")
            for x in obj:
                self.enc(x)
            w(b"\x85\x86\x87"[len(obj) - 1 : len(obj)] if len(obj) <= 3 else b"t")
            self.memoize(obj, keep)
        elif t is dict:
            w(b"}")
            self.memoize(obj, keep)
            if obj:
                w(b"(")
                for k, v in obj.items():
                    self.enc(k)
                    self.enc(v)
                w(b"u")
        else:
            raise TypeError(f"stream_scale: cannot encode {t.__name__}")
        if len(self.buf) > 8192:
            self.flush()

    def template(self, e):
        """An entry's bytes once everything in it but time_us and addr is memoized: (before addr, between, after)."""
        parts, cur = [], []
        order = []
        saved = self.buf
        for k, v in e.items():
            self.buf = cur
            self.enc(k)
            if k in ("addr", "time_us"):
                parts.append(b"".join(cur))
                cur = []
                order.append(k)
            else:
                self.enc(v)
        self.buf = saved
        parts.append(b"".join(cur))
        return order, parts


def main(src, dst, copies):
    with open(src, "rb") as f:
        snap = pickle.load(f)
    traces = snap.get("device_traces") or []
    ann = snap.get("external_annotations") or []
    new_ann = ann
    events = 0
    with open(dst, "wb", buffering=1 << 22) as out:
        e_ = Encoder(out)
        w = e_.buf.append
        w(b"\x80\x04}")
        e_.memoize(snap)
        w(b"(")
        for key, value in snap.items():
            if key in ("device_traces", "external_annotations"):
                continue
            e_.enc(key)
            e_.enc(value)
        e_.enc("device_traces")
        w(b"]")
        e_.memoize(traces)
        w(b"(")
        for trace in traces:
            w(b"]")
            e_.memoize(trace)
            if not trace:
                continue
            w(b"(")
            body = [e for e in trace if e["action"] != "snapshot"]
            tail = [e for e in trace if e["action"] == "snapshot"]
            start = min(e["time_us"] for e in trace)
            span = max(e["time_us"] for e in trace) - start + 1000
            shift = 1 << 36
            n = 0
            templates = None
            for k in range(copies):
                dt, da = k * span, -(copies - 1 - k) * shift
                if templates is None:
                    # the first copy names every string and frame; its entries are encoded one by one
                    for e in body:
                        ne = dict(e)
                        ne["time_us"] = e["time_us"] + dt
                        if e.get("addr") and e["action"] != "oom":
                            ne["addr"] = e["addr"] + da
                        e_.enc(ne, keep=False)
                        n += 1
                        if n % 1000 == 0:
                            w(b"e(")
                    e_.flush()
                    templates = [(e, e_.template(e), bool(e.get("addr")) and e["action"] != "oom") for e in body]
                    continue
                for e, (order, parts), shifted in templates:
                    w(b"}\x94(")
                    e_.n += 1
                    if order == ["addr", "time_us"]:
                        w(parts[0])
                        w(enc_int(e["addr"] + da if shifted else e["addr"]))
                        w(parts[1])
                        w(enc_int(e["time_us"] + dt))
                        w(parts[2])
                    else:
                        for idx, key in enumerate(order):
                            w(parts[idx])
                            v = e[key] + (dt if key == "time_us" else da if shifted else 0)
                            w(enc_int(v))
                        w(parts[len(order)])
                    w(b"u")
                    n += 1
                    if n % 1000 == 0:
                        w(b"e(")
                        if len(e_.buf) > 8192:
                            e_.flush()
            for e in tail:
                ne = dict(e)
                ne["time_us"] = e["time_us"] + (copies - 1) * span
                e_.enc(ne, keep=False)
                n += 1
            w(b"e")
            events += n
            new_ann = [dict(a, time_us=a["time_us"] + k * span) for k in range(copies) for a in ann if "time_us" in a]
        w(b"e")  # the device lists into device_traces
        if "external_annotations" in snap:
            e_.enc("external_annotations")
            e_.enc(new_ann)
        w(b"u.")
        e_.flush()
    print(dst, "events:", events)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
