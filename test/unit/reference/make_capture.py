#!/usr/bin/env python3
"""Writes a GPU Memory Lens capture with the layouts generated from native/format/gpumem_format.h, together
with the PyTorch-snapshot dict that describes the same run. The reader's tests decode the capture
natively and compare it with snapshot_summary.py's figures for the twin pickle: two independent paths
from one simulated workload.

    python3 make_capture.py OUT.gpumem TWIN.pickle [--events N] [--seed S] [--no-state] [--cut BYTES]

The simulated allocator is deliberately simple (fixed segments, a bump pointer, frees of random live
blocks); what matters is that both files describe the same events exactly.
"""
import argparse
import json
import os
import pickle
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
from gpumem import _format as F  # noqa: E402  (generated from gpumem_format.h)

POOL_SMALL, POOL_LARGE = F.kPoolSmall, F.kPoolLarge
MONO_ANCHOR, WALL_ANCHOR = 5_000_000_000, 1_795_000_000_000_000_000

BLOCK = F.BlockEvent
SEGMENT = F.SegmentEvent

STACKS = [
    # (frames innermost first: (file, function, line)), backward flag
    ([("/home/user/proj/model.py", "forward", 12), ("/home/user/proj/train.py", "step", 30),
      ("/home/user/proj/train.py", "<module>", 50)], 0),
    ([("/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", "forward", 125),
      ("/home/user/proj/train.py", "step", 31), ("/home/user/proj/train.py", "<module>", 50)], 0),
    ([("/opt/venv/lib/python3.12/site-packages/torch/optim/adam.py", "step", 200),
      ("/usr/lib/python3.12/contextlib.py", "inner", 81)], 0),                      # no user frame
    ([("/home/user/proj/train.py", "step", 33), ("/home/user/proj/train.py", "<module>", 50)], 1),  # backward
]


class Writer:
    def __init__(self):
        self.out = bytearray()

    def rec(self, kind, payload, device=0, flags=0):
        self.out += F.record(getattr(F, "REC_" + kind), payload, device, flags)


def first_fit(live, base, size_of_segment, size):
    """Lowest address in the segment where `size` bytes fit between live blocks."""
    cursor = base
    for a in sorted(x for x in live if base <= x < base + size_of_segment):
        if a - cursor >= size:
            return cursor
        cursor = a + live[a][0]
    return cursor if base + size_of_segment - cursor >= size else None


def to_us(t_ns):
    return (WALL_ANCHOR + (t_ns - MONO_ANCHOR)) // 1000


BOOTSTRAP_FRAME = ("/opt/gpumem/native/python/gpumem/_markers.py", "run", 40)


