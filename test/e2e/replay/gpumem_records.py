"""Capture-file records (native/format/gpumem_format.h) for the replay workload and its tests.

Pure Python 3 standard library. Only what the replay needs: the file header, the generic record
framing, and the payload layouts it reads or writes. The C header is the contract: every layout and
constant here is the module generated from it (native/python/gpumem/_format.py, Note [Generated format
module]), under the short names the replay scripts use; nothing is re-declared.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
from gpumem import _format as F  # noqa: E402

MAGIC = F.kMagic
MAJOR = F.kMajor
MINOR = 1  # what the replay and the stand-in write: minor-1 records (the 16-byte EndRec, no REC_TAG)

FILE_HEADER = F.FileHeader
RECORD_HEADER = F.RecordHeader

# REC_* record types and MARK_* marker kinds, under the header's names.
globals().update({k: v for k, v in vars(F).items() if k.startswith(("REC_", "MARK_"))})
INTERNED = (F.REC_STRING, F.REC_FRAME, F.REC_STACK)

POOL_SMALL, POOL_LARGE, POOL_PRIVATE, SEG_EXPANDABLE = F.kPoolSmall, F.kPoolLarge, F.kPoolPrivate, F.kSegExpandable
STACK_BACKWARD = F.kStackBackward

STRING = F.StringRec
FRAME = F.FrameRec
STACK = F.StackRec
BLOCK_EVENT = F.BlockEvent
SEGMENT_EVENT = F.SegmentEvent
EMPTY_CACHE = F.EmptyCacheRec
DEVICE_SAMPLE = F.DeviceSampleRec
MARKER = F.MarkerRec
STATS = F.StatsRec
DEVICE = F.DeviceRec
END = F.EndRec.prefix("reason")  # minor 1's 16-byte EndRec
OOM = F.OomRec
STATE = F.StateRec
STATE_SEGMENT = F.StateSegment
STATE_BLOCK = F.StateBlock
T_NS = F.BlockEvent.prefix("t_ns")  # every timed record's payload starts with t_ns


def file_header(header: dict) -> bytes:
    body = json.dumps(header, separators=(",", ":")).encode()
    return FILE_HEADER.pack(MAGIC, MAJOR, MINOR, len(body)) + body


def record(rtype: int, payload: bytes, device: int = 0, flags: int = 0) -> bytes:
    return RECORD_HEADER.pack(rtype, device, flags, len(payload)) + payload


def read_capture(data: bytes):
    """(header dict, header bytes, [(type, device, flags, payload, raw record bytes)]); stops at a torn tail."""
    if len(data) < FILE_HEADER.size or data[:8] != MAGIC:
        raise ValueError("not a gpumem capture (bad magic): expected a file written by the GPU Memory Lens allocator")
    magic, major, minor, json_bytes = FILE_HEADER.unpack_from(data, 0)
    if major != MAJOR:
        raise ValueError(f"capture major version {major}; this replay reads version {MAJOR}")
    end = FILE_HEADER.size + json_bytes
    header = json.loads(data[FILE_HEADER.size:end].decode("utf-8"))
    records = []
    off = end
    while off + RECORD_HEADER.size <= len(data):
        rtype, device, flags, n = RECORD_HEADER.unpack_from(data, off)
        if off + RECORD_HEADER.size + n > len(data):
            break
        payload = data[off + RECORD_HEADER.size: off + RECORD_HEADER.size + n]
        records.append((rtype, device, flags, payload, data[off: off + RECORD_HEADER.size + n]))
        off += RECORD_HEADER.size + n
    return header, data[:end], records


def t_ns_of(rtype: int, payload: bytes):
    """Every non-interned record's payload starts with t_ns."""
    if rtype in INTERNED or len(payload) < 8:
        return None
    return T_NS.unpack_from(payload, 0)[0]


# Expandable segments map and unmap memory in pages (PyTorch: 2 MiB for the large pool).
PAGE = 2 << 20  # an expandable segment's page in the small pool
LARGE_PAGE = 20 << 20  # and in the large pool (the allocator maps and unmaps whole pages of its pool's size)


def page_of(flags):
    """The page size of an expandable segment with these record flags."""
    return LARGE_PAGE if flags & POOL_LARGE else PAGE


def free_page_runs(start, size, blocks, page=PAGE):
    """[(a, b)) runs of whole pages in [start, start+size) that no block [(addr, size)] overlaps."""
    busy = sorted((a, a + n) for a, n in blocks if a < start + size and a + n > start)
    runs, p, i = [], start, 0
    while p + page <= start + size:
        while i < len(busy) and busy[i][1] <= p:
            i += 1
        if i < len(busy) and busy[i][0] < p + page:
            p += page
            continue
        if runs and runs[-1][1] == p:
            runs[-1] = (runs[-1][0], p + page)
        else:
            runs.append((p, p + page))
        p += page
    return runs
