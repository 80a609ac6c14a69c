#!/usr/bin/env python3
"""`gpumem summary --json`'s `snapshot` section, computed from a PyTorch snapshot pickle with Python's own
pickle, independently of the native reader (test/unit/snapshot-extras.test.mjs compares the two).

    python3 snapshot_extras.py SNAPSHOT.pickle   → JSON on stdout

Definitions (src/core/analyses/summary/snapshotSection.ts, Note [Private pools], Note [Untraced blocks],
Note [Host memory], Note [Snapshot extras]):
- pools: segments whose segment_pool_id is not (0, 0), grouped by id in order of first segment address; active =
  allocated + pending free blocks; free = reserved − active; fragmentation = 1 − largest inactive block / free.
- untraced: allocated blocks at the end whose address has no allocation of the trace live at the end (allocs paired
  with free_requested by address, in trace order).
- user_metadata / compile_context: over alloc entries, a string as it is (compile_context "N/A" and user_metadata ""
  are none), any other value as compact JSON; allocations, bytes, first and last time_us.
- annotations: START entries of external_annotations per name, in order of first appearance.
- host: host_segments' figures; peak over host_traces replayed from the start (final allocated − Σ alloc +
  Σ free_requested), as for a device.
- unknown_keys: keys outside PyTorch's schema, where they were, how many dicts had them, the first value as JSON.
"""
import json
import pickle
import sys

SEGMENT_KEYS = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
ENTRY_KEYS = {"action", "addr", "size", "stream", "time_us", "frames", "compile_context", "user_metadata",
              "device_free", "pool_id"}
FRAME_KEYS = {"filename", "name", "line", "fx_node_op", "fx_node_name", "fx_node_target", "fx_original_trace"}
ANNOTATION_KEYS = {"stage", "name", "device", "time_us"}
TOP_KEYS = {"segments", "device_traces", "allocator_settings", "external_annotations", "host_segments", "host_traces"}


