#!/usr/bin/env python3
"""GPU checks of the bootstrap + allocator + control channel on a CUDA machine (no Node.js needed).

    python3 test/gpu/workload_checks.py [--out DIR]        (DIR defaults to $OUT, else a temp folder)

Prints one JSON line per check and exits non-zero if any check fails:
  (a) summary   an unmodified training script calling max_memory_allocated() and memory_summary()
                runs under `python3 -m gpumem run` and prints our numbers in PyTorch's layout; its
                capture names the GPU as the driver does (REC_DEVICE from the CUDA backend's identity)
                and carries device samples (NVML, matched by PCI bus id)
  (b) ddp       torchrun --nproc_per_node=2 DDP leaves captures for ranks 0 and 1 and its losses are
                bit-identical to the same run without the tool (skipped with fewer than 2 GPUs)
  (c) control   while a workload runs, empty_cache over the socket makes reserved drop, and snapshot
                writes a pickle with PyTorch's schema (compared with PyTorch's own snapshot)
  (d) fixture   records the walkthrough's sample (media/walkthrough/gpumem_sample.py) for the E2E replay
                fixture: DIR/e2e-capture.gpumem and DIR/gpumem_sample.py
  (e) api       cudnn.benchmark=True stays off (conv runs), torch.compile(mode="reduce-overhead") runs
                (falls back, one message each), _dump_snapshot/_record_memory_history/reset/fraction/
                empty_cache behave like PyTorch
Budget: about 2-4 minutes on one H100/H200 (+ DDP on two).
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "280")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import glob
import json
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY_DIR = os.path.join(ROOT, "native", "python")
WORKLOADS = os.path.join(ROOT, "test", "gpu", "workloads")
# The E2E fixture's script is the sample workspace's own file: the replayed capture's lines must be
# that file's lines, so there is one copy of it.
E2E_SCRIPT = os.path.join(ROOT, "media", "walkthrough", "gpumem_sample.py")
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
sys.path.insert(0, PY_DIR)
from gpumem import _control  # noqa: E402
from gpumem import _format as F  # noqa: E402

RESULTS = []
SEGMENTS = "expandable"


def emit(check, ok, **details):
    line = dict(check=check, ok=ok, **details)
    RESULTS.append(line)
    print(json.dumps(line), flush=True)


def _user_pythonpath():
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != PY_DIR]


def clean_env():
    """Environment for `python3 -m gpumem` (the launcher adds the tracking variables itself)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    env["PYTHONPATH"] = os.pathsep.join([PY_DIR] + _user_pythonpath())
    return env


def baseline_env():
    """The same machine environment with no trace of the lens (runs to compare against)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    rest = _user_pythonpath()
    if rest:
        env["PYTHONPATH"] = os.pathsep.join(rest)
    else:
        env.pop("PYTHONPATH", None)
    return env


def gpumem_run(out, argv, timeout, **popen):
    cmd = [sys.executable, "-m", "gpumem", "run", "--allocator", "lens", "--out", out, "--sample-ms", "50", "--segments", SEGMENTS, "--"] + argv
    return subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=timeout, cwd=WORKLOADS, **popen)


def sessions(out):
    return sorted(glob.glob(os.path.join(out, "*-*")))


def capture_header(path):
    with open(path, "rb") as f:
        head = f.read(F.FileHeader.size)
        magic, major, minor, n = F.FileHeader.unpack(head)
        if magic != F.kMagic:
            raise AssertionError("%s is not a capture (magic %r)" % (path, magic))
        return F.read_header(head + f.read(n))[2]


def device_records(path):
    """(REC_DEVICE names by device, REC_DEVICE_SAMPLE (used, total, process_used) tuples) of a capture."""
    with open(path, "rb") as f:
        data = f.read()
    strings, names, samples = {}, {}, []
    for _, t, dev, _, p in F.records(data, F.read_header(data)[3]):
        if t == F.REC_STRING:
            sid, ln = F.StringRec.unpack_from(p)
            strings[sid] = p[F.StringRec.size:F.StringRec.size + ln].decode()
        elif t == F.REC_DEVICE:
            names[dev] = strings.get(F.DeviceRec.unpack_dict(p)["name"], "?")
        elif t == F.REC_DEVICE_SAMPLE:
            samples.append(F.DeviceSampleRec.unpack_from(p)[1:])
    return names, samples


def result_line(stdout):
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError("no RESULT line in:\n" + stdout[-2000:])


def summary_shape(text):
    """What 'PyTorch's layout' means: the same lines, labels and column separators; numbers may differ."""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    return [(l[:24], [i for i, c in enumerate(l) if c == "|"]) for l in lines]


