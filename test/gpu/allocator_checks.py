#!/usr/bin/env python3
"""GPU checks for the lens allocator. Needs an NVIDIA GPU, torch, torchvision, transformers.

    make -C native/allocator && python3 test/gpu/allocator_checks.py [--so PATH] [--only NAME ...]

Every workload runs in its own subprocess: an allocator can be swapped in only before CUDA starts,
and PyTorch's own allocator is the reference each check compares with. One JSON line per check is
printed; with $OUT set, all results also go to $OUT/allocator_checks.json. Exit status 1 if any
check failed.

Note [Own installer]: the bootstrap (native/python/gpumem) installs the allocator from the session's
settings and also starts capture files and shims; these checks need to pick the segment strategy per
run and nothing else, so they wire the .so exactly as the bootstrap does (same hooks) with ctypes.
"""
import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
MiB = 1 << 20

# The same hooks, wired the same way, as the bootstrap (one list: native/python/gpumem/_install.py).
sys.path.insert(0, os.path.join(ROOT, "native", "python"))
from gpumem._install import HOOKS  # noqa: E402  (pure Python; imports no torch)


def install_lens(so, config):
    """Swap the lens allocator in (before CUDA starts); returns the ctypes library for its stats."""
    import torch

    lib = ctypes.CDLL(so)
    lib.gpumem_configure.argtypes = [ctypes.c_char_p]
    lib.gpumem_last_error.restype = ctypes.c_char_p
    for name in ("gpumem_allocated", "gpumem_reserved"):
        getattr(lib, name).restype = ctypes.c_uint64
        getattr(lib, name).argtypes = [ctypes.c_int]
    lib.gpumem_stats_json.restype = ctypes.c_size_t
    lib.gpumem_stats_json.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    if lib.gpumem_configure(json.dumps(config).encode()) != 0:
        raise RuntimeError("gpumem_configure: %s" % lib.gpumem_last_error().decode())
    alloc = torch.cuda.memory.CUDAPluggableAllocator(so, "gpumem_malloc", "gpumem_free")
    hooks = alloc.allocator()
    for setter, symbol in HOOKS:
        if hasattr(hooks, setter):
            getattr(hooks, setter)(ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value)
    torch.cuda.memory.change_current_allocator(alloc)
    return lib


def lens_stats(lib, device=0):
    buf = ctypes.create_string_buffer(16384)
    n = lib.gpumem_stats_json(device, buf, len(buf))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        lib.gpumem_stats_json(device, buf, len(buf))
    return json.loads(buf.value.decode())


def setup(allocator, so, extra=None):
    """In a child: install the requested allocator. allocator: native | ours-fixed | ours-expandable."""
    if allocator == "native":
        return None
    config = {"segments": allocator.split("-", 1)[1]}
    config.update(extra or {})
    return install_lens(so, config)


def deterministic(seed=0):
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


# ---- child workloads (each prints one RESULT line) -------------------------------------------------


def child_resnet50(args):
    import torch
    import torchvision

    setup(args.allocator, args.so)
    deterministic()
    model = torchvision.models.resnet50(num_classes=100).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(20):
        x = torch.randn(32, 3, 224, 224, generator=gen).cuda()
        y = torch.randint(0, 100, (32,), generator=gen).cuda()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": [float(v).hex() for v in losses]}


