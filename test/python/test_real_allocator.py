"""The bootstrap with the real allocator (dist/native/libgpumem_allocator.so, sim backend) and its
control server over a real socket, from the Python client."""
import json
import os
import pickle
import sys
import time
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _control  # noqa: E402
from gpumem import _format as F  # noqa: E402

WORKLOAD = r"""
import json, os, sys, torch, gpumem
a = torch.empty(3000, device="cuda")
b = torch.empty(30 << 20, device="cuda")
b.free()
gpumem.mark("after warmup")
from gpumem._state import STATE
print(json.dumps({"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                  "peak": torch.cuda.max_memory_allocated(), "keys": len(torch.cuda.memory_stats()),
                  "stacks": STATE.native.stack_info()}), flush=True)
flag = sys.argv[1]
while not os.path.exists(flag):   # busy in Python, holding the GIL, like a training step
    pass
sys.stdin.readline()              # blocked (GIL released) while the test asks for snapshots
print(json.dumps({"reserved": torch.cuda.memory_reserved()}), flush=True)
sys.exit(int(sys.argv[2]))
"""



class RealAllocatorTest(unittest.TestCase):
    def setUp(self):
        self.so = support.real_so_or_skip(self)

    def test_workload_under_the_real_allocator_and_its_control_channel(self):
        proc, work, session = support.start_workload(WORKLOAD, self.so, args=lambda work: (os.path.join(work, "go"), "3"),
                                                     env={"GPUMEM_BACKEND": "sim", "RANK": "0", "WORLD_SIZE": "1"})
        script, flag = os.path.join(work, "train.py"), os.path.join(work, "go")
        try:
            first = json.loads(proc.stdout.readline())
            self.assertEqual(first["allocated"], 3072)  # 3000 B rounded to 512 B
            self.assertEqual(first["peak"], 3072 + (30 << 20))
            self.assertEqual(first["keys"], 122)
            # Both allocations took a stack, and so did the module paths' calibration at `import torch` (Note [First
            # local]); each new sequence is walked with the GIL once, never mismatched.
            self.assertIs(first["stacks"]["python"], True)
            self.assertEqual((first["stacks"]["gil_walks"] + first["stacks"]["gil_free_answers"], first["stacks"]["mismatches"]), (3, 0))
            (info,) = _control.list_processes(session)
            self.assertEqual((info["pid"], info["rank"]), (proc.pid, 0))
            sock = info["socket"]
            self.assertEqual(os.stat(sock).st_mode & 0o777, 0o600)

            # While the workload spins in Python holding the GIL, the server still answers quickly.
            t0 = time.monotonic()
            pong = _control.request(sock, {"cmd": "ping", "id": 9})
            self.assertLess(time.monotonic() - t0, 0.1 + 0.05)
            self.assertEqual((pong["ok"], pong["pid"], pong.get("id")), (True, proc.pid, 9))
            self.assertEqual(pong["devices"][0]["allocated"], first["allocated"])
            self.assertEqual(pong["devices"][0]["reserved"], first["reserved"])

            bad = _control.request(sock, {"cmd": "format_disk"})
            self.assertIs(bad["ok"], False)
            self.assertTrue(bad["error"])
            self.assertIs(_control.request(sock, {"cmd": "mark", "name": "from the test"})["ok"], True)

            emptied = _control.request(sock, {"cmd": "empty_cache"})
            self.assertEqual(emptied["reserved_before"], first["reserved"])
            self.assertLess(emptied["reserved_after"], emptied["reserved_before"])

            open(flag, "w").close()
            snap = _control.request(sock, {"cmd": "snapshot"}, timeout=30)
            self.assertTrue(snap["pickle"].startswith(session + os.sep), snap)
            with open(snap["pickle"], "rb") as f:
                state = pickle.load(f)
            self.assertEqual(set(state), {"segments", "device_traces", "allocator_settings", "external_annotations"})
            live = sum(b["size"] for s in state["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
            self.assertEqual(live, first["allocated"])
            reserved = sum(s["total_size"] for s in state["segments"])
            self.assertEqual(reserved, emptied["reserved_after"])

            out, err = proc.communicate("go\n", timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertEqual(proc.returncode, 3, err)
        self.assertEqual(json.loads(out)["reserved"], emptied["reserved_after"])
        header, records = support.read_capture(info["capture"])
        self.assertEqual((header["rank"], header["world_size"], header["argv"]), (0, 1, [script, flag, "3"]))
        types = [t for t, _ in records]
        self.assertIn(F.REC_EMPTY_CACHE, types)  # from the control channel
        self.assertIn(F.REC_MARKER, types)  # gpumem.mark and the control mark
        self.assertEqual(types[-1], F.REC_END, "the capture ends with REC_END")
        exit_code = F.EndRec.prefix("exit_code").unpack_from(records[-1][1])[1]
        self.assertEqual(exit_code, 3)


if __name__ == "__main__":
    unittest.main()