def check_summary(out):
    script = os.path.join(WORKLOADS, "train_mlp.py")
    base = subprocess.run([sys.executable, script], env=baseline_env(), capture_output=True, text=True, timeout=120)
    if base.returncode != 0:
        raise AssertionError("baseline run failed:\n" + base.stderr[-3000:])
    lens = gpumem_run(os.path.join(out, "a"), [script], timeout=120)
    if lens.returncode != 0:
        raise AssertionError("tracked run failed (%d):\n%s" % (lens.returncode, lens.stderr[-3000:]))
    ours, theirs = result_line(lens.stdout), result_line(base.stdout)
    (session,) = sessions(os.path.join(out, "a"))
    captures = glob.glob(os.path.join(session, "capture-*.gpumem"))
    same_layout = summary_shape(lens.stdout) == summary_shape(base.stdout)
    ok = (ours["backend"] == "pluggable" and ours["peak"] > 0 and same_layout and len(captures) == 1
          and "PyTorch CUDA memory summary, device ID 0" in lens.stdout)
    emit("a-summary", ok, backend=ours["backend"], peak_lens=ours["peak"], peak_pytorch=theirs["peak"],
         peaks_equal=ours["peak"] == theirs["peak"], reserved_lens=ours["max_reserved"], reserved_pytorch=theirs["max_reserved"],
         same_layout=same_layout, loss_equal=ours["loss"] == theirs["loss"], captures=len(captures),
         summary=[l for l in lens.stdout.splitlines() if l.startswith("| Allocated memory") or l.startswith("| GPU reserved memory")],
         stderr_tail=lens.stderr.strip().splitlines()[-3:])
    # Device identity comes from the Backend (cuDeviceGetName / cuDeviceGetPCIBusId), no longer
    # from a second dlopen in the recorder; NVML finds the device by that bus id.
    import torch
    names, samples = device_records(captures[0]) if captures else ({}, [])
    # (No process share since Note [One NVML call a sample]: process_used is 0 in every sample.)
    emit("a-identity", names.get(0) == torch.cuda.get_device_name(0) and any(s[0] > 0 for s in samples)
         and all(s[2] == 0 for s in samples),
         device_name=names.get(0), torch_name=torch.cuda.get_device_name(0), samples=len(samples))


def check_ddp(out, gpus):
    if gpus < 2:
        emit("b-ddp", True, skipped="needs 2 GPUs, found %d" % gpus)
        return
    script = os.path.join(WORKLOADS, "ddp_train.py")
    results = {}
    for label, port in (("pytorch", 29611), ("lens", 29612)):
        dest = os.path.join(out, "b-" + label)
        os.makedirs(dest, exist_ok=True)
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=%d" % port, script, dest]
        if label == "pytorch":
            r = subprocess.run(argv, env=baseline_env(), capture_output=True, text=True, timeout=180)
        else:
            r = gpumem_run(os.path.join(out, "b-sessions"), argv, timeout=180)
        if r.returncode != 0:
            raise AssertionError("%s DDP run failed (%d):\n%s" % (label, r.returncode, r.stderr[-4000:]))
        results[label] = {}
        for rank in (0, 1):
            with open(os.path.join(dest, "losses-rank%d.json" % rank)) as f:
                results[label][rank] = json.load(f)
    (session,) = sessions(os.path.join(out, "b-sessions"))
    ranks = sorted(capture_header(p)["rank"] for p in glob.glob(os.path.join(session, "capture-*.gpumem")))
    identical = all(results["lens"][r]["losses"] == results["pytorch"][r]["losses"] for r in (0, 1))
    backends = [results["lens"][r]["backend"] for r in (0, 1)]
    emit("b-ddp", ranks == [0, 1] and identical and backends == ["pluggable", "pluggable"],
         capture_ranks=ranks, losses_bit_identical=identical, backends=backends,
         last_loss_rank0=float.fromhex(results["lens"][0]["losses"][-1]))


