"""Per-line bytes at the peak (and the end state) of a capture, decoded independently of the extension (for the E2E test).

    python3 expected_lines.py CAPTURE.gpumem  → JSON on stdout

Definitions (DESIGN §3): allocated = Σ block sizes of live blocks (REC_ALLOC adds, REC_FREE_COMPLETED
removes); the peak is the maximum of allocated on each device. A line's self bytes at peak = block bytes
live at the peak whose innermost user frame (a frame under the header's user_roots, or any frame when
there are none) is that line; alloc_count = allocations attributed to the line over the whole capture.
When the peak value is reached several times, `stable` says whether the line's bytes are the same at every
one of those moments (an annotation test should only assert on stable lines: which tie a reader reports is
its own choice).
"""
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpumem_records as R  # noqa: E402


def segs_of(table):
    return sorted(table.items())


def main():
    with open(sys.argv[1], "rb") as f:
        header, _, records = R.read_capture(f.read())
    roots = [r.rstrip("/") + "/" for r in header.get("user_roots", []) or []]
    strings, frames, stacks = {}, {}, {}

    def user_line(stack_id):
        for fid in stacks.get(stack_id, []):
            file_id, _, line = frames[fid]
            path = strings.get(file_id, "")
            if not roots or any(path.startswith(r) for r in roots):
                return (path, line)
        return None

    live = defaultdict(dict)  # device -> addr -> (size, line)
    allocated = defaultdict(int)
    peak = defaultdict(int)
    at_peaks = defaultdict(list)  # device -> [ {line: bytes} at each moment the peak value was reached ]
    counts = defaultdict(int)
    ooms = []
    for rtype, device, _flags, payload, _raw in records:
        if rtype == R.REC_STRING:
            sid, n = R.STRING.unpack_from(payload)
            strings[sid] = payload[R.STRING.size:R.STRING.size + n].decode("utf-8", "replace")
        elif rtype == R.REC_FRAME:
            fid, file_id, func, line = R.FRAME.unpack_from(payload)
            frames[fid] = (file_id, func, line)
        elif rtype == R.REC_STACK:
            sid, _, n = R.STACK.unpack_from(payload)
            stacks[sid] = list(R.F.frame_ids(payload, n))
        elif rtype == R.REC_ALLOC:
            _, addr, size, _, _, stack, _ = R.BLOCK_EVENT.unpack_from(payload)
            where = user_line(stack)
            live[device][addr] = (size, where)
            allocated[device] += size
            if where:
                counts[where] += 1
            if allocated[device] >= peak[device]:
                if allocated[device] > peak[device]:
                    at_peaks[device] = []
                peak[device] = allocated[device]
                by_line = defaultdict(int)
                for s, w in live[device].values():
                    if w:
                        by_line[w] += s
                at_peaks[device].append(dict(by_line))
        elif rtype == R.REC_OOM:
            f = R.OOM.unpack_from(payload)
            where = user_line(f[9])
            ooms.append({"device": device, "requested": f[1], "device_free": f[2], "device_total": f[3], "reserved": f[4],
                         "allocated": f[5], "largest_free": f[6], "file": where and where[0], "line": where and where[1]})
        elif rtype == R.REC_FREE_COMPLETED:
            _, addr, *_ = R.BLOCK_EVENT.unpack_from(payload)
            size, _ = live[device].pop(addr, (0, None))
            allocated[device] -= size
    # device -> addr -> (size, page: 0 for a fixed segment, else the expandable mapping's page size), at the end
    segments = defaultdict(dict)
    for rtype, device, flags, payload, _raw in records:
        if rtype in (R.REC_SEGMENT_ALLOC, R.REC_SEGMENT_MAP):
            _, addr, size, *_ = R.SEGMENT_EVENT.unpack_from(payload)
            segments[device][addr] = (size, R.page_of(flags) if rtype == R.REC_SEGMENT_MAP else 0)
        elif rtype == R.REC_SEGMENT_FREE:
            segments[device].pop(R.SEGMENT_EVENT.unpack_from(payload)[1], None)
        elif rtype == R.REC_SEGMENT_UNMAP:
            # One unmap may cover several earlier maps (the allocator unmaps a run of free pages at
            # once) or part of one: cut [lo, hi) out of every mapping it overlaps.
            _, lo, size, *_ = R.SEGMENT_EVENT.unpack_from(payload)
            hi = lo + size
            for a, (s, page) in list(segments[device].items()):
                if not page or a + s <= lo or a >= hi:
                    continue
                del segments[device][a]
                if a < lo:
                    segments[device][a] = (lo - a, page)
                if a + s > hi:
                    segments[device][hi] = (a + s - hi, page)
    out = {"devices": [], "ooms": ooms}
    for device in sorted(peak):
        moments = at_peaks[device]
        lines = set().union(*[m.keys() for m in moments]) if moments else set()
        rows = []
        for w in lines:
            values = {m.get(w, 0) for m in moments}
            rows.append({"file": w[0], "line": w[1], "self_bytes_at_peak": moments[0].get(w, 0),
                         "alloc_count": counts[w], "stable": len(values) == 1})
        rows.sort(key=lambda r: -r["self_bytes_at_peak"])
        # what empty_cache keeps: fixed segments holding a live block; of expandable mappings, all but
        # their whole free pages
        kept = 0
        blocks = [(a, s) for a, (s, _) in live[device].items()]
        for a, (size, page) in segs_of(segments[device]):
            if page:
                kept += size - sum(e - b for b, e in R.free_page_runs(a, size, blocks, page))
            elif any(a <= b < a + size for b in live[device]):
                kept += size
        out["devices"].append({
            "device": device, "peak_allocated": peak[device], "peak_moments": len(moments), "lines": rows,
            # the end state: what empty_cache can release (segments holding no live block)
            "end_allocated": allocated[device], "end_reserved": sum(s for s, _ in segments[device].values()),
            "end_reserved_busy": kept,
        })
    times = [t for t in (R.t_ns_of(r[0], r[3]) for r in records) if t is not None]
    out["duration_s"] = (max(times) - min(times)) / 1e9 if times else 0
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
