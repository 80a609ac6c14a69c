"""A tiny reader of gpumem capture files for the recorder's tests (spec: native/format/FORMAT.md).

Independent of the writer's code on purpose: it decodes from the documented layout, so a test that
passes proves the bytes follow the spec, not merely that writer and reader agree.
"""
import json
import struct

MAGIC = b"GPUMEM\r\n"
REC = {1: "string", 2: "frame", 3: "stack", 10: "alloc", 11: "free_requested", 12: "free_completed",
       13: "segment_alloc", 14: "segment_free", 15: "segment_map", 16: "segment_unmap", 20: "empty_cache",
       21: "oom", 30: "state", 40: "device_sample", 41: "marker", 42: "notice", 43: "stats", 44: "device",
       50: "lost", 60: "end"}
BLOCK = struct.Struct("<QQQQQII")            # BlockEvent
SEGMENT = struct.Struct("<QQQQQQII")         # SegmentEvent
STATE = struct.Struct("<QIIII")              # StateRec
STATE_SEG = struct.Struct("<QQQQQIHHII")     # StateSegment
STATE_BLOCK = struct.Struct("<QQQIB3x")      # StateBlock


class Capture:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        assert data[:8] == MAGIC, "bad magic"
        self.major, self.minor, jn = struct.unpack_from("<HHI", data, 8)
        self.header = json.loads(data[16:16 + jn])
        self.strings, self.frames, self.stacks = {}, {}, {}
        self.records = []  # (type name, device, flags, payload, offset)
        pos = 16 + jn
        self.truncated = False
        while pos < len(data):
            if pos + 8 > len(data):
                self.truncated = True
                break
            t, dev, flags, n = struct.unpack_from("<BBHI", data, pos)
            if pos + 8 + n > len(data):
                self.truncated = True
                break
            p = data[pos + 8:pos + 8 + n]
            name = REC.get(t, "unknown")
            if name == "string":
                sid, ln = struct.unpack_from("<II", p)
                self.strings[sid] = p[8:8 + ln].decode()
            elif name == "frame":
                fid, f, fn, line = struct.unpack_from("<IIII", p)
                assert f in self.strings and fn in self.strings, "frame before its strings"
                self.frames[fid] = (self.strings[f], self.strings[fn], line)
            elif name == "stack":
                sid, sflags, nf = struct.unpack_from("<III", p)
                ids = struct.unpack_from("<%dI" % nf, p, 12)
                assert all(i in self.frames for i in ids), "stack before its frames"
                self.stacks[sid] = (sflags, [self.frames[i] for i in ids])
            self.records.append((name, dev, flags, p, pos))
            pos += 8 + n

    def of(self, name):
        return [r for r in self.records if r[0] == name]

    def blocks(self, name):
        """Block events as dicts, in file order."""
        out = []
        for _, dev, flags, p, off in self.of(name):
            t, addr, size, req, stream, stack, thread = BLOCK.unpack_from(p)
            assert stack == 0 or stack in self.stacks, "event before its stack"
            out.append(dict(t=t, addr=addr, size=size, requested=req, stream=stream, stack=stack,
                            thread=thread, device=dev, flags=flags, offset=off))
        return out

    def state(self, payload):
        t, sid, reason, nseg, _ = STATE.unpack_from(payload)
        pos, segs = STATE.size, []
        for _ in range(nseg):
            addr, size, stream, p0, p1, stack, flags, _, nblocks, _ = STATE_SEG.unpack_from(payload, pos)
            pos += STATE_SEG.size
            blocks = []
            for _ in range(nblocks):
                baddr, bsize, breq, bstack, bstate = STATE_BLOCK.unpack_from(payload, pos)
                pos += STATE_BLOCK.size
                blocks.append(dict(addr=baddr, size=bsize, requested=breq, stack=bstack, state=bstate))
            segs.append(dict(addr=addr, size=size, stream=stream, pool=(p0, p1), stack=stack, flags=flags,
                             blocks=blocks))
        assert pos == len(payload), "state payload length"
        return dict(t=t, id=sid, reason=reason, segments=segs)
