"""Note [History view]: what _snapshot() returns follows the user's _record_memory_history calls as PyTorch's
would, while the lens records everything. Driven with a stand-in for the allocator's snapshot (the trace grows
as the "workload" allocates), replaying PyTorch's test_memory_plots_history_context step by step."""
import pickle
import sys
import unittest

import support


class FakeNative:
    def __init__(self):
        self.trace, self.blocks, self.t = [], [], 100

    def alloc(self, addr, size, fn, live=True):
        self.t += 10
        frames = [{"filename": "test.py", "line": 1, "name": fn}]
        self.trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": self.t, "frames": frames})
        if live:
            self.blocks.append({"address": addr, "size": size, "state": "active_allocated", "frames": frames})

    def free(self, addr):
        self.t += 10
        self.trace.append({"action": "free_requested", "addr": addr, "size": 0, "stream": 0, "time_us": self.t, "frames": []})
        self.blocks = [b for b in self.blocks if b["address"] != addr]

    def snapshot_pickle(self):
        return pickle.dumps({"segments": [{"device": 0, "blocks": [dict(b) for b in self.blocks]}],
                             "device_traces": [[dict(e) for e in self.trace]]})


class HistoryViewTest(unittest.TestCase):
    def setUp(self):
        sys.path.insert(0, str(support.PY_DIR))
        import gpumem._history as history
        from gpumem._state import STATE
        self.h, self.state = history, STATE
        self.h._switches.clear()
        self.native = FakeNative()
        self.saved, STATE.native = getattr(STATE, "native", None), self.native

    def tearDown(self):
        self.h._switches.clear()
        self.state.native = self.saved
        sys.path.remove(str(support.PY_DIR))

    def names(self, snap):
        return [f["name"] for t in snap["device_traces"] for e in t for f in e.get("frames", [])] + \
            [f["name"] for s in snap["segments"] for b in s["blocks"] for f in b.get("frames", [])]

    def test_pytorchs_history_context_sequence(self):
        n = self.native
        n.alloc(1, 512, "before_recording")
        self.assertIn("before_recording", self.names(self.h.view()), "no call yet: the full record")
        self.h.record("all", context="all", stacks="python")
        n.alloc(2, 512, "should_capture1")
        self.h.record("all", context=None)
        n.alloc(3, 512, "should_not_capture")
        n.free(2)
        self.h.record("all", context="all", stacks="python")
        n.alloc(4, 512, "should_capture2")
        n.free(3)
        names = self.names(self.h.view())
        self.assertIn("should_capture1", names)
        self.assertIn("should_capture2", names)
        self.assertNotIn("should_not_capture", names)
        self.assertNotIn("before_recording", names, "before the first call PyTorch recorded nothing")
        trace = self.h.view()["device_traces"][0]
        self.assertEqual([(e["action"], e["addr"]) for e in trace],
                         [("alloc", 2), ("alloc", 3), ("free_requested", 2), ("alloc", 4), ("free_requested", 3)])
        # The live block allocated without context keeps no frames; the one with context keeps them.
        blocks = {b["address"]: b["frames"] for s in self.h.view()["segments"] for b in s["blocks"]}
        self.assertEqual(blocks[1], [])
        self.assertEqual([f["name"] for f in blocks[4]], ["should_capture2"])

    def test_disabling_clears_the_trace_and_state_records_no_trace(self):
        n = self.native
        self.h.record("all")
        n.alloc(1, 512, "a")
        self.h.record(None)
        n.alloc(2, 512, "b")
        self.assertEqual(self.h.view()["device_traces"], [[]])
        self.h.record("state", context="state")
        n.alloc(3, 512, "c")
        snap = self.h.view()
        self.assertEqual(snap["device_traces"], [[]], "enabled='state' keeps no trace entries")
        self.assertEqual(self.names(snap), ["c"], "but live blocks keep their frames")

    def test_legacy_boolean_signature_and_bad_context(self):
        n = self.native
        self.h.record(True, trace_alloc_max_entries=100, trace_alloc_record_context=True)
        n.alloc(1, 512, "legacy")
        self.assertEqual(self.names(self.h.view()), ["legacy", "legacy"])
        with self.assertRaisesRegex(ValueError, "context must be one of"):
            self.h.record("all", context="everything")


if __name__ == "__main__":
    unittest.main()
