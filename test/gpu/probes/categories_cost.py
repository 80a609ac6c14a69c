#!/usr/bin/env python3
"""Probe (memory categories): what each candidate source of categories costs per training
step, and what it sees under torch.compile. Not a test: it prints measurements that the design note in
native/python/README.md (Note [Category sources]) quotes. Needs a GPU, torch, torchvision, transformers.

    python3 test/gpu/probes/categories_cost.py [--models gpt2 resnet50] [--rounds 3] [--out DIR]

Sources measured, each alone and all together, on PyTorch's own allocator (the cost is Python-side):
- module-hooks: global forward pre/post hooks (torch.nn.modules.module.register_module_forward_*_hook)
  that keep a module-path stack, as the bootstrap would to name "activations of transformer.h.3.mlp";
- module-hooks+ctypes: the same, each hook also making one ctypes call (what telling the allocator the
  current module costs);
- module-paths: the bootstrap's own hooks (gpumem/_modules.py, Note [Module paths]: path per module object,
  torch.compiler.is_compiling() guard, one ctypes call per begin and per end with the path's bytes) — what
  `gpumem run` now pays for activations by module path; under torch.compile it is the configuration measured;
- optimizer-walk: global optimizer step pre/post hooks that walk params, .grad and optimizer.state and
  collect (data_ptr, nbytes) of every tensor (parameters, gradients, optimizer state by identity);
- saved-tensors: a global autograd.graph.saved_tensors_hooks pack hook that records each saved tensor's
  storage pointer (activations kept for backward, exactly) — pack is called once per saved tensor.
Configurations are interleaved within one process per model (Note [Interleaved rounds] of
bench_allocator.py): per round each configuration runs warm-up then timed steps.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "400")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import ctypes
import json
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

CONFIGS = ("none", "module-hooks", "module-hooks+ctypes", "module-paths", "optimizer-walk", "saved-tensors", "all")


class Sources:
    """Installs one configuration's hooks; remove() takes them all off again."""

    def __init__(self, torch, model, config):
        self.torch, self.handles, self.ctx = torch, [], None
        self.stack, self.saved, self.tagged = [], 0, 0
        names = {m: n for n, m in model.named_modules()}
        libc = ctypes.CDLL(None)
        getpid = libc.getpid
        use_module = config in ("module-hooks", "module-hooks+ctypes", "all")
        use_ctypes = config in ("module-hooks+ctypes", "all")
        mm = torch.nn.modules.module
        if use_module:
            def pre(mod, args):
                self.stack.append(names.get(mod, "?"))
                if use_ctypes:
                    getpid()

            def post(mod, args, out):
                if self.stack:
                    self.stack.pop()
                if use_ctypes:
                    getpid()

            self.handles += [mm.register_module_forward_pre_hook(pre), mm.register_module_forward_hook(post)]
        if config == "module-paths":
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "native", "python"))
            from gpumem import _modules

            strlen = libc.strlen  # a C call taking the path's bytes, like gpumem_mark(path, kind)
            strlen.argtypes = [ctypes.c_char_p]
            self.paths = _modules.install(torch, lambda path, kind: strlen(path))
            self.handles += self.paths.handles
        if config in ("optimizer-walk", "all"):
            import importlib

            opt_mod = importlib.import_module("torch.optim.optimizer")

            def walk(opt, args, kwargs):
                seen = []
                for group in opt.param_groups:
                    for p in group["params"]:
                        seen.append((p.data_ptr(), p.untyped_storage().nbytes()))
                        if p.grad is not None:
                            seen.append((p.grad.data_ptr(), p.grad.untyped_storage().nbytes()))
                for st in opt.state.values():
                    for v in st.values():
                        if torch.is_tensor(v) and v.is_cuda:
                            seen.append((v.data_ptr(), v.untyped_storage().nbytes()))
                self.tagged = len(seen)

            self.handles += [opt_mod.register_optimizer_step_pre_hook(walk), opt_mod.register_optimizer_step_post_hook(walk)]
        if config in ("saved-tensors", "all"):
            def pack(t):
                self.saved += 1
                if t.is_cuda:
                    t.untyped_storage().data_ptr()
                return t

            self.ctx = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
            self.ctx.__enter__()

    def remove(self):
        for h in self.handles:
            h.remove()
        if self.ctx is not None:
            self.ctx.__exit__(None, None, None)


