"""This process's own capture, read back while it grows: what a piece of the run (a test, a cell) allocated itself,
and its lines, between two markers.

Note [Windows]: the pytest plugin and the IPython extension measure a piece of a run (a test, a cell) as a
window of the capture between a MARK_BEGIN and a MARK_END of one name, written by the bootstrap itself
(gpumem/_meter.py). What a window gives (Note [Piece figures] in _meter.py says which figure comes from where):
- its own peak: the most bytes the blocks allocated inside the window held at once, blocks that were live when it
  opened left out, whether the piece frees them or not: the same in every order of the tests or cells;
- the lines at that moment: the blocks allocated inside the window and live then, by line, so another piece's
  leftovers never show as this one's;
- the replayed peak of allocated (what was live at the start included), which must equal PyTorch's
  max_memory_allocated() inside the piece: the tests hold the capture to it;
- whether the window is whole: no REC_LOST read since it opened, and no MARK_EVENTS_OFF before its end (Note
  [Recorded steps] in _recorded_steps.py: no allocation is recorded after it).
Reading them back here, in Python, keeps both tools free of Node.js (GPU machines often have none) and costs one
pass over the new records:
- the records are read incrementally (a CaptureTail follows the file and keeps the interned tables and the live
  blocks, as a tailing reader does: FORMAT.md §3), so a session of a thousand tests reads its capture once;
- allocated moves at REC_ALLOC and REC_FREE_REQUESTED, by the block's size, exactly as the reader's model does
  (native/addon/src/model.cpp derive()); a peak is the first event that reaches the maximum;
- a line is the innermost frame the caller's rule accepts (is_user_file by default; a notebook's cells for the
  IPython extension), so both tools attribute as the panels do (Note [User frames]);
- records reach the file within 50 ms (FORMAT.md §3, Freshness): the end marker is written after the window's
  last event on the same thread (in the observed mode through the same queue as the events: Note [Deferred
  observation] in native/allocator/src/sequencer.h), so once it is read, every event of the window has been read
  too. We wait for it at most a few seconds; a window whose end never shows (a writer that stopped) gives no lines,
  never a hang;
- a compaction renames a new file over the old one (FORMAT.md §5): the tail sees the inode change and reads the
  new file from its start (its restated block events replay like the originals).
"""
import os
import time

from . import _format as F
from ._where import _internal_dirs, is_user_file

NO_LINE = ("<no user frame>", 0, "")


class Window:
    __slots__ = ("name", "base", "events", "done", "losses", "whole")

    def __init__(self, name, base, losses=0, whole=True):
        self.name = name
        self.base = base      # {(device, addr): (size, stack)} live when the window opened
        self.events = []      # (device, is_alloc, addr, size, stack) in file order
        self.done = False
        self.losses = losses  # the tail's REC_LOST count when it opened
        self.whole = whole    # False once allocations inside it went unrecorded (events off)


class CaptureTail:
    def __init__(self, path):
        self.path = path
        self.wanted = {}      # name → None (waiting for its begin marker) | Window
        # REC_LOST records read; a compacted file read from its start counts its own again, so a window open across
        # a compaction errs towards "not whole", never the other way
        self.losses = 0
        self.events_off = False  # MARK_EVENTS_OFF read: no allocation is recorded from there on
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
            self.wanted[name] = Window(name, {}, self.losses, not self.events_off)
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
                if kind == F.MARK_EVENTS_OFF:
                    self.events_off = True
                    for w in self.wanted.values():
                        if w is not None and not w.done:
                            w.whole = False
                    continue
                name = self.strings.get(name_id)
                if name in self.wanted:
                    w = self.wanted[name]
                    if kind == F.MARK_BEGIN and w is None:
                        self.wanted[name] = Window(name, dict(self.live), self.losses, not self.events_off)
                    elif kind == F.MARK_END and w is not None:
                        w.done = True
            elif rtype == F.REC_LOST:
                self.losses += 1
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
    """What `window` shows on `device` (Note [Windows]), bytes:
    "start", "peak", "end": allocated as the capture replays it, what was live at the window's start included;
    "own_peak": the most bytes the window's own blocks (allocated inside it) held at once;
    "lines": [(file, line, function, bytes)] of the window's own blocks live at that moment, largest first (at most
    `top`); "whole": no allocation inside the window went unrecorded (no REC_LOST read since it opened, events on)."""
    is_line = is_line or user_rule()
    start = sum(size for (d, _a), (size, _s) in window.base.items() if d == device)
    a, peak = start, start
    own, own_peak, own_peak_i = 0, 0, -1
    mine = {}             # addr → size: the window's own blocks live now
    events = [e for e in window.events if e[0] == device]
    for i, (_d, alloc, addr, size, _stack) in enumerate(events):
        if alloc:
            a += size
            mine[addr] = size
            own += size
        else:
            a -= size
            own -= mine.pop(addr, 0)   # a block live before the window is not the window's
        peak = max(peak, a)
        if own > own_peak:
            own_peak, own_peak_i = own, i
    live = {}
    for _d, alloc, addr, size, stack in events[:own_peak_i + 1]:
        if alloc:
            live[addr] = (size, stack)
        else:
            live.pop(addr, None)
    by_line, memo = {}, {}
    for size, stack in live.values():
        where = memo.get(stack)
        if where is None:
            where = memo[stack] = tail.line_of(stack, is_line)
        by_line[where] = by_line.get(where, 0) + size
    lines = sorted(((f, ln, fn, b) for (f, ln, fn), b in by_line.items()), key=lambda r: (-r[3], r[0], r[1]))
    return {"start": start, "peak": peak, "end": a, "own_peak": own_peak, "lines": lines[:top],
            "whole": window.whole and tail.losses == window.losses}
