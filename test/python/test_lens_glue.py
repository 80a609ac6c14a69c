"""The lens allocator's OOM glue (Note [Lens OOM type] in gpumem/_observer_ext.cpp): when the observer module is built for
this torch, the lens mode hands CUDAPluggableAllocator the module's gpumem_glue_malloc/free, wired to the lens
library's functions, so an OOM reaches Python as torch.OutOfMemoryError (that translation needs a real torch and
is checked on the GPU: test/gpu/oom_sample_check.py). Here a stand-in glue module, built in the observer's cache
folder, counts the calls that pass through it; the real allocator (simulated device) records them."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))

GLUE_C = r"""
#include <stddef.h>
typedef void* (*M)(size_t, int, void*);
typedef void (*F)(void*, size_t, int, void*);
static M m; static F f; static long calls;
void gpumem_glue_set(void* a, void* b) { m = (M)a; f = (F)b; }
void* gpumem_glue_malloc(size_t n, int d, void* s) { calls++; return m(n, d, s); }
void gpumem_glue_free(void* p, size_t n, int d, void* s) { calls++; f(p, n, d, s); }
long glue_calls(void) { return calls; }
"""

WORKLOAD = """
import ctypes, json, torch
from gpumem._state import STATE
a = torch.empty(3000, device="cuda")
b = torch.empty(1 << 20, device="cuda")
b.free()
glue = STATE.lens_oom_glue
print(json.dumps({"glue": glue, "calls": ctypes.CDLL(glue).glue_calls() if glue else None,
                  "allocated": torch.cuda.memory_allocated()}), flush=True)
"""


class LensGlueTest(unittest.TestCase):
    def setUp(self):
        self.so = support.real_so_or_skip(self)
        self.cache = support.new_dir("cache")

    def glue_folder(self):
        """The observer's build folder for the stand-in torch, as _observer_build._build_dir names it."""
        sys.path.insert(0, str(support.FAKE_TORCH))
        try:
            import torch  # the stand-in
            from gpumem import _observer_build

            old = os.environ.get("XDG_CACHE_HOME")
            os.environ["XDG_CACHE_HOME"] = self.cache
            try:
                return _observer_build._build_dir(torch)[0]
            finally:
                if old is None:
                    del os.environ["XDG_CACHE_HOME"]
                else:
                    os.environ["XDG_CACHE_HOME"] = old
        finally:
            sys.path.remove(str(support.FAKE_TORCH))

    def run_lens(self):
        run = support.run_script(WORKLOAD, so=self.so, env={"XDG_CACHE_HOME": self.cache, "GPUMEM_BACKEND": "sim"})
        self.assertEqual(run.code, 0, run.err)
        return run.json_out()

    def test_without_the_observer_module_the_lens_library_is_handed_over_directly(self):
        out = self.run_lens()
        self.assertEqual((out["glue"], out["calls"], out["allocated"]), (None, None, 3072))

    def build_module(self, source):
        """A stand-in observer module compiled from C `source` into the observer's build folder; its path."""
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            self.skipTest("no C compiler")
        folder = self.glue_folder()
        os.makedirs(folder)
        src = os.path.join(folder, "module.c")
        with open(src, "w") as f:
            f.write(source)
        so = os.path.join(folder, "gpumem_observer_x.so")
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", so, src], check=True)
        return so

    def test_a_built_observer_module_carries_every_allocation_and_free_through_its_glue(self):
        so = self.build_module(GLUE_C)
        out = self.run_lens()
        self.assertEqual(out["glue"], so)
        # two mallocs and one free went through the glue to the lens library, which counted them as PyTorch would
        self.assertEqual((out["calls"], out["allocated"]), (3, 3072))

    def test_a_module_without_the_glue_an_older_build_is_not_used(self):
        self.build_module("int attach_only(void) { return 0; }\n")
        out = self.run_lens()
        self.assertEqual((out["glue"], out["allocated"]), (None, 3072))

if __name__ == "__main__":
    unittest.main()