def model_and_step(torch, name, compiled=False):
    if name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50().cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(64, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (64,), device="cuda")
        fwd = torch.compile(model) if compiled else model

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(fwd(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return model, step
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_positions=512)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (16, 512), device="cuda")
    fwd = torch.compile(model) if compiled else model

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model, step


def timed(torch, step, warmup, n):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def child(name, rounds, warmup, steps):
    import torch

    torch.manual_seed(0)
    model, step = model_and_step(torch, name)
    per = {c: [] for c in CONFIGS}
    counts = {}
    for r in range(rounds):
        for c in CONFIGS:
            src = Sources(torch, model, c)
            try:
                per[c].append(timed(torch, step, warmup, steps))
                counts[c] = {"saved_per_step": src.saved / max(1, warmup + steps), "tagged": src.tagged}
            finally:
                src.remove()
    base = [statistics.median(per["none"])]
    out = {"median_ms": {c: statistics.median(v) for c, v in per.items()}, "counts": counts}
    # Ratio per round against that round's "none", then the median over rounds.
    out["ratio"] = {c: statistics.median(per[c][i] / per["none"][i] for i in range(rounds)) for c in CONFIGS}
    out["base_ms"] = base[0]
    # Under torch.compile: do global hooks still fire for submodules, and do they break the graph?
    try:
        import torch._dynamo

        torch._dynamo.reset()
        torch.manual_seed(0)
        model_c, step_c = model_and_step(torch, name, compiled=True)
        src = Sources(torch, model_c, "all")
        calls = {"pre": 0}
        counter = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, a: calls.__setitem__("pre", calls["pre"] + 1))
        try:
            for _ in range(3):
                step_c()
            torch.cuda.synchronize()
            calls["pre"] = 0
            src.saved = 0
            step_c()
            torch.cuda.synchronize()
        finally:
            counter.remove()
            src.remove()
        from torch._dynamo.utils import counters

        out["compiled"] = {
            "module_pre_hook_calls_per_step": calls["pre"],
            "modules": sum(1 for _ in model_c.modules()),
            "saved_tensor_packs_per_step": src.saved,
            "graph_breaks": sum(counters["graph_break"].values()),
            "unique_graphs": counters["stats"].get("unique_graphs", 0),
        }
    except Exception as exc:  # the probe reports, it does not fail
        out["compiled"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    # The bootstrap's module-path hooks alone under torch.compile, with no counting hook (a Python side effect in
    # a global hook is itself a graph break, so the block above measures the counter's breaks too): graph breaks,
    # graphs, and the marks written per step (the compiled module's own begin/end, nothing inside it).
    try:
        import torch._dynamo
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model_c, step_c = model_and_step(torch, name, compiled=True)
        src = Sources(torch, model_c, "module-paths")
        try:
            for _ in range(3):
                step_c()
            torch.cuda.synchronize()
            before = src.paths.marks
            step_c()
            torch.cuda.synchronize()
            marks = src.paths.marks - before
        finally:
            src.remove()
        out["compiled_module_paths"] = {
            "marks_per_step": marks,
            "modules": sum(1 for _ in model_c.modules()),
            "graph_breaks": sum(counters["graph_break"].values()),
            "graph_break_reasons": sorted(counters["graph_break"])[:5],
            "unique_graphs": counters["stats"].get("unique_graphs", 0),
        }
    except Exception as exc:
        out["compiled_module_paths"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["gpt2", "resnet50"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--child")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.rounds, args.warmup, args.steps)))
        return
    import subprocess

    results = {}
    for m in args.models:
        p = subprocess.run([sys.executable, __file__, "--child", m, "--rounds", str(args.rounds), "--warmup",
                            str(args.warmup), "--steps", str(args.steps)], capture_output=True, text=True)
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        results[m] = json.loads(line[-1][7:]) if line else {"error": p.stderr[-2000:]}
        r = results[m]
        if "ratio" in r:
            print("%s: base %.2f ms/step; " % (m, r["base_ms"]) + ", ".join("%s ×%.4f" % (c, v) for c, v in r["ratio"].items()))
            print("  counts %s; compiled %s" % (json.dumps(r["counts"]), json.dumps(r.get("compiled"))))
            print("  compiled, module-path hooks only: %s" % json.dumps(r.get("compiled_module_paths")))
        else:
            print("%s: %s" % (m, r))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "categories_cost.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
