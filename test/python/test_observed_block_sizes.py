"""Note [Observed block sizes] (native/allocator/src/observer.cc) on PyTorch's own layout: the ResNet-50 snapshot
fixture (torch 2.11, H200) has blocks that PyTorch did not split, whose size is more than the request rounded to
512 B (8,585,216 B for 8,192,000 asked: splitting would have left 393,216 B, under PyTorch's 1 MiB). The observer
is given the snapshot's layout as a state (as the live tracker writes one when it starts); each such block is
freed and asked for again with its requested size through the observer's trace-entry conversion; the capture's
alloc must carry PyTorch's size, and its requested field the request."""
import json
import os
import pickle
import subprocess
import sys
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _format as F  # noqa: E402
from gpumem import _native, _observer_api  # noqa: E402

FIXTURE = os.path.join(support.ROOT, "test", "fixtures", "pytorch-snapshots", "resnet50-bf16-train-python-stacks.pickle")


def rounded(n):
    return 512 if n < 512 else (n + 511) // 512 * 512


class ObservedBlockSizesTest(unittest.TestCase):
    def setUp(self):
        self.so = support.real_so_or_skip(self)
        with open(FIXTURE, "rb") as f:
            self.snap = pickle.load(f)

    def replay(self, blocks):
        """The observer in a process of its own (one capture per process): the allocs it records."""
        capture = os.path.join(support.new_dir("o"), "c.gpumem")
        arg = json.dumps([b["address"] for b in blocks])
        r = subprocess.run([sys.executable, __file__, self.so, capture, arg], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=str(support.PY_DIR)))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(capture, "rb") as f:
            data = f.read()
        _, _, _, off = F.read_header(data)
        return [F.BlockEvent.unpack_dict(p) for _, t, _, _, p in F.records(data, off) if t == F.REC_ALLOC]

    def test_blocks_pytorch_did_not_split_keep_their_whole_size(self):
        blocks = [b for s in self.snap["segments"] if not s["is_expandable"] for b in s["blocks"]
                  if b["state"] == "active_allocated" and b["size"] != rounded(b["requested_size"])]
        self.assertEqual(len(blocks), 5)
        allocs = self.replay(blocks)
        self.assertEqual([(a["addr"], a["size"], a["requested"]) for a in allocs],
                         [(b["address"], b["size"], b["requested_size"]) for b in blocks])

    def test_split_blocks_are_the_rounded_request(self):
        blocks = [b for s in self.snap["segments"] if not s["is_expandable"] for b in s["blocks"]
                  if b["state"] == "active_allocated" and b["size"] == rounded(b["requested_size"])][:200]
        self.assertGreaterEqual(len([b for b in blocks if b["size"] > 1 << 20]), 20, "large blocks among them")
        allocs = self.replay(blocks)
        self.assertEqual([(a["addr"], a["size"]) for a in allocs], [(b["address"], b["size"]) for b in blocks])


def child(so, capture, addrs):
    """Gives the observer the fixture's layout as a state, then frees each block at `addrs` and asks for it again."""
    with open(FIXTURE, "rb") as f:
        snap = pickle.load(f)
    native = _native.Allocator(so)
    native.configure({"capture_path": capture, "sample_interval_ms": 0})
    obs = _observer_api.Observer(native)
    obs.start(None, None)
    obs.state(0, 1, [{k: s[k] for k in ("device", "address", "total_size", "stream", "segment_type", "is_expandable")}
                     | {"blocks": [{k: b[k] for k in ("address", "size", "requested_size", "state")} for b in s["blocks"]]}
                     for s in snap["segments"]])
    by_addr = {b["address"]: b for s in snap["segments"] for b in s["blocks"]}
    trace = []
    for a in addrs:
        n = by_addr[a]["requested_size"]
        trace += [{"action": "free_requested", "addr": a, "size": n}, {"action": "free_completed", "addr": a, "size": n},
                  {"action": "alloc", "addr": a, "size": n}]
    _observer_api.feed_trace(obs, trace, 0)
    native.shutdown(0)


if __name__ == "__main__":
    if len(sys.argv) == 4:
        child(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
    else:
        unittest.main()
