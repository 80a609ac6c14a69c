"""Shared helpers for the recorder tests: load the allocator .so (sim backend) and run one scenario in a
fresh process (the allocator is configured once per process, like a real workload)."""
import ctypes
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SO = os.environ.get("GPUMEM_TEST_SO", os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so"))
NATIVE_THREAD_SO = os.environ.get("GPUMEM_NATIVE_THREAD_SO", "")


def load(path=None):
    """The allocator .so through ctypes with the C API's signatures (`path`: default SO)."""
    lib = ctypes.CDLL(path or SO)
    c = ctypes
    for name, res, args in [
        ("gpumem_configure", c.c_int, [c.c_char_p]),
        ("gpumem_last_error", c.c_char_p, []),
        ("gpumem_init", None, [c.c_int]),
        ("gpumem_malloc", c.c_void_p, [c.c_size_t, c.c_int, c.c_void_p]),
        ("gpumem_free", None, [c.c_void_p, c.c_size_t, c.c_int, c.c_void_p]),
        ("gpumem_snapshot", c.c_int64, [c.c_char_p]),
        ("gpumem_snapshot_pickle", c.c_int, [c.POINTER(c.POINTER(c.c_uint8)), c.POINTER(c.c_size_t)]),
        ("gpumem_free_buffer", None, [c.c_void_p]),
        ("gpumem_mark", c.c_int, [c.c_char_p, c.c_uint32]),
        ("gpumem_notice", c.c_int, [c.c_char_p, c.c_uint32]),
        ("gpumem_tag", c.c_int, [c.c_uint64, c.c_uint64, c.c_uint32, c.c_char_p, c.c_int]),
        ("gpumem_user_metadata", c.c_int, [c.c_char_p]),
        ("gpumem_backward_begin", None, []),
        ("gpumem_backward_end", None, []),
        ("gpumem_shutdown", None, [c.c_int]),
        ("gpumem_stack_info", c.c_size_t, [c.c_char_p, c.c_size_t]),
        ("gpumem_empty_cache", c.c_int, [c.c_int, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64), c.c_int]),
    ]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def configure(lib, **cfg):
    base = {"backend": "sim", "sim_capacity": 1 << 30, "sim_devices": 1, "sample_interval_ms": 0}
    base.update(cfg)
    if lib.gpumem_configure(json.dumps(base).encode()) != 0:
        raise RuntimeError("configure failed: %s" % lib.gpumem_last_error().decode())
    lib.gpumem_init(1)


def stack_info(lib):
    """gpumem_stack_info() as a dict (Note [GIL-free walk])."""
    buf = ctypes.create_string_buffer(4096)
    lib.gpumem_stack_info(buf, len(buf))
    return json.loads(buf.value.decode())


def marker_line(path, tag):
    """The 1-based line of the source line ending with `# <tag>` (expected lines come from the file)."""
    with open(path) as f:
        hits = [i + 1 for i, line in enumerate(f) if line.rstrip().endswith("# " + tag)]
    assert len(hits) == 1, (tag, hits)
    return hits[0]


def run_scenario(test_file, name, *args, timeout=60):
    """Runs `python3 test_file --scenario name args…` and returns its stdout (fails the test on error)."""
    r = subprocess.run([sys.executable, test_file, "--scenario", name] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError("scenario %s failed (%d):\n%s\n%s" % (name, r.returncode, r.stdout, r.stderr))
    return r.stdout


def main(scenarios):
    if len(sys.argv) > 2 and sys.argv[1] == "--scenario":
        scenarios[sys.argv[2]](*sys.argv[3:])
        return
    # One results line per test (Note [Results format] in test/README.md), named recorder/<script>.<Class>.<test>.
    sys.path.insert(0, os.path.join(ROOT, "test", "tools"))
    import results_unittest

    script = "recorder/" + os.path.splitext(os.path.basename(sys.argv[0]))[0]
    if not os.path.exists(SO):
        print("SKIP: %s not built (make -C native/allocator)" % SO)
        subprocess.run(["sh", os.path.join(ROOT, "test", "tools", "emit-result.sh"), script, "skip",
                        "%s not built (make -C native/allocator)" % SO], check=False)
        return
    results_unittest.JsonLinesResult.main_module = script
    unittest.main(testRunner=unittest.TextTestRunner(verbosity=2, resultclass=results_unittest.JsonLinesResult))
