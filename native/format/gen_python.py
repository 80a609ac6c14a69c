#!/usr/bin/env python3
"""Generates native/python/gpumem/_format.py from gpumem_format.h, the capture format's one contract.

    python3 native/format/gen_python.py            rewrite the generated module
    python3 native/format/gen_python.py --check    exit 1 (and say how to fix it) when it is out of date
    python3 native/format/gen_python.py --stdout   print what would be written

Note [Generated format module]: the C header is the only place a record's layout is declared. Python code
that reads or writes capture bytes (the bootstrap, tests, fixture generators, tools) imports the generated
module instead of spelling `struct.Struct("<QQQQQII")` itself, so a field added on one side cannot be
forgotten on the other: test/python/test_format_contract.py regenerates the module (it must be byte-identical
to the committed one) and compiles the header to compare every struct's size and every field's offset.
Names are the C names, unchanged (REC_ALLOC, kPoolSmall, BlockEvent, MARK_STEP): one spelling to grep for.

The parser understands exactly the subset of C the header uses — `GPUMEM_CONSTEXPR` scalars and the magic
array, `enum Name : type { A = n, ... }`, and packed `struct`s of fixed-width integers and arrays — and stops
with the line number on anything else, so a new construct in the header is a loud failure here, not a
silently wrong module.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "gpumem_format.h")
OUT = os.path.join(HERE, "..", "python", "gpumem", "_format.py")

# C type → (struct code, size). Everything is little-endian and packed (#pragma pack(1)).
CTYPES = {"uint8_t": ("B", 1), "int8_t": ("b", 1), "char": ("s", 1), "uint16_t": ("H", 2), "int16_t": ("h", 2),
          "uint32_t": ("I", 4), "int32_t": ("i", 4), "uint64_t": ("Q", 8), "int64_t": ("q", 8)}


class HeaderError(Exception):
    pass


def strip_comments(text):
    """Removes // comments, keeping line numbers (block comments are not used by the header)."""
    if "/*" in text:
        raise HeaderError("gpumem_format.h: /* */ comments are not understood by gen_python.py; use //")
    return [re.sub(r"//.*", "", line).rstrip() for line in text.split("\n")]


def parse(text):
    lines, raw = strip_comments(text), text.split("\n")
    consts, enums, structs, asserts = [], [], [], []
    i = 0
    while i < len(lines):
        line, lineno = lines[i].strip(), i + 1
        i += 1
        if not line or line.startswith("#") or line in ("}", "};") or line.startswith("namespace") or \
                line.startswith("}  ") or line == "} }":
            continue
        m = re.match(r"GPUMEM_CONSTEXPR\s+(\w+)\s+(\w+)(\[\d+\])?\s*=\s*(.+);$", line)
        if m:
            ctype, name, array, value = m.groups()
            if array:
                chars = re.findall(r"'(\\?.)'", value)
                if ctype != "char" or not chars:
                    raise HeaderError(f"gpumem_format.h:{lineno}: only char arrays of character literals are understood")
                esc = {"\\r": "\r", "\\n": "\n", "\\0": "\0", "\\t": "\t"}
                consts.append((name, bytes("".join(esc.get(c, c) for c in chars), "latin-1")))
            else:
                expr = re.sub(r"(\d+)u\b", r"\1", value)
                if not re.fullmatch(r"[\d\s<>()|]+", expr):
                    raise HeaderError(f"gpumem_format.h:{lineno}: constant {name} = {value} is not a plain integer expression")
                consts.append((name, eval(expr, {"__builtins__": {}})))  # digits, shifts and ors only (checked)
            continue
        m = re.match(r"enum\s+(\w+)\s*:\s*(\w+)\s*\{$", line)
        if m:
            name, members = m.group(1), []
            while True:
                body, bodyno = lines[i].strip(), i + 1
                i += 1
                if body == "};":
                    break
                if not body:
                    continue
                mm = re.fullmatch(r"(\w+)\s*=\s*(\d+),?", body)
                if not mm:
                    raise HeaderError(f"gpumem_format.h:{bodyno}: enum member '{body}' must be NAME = number")
                # The comment's first word, when it names a struct, is the record's payload layout.
                doc = re.search(r"//\s*(\w+)", raw[bodyno - 1])
                members.append((mm.group(1), int(mm.group(2)), doc.group(1) if doc else None))
            enums.append((name, m.group(2), members))
            continue
        m = re.match(r"struct\s+(\w+)\s*\{$", line)
        if m:
            name, fields = m.group(1), []
            while True:
                body, bodyno = lines[i].strip(), i + 1
                i += 1
                if body == "};":
                    break
                if not body:
                    continue
                mm = re.fullmatch(r"(\w+)\s+(\w+(?:\s*,\s*\w+)*)(?:\[(\d+)\])?;", body)
                if not mm or mm.group(1) not in CTYPES or ("," in mm.group(2) and mm.group(3)):
                    raise HeaderError(f"gpumem_format.h:{bodyno}: struct field '{body}' must be a fixed-width integer "
                                      f"or an array of one ({', '.join(CTYPES)})")
                for fname in re.split(r"\s*,\s*", mm.group(2)):  # `int64_t a, b;` declares two fields
                    fields.append((fname, mm.group(1), int(mm.group(3) or 0)))
            structs.append((name, fields))
            continue
        m = re.match(r'static_assert\(sizeof\((\w+)\)\s*==\s*(\d+),', line)
        if m:
            asserts.append((m.group(1), int(m.group(2))))
            continue
        if line in ("#pragma pack(push, 1)", "#pragma pack(pop)"):
            continue
        raise HeaderError(f"gpumem_format.h:{lineno}: gen_python.py does not understand '{line}'; "
                          "teach it (native/format/gen_python.py) or keep the header to its subset")
    return consts, enums, structs, asserts


