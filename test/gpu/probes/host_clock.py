"""Probe (not a test): what a clock read costs on this host, and its CPU/NUMA layout.

The default mode stamps every trace entry with CLOCK_MONOTONIC on the allocating thread (clock::now_ns). On a VM
whose clocksource is not one the vDSO can read (kvm-clock without a stable TSC, hpet, xen), each read is a system
call. Prints the clocksource, ns per time.monotonic_ns() against a trivial builtin call and a system call (getpid),
and the CPU flags
that decide whether the TSC can be read directly.
    python3 test/gpu/probes/host_clock.py
"""
import faulthandler
import json
import os
import time

faulthandler.dump_traceback_later(50, exit=True)


def per_call_ns(fn, n=1_000_000):
    best = None
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        dt = (time.perf_counter_ns() - t0) / n
        best = dt if best is None else min(best, dt)
    return best


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return "unreadable: %s" % e


flags = ""
for line in read("/proc/cpuinfo").splitlines():
    if line.startswith("flags"):
        flags = line
        break
out = {
    "clocksource": read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
    "available": read("/sys/devices/system/clocksource/clocksource0/available_clocksource"),
    "tsc_flags": [f for f in ("tsc", "constant_tsc", "nonstop_tsc", "tsc_known_freq", "rdtscp", "tsc_reliable")
                  if " %s " % f in flags + " "],
    "ns_monotonic": per_call_ns(time.monotonic_ns),
    "ns_perf_counter": per_call_ns(time.perf_counter_ns),
    "ns_process_time": per_call_ns(time.process_time_ns, 200_000),
    "ns_trivial_builtin": per_call_ns(tuple),
    "ns_getpid_syscall": per_call_ns(os.getpid, 200_000),
    "cpus": os.cpu_count(),
    "numa_nodes": sorted(os.listdir("/sys/devices/system/node")) if os.path.isdir("/sys/devices/system/node") else None,
}
out["ns_clock_over_builtin"] = out["ns_monotonic"] - out["ns_trivial_builtin"]
print(json.dumps(out, indent=1))
