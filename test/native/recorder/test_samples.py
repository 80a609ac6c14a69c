"""Device samples against the allocator's reserved bytes around an OOM (Note [Settled samples] in
native/allocator/src/device_sampler.cc): the 30 % / 90 % script on the simulated device, whose page maps are
made slow (sim_map_delay_us, Note [Slow page maps]) so that the failed growth takes as long as a large one on a
real card. The simulated device holds nothing beyond what the allocator reserves, so every sample's used bytes
must equal the reserved bytes of the segment events before it, exactly.
Run: python3 test/native/recorder/test_samples.py"""
import ctypes
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as cap  # noqa: E402
import common  # noqa: E402

F = cap.F
MIB = 1 << 20
PAGE = 20 * MIB                # a large pool's expandable page (kLargePage)
CAPACITY = 100 * PAGE          # 2000 MiB
HELD, ASKED = 30 * PAGE, 90 * PAGE

# OOMs throw a C++ exception out of gpumem_malloc (PyTorch catches it); ctypes cannot, so a shim does.
SHIM = r"""
#include <cstddef>
extern "C" void* try_malloc(void* (*fn)(size_t, int, void*), size_t size, int device) {
  try { return fn(size, device, nullptr); } catch (...) { return nullptr; }
}
"""


def shim(tmp):
    src, so = os.path.join(tmp, "shim.cc"), os.path.join(tmp, "shim.so")
    with open(src, "w") as f:
        f.write(SHIM)
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-o", so, src], check=True)
    lib = ctypes.CDLL(so)
    lib.try_malloc.restype = ctypes.c_void_p
    lib.try_malloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return lib


def scenario_oom(path, sample_ms, tmp):
    """30 %, then 90 % (caught), then keeps working: a few allocations right after the OOM (the peak)."""
    lib = common.load()
    # 70 pages of 3 ms, twice (the ladder retries): ~0.4 s of failed growth.
    common.configure(lib, capture_path=path, sim_capacity=CAPACITY, segments="expandable",
                     sample_interval_ms=int(sample_ms), sim_map_delay_us=3000)
    s = shim(tmp)
    held = lib.gpumem_malloc(HELD, 0, None)
    # Past a sampler period, so that the sampler is waiting, not queued on the device lock, when the request
    # comes: its next pass falls inside the failed growth (as on the H100 of the report).
    time.sleep(min(0.25, 1.25 * int(sample_ms) / 1000))
    p = s.try_malloc(ctypes.cast(lib.gpumem_malloc, ctypes.c_void_p), ASKED, 0)
    assert not p, "the simulated device should not hold 90 % more"
    work = [lib.gpumem_malloc(n, 0, None) for n in (PAGE, 3 * MIB, 512)]
    for q in work:
        lib.gpumem_free(q, 0, 0, None)
    lib.gpumem_free(held, 0, 0, None)
    lib.gpumem_shutdown(0)


def reserved_series(c):
    """[(t_ns, reserved after it)] from the segment events, in file order (one device, one thread)."""
    out, reserved = [], 0
    for name, _, _, p, _ in c.records:
        if name in ("segment_alloc", "segment_map"):
            t, _, size = cap.SEGMENT.unpack_from(p)[:3]
            reserved += size
            out.append((t, reserved))
        elif name in ("segment_free", "segment_unmap"):
            t, _, size = cap.SEGMENT.unpack_from(p)[:3]
            reserved -= size
            out.append((t, reserved))
    return out


def reserved_at(series, t):
    r = 0
    for te, v in series:
        if te <= t:
            r = v
    return r


def samples(c):
    return [F.DeviceSampleRec.unpack_from(p) for name, _, _, p, _ in c.records if name == "device_sample"]


class SamplesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "c.gpumem")
        self.src = os.path.abspath(__file__)

    def tearDown(self):
        self.dir.cleanup()

    def test_no_sample_sees_a_failed_growth_halfway(self):
        common.run_scenario(self.src, "oom", self.path, 2, self.dir.name)
        c = cap.Capture(self.path)
        self.assertEqual(len(c.of("oom")), 1)
        series = reserved_series(c)
        got = samples(c)
        self.assertGreater(len(got), 10)  # the sampler ran all along (every 2 ms; it waits while a growth runs)
        wrong = [(t, used, reserved_at(series, t)) for t, used, _, _ in got if used != reserved_at(series, t)]
        self.assertEqual(wrong, [], "samples whose used bytes are not the reserved bytes (t_ns, used, reserved)")
        self.assertLess(max(used for _, used, _, _ in got), HELD + 10 * PAGE)  # never the 90 % growth's pages

    def test_the_moment_after_an_oom_has_its_own_sample(self):
        # One periodic pass (at the start), none later: the sample after the OOM is the recorder's own.
        common.run_scenario(self.src, "oom", self.path, 600000, self.dir.name)
        c = cap.Capture(self.path)
        (oom,) = c.of("oom")
        t_oom = F.OomRec.prefix("t_ns").unpack_from(oom[3])[0]
        after = [(t, used) for t, used, _, _ in samples(c) if t >= t_oom]
        self.assertEqual(len(after), 1, after)
        self.assertEqual(after[0][1], HELD)
        # It comes before the work that follows the OOM (the next segment event).
        nxt = [t for t, _ in reserved_series(c) if t > t_oom]
        self.assertTrue(not nxt or after[0][0] <= nxt[0], (after, nxt[:1]))


if __name__ == "__main__":
    common.main({"oom": scenario_oom})
