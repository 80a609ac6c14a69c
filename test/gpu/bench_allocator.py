#!/usr/bin/env python3
"""Benchmarks of the lens allocator against PyTorch's. Needs an NVIDIA GPU, torch,
torchvision, transformers. Not a test: it prints figures and ratios measured in one run on one GPU.

    make -C native/allocator && python3 test/gpu/bench_allocator.py [--so PATH] [--only micro steps frag]

- micro: torch.empty + free in a loop (µs per pair): ours with nothing recorded vs native, ours with
  stacks (and a capture file) vs native with _record_memory_history(stacks="python").
- steps: median step time of ResNet-50 (batch 64, bf16 autocast), GPT-2 small (16×512, bf16
  autocast) and a launch-bound MLP (batch 32, 16×Linear(1024)): PyTorch's native allocator vs ours
  with nothing recorded ("ours-bare") vs ours under the real bootstrap exactly as `gpumem run` starts
  a workload ("gpumem-run": capture file with stacks, trace ring, device sampler, control socket,
  backward brackets). Note [Interleaved rounds].
- frag: GPT-2 small with sequence lengths varying 128…1024 at a fixed 8192 tokens per batch: peak
  reserved / peak allocated for native, native expandable_segments, ours fixed, ours expandable.
Each configuration runs in its own subprocess. With $OUT set, results go to $OUT/bench_allocator.json.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from allocator_checks import DEFAULT_SO, install_lens, lens_stats  # noqa: E402


# The "native-tracker" configuration's tracker (what PyTorch's trace entries cost before anything of ours runs).
NOOP_TRACKER = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <atomic>
namespace CCA = c10::cuda::CUDACachingAllocator;
static std::atomic<uint64_t> g_entries{0};
void attach() {
  py::gil_scoped_release no_gil;  // attaching takes each device's allocator lock
  CCA::attachAllocatorTraceTracker([](const CCA::TraceEntry&) { g_entries.fetch_add(1, std::memory_order_relaxed); });
}
"""


def attach_noop_tracker():
    """NOOP_TRACKER built (once: later processes load the same folder's build) and attached to PyTorch's allocator,
    for good: PyTorch has no detach. The native-tracker configuration and the probes that price the tracker use it."""
    from torch.utils.cpp_extension import load_inline

    folder = os.path.join(tempfile.gettempdir(), "gpumem-bench-noop-tracker")
    os.makedirs(folder, exist_ok=True)
    load_inline(name="gpumem_bench_noop_tracker", cpp_sources=[NOOP_TRACKER], functions=["attach"], with_cuda=True,
                build_directory=folder, verbose=False, extra_cflags=["-O2"]).attach()


def setup(config, so):
    """config: native (also "native:ANY=1", a second native process: the A/A noise floor) | native-ring |
    native-tracker | native-history | ours | ours-bare | ours-stacks | ours-recording | ours-fixed | ours-expandable,
    optionally + "+trim" (expandable with trim_on_growth)."""
    import torch

    if config == "ours-bare":  # the allocator alone: no capture file, no trace ring, no stacks
        return install_lens(so, {"trace_entries": 0, "stacks": False})
    if config == "native-ring":  # PyTorch's history on with no context: the ring and trace entries alone
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=1)
        return None
    if config == "native-tracker":  # a trace tracker that does nothing: PyTorch's TraceEntry per event and its call
        attach_noop_tracker()
        return None
    if config == "native-history":
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
        return None
    if not config.startswith("ours"):
        return None
    lens = {}
    if config.endswith("+trim"):  # expandable segments with Note [Trim on growth]
        config = config[: -len("+trim")]
        lens.update({"segments": "expandable", "trim_on_growth": True})
    if config == "ours-stacks" or config == "ours-recording":
        lens = {"capture_path": os.path.join(tempfile.mkdtemp(prefix="gpumem-bench-"), "capture.gpumem"),
                "stacks": True}
    if config in ("ours-fixed", "ours-expandable"):
        lens["segments"] = config.split("-", 1)[1]
        lens.setdefault("trim_on_growth", False)  # plain strategies; "+trim" above asks for trimming
    if config == "ours-fixed-bare":
        lens = {"trace_entries": 0, "stacks": False, "segments": "fixed"}
    return install_lens(so, lens)