def layout(fields):
    """struct format, field names (pads that are byte arrays become `x` and are not fields), offsets, size."""
    fmt, names, offsets, off = "<", [], [], 0
    for fname, ctype, count in fields:
        code, size = CTYPES[ctype]
        if count and ctype == "char":
            fmt += f"{count}s"
            names.append(fname)
            offsets.append(off)
        elif count and fname.startswith("pad"):
            fmt += f"{count}x"  # padding bytes: zero when packed, skipped when unpacked
        elif count:
            raise HeaderError(f"array field {fname}[{count}] of {ctype} is not understood (only char arrays and pads)")
        else:
            fmt += code
            names.append(fname)
            offsets.append(off)
        off += size * (count or 1)
    return fmt, names, offsets, off


RUNTIME = '''

class Layout(struct.Struct):
    """One packed struct of gpumem_format.h: a little-endian struct.Struct plus its C name, field names and
    field offsets. Byte-array pads (`uint8_t pad[3]`) are `x` bytes: packed as zeros, never a field."""

    def __init__(self, name, fmt, fields, offsets):
        super().__init__(fmt)
        self.name, self.fields, self.offsets = name, fields, dict(zip(fields, offsets))

    def unpack_dict(self, buffer, offset=0):
        """The fields as a dict (for tests and tools that prefer names to positions)."""
        return dict(zip(self.fields, self.unpack_from(buffer, offset)))

    def prefix(self, last_field):
        """The layout up to and including `last_field`: an older, shorter version of a record that grew at its
        end (Note [Versioning]), e.g. EndRec.prefix("reason") is the 16-byte EndRec of minor <= 1."""
        if last_field not in self.fields:
            raise KeyError(f"{self.name} has no field {last_field!r}; fields: {', '.join(self.fields)}")
        n = self.fields.index(last_field) + 1
        codes = re.findall(r"\\d*[a-zA-Z]", self.format[1:])
        kept, seen = [], 0
        for code in codes:
            if seen == n:
                break
            kept.append(code)
            if not code.endswith("x"):
                seen += 1
        return Layout(f"{self.name}[..{last_field}]", "<" + "".join(kept), self.fields[:n], [self.offsets[f] for f in self.fields[:n]])

    def __repr__(self):
        return f"<Layout {self.name} {self.format!r} ({self.size} bytes)>"
'''