def child_gpt2(args):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    setup(args.allocator, args.so)
    deterministic()
    config = GPT2Config(n_positions=512, attn_implementation="eager")
    model = GPT2LMHeadModel(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(2)
    losses = []
    for _ in range(20):
        ids = torch.randint(0, config.vocab_size, (8, 256), generator=gen).cuda()
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": [float(v).hex() for v in losses]}


def child_behaviour(args):
    """empty_cache, record_stream, CUDA graph capture/replay and OOM under the lens allocator."""
    import torch

    lib = setup(args.allocator, args.so)
    out = {}

    # empty_cache drops reserved to what live tensors need. 64 MiB tensors: fixed segments give each
    # its own segment (reserved == live exactly); with expandable 20 MiB pages each freed 64 MiB hole
    # holds at least two whole pages, and at most two partly used pages stay mapped around it.
    size = 64 * MiB
    xs = [torch.empty(size, dtype=torch.uint8, device="cuda") for _ in range(40)]
    del xs[::2]
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    reserved_before = lib.gpumem_reserved(0)
    torch.cuda.empty_cache()
    free_after, _ = torch.cuda.mem_get_info()
    s = lens_stats(lib)
    live, reserved_after = 20 * size, s["reserved_bytes.all.current"]
    bound = live if args.allocator == "ours-fixed" else live + 21 * 2 * 20 * MiB
    out["empty_cache"] = {
        "reserved_before": reserved_before, "reserved_after": reserved_after,
        "allocated": s["allocated_bytes.all.current"], "driver_freed": free_after - free_before,
        "ok": s["allocated_bytes.all.current"] == live and live <= reserved_after <= bound
        and reserved_after < reserved_before
        and free_after - free_before >= 0.9 * (reserved_before - reserved_after),
    }
    del xs
    torch.cuda.empty_cache()

    # record_stream: a block used on a side stream is not reused before the side stream's event.
    # The side stream is kept busy with real work (torch.cuda._sleep returned at once on an H200).
    side = torch.cuda.Stream()
    a = torch.randn(8192, 8192, device="cuda")
    # Warm up so that nothing between the launch and the check calls the driver (a driver call may
    # wait for the GPU): one record_stream cycle puts an event in the pool, and two cached blocks
    # serve x and y.
    t = torch.ones(8 * MiB, device="cuda")
    t.record_stream(side)
    del t
    side.synchronize()
    cached = [torch.empty(8 * MiB, device="cuda") for _ in range(2)]
    del cached
    torch.cuda.synchronize()
    x = torch.ones(8 * MiB, device="cuda")
    ptr = x.data_ptr()
    side.wait_stream(torch.cuda.current_stream())
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.cuda.stream(side):
        x.mul_(2)
        # Queued after x's use: the event recorded at x's free waits for them. (Probed on an H200:
        # with the elementwise op last, the side stream was idle right after it under PyTorch's own
        # allocator too, so nothing could be observed.)
        c = a  # `a` stays alive on the default stream; only side-stream blocks churn
        for _ in range(12):
            c = c @ a / 8192.0
    x.record_stream(side)
    del x
    y = torch.empty(8 * MiB, device="cuda")
    side_busy = not side.query()
    reused_early = y.data_ptr() == ptr
    side.synchronize()
    z = torch.empty(8 * MiB, device="cuda")  # this malloc processes the completed event
    out["record_stream"] = {"side_stream_busy_at_realloc": side_busy, "reused_before_event": reused_early,
                            "reused_after_event": z.data_ptr() == ptr,
                            "ok": side_busy and not reused_early and z.data_ptr() == ptr}
    del y, z, a, c

    # CUDA graph capture and replay (private pool, relaxed-mode driver calls during capture).
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    static_in = torch.randn(64, 1024, device="cuda")
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(warm)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = model(static_in)
    results = []
    for i in range(3):
        data = torch.randn(64, 1024, device="cuda", generator=torch.Generator(device="cuda").manual_seed(i))
        static_in.copy_(data)
        g.replay()
        torch.cuda.synchronize()
        results.append(torch.allclose(static_out, model(data), rtol=1e-4, atol=1e-4))
    reserved_with_graph = lib.gpumem_reserved(0)
    del g, static_out
    torch.cuda.empty_cache()
    out["cuda_graph"] = {"replays_match": results, "reserved_with_graph": reserved_with_graph,
                         "reserved_after_release": lib.gpumem_reserved(0), "ok": all(results)}

    # OOM: our message, then the process keeps working.
    total = torch.cuda.get_device_properties(0).total_memory
    msg = ""
    try:
        torch.empty(2 * total, dtype=torch.uint8, device="cuda")
    except RuntimeError as e:
        msg = str(e)
    after = torch.ones(MiB, device="cuda")
    ok_after = float(after.sum().item()) == float(MiB)
    s = lens_stats(lib)
    out["oom"] = {"message": msg[:400], "num_ooms": s["num_ooms"], "next_allocation_ok": ok_after,
                  "ok": msg.startswith("CUDA out of memory. Tried to allocate") and ok_after and s["num_ooms"] == 1}
    return out


def page_move_scenario(torch, lib):
    """Note [Page moves]: a growth that trims while the GPU is busy. Page 0 (a's, freed with a fill
    still queued behind a long sleep kernel) must be moved to the growth without waiting for the GPU,
    and everything written before and after the move must land where it belongs."""
    # A live small tensor keeps the small pool's page from being a trim's donor: a page of another
    # size cannot move and would be given back after a stream synchronization.
    keep = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    before = lens_stats(lib)
    t0 = time.perf_counter()
    torch.cuda._sleep(int(1e9))  # about half a second of GPU time
    a = torch.empty(20 * MiB, dtype=torch.uint8, device="cuda").fill_(1)  # page 0
    b = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda").fill_(3)   # page 1
    del a  # page 0 is free; its fill has not run yet
    t1 = time.perf_counter()
    c = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")  # page 1's tail + page 2 = page 0 moved
    malloc_s = time.perf_counter() - t1
    c.fill_(2)
    gpu_was_busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    gpu_s = time.perf_counter() - t0
    after = lens_stats(lib)
    contents_ok = bool(c.eq(2).all().item()) and bool(b.eq(3).all().item())
    del keep
    key = "reserved_bytes.large_pool.current"
    return {"malloc_ms": round(malloc_s * 1e3, 3), "gpu_busy_ms": round(gpu_s * 1e3, 1),
            "gpu_was_busy": gpu_was_busy, "large_reserved": after[key],
            "maps": after["num_device_alloc"] - before["num_device_alloc"],
            "unmaps": after["num_device_free"] - before["num_device_free"], "contents_ok": contents_ok,
            "ok": gpu_was_busy and malloc_s < 0.1 * gpu_s and after[key] == 40 * MiB and contents_ok}


def child_page_move(args):
    import torch

    lib = setup(args.allocator, args.so)
    return {"page_move": page_move_scenario(torch, lib)}


def child_memcheck_workload(args):
    import torch

    lib = setup(args.allocator, args.so)
    move = page_move_scenario(torch, lib)  # memcheck sees any use of an address unmapped too early
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(32, 256, device="cuda")).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return {"loss": float(loss.item()), "page_move_contents_ok": move["contents_ok"],
            "page_move_large_reserved": move["large_reserved"]}


