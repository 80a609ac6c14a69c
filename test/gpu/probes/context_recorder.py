#!/usr/bin/env python3
"""Probe (not a test): can the PyTorch-allocator mode take each allocation's Python stack
where PyTorch itself takes it for its history, i.e. in the context recorder that
c10::cuda::CUDACachingAllocator::recordHistory installs, which malloc calls BEFORE it takes the allocator
lock (so taking the GIL there cannot deadlock), on the allocating thread?

    python3 test/gpu/probes/context_recorder.py        (≈ 1 min with the build)

Prints: recordHistory's declaration in this torch's headers; which overload compiled; per thread kind,
how often the recorder ran and whether it held the GIL; whether the tracker saw the recorder's value for
the same allocation (thread-local hand-over); whether _snapshot() still works with null contexts; and
whether a user's own _record_memory_history replaces the recorder.
"""
import faulthandler
import glob
import os
import re
import sys
import threading
import time

faulthandler.dump_traceback_later(150, exit=True)

SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <atomic>
#include <string>
namespace CCA = c10::cuda::CUDACachingAllocator;
static std::atomic<int64_t> n_rec{0}, n_rec_gil{0}, n_alloc{0}, n_alloc_matched{0}, n_alloc_ctx{0};
static thread_local int64_t tls_token = 0;
static std::atomic<int64_t> next_token{1};
static std::shared_ptr<c10::GatheredContext> recorder() {
  n_rec++;
  if (PyGILState_Check()) n_rec_gil++;
  tls_token = next_token++;
  return nullptr;
}
template <class F> auto rh(F f, bool on, int) -> decltype(CCA::recordHistory(on, f, size_t(1), CCA::RecordContext::ALLOC, false, std::vector<std::string>{}), std::string()) {
  CCA::recordHistory(on, f, 1, CCA::RecordContext::ALLOC, false, std::vector<std::string>{}); return "6 args";
}
template <class F> auto rh(F f, bool on, long) -> decltype(CCA::recordHistory(on, f, size_t(1), CCA::RecordContext::ALLOC, false), std::string()) {
  CCA::recordHistory(on, f, 1, CCA::RecordContext::ALLOC, false); return "5 args";
}
template <class F> std::string rh(F f, bool on, ...) { CCA::recordHistory(on, f, 1, CCA::RecordContext::ALLOC); return "4 args"; }
std::string install() {
  CCA::attachAllocatorTraceTracker([](const CCA::TraceEntry& te) {
    if (te.action_ != CCA::TraceEntry::ALLOC) return;
    n_alloc++;
    if (tls_token) n_alloc_matched++;
    if (te.context_) n_alloc_ctx++;
    tls_token = 0;
  });
  return rh(&recorder, true, 0);
}
std::vector<int64_t> counts() { return {n_rec.load(), n_rec_gil.load(), n_alloc.load(), n_alloc_matched.load(), n_alloc_ctx.load()}; }
"""


def main():
    import torch

    print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), flush=True)
    inc = os.path.join(os.path.dirname(torch.__file__), "include")
    for h in glob.glob(os.path.join(inc, "c10", "cuda", "CUDACachingAllocator.h")):
        text = open(h).read()
        for m in re.finditer(r"(inline )?(C10_CUDA_API )?void recordHistory\([^)]*\)", text):
            print("DECL", " ".join(m.group(0).split()))
        for m in re.finditer(r"struct TraceEntry \{.*?\n\};", text, re.S):
            print("TRACEENTRY fields:", sorted(set(re.findall(r"\b(\w+_)\s*[;{=]", m.group(0)))))
    from torch.utils.cpp_extension import load_inline

    t0 = time.time()
    d = "/tmp/gpumem-probe-ctx"
    os.makedirs(d, exist_ok=True)
    mod = load_inline(name="gpumem_probe_ctx", cpp_sources=[SRC], functions=["install", "counts"], with_cuda=True,
                      build_directory=d, verbose=False)
    print("built in %.1f s" % (time.time() - t0), flush=True)
    x = torch.randn(8, device="cuda")  # allocator initialised
    print("overload:", mod.install(), flush=True)
    c0 = mod.counts()
    # Main thread: forward; autograd thread: backward.
    m = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).cuda()
    inp = torch.randn(256, 512, device="cuda", requires_grad=True)
    c1 = mod.counts()
    y = m(inp).square().sum()
    c2 = mod.counts()
    y.backward()
    torch.cuda.synchronize()
    c3 = mod.counts()
    # A Python thread of the user's.
    def worker():
        torch.randn(1024, 1024, device="cuda") * 2
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    c4 = mod.counts()
    names = ["recorder calls", "with GIL", "ALLOC entries", "ALLOC with the recorder's token", "ALLOC with a context"]
    for label, a, b in (("setup", c0, c1), ("forward (main)", c1, c2), ("backward (autograd thread)", c2, c3), ("python thread", c3, c4)):
        print("%-28s %s" % (label, {n: b[i] - a[i] for i, n in enumerate(names)}), flush=True)
    snap = torch.cuda.memory._snapshot()
    print("snapshot ok: %d segments, %d trace entries on device 0, history %s" % (
        len(snap["segments"]), len(snap["device_traces"][0]), torch._C._cuda_isHistoryEnabled() if hasattr(torch._C, "_cuda_isHistoryEnabled") else "?"), flush=True)
    # cudnn.benchmark conv
    torch.backends.cudnn.benchmark = True
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).cuda()
    a = mod.counts()
    conv(torch.randn(32, 64, 56, 56, device="cuda")).sum().backward()
    torch.cuda.synchronize()
    b = mod.counts()
    print("cudnn.benchmark conv       ", {n: b[i] - a[i] for i, n in enumerate(names)}, flush=True)
    # The user's own history replaces the recorder.
    import inspect
    print("_record_memory_history signature:", inspect.signature(torch.cuda.memory._record_memory_history), flush=True)
    torch.cuda.memory._record_memory_history(max_entries=1000)
    a = mod.counts()
    torch.randn(4096, 4096, device="cuda")
    b = mod.counts()
    print("after user's history on    ", {n: b[i] - a[i] for i, n in enumerate(names)}, flush=True)
    torch.cuda.memory._record_memory_history(enabled=None)
    a = mod.counts()
    torch.randn(4096, 4096, device="cuda")
    b = mod.counts()
    print("after user's history off   ", {n: b[i] - a[i] for i, n in enumerate(names)}, flush=True)
    print("PROBE DONE", flush=True)


if __name__ == "__main__":
    main()