def child_micro(args):
    import torch

    setup(args.config, args.so)
    torch.empty(1, device="cuda")
    n = 100_000

    def loop(count):
        for _ in range(count):
            x = torch.empty(256, device="cuda")
            del x

    loop(2000)
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        loop(n)
        dt = (time.perf_counter() - t0) / n * 1e6
        best = dt if best is None else min(best, dt)
    # under gpumem run: how stacks were taken, and with GPUMEM_SELF_TIME=1 each recording part's ns and calls
    return {"us_per_alloc_free": best, "stack_info": _stack_info()}


def timed_steps(step, n):
    """The probes' loop (test/gpu/probes/): n steps, each synchronized; ([host ms a step issues in], [wall ms to its
    end]). Host time stops when step() returns, before the synchronize (which spins)."""
    import torch

    host, wall = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        host.append((t1 - t0) * 1e3)
        wall.append((time.perf_counter() - t0) * 1e3)
    return host, wall


def step_fn(model_name):
    import torch

    if model_name in ("resnet50", "resnet18-benchmark"):
        import torchvision

        if model_name == "resnet18-benchmark":  # the cudnn.benchmark workload (pytorch_mode/resnet_benchmark.py)
            torch.backends.cudnn.benchmark = True
        model = (torchvision.models.resnet18() if model_name == "resnet18-benchmark" else torchvision.models.resnet50()).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(64, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (64,), device="cuda")

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step
    if model_name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(n_positions=512)).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, 50257, (16, 512), device="cuda")

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(16)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(32, 1024, device="cuda")

    def step():
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


STEP_MODELS = ("resnet50", "gpt2", "mlp")
MODELS_SELECTED = list(STEP_MODELS)
WARMUP = [10]
STEPS = [60]


