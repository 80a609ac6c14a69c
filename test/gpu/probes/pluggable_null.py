"""Probe: what PyTorch raises when a CUDAPluggableAllocator's alloc function returns NULL or throws.
Builds a 10-line allocator with gcc against the CUDA runtime, refuses requests over 1 GiB, prints the exception type."""
import faulthandler
faulthandler.dump_traceback_later(100, exit=True)
import os, subprocess, sys, tempfile
d = tempfile.mkdtemp()
src = os.path.join(d, "a.cc")
open(src, "w").write(r'''
#include <cuda_runtime_api.h>
#include <stdexcept>
#include <cstdlib>
extern "C" void* a_null(size_t n, int dev, cudaStream_t s) { void* p = nullptr; if (n > (1ull << 30)) return nullptr; cudaMalloc(&p, n); return p; }
extern "C" void* a_throw(size_t n, int dev, cudaStream_t s) { void* p = nullptr; if (n > (1ull << 30)) throw std::runtime_error("CUDA out of memory. probe"); cudaMalloc(&p, n); return p; }
extern "C" void f(void* p, size_t n, int dev, cudaStream_t s) { cudaFree(p); }
''')
so = os.path.join(d, "a.so")
r = subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-I/usr/local/cuda/include", src, "-o", so, "-L/usr/local/cuda/lib64", "-lcudart"], capture_output=True, text=True)
print("build", r.returncode, r.stderr[-500:])
import torch
which = sys.argv[1]
alloc = torch.cuda.memory.CUDAPluggableAllocator(so, "a_" + which, "f")
torch.cuda.memory.change_current_allocator(alloc)
x = torch.ones(10, device="cuda")
print("small ok", x.sum().item())
try:
    y = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    print("BIG returned", y.data_ptr())
except BaseException as e:
    print("RAISED", type(e).__module__, type(e).__name__, isinstance(e, torch.OutOfMemoryError), str(e)[:300])
print("after", torch.ones(4, device="cuda").sum().item())
