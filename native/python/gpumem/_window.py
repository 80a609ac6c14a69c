"""This process's own capture, read back while it grows: what was live at the peak between two markers.

Note [Windows]: the pytest plugin and the IPython extension measure a piece of a run (a test, a cell) as a
window of the capture between a MARK_BEGIN and a MARK_END of one name, written by the bootstrap itself
(gpumem/_meter.py). The figures of a window (peak allocated, added to allocated and reserved) come from the
allocator's own counters through torch.cuda's API, so they equal what `torch.cuda.max_memory_allocated()` says
inside the test or cell; only the *lines* at the peak come from the capture. Reading them back here, in Python,
keeps both tools free of Node.js (GPU machines often have none) and costs one pass over the new records:
- the records are read incrementally (a CaptureTail follows the file and keeps the interned tables and the live
  blocks, as a tailing reader does: FORMAT.md §3), so a session of a thousand tests reads its capture once;
- allocated moves at REC_ALLOC and REC_FREE_REQUESTED, by the block's size, exactly as the reader's model does
  (native/addon/src/model.cpp derive()); the peak is the first event that reaches the maximum;
- a line is the innermost frame the caller's rule accepts (is_user_file by default; a notebook's cells for the
  IPython extension), so both tools attribute as the panels do (Note [User frames]);
- records reach the file within 50 ms (FORMAT.md §3, Freshness): the end marker is written after the window's
  last event on the same thread, so once it is read, every event of the window has been read too. We wait for
  it at most a few seconds; a window whose end never shows (a writer that stopped) gives no lines, never a hang;
- a compaction renames a new file over the old one (FORMAT.md §5): the tail sees the inode change and reads the
  new file from its start (its restated block events replay like the originals).
"""
import os
import time

from . import _format as F
from ._where import _internal_dirs, is_user_file

NO_LINE = ("<no user frame>", 0, "")


class Window:
    __slots__ = ("name", "base", "events", "done")

    def __init__(self, name, base):
        self.name = name
        self.base = base      # {(device, addr): (size, stack)} live when the window opened
        self.events = []      # (device, is_alloc, addr, size, stack) in file order
        self.done = False


