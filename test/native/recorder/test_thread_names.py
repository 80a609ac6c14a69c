"""Every thread the library starts is named "gpumem-<job>" (Note [Thread names] in native/allocator/src/sequencer.cc):
an unnamed thread carries the process's name, and `top -H`, the benchmarks' thread rows and a profile by thread
(test/gpu/probes/perf_host.sh) then count its work as the workload's main thread's.
Run: python3 test/native/recorder/test_thread_names.py"""
import ctypes
import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def thread_names():
    names = {}
    for tid in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/comm" % tid) as f:
            names[int(tid)] = f.read().strip()
    return names


def scenario_threads(folder):
    """Starts the writer, the sampler, the control server and the observer's sequencer; prints every thread's name."""
    before = thread_names()
    lib = common.load()
    lib.gpumem_observe_start.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    common.configure(lib, capture_path=os.path.join(folder, "c.gpumem"), control_socket=os.path.join(folder, "s"),
                     sample_interval_ms=20)
    lib.gpumem_observe_start(None, None)
    lib.gpumem_free(lib.gpumem_malloc(1 << 20, 0, None), 0, 0, None)
    time.sleep(0.1)  # the sampler has made a pass
    after = thread_names()
    print(json.dumps({"main": before[os.getpid()], "started": sorted(v for k, v in after.items() if k not in before)}))
    lib.gpumem_shutdown(0)


class ThreadNames(unittest.TestCase):
    def test_every_thread_of_ours_is_named(self):
        with tempfile.TemporaryDirectory(prefix="gpumem-threads-") as folder:
            got = json.loads(common.run_scenario(__file__, "threads", folder).strip().splitlines()[-1])
        self.assertEqual(got["started"], ["gpumem-control", "gpumem-observe", "gpumem-sampler", "gpumem-writer"],
                         "threads started by the library (the main thread is %r)" % got["main"])


if __name__ == "__main__":
    common.main({"threads": scenario_threads})
