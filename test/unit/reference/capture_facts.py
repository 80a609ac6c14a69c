#!/usr/bin/env python3
"""The facts `gpumem summary` states about a capture, read straight from the bytes with the recorder
tests' spec-only reader (test/native/recorder/capture.py), for the reader's tests to compare against:

    capture_facts.py FILE.capture   → JSON: identity, devices, time origin, step markers, OOMs, integrity

Shares no code with the native reader or the TypeScript summary. Times are µs since the epoch
(FORMAT.md: wall_anchor_ns + (t_ns − mono_anchor_ns), ÷ 1000, floored).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import capture as cap  # noqa: E402

F = cap.F  # the generated format module (layouts from gpumem_format.h)

EVENTS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
          "segment_unmap", "oom"}
TIMED = EVENTS | {"empty_cache", "state", "device_sample", "marker", "notice", "stats", "device", "lost", "end"}


def main(path):
    c = cap.Capture(path)
    h = c.header
    us = lambda t_ns: (h["wall_anchor_ns"] + (t_ns - h["mono_anchor_ns"])) // 1000  # noqa: E731
    first = {}
    devices, ooms, markers, lost, end = [], [], [], [], None
    last_t = None
    for name, dev, flags, p, off in c.records:
        t = F.BlockEvent.prefix("t_ns").unpack_from(p)[0] if name in TIMED else None
        if name in EVENTS and not (name in ("segment_alloc", "segment_free") and flags & F.kSegExpandable):
            first.setdefault(dev, t)
        if name == "device":
            _, total, sid, pci = F.DeviceRec.unpack_from(p)
            devices.append({"index": dev, "name": c.strings[sid], "totalBytes": total})
        elif name == "oom":
            (_, req, free, total, reserved, allocated, largest, _, _, stack, _) = F.OomRec.unpack_from(p)
            frames = c.stacks.get(stack, (0, []))[1]
            user = next((f for f in frames if "site-packages" not in f[0] and not f[0].startswith("<")), None)
            ooms.append({"device": dev, "time_us": us(t), "requested_bytes": req, "device_free_bytes": free,
                         "device_total_bytes": total, "reserved": reserved, "allocated": allocated,
                         "file": user[0] if user else "<no user frame>", "line": user[2] if user else 0})
        elif name == "marker":
            _, sid, kind = F.MarkerRec.unpack_from(p)
            markers.append({"time_us": us(t), "label": c.strings[sid], "kind": kind})
        elif name == "lost":
            lost.append({"count": F.LostRec.unpack_from(p)[1], "before_us": us(last_t) if last_t else us(t)})
        elif name == "end":
            # Minor <= 1 wrote the 16-byte EndRec (reason always 0, no message).
            _, code, reason, msg = F.EndRec.prefix("message").unpack_from(p) if len(p) >= F.EndRec.prefix("message").size else F.EndRec.prefix("exit_code").unpack_from(p) + (0, 0)
            end = {"time_us": us(t), "exit_code": code, "reason": reason, "message": c.strings.get(msg, "")}
        if t is not None:
            last_t = t if last_t is None else max(last_t, t)
    print(json.dumps({
        "pid": h.get("pid"), "host": h.get("host"), "rank": h.get("rank"), "local_rank": h.get("local_rank"),
        "world_size": h.get("world_size"), "devices": devices,
        "event_devices": sorted(first), "origin_us": us(min(first.values())) if first else None,
        "last_us": us(last_t) if last_t is not None else None,
        "markers": markers, "ooms": ooms, "lost_events": sum(x["count"] for x in lost),
        "lost_from_us": lost[0]["before_us"] if lost else None, "end": end, "truncated": c.truncated,
    }))


if __name__ == "__main__":
    main(sys.argv[1])
