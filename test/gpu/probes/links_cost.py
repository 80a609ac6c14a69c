"""Probe: what linking backward to forward costs PyTorch itself, and whether the running node can be read at each
allocation instead of through a BACKWARD_FUNCTION callback.
(1) CPU time of a ResNet-50 step (batch 64, bf16 autocast) with nothing, with a no-op global RecordFunction callback in
the FUNCTION scope, in the BACKWARD_FUNCTION scope, and both (interleaved rounds; ops and nodes counted per step);
(2) torch::autograd::get_current_node() read inside PyTorch's allocator trace tracker, on the allocating thread: how
many of backward's allocations see a node, whether its sequence_nr() and thread_id() are the forward's, whether
allocations after apply() (validate_outputs' sum_to of a broadcast bias) see it too, and a Python Function's name.
    python3 test/gpu/probes/links_cost.py   (prints one JSON line)"""
import faulthandler

faulthandler.dump_traceback_later(280, exit=True)
import json
import os
import statistics
import sys
import time

import torch
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/record_function.h>
#include <ATen/SequenceNumber.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/python_function.h>
#include <atomic>
#include <mutex>
#include <map>
#include <cstring>
namespace CCA = c10::cuda::CUDACachingAllocator;
static std::atomic<uint64_t> g_ops{0}, g_nodes{0};
static at::CallbackHandle g_fn = 0, g_bw = 0;
static std::unique_ptr<at::ObserverContext> nop_start(const at::RecordFunction&) { return nullptr; }
static void fn_end(const at::RecordFunction&, at::ObserverContext*) { g_ops.fetch_add(1, std::memory_order_relaxed); }
static std::unique_ptr<at::ObserverContext> bw_start(const at::RecordFunction& f) {
  g_nodes.fetch_add(1, std::memory_order_relaxed); return nullptr; }
static void nop_end(const at::RecordFunction&, at::ObserverContext*) {}
void fn_on() { g_fn = at::addGlobalCallback(at::RecordFunctionCallback(nop_start, fn_end).scopes({at::RecordScope::FUNCTION})); }
void fn_off() { if (g_fn) at::removeCallback(g_fn); g_fn = 0; }
void bw_on() { g_bw = at::addGlobalCallback(at::RecordFunctionCallback(bw_start, nop_end).scopes({at::RecordScope::BACKWARD_FUNCTION})); }
void bw_off() { if (g_bw) at::removeCallback(g_bw); g_bw = 0; }
std::vector<uint64_t> counts() { return {g_ops.load(), g_nodes.load(), at::sequence_number::peek()}; }

