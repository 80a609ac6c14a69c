#!/usr/bin/env python3
"""Rewrite path prefixes inside a capture file (header JSON and interned STRING records), leaving every
other byte as it was. Used to commit GPU-recorded fixtures without the recording machine's paths:

    python3 test/tools/relocate_capture.py IN.gpumem OUT.gpumem OLD_PREFIX=NEW_PREFIX [...]

Layouts from the module generated from native/format/gpumem_format.h (FileHeader, the header JSON, then
RecordHeader + payload records; REC_STRING payloads are StringRec + bytes).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "python"))
from gpumem import _format as F  # noqa: E402


def relocate(text, pairs):
    for old, new in pairs:
        if text.startswith(old):
            return new + text[len(old):]
    return text


def relocate_inside(text, pairs):
    """A path inside a longer string (a notice's sentence, the leak keeper's JSON line): each OLD_PREFIX that starts
    a path (after a space or a quote) becomes NEW_PREFIX."""
    text = relocate(text, pairs)
    for old, new in pairs:
        for lead in (" ", '"', "'"):
            text = text.replace(lead + old, lead + new)
    return text


def relocate_json(value, pairs):
    if isinstance(value, str):
        # first_cuda_init is "file:line in fn": only its prefix is a path.
        return relocate(value, pairs)
    if isinstance(value, list):
        return [relocate_json(v, pairs) for v in value]
    if isinstance(value, dict):
        return {k: relocate_json(v, pairs) for k, v in value.items()}
    return value


def main():
    src, dst, *specs = sys.argv[1:]
    pairs = [tuple(s.split("=", 1)) for s in specs]
    data = open(src, "rb").read()
    try:
        major, minor, header, off = F.read_header(data)
    except ValueError as e:
        sys.exit(f"{src}: {e}")
    new_header = json.dumps(relocate_json(header, pairs), separators=(",", ":")).encode()
    out = bytearray(F.FileHeader.pack(F.kMagic, major, minor, len(new_header)) + new_header)
    dropped_index = False
    for at, rtype, dev, flags, payload in F.records(data, off):
        off = at + F.RecordHeader.size + len(payload)  # end of the last whole record read
        if rtype == F.REC_INDEX and any(old.encode() in payload for old, _ in pairs):
            # The index's sections name files inside their own layout: rather than a stale path, no index (a reader
            # then makes its first view from a pass over the records, as for a capture that ended uncleanly).
            dropped_index = True
            continue
        if rtype == F.REC_END and dropped_index:
            payload = payload[:F.EndRec.offsets["index_bytes"]] + b"\0\0\0\0" + payload[F.EndRec.offsets["index_bytes"] + 4:]  # index_bytes
        if rtype == F.REC_STRING:
            sid, length = F.StringRec.unpack_from(payload)
            body = payload[F.StringRec.size:F.StringRec.size + length]
            payload = F.pack_string(sid, relocate_inside(body.decode(), pairs)) + payload[F.StringRec.size + length:]
        out += F.record(rtype, payload, dev, flags)
    out += data[off:]  # a truncated tail stays truncated
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