class CaptureTail:
    def __init__(self, path):
        self.path = path
        self.wanted = {}      # name → None (waiting for its begin marker) | Window
        self._reset()

    def _reset(self):
        self.pos = None       # offset of the next record; None until the header was read
        self.ino = None
        self.strings, self.frames, self.stacks = {}, {}, {}
        self.live = {}

    # ---- what the callers ask ---------------------------------------------------------------------------
    def want(self, name, from_start=False):
        """Open a window at the next begin marker called `name` (or at the capture's start: the capture did not
        exist yet when the piece began, so it holds nothing older)."""
        if from_start and self.pos is None:
            self.wanted[name] = Window(name, {})
        else:
            self.wanted[name] = None

    def drop(self, name):
        self.wanted.pop(name, None)

    def wait(self, name, timeout=3.0):
        """The window `name` once its end marker was read, or None after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            w = self.wanted.get(name)
            if w is not None and w.done:
                del self.wanted[name]
                return w
            if time.monotonic() >= deadline:
                self.wanted.pop(name, None)
                return None
            time.sleep(0.01)

    # ---- reading ------------------------------------------------------------------------------------------
    def poll(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return
        if self.ino is not None and st.st_ino != self.ino:  # compacted: a new file was renamed over it
            wanted = self.wanted
            self._reset()
            self.wanted = {n: (w if w is not None and w.done else None) for n, w in wanted.items()}
        try:
            with open(self.path, "rb") as f:
                self.ino = os.fstat(f.fileno()).st_ino
                if self.pos is None:
                    data = f.read()
                    try:
                        _, _, _, self.pos = F.read_header(data)
                    except (ValueError, UnicodeDecodeError):
                        return  # still starting
                    data = data[self.pos:]
                else:
                    f.seek(self.pos)
                    data = f.read()
        except OSError:
            return
        used = self._feed(data)
        self.pos += used

    def _feed(self, data):
        """Apply each whole record of `data`; returns the bytes used (a torn tail waits for the next poll)."""
        end = 0
        for offset, rtype, device, _flags, payload in F.records(data, 0):
            end = offset + F.RecordHeader.size + len(payload)
            if rtype == F.REC_ALLOC or rtype == F.REC_FREE_REQUESTED:
                _t, addr, size, _req, _stream, stack, _thread = F.BlockEvent.unpack_from(payload)
                key = (device, addr)
                alloc = rtype == F.REC_ALLOC
                if alloc:
                    self.live[key] = (size, stack)
                else:
                    self.live.pop(key, None)
                for w in self.wanted.values():
                    if w is not None and not w.done:
                        w.events.append((device, alloc, addr, size, stack))
            elif rtype == F.REC_STRING:
                sid, n = F.StringRec.unpack_from(payload)
                self.strings[sid] = payload[F.StringRec.size:F.StringRec.size + n].decode("utf-8", "replace")
            elif rtype == F.REC_FRAME:
                fid, file_, func, line = F.FrameRec.unpack_from(payload)
                self.frames[fid] = (file_, func, line)
            elif rtype == F.REC_STACK:
                sid, flags, n = F.StackRec.unpack_from(payload)
                self.stacks[sid] = (flags, F.frame_ids(payload, n))
            elif rtype == F.REC_MARKER:
                _t, name_id, kind = F.MarkerRec.unpack_from(payload)
                name = self.strings.get(name_id)
                if name in self.wanted:
                    w = self.wanted[name]
                    if kind == F.MARK_BEGIN and w is None:
                        self.wanted[name] = Window(name, dict(self.live))
                    elif kind == F.MARK_END and w is not None:
                        w.done = True
        return end

    # ---- answers ------------------------------------------------------------------------------------------
    def frame(self, fid):
        file_id, func_id, line = self.frames.get(fid, (None, None, 0))
        return self.strings.get(file_id, "?"), line, self.strings.get(func_id, "?")

    def line_of(self, stack, is_line):
        """(file, line, function) of the innermost frame `is_line(file)` accepts; NO_LINE when none does."""
        flags, fids = self.stacks.get(stack, (0, ()))
        for fid in fids:
            file_, line, func = self.frame(fid)
            if is_line(file_):
                return (file_, line, func + (" (backward)" if flags & F.kStackBackward else ""))
        return NO_LINE


def user_rule():
    internal = _internal_dirs()
    return lambda path: is_user_file(path, internal)


def analyse(tail, window, device, is_line=None, top=5):
    """{"start", "peak", "end": allocated bytes per the capture; "lines": [(file, line, function, bytes)] live at
    the peak, largest first (at most `top`), "peak_bytes_attributed"} of `window` on `device`."""
    is_line = is_line or user_rule()
    base = {k: v for k, v in window.base.items() if k[0] == device}
    start = sum(size for size, _ in base.values())
    a, peak, peak_i = start, start, -1
    events = [e for e in window.events if e[0] == device]
    for i, (_d, alloc, _addr, size, _stack) in enumerate(events):
        a += size if alloc else -size
        if a > peak:
            peak, peak_i = a, i
    live = dict(base)
    for _d, alloc, addr, size, stack in events[:peak_i + 1]:
        if alloc:
            live[(device, addr)] = (size, stack)
        else:
            live.pop((device, addr), None)
    by_line, memo = {}, {}
    for size, stack in live.values():
        where = memo.get(stack)
        if where is None:
            where = memo[stack] = tail.line_of(stack, is_line)
        by_line[where] = by_line.get(where, 0) + size
    lines = sorted(((f, ln, fn, b) for (f, ln, fn), b in by_line.items()), key=lambda r: (-r[3], r[0], r[1]))
    return {"start": start, "peak": peak, "end": a, "lines": lines[:top]}