// allocations seen by the tracker: (seq or -1 with no node, thread id, name) per allocation while on
static std::mutex g_mu;
static std::vector<std::tuple<int64_t, uint64_t, std::string, int64_t>> g_seen;
static std::atomic<bool> g_track{false};
static std::atomic<uint64_t> g_tracked_ns{0}, g_tracked{0};
void tracker_attach() {
  py::gil_scoped_release no_gil;
  CCA::attachAllocatorTraceTracker([](const CCA::TraceEntry& e) {
    if (e.action_ != CCA::TraceEntry::ALLOC || !g_track.load(std::memory_order_relaxed)) return;
    auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<torch::autograd::Node> n = torch::autograd::get_current_node();
    int64_t seq = -2; uint64_t th = 0; const char* name = "";
    if (n) {
      seq = n->sequence_nr() == UINT64_MAX ? -1 : int64_t(n->sequence_nr());
      th = n->thread_id();
      name = typeid(*n).name();  // PyNode's typeinfo is not exported: compare the mangled name
      if (std::strcmp(name, "N5torch8autograd6PyNodeE") == 0)
        name = Py_TYPE(static_cast<torch::autograd::PyNode*>(n.get())->obj)->tp_name;
    }
    g_tracked_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    g_tracked++;
    std::lock_guard<std::mutex> lk(g_mu);
    g_seen.emplace_back(seq, th, name, int64_t(e.size_));
  });
}
void track(bool on) { g_track = on; }
py::list seen() {
  std::lock_guard<std::mutex> lk(g_mu);
  py::list out;
  for (auto& s : g_seen) out.append(py::make_tuple(std::get<0>(s), std::get<1>(s), c10::demangle(std::get<2>(s).c_str()), std::get<3>(s)));
  g_seen.clear();
  return out;
}
std::vector<uint64_t> tracked_cost() { return {g_tracked_ns.load(), g_tracked.load()}; }
uint64_t thread_id() { return at::RecordFunction::currentThreadId(); }
"""

t = time.time()
ext = load_inline("links_cost_probe", CPP, functions=["fn_on", "fn_off", "bw_on", "bw_off", "counts", "tracker_attach",
                                                     "track", "seen", "tracked_cost", "thread_id"], with_cuda=True,
                 verbose=False)
out = {"torch": torch.__version__, "build_s": round(time.time() - t, 1)}

# (1) cost: the step benchmark's ResNet-50 step (batch 64, bf16 autocast, SGD)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_allocator import step_fn  # noqa: E402

torch.manual_seed(0)
step = step_fn("resnet50")
CONFIGS = {"none": ([], []), "function": ([ext.fn_on], [ext.fn_off]), "backward_function": ([ext.bw_on], [ext.bw_off]),
           "both": ([ext.fn_on, ext.bw_on], [ext.fn_off, ext.bw_off])}
for _ in range(8):
    step()
torch.cuda.synchronize()
rows = {k: {"cpu_ms": [], "wall_ms": []} for k in CONFIGS}
per_step = {}
for r in range(5):
    for name, (on, off) in CONFIGS.items():
        for f in on:
            f()
        c_before = ext.counts()
        cpu, wall = [], []
        for i in range(12):
            c0, t0 = time.process_time(), time.perf_counter()
            step()
            c1 = time.process_time()
            torch.cuda.synchronize()
            cpu.append((c1 - c0) * 1e3)
            wall.append((time.perf_counter() - t0) * 1e3)
        c_after = ext.counts()
        for f in off:
            f()
        rows[name]["cpu_ms"].append(round(statistics.median(cpu[2:]), 3))
        rows[name]["wall_ms"].append(round(statistics.median(wall[2:]), 3))
        per_step[name] = [round((a - b) / 12, 1) for a, b in zip(c_after, c_before)]
for name, v in rows.items():
    v["cpu_median"] = round(statistics.median(v["cpu_ms"]), 3)
    v["wall_median"] = round(statistics.median(v["wall_ms"]), 3)
    v["cpu_ratio"] = round(v["cpu_median"] / rows["none"]["cpu_median"], 4) if name != "none" else 1.0
    v["ops_nodes_seq_per_step"] = per_step[name]
out["cost"] = rows

# (2) the current node at each allocation
ext.tracker_attach()


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


lin = torch.nn.Linear(256, 512).cuda()  # 3-D input: the bias's gradient is a sum_to in validate_outputs
a = torch.randn(8, 64, 256, device="cuda", requires_grad=True)
h = lin(a)
h = Scale.apply(h)
h = torch.relu(h)
loss = h.float().pow(2).mean()
fwd = {}
stack = [loss.grad_fn]
while stack:
    n = stack.pop()
    if n is None or n in fwd:
        continue
    fwd[n] = (n._sequence_nr(), type(n).__name__)
    stack.extend(f for f, _ in n.next_functions)
fwd_seqs = {s: nm for s, nm in fwd.values()}
main_tid = ext.thread_id()
ext.track(True)
loss.backward()
torch.cuda.synchronize()
ext.track(False)
seen = ext.seen()
out["backward_allocs"] = len(seen)
out["with_node"] = sum(1 for s in seen if s[0] != -2)
out["node_seq_is_forward"] = sum(1 for s in seen if s[0] in fwd_seqs)
out["node_thread_is_main"] = sum(1 for s in seen if s[0] >= 0 and s[1] == main_tid)
out["names"] = sorted({s[2] for s in seen})
out["rows"] = [[s[0], fwd_seqs.get(s[0]), s[2], s[3]] for s in seen][:40]
ns, calls = ext.tracked_cost()
out["lookup_ns_mean"] = round(ns / max(calls, 1), 1)
print("PROBE " + json.dumps(out))