# The variable parts the header declares in comments (StackRec's frame ids, StringRec's bytes).
VARIABLE = '''
def frame_ids(payload, nframes, offset=0):
    """The `nframes` uint32 frame ids after the StackRec at `offset` of `payload`, innermost first."""
    return struct.unpack_from(f"<{nframes}I", payload, offset + StackRec.size)


def pack_stack(stack_id, flags, frame_ids):
    """A REC_STACK payload: StackRec + the frame ids (innermost first)."""
    return StackRec.pack(stack_id, flags, len(frame_ids)) + struct.pack(f"<{len(frame_ids)}I", *frame_ids)


def pack_string(string_id, data):
    """A REC_STRING payload: StringRec + the bytes (`data`: bytes, or str written as UTF-8)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return StringRec.pack(string_id, len(data)) + data


def record(rtype, payload, device=0, flags=0):
    """One whole record: RecordHeader + payload."""
    return RecordHeader.pack(rtype, device, flags, len(payload)) + payload


def read_header(data):
    """(major, minor, header JSON as a dict, offset of the first record) of a capture's bytes."""
    if len(data) < FileHeader.size or data[:len(kMagic)] != kMagic:
        raise ValueError("not a GPU Memory Lens capture (no GPUMEM magic): expected a file written by the lens allocator")
    _, major, minor, json_bytes = FileHeader.unpack_from(data)
    end = FileHeader.size + json_bytes
    return major, minor, json.loads(data[FileHeader.size:end].decode("utf-8")), end


def records(data, offset):
    """(offset, type, device, flags, payload) of each whole record from `offset`; stops at a torn tail."""
    while offset + RecordHeader.size <= len(data):
        rtype, device, flags, n = RecordHeader.unpack_from(data, offset)
        start = offset + RecordHeader.size
        if start + n > len(data):
            return
        yield offset, rtype, device, flags, data[start:start + n]
        offset = start + n
'''


def generate(text):
    consts, enums, structs, asserts = parse(text)
    out = ['# GENERATED by native/format/gen_python.py from native/format/gpumem_format.h. DO NOT EDIT.',
           '# Change the header, then run `python3 native/format/gen_python.py` (Note [Generated format module]).',
           '# test/python/test_format_contract.py fails when this file and the header disagree.',
           '"""The capture format (native/format/gpumem_format.h) for Python: constants, record types and one',
           'Layout (a little-endian struct.Struct with field names and offsets) per packed struct."""',
           'import json',
           'import re',
           'import struct', '']
    out.append("# ---- constants")
    for name, value in consts:
        out.append(f"{name} = {value!r}")
    for ename, etype, members in enums:
        out.append("")
        out.append(f"# ---- enum {ename} : {etype}")
        for mname, v, _ in members:
            out.append(f"{mname} = {v}")
        out.append(f"{ename} = {{{', '.join(f'{v}: {mname!r}' for mname, v, _ in members)}}}")
    out.append(RUNTIME.rstrip("\n"))
    out.append("")
    out.append("")
    out.append("# ---- packed structs (sizes pinned by the header's static_asserts and the contract test)")
    for sname, fields in structs:
        fmt, names, offsets, size = layout(fields)
        out.append(f"{sname} = Layout({sname!r}, {fmt!r}, {tuple(names)!r}, {tuple(offsets)!r})  # {size} bytes")
    out.append("")
    out.append(VARIABLE.strip("\n"))
    out.append("")
    out.append("LAYOUTS = {" + ", ".join(f"{s!r}: {s}" for s, _ in structs) + "}")
    # Each record type's payload layout, from the first word of its comment in `enum RecordType`.
    names = {s for s, _ in structs}
    rtypes = next((m for e, _, m in enums if e == "RecordType"), None)
    if rtypes is None:
        raise HeaderError("gpumem_format.h has no enum RecordType")
    missing = [mname for mname, _, doc in rtypes if doc not in names]
    if missing:
        raise HeaderError(f"record type(s) {', '.join(missing)}: the comment after the value must start with the "
                          "payload struct's name (e.g. `REC_ALLOC = 10,  // BlockEvent: ...`)")
    out.append("# Record type -> its payload's layout (the payload may be longer: variable parts, newer minors).")
    out.append("PAYLOAD = {" + ", ".join(f"{mname}: {doc}" for mname, _, doc in rtypes) + "}")
    out.append("# The header's static_asserts: struct name -> size in bytes.")
    out.append("STATIC_ASSERTS = {" + ", ".join(f"{s!r}: {n}" for s, n in asserts) + "}")
    out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--stdout", action="store_true")
    args = ap.parse_args()
    with open(HEADER, encoding="utf-8") as f:
        try:
            text = generate(f.read())
        except HeaderError as e:
            sys.exit(f"gen_python.py: {e}")
    if args.stdout:
        sys.stdout.write(text)
        return
    out = os.path.normpath(OUT)
    if args.check:
        have = open(out, encoding="utf-8").read() if os.path.exists(out) else None
        if have != text:
            sys.exit(f"{os.path.relpath(out)} is out of date with gpumem_format.h: run python3 native/format/gen_python.py")
        return
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
