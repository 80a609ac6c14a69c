"""bench_allocator._process_state: what a step-benchmark child carries into each model (whether
ResNet-50 after GPT-2 in one recording process starts from a different C heap, Python heap or CUDA memory). Read
here from this real process, with a stand-in for torch.cuda's two counters."""
import ctypes
import gc
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "gpu"))
import bench_allocator  # noqa: E402  (imports no torch at module level)


class _Cuda:
    def __init__(self, allocated, reserved):
        self.memory_allocated = lambda: allocated
        self.memory_reserved = lambda: reserved


class _Torch:
    def __init__(self, allocated, reserved):
        self.cuda = _Cuda(allocated, reserved)


class ProcessStateTest(unittest.TestCase):
    def test_cuda_counters_are_the_torch_ones(self):
        s = bench_allocator._process_state(_Torch(65 << 20, 14570 << 20))
        self.assertEqual(s["cuda_allocated"], 65 << 20)
        self.assertEqual(s["cuda_reserved"], 14570 << 20)

    def test_python_objects_follow_what_the_process_keeps(self):
        gc.collect()  # garbage from before would otherwise go during the count below
        before = bench_allocator._process_state(_Torch(0, 0))["py_objects"]
        kept = [[i] for i in range(20000)]  # 20,000 tracked lists (and the outer one)
        gc.collect()
        after = bench_allocator._process_state(_Torch(0, 0))["py_objects"]
        # other tests' threads and finalizers may add or drop a few hundred objects meanwhile
        self.assertGreater(after - before, 19000)
        del kept
        gc.collect()
        again = bench_allocator._process_state(_Torch(0, 0))["py_objects"]
        self.assertLess(again, after - 19000)

    def test_c_heap_grows_with_what_malloc_keeps(self):
        libc = ctypes.CDLL(None)
        libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        s0 = bench_allocator._process_state(_Torch(0, 0))
        if "heap_used" not in s0:
            self.skipTest("this libc has no mallinfo2")
        self.assertLessEqual(s0["heap_used"] + s0["heap_free"], s0["heap_arena"] + 1)
        blocks = [libc.malloc(1024) for _ in range(4096)]  # 4 MiB in small chunks: the arena, not mmap
        try:
            s1 = bench_allocator._process_state(_Torch(0, 0))
            self.assertGreaterEqual(s1["heap_used"] - s0["heap_used"], 4096 * 1024)
        finally:
            for b in blocks:
                libc.free(b)
        s2 = bench_allocator._process_state(_Torch(0, 0))
        self.assertLess(s2["heap_used"], s1["heap_used"] - 3 * 1024 * 1024)


if __name__ == "__main__":
    unittest.main()