def build(events, seed, with_state, bootstrap_dir=None):
    rng = random.Random(seed)
    w = Writer()
    header = {"pid": 4242, "rank": 0, "world_size": 1, "host": "testhost", "argv": ["train.py"],
              "torch_version": "2.11.0", "mono_anchor_ns": MONO_ANCHOR, "wall_anchor_ns": WALL_ANCHOR}
    stacks = [list(frames) for frames, _ in STACKS]
    if bootstrap_dir:
        # The lens bootstrap wraps backward(): its frame is innermost on the backward stack.
        header["bootstrap_dir"] = bootstrap_dir
        stacks[3] = [BOOTSTRAP_FRAME] + stacks[3]
    hj = json.dumps(header).encode()
    w.out += F.FileHeader.pack(F.kMagic, 1, 1, len(hj)) + hj  # minor 1: the 16-byte EndRec below

    strings, frame_ids = {}, {}

    def sid(s):
        if s not in strings:
            strings[s] = len(strings) + 1
            b = s.encode()
            w.rec("STRING", F.pack_string(strings[s], b))
        return strings[s]

    for k, ((_, backward), frames) in enumerate(zip(STACKS, stacks), start=1):
        ids = []
        for f in frames:
            if f not in frame_ids:
                frame_ids[f] = len(frame_ids) + 1
                w.rec("FRAME", F.FrameRec.pack(frame_ids[f], sid(f[0]), sid(f[1]), f[2]))
            ids.append(frame_ids[f])
        w.rec("STACK", F.pack_stack(k, backward, ids))

    def py_frames(stack_id):
        if stack_id == 0:
            return []
        return [{"name": fn, "filename": fi, "line": ln} for (fi, fn, ln) in stacks[stack_id - 1]]

    # Devices are announced by REC_DEVICE (they are not in the header: Note [Devices] in gpumem_format.h).
    w.rec("DEVICE", F.DeviceRec.pack(MONO_ANCHOR + 500_000, 80 << 30, sid("Simulated GPU"), 0))
    trace = []
    t = MONO_ANCHOR + 1_000_000
    # Segments: one small (2 MiB) and one large (1 GiB) at an address above 2**63 (u64 exactness).
    segs = [(0x7F00_0000_0000, 2 << 20, POOL_SMALL, "small"), ((1 << 63) + 0x4000_0000, 1 << 30, POOL_LARGE, "large")]
    for addr, size, pool, _ in segs:
        w.rec("SEGMENT_ALLOC", SEGMENT.pack(t, addr, size, 0, 0, 0, 1, 0), flags=pool)
        trace.append({"action": "segment_alloc", "addr": addr, "size": size, "stream": 0, "time_us": to_us(t),
                      "compile_context": "N/A", "user_metadata": "", "frames": py_frames(1)})
        t += 1000
    live = {}  # addr → (size, requested, stack)
    n = 0
    while n < events:
        t += rng.randint(1, 5000)
        if live and rng.random() < 0.45:
            addr = rng.choice(sorted(live))
            size, req, stack = live.pop(addr)
            for kind in ("FREE_REQUESTED", "FREE_COMPLETED"):
                w.rec(kind, BLOCK.pack(t, addr, size, req, 0, 0, 0), flags=POOL_LARGE if addr >> 63 else POOL_SMALL)
                trace.append({"action": kind.lower(), "addr": addr, "size": size, "stream": 0, "time_us": to_us(t),
                              "compile_context": "N/A", "user_metadata": "", "frames": []})
            n += 2
            continue
        small = rng.random() < 0.5
        seg = segs[0] if small else segs[1]
        size = rng.randint(1, 64 if small else 4096) * 512
        addr = first_fit(live, seg[0], seg[1], size)
        if addr is None:
            continue  # no room: the loop frees a live block (there is one, or the segment would be empty)
        req = size - rng.randint(0, 511)
        stack = rng.randint(1, len(STACKS))
        live[addr] = (size, req, stack)
        w.rec("ALLOC", BLOCK.pack(t, addr, size, req, 0, stack, 1 if STACKS[stack - 1][1] else 0), flags=seg[2])
        trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": to_us(t),
                      "compile_context": "N/A", "user_metadata": "", "frames": py_frames(stack)})
        n += 1
        if n == events // 2:
            w.rec("MARKER", F.MarkerRec.pack(t, sid("halfway"), F.MARK_INSTANT))
            w.rec("DEVICE_SAMPLE", F.DeviceSampleRec.pack(t, 3 << 30, 80 << 30, 1 << 30))

    # Final state (also the twin's segments): live blocks plus the gaps between them as inactive blocks.
    py_segments = []
    state = bytearray()
    for addr, size, pool, name in segs:
        blocks, cursor = [], addr
        for a in sorted(x for x in live if addr <= x < addr + size):
            if a > cursor:
                blocks.append({"address": cursor, "size": a - cursor, "requested_size": 0, "state": "inactive", "frames": []})
            bs, br, bst = live[a]
            blocks.append({"address": a, "size": bs, "requested_size": br, "state": "active_allocated", "frames": py_frames(bst)})
            cursor = a + bs
        if cursor < addr + size:
            blocks.append({"address": cursor, "size": addr + size - cursor, "requested_size": 0, "state": "inactive", "frames": []})
        alloc = sum(b["size"] for b in blocks if b["state"] != "inactive")
        py_segments.append({"device": 0, "address": addr, "total_size": size, "allocated_size": alloc, "active_size": alloc,
                            "requested_size": sum(b["requested_size"] for b in blocks if b["state"] != "inactive"),
                            "stream": 0, "segment_type": name, "segment_pool_id": (0, 0), "is_expandable": False,
                            "frames": py_frames(1), "blocks": blocks})
        state += F.StateSegment.pack(addr, size, 0, 0, 0, 1, pool, 0, len(blocks), 0)
        for b in blocks:
            st = F.BLOCK_ACTIVE_ALLOCATED if b["state"] == "active_allocated" else F.BLOCK_INACTIVE
            stack_id = next((k for k, (fr, _) in enumerate(STACKS, 1) if py_frames(k) == b["frames"]), 0) if b["frames"] else 0
            state += F.StateBlock.pack(b["address"], b["size"], b["requested_size"], stack_id, st)
    t += 1000
    if with_state:
        w.rec("STATE", F.StateRec.pack(t, 1, 2, len(segs), 0) + bytes(state))
    w.rec("END", F.EndRec.prefix("reason").pack(t, 0, F.END_CLEAN))  # the 16-byte EndRec of minor <= 1
    twin = {"segments": py_segments, "device_traces": [trace], "allocator_settings": {}, "external_annotations": []}
    return bytes(w.out), twin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("twin")
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-state", action="store_true")
    ap.add_argument("--bootstrap-dir", help="record a header bootstrap_dir and a bootstrap frame on backward stacks")
    args = ap.parse_args()
    data, twin = build(args.events, args.seed, not args.no_state, args.bootstrap_dir)
    with open(args.out, "wb") as f:
        f.write(data)
    with open(args.twin, "wb") as f:
        pickle.dump(twin, f, protocol=4)


if __name__ == "__main__":
    main()
