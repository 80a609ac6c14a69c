#!/usr/bin/env python3
"""Probe (not a test): what a device sampler's NVML calls cost a training step, in ONE process natively
(Note [One NVML call a sample] in native/allocator/src/device_sampler.cc). Across processes on an H200 (fifteenth
session, test/gpu/README.md) figures only issued ResNet-50 steps in +0.6 ms of host time over native with sampling
every 200 ms and -0.2 ms without; the sampler then called nvmlDeviceGetHandleByPciBusId_v2 and
nvmlDeviceGetComputeRunningProcesses_v3 beside nvmlDeviceGetMemoryInfo at every sample. Here a thread of this process
makes one kind of call at a fixed rate while the main thread times blocks of steps, the states rotating by block:
  quiet       the thread sleeps
  memory      nvmlDeviceGetMemoryInfo every period (what a sample does now)
  handle      nvmlDeviceGetHandleByPciBusId_v2 every period (what each sample did before)
  processes   nvmlDeviceGetComputeRunningProcesses_v3 every period (what each sample did before)
  shut        NVML shut down (nvmlShutdown; initialized again after the block): whether an initialized NVML that
              makes no call costs the steps anything (H200, 2026-11-28: the recording processes' excess after
              the stop did not move with one call a sample)
The period is --period-ms (default 20: ten times the product's rate, so a cost per call shows ten times larger than in
the product; divide the excess by the ratio to read it at 200 ms). ctypes drops the GIL during each call.

    python3 test/gpu/probes/nvml_cost.py [--model resnet50] [--period-ms 20] [--block 10] [--cycles 8]

Prints µs a call of each NVML function (median and max of 200 calls, nothing else running), then per state the
median host ms a step issues in and the median wall ms (synchronized each step), each with its ratio to quiet paired
by cycle; RESULT line, also $OUT/nvml_cost_<model>.json.
"""
import argparse
import ctypes
import faulthandler
import json
import os
import statistics
import sys
import threading
import time

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "170")), exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))

import torch  # noqa: E402

from gpumem._observe import pci_bus_id  # noqa: E402


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Process(ctypes.Structure):  # nvmlProcessInfo_t as _v3 takes it (device_sampler.cc had the same layout)
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]


def nvml_calls(device):
    """The three calls as zero-argument functions, bound to `device` found by its PCI bus id as the sampler finds it."""
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    if lib.nvmlInit_v2() != 0:
        raise SystemExit("nvmlInit_v2 failed")
    p = torch.cuda.get_device_properties(device)
    pci = pci_bus_id(p).encode()  # as the product's sampler finds its handle
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByPciBusId_v2(pci, ctypes.byref(handle)) != 0:
        raise SystemExit("no NVML device at %s" % pci.decode())
    mem, procs, count = Memory(), (Process * 64)(), ctypes.c_uint(64)
    scratch = ctypes.c_void_p()

    def processes():
        count.value = 64
        return lib.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(count), procs)

    def shut(on):
        """NVML shut down (on) or initialized again with the handle found anew (off): the `shut` state."""
        if on:
            lib.nvmlShutdown()
        elif lib.nvmlInit_v2() != 0 or lib.nvmlDeviceGetHandleByPciBusId_v2(pci, ctypes.byref(handle)) != 0:
            raise SystemExit("NVML did not come back after nvmlShutdown")

    return {"memory": lambda: lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)),
            "handle": lambda: lib.nvmlDeviceGetHandleByPciBusId_v2(pci, ctypes.byref(scratch)),
            "processes": processes}, pci.decode(), shut


def micro(fn, n=200):
    """(median, max) µs of n calls."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return round(statistics.median(out), 1), round(max(out), 1)


class Caller:
    """A thread that makes the current state's call every period (nothing in `quiet`)."""

    def __init__(self, calls, period_s):
        self.calls, self.period_s, self.state, self.done, self.made = calls, period_s, "quiet", False, 0
        self.thread = threading.Thread(target=self.loop, name="nvml-probe", daemon=True)
        self.thread.start()

    def loop(self):
        while not self.done:
            fn = self.calls.get(self.state)
            if fn is not None:
                fn()
                self.made += 1
            time.sleep(self.period_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--period-ms", type=float, default=20.0)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--cycles", type=int, default=8)
    a = ap.parse_args()
    from bench_allocator import step_fn, timed_steps

    calls, pci, shut = nvml_calls(0)
    timings = {name: micro(fn) for name, fn in calls.items()}
    print("NVML at %s, µs a call (median, max of 200): %s" % (pci, timings), flush=True)
    step = step_fn(a.model)
    for _ in range(15):
        step()
    torch.cuda.synchronize()
    caller = Caller(calls, a.period_ms / 1e3)
    names = ["quiet", "memory", "handle", "processes", "shut"]
    host = {n: [] for n in names}
    wall = {n: [] for n in names}
    for c in range(a.cycles):
        for n in names[c % len(names):] + names[:c % len(names)]:
            if (n == "shut") != (caller.state == "shut"):
                if n == "shut":  # the caller's last call of the previous state is over before NVML shuts down
                    caller.state = n
                    time.sleep(2 * a.period_ms / 1e3)
                shut(n == "shut")
            caller.state = n
            step()
            torch.cuda.synchronize()
            hs, ws = timed_steps(step, a.block)
            host[n].append(statistics.median(hs))
            wall[n].append(statistics.median(ws))
    caller.done = True
    table = {}
    for n in names:
        table[n] = {"host_ms": round(statistics.median(host[n]), 3), "wall_ms": round(statistics.median(wall[n]), 3),
                    "host_vs_quiet": round(statistics.median(h / q for h, q in zip(host[n], host["quiet"])), 4),
                    "wall_vs_quiet": round(statistics.median(w / q for w, q in zip(wall[n], wall["quiet"])), 4)}
        print("%-10s host %.3f ms ×%.4f   wall %.3f ms ×%.4f   (paired with quiet)" % (
            n, table[n]["host_ms"], table[n]["host_vs_quiet"], table[n]["wall_ms"], table[n]["wall_vs_quiet"]), flush=True)
    result = {"model": a.model, "pci": pci, "period_ms": a.period_ms, "block": a.block, "cycles": a.cycles,
              "us_per_call": timings, "states": table, "calls_made": caller.made,
              "blocks": {"host": host, "wall": wall}, "torch": torch.__version__}
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "nvml_cost_%s.json" % a.model), "w") as f:
            json.dump(result, f, indent=1)
    print("RESULT " + json.dumps({k: v for k, v in result.items() if k != "blocks"}), flush=True)


if __name__ == "__main__":
    main()
