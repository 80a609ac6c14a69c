#!/usr/bin/env python3
"""Writes the capture of the OOM script as the lens allocator recorded it on an H100, bytes exact: 30 % of
the card held, 90 % asked (caught), then a little more work whose peak comes right after the OOM. A device
sample was read while the failed growth had ~55 GiB mapped (before the fix of Note [Settled samples] no lock kept
the sampler out of a growth), and the moment after the OOM had no sample of its own.

    python3 oom_sample_capture.py OUT.gpumem VARIANT

VARIANT (what follows the peak):
  late      a periodic sample inside the peak's stretch (after its segment map, before the next segment event)
  none      no sample inside that stretch: the next one follows the trim that ends it
  settled   what the fixed recorder writes: no sample during the growth, and one right after the OOM

Every figure is printed as JSON on stdout for the test (test/unit/categories-oom-sample.test.mjs).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
from gpumem import _format as F  # noqa: E402  (generated from gpumem_format.h)

MONO_ANCHOR, WALL_ANCHOR = 5_000_000_000, 1_795_000_000_000_000_000
MIB, GIB = 1 << 20, 1 << 30
MS = 1_000_000
PAGE = 20 * MIB
TOTAL = 85_029_158_912                     # an H100 80GB HBM3 as NVML reports it (79.19 GiB)
CONTEXT = 1075 * MIB                       # CUDA context and libraries: device used − reserved at rest (1.05 GiB)
HELD = (TOTAL * 3 // 10 + PAGE - 1) // PAGE * PAGE   # 30 %, in whole pages (23.9 GiB)
ASKED = TOTAL * 9 // 10
MID_GROWTH_USED = TOTAL - GIB // 2         # the failed growth had mapped all but half a GiB (78.7 GiB)
WORK = PAGE                                # the work after the OOM: one more page


def build(variant):
    out = bytearray()

    def rec(kind, payload, flags=0):
        out.extend(F.record(getattr(F, "REC_" + kind), payload, 0, flags))

    header = {"pid": 4242, "rank": 0, "world_size": 1, "host": "testhost", "argv": ["oom_30_90.py"],
              "mono_anchor_ns": MONO_ANCHOR, "wall_anchor_ns": WALL_ANCHOR, "segments": "expandable"}
    hj = json.dumps(header).encode()
    out += F.FileHeader.pack(F.kMagic, F.kMajor, F.kMinor, len(hj)) + hj
    rec("STRING", F.pack_string(1, b"NVIDIA H100 80GB HBM3"))
    t0 = MONO_ANCHOR + MS
    rec("DEVICE", F.DeviceRec.pack(t0, TOTAL, 1, 0))
    seg_flags = F.kPoolLarge | F.kSegExpandable
    base = 0x7F00_0000_0000

    def sample(t, used):
        rec("DEVICE_SAMPLE", F.DeviceSampleRec.pack(t, used, TOTAL, 0))

    def seg(kind, t, addr, size):
        rec(kind, F.SegmentEvent.pack(t, addr, size, 0, 0, 0, 0, 0), seg_flags)

    def block(kind, t, addr, size):
        rec(kind, F.BlockEvent.pack(t, addr, size, size, 0, 0, 0), F.kPoolLarge)

    sample(t0, CONTEXT)                                   # the sampler's first pass, before any tensor
    t = t0 + MS
    seg("SEGMENT_MAP", t, base, HELD)                     # x = torch.empty(30 %)
    block("ALLOC", t, base, HELD)
    sample(t0 + 200 * MS, HELD + CONTEXT)                 # at rest: 23.9 + 1.05 GiB
    # y = torch.empty(90 %) from t0 + 300 ms: the growth maps page by page, and the sampler reads the device
    if variant != "settled":
        sample(t0 + 400 * MS, MID_GROWTH_USED)
    t_oom = t0 + 700 * MS                                 # all given back; the OOM (free: what the driver says now)
    rec("OOM", F.OomRec.pack(t_oom, ASKED, TOTAL - HELD - CONTEXT, TOTAL, HELD, HELD, 0, 0, 0, 0, 0))
    if variant == "settled":
        sample(t_oom + 40_000, HELD + CONTEXT)            # the recorder's sample once the growth is undone
    t_peak = t_oom + 200_000                              # keeps working: one more page, the run's peak
    seg("SEGMENT_MAP", t_peak, base + HELD, WORK)
    block("ALLOC", t_peak, base + HELD, WORK)
    if variant == "late":
        sample(t0 + 800 * MS, HELD + WORK + CONTEXT)      # the next periodic pass, still in the peak's stretch
    t = t0 + 850 * MS
    block("FREE_REQUESTED", t, base + HELD, WORK)
    block("FREE_COMPLETED", t, base + HELD, WORK)
    seg("SEGMENT_UNMAP", t0 + 900 * MS, base + HELD, WORK)  # empty_cache: the page goes back
    if variant != "late":
        sample(t0 + 1000 * MS, HELD + CONTEXT)
    t_end = t0 + 1100 * MS
    rec("END", F.EndRec.pack(t_end, 0, F.END_CLEAN, 0, 0))
    to_us = lambda t_ns: (WALL_ANCHOR + (t_ns - MONO_ANCHOR)) // 1000  # noqa: E731
    return bytes(out), {"total": TOTAL, "context": CONTEXT, "held": HELD, "work": WORK, "asked": ASKED,
                        "mid_growth_used": MID_GROWTH_USED, "oom_us": to_us(t_oom), "peak_us": to_us(t_peak),
                        "end_us": to_us(t_end)}


def main():
    path, variant = sys.argv[1], sys.argv[2]
    assert variant in ("late", "none", "settled"), variant
    data, facts = build(variant)
    with open(path, "wb") as f:
        f.write(data)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
