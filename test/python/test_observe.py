"""The bootstrap in the PyTorch-allocator mode (gpumem/_observe.py and its parts) with the real .so, on the stand-in torch:
auto's one line, the capture's header, the history fallback when no tracker can be built (the stand-in has
no torch.utils.cpp_extension), states from PyTorch's _snapshot(), the control channel's Empty Cache calling
torch.cuda.empty_cache(), and the lens allocator never being swapped in."""
import json
import os
import sys
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _control  # noqa: E402
from gpumem import _format as F  # noqa: E402  the record layouts (native/format/gpumem_format.h)

# The stand-in's allocator APIs raise like a pluggable allocator's; this workload gives it the behaviour of
# PyTorch's own allocator (what the PyTorch-allocator mode keeps): a history, snapshots, stats, empty_cache.
WORKLOAD = r"""
import json, os, sys, time
import torch
torch.backends.cudnn.benchmark = True
mem = torch.cuda.memory
trace, reserved = [], [40 << 20]
def record(action, addr, size, line):
    trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": len(trace) + 1,
                  "frames": [{"filename": os.path.abspath(__file__), "name": "<module>", "line": line}] if line else []})
mem._record_memory_history = lambda *a, **k: None
mem._snapshot = lambda *a, **k: {"segments": [{"device": 0, "address": 1 << 30, "total_size": reserved[0], "stream": 0,
    "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
    "blocks": [{"address": 1 << 30, "size": 1 << 20, "requested_size": 1 << 20, "state": "active_allocated"}]}],
    "device_traces": [list(trace)], "allocator_settings": {}, "external_annotations": []}
mem.get_allocator_backend = lambda: "native"
def empty_cache():
    reserved[0] = 2 << 20
torch.cuda.empty_cache = mem.empty_cache = empty_cache
torch.cuda.memory_reserved = mem.memory_reserved = lambda device=None: reserved[0]
torch.cuda.init()
record("segment_alloc", 1 << 30, 40 << 20, 0)
record("alloc", 1 << 30, 1 << 20, 20)          # a line of this script
record("alloc", (1 << 30) + (1 << 20), 4096, 21)
record("free_requested", (1 << 30) + (1 << 20), 4096, 0)
record("free_completed", (1 << 30) + (1 << 20), 4096, 0)
from gpumem._state import STATE
print(json.dumps({"mode": os.environ.get("GPUMEM_ALLOCATOR"), "source": STATE.observer_source,
                  "swapped": STATE.swapped, "socket": STATE.socket}), flush=True)
sys.stdin.readline()
"""


def stats_dict(allocated_mib, peak_mib, reserved_mib):
    """Workload lines that give the stand-in torch PyTorch's nested stats dict (`stats`, which a workload may change)
    with these figures: what the stats poll reads."""
    return ('stats = {"allocated_bytes": {"all": {"current": %d << 20, "peak": %d << 20}},\n'
            '         "reserved_bytes": {"all": {"current": %d << 20, "peak": %d << 20}}, "num_ooms": 0}\n'
            'torch.cuda.memory_stats_as_nested_dict = mem.memory_stats_as_nested_dict = lambda device=None: stats\n'
            % (allocated_mib, peak_mib, reserved_mib, reserved_mib))


# Note [Recorded steps]: a stand-in for the tracker extension (it cannot be built against the stand-in torch), with
# its contract (attach/record/events_off; its own flag ignored, so the library's must hold), and 4 steps of an
# allocation and its free each, ended by STEP_CALL.
RECORD_STEPS_WORKLOAD = """import ctypes
import gpumem
""" + stats_dict(7, 9, 40) + """oom_observers = []
torch._C._cuda_attach_out_of_memory_observer = oom_observers.append
EV = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                      ctypes.c_uint32, ctypes.c_uint64)
class Tracker:
    records, off = [], False
    def attach(self, event, take, gather, label):
        self.event = EV(event)
    def record(self, ours_on, user_stacks, max_entries, when, skip):
        self.records.append(bool(ours_on))
        return "6"
    def events_off(self):
        self.off = True
tracker = Tracker()
import gpumem._observe as observe
observe.build_tracker = lambda torch: (tracker, None)
torch.cuda.init()
from torch.optim.optimizer import Optimizer
opt = Optimizer([])
def bw0(): torch.autograd.backward(None)
def bw1(): torch.autograd.backward(None)
def bw2(): torch.autograd.backward(None)
def bw3(): torch.autograd.backward(None)
bws = [bw0, bw1, bw2, bw3]
for step in range(4):
    base = (1 << 30) + (2 << 20) + step * (1 << 20)
    tracker.event(0, 0, base, 4096, 0, 0, 0)        # alloc
    tracker.event(0, 1, base, 4096, 0, 0, 0)        # free_requested
    tracker.event(0, 2, base, 4096, 0, 0, 0)        # free_completed
    STEP_CALL
for observer in oom_observers:  # an OOM after the stop: the tracker no longer writes it (device, request, limit, free)
    observer(0, 6 << 30, 8 << 30, 1 << 30)
time.sleep(0.4)  # samples after the last step"""



