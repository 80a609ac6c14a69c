"""Memory labels (torch.cuda.memory._set_memory_metadata) in both allocator modes, with the real .so on the simulated
device and the stand-in torch: under the lens allocator the bootstrap's shim (Note [Memory labels under the lens] in
gpumem/_shims.py), in the PyTorch-allocator mode the trace entries' user_metadata (here through the history source,
the stand-in having no C++ extension builder). Either way the capture holds REC_USER_METADATA records (Note [User
metadata] in native/format/gpumem_format.h) and each allocation is read back with its label."""
import json
import os
import sys
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _format as F  # noqa: E402  the record layouts (native/format/gpumem_format.h)

MiB = 1 << 20


def allocations(path):
    """(size, thread, label or None) of every REC_ALLOC of a capture, the label replayed from its thread's
    REC_USER_METADATA records as FORMAT.md says; and the label records themselves."""
    _, recs = support.read_capture(path)
    strings, labels, out, records = {}, {}, [], []
    for rtype, payload in recs:
        if rtype == F.REC_STRING:
            sid, n = F.StringRec.unpack_from(payload)
            strings[sid] = payload[F.StringRec.size:F.StringRec.size + n].decode()
        elif rtype == F.REC_USER_METADATA:
            r = F.UserMetadataRec.unpack_dict(payload)
            text = strings[r["text"]] if r["text"] else None
            labels[r["thread"]] = text
            records.append((r["thread"], text))
        elif rtype == F.REC_ALLOC:
            e = F.BlockEvent.unpack_dict(payload)
            out.append((e["size"], e["thread"], labels.get(e["thread"])))
    return out, records


LENS = r"""
import json, threading, torch
mem = torch.cuda.memory
out = {"before": mem._get_memory_metadata()}
mem._set_memory_metadata("stage=train")            # before CUDA is initialised: the shim initialises it
keep = [torch.empty(3 << 20, device="cuda")]
mem._set_memory_metadata("stage=train")            # unchanged: no second record
keep.append(torch.empty(5 << 20, device="cuda"))
def worker():                                       # a thread of its own: no label, like autograd's workers
    out["worker_sees"] = mem._get_memory_metadata()
    keep.append(torch.empty(2 << 20, device="cuda"))
t = threading.Thread(target=worker); t.start(); t.join()
mem._set_memory_metadata("stage=eval")
keep.append(torch.empty(7 << 20, device="cuda"))
out["main_sees"] = mem._get_memory_metadata()
mem._set_memory_metadata({"step": 3, "phase": "eval"})   # newer PyTorch's structured metadata: compact JSON
keep.append(torch.empty(1 << 20, device="cuda"))
mem._set_memory_metadata("")
keep.append(torch.empty(11 << 20, device="cuda"))
try:
    mem._set_memory_metadata(3)
    out["int"] = "accepted"
except TypeError as exc:
    out["int"] = "TypeError"
snap = mem._snapshot()
out["snapshot"] = [[e["size"], e["user_metadata"], e["compile_context"]] for e in snap["device_traces"][0] if e["action"] == "alloc"]
print(json.dumps(out), flush=True)
"""

# The PyTorch-allocator mode on the stand-in: its allocator APIs raise like a pluggable allocator's, so this workload
# gives it PyTorch's own history (what the mode keeps), whose entries carry user_metadata as PyTorch 2.10+ writes it.
PYTORCH = r"""
import json, os, sys
import torch
mem = torch.cuda.memory
trace = []
def record(action, addr, size, label):
    trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": len(trace) + 1,
                  "compile_context": "N/A", "user_metadata": label,
                  "frames": [{"filename": os.path.abspath(__file__), "name": "<module>", "line": 9}]})
mem._record_memory_history = lambda *a, **k: None
mem._snapshot = lambda *a, **k: {"segments": [], "device_traces": [list(trace)], "allocator_settings": {},
                                 "external_annotations": []}
mem.get_allocator_backend = lambda: "native"
torch.cuda.init()
base = 1 << 30
record("segment_alloc", base, 40 << 20, "")
record("alloc", base, 3 << 20, "stage=train")
record("alloc", base + (3 << 20), 5 << 20, "stage=train")
record("free_requested", base + (3 << 20), 5 << 20, "stage=eval")
record("free_completed", base + (3 << 20), 5 << 20, "stage=eval")
record("alloc", base + (8 << 20), 7 << 20, "stage=eval")
record("alloc", base + (15 << 20), 11 << 20, "")
from gpumem._state import STATE
print(json.dumps({"source": STATE.observer_source}), flush=True)
"""


class UserMetadataTest(unittest.TestCase):
    def setUp(self):
        self.so = support.real_so_or_skip(self)

    def test_lens_shim_labels_each_allocation_of_the_calling_thread(self):
        run = support.run_script(LENS, so=self.so, env={"GPUMEM_BACKEND": "sim"})
        self.assertEqual(run.code, 0, run.err)
        out = run.json_out()
        # PyTorch's _get_memory_metadata: the calling thread's label, "" before any and on other threads.
        self.assertEqual((out["before"], out["worker_sees"], out["main_sees"]), ("", "", "stage=eval"))
        self.assertEqual(out["int"], "TypeError")
        allocs, records = allocations(run.capture())
        by_size = {size: label for size, _thread, label in allocs}
        self.assertEqual(by_size, {3 * MiB: "stage=train", 5 * MiB: "stage=train", 2 * MiB: None, 7 * MiB: "stage=eval",
                                   1 * MiB: '{"step":3,"phase":"eval"}', 11 * MiB: None})
        # One record per change of a thread's label: the repeated "stage=train" wrote none.
        self.assertEqual(records, [(0, "stage=train"), (0, "stage=eval"), (0, '{"step":3,"phase":"eval"}'), (0, None)])
        worker = [thread for size, thread, _ in allocs if size == 2 * MiB]
        self.assertNotEqual(worker, [0], "the worker's allocation is on a thread of its own")
        # The shimmed _snapshot()'s trace entries carry the labels as PyTorch's do.
        self.assertEqual(out["snapshot"], [[3 * MiB, "stage=train", "N/A"], [5 * MiB, "stage=train", "N/A"], [2 * MiB, "", "N/A"],
                                           [7 * MiB, "stage=eval", "N/A"], [1 * MiB, '{"step":3,"phase":"eval"}', "N/A"],
                                           [11 * MiB, "", "N/A"]])

    def test_pytorch_mode_keeps_the_trace_entries_user_metadata(self):
        run = support.run_script(PYTORCH, so=self.so, env={"GPUMEM_ALLOCATOR": "pytorch", "GPUMEM_BACKEND": "sim"})
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.json_out()["source"], "history")
        allocs, records = allocations(run.capture())
        self.assertEqual([(size, label) for size, _, label in allocs],
                         [(3 * MiB, "stage=train"), (5 * MiB, "stage=train"), (7 * MiB, "stage=eval"), (11 * MiB, None)])
        # The entries' label changes, in their order (the free of the 5 MiB block already carried "stage=eval").
        self.assertEqual([text for _, text in records], ["stage=train", "stage=eval", None])


if __name__ == "__main__":
    unittest.main()
