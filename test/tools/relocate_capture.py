#!/usr/bin/env python3
"""Rewrite path prefixes inside a capture file (header JSON and interned STRING records), leaving every
other byte as it was. Used to commit GPU-recorded fixtures without the recording machine's paths:

    python3 test/tools/relocate_capture.py IN.gpumem OUT.gpumem OLD_PREFIX=NEW_PREFIX [...]

Layout per native/format/gpumem_format.h: FileHeader (8 magic, u16 major, u16 minor, u32 json_bytes), the
header JSON, then records (u8 type, u8 device, u16 flags, u32 payload_bytes, payload). REC_STRING = 1 with
payload (u32 id, u32 len, bytes).
"""
import json
import struct
import sys

REC_STRING = 1


def relocate(text, pairs):
    for old, new in pairs:
        if text.startswith(old):
            return new + text[len(old):]
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
    magic, major, minor, json_bytes = struct.unpack_from("<8sHHI", data, 0)
    if magic != b"GPUMEM\r\n":
        sys.exit(f"{src}: not a GPU Memory Lens capture")
    header = json.loads(data[16:16 + json_bytes])
    new_header = json.dumps(relocate_json(header, pairs), separators=(",", ":")).encode()
    out = bytearray(struct.pack("<8sHHI", magic, major, minor, len(new_header)) + new_header)
    off = 16 + json_bytes
    while off + 8 <= len(data):
        rtype, dev, flags, n = struct.unpack_from("<BBHI", data, off)
        payload = data[off + 8:off + 8 + n]
        if len(payload) < n:
            break  # a truncated tail stays truncated
        if rtype == REC_STRING:
            sid, length = struct.unpack_from("<II", payload, 0)
            text = relocate(payload[8:8 + length].decode(), pairs).encode()
            payload = struct.pack("<II", sid, len(text)) + text + payload[8 + length:]
        out += struct.pack("<BBHI", rtype, dev, flags, len(payload)) + payload
        off += 8 + n
    out += data[off:]
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
