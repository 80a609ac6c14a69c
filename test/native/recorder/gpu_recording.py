"""GPU check of the recording side under real PyTorch (device-only; not part of CI).

Installs the lens allocator directly (no bootstrap), trains a small MLP for a few steps with backward()
bracketed like the bootstrap does, talks to the control socket while the GPU is busy, takes a snapshot,
and then reads the capture back and checks what only a real run can show: CPython 3.12 frames with the
script's own lines, autograd-thread allocations attributed to the backward() caller, the driver's
device name, NVML samples, and the cost of stack capture.
Usage: python3 test/native/recorder/gpu_recording.py path/to/libgpumem_allocator.so OUT_DIR [check|bench]
(run it twice, once per mode: the benchmark's millions of events would make reading the capture slow)
"""
import ctypes
import faulthandler
import json
import os
import pickle
import socket
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as cap  # noqa: E402
F = cap.F  # the generated format module (layouts from gpumem_format.h)

SO, OUT = sys.argv[1], sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "check"  # "bench": timings only, the capture is not read
faulthandler.dump_traceback_later(float(os.environ.get("GPUMEM_GPU_CHECK_TIMEOUT", "240")), exit=True)


def phase(msg):
    print("[%.1fs] %s" % (time.perf_counter() - T0, msg), flush=True)


T0 = time.perf_counter()
os.makedirs(OUT, exist_ok=True)
CAPTURE, SOCK = os.path.join(OUT, "c.gpumem"), os.path.join(OUT, "ctl.sock")
lib = ctypes.CDLL(SO)
lib.gpumem_configure.argtypes = [ctypes.c_char_p]
lib.gpumem_last_error.restype = ctypes.c_char_p
lib.gpumem_snapshot.restype = ctypes.c_int64
lib.gpumem_snapshot.argtypes = [ctypes.c_char_p]
lib.gpumem_shutdown.argtypes = [ctypes.c_int]
results = {"python": sys.version.split()[0], "torch": torch.__version__}


def addr(name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


cfg = {"capture_path": CAPTURE, "backend": "cuda", "segments": os.environ.get("GPUMEM_SEGMENTS", "fixed"),
       "control_socket": SOCK, "sample_interval_ms": 50,
       "header": {"torch": torch.__version__}}
assert lib.gpumem_configure(json.dumps(cfg).encode()) == 0, lib.gpumem_last_error()
alloc = torch.cuda.memory.CUDAPluggableAllocator(SO, "gpumem_malloc", "gpumem_free")
hooks = alloc.allocator()
hooks.set_init_fn(addr("gpumem_init"))
hooks.set_reset_fn(addr("gpumem_reset"))
hooks.set_record_stream_fn(addr("gpumem_record_stream"))
torch.cuda.memory.change_current_allocator(alloc)


def make_model():
    return torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).cuda()  # MODEL-LINE


def forward_step(model, x):
    return model(x).square().mean()  # FORWARD-LINE


def backward_step(loss):
    lib.gpumem_backward_begin()  # BACKWARD-BEGIN
    try:
        loss.backward()  # BACKWARD-LINE
    finally:
        lib.gpumem_backward_end()


def ask(obj):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(SOCK)
    t = time.perf_counter()
    s.sendall(json.dumps(obj).encode() + b"\n")
    buf = b""
    while b"\n" not in buf:
        buf += s.recv(65536)
    s.close()
    return json.loads(buf), time.perf_counter() - t


phase("allocator installed")
torch.manual_seed(0)
model = make_model()
opt = torch.optim.AdamW(model.parameters())
for step in range(5):
    x = torch.randn(256, 1024, device="cuda")
    loss = forward_step(model, x)
    backward_step(loss)
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
phase("trained")
ping, t_ping = ask({"cmd": "ping", "id": 1})
results["ping"] = ping
results["ping_ms"] = round(t_ping * 1000, 2)
snap_path = os.path.join(OUT, "s.pickle")
offset = lib.gpumem_snapshot(snap_path.encode())
empty, _ = ask({"cmd": "empty_cache"})
results["empty_cache"] = empty


def bench(n):
    t = time.perf_counter()
    for _ in range(n):
        del_me = torch.empty(256, device="cuda")
        del del_me
    return (time.perf_counter() - t) / n * 1e6


def deep(n, f):
    return deep(n - 1, f) if n else f()


