#!/usr/bin/env python3
"""Probe (not a test): the lens allocator's driver work step by step, from a capture (runs anywhere, no GPU).

The step benchmark saw GPT-2 small under `gpumem run --allocator lens` move 2.95 pages a step in its timed
steps (295 in 100 steps, every round: "page_moves_per_step"), where a settled step should move none (Note [Futile
trims] in native/allocator/src/device_allocator.h); replaying the 10-step categories capture settles after its
second step. This prints, for each step (between MARK_STEP "optimizer.step" markers), the segment maps and unmaps
the capture holds and their bytes, so a longer run shows which steps still move pages:

    gpumem run --allocator lens -- python3 test/gpu/workloads/steady_training.py --model gpt2 --steps 110
    python3 test/gpu/probes/segment_events_per_step.py SESSION/capture-PID.gpumem
"""
import faulthandler
import json
import os
import sys

faulthandler.dump_traceback_later(120, exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import capture as cap  # noqa: E402

F = cap.F


def per_step(path):
    c = cap.Capture(path)
    rows, row = [], {"maps": 0, "unmaps": 0, "mapped_bytes": 0, "unmapped_bytes": 0}
    for name, _, _, p, _ in c.records:
        if name in ("segment_map", "segment_unmap"):
            size = F.SegmentEvent.unpack_dict(p)["size"]
            kind = "maps" if name == "segment_map" else "unmaps"
            row[kind] += 1
            row["mapped_bytes" if kind == "maps" else "unmapped_bytes"] += size
        elif name == "marker":
            m = F.MarkerRec.unpack_dict(p)
            if m["kind"] == F.MARK_STEP and c.strings.get(m["name"]) == "optimizer.step":
                rows.append(row)
                row = {"maps": 0, "unmaps": 0, "mapped_bytes": 0, "unmapped_bytes": 0}
    rows.append(row)  # after the last step end
    return rows


def main():
    rows = per_step(sys.argv[1])
    for i, r in enumerate(rows):
        print("step %3d  maps %3d (%6.1f MiB)  unmaps %3d (%6.1f MiB)" % (
            i + 1, r["maps"], r["mapped_bytes"] / 2**20, r["unmaps"], r["unmapped_bytes"] / 2**20))
    settled = rows[len(rows) // 2:]
    print(json.dumps({"steps": len(rows), "second_half_maps": sum(r["maps"] for r in settled),
                      "second_half_unmaps": sum(r["unmaps"] for r in settled)}))


if __name__ == "__main__":
    main()
