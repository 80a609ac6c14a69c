"""The PyTorch-allocator mode's queue (Note [Deferred observation] in native/allocator/src/sequencer.h), through
the real .so as the live trace tracker drives it (gpumem_observe_event_queued): the capture is the one that applying
each entry where it comes writes (GPUMEM_OBSERVE_INLINE=1), record for record, with markers, tags, labels and
entries from a second thread in their places; figures read while entries are queued include them; a queue the
sequencer's thread cannot keep up with is applied by the thread that fills it, nothing lost."""
import json
import os
import subprocess
import sys
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _format as F  # noqa: E402

# The library as the live tracker calls it: the queued entry point (`ev`).
PREAMBLE = r"""
import ctypes as c, json, sys, threading
lib = c.CDLL(sys.argv[1])
lib.gpumem_configure.argtypes = [c.c_char_p]
lib.gpumem_observe_start.argtypes = [c.c_void_p, c.c_void_p]
ev = lib.gpumem_observe_event_queued
ev.argtypes = [c.c_int, c.c_int, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint32, c.c_uint64]
"""

# One fixed sequence of calls, as a workload's tracker, module marks, step markers, tags and labels make them.
DRIVER = PREAMBLE + r"""
lib.gpumem_mark.argtypes = [c.c_char_p, c.c_uint32]
lib.gpumem_tag.argtypes = [c.c_uint64, c.c_uint64, c.c_uint32, c.c_char_p, c.c_int]
lib.gpumem_user_metadata.argtypes = [c.c_char_p]
lib.gpumem_observe_info.argtypes = [c.c_char_p, c.c_size_t]
lib.gpumem_observe_info.restype = c.c_size_t
def info():
    buf = c.create_string_buffer(4096)
    lib.gpumem_observe_info(buf, len(buf))
    return json.loads(buf.value.decode())
cfg = {"capture_path": sys.argv[2], "trace_entries": 0, "stacks": False, "sample_interval_ms": 0}
assert lib.gpumem_configure(json.dumps(cfg).encode()) == 0
lib.gpumem_observe_start(None, None)
ALLOC, FREE_REQ, FREE_DONE, SEG_ALLOC = 0, 1, 2, 3
MiB, base = 1 << 20, 1 << 32
out = {}
ev(0, SEG_ALLOC, base, 20 * MiB, 7, 0, 0)
lib.gpumem_user_metadata(b"phase=a")
ev(0, ALLOC, base, 4 * MiB, 7, 0, 0)            # a large block: PyTorch's layout decides its size
lib.gpumem_mark(b"forward", 6)                   # MARK_MODULE_BEGIN
lib.gpumem_tag(base, 4 * MiB, 1, b"weight", 0)   # TAG_PARAMETER of the block just made
ev(0, ALLOC, base + 4 * MiB, 15 * MiB + 700 * 1024, 7, 0, 0)  # leaves < 1 MiB: the rest of the segment
def other_thread():                              # autograd's engine frees what the main thread made
    ev(0, FREE_REQ, base + 4 * MiB, 15 * MiB + 700 * 1024, 7, 0, 0)
    ev(0, FREE_DONE, base + 4 * MiB, 15 * MiB + 700 * 1024, 7, 0, 0)
t = threading.Thread(target=other_thread); t.start(); t.join()
lib.gpumem_mark(b"forward", 7)                   # MARK_MODULE_END
out["after_free"] = info()
ev(0, ALLOC, base + 4 * MiB, 2 * MiB, 7, 0, 0)
out["peak_read"] = info()
# More entries than the queue holds, with nothing read in between.
small = 1 << 34
for i in range(int(sys.argv[3])):
    a = small + (i % 500) * 4096
    ev(0, ALLOC, a, 512, 7, 0, 0); ev(0, FREE_REQ, a, 512, 7, 0, 0); ev(0, FREE_DONE, a, 512, 7, 0, 0)
lib.gpumem_user_metadata(b"")
lib.gpumem_mark(b"step", 4)                      # MARK_STEP
out["end"] = info()
lib.gpumem_shutdown(0)
print(json.dumps(out))
"""

# Records whose first field is their time (the capture format's layout for each).
TIMED = {F.REC_ALLOC, F.REC_FREE_REQUESTED, F.REC_FREE_COMPLETED, F.REC_SEGMENT_ALLOC, F.REC_MARKER, F.REC_TAG,
         F.REC_USER_METADATA}
INTERNED = {F.REC_STRING, F.REC_FRAME, F.REC_STACK}