def _schema(snap):
    segs = snap.get("segments", [])
    blocks = [b for s in segs for b in s.get("blocks", [])]
    traces = [t for dev in snap.get("device_traces", []) for t in dev]
    return {
        "top": sorted(snap),
        "segment": sorted(set().union(*[set(s) for s in segs])) if segs else [],
        "block": sorted(set().union(*[set(b) for b in blocks])) if blocks else [],
        "states": sorted({b["state"] for b in blocks}),
        "trace": sorted(set().union(*[set(t) for t in traces if t.get("action") == "alloc"])) if traces else [],
        "frame": sorted(set().union(*[set(f) for t in traces for f in t.get("frames", [])])) if traces else [],
    }


def check_control(out):
    native = os.path.join(out, "native-snapshot.pickle")
    r = subprocess.run([sys.executable, os.path.join(WORKLOADS, "native_snapshot.py"), native], env=baseline_env(),
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("native snapshot failed:\n" + r.stderr[-3000:])
    with open(native, "rb") as f:
        reference = _schema(pickle.load(f))
    flag = os.path.join(out, "c-stop")
    root = os.path.join(out, "c")
    cmd = [sys.executable, "-m", "gpumem", "run", "--out", root, "--sample-ms", "50", "--segments", SEGMENTS, "--",
           os.path.join(WORKLOADS, "hold_memory.py"), flag]
    proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=WORKLOADS)
    try:
        line = proc.stdout.readline()
        if not line.startswith("READY "):
            raise AssertionError("workload did not start: %r\n%s" % (line, proc.stderr.read()[-3000:]))
        ready = json.loads(line[len("READY "):])
        (session,) = sessions(root)
        deadline = time.time() + 30
        while not _control.live_processes(session) and time.time() < deadline:
            time.sleep(0.05)
        (info,) = _control.live_processes(session)
        t0 = time.monotonic()
        pong = _control.request(info["socket"], {"cmd": "ping"})
        ping_ms = (time.monotonic() - t0) * 1000
        emptied = _control.request(info["socket"], {"cmd": "empty_cache"}, timeout=30)
        snap_reply = _control.request(info["socket"], {"cmd": "snapshot"}, timeout=60)
        with open(snap_reply["pickle"], "rb") as f:
            ours = _schema(pickle.load(f))
        open(flag, "w").close()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    after = json.loads([l for l in stdout.splitlines() if l.startswith("AFTER ")][0][len("AFTER "):])
    drop = emptied["reserved_before"] - emptied["reserved_after"]
    schema_ok = all(ours[k] == reference[k] for k in ("top", "segment", "block", "frame")) and set(reference["trace"]) <= set(ours["trace"])
    emit("c-control", pong["ok"] and drop > 0 and schema_ok and proc.returncode == 0,
         reserved_before=emptied["reserved_before"], reserved_after=emptied["reserved_after"], released=drop,
         ready=ready, after_run=after, ping_ms=round(ping_ms, 1), snapshot=snap_reply["pickle"], schema_matches_pytorch=schema_ok,
         schema_diff={k: {"lens": ours[k], "pytorch": reference[k]} for k in ours if ours[k] != reference[k]})


