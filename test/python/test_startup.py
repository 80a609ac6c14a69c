"""Note [Start-up] (gpumem/_startup.py): one state machine, re-entrant by construction.

The stand-in torch's _lazy_init re-enters itself as PyTorch 2.11's does (its queued _check_capability calls
get_device_properties, which calls _lazy_init while is_initialized() is still False). On the bootstrap before
this machine, the PyTorch-allocator mode took its own non-reentrant lock a second time on that path and hung at
the first CUDA use on real torch; these tests fail on it by time-out, with the stack on stderr."""
import json
import os
import unittest

import support

# Reports what the machine went through and what torch's _lazy_init saw; a watchdog turns a hang into a stack.
WORKLOAD = r"""
import faulthandler, json, sys, threading
faulthandler.dump_traceback_later(20, exit=True)
import torch
THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
barrier = threading.Barrier(THREADS)
def first_use():
    barrier.wait()
    torch.empty(4096, device="cuda")       # C++ device_lazy_init → torch.cuda._lazy_init, as in PyTorch
threads = [threading.Thread(target=first_use) for _ in range(THREADS)]
[t.start() for t in threads]
[t.join() for t in threads]
props = torch.cuda.get_device_properties(0)  # after start-up: straight to PyTorch's function
from gpumem._startup import MACHINE
from gpumem._state import STATE
print(json.dumps({"history": MACHINE.history, "lazy_init": torch.cuda.lazy_init_calls,
                  "unwrapped": torch.cuda._lazy_init is MACHINE.original, "configured": STATE.configured,
                  "swapped": STATE.swapped, "source": STATE.observer_source, "device": props.name}))
"""


class StartupTest(unittest.TestCase):
    def run_mode(self, mode, threads=1):
        so = support.real_so_or_skip(self)
        work = support.new_dir("w")
        script = os.path.join(work, "train.py")
        with open(script, "w") as f:
            f.write(WORKLOAD)
        session = support.new_dir("s")
        os.chmod(session, 0o700)
        import subprocess
        import sys

        env = support.workload_env(session, so, env={"GPUMEM_ALLOCATOR": mode, "GPUMEM_BACKEND": "sim"})
        try:
            proc = subprocess.run([sys.executable, script, str(threads)], env=env, cwd=work, capture_output=True, text=True,
                                  timeout=45)
        except subprocess.TimeoutExpired as exc:
            self.fail("the workload hung at its first CUDA use:\n%s" % (exc.stderr or b"").decode(errors="replace")[-3000:])
        self.assertEqual(proc.returncode, 0, "the workload did not finish (a watchdog stack is a hang):\n" + proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr, session

    def test_pytorch_mode_observes_after_pytorchs_reentrant_init(self):
        out, err, session = self.run_mode("pytorch")
        # PyTorch's init re-entered itself (through get_device_properties) before it finished.
        self.assertEqual(out["lazy_init"], ["outer", "reentered"], err)
        self.assertEqual(out["history"], ["armed", "configuring", "observing"], err)
        self.assertEqual((out["configured"], out["swapped"], out["unwrapped"]), (True, False, True), err)
        self.assertEqual(out["source"], "history", err)  # the stand-in has no cpp_extension to build the tracker
        (cap,) = [f for f in os.listdir(session) if f.endswith(".gpumem")]
        header, _recs = support.read_capture(os.path.join(session, cap))
        self.assertEqual(header["allocator_mode"], "pytorch")

    def test_lens_mode_configures_before_pytorchs_init_runs(self):
        out, err, _session = self.run_mode("lens")
        self.assertEqual(out["lazy_init"], ["outer", "reentered"], err)
        self.assertEqual(out["history"], ["armed", "configuring", "swapped"], err)
        self.assertEqual((out["configured"], out["swapped"], out["unwrapped"]), (True, True, True), err)

    def test_eight_threads_at_once_start_once(self):
        for mode, final in (("pytorch", "observing"), ("lens", "swapped")):
            with self.subTest(mode):
                out, err, session = self.run_mode(mode, threads=8)
                self.assertEqual(out["lazy_init"].count("outer"), 1, err)
                self.assertEqual(out["history"], ["armed", "configuring", final], err)
                self.assertEqual(len([f for f in os.listdir(session) if f.endswith(".gpumem")]), 1)


if __name__ == "__main__":
    unittest.main()
