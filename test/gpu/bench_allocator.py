#!/usr/bin/env python3
"""Benchmarks of the lens allocator against PyTorch's (issue 3). Needs an NVIDIA GPU, torch,
torchvision, transformers. Not a test: it prints figures and ratios measured in one run on one GPU.

    make -C native/allocator && python3 test/gpu/bench_allocator.py [--so PATH] [--only micro steps frag]

- micro: torch.empty + free in a loop (µs per pair): ours without stacks vs native, ours with stacks
  (and a capture file) vs native with _record_memory_history(stacks="python").
- steps: median step time of ResNet-50 (batch 64, bf16 autocast), GPT-2 small (16×512, bf16
  autocast) and a launch-bound MLP (batch 32, 16×Linear(1024)): native vs ours with full recording.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from allocator_checks import DEFAULT_SO, install_lens, lens_stats  # noqa: E402


def setup(config, so):
    """config: native | native-history | ours | ours-stacks | ours-recording | ours-fixed | ours-expandable,
    optionally + "+trim" (expandable with trim_on_growth)."""
    import torch

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
    return {"us_per_alloc_free": best}


def step_fn(model_name):
    import torch

    if model_name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50().cuda()
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


def child_steps(args):
    import torch

    setup(args.config, args.so)
    torch.manual_seed(0)
    step = step_fn(args.model)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(60 if args.model == "mlp" else 40):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3}


def child_frag(args):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    lib = setup(args.config, args.so)
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


def run_child(kind, config, so, model=None, env_extra=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--config", config, "--so", so]
    if model:
        cmd += ["--model", model]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env_extra or {}))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"error": "exit %d: %s" % (p.returncode, p.stderr[-1200:])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", default=DEFAULT_SO)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the step benchmark")
    ap.add_argument("--child")
    ap.add_argument("--config", default="native")
    ap.add_argument("--model", default=None)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(CHILDREN[args.child](args)), flush=True)
        return 0
    want = lambda name: args.only is None or name in args.only  # noqa: E731
    results = {}

    def show(name, value):
        results[name] = value
        print(json.dumps({name: value}), flush=True)

    ratio = lambda a, b: (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None  # noqa: E731
    if want("micro"):
        m = {c: run_child("micro", c, args.so) for c in ("native", "ours", "native-history", "ours-stacks")}
        us = {c: r.get("us_per_alloc_free", r.get("error")) for c, r in m.items()}
        show("micro_us_per_alloc_free", us)
        show("micro_ratio_ours_vs_native", ratio(us["ours"], us["native"]))
        show("micro_ratio_ours_stacks_vs_native_history", ratio(us["ours-stacks"], us["native-history"]))
    if want("steps"):
        # Note [Interleaved rounds]: GPU clocks and a shared host drift by a few percent between minutes,
        # more than the 1 % being measured; so each round runs every config once, back to back, and the
        # reported ratio is the median over rounds of that round's ratio (drift cancels within a round).
        for model in ("resnet50", "gpt2", "mlp"):
            configs = ("native", "ours", "ours-recording")
            rounds = [{c: run_child("steps", c, args.so, model) for c in configs} for _ in range(args.rounds)]
            ms = [{c: v.get("median_ms", v.get("error")) for c, v in r.items()} for r in rounds]
            show("step_ms_%s" % model, ms)
            for c in configs[1:]:
                per_round = [ratio(m[c], m["native"]) for m in ms]
                ok = [x for x in per_round if x is not None]
                show("step_ratio_%s_%s_vs_native" % (model, c),
                     {"median": statistics.median(ok) if ok else None, "rounds": per_round})
    if want("frag"):
        configs = {"native": {}, "native-expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                   "ours-fixed": {}, "ours-expandable": {}, "ours-expandable+trim": {}}
        for c, env in configs.items():
            show("frag_%s" % c, run_child("frag", "native" if c == "native-expandable" else c, args.so,
                                          env_extra=env))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "bench_allocator.json"), "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