# Native loop (helper .so, optional): malloc+free straight into the allocator from a thread with real
# Python frames and the GIL released, as PyTorch calls it; no torch or ctypes overhead in the figure.
helper_path = os.environ.get("GPUMEM_NATIVE_THREAD_SO")
loop = None
if helper_path:
    helper = ctypes.CDLL(helper_path)
    loop = helper.alloc_free_loop
    loop.restype = ctypes.c_double
    loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]


def measure(tag):
    phase("measure " + tag)
    bench(2000)
    results["torch_us_per_empty_del_" + tag] = round(min(bench(20000) for _ in range(5)), 3)
    for depth in (2, 25):
        results["torch_us_depth%d_%s" % (depth, tag)] = round(min(deep(depth, lambda: bench(20000)) for _ in range(5)), 3)
        if loop:
            results["native_ns_depth%d_%s" % (depth, tag)] = round(min(deep(depth, lambda: loop(
                addr("gpumem_malloc"), addr("gpumem_free"), 100000, 512)) for _ in range(5)), 1)
            phase("native loop depth %d done" % depth)


if MODE == "bench":
    measure("stacks_on")
    if lib.gpumem_configure(b'{"stacks": false}') == 0:
        measure("stacks_off")
    else:
        results["stacks_off_error"] = lib.gpumem_last_error().decode()
    lib.gpumem_shutdown(0)
    print(json.dumps(results, indent=1))
    sys.exit(0)
time.sleep(0.2)
phase("shutdown")
lib.gpumem_shutdown(0)
phase("reading the capture")

# ---- read back --------------------------------------------------------------------------------
c = cap.Capture(CAPTURE)
src = os.path.abspath(__file__)


def line_of(tag):
    with open(src) as f:
        return next(i + 1 for i, ln in enumerate(f) if ln.rstrip().endswith("# " + tag))


dev = c.of("device")
results["device_records"] = [(d[1], c.strings[F.DeviceRec.unpack_from(d[3])[2]],
                              F.DeviceRec.unpack_from(d[3])[1]) for d in dev]
samples = [F.DeviceSampleRec.unpack_from(r[3]) for r in c.of("device_sample")]
results["samples"] = len(samples)
results["last_sample_used_total_process"] = samples[-1][1:] if samples else None
allocs = c.blocks("alloc")
results["allocs"] = len(allocs)
here = os.path.realpath(src)


_has = {}


def has_line(a, tag):
    key = (a["stack"], tag)
    if key not in _has:
        want = line_of(tag)
        _has[key] = any(os.path.realpath(f) == here and ln == want for f, _, ln in c.stacks.get(a["stack"], (0, []))[1])
    return _has[key]


results["allocs_at_model_line"] = sum(has_line(a, "MODEL-LINE") for a in allocs)
results["allocs_at_forward_line"] = sum(has_line(a, "FORWARD-LINE") for a in allocs)
bw = [a for a in allocs if a["stack"] and c.stacks[a["stack"]][0] & 1]
results["backward_flagged_allocs"] = len(bw)
# The flagged stack is the bracketing thread's at gpumem_backward_begin (the bootstrap's wrapper, in
# real runs; here the line before loss.backward()).
results["backward_flagged_at_begin_line"] = sum(has_line(a, "BACKWARD-BEGIN") for a in bw)
results["backward_threads"] = sorted({a["thread"] for a in bw})
results["no_stack_allocs"] = sum(1 for a in allocs if a["stack"] == 0)
results["innermost_frame_example"] = c.stacks[allocs[0]["stack"]][1][:2] if allocs[0]["stack"] else None
at = {r[4]: r[0] for r in c.records}
results["snapshot_offset_is_state"] = at.get(offset) == "state"
with open(snap_path, "rb") as f:
    snap = pickle.load(f)
results["pickle_segments"] = len(snap["segments"])
results["pickle_trace_entries"] = len(snap["device_traces"][0])
results["end_record"] = c.records[-1][0]
print(json.dumps(results, indent=1))
with open(os.path.join(OUT, "results.json"), "w") as f:
    json.dump(results, f, indent=1)
ok = (results["allocs_at_forward_line"] > 0 and results["backward_flagged_at_begin_line"] == len(bw) > 0
      and results["snapshot_offset_is_state"] and results["end_record"] == "end" and dev)
sys.exit(0 if ok else 1)