def check_api(out):
    dump = os.path.join(out, "e-dump.pickle")
    r = gpumem_run(os.path.join(out, "e"), [os.path.join(WORKLOADS, "api_and_guards.py"), dump], timeout=180)
    if r.returncode != 0:
        raise AssertionError("api run failed (%d):\n%s" % (r.returncode, r.stderr[-3000:]))
    res = result_line(r.stdout)
    ours = [l for l in r.stderr.splitlines() if l.startswith("gpumem: ") and "session" not in l and "capture" not in l]
    expected = {
        "benchmark_after_set": False, "conv_shape": [8, 32, 64, 64], "compiled_matches": True, "compiled_matches_again": True,
        "dump_keys": ["allocator_settings", "device_traces", "external_annotations", "segments"],
        "peak_after_reset_is_current": True, "fraction": 0.5, "backend": "pluggable",
    }
    wrong = {k: res.get(k) for k, v in expected.items() if res.get(k) != v}
    dropped = res["empty_cache"][0] > res["empty_cache"][1]
    one_each = (sum("cudnn.benchmark" in l for l in ours) == 1 and sum("reduce-overhead" in l for l in ours) == 1)
    emit("e-api", not wrong and dropped and one_each, wrong=wrong, empty_cache=res["empty_cache"],
         warnings=ours, snapshot_segments=res["snapshot_segments"])


def check_fixture(out):
    r = gpumem_run(os.path.join(out, "d"), [E2E_SCRIPT], timeout=120)
    if r.returncode != 0:
        raise AssertionError("fixture run failed (%d):\n%s" % (r.returncode, r.stderr[-3000:]))
    (session,) = sessions(os.path.join(out, "d"))
    (capture,) = glob.glob(os.path.join(session, "capture-*.gpumem"))
    dest = os.path.join(out, "e2e-capture.gpumem")
    shutil.copyfile(capture, dest)
    shutil.copyfile(E2E_SCRIPT, os.path.join(out, "gpumem_sample.py"))
    size = os.path.getsize(dest)
    header = capture_header(dest)
    emit("d-fixture", 0 < size <= 8 << 20, capture=dest, bytes=size, script=os.path.join(out, "gpumem_sample.py"),
         header_argv=header.get("argv"), stdout=r.stdout.strip())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpumem-gpu-"))
    p.add_argument("--only", default="abcde", help="subset of checks to run, e.g. 'ac'")
    p.add_argument("--segments", choices=("expandable", "fixed"), default="expandable")
    args = p.parse_args()
    global SEGMENTS
    SEGMENTS = args.segments
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="gpumem-gpu-work-")  # sessions and sockets; only results go to --out
    if not os.path.exists(SO):
        build = subprocess.run(["make", "-C", os.path.join(ROOT, "native", "allocator")], capture_output=True, text=True)
        if build.returncode != 0 or not os.path.exists(SO):
            emit("build", False, error="make -C native/allocator failed", tail=build.stderr[-3000:])
            return 1
    import torch  # only the checker's own process; workloads are separate processes

    gpus = torch.cuda.device_count()
    emit("env", gpus > 0, torch=torch.__version__, gpus=gpus, device=torch.cuda.get_device_name(0) if gpus else None)
    checks = {"a": check_summary, "b": lambda w: check_ddp(w, gpus), "c": check_control, "d": None, "e": check_api}
    t_start = time.time()
    seconds = {}
    for key in args.only:
        t0 = time.time()
        try:
            if key == "d":
                check_fixture(out)
            else:
                checks[key](work)
        except Exception as exc:
            emit({"a": "a-summary", "b": "b-ddp", "c": "c-control", "d": "d-fixture", "e": "e-api"}[key], False,
                 error="%s: %s" % (type(exc).__name__, exc), traceback=traceback.format_exc()[-3000:])
        seconds[key] = round(time.time() - t0, 1)
    failed = [r["check"] for r in RESULTS if not r["ok"]]
    print(json.dumps({"check": "all", "ok": not failed, "failed": failed, "seconds": seconds,
                      "total_seconds": round(time.time() - t_start, 1)}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