def raw(v):
    """A value as the reader renders it: JSON, bytes as 'bytes(n): hex'."""
    if isinstance(v, (bytes, bytearray)):
        return json.dumps(f"bytes({len(v)}): " + v[:64].hex() + ("…" if len(v) > 64 else ""))
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(str(k)) + ":" + raw(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(raw(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, float):
        return repr(v) if v != int(v) else str(int(v))
    return json.dumps(v) if isinstance(v, str) else str(v)


def meta(v):
    if v is None:
        return ""
    return v if isinstance(v, str) else raw(v)


def frames_of(dicts):
    for d in dicts:
        for f in d.get("frames") or []:
            yield f


def main(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    unknown = {}

    def note(where, d, known):
        for k, v in d.items():
            if k in known:
                continue
            key = (where, k)
            if key in unknown:
                unknown[key]["count"] += 1
            else:
                unknown[key] = {"where": where, "key": k if isinstance(k, str) else raw(k), "count": 1, "raw": raw(v)}

    # The reader's order of discovery: segments (and their blocks), traces, annotations, host, top level.
    seen_frames = set()
    for s in snap.get("segments", []):
        note("segment", s, SEGMENT_KEYS)
        for b in s.get("blocks", []):
            note("block", b, BLOCK_KEYS)
    traces = snap.get("device_traces", [])
    for t in traces:
        for e in t:
            note("trace entry", e, ENTRY_KEYS)
    for f in frames_of([s for s in snap.get("segments", [])] + [b for s in snap.get("segments", []) for b in s.get("blocks", [])] + [e for t in traces for e in t]):
        if id(f) not in seen_frames:
            seen_frames.add(id(f))
            note("frame", f, FRAME_KEYS)
    for a in snap.get("external_annotations", []):
        note("annotation", a, ANNOTATION_KEYS)
    for s in snap.get("host_segments", []):
        note("host segment", s, SEGMENT_KEYS)
        for b in s.get("blocks", []):
            note("host block", b, BLOCK_KEYS)
    for e in snap.get("host_traces", []):
        note("trace entry", e, ENTRY_KEYS)
    note("snapshot", snap, TOP_KEYS)

    devices = []
    for dev, trace in enumerate(traces):
        segs = [s for s in snap["segments"] if s.get("device", 0) == dev]
        if not trace and not segs:
            continue
        pools = {}
        for s in sorted(segs, key=lambda s: s["address"]):
            pid = tuple(s.get("segment_pool_id", (0, 0)))
            if pid != (0, 0):
                pools.setdefault(pid, []).append(s)
        pool_rows = []
        for pid, ps in pools.items():
            blocks = [b for s in ps for b in s["blocks"]]
            reserved = sum(s["total_size"] for s in ps)
            allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
            active = allocated + sum(b["size"] for b in blocks if b["state"] == "active_pending_free")
            free = reserved - active
            largest = max([b["size"] for b in blocks if b["state"] == "inactive"], default=0)
            pool_rows.append({
                "pool_id": list(pid), "kind": "mempool" if pid[0] == 0 else "graph", "segments": len(ps),
                "blocks": len(blocks), "reserved_bytes": reserved, "allocated_bytes": allocated, "active_bytes": active,
                "requested_bytes": sum(b.get("requested_size", b["size"]) for b in blocks if b["state"] == "active_allocated"),
                "free_bytes": free, "largest_free_block_bytes": largest,
                "fragmentation": 1 - largest / free if free > 0 else 0,
            })
        live = {}
        for e in trace:
            if e["action"] == "alloc":
                live[e["addr"]] = e
            elif e["action"] == "free_requested":
                live.pop(e["addr"], None)
        untraced = [b for s in segs for b in s["blocks"] if b["state"] == "active_allocated" and b["address"] not in live]
        tagged = {"user_metadata": {}, "compile_context": {}}
        for e in trace:
            if e["action"] != "alloc":
                continue
            for key, none in (("user_metadata", ""), ("compile_context", "N/A")):
                v = meta(e.get(key, none))
                if v == none or (key == "user_metadata" and v == ""):
                    continue
                row = tagged[key].setdefault(v, {"value": v, "allocations": 0, "bytes": 0, "first_time_us": e["time_us"], "last_time_us": e["time_us"]})
                row["allocations"] += 1
                row["bytes"] += e["size"]
                row["first_time_us"] = min(row["first_time_us"], e["time_us"])
                row["last_time_us"] = max(row["last_time_us"], e["time_us"])
        names = {}
        for a in snap.get("external_annotations", []):
            if a.get("device", 0) == dev and a.get("stage") == "START":
                names[a["name"]] = names.get(a["name"], 0) + 1
        devices.append({
            "device": dev, "pools": pool_rows,
            "untraced_blocks": len(untraced), "untraced_bytes": sum(b["size"] for b in untraced),
            "user_metadata": sorted(tagged["user_metadata"].values(), key=lambda r: r["first_time_us"]),
            "compile_contexts": sorted(tagged["compile_context"].values(), key=lambda r: r["first_time_us"]),
            "annotations": [{"name": n, "ranges": c} for n, c in names.items()],
        })

    host = None
    if "host_segments" in snap or "host_traces" in snap:
        hs = snap.get("host_segments", [])
        ht = snap.get("host_traces", [])
        blocks = [b for s in hs for b in s["blocks"]]
        allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        active = allocated + sum(b["size"] for b in blocks if b["state"] == "active_pending_free")
        reserved = sum(s["total_size"] for s in hs)
        a = allocated - sum(e["size"] for e in ht if e["action"] == "alloc") + sum(e["size"] for e in ht if e["action"] == "free_requested")
        peak, peak_t = a, (ht[0]["time_us"] if ht else 0)
        for e in ht:
            a += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_requested" else 0
            if a > peak:
                peak, peak_t = a, e["time_us"]
        host = {
            "segments": len(hs), "blocks": len(blocks),
            "allocated_blocks": sum(1 for b in blocks if b["state"] == "active_allocated"),
            "reserved_bytes": reserved, "allocated_bytes": allocated, "active_bytes": active,
            "requested_bytes": sum(b.get("requested_size", b["size"]) for b in blocks if b["state"] == "active_allocated"),
            "cached_bytes": reserved - active,
            "largest_free_block_bytes": max([b["size"] for b in blocks if b["state"] == "inactive"], default=0),
            "peak_allocated_bytes": peak, "peak_at_time_us": peak_t, "events": len(ht),
        }
    settings = snap.get("allocator_settings")
    print(json.dumps({
        "allocator_settings": json.loads(raw(settings)) if settings is not None else None,
        "devices": devices,
        "host": host,
        "unknown_keys": list(unknown.values()),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
