"""Capture-file records (native/format/gpumem_format.h) for the replay workload and its tests.

Pure Python 3 standard library. Only what the replay needs: the file header, the generic record
framing, and the payload layouts it reads or writes. The C header is the contract; the sizes below are
checked against its static_asserts (BlockEvent 48, SegmentEvent 56, StateSegment 56, StateBlock 32).
"""
import json
import struct

MAGIC = b"GPUMEM\r\n"
MAJOR = 1
MINOR = 1

FILE_HEADER = struct.Struct("<8sHHI")
RECORD_HEADER = struct.Struct("<BBHI")  # type, device, flags, payload_bytes

REC_STRING, REC_FRAME, REC_STACK = 1, 2, 3
REC_ALLOC, REC_FREE_REQUESTED, REC_FREE_COMPLETED = 10, 11, 12
REC_SEGMENT_ALLOC, REC_SEGMENT_FREE, REC_SEGMENT_MAP, REC_SEGMENT_UNMAP = 13, 14, 15, 16
REC_EMPTY_CACHE, REC_OOM, REC_STATE = 20, 21, 30
REC_DEVICE_SAMPLE, REC_MARKER, REC_NOTICE, REC_STATS, REC_DEVICE = 40, 41, 42, 43, 44
REC_LOST, REC_END = 50, 60
INTERNED = (REC_STRING, REC_FRAME, REC_STACK)

POOL_SMALL, POOL_LARGE, POOL_PRIVATE, SEG_EXPANDABLE = 1, 2, 4, 8
STACK_BACKWARD = 1
MARK_INSTANT, MARK_BEGIN, MARK_END, MARK_SNAPSHOT = 0, 1, 2, 3

STRING = struct.Struct("<II")
FRAME = struct.Struct("<IIII")
STACK = struct.Struct("<III")
BLOCK_EVENT = struct.Struct("<QQQQQII")
SEGMENT_EVENT = struct.Struct("<QQQQQQII")
EMPTY_CACHE = struct.Struct("<QQQII")
DEVICE_SAMPLE = struct.Struct("<QQQQ")
MARKER = struct.Struct("<QII")
STATS = struct.Struct("<QQQQQQQQQ")
DEVICE = struct.Struct("<QQII")
END = struct.Struct("<QiI")
OOM = struct.Struct("<QQQQQQQQQII")
T_NS = struct.Struct("<Q")

assert OOM.size == 80 and BLOCK_EVENT.size == 48 and SEGMENT_EVENT.size == 56 and FILE_HEADER.size == 16 and RECORD_HEADER.size == 8


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
PAGE = 2 << 20


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
