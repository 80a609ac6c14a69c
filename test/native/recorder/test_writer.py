"""The capture writer: header contents, device records, allocator order under threads, the memory bound
with REC_LOST (and a resync state), fork children, and a readable file after SIGKILL.
Run: python3 test/native/recorder/test_writer.py"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as cap  # noqa: E402
import common  # noqa: E402

F = cap.F  # the generated format module (layouts from gpumem_format.h)

KIB = 1024
EVENTS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
          "segment_unmap")


def churn(lib, n, seed):
    rng = random.Random(seed)
    live = []
    for _ in range(n):
        if live and rng.random() < 0.5:
            lib.gpumem_free(live.pop(rng.randrange(len(live))), 0, 0, None)
        else:
            live.append(lib.gpumem_malloc(rng.choice([512, 4 * KIB, 700 * KIB, 3 << 20]), 0, None))
    for p in live:
        lib.gpumem_free(p, 0, 0, None)


def scenario_header(path):
    lib = common.load()
    common.configure(lib, capture_path=path, sim_capacity=256 << 20,
                     header={"torch": "2.11.0", "argv": ["train.py", "--lr", "1"]}, user_roots=["/home/user/x"])
    lib.gpumem_notice(b"cudnn.benchmark kept off", 1)
    lib.gpumem_shutdown(7)


def scenario_threads(path):
    lib = common.load()
    common.configure(lib, capture_path=path)
    ts = [threading.Thread(target=churn, args=(lib, 3000, s)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    lib.gpumem_shutdown(0)


def scenario_bounded(path, limit, sample_ms):
    lib = common.load()
    common.configure(lib, capture_path=path, buffer_limit_bytes=int(limit), flush_interval_ms=10000,
                     sample_interval_ms=int(sample_ms))
    lib.gpumem_mark(b"kept", 0)
    churn(lib, 2000, 1)
    lib.gpumem_mark(b"kept-too", 0)
    if int(sample_ms):
        time.sleep(0.3)
    lib.gpumem_shutdown(0)


def scenario_fork(path):
    lib = common.load()
    common.configure(lib, capture_path=path, control_socket=path + ".sock")
    pid = os.fork()
    if pid == 0:
        lib.gpumem_mark(b"child", 0)
        lib.gpumem_shutdown(5)
        sys.exit(0)  # runs atexit handlers too: they must leave the parent's file alone
    os.waitpid(pid, 0)
    assert os.path.exists(path + ".sock"), "the child removed the parent's socket"
    lib.gpumem_mark(b"parent", 0)
    lib.gpumem_shutdown(0)


def scenario_killed(path):
    lib = common.load()
    common.configure(lib, capture_path=path)
    churn(lib, 500, 2)
    lib.gpumem_mark(b"before-kill", 0)
    time.sleep(0.2)  # > the 50 ms flush interval
    os.kill(os.getpid(), signal.SIGKILL)


def scenario_file_limit(path, limit):
    import resource
    lib = common.load()
    # CPython ignores SIGXFSZ; a workload need not: the writer must survive the default (kill) too.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), resource.RLIM_INFINITY))
    common.configure(lib, capture_path=path)
    lib.gpumem_mark(b"before-limit", 0)
    churn(lib, 4000, 3)
    time.sleep(0.3)  # > the 50 ms flush interval: the writer has hit the limit by now
    churn(lib, 4000, 4)  # the workload goes on
    p = lib.gpumem_malloc(4 * KIB, 0, None)
    print("workload continued", bool(p))
    lib.gpumem_free(p, 0, 0, None)
    lib.gpumem_shutdown(0)


def scenario_folder_removed(path):
    import shutil
    lib = common.load()
    common.configure(lib, capture_path=path)
    churn(lib, 500, 5)
    time.sleep(0.2)
    shutil.rmtree(os.path.dirname(path))
    churn(lib, 2000, 6)
    time.sleep(0.3)
    print("workload continued")
    lib.gpumem_shutdown(0)


def stopped_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("gpumem:")]


def event_count(c):
    return sum(len(c.of(n)) for n in EVENTS)


class WriterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "c.gpumem")
        self.src = os.path.abspath(__file__)

    def tearDown(self):
        self.dir.cleanup()

    def test_header_device_notice_and_end(self):
        t0 = time.time_ns()
        common.run_scenario(self.src, "header", self.path)
        c = cap.Capture(self.path)
        self.assertEqual((c.major, c.minor), (F.kMajor, F.kMinor))  # the header's version (gpumem_format.h), as generated
        h = c.header
        self.assertEqual(h["argv"], ["train.py", "--lr", "1"])  # the caller's header wins
        self.assertEqual(h["torch"], "2.11.0")
        self.assertEqual(h["user_roots"], ["/home/user/x"])
        self.assertEqual(h["backend"], "sim")
        self.assertEqual(h["rank"], int(os.environ.get("RANK", "0")))
        self.assertEqual(h["world_size"], int(os.environ.get("WORLD_SIZE", "1")))
        self.assertGreater(h["wall_anchor_ns"], t0)
        self.assertLess(h["wall_anchor_ns"], time.time_ns())
        # One spelling of the clock anchors: the first draft's grouped "clock" copy is gone.
        self.assertEqual([k for k in h if "anchor" in k or k == "clock"], ["mono_anchor_ns", "wall_anchor_ns"])
        # Events are CLOCK_MONOTONIC: the device record's time maps to a wall time inside this run.
        wall = h["wall_anchor_ns"] + (F.DeviceRec.prefix("t_ns").unpack_from(c.of("device")[0][3])[0] - h["mono_anchor_ns"])
        self.assertTrue(t0 < wall < time.time_ns())
        dev = c.of("device")
        self.assertEqual(len(dev), 1)
        t, total, name, _ = F.DeviceRec.unpack_from(dev[0][3])
        self.assertEqual((dev[0][1], total, c.strings[name]), (0, 256 << 20, "simulated device"))
        notice = F.NoticeRec.unpack_from(c.of("notice")[0][3])
        self.assertEqual((c.strings[notice[1]], notice[2]), ("cudnn.benchmark kept off", 1))
        # Explicit shutdown: an exit state, then END with the code.
        self.assertEqual(c.state(c.of("state")[-1][3])["reason"], 2)
        self.assertEqual(c.records[-1][0], "end")
        self.assertEqual(F.EndRec.prefix("exit_code").unpack_from(c.records[-1][3])[1], 7)
        # Minor 2: a clean shutdown says reason 0 with no message; minor 6: the END (24 bytes) names the index
        # record just before it (Note [Capture index]).
        self.assertEqual(len(c.records[-1][3]), 24)
        end = F.EndRec.unpack_from(c.records[-1][3])
        self.assertEqual(end[1:4], (7, 0, 0))
        self.assertEqual(c.records[-2][0], "index")
        self.assertEqual(end[4], 8 + len(c.records[-2][3]))

    def test_threads_keep_allocator_order(self):
        common.run_scenario(self.src, "threads", self.path)
        c = cap.Capture(self.path)
        live, segs, last_t = {}, {}, 0
        for name, dev, _, p, off in c.records:
            if name in ("alloc", "free_requested", "free_completed"):
                t, addr, size, *_ = cap.BLOCK.unpack_from(p)
            elif name in ("segment_alloc", "segment_free"):
                t, addr, size, *_ = cap.SEGMENT.unpack_from(p)
            else:
                continue
            self.assertGreaterEqual(t, last_t, "time goes backwards at offset %d" % off)
            last_t = t
            if name == "alloc":
                self.assertNotIn(addr, live, "address handed out twice at offset %d" % off)
                live[addr] = size
            elif name == "free_requested":
                self.assertEqual(live.get(addr), size, "free of a block not live at offset %d" % off)
            elif name == "free_completed":
                del live[addr]
            elif name == "segment_alloc":
                segs[addr] = size
            else:
                self.assertEqual(segs.pop(addr), size)
        self.assertEqual(live, {})
        self.assertEqual(len(c.blocks("alloc")), len(c.blocks("free_completed")))
        self.assertGreater(len({a["thread"] for a in c.blocks("alloc")}), 1)

    def test_bound_drops_events_counts_them_and_keeps_pinned_records(self):
        full = os.path.join(self.dir.name, "full.gpumem")
        common.run_scenario(self.src, "bounded", full, 64 << 20, 0)
        common.run_scenario(self.src, "bounded", self.path, 16 * KIB, 0)
        cf, cb = cap.Capture(full), cap.Capture(self.path)
        self.assertEqual(cf.of("lost"), [])
        lost = sum(F.LostRec.unpack_from(r[3])[1] for r in cb.of("lost"))
        self.assertGreater(lost, 0)
        self.assertEqual(event_count(cb) + lost, event_count(cf))
        names = [cb.strings[F.MarkerRec.unpack_from(r[3])[1]] for r in cb.of("marker")]
        self.assertEqual(names, ["kept", "kept-too"])
        self.assertEqual(cb.records[-1][0], "end")

    def test_lost_events_are_followed_by_a_resync_state(self):
        common.run_scenario(self.src, "bounded", self.path, 16 * KIB, 20)
        c = cap.Capture(self.path)
        first_lost = c.of("lost")[0][4]
        reasons = [c.state(r[3])["reason"] for r in c.of("state") if r[4] > first_lost]
        self.assertIn(3, reasons)

    def test_fork_child_leaves_the_parents_capture_alone(self):
        common.run_scenario(self.src, "fork", self.path)
        c = cap.Capture(self.path)
        names = [c.strings[F.MarkerRec.unpack_from(r[3])[1]] for r in c.of("marker")]
        self.assertEqual(names, ["parent"])
        self.assertEqual([F.EndRec.prefix("exit_code").unpack_from(r[3])[1] for r in c.of("end")], [0])

    def test_sigkill_leaves_a_readable_prefix(self):
        r = subprocess.run([sys.executable, self.src, "--scenario", "killed", self.path], capture_output=True)
        self.assertEqual(r.returncode, -signal.SIGKILL)
        c = cap.Capture(self.path)
        self.assertFalse(c.truncated)
        self.assertEqual(c.of("end"), [])
        names = [c.strings[F.MarkerRec.unpack_from(r[3])[1]] for r in c.of("marker")]
        self.assertEqual(names, ["before-kill"])
        self.assertEqual(len(c.blocks("alloc")), len(c.blocks("free_completed")))

    def test_file_size_limit_cuts_at_a_whole_record_and_ends_with_why(self):
        limit = 64 * KIB
        r = subprocess.run([sys.executable, self.src, "--scenario", "file_limit", self.path, str(limit)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("workload continued True", r.stdout)
        lines = stopped_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)  # told once, although thousands of records were lost
        m = re.fullmatch(r"gpumem: capture stopped at (.*): File too large \((\d+) bytes written\); "
                         r"the workload continues without recording", lines[0])
        self.assertIsNotNone(m, lines[0])
        self.assertEqual(m.group(1), self.path)
        size = os.path.getsize(self.path)
        self.assertLessEqual(size, limit)
        c = cap.Capture(self.path)
        self.assertFalse(c.truncated)  # whole records only
        name, _, _, payload, off = c.records[-1]
        self.assertEqual(name, "end")
        t, code, reason, message, index_bytes = F.EndRec.unpack_from(payload)
        self.assertEqual(index_bytes, 0)  # a writer that failed writes no index
        self.assertEqual((code, reason), (-1, 1))
        self.assertEqual(c.strings[message], lines[0][len("gpumem: "):])
        # The tail (message string + end) starts where the kept records end, which the message states.
        self.assertEqual(c.records[-2][0], "string")
        self.assertEqual(c.records[-2][4], int(m.group(2)))
        self.assertEqual(size, off + 8 + len(payload))
        # What was kept is a consistent prefix of the run: it begins with the marker and every free
        # names a block allocated before it.
        names = [c.strings[F.MarkerRec.unpack_from(rec[3])[1]] for rec in c.of("marker")]
        self.assertEqual(names, ["before-limit"])
        live = set()
        for name, _, _, p, _ in c.records:
            if name == "alloc":
                live.add(cap.BLOCK.unpack_from(p)[1])
            elif name == "free_completed":
                self.assertIn(cap.BLOCK.unpack_from(p)[1], live)
                live.discard(cap.BLOCK.unpack_from(p)[1])
        self.assertGreater(len(c.blocks("alloc")), 100)

    def test_removed_folder_is_reported_once_and_the_workload_goes_on(self):
        path = os.path.join(self.dir.name, "session", "c.gpumem")
        os.mkdir(os.path.dirname(path))
        r = subprocess.run([sys.executable, self.src, "--scenario", "folder_removed", path],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("workload continued", r.stdout)
        lines = stopped_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], r"^gpumem: capture stopped at %s: No such file or directory \(\d+ bytes "
                         r"written\); the workload continues without recording$" % re.escape(path))


if __name__ == "__main__":
    common.main({"header": scenario_header, "threads": scenario_threads, "bounded": scenario_bounded,
                 "fork": scenario_fork, "killed": scenario_killed, "file_limit": scenario_file_limit,
                 "folder_removed": scenario_folder_removed})