def strings_of(recs):
    """The capture's interned strings by id."""
    out = {}
    for t, p in recs:
        if t == F.REC_STRING:
            r = F.StringRec.unpack_dict(p[:F.StringRec.size])
            out[r["id"]] = p[F.StringRec.size:F.StringRec.size + r["len"]].decode()
    return out


def finish(test, proc):
    """Lets the workload end (a line on its stdin), checks it exited 0 and said its allocator mode in one line.
    (stderr, that line in a list)."""
    try:
        proc.stdin.write("\n")
        proc.stdin.flush()
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    test.assertEqual(proc.returncode, 0, err)
    lines = [l for l in err.splitlines() if l.startswith("gpumem: allocator mode")]
    test.assertEqual(len(lines), 1, err)
    return err, lines


def run_to_end(test, workload, env, wait_s=0.0):
    """Runs one workload (sampling every 50 ms unless env says), reads its first line, waits wait_s (a few polls of PyTorch's stats), then
    lets it end: (its first line, stderr, the allocator-mode line in a list, the capture's header, its records)."""
    proc, work, session = support.start_workload(workload, test.so, env=dict({"GPUMEM_SAMPLE_MS": "50"}, **env), cwd_is_work=True)
    try:
        first = json.loads(proc.stdout.readline() or "{}")
        import time
        time.sleep(wait_s)
    except BaseException:
        proc.kill()
        raise
    err, lines = finish(test, proc)
    (cap,) = [f for f in os.listdir(session) if f.endswith(".gpumem")]
    header, recs = support.read_capture(os.path.join(session, cap))
    return first, err, lines, header, recs


