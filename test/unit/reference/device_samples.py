"""The device samples and PyTorch's figures of a capture, read record by record with the format's own layouts
(native/python/gpumem/_format.py), independently of the reader: for each REC_DEVICE_SAMPLE its time (the reader's
µs), device used, the reserved bytes its device's segment events say at its time, and the reserved of the REC_STATS
the sampler wrote right after it in the same pass (None when the next record of its device is another); every
REC_STATS; each device's event count and the events' stop (MARK_EVENTS_OFF).

    python3 device_samples.py CAPTURE  →  JSON on stdout
"""
import bisect
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "native", "python"))
from gpumem import _format as F  # noqa: E402

SEGMENT_SIGN = {F.REC_SEGMENT_ALLOC: 1, F.REC_SEGMENT_MAP: 1, F.REC_SEGMENT_FREE: -1, F.REC_SEGMENT_UNMAP: -1}
EVENTS = {F.REC_ALLOC, F.REC_FREE_REQUESTED, F.REC_FREE_COMPLETED, F.REC_OOM} | set(SEGMENT_SIGN)
MARK_EVENTS_OFF = 8


def main(path):
    data = open(path, "rb").read()
    _, _, header, offset = F.read_header(data)
    mono, wall = header.get("mono_anchor_ns", 0), header.get("wall_anchor_ns", 0)

    def us(t_ns):
        return (wall + t_ns - mono) // 1000  # the reader's floor division (Note [Clock anchors])

    segments = {}  # device -> [(t_us, signed size)]
    events = {}
    samples, stats = [], []
    pending = {}  # device -> the sample whose pass has not written its REC_STATS yet
    events_off_us = None
    for _, rtype, device, _, payload in F.records(data, offset):
        if rtype in EVENTS:
            events[device] = events.get(device, 0) + 1
        if rtype in SEGMENT_SIGN:
            e = F.SegmentEvent.unpack_dict(payload)
            segments.setdefault(device, []).append((us(e["t_ns"]), SEGMENT_SIGN[rtype] * e["size"]))
        if rtype == F.REC_DEVICE_SAMPLE:
            s = F.DeviceSampleRec.unpack_dict(payload)
            sample = {"device": device, "t_us": us(s["t_ns"]), "used": s["used"], "pass_reserved": None}
            samples.append(sample)
            pending[device] = sample
            continue
        if rtype == F.REC_STATS:
            r = F.StatsRec.unpack_dict(payload)
            stats.append({"device": device, "t_us": us(r["t_ns"]), "allocated": r["allocated"], "reserved": r["reserved"],
                          "peak_allocated": r["peak_allocated"], "peak_reserved": r["peak_reserved"]})
            if device in pending:
                pending.pop(device)["pass_reserved"] = r["reserved"]
            continue
        if rtype == F.REC_MARKER:
            m = F.MarkerRec.unpack_dict(payload)
            if m["kind"] == MARK_EVENTS_OFF and events_off_us is None:
                events_off_us = us(m["t_ns"])
        if device in pending and rtype in EVENTS:
            pending.pop(device)  # another record of the device came between the sample and its figures
    for sample in samples:
        seg = sorted(segments.get(sample["device"], []))
        times = [t for t, _ in seg]
        sample["events_reserved"] = sum(size for _, size in seg[: bisect.bisect_right(times, sample["t_us"])])
    print(json.dumps({"samples": samples, "stats": stats, "events": events, "events_off_us": events_off_us}))


if __name__ == "__main__":
    main(sys.argv[1])
