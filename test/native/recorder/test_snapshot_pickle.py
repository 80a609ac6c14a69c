"""PyTorch-format snapshot pickles: same key sets and value types as real PyTorch 2.11 snapshots
(test/fixtures/pytorch-snapshots), and values that agree with the capture written in the same run.
Run: python3 test/native/recorder/test_snapshot_pickle.py"""
import ctypes
import os
import pickle
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as cap  # noqa: E402
import common  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
# The real PyTorch 2.11 pickles (README's first table), not make_variants.py's later-version variants: the lens's
# snapshot is a 2.11 one.
FIXTURES = [os.path.join(common.ROOT, "test", "fixtures", "pytorch-snapshots", n + ".pickle")
            for n in ("resnet50-bf16-train-python-stacks", "mlp-expandable", "mlp-oom", "mlp-record-stream-pending")]
STATES = {0: "inactive", 1: "active_allocated", 2: "active_pending_free"}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap"}


def inner(lib, size):
    return lib.gpumem_malloc(size, 0, None)  # SNAP-ALLOC


def scenario_snapshot(path, pickle_path, bytes_path):
    lib = common.load()
    common.configure(lib, capture_path=path, segments="expandable")
    a = inner(lib, 1 * KIB)
    b = inner(lib, 3 * MIB)
    lib.gpumem_mark(b"phase", 1)
    lib.gpumem_free(a, 0, 0, None)
    lib.gpumem_mark(b"phase", 2)
    print(lib.gpumem_snapshot(pickle_path.encode()))
    out, n = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t()
    assert lib.gpumem_snapshot_pickle(ctypes.byref(out), ctypes.byref(n)) == 0
    with open(bytes_path, "wb") as f:
        f.write(ctypes.string_at(out, n.value))
    lib.gpumem_free_buffer(out)
    lib.gpumem_free(b, 0, 0, None)
    lib.gpumem_shutdown(0)


def shape(v):
    """Key sets and value types, recursively, of one representative of each list."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,)
    return type(v).__name__


class SnapshotPickleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        cls.path, cls.pickle_path, cls.bytes_path = (os.path.join(d, n) for n in ("c.gpumem", "s.pickle", "b.pickle"))
        cls.t0 = time.time()
        out = common.run_scenario(os.path.abspath(__file__), "snapshot", cls.path, cls.pickle_path, cls.bytes_path)
        cls.t1 = time.time()
        cls.offset = int(out.split()[0])
        with open(cls.pickle_path, "rb") as f:
            cls.raw = f.read()
        cls.snap = pickle.loads(cls.raw)
        cls.cap = cap.Capture(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_protocol_4(self):
        self.assertEqual(self.raw[:2], b"\x80\x04")

    def test_same_keys_and_types_as_pytorch_2_11(self):
        self.assertTrue(FIXTURES, "fixtures missing")
        ours = self.snap
        seg, blk = ours["segments"][0], ours["segments"][0]["blocks"][0]
        trace_by_action = {e["action"]: e for e in ours["device_traces"][0]}
        frame = next(e["frames"][0] for e in ours["device_traces"][0] if e["frames"])
        for fx in FIXTURES:
            with open(fx, "rb") as f:
                ref = pickle.load(f)
            name = os.path.basename(fx)
            self.assertEqual(set(ours), set(ref), name)
            rseg = ref["segments"][0]
            self.assertEqual(shape({k: v for k, v in seg.items()}), shape(rseg), name)
            self.assertEqual(shape(blk), shape(rseg["blocks"][0]), name)
            self.assertEqual(shape(ours["allocator_settings"]), shape(ref["allocator_settings"]), name)
            rtrace = [e for dev in ref["device_traces"] for e in dev]
            for e in rtrace:  # per action: 'snapshot' has no frames, 'oom' says device_free
                if e["action"] in trace_by_action:
                    self.assertEqual(shape(trace_by_action[e["action"]]), shape(e), (name, e["action"]))
            rframes = [fr for e in rtrace for fr in e.get("frames", [])][:1]
            if rframes:
                self.assertEqual(shape(frame), shape(rframes[0]), name)
            if ref["external_annotations"]:
                self.assertEqual(shape(ours["external_annotations"][0]), shape(ref["external_annotations"][0]))

    def test_trace_matches_the_capture(self):
        events = [(r[0], cap.BLOCK.unpack_from(r[3]) if r[0] in ("alloc", "free_requested", "free_completed")
                   else cap.SEGMENT.unpack_from(r[3])) for r in self.cap.records if r[0] in ACTIONS]
        trace = self.snap["device_traces"][0]
        # Everything up to the snapshot, then one 'snapshot' entry.
        self.assertEqual([e["action"] for e in trace], [n for n, _ in events[:len(trace) - 1]] + ["snapshot"])
        self.assertNotIn("frames", trace[-1])
        for e, (n, ev) in zip(trace[:-1], events):
            self.assertEqual((e["addr"], e["size"], e["stream"]), (ev[1], ev[2], ev[4]))
        times = [e["time_us"] for e in trace]
        self.assertEqual(times, sorted(times))
        self.assertGreaterEqual(times[0], int(self.t0 * 1e6) - 1000)
        self.assertLessEqual(times[-1], int(self.t1 * 1e6) + 1000)
        alloc = next(e for e in trace if e["action"] == "alloc" and e["size"] >= KIB)
        self.assertEqual((alloc["frames"][0]["name"], alloc["frames"][0]["line"]),
                         ("inner", common.marker_line(os.path.abspath(__file__), "SNAP-ALLOC")))
        self.assertEqual(alloc["compile_context"], "N/A")
        self.assertEqual(alloc["user_metadata"], "")

    def test_segments_match_the_state_record_at_the_returned_offset(self):
        rec = next(r for r in self.cap.records if r[4] == self.offset)
        self.assertEqual(rec[0], "state")
        state = self.cap.state(rec[3])
        segs = self.snap["segments"]
        self.assertEqual([(s["address"], s["total_size"]) for s in segs],
                         [(s["addr"], s["size"]) for s in state["segments"]])
        for s, st in zip(segs, state["segments"]):
            self.assertEqual([(b["address"], b["size"], b["state"]) for b in s["blocks"]],
                             [(b["addr"], b["size"], STATES[b["state"]]) for b in st["blocks"]])
            self.assertEqual(s["allocated_size"], sum(b["size"] for b in s["blocks"]
                                                      if b["state"] == "active_allocated"))
        live = [b for s in segs for b in s["blocks"] if b["state"] == "active_allocated"]
        self.assertEqual([b["requested_size"] for b in live], [3 * MIB])
        self.assertEqual(live[0]["frames"][0]["name"], "inner")
        self.assertTrue(self.snap["allocator_settings"]["expandable_segments"])

    def test_annotations_and_snapshot_marker(self):
        ann = self.snap["external_annotations"]
        self.assertEqual([(a["stage"], a["name"], a["device"]) for a in ann], [("START", "phase", 0), ("END", "phase", 0)])
        markers = [cap.F.MarkerRec.unpack_from(r[3]) for r in self.cap.of("marker")]
        self.assertEqual([(self.cap.strings[m[1]], m[2]) for m in markers],
                         [("phase", 1), ("phase", 2), (self.pickle_path, 3)])

    def test_in_memory_pickle_has_the_same_state(self):
        with open(self.bytes_path, "rb") as f:
            other = pickle.load(f)
        self.assertEqual(other["segments"], self.snap["segments"])
        self.assertEqual(other["device_traces"][0][:-1], self.snap["device_traces"][0])


if __name__ == "__main__":
    common.main({"snapshot": scenario_snapshot})