class ObserveModeTest(unittest.TestCase):
    def setUp(self):
        self.so = support.real_so_or_skip(self)

    def test_auto_observes_pytorchs_allocator_into_the_same_capture_format(self):
        proc, work, session = support.start_workload(WORKLOAD, self.so, env={"GPUMEM_ALLOCATOR": "auto", "GPUMEM_SAMPLE_MS": "50"},
                                                     cwd_is_work=True)
        try:
            first = json.loads(proc.stdout.readline() or "{}")
            self.assertEqual((first.get("mode"), first.get("source"), first.get("swapped")), ("pytorch", "history", False))
            import time
            time.sleep(1.5)  # the history drain runs every second
            reply = _control.request(first["socket"], {"cmd": "empty_cache"}, timeout=10.0)
            self.assertEqual((reply["ok"], reply["reserved_before"], reply["reserved_after"]), (True, 40 << 20, 2 << 20))
            snap = _control.request(first["socket"], {"cmd": "snapshot"}, timeout=30.0)
            self.assertTrue(snap["ok"], snap)
            import pickle
            with open(snap["pickle"], "rb") as f:
                self.assertEqual(len(pickle.load(f)["device_traces"][0]), 5)  # PyTorch's own snapshot, as _dump_snapshot writes it
        except BaseException:
            proc.kill()
            raise
        err, lines = finish(self, proc)
        self.assertRegex(lines[0], r"^gpumem: allocator mode pytorch .*cudnn\.benchmark.* at train\.py:4$")
        self.assertIn("recording from PyTorch's memory history instead", err)
        (cap,) = [f for f in os.listdir(session) if f.endswith(".gpumem")]
        header, recs = support.read_capture(os.path.join(session, cap))
        self.assertEqual(header["allocator_mode"], "pytorch")
        self.assertIn("cudnn.benchmark", header["allocator_mode_reason"])
        self.assertNotIn("segments", header)  # the lens's segment policy does not describe this capture
        types = [t for t, _ in recs]
        # ALLOC ×2, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC from the drained history, in order.
        events = [t for t in types if t in (F.REC_ALLOC, F.REC_FREE_REQUESTED, F.REC_FREE_COMPLETED, F.REC_SEGMENT_ALLOC)]
        self.assertEqual(events, [F.REC_SEGMENT_ALLOC, F.REC_ALLOC, F.REC_ALLOC, F.REC_FREE_REQUESTED, F.REC_FREE_COMPLETED])
        allocs = [F.BlockEvent.unpack_dict(p) for t, p in recs if t == F.REC_ALLOC]
        self.assertEqual([a["size"] for a in allocs], [1 << 20, 4096])
        self.assertTrue(all(a["stack"] != 0 for a in allocs), "allocations carry the script's stacks")
        self.assertIn(F.REC_DEVICE, types)  # for the announced device
        states = [F.StateRec.unpack_dict(p) for t, p in recs if t == F.REC_STATE]
        self.assertGreaterEqual(len(states), 2)  # the control snapshot (reason 0) and the exit (reason 2)
        self.assertEqual(sorted({s["reason"] for s in states}), [0, 2])
        self.assertTrue(all(s["nsegments"] == 1 for s in states), "one segment, from PyTorch's _snapshot()")
        stats = [F.StatsRec.unpack_dict(p) for t, p in recs if t == F.REC_STATS]
        self.assertTrue(stats and stats[-1]["peak_allocated"] == (1 << 20) + 4096, "REC_STATS peak from the observer's running figures")

    def test_events_off_records_pytorchs_figures_only(self):
        """Note [Figures only] (gpumem/_observe.py): GPUMEM_EVENTS=0 takes PyTorch's stats, never its history or a
        tracker, even where both exist; the header says so, the tag walk is off."""
        workload = WORKLOAD.replace("torch.cuda.init()", stats_dict(3, 5, 40) + """\
# the poll reads the nested dict, never the flattened one (Python work under the GIL the user's steps need)
torch.cuda.memory_stats = mem.memory_stats = lambda device=None: 1 / 0
oom_observers = []
torch._C._cuda_attach_out_of_memory_observer = oom_observers.append
torch.cuda.init()
for observer in oom_observers:  # as PyTorch's allocator calls them: device, request, device limit, driver's free bytes
    observer(0, 6 << 30, 8 << 30, 1 << 30)""").replace('"swapped": STATE.swapped,', '"swapped": STATE.swapped, "walking": __import__("gpumem._markers").'
                              '_markers._walking, "queue_running": __import__("gpumem._observer_live").'
                              '_observer_live.LIVE.obs.info()["queue"]["running"],')
        first, err, lines, header, recs = run_to_end(self, workload, {"GPUMEM_ALLOCATOR": "auto", "GPUMEM_EVENTS": "0"}, 0.5)
        self.assertEqual((first.get("mode"), first.get("source"), first.get("swapped"), first.get("walking")),
                         ("pytorch", "stats", False, False))
        self.assertIs(first.get("queue_running"), False, "no event to order: the observer's thread ends at the start")
        self.assertIn("figures only", lines[0])  # auto's reason: before the cudnn.benchmark line the scan finds
        self.assertNotIn("memory history", err)
        self.assertIs(header["events"], False)
        types = [t for t, _ in recs]
        for t in (F.REC_ALLOC, F.REC_FREE_REQUESTED, F.REC_FREE_COMPLETED, F.REC_SEGMENT_ALLOC, F.REC_TAG):
            self.assertNotIn(t, types)
        (oom,) = [F.OomRec.unpack_dict(p) for t, p in recs if t == F.REC_OOM]
        self.assertEqual((oom["requested"], oom["device_free"]), (6 << 30, 1 << 30), "the OOM observer's request")
        after = [F.StateRec.unpack_dict(p)["reason"] for t, p in recs[types.index(F.REC_OOM):] if t == F.REC_STATE]
        self.assertEqual(after[:1], [1], "the state that explains it follows (reason: OOM)")
        stats = [F.StatsRec.unpack_dict(p) for t, p in recs if t == F.REC_STATS]
        self.assertTrue(stats, "the sampler writes PyTorch's figures")
        self.assertEqual((stats[-1]["allocated"], stats[-1]["reserved"], stats[-1]["peak_allocated"]),
                         (3 << 20, 40 << 20, 5 << 20))

    def test_probe_switches_keep_whole_parts_off(self):
        """Note [Probe switches off] (gpumem/_probe_off.py): under figures only, GPUMEM_PROBE_OFF=poll+hooks+writer
        starts no stats poll (PyTorch's figures never reach the capture), installs none of the markers' hooks (backward() is
        torch's own) and sets the writer's tick through the library, which takes the switch; without it, the same run
        has the poll's figures and the bracketed backward()."""
        workload = WORKLOAD.replace("torch.cuda.init()", stats_dict(3, 5, 40) + "torch.cuda.init()").replace(
            '"swapped": STATE.swapped,', '"swapped": STATE.swapped, "bracketed": hasattr(torch.autograd.backward, '
            '"__wrapped__"), "applied": __import__("gpumem._probe_off")._probe_off.applied, "threads": '
            '[t.name for t in __import__("threading").enumerate()],')
        runs = {}
        for off in ("", "poll+hooks+writer"):
            env = {"GPUMEM_ALLOCATOR": "auto", "GPUMEM_EVENTS": "0"}
            if off:
                env["GPUMEM_PROBE_OFF"] = off
            first, err, _lines, header, recs = run_to_end(self, workload, env, 0.5)
            stats = [F.StatsRec.unpack_dict(p) for t, p in recs if t == F.REC_STATS]
            runs[off] = (first, stats)
        first, stats = runs[""]
        self.assertEqual((first.get("source"), first.get("bracketed"), first.get("applied")), ("stats", True, {}))
        self.assertIn("gpumem-stats-poll", first.get("threads"))
        self.assertEqual(stats[-1]["allocated"], 3 << 20)
        first, stats = runs["poll+hooks+writer"]
        self.assertEqual((first.get("source"), first.get("bracketed"), first.get("applied")), ("stats", False, {"writer": 0}))
        self.assertNotIn("gpumem-stats-poll", first.get("threads"))
        # the sampler still writes its records, but nothing reads PyTorch's figures into them
        self.assertTrue(stats)
        self.assertEqual({(r["allocated"], r["reserved"], r["peak_allocated"]) for r in stats}, {(0, 0, 0)})

    def figures_reader_workload(self, base):
        """`base` with a stand-in extension whose C reader (fake_tracker_figures.c) gives figures other than the stats
        dict's, so the capture says which of the two reached it."""
        lib = support.fake_tracker_figures()
        return base.replace("torch.cuda.init()", """import ctypes, types
fake = ctypes.CDLL(%r)
fake.fake_figures_set.argtypes = [ctypes.c_int64] * 6
fake.fake_figures_set(11 << 20, 44 << 20, 13 << 20, 44 << 20, 0, 10 << 20)
import gpumem._observe as observe
ext = types.SimpleNamespace(__file__=%r, figures=lambda d: [11 << 20, 44 << 20, 13 << 20, 44 << 20, 0, 10 << 20])
observe.build_tracker = lambda torch: (ext, None)
torch.cuda.init()""" % (lib, lib)).replace("from gpumem._state import STATE", """time.sleep(0.3)  # a few sampler passes (every 50 ms)
from gpumem._state import STATE""").replace('"swapped": STATE.swapped,', '"swapped": STATE.swapped, "by": __import__("gpumem._observer_live")'
                  '._observer_live.LIVE.figures_by, "threads": [t.name for t in __import__("threading").enumerate()], "reads": '
                  'fake.fake_figures_reads(), "reads_off_main": fake.fake_figures_reads_off_main(),')

    def test_figures_only_reads_pytorchs_figures_on_the_samplers_thread(self):
        """Note [Figures on the sampler's thread] (native/allocator/src/observer.h): under figures only, where the
        extension has its C reader, the library's sampler reads PyTorch's figures itself: no Python thread polls them
        (none wakes to take the GIL), every read comes from a thread other than the workload's, and the samples carry
        the reader's figures, not the stats dict's; with sampling off the poll thread reads them, as before."""
        workload = self.figures_reader_workload(
            WORKLOAD.replace("torch.cuda.init()", stats_dict(3, 5, 40) + "torch.cuda.init()"))
        first, err, _lines, header, recs = run_to_end(self, workload, {"GPUMEM_ALLOCATOR": "auto", "GPUMEM_EVENTS": "0"}, 0.3)
        self.assertEqual((first.get("source"), first.get("by")), ("stats", "sampler"), err)
        self.assertNotIn("gpumem-stats-poll", first.get("threads"))
        self.assertGreaterEqual(first.get("reads"), 2, "a read a pass, every 50 ms")
        self.assertEqual(first.get("reads_off_main"), first.get("reads"), "never on the workload's thread")
        stats = [F.StatsRec.unpack_dict(p) for t, p in recs if t == F.REC_STATS]
        self.assertEqual({(r["allocated"], r["reserved"], r["peak_allocated"], r["peak_reserved"]) for r in stats[1:]},
                         {(11 << 20, 44 << 20, 13 << 20, 44 << 20)}, "the reader's figures from the second pass on")
        # sampling off: nothing would call the reader, so the poll reads the dict (and no sample is written)
        first, err, _lines, header, recs = run_to_end(self, workload, {"GPUMEM_ALLOCATOR": "auto", "GPUMEM_EVENTS": "0",
                                                                       "GPUMEM_SAMPLE_MS": "0"}, 0.3)
        self.assertEqual((first.get("source"), first.get("by"), first.get("reads")), ("stats", "poll", 0), err)
        self.assertIn("gpumem-stats-poll", first.get("threads"))

    def test_the_last_figures_are_pytorchs_as_the_process_ends(self):
        """Note [Last figures] (native/allocator/src/recorder.cc): where PyTorch's stats carry the figures, they are
        read once more as the process ends and written in one last pass, so the capture ends with PyTorch's figures at
        exit, not with the last periodic sample's: figures that change after the last periodic pass (sampling every
        10 s here, so none comes after the first) reach the capture, read by the sampler's reader and by the poll."""
        end = "sys.stdin.readline()\n"
        base = WORKLOAD.replace("torch.cuda.init()", stats_dict(3, 5, 40) + "torch.cuda.init()")
        env = {"GPUMEM_ALLOCATOR": "auto", "GPUMEM_EVENTS": "0", "GPUMEM_SAMPLE_MS": "10000"}
        reader = self.figures_reader_workload(base).replace(
            end, end + "fake.fake_figures_set(17 << 20, 64 << 20, 19 << 20, 64 << 20, 0, 16 << 20)\n")
        first, err, _lines, _header, recs = run_to_end(self, reader, env)
        self.assertEqual(first.get("by"), "sampler", err)
        stats = [F.StatsRec.unpack_dict(p) for t, p in recs if t == F.REC_STATS]
        self.assertEqual((stats[-1]["allocated"], stats[-1]["reserved"], stats[-1]["peak_allocated"]),
                         (17 << 20, 64 << 20, 19 << 20), "the reader's figures at exit")
        self.assertNotIn((17 << 20, 64 << 20), [(r["allocated"], r["reserved"]) for r in stats[:-1]], "the last pass only")
        poll = base.replace(end, end + 'stats["allocated_bytes"]["all"]["current"] = 17 << 20\n'
                                        'stats["reserved_bytes"]["all"]["current"] = 64 << 20\n')
        first, err, _lines, _header, recs = run_to_end(self, poll, env)
        stats = [F.StatsRec.unpack_dict(p) for t, p in recs if t == F.REC_STATS]
        self.assertEqual((stats[-1]["allocated"], stats[-1]["reserved"]), (17 << 20, 64 << 20), "the poll's last read")

    def test_a_backend_with_stats_only_is_recorded_as_figures_and_the_header_says_so(self):
        """backend:cudaMallocAsync has neither trace trackers nor history: the stats source, whatever GPUMEM_EVENTS and
        GPUMEM_RECORD_STEPS say, and a header that says so (Note [Not recorded]), so the panels tell why no line shows."""
        workload = WORKLOAD.replace("torch.cuda.init()", stats_dict(2, 6, 32) + """\
mem.get_allocator_backend = lambda: "cudaMallocAsync"
torch.cuda.init()""").replace('"swapped": STATE.swapped,', '"swapped": STATE.swapped, "queue_running": '
                              '__import__("gpumem._observer_live")._observer_live.LIVE.obs.info()["queue"]["running"],')
        first, err, _lines, header, recs = run_to_end(self, workload, {"GPUMEM_ALLOCATOR": "auto", "GPUMEM_RECORD_STEPS": "3"}, 0.5)
        self.assertEqual((first.get("mode"), first.get("source"), first.get("queue_running")), ("pytorch", "stats", False))
        self.assertIn("cudaMallocAsync backend offers PyTorch's stats only", err)
        self.assertEqual((header["events"], header["record_steps"], header["pytorch_allocator_backend"]),
                         (False, 0, "cudaMallocAsync"))
        stats = [F.StatsRec.unpack_dict(p) for t, p in recs if t == F.REC_STATS]
        self.assertTrue(stats, "the sampler writes PyTorch's figures")
        self.assertEqual((stats[-1]["allocated"], stats[-1]["reserved"], stats[-1]["peak_allocated"]),
                         (2 << 20, 32 << 20, 6 << 20))

    def test_header_records_pytorchs_allocator_settings_and_segments_their_private_pool(self):
        """Note [Settings of the data] (native/addon/src/alloc_conf.h): the header holds PyTorch's whole allocator_settings
        (as torch 2.11's _snapshot() gives them, roundup_power2_divisions keyed by numbers), versioned; and a segment
        entry of a private pool reaches the capture with its pool id (the tracker's SEGMENT_POOL entry just before it,
        native/allocator/src/observer.h), the default pool's with none."""
        settings = ('{"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64,roundup_power2_divisions:4", "max_split_size": 67108864, '
                    '"garbage_collection_threshold": 0.0, "expandable_segments": False, "release_lock_on_cudamalloc": False, '
                    '"roundup_power2_divisions": {1 << k: 4 for k in range(16)}}')
        pools = """tracker.event(0, 16, 0, 1, 0, 0, 0)                      # the next segment entry's pool: MemPool (0, 1)
tracker.event(0, 3, (1 << 30) + (64 << 20), 20 << 20, 0, 0, 0)   # its segment_alloc
tracker.event(0, 0, (1 << 30) + (64 << 20), 4096, 0, 0, 0)       # an allocation in it
tracker.event(0, 3, (1 << 30) + (96 << 20), 2 << 20, 0, 0, 0)    # a default pool's segment
STEP_CALL"""
        workload = WORKLOAD.replace('"allocator_settings": {}', '"allocator_settings": ' + settings).replace(
            "torch.cuda.init()", RECORD_STEPS_WORKLOAD.replace("STEP_CALL", pools, 1).replace("STEP_CALL", "pass"))
        _first, _err, _lines, header, recs = run_to_end(self, workload, {"GPUMEM_ALLOCATOR": "auto"})
        recorded = header["pytorch_allocator_settings"]
        self.assertEqual(recorded["version"], 1)
        self.assertEqual(recorded["settings"]["max_split_size"], 64 << 20)
        self.assertEqual(recorded["settings"]["roundup_power2_divisions"], {str(1 << k): 4 for k in range(16)})
        self.assertEqual(recorded["settings"]["PYTORCH_CUDA_ALLOC_CONF"], "max_split_size_mb:64,roundup_power2_divisions:4")
        self.assertIs(header["pytorch_expandable_segments"], False)
        segs = [F.SegmentEvent.unpack_dict(p) for t, p in recs if t == F.REC_SEGMENT_ALLOC]
        by_addr = {e["addr"]: (e["pool_id0"], e["pool_id1"]) for e in segs}
        self.assertEqual(by_addr[(1 << 30) + (64 << 20)], (0, 1))
        self.assertEqual(by_addr[(1 << 30) + (96 << 20)], (0, 0), "the pool id is the next segment entry's only")

    def record_steps_run(self, step_call):
        """The stand-in tracker's run of 4 steps (an alloc and its free each, then `step_call`) with
        GPUMEM_RECORD_STEPS=2: (first line, stderr, allocator line, header, records, strings)."""
        workload = WORKLOAD.replace("torch.cuda.init()", RECORD_STEPS_WORKLOAD.replace("STEP_CALL", step_call)).replace(
            '"swapped": STATE.swapped,', '"swapped": STATE.swapped, "walking": __import__("gpumem._markers").'
            '_markers._walking, "tracker_off": tracker.off, "records": tracker.records, '
            '"queue_running": observe.LIVE.obs.info()["queue"]["running"],')
        first, err, lines, header, recs = run_to_end(self, workload, {"GPUMEM_ALLOCATOR": "auto", "GPUMEM_RECORD_STEPS": "2"})
        strings = strings_of(recs)
        return first, err, lines, header, recs, strings

    def test_record_steps_says_it_cannot_stop_the_history_source(self):
        """Note [Recorded steps]: only the tracker stops; where PyTorch's history is drained instead (the observer
        could not be built), the run says once that every step is recorded."""
        workload = WORKLOAD.replace('from gpumem._state import STATE', """from torch.optim.optimizer import Optimizer
opt = Optimizer([])
for _ in range(3):
    opt.step()
from gpumem._state import STATE""")
        proc, work, session = support.start_workload(workload, self.so, env={
            "GPUMEM_ALLOCATOR": "auto", "GPUMEM_RECORD_STEPS": "2"}, cwd_is_work=True)
        try:
            first = json.loads(proc.stdout.readline() or "{}")
        except BaseException:
            proc.kill()
            raise
        finish(self, proc)
        self.assertEqual(first.get("source"), "history")
        (cap,) = [f for f in os.listdir(session) if f.endswith(".gpumem")]
        _, recs = support.read_capture(os.path.join(session, cap))
        strings = strings_of(recs)
        notices = [strings[F.NoticeRec.unpack_dict(p)["text"]] for t, p in recs if t == F.REC_NOTICE]
        self.assertEqual([n for n in notices if "recordSteps 2 has no effect here" in n and "memory history" in n],
                         [next(n for n in notices if "recordSteps" in n)], notices)
        self.assertNotIn(F.MARK_EVENTS_OFF, [F.MarkerRec.unpack_dict(p)["kind"] for t, p in recs if t == F.REC_MARKER])

    def test_record_steps_counts_the_users_gpumem_step_marks(self):
        """Note [Recorded steps] with Note [Steps]: a loop with no optimizer, marked with gpumem.step(), stops after
        its 2nd mark."""
        first, err, _, header, recs, strings = self.record_steps_run("gpumem.step()")
        self.assertEqual((first.get("source"), first.get("tracker_off")), ("tracker", True), err)
        marks = [(i, F.MarkerRec.unpack_dict(p)) for i, (t, p) in enumerate(recs) if t == F.REC_MARKER]
        (off_at,) = [i for i, m in marks if m["kind"] == F.MARK_EVENTS_OFF]
        steps = [i for i, m in marks if m["kind"] == F.MARK_STEP and strings[m["name"]] == "step"]
        self.assertEqual(len(steps), 4)
        self.assertTrue(steps[1] < off_at < steps[2], "off after the second mark")
        self.assertEqual([t for t, _ in recs[off_at:] if t == F.REC_ALLOC], [])

    def test_record_steps_stops_recording_after_the_nth_optimizer_step(self):
        """Note [Recorded steps] (gpumem/_recorded_steps.py): with GPUMEM_RECORD_STEPS=2, the events of steps 1–2 are in the
        capture, then MARK_EVENTS_OFF after the last of them, then no event (the library drops what a tracker still
        hands it), no tag, PyTorch's figures in the samples, and our recorder out of PyTorch's history. The stand-in
        torch cannot build the tracker extension, so a stand-in with its contract (attach/record/events_off) hands
        the library its entries through the same entry points."""
        first, err, lines, header, recs, strings = self.record_steps_run("opt.step()")
        self.assertEqual((first.get("mode"), first.get("source"), first.get("walking"), first.get("tracker_off")),
                         ("pytorch", "tracker", False, True), err)
        self.assertIn("first steps only", lines[0])  # auto's reason
        self.assertEqual(first["records"][0], True)  # our recorder in PyTorch's history while recording…
        self.assertEqual(first["records"][-1], False)  # …and out of it after step 2
        self.assertIs(first["queue_running"], False, "the observer's thread ends with the events")
        self.assertEqual((header["record_steps"], header["events"]), (2, True))
        marks = [(i, F.MarkerRec.unpack_dict(p)) for i, (t, p) in enumerate(recs) if t == F.REC_MARKER]
        (off_at,) = [i for i, m in marks if m["kind"] == F.MARK_EVENTS_OFF]
        self.assertEqual(strings[marks[[i for i, _ in marks].index(off_at)][1]["name"]], "recordSteps 2")
        step_ends = [i for i, m in marks if m["kind"] == F.MARK_STEP and strings[m["name"]] == "optimizer.step"]
        self.assertEqual(len(step_ends), 4, "the step facts stay")
        self.assertTrue(step_ends[1] < off_at < step_ends[2], "off after the second step's end, before the third's")
        block = (F.REC_ALLOC, F.REC_FREE_REQUESTED, F.REC_FREE_COMPLETED)
        before = [F.BlockEvent.unpack_dict(p)["addr"] for t, p in recs[:off_at] if t == F.REC_ALLOC]
        self.assertEqual(before[-2:], [(1 << 30) + (2 << 20), (1 << 30) + (3 << 20)], "steps 1 and 2 recorded")
        self.assertEqual([t for t, _ in recs[off_at:] if t in block + (F.REC_TAG,)], [], "nothing per allocation after")
        after = [F.StatsRec.unpack_dict(p) for t, p in recs[off_at:] if t == F.REC_STATS]
        self.assertTrue(after, "samples after the marker")
        self.assertEqual((after[-1]["allocated"], after[-1]["reserved"], after[-1]["peak_allocated"]),
                         (7 << 20, 40 << 20, 9 << 20), "PyTorch's own figures")
        notices = [strings[F.NoticeRec.unpack_dict(p)["text"]] for t, p in recs if t == F.REC_NOTICE]
        self.assertFalse([n for n in notices if "recorded" in n], "the marker is what the reader shows, once")
        (oom,) = [F.OomRec.unpack_dict(p) for t, p in recs[off_at:] if t == F.REC_OOM]
        self.assertEqual((oom["requested"], oom["device_free"]), (6 << 30, 1 << 30), "an OOM after the stop is told")

    def test_after_the_recorded_steps_the_sampler_reads_pytorchs_figures(self):
        """Note [Figures on the sampler's thread] with Note [Recorded steps]: once the recorded steps are over, the
        tracker extension's C reader gives the sampler PyTorch's figures (no poll thread), and the samples after the
        marker carry them, not the stats dict's."""
        lib = support.fake_tracker_figures()
        workload = WORKLOAD.replace("torch.cuda.init()", RECORD_STEPS_WORKLOAD.replace("STEP_CALL", "opt.step()").replace(
            "tracker = Tracker()\n", """tracker = Tracker()
tracker.__file__ = %r
fake = ctypes.CDLL(tracker.__file__)
fake.fake_figures_set.argtypes = [ctypes.c_int64] * 6
fake.fake_figures_set(21 << 20, 48 << 20, 23 << 20, 48 << 20, 0, 20 << 20)
""" % lib)).replace('"swapped": STATE.swapped,', '"swapped": STATE.swapped, "by": observe.LIVE.figures_by, "threads": '
                    '[t.name for t in __import__("threading").enumerate()], "reads_off_main": fake.fake_figures_reads_off_main(),')
        first, err, lines, header, recs = run_to_end(self, workload, {"GPUMEM_ALLOCATOR": "auto", "GPUMEM_RECORD_STEPS": "2"})
        self.assertEqual((first.get("source"), first.get("by")), ("tracker", "sampler"), err)
        self.assertNotIn("gpumem-stats-poll", first.get("threads"))
        self.assertGreaterEqual(first.get("reads_off_main"), 1)
        marks = [(i, F.MarkerRec.unpack_dict(p)) for i, (t, p) in enumerate(recs) if t == F.REC_MARKER]
        (off_at,) = [i for i, m in marks if m["kind"] == F.MARK_EVENTS_OFF]
        after = [F.StatsRec.unpack_dict(p) for t, p in recs[off_at:] if t == F.REC_STATS]
        self.assertTrue(after, "samples after the marker")
        self.assertEqual((after[-1]["allocated"], after[-1]["reserved"], after[-1]["peak_allocated"]),
                         (21 << 20, 48 << 20, 23 << 20), "the reader's figures, not the dict's (7, 40, 9 MiB)")

    def test_a_device_sample_is_one_nvml_memory_query_with_a_handle_looked_up_once(self):
        """Note [One NVML call a sample] (native/allocator/src/device_sampler.cc): with NVML present (a stand-in
        libnvidia-ml.so.1 that counts its calls), every device sample carries NVML's used/total for the device
        announced by its PCI bus id, asks nothing else (no per-process query: process_used 0), and the handle is
        looked up once for the whole run."""
        folder = support.fake_nvml_dir()
        out = os.path.join(support.new_dir("nvml"), "calls.txt")
        used = (7 << 30) + 12345
        env = {"GPUMEM_ALLOCATOR": "auto", "LD_LIBRARY_PATH": folder + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""),
               "FAKE_NVML_OUT": out, "FAKE_NVML_USED": str(used), "FAKE_NVML_TOTAL": str(80 << 30)}
        first, err, lines, header, recs = run_to_end(self, WORKLOAD, env, wait_s=0.5)
        samples = [F.DeviceSampleRec.unpack_dict(p) for t, p in recs if t == F.REC_DEVICE_SAMPLE]
        self.assertGreaterEqual(len(samples), 5, "sampling every 50 ms for half a second")
        self.assertEqual({(s["used"], s["total"], s["process_used"]) for s in samples}, {(used, 80 << 30, 0)}, err)
        with open(out) as f:
            n_init, n_handle, n_memory, n_processes, pci = f.read().split()
        self.assertEqual(pci, "0000:3B:00.0", "the device's own PCI bus id (the stand-in torch's)")
        self.assertEqual((int(n_init), int(n_handle), int(n_processes)), (1, 1, 0))
        self.assertEqual(int(n_memory), len(samples), "one memory query a sample")

    def test_no_stack_is_walked_for_backward_once_the_recorded_steps_are_over(self):
        """Note [Recorded steps]: a backward() walks its thread's stack for the autograd threads' allocations
        (stacks::backward_begin) only while entries can still come. Each step's backward() runs from its own function,
        so a walk shows as a new backward stack (flag kStackBackward) naming it: steps 1 and 2 have one, 3 and 4 none."""
        workload_steps = "bws[step]()\n    opt.step()"
        first, err, lines, header, recs, strings = self.record_steps_run(workload_steps)
        self.assertEqual(first.get("tracker_off"), True, err)
        frames = {}
        for t, p in recs:
            if t == F.REC_FRAME:
                fr = F.FrameRec.unpack_dict(p)
                frames[fr["id"]] = strings.get(fr["function"])
        walked = set()
        for t, p in recs:
            if t == F.REC_STACK:
                st = F.StackRec.unpack_dict(p[:F.StackRec.size])
                if st["flags"] & 1:  # kStackBackward
                    walked |= {frames.get(f) for f in F.frame_ids(p, st["nframes"])} & {"bw0", "bw1", "bw2", "bw3"}
        self.assertEqual(walked, {"bw0", "bw1"}, "backward stacks of the recorded steps only")


if __name__ == "__main__":
    unittest.main()