class DeferredObservationTest(unittest.TestCase):
    def setUp(self):
        self.so = support.real_so_or_skip(self)

    def run_driver(self, inline, loops):
        work = support.new_dir("deferred")
        cap = os.path.join(work, "c.gpumem")
        env = dict(os.environ)
        env.pop("GPUMEM_OBSERVE_INLINE", None)
        if inline:
            env["GPUMEM_OBSERVE_INLINE"] = "1"
        r = subprocess.run([sys.executable, "-c", DRIVER, self.so, cap, str(loops)], capture_output=True, text=True,
                           env=env, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        _header, recs = support.read_capture(cap)
        return json.loads(r.stdout), recs

    @staticmethod
    def untimed(recs):
        """The records in file order, each payload's time zeroed; left out: the interned tables (written when first
        needed, ahead of the queue), the end and the index (offsets in the file, which the tables move)."""
        return [(t, (bytes(8) + p[8:]) if t in TIMED else p) for t, p in recs
                if t not in INTERNED and t not in (F.REC_END, F.REC_INDEX)]  # the index: offsets of the file

    def test_queued_capture_equals_the_inline_one(self):
        loops = 50_000  # 150k entries: more than the queue's 131,072, so the filling thread drains at least once
        queued_info, queued = self.run_driver(False, loops)
        inline_info, inline = self.run_driver(True, loops)
        self.assertTrue(queued_info["end"]["queue"]["running"])
        self.assertFalse(inline_info["end"]["queue"]["running"])
        self.assertEqual(len(self.untimed(queued)), len(self.untimed(inline)))
        self.assertEqual(self.untimed(queued), self.untimed(inline))
        # The figures read while entries were queued are those of everything before the read.
        for key in ("after_free", "peak_read", "end"):
            for fig in ("allocated", "reserved", "peak_allocated", "dropped_frees"):
                self.assertEqual(queued_info[key][fig], inline_info[key][fig], (key, fig))
        MiB = 1 << 20
        self.assertEqual(queued_info["after_free"]["allocated"], 4 * MiB)
        self.assertEqual(queued_info["after_free"]["peak_allocated"], 20 * MiB)  # 4 MiB + the segment's rest
        self.assertEqual(queued_info["peak_read"]["allocated"], 6 * MiB)
        self.assertEqual(queued_info["end"]["dropped_frees"], 0)
        q = queued_info["end"]["queue"]
        self.assertEqual(q["events"], 3 * loops + 6)
        self.assertGreaterEqual(q["full_drains"] + q["drains"], 3)
        # Note [Folded frees]: almost every free pair took one slot, and the capture above is still the inline one
        self.assertGreater(q["folded"], loops * 9 // 10)
        self.assertLessEqual(q["folded"], loops + 1)

    def test_order_and_time_in_the_file_are_the_calls(self):
        info, recs = self.run_driver(False, 10)
        kinds = [(t, F.MarkerRec.unpack_dict(p)["kind"] if t == F.REC_MARKER else None)
                 for t, p in recs if t not in INTERNED and t != F.REC_END][:10]
        self.assertEqual(kinds, [
            (F.REC_SEGMENT_ALLOC, None), (F.REC_USER_METADATA, None), (F.REC_ALLOC, None),
            (F.REC_MARKER, F.MARK_MODULE_BEGIN), (F.REC_TAG, None), (F.REC_ALLOC, None),
            (F.REC_FREE_REQUESTED, None), (F.REC_FREE_COMPLETED, None), (F.REC_MARKER, F.MARK_MODULE_END),
            (F.REC_ALLOC, None)])
        times = [int.from_bytes(p[:8], "little") for t, p in recs if t in TIMED]
        self.assertEqual(times, sorted(times), "each record's time is its call's, and the file keeps the calls' order")
        frees = [F.BlockEvent.unpack_dict(p) for t, p in recs if t == F.REC_FREE_REQUESTED][:1]
        self.assertEqual(frees[0]["thread"], 1, "the freeing thread's number is the one that called")
        # Every string a record names was written before it.
        seen = set()
        for t, p in recs:
            if t == F.REC_STRING:
                seen.add(F.StringRec.unpack_dict(p)["id"])
            elif t == F.REC_MARKER:
                self.assertIn(F.MarkerRec.unpack_dict(p)["name"], seen)
        self.assertEqual(info["end"]["queue"]["full_drains"], 0)


# Note [Probe switches] (native/allocator/src/c_api.cc): what the in-process step probe switches.
PROBE_DRIVER = PREAMBLE + r"""
probe = lib.gpumem_probe_set
probe.argtypes, probe.restype = [c.c_char_p, c.c_int64], c.c_int
lib.gpumem_last_error.restype = c.c_char_p
lib.gpumem_observe_gather.restype = c.c_uint32
assert lib.gpumem_configure(json.dumps({"capture_path": sys.argv[2], "trace_entries": 0, "stacks": False,
                                        "sample_interval_ms": 0}).encode()) == 0
lib.gpumem_observe_start(None, None)
out = {"set": [probe(b"drain_ms", 200), probe(b"drain_wake", 3), probe(b"flush_ms", 7), probe(b"stacks", 1)]}
ev(0, 3, 1 << 32, 4 << 20, 7, 0, 0)              # SEGMENT_ALLOC, recorded
out["hold"] = probe(b"observe_hold", 1)
for i in range(5):                               # held: returned at once, never queued
    ev(0, 0, (1 << 32) + i * 4096, 512, 7, 0, 0)
out["gather_held"] = lib.gpumem_observe_gather()
probe(b"observe_hold", 0)
ev(0, 0, (1 << 32) + 8192, 1024, 7, 0, 0)        # ALLOC, recorded
out["unknown"] = probe(b"nothing", 1)
out["error"] = lib.gpumem_last_error().decode()
lib.gpumem_shutdown(0)
print(json.dumps(out))
"""


class ProbeSwitchesTest(unittest.TestCase):
    def test_hold_records_nothing_and_cadence_loses_nothing(self):
        so = support.real_so_or_skip(self)
        cap = os.path.join(support.new_dir("probe-switches"), "c.gpumem")
        r = subprocess.run([sys.executable, "-c", PROBE_DRIVER, so, cap], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["set"], [0, 0, 0, 0])
        self.assertEqual((out["hold"], out["gather_held"]), (0, 0))
        self.assertEqual(out["unknown"], -1)
        self.assertIn("unknown switch 'nothing'", out["error"])
        _header, recs = support.read_capture(cap)
        blocks = [(t, F.BlockEvent.unpack_dict(p)["size"]) for t, p in recs if t == F.REC_ALLOC]
        self.assertEqual(blocks, [(F.REC_ALLOC, 1024)], "the held allocations are not in the capture, the next one is")
        self.assertEqual(sum(1 for t, _ in recs if t == F.REC_SEGMENT_ALLOC), 1)


if __name__ == "__main__":
    unittest.main()