CHILDREN = {"resnet50": child_resnet50, "gpt2": child_gpt2, "behaviour": child_behaviour,
            "page_move": child_page_move, "memcheck": child_memcheck_workload}


# ---- parent --------------------------------------------------------------------------------------


def run_child(workload, allocator, so, timeout=300, prefix=()):
    cmd = list(prefix) + [sys.executable, os.path.abspath(__file__), "--child", workload, "--allocator", allocator,
                          "--so", so]
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONUNBUFFERED="1")
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            r["_seconds"] = round(time.time() - t0, 1)
            r["_rc"] = p.returncode
            r["_stderr_tail"] = p.stderr[-600:] if p.returncode else ""
            return r
    return {"error": "exit %d" % p.returncode, "_stdout_tail": p.stdout[-800:], "_stderr_tail": p.stderr[-1500:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", default=DEFAULT_SO)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--child")
    ap.add_argument("--allocator", default="native")
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(CHILDREN[args.child](args)), flush=True)
        return 0
    if not os.path.exists(args.so):
        print("no allocator at %s: run `make -C native/allocator` first" % args.so, file=sys.stderr)
        return 2
    results = []

    def report(name, ok, **details):
        r = dict(check=name, ok=bool(ok), **details)
        results.append(r)
        print(json.dumps(r), flush=True)

    want = lambda name: args.only is None or name in args.only  # noqa: E731
    for model in ("resnet50", "gpt2"):
        if not want(model):
            continue
        runs = {a: run_child(model, a, args.so) for a in ("native", "ours-fixed", "ours-expandable")}
        ref = runs["native"].get("losses")
        for a in ("ours-fixed", "ours-expandable"):
            got = runs[a].get("losses")
            report("%s_losses_bit_identical_%s" % (model, a), ref is not None and got == ref,
                   native=ref and [float.fromhex(v) for v in ref[-3:]], ours=got and [float.fromhex(v) for v in got[-3:]],
                   seconds=runs[a].get("_seconds"), error=runs[a].get("error") or runs["native"].get("error"),
                   stderr=runs[a].get("_stderr_tail"))
    if want("behaviour"):
        for a in ("ours-fixed", "ours-expandable"):
            r = run_child("behaviour", a, args.so)
            if "error" in r:
                report("behaviour_%s" % a, False, **r)
                continue
            for name, detail in r.items():
                if not name.startswith("_"):
                    report("%s_%s" % (name, a), detail.pop("ok"), **detail)
    if want("page_move"):
        r = run_child("page_move", "ours-expandable", args.so)
        detail = r.get("page_move", r)
        report("page_move_without_waiting_for_the_gpu", detail.pop("ok", False), **detail)
    if want("memcheck"):
        sanitizer = shutil.which("compute-sanitizer")
        if not sanitizer:
            report("memcheck", False, error="compute-sanitizer not found")
        else:
            try:
                r = run_child("memcheck", "ours-expandable", args.so, timeout=420,
                              prefix=(sanitizer, "--tool", "memcheck", "--error-exitcode", "7"))
                # --error-exitcode turns any memcheck finding into a non-zero exit.
                report("memcheck_clean", "error" not in r and r.get("_rc") == 0 and r.get("page_move_contents_ok"),
                       **{k: v for k, v in r.items() if k != "_stderr_tail"}, tail=r.get("_stderr_tail", "")[-400:])
            except subprocess.TimeoutExpired:
                report("memcheck_clean", False, error="timed out after 420 s")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "allocator_checks.json"), "w") as f:
            json.dump(results, f, indent=1)
    failed = [r["check"] for r in results if not r["ok"]]
    print("%d passed, %d failed%s" % (len(results) - len(failed), len(failed), (": " + ", ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    import faulthandler

    faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "400")), exit=True)  # a stall comes back as a stack (below the stage's limit)
    sys.exit(main())
