"""A tiny reader of gpumem capture files for the recorder's tests (spec: native/format/FORMAT.md).

Independent of the writer's code on purpose: it decodes from the documented layout, so a test that
passes proves the bytes follow the spec, not merely that writer and reader agree. The layouts come from the
format module generated from the spec's header (Note [Generated format module]), never re-declared here.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
from gpumem import _format as F  # noqa: E402

MAGIC = F.kMagic
# Record type -> the short name the tests use ("alloc", "segment_map", ...): the header's REC_* name, lowered.
REC = {code: name[len("REC_"):].lower() for code, name in F.RecordType.items()}
BLOCK = F.BlockEvent
SEGMENT = F.SegmentEvent
STATE = F.StateRec
STATE_SEG = F.StateSegment
STATE_BLOCK = F.StateBlock


class Capture:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        assert data[:8] == MAGIC, "bad magic"
        _, self.major, self.minor, jn = F.FileHeader.unpack_from(data)
        self.header = json.loads(data[F.FileHeader.size:F.FileHeader.size + jn])
        self.strings, self.frames, self.stacks = {}, {}, {}
        self.records = []  # (type name, device, flags, payload, offset)
        pos = F.FileHeader.size + jn
        self.truncated = False
        while pos < len(data):
            hn = F.RecordHeader.size
            if pos + hn > len(data):
                self.truncated = True
                break
            t, dev, flags, n = F.RecordHeader.unpack_from(data, pos)
            if pos + hn + n > len(data):
                self.truncated = True
                break
            p = data[pos + hn:pos + hn + n]
            name = REC.get(t, "unknown")
            if name == "string":
                sid, ln = F.StringRec.unpack_from(p)
                self.strings[sid] = p[F.StringRec.size:F.StringRec.size + ln].decode()
            elif name == "frame":
                fid, f, fn, line = F.FrameRec.unpack_from(p)
                assert f in self.strings and fn in self.strings, "frame before its strings"
                self.frames[fid] = (self.strings[f], self.strings[fn], line)
            elif name == "stack":
                sid, sflags, nf = F.StackRec.unpack_from(p)
                ids = F.frame_ids(p, nf)
                assert all(i in self.frames for i in ids), "stack before its frames"
                self.stacks[sid] = (sflags, [self.frames[i] for i in ids])
            self.records.append((name, dev, flags, p, pos))
            pos += hn + n

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
