"""Budgeted captures (FORMAT.md §5, Note [Capture budget]): a GPT-2-size loop on the simulated device
(test/bench/budget/gen_stream.py, 1 M events) recorded without a budget, written again through the writer with an
8 MiB budget (test/bench/budget/rebudget.cc: the same stream, times and ids), and recorded live with the budget.

Whole-run figures are recomputed here from the documented layout (capture.py, not the extension's reader): per
device the peak of allocated bytes, the time that first reached it, every allocation live then by stack, the
allocation count and bytes per stack, markers, OOMs, empty caches, snapshots, segment events and the end record.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import capture
import common

ROOT = common.ROOT
GEN = os.path.join(ROOT, "test", "bench", "budget", "gen_stream.py")
EVENTS = 1_000_000
BUDGET = 8 << 20
RESTATED = 0x100
AGG = struct.Struct("<QQQQQII")
TIMELINE = struct.Struct("<QII")
BUCKET = struct.Struct("<Qqqqq")
LINE_TOTALS = struct.Struct("<II")
LINE_TOTAL = struct.Struct("<IIQQ")


def frames(c, stack):
    return tuple(c.stacks[stack][1]) if stack else ()


def whole_run(path):
    c = capture.Capture(path)
    dev = {}
    segs, marks, others = [], [], []

    def d(i):
        return dev.setdefault(i, dict(alloc=0, peak=0, peak_t=None, live={}, at_peak=None, per_stack={}))

    for name, device, flags, p, _ in c.records:
        if name in ("alloc", "free_requested"):
            t, addr, size, _req, _stream, stack, _thr = capture.BLOCK.unpack_from(p)
            s = d(device)
            if name == "alloc":
                s["alloc"] += size
                s["live"][addr] = (size, stack)
                if not flags & RESTATED:
                    cnt = s["per_stack"].setdefault(frames(c, stack), [0, 0])
                    cnt[0] += 1
                    cnt[1] += size
                if s["alloc"] > s["peak"]:
                    s["peak"], s["peak_t"], s["at_peak"] = s["alloc"], t, None
            else:
                if s["at_peak"] is None and s["alloc"] == s["peak"]:
                    s["at_peak"] = dict(s["live"])  # the peak is left: the blocks live at it
                s["alloc"] -= size
                s["live"].pop(addr, None)
        elif name.startswith("segment_"):
            segs.append((name, device, bytes(p)))
        elif name in ("marker", "oom", "empty_cache", "notice", "device", "end"):
            marks.append((name, device, bytes(p)))
        elif name == "state":
            others.append((device, c.state(p)))
    # Compacted ranges' per-stack totals (REC_LINE_TOTALS = 48), read from the raw records.
    for t, device, p in raw(path, 48):
        n, _ = LINE_TOTALS.unpack_from(p)
        for k in range(n):
            stack, _, count, nbytes = LINE_TOTAL.unpack_from(p, LINE_TOTALS.size + k * LINE_TOTAL.size)
            cnt = d(device)["per_stack"].setdefault(frames(c, stack), [0, 0])
            cnt[0] += count
            cnt[1] += nbytes
    out = {}
    for i, s in dev.items():
        live = s["at_peak"] if s["at_peak"] is not None else s["live"]
        by_stack = {}
        for size, stack in live.values():
            by_stack[frames(c, stack)] = by_stack.get(frames(c, stack), 0) + size
        out[i] = dict(peak=s["peak"], peak_t=s["peak_t"], at_peak=by_stack,
                      per_stack={k: tuple(v) for k, v in s["per_stack"].items()})
    return c, out, segs, marks, others


def raw(path, rec_type):
    """(t, device, payload) of every record of a type capture.py does not name."""
    with open(path, "rb") as f:
        data = f.read()
    jn = struct.unpack_from("<I", data, 12)[0]
    pos, out = 16 + jn, []
    while pos + 8 <= len(data):
        t, dev, _flags, n = struct.unpack_from("<BBHI", data, pos)
        if t == rec_type:
            out.append((None, dev, data[pos + 8:pos + 8 + n]))
        pos += 8 + n
    return out


class BudgetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(common.SO):
            raise unittest.SkipTest("%s not built" % common.SO)
        cls.dir = tempfile.mkdtemp(prefix="gpumem-budget-")
        cls.full = os.path.join(cls.dir, "full.gpumem")
        cls.rebudgeted = os.path.join(cls.dir, "rebudgeted.gpumem")
        cls.live = os.path.join(cls.dir, "live.gpumem")
        tool = os.path.join(cls.dir, "rebudget")
        src = os.path.join(ROOT, "native", "allocator", "src")
        subprocess.run(["g++", "-std=c++17", "-O2", "-o", tool, os.path.join(ROOT, "test", "bench", "budget", "rebudget.cc"),
                        os.path.join(src, "writer.cc"), os.path.join(src, "compactor.cc"), "-lpthread"], check=True)
        for args in ([cls.full], [cls.live, str(BUDGET)]):
            subprocess.run([sys.executable, GEN, common.SO, args[0], str(EVENTS)] + args[1:], check=True,
                           capture_output=True, timeout=600)
        subprocess.run([tool, cls.full, cls.rebudgeted, str(BUDGET)], check=True, capture_output=True, timeout=600)
        cls.u = whole_run(cls.full)
        cls.b = whole_run(cls.rebudgeted)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_budgeted_captures_stay_under_the_budget_and_say_what_they_compacted(self):
        self.assertGreater(os.path.getsize(self.full), 6 * BUDGET)  # the stream is far larger than the budget
        for f in (self.rebudgeted, self.live):
            self.assertLessEqual(os.path.getsize(f), BUDGET, f)
            ranges = [AGG.unpack_from(p) for _, _, p in raw(f, 46)]
            self.assertGreater(len(ranges), 1, f)
            for t0, t1, events, nbytes, budget, restated, _peaks in ranges:
                self.assertEqual(budget, BUDGET)
                self.assertLessEqual(t0, t1)
                self.assertGreater(events, 0)
                self.assertGreaterEqual(nbytes, events * 56)
            c = capture.Capture(f)
            self.assertEqual(c.minor, capture.F.kMinor)
            self.assertEqual(c.header["budget_bytes"], BUDGET)
            self.assertTrue(any(fl & RESTATED for n, _, fl, _, _ in c.records if n == "alloc"))

    def test_whole_run_figures_equal_the_unbudgeted_capture(self):
        cu, u, segs_u, marks_u, states_u = self.u
        cb, b, segs_b, marks_b, states_b = self.b
        self.assertEqual(sorted(u), sorted(b))
        for dev in u:
            self.assertGreater(u[dev]["peak"], 0)
            self.assertEqual(b[dev]["peak"], u[dev]["peak"])
            self.assertEqual(b[dev]["peak_t"], u[dev]["peak_t"])
            self.assertEqual(b[dev]["at_peak"], u[dev]["at_peak"])
            self.assertEqual(b[dev]["per_stack"], u[dev]["per_stack"])
        self.assertEqual(segs_b, segs_u)
        self.assertEqual(marks_b, marks_u)
        self.assertEqual([s for _, s in states_b], [s for _, s in states_u])
        # Far fewer block events survive than the stream had.
        self.assertLess(len(cb.of("alloc")), len(cu.of("alloc")) / 4)

    def test_timeline_buckets_hold_the_min_and_max_of_the_compacted_events(self):
        cu = self.u[0]
        # The first compacted range's buckets that end before the range does (a last bucket may reach into the next).
        first_end = AGG.unpack_from(raw(self.rebudgeted, 46)[0][2])[1]
        _, dev, p = raw(self.rebudgeted, 47)[0]
        width, n, _ = TIMELINE.unpack_from(p)
        buckets = [(dev, width) + BUCKET.unpack_from(p, TIMELINE.size + k * BUCKET.size) for k in range(n)]
        buckets = [b for b in buckets if b[2] + width <= first_end]
        self.assertGreater(len(buckets), 20)
        # Allocated after each block or segment event of the unbudgeted stream (what a bucket spans), by time.
        series, alloc = [], 0
        for name, _dev, _flags, p, _ in cu.records:
            if name in ("alloc", "free_requested", "free_completed") or name.startswith("segment_"):
                t, _addr, size = struct.unpack_from("<QQQ", p)
                alloc += size if name == "alloc" else -size if name == "free_requested" else 0
                series.append((t, alloc))
        for dev, width, t0, amin, amax, _rmin, _rmax in buckets[:60]:
            inside = [a for t, a in series if t0 <= t < t0 + width]
            self.assertTrue(inside)
            self.assertEqual((amin, amax), (min(inside), max(inside)))

    def test_a_live_budgeted_run_keeps_the_same_peak_and_its_allocations(self):
        _, live, _, marks, _ = whole_run(self.live)
        _, u, _, marks_u, _ = self.u
        for dev in u:
            self.assertEqual(live[dev]["peak"], u[dev]["peak"])
            self.assertEqual(live[dev]["at_peak"], u[dev]["at_peak"])
            self.assertEqual(live[dev]["per_stack"], u[dev]["per_stack"])
        names = lambda ms: [(n, d) for n, d, _ in ms]  # noqa: E731 (times differ between two runs)
        self.assertEqual(names(marks), names(marks_u))


if __name__ == "__main__":
    common.main({})