def child_steps(args):
    """All three models in one process (one start-up per configuration and round); per model the
    median and min step time, allocations per step and host time per step (step() returning, before
    the synchronize: close to the step time means the step is CPU-bound, so allocator cost shows)."""
    import torch

    lib = setup("native" if args.config.startswith("gpumem-run") else args.config, args.so)
    # Without the bootstrap's shims, torch.cuda.memory_stats() cannot see a pluggable allocator; with
    # them it shows PyTorch's keys only, so under gpumem run the bootstrap's library answers.
    native = _bootstrap_native()
    stats = ((lambda: lens_stats(lib)) if lib is not None else (lambda: native.stats(0)) if native is not None
             else torch.cuda.memory_stats)  # noqa: E731
    out = {"lens": _lens_active(torch)}
    gate = Gate.from_env()
    for model in args.models:
        torch.manual_seed(0)
        gate.turn()  # the model is built in this process's turn, so nothing else runs beside a timed block
        before_model = _process_state(torch)
        step = step_fn(model)
        settling, settling_host, settling_cpu = [], [], []
        for i in range(args.warmup):
            if i and i % gate.warmup_block == 0:
                # the warm-up's steps one turn each by default (settling compared step by step); Note [Warm-up turns]
                gate.turn()
            c0, t0 = time.process_time(), time.perf_counter()
            step()
            t1, c1 = time.perf_counter(), time.process_time()
            torch.cuda.synchronize()
            settling.append(time.perf_counter() - t0)
            settling_host.append(t1 - t0)
            settling_cpu.append(c1 - c0)
        # The MLP's 3 ms steps are timed 8× as often: a host hiccup then moves its median less.
        n = args.steps * 8 if model == "mlp" else args.steps
        s0 = stats()
        st0 = (_stack_info() or {}).get("self_time") or {}
        th0, w0 = _threads(), time.perf_counter()
        times, host, cpu = [], [], []
        prof = None
        if os.environ.get("GPUMEM_BENCH_CPROFILE"):  # a probe: where the host's time goes, by Python function
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        gc_seen = _GcTime()
        import resource
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        for i in range(n):
            if i % gate.block == 0:
                gate.turn()
            c0, t0 = time.process_time(), time.perf_counter()
            step()
            t1, c1 = time.perf_counter(), time.process_time()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            host.append(t1 - t0)
            # CPU time of every thread of the process (main, autograd, writer, sampler) while the step
            # is issued, before the synchronize (which spins): what recording costs the host, and far
            # less sensitive to other tenants of a shared machine than wall time is.
            cpu.append(c1 - c0)
        gc_seen.stop()
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        if prof is not None:
            prof.disable()
            import pstats
            st = pstats.Stats(prof).stats  # (file, line, name) -> (calls, ncalls, tottime, cumtime, callers)
            rows = sorted(((v[2], v[3], v[1], "%s:%d(%s)" % (os.path.basename(k[0]), k[1], k[2])) for k, v in st.items()),
                          reverse=True)[:40]
            profile_top = [[round(t / n * 1e3, 3), round(c / n * 1e3, 3), round(nc / n, 1), name] for t, c, nc, name in rows]
        else:
            profile_top = None
        s1 = stats()
        st1 = (_stack_info() or {}).get("self_time") or {}
        # Note [Self time] (native/allocator/src/self_time.h): µs per step inside each recording part
        self_us = {k: round((v["ns"] - st0.get(k, {}).get("ns", 0)) / n / 1e3, 1) for k, v in st1.items()
                   if isinstance(v, dict) and v["calls"] > st0.get(k, {}).get("calls", 0)}
        self_calls = {k: round((v["calls"] - st0.get(k, {}).get("calls", 0)) / n, 1) for k, v in st1.items()
                      if isinstance(v, dict) and v["calls"] > st0.get(k, {}).get("calls", 0)}
        # (in lockstep the wall time includes the other processes' turns: shares of one CPU read low)
        thread_cpu = _thread_cpu(th0, _threads(), time.perf_counter() - w0)
        per_step = lambda key: (s1.get(key, 0) - s0.get(key, 0)) / n  # noqa: E731
        out[model] = {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
                      # a low percentile: the step without host interference (the machine is shared)
                      "p10_ms": sorted(times)[len(times) // 10] * 1e3,
                      "host_ms": statistics.median(host) * 1e3, "cpu_ms": statistics.median(cpu) * 1e3,
                      # while settling: the warm-up's steps 2.. (the first is CUDA/cuDNN/cuBLAS start-up, and the tag
                      # walk's full one), where caches fill and new call sites are met (Note [Full walk on a new shape])
                      "settling_ms": statistics.median(settling[1:] or settling) * 1e3 if settling else None,
                      "allocs_per_step": per_step("allocation.all.allocated"),
                      # cudaMalloc/cudaFree (fixed) or page maps/unmaps (expandable) per step: driver
                      # calls in the steady state cost host time and can synchronize.
                      "driver_allocs_per_step": per_step("num_device_alloc"),
                      "driver_frees_per_step": per_step("num_device_free"),
                      # Note [Page moves]: trims that stalled on a stream vs pages moved without
                      "trim_syncs_per_step": per_step("num_trim_syncs"),
                      "page_moves_per_step": per_step("num_page_moves"),
                      "threads": thread_cpu,
                      # the process's page faults and context switches per timed step (a cost left after
                      # the recorded steps stop, which no part of ours switched off in one process explained)
                      "minflt_per_step": round((ru1.ru_minflt - ru0.ru_minflt) / n, 2),
                      "majflt_per_step": round((ru1.ru_majflt - ru0.ru_majflt) / n, 2),
                      "nvcsw_per_step": round((ru1.ru_nvcsw - ru0.ru_nvcsw) / n, 2),
                      "nivcsw_per_step": round((ru1.ru_nivcsw - ru0.ru_nivcsw) / n, 2),
                      "self_us_per_step": self_us, "self_calls_per_step": self_calls,
                      "times_ms": [round(t * 1e3, 2) for t in times],
                      # each warm-up step: wall, host (issue) and CPU time, to tell our host cost from the GPU's
                      "settling_times_ms": [[round(x * 1e3, 2) for x in v] for v in (settling, settling_host, settling_cpu)],
                      "keeper": _keeper_passes(),
                      # Note [Deferred observation]: the PyTorch-allocator mode's queue (max_depth, full_drains)
                      "observer_queue": _observer_queue(),
                      # GPUMEM_BENCH_CPROFILE=1: per step, [ms own, ms with callees, calls, function], by own time
                      "profile_top": profile_top,
                      # Python's cyclic collector while the timed steps ran: per generation [collections, ms]
                      "gc": gc_seen.per_generation,
                      # before this model was built (the one before it dropped): what a process carries into it
                      "before_model": before_model}
        del step
        import gc
        gc.collect()
    out["stack_info"] = _stack_info()
    gate.turn()  # the result is printed in this process's turn too
    return out


class _GcTime:
    """Collections of Python's cyclic collector, and the time they took, from now until stop() (a recorder that
    makes Python objects per step makes the collector run more often; a full collection of a heap holding torch
    and transformers takes tens of milliseconds)."""

    def __init__(self):
        import gc
        self.per_generation = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
        self._t0 = None
        gc.callbacks.append(self._cb)

    def _cb(self, phase, info):
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self._t0 is not None:
            row = self.per_generation.setdefault(info.get("generation", -1), [0, 0.0])
            row[0] += 1
            row[1] = round(row[1] + (time.perf_counter() - self._t0) * 1e3, 3)
            self._t0 = None

    def stop(self):
        import gc
        if self._cb in gc.callbacks:
            gc.callbacks.remove(self._cb)


# Note [Warm-up turns]: in lockstep (Note [Lockstep rounds]) each warm-up step is a turn of its own, so that step i
# of every configuration runs at about the same moment and "settling" is compared step by step. Every such step then
# starts right after another process's turn on the same CPUs, on caches that process filled: a cost a training loop,
# whose steps follow each other, does not pay, and one that could weigh more on a recording process than on a native
# one. --warmup-block N gives each turn N warm-up steps (10: the whole warm-up back to back); run_all.sh's categories-cost
# passes WARMUP_BLOCK. Tried once on ResNet-50 (H100, 2026-11-28): back to back, the
# recorded warm-up's ratio was ×1.007 against ×1.023 step by step, but native against native went from ×1.001 to
# ×1.019 with a round at ×1.25: the drift that one step a turn cancels came back, and the measurement did not get
# better. So the default stays one step a turn.
class Gate:
    """Note [Lockstep rounds]: a child's side of the turn-taking. turn() says "my turn is over" on the pipe the
    parent reads (GPUMEM_BENCH_GATE="<fd to write>,<block>[,<warm-up steps a turn>]") and waits for the parent's "go"
    on stdin. Outside lockstep every turn is the child's own at once."""

    def __init__(self, fd=None, block=1 << 30, places=None, warmup_block=1):
        self.fd, self.block, self.places, self.warmup_block = fd, block, places, warmup_block

    @classmethod
    def from_env(cls):
        spec = os.environ.get("GPUMEM_BENCH_GATE")
        if not spec:
            return cls()
        fd, block, *warmup = spec.split(",")
        warmup_block = max(1, int(warmup[0])) if warmup else 1
        places = os.environ.get("GPUMEM_BENCH_TURN_CPUS")
        if places:
            main, autograd, rest = places.split(";")
            places = ({int(main)}, {int(autograd)}, {int(c) for c in rest.split(",") if c})
        return cls(int(fd), max(1, int(block)), places or None, warmup_block)

    def turn(self):
        if self.fd is None:
            return
        os.write(self.fd, b"r")  # the first one: set up and ready; then: this turn is over
        if sys.stdin.buffer.read(1) != b"g":
            raise SystemExit("lockstep parent went away")
        if self.places:
            place_threads(*self.places)


def _ratio(a, b):
    return (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def round_ratios(rounds, base, config, model, stat):
    """Note [Interleaved rounds]: `stat` of `config` over `base` in each round (None where a child failed or lacks
    it), and their median: the figure the targets are read from."""
    per_round = [_ratio(r.get(config, {}).get(model, {}).get(stat), r.get(base, {}).get(model, {}).get(stat))
                 for r in rounds]
    ok = [x for x in per_round if x is not None]
    return {"median": statistics.median(ok) if ok else None, "rounds": per_round}


def paired_view(rounds, base, config, model, block):
    """Note [Paired view]: two more readings of the same steps as the reported ratios (which stay the medians over
    rounds of each round's median-step ratio, the target's statistic), because a near-host-bound step (ResNet-50 on
    the lent H200s) goes host-bound in whole turns when the shared host is busy, and a round's median then moves
    with how many of its ten turns were busy, not with what the configuration costs:
      - host_delta_ms: per round, `config`'s median host time a step (issued, before the synchronize) minus `base`'s,
        and their mean: what the configuration costs the host, whether or not the step showed it;
      - turns: the median over every turn of every round of `config`'s turn median over `base`'s turn of the same
        cycle (the k-th turn of each, about a second apart in lockstep), so both met the host in the same state.
    None where a round lacks either side (a child that failed)."""
    deltas, pairs, step = [], [], max(1, block)
    for r in rounds:
        a, b = r.get(base, {}).get(model), r.get(config, {}).get(model)
        if not a or not b:
            deltas.append(None)
            continue
        deltas.append(round(b["host_ms"] - a["host_ms"], 3))
        ta, tb = a.get("times_ms") or [], b.get("times_ms") or []
        for k in range(0, min(len(ta), len(tb)), step):
            ma, mb = statistics.median(ta[k:k + step]), statistics.median(tb[k:k + step])
            if ma:
                pairs.append(mb / ma)
    ok = [d for d in deltas if d is not None]
    return {"host_delta_ms": {"mean": round(statistics.mean(ok), 3) if ok else None, "rounds": deltas},
            "turns": {"median": round(statistics.median(pairs), 4) if pairs else None, "n": len(pairs)}}


def place_threads(main, autograd, rest):
    """Note [Turn CPUs]: at the start of each turn, this process's main thread goes to the CPU `main`, PyTorch's
    autograd device threads (pt_autograd_*) to `autograd`, and every other thread (the CUDA driver's, ours: gpumem-*)
    to `rest`, the same sets in every configuration. Pinning the process to one CPU per core (Note [Pinned children])
    left where its two busy threads land to the scheduler, and that choice stays for the process's life: two native
    processes of one round then differed by up to 6 % (A/A rounds, H100, 2026-11-27), the
    lent VM's CPUs not being equally fast. Here every configuration's timed blocks run their main and autograd threads
    on the same two CPUs, turn after turn, and our threads are kept off them as an idle machine's scheduler would."""
    me = threading.get_native_id()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return
    for tid in tids:
        t = int(tid)
        try:
            if t == me:
                cpus = main
            else:
                with open("/proc/self/task/%s/comm" % tid) as f:
                    cpus = autograd if f.read().startswith("pt_autograd") else rest
            os.sched_setaffinity(t, cpus)
        except OSError:  # the thread ended meanwhile
            pass


def _process_state(torch):
    """What a child carries from what ran before: the C heap (glibc's mallinfo2: arena bytes, free chunks and their
    bytes, mmapped bytes), Python's tracked objects, CUDA memory still allocated. It answers whether ResNet-50
    after GPT-2 in a recording process starts from another state (H200, 2026-11-28: 35 MiB more C heap than natively, as
    under figures only, which never records)."""
    import ctypes
    import gc

    out = {"py_objects": len(gc.get_objects()), "cuda_allocated": torch.cuda.memory_allocated(),
           "cuda_reserved": torch.cuda.memory_reserved()}

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = MallInfo2
        m = libc.mallinfo2()
        out.update(heap_arena=m.arena, heap_free_chunks=m.ordblks, heap_used=m.uordblks, heap_free=m.fordblks,
                   heap_mmapped=m.hblkhd)
    except (OSError, AttributeError):
        pass
    return out


def _keeper_passes():
    """The leak keeper's searches so far in this process and each pass's seconds (Note [Leak keeper search])."""
    keeper = sys.modules.get("gpumem._keeper")
    w = getattr(keeper, "_WATCH", None) if keeper else None
    return None if w is None else {"searches": w.searches, "pass_ms": [round(x * 1e3, 1) for x in w.seconds],
                                    "steps": w.steps}


def _observer_queue():
    """How the observer's queue kept up so far (gpumem_observe_info "queue"); None outside the PyTorch-allocator mode."""
    live = sys.modules.get("gpumem._observer_live")  # the bootstrap's observer, when it runs
    obs = live.LIVE.obs if live is not None else None
    if obs is None:
        return None
    info = obs.info()
    return info.get("queue") if info.get("active") else None


def _threads():
    """tid → (name, CPU ticks, last CPU) of this process's threads (/proc; Linux only)."""
    out = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open("/proc/self/task/%s/stat" % tid) as f:
                st = f.read()
            name = st[st.index("(") + 1:st.rindex(")")]
            rest = st[st.rindex(")") + 2:].split()
            out[tid] = (name, int(rest[11]) + int(rest[12]), int(rest[36]))  # utime + stime; processor
    except OSError:
        pass
    return out


def _thread_cpu(before, after, seconds):
    """Per thread: share of one CPU used while the steps ran, and the CPU it last ran on (where host time goes:
    a step that is host-bound shows it on the main thread)."""
    hz = os.sysconf("SC_CLK_TCK")
    rows = []
    for tid, (name, ticks, cpu) in after.items():
        used = (ticks - before.get(tid, (name, 0, cpu))[1]) / hz / seconds if seconds else 0
        if used >= 0.01:
            rows.append([name, tid == str(os.getpid()), round(used, 3), cpu])
    return sorted(rows, key=lambda r: -r[2])


def _lens_active(torch):
    return {"backend": torch.cuda.memory.get_allocator_backend(), "bootstrap": "gpumem" in sys.modules}


def _bootstrap_native():
    """The bootstrap's library under gpumem run, else None."""
    st = sys.modules.get("gpumem._state")
    return getattr(getattr(st, "STATE", None), "native", None) if st else None


def _stack_info():
    """How stacks were captured (GIL-free answers vs GIL walks), from the bootstrap's library."""
    native = _bootstrap_native()
    return native.stack_info() if native is not None else None


def child_frag(args):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    lib = setup("native" if args.config == "gpumem-run" else args.config, args.so)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_positions=1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(3)
    tokens = 8192
    for _ in range(40):
        seq = rng.choice(range(128, 1025, 64))
        ids = torch.randint(0, 50257, (max(1, tokens // seq), seq), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    if lib is None:
        peak_r, peak_a = torch.cuda.max_memory_reserved(), torch.cuda.max_memory_allocated()
    else:
        s = lens_stats(lib)
        peak_r, peak_a = s["reserved_bytes.all.peak"], s["allocated_bytes.all.peak"]
    return {"peak_reserved": peak_r, "peak_allocated": peak_a, "ratio": peak_r / peak_a}


CHILDREN = {"micro": child_micro, "steps": child_steps, "frag": child_frag}


CPUS = [None]  # --cpus: the logical CPUs every child runs on
TURN_CPUS = [None]  # --turn-cpus: "main;autograd;rest,…" (Note [Turn CPUs])


def one_cpu_per_core(limit):
    """Note [Pinned children]: the first logical CPU of each physical core (no two SMT siblings), at most `limit`.
    On the lent H100 host, unpinned, a ResNet-50 child's host time per step varied by 16 % between processes of the
    same configuration (20.7 vs 24.0 ms, native; the step is near host-bound), more than the 1 % being measured:
    where the main and autograd threads land (SMT siblings or not) decides. Every configuration gets the same CPUs.
    Choosing the cores that were idlest over a second instead (tried 2026-11-27) did not help: the host's load moves
    within minutes (a native ResNet-50 child's host time went from 44 to 20 ms between rounds on the chosen cores),
    and the choice made runs differ in their CPUs."""
    chosen, seen = [], set()
    for cpu in sorted(os.sched_getaffinity(0)):
        try:
            with open("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % cpu) as f:
                core = f.read().strip()
        except OSError:
            core = str(cpu)
        if core not in seen:
            seen.add(core)
            chosen.append(cpu)
    return set(chosen[:limit])


def child_command(kind, config, so, model=None, env_extra=None):
    """The command line and environment of one child."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--config", config, "--so", so]
    if model:
        cmd += ["--model", model]
    if kind == "steps":
        cmd += ["--models"] + list(MODELS_SELECTED) + ["--warmup", str(WARMUP[0]), "--steps", str(STEPS[0])]
    # "gpumem-run:GPUMEM_STACKS=0,GPUMEM_MODULE_PATHS=0": the same configuration with those variables, so the cost
    # of each recording source is measured on its own, interleaved with the others.
    base, _, extra = config.partition(":")
    env_extra = dict(env_extra or {}, **dict(kv.split("=", 1) for kv in extra.split(",") if kv))
    env = dict(os.environ, PYTHONUNBUFFERED="1", **env_extra)
    if config.startswith("gpumem-run"):  # the environment `gpumem run` gives a workload (its bootstrap installs us)
        sys.path.insert(0, os.path.join(ROOT, "native", "python"))
        from gpumem import _launch

        session = tempfile.mkdtemp(prefix="gpumem-bench-session-")
        # "gpumem-run": the lens allocator; "gpumem-run-auto": the default mode (PyTorch's allocator, observed)
        env = _launch.workload_env(session, so, user_roots=[HERE], base=env,
                                   allocator_mode="auto" if base == "gpumem-run-auto" else "lens")
        env.update(env_extra)  # after the table's settings, which it would otherwise overwrite
    else:
        session = None
    return cmd, env, session


def _pin():
    cpus = CPUS[0]
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def child_result(stdout, stderr, returncode, session):
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            if session:
                result["session"] = session  # its capture can be replayed (test/bench/allocator/replay.py)
            return result
    return {"error": "exit %d: %s" % (returncode, stderr[-1200:])}


def run_child(kind, config, so, model=None, env_extra=None):
    cmd, env, session = child_command(kind, config, so, model, env_extra)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env, preexec_fn=_pin())
    return child_result(p.stdout, p.stderr, p.returncode, session)


def run_lockstep(configs, so, block, timeout=400, warmup_block=1):
    """Note [Lockstep rounds]: one process per configuration, all alive at once, taking turns: each sets up, builds
    a model, runs one warm-up step or a block of `block` timed steps (and synchronizes) only in its turn, in the order
    of `configs` rotated by one at every turn. A burst of host load (they last about a second on the lent hosts)
    then falls on every configuration alike instead of on whichever process ran in that minute."""
    kids = []
    for c in configs:
        r, w = os.pipe()
        cmd, env, session = child_command("steps", c, so)
        env["GPUMEM_BENCH_GATE"] = "%d,%d,%d" % (w, block, warmup_block)
        if TURN_CPUS[0]:
            env["GPUMEM_BENCH_TURN_CPUS"] = TURN_CPUS[0]
        out = tempfile.TemporaryFile(mode="w+")
        err = tempfile.TemporaryFile(mode="w+")
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env, pass_fds=(w,),
                             preexec_fn=_pin())
        os.close(w)
        kids.append({"config": c, "p": p, "r": r, "out": out, "err": err, "session": session, "done": False})
    deadline = time.monotonic() + timeout

    def wait_ready(k):  # True: its turn is over (or it is set up); False: it ended
        import select
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("lockstep child %s took too long" % k["config"])
            if select.select([k["r"]], [], [], min(left, 1.0))[0]:
                return os.read(k["r"], 1) == b"r"

    try:
        for k in kids:  # every child set up before any times a step
            k["done"] = not wait_ready(k)
        turn = 0
        while not all(k["done"] for k in kids):
            live = [k for k in kids if not k["done"]]
            j = turn % len(live)
            for k in live[j:] + live[:j]:
                k["p"].stdin.write(b"g")
                k["p"].stdin.flush()
                k["done"] = not wait_ready(k)
            turn += 1
    finally:
        results = {}
        for k in kids:
            try:
                k["p"].stdin.close()
            except OSError:
                pass
            try:
                k["p"].wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                k["p"].kill()
                k["p"].wait()
            os.close(k["r"])
            k["out"].seek(0)
            k["err"].seek(0)
            results[k["config"]] = child_result(k["out"].read(), k["err"].read(), k["p"].returncode, k["session"])
            k["out"].close()
            k["err"].close()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", default=DEFAULT_SO)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the step benchmark")
    ap.add_argument("--frag-configs", nargs="+", default=None, help="a subset of the fragmentation configurations")
    ap.add_argument("--steps", type=int, default=60, help="timed steps per model (the MLP: 8×)")
    ap.add_argument("--warmup", type=int, default=10,
                    help="untimed steps first; Note [Trim on growth] settles a layout in the first ~50 steps")
    ap.add_argument("--models", nargs="+", default=list(STEP_MODELS), choices=STEP_MODELS)
    ap.add_argument("--step-configs", nargs="+", default=["native", "ours-bare", "gpumem-run"],
                    help="configurations of the step benchmark; the first is the baseline of the ratios")
    ap.add_argument("--micro-configs", nargs="+", default=["native", "ours-bare", "ours", "native-history", "ours-stacks"],
                    help="configurations of the micro benchmark (the step benchmark's gpumem-run forms too)")
    ap.add_argument("--micro-rounds", type=int, default=1, help="interleaved rounds of the micro benchmark")
    ap.add_argument("--lockstep", type=int, default=0, metavar="BLOCK",
                    help="Note [Lockstep rounds]: every configuration of a round alive at once, taking turns of BLOCK "
                         "timed steps (warm-up steps: --warmup-block); 0: one configuration after another")
    ap.add_argument("--warmup-block", type=int, default=1, metavar="N",
                    help="Note [Warm-up turns]: in lockstep, N warm-up steps a turn (default 1: settling compared step "
                         "by step; 10: the warm-up back to back, as in a training loop)")
    ap.add_argument("--turn-cpus", action="store_true",
                    help="Note [Turn CPUs]: in each turn, the main thread on the first CPU of --cpus, the autograd "
                         "threads on the second, every other thread on the rest")
    ap.add_argument("--cpus", type=int, default=0,
                    help="pin every child to this many logical CPUs, one per physical core (Note [Pinned children])")
    ap.add_argument("--child")
    ap.add_argument("--config", default="native")
    ap.add_argument("--model", default=None)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(CHILDREN[args.child](args)), flush=True)
        return 0
    want = lambda name: args.only is None or name in args.only  # noqa: E731
    MODELS_SELECTED[:] = args.models
    if args.cpus:
        CPUS[0] = one_cpu_per_core(args.cpus)
        print(json.dumps({"pinned_cpus": sorted(CPUS[0])}), flush=True)
    if args.turn_cpus:
        if not args.lockstep or not CPUS[0] or len(CPUS[0]) < 3:
            raise SystemExit("--turn-cpus needs --lockstep and --cpus 3 or more")
        cpus = sorted(CPUS[0])
        TURN_CPUS[0] = "%d;%d;%s" % (cpus[0], cpus[1], ",".join(str(c) for c in cpus[2:]))
        print(json.dumps({"turn_cpus": TURN_CPUS[0]}), flush=True)
    WARMUP[0] = args.warmup
    STEPS[0] = args.steps
    results = {}

    def show(name, value):
        results[name] = value
        print(json.dumps({name: value}), flush=True)

    if want("micro"):
        # "ours-bare" is the allocator with nothing recorded: the ≤1.0× comparison with native. "ours"
        # is a bare install_lens (the trace ring for PyTorch-format snapshots, with stacks).
        # Interleaved rounds, as the step benchmark's (a process's host speed varies by tens of percent on a shared
        # machine); per configuration the median over rounds, and every round.
        m, every = {}, {}
        for r in range(max(1, args.micro_rounds)):
            for c in dict.fromkeys(args.micro_configs):
                m[c] = run_child("micro", c, args.so)
                every.setdefault(c, []).append(m[c].get("us_per_alloc_free"))
        us = {c: (statistics.median([x for x in v if isinstance(x, float)]) if any(isinstance(x, float) for x in v)
                  else m[c].get("error")) for c, v in every.items()}
        show("micro_us_per_alloc_free", us)
        show("micro_us_per_alloc_free_rounds", {c: [round(x, 3) if isinstance(x, float) else x for x in v]
                                                for c, v in every.items()})
        show("micro_stack_info", {c: r.get("stack_info") for c, r in m.items() if r.get("stack_info")})
        if "ours-bare" in us and "native" in us:
            show("micro_ratio_ours_bare_vs_native", _ratio(us["ours-bare"], us["native"]))
        if "ours-stacks" in us and "native-history" in us:
            show("micro_ratio_ours_stacks_vs_native_history", _ratio(us["ours-stacks"], us["native-history"]))
    if want("steps"):
        # Note [Interleaved rounds]: GPU clocks and a shared host drift by a few percent between minutes,
        # more than the 1 % being measured; so each round runs every configuration once, back to back
        # (in a rotating order, so no configuration always runs first), and the reported ratio is the
        # median over rounds of that round's ratio (drift cancels within a round).
        configs = args.step_configs
        rounds = []
        for r in range(args.rounds):
            k = r % len(configs)
            order = configs[k:] + configs[:k]
            if args.lockstep:
                rounds.append(run_lockstep(order, args.so, args.lockstep, warmup_block=args.warmup_block))
            else:
                rounds.append({c: run_child("steps", c, args.so) for c in order})
            print(json.dumps({"round": r, "result": rounds[-1]}), flush=True)
        show("step_rounds", rounds)
        for model in args.models:
            for c in configs[1:]:
                for stat in ("median_ms", "p10_ms", "cpu_ms", "settling_ms"):
                    show("step_ratio_%s_%s_vs_%s_%s" % (model, c, configs[0], stat[:-3]),
                         round_ratios(rounds, configs[0], c, model, stat))
                show("step_paired_%s_%s_vs_%s" % (model, c, configs[0]),
                     paired_view(rounds, configs[0], c, model, args.lockstep or args.steps))
    if want("frag"):
        configs = {"native": {}, "native-expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                   "ours-fixed": {}, "ours-expandable": {}, "ours-expandable+trim": {}, "gpumem-run": {}}
        for c, env in configs.items():
            if args.frag_configs and c not in args.frag_configs:
                continue
            show("frag_%s" % c, run_child("frag", "native" if c == "native-expandable" else c, args.so,
                                          env_extra=env))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "bench_allocator.json"), "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    import faulthandler

    faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "540")), exit=True)  # a stall comes back as a stack (below the stage's limit)
    sys.exit(main())
