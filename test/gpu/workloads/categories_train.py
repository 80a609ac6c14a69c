#!/usr/bin/env python3
"""The category workload: GPT-2 small (AdamW, bf16 autocast; built from GPT2Config, no network) or
ResNet-50 (torchvision, SGD with momentum, bf16 autocast), N steps, run under `gpumem run` by
test/gpu/categories_check.py. The loop is the plain one (zero_grad(set_to_none=True), forward, backward, step)
with no gpumem code: the tool must find steps and categories by itself.

It measures the reference figures the check compares with, from PyTorch objects only:
- at each step end (right after opt.step(), where the tool's step ends): Σ over parameters, over .grad and over
  the optimizer's CUDA state tensors of the block holding each (tensor_bytes), and torch.cuda.memory_allocated();
- per step, the storages autograd saved for backward (torch.autograd.graph.saved_tensors_hooks) that an op of
  that forward created, each with its bytes and the path of the module that created it: a TorchDispatchMode,
  active only around the forward, sees every op's outputs; an output storage that is none of the op's inputs'
  storages is new (views and in-place results share an input's), and belongs to the innermost module whose
  forward is running (this workload's own global module forward hooks), named like the tool names it
  (Note [Module paths]: its path in model.named_modules(), the root by its class name). A new storage at a
  reused address replaces the old entry, so a temporary freed earlier in the forward never lends its module.
  Which of them are still alive at the tool's peak is decided by the check from the capture's allocation and
  free events (test/gpu/saved_alive.mjs).
Prints one line `RESULT {json}`."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import json
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def r512(n):
    return (n + 511) // 512 * 512


def tensor_bytes(t, blocks=None):
    """Bytes of the allocation that holds t, as memory_allocated() counts them: under PyTorch's allocator the
    block at its storage's address (the request rounded to 512 B, or a whole unsplit block: Note [Observed block
    sizes] in native/allocator/src/observer.cc); under the lens round512(numel·size), the lens's own block."""
    if blocks:
        size = blocks.get(t.untyped_storage().data_ptr())
        if size is not None:
            return size
    return r512(t.numel() * t.element_size())


def active_blocks():
    """Address → size of PyTorch's blocks in use (its allocator only; None under a pluggable allocator)."""
    if torch.cuda.memory.get_allocator_backend() != "native":
        return None
    return {b["address"]: b["size"] for seg in torch.cuda.memory_snapshot() for b in seg["blocks"]
            if b["state"] == "active_allocated"}


def build(name, batch):
    if name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50().cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(batch or 32, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (batch or 32,), device="cuda")

        def forward():
            return torch.nn.functional.cross_entropy(model(x), y)

        return model, opt, forward
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_positions=512)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (batch or 8, 512), device="cuda")

    def forward():
        return model(input_ids=ids, labels=ids).loss

    return model, opt, forward


def module_paths(model):
    """Module → path as the tool names it (Note [Module paths]): named_modules() names, the root by its class."""
    return {m: (name or type(model).__name__) for name, m in model.named_modules()}


def _storages(xs):
    out = set()
    stack = list(xs)
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            if x.is_cuda:
                out.add(x.untyped_storage().data_ptr())
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    return out


class Attribution(TorchDispatchMode):
    """Storage pointer → (module path, bytes) of the innermost running forward, for every storage an op creates."""

    def __init__(self, stack, paths):
        super().__init__()
        self.stack, self.paths, self.owner = stack, paths, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = None
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.is_cuda:
                s = t.untyped_storage()
                ptr = s.data_ptr()
                if not ptr:
                    continue
                if inputs is None:
                    inputs = _storages(args) | _storages(kwargs)
                if ptr not in inputs:  # a new storage (not a view or in-place result of an input)
                    mod = self.stack[-1] if self.stack else None
                    self.owner[ptr] = (self.paths.get(mod, "<outside any module>") if mod is not None else "<outside any module>", s.nbytes())
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("gpt2", "resnet50"), required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(0)
    model, opt, forward = build(a.model, a.batch)
    stack = []
    mm = torch.nn.modules.module
    mm.register_module_forward_pre_hook(lambda m, args: stack.append(m))
    def leave(m, args, out):
        # A forward hook that returns a value replaces the module's output: pop, and return None.
        if stack:
            stack.pop()

    mm.register_module_forward_hook(leave)
    params = [p for g in opt.param_groups for p in g["params"]]
    paths = module_paths(model)
    ends, activations, saved_steps = [], [], []
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        saved = {}
        mode = Attribution(stack, paths)

        def pack(t):
            if t.is_cuda:
                ptr = t.untyped_storage().data_ptr()
                if ptr in mode.owner and ptr not in saved:  # made in this forward: its module and bytes now
                    saved[ptr] = mode.owner[ptr]
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                with mode:
                    loss = forward()
        by_module = {}
        for ptr, (path, nbytes) in saved.items():
            by_module[path] = by_module.get(path, 0) + r512(nbytes)
        activations.append(by_module)
        saved_steps.append([[ptr, r512(nbytes), path] for ptr, (path, nbytes) in saved.items()])
        del mode, saved
        loss.backward()
        opt.step()
        state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor) and v.is_cuda]
        blocks = active_blocks()
        ends.append({
            "parameter": sum(tensor_bytes(p, blocks) for p in params),
            "gradient": sum(tensor_bytes(p.grad, blocks) for p in params if p.grad is not None),
            "optimizer_state": sum(tensor_bytes(v, blocks) for v in state),
            "allocated": torch.cuda.memory_allocated(),
        })
        del loss
    torch.cuda.synchronize()
    print("RESULT " + json.dumps({"model": a.model, "steps": a.steps, "step_ends": ends, "activations": activations, "saved": saved_steps,
                                  "max_allocated": torch.cuda.max_memory_allocated(), "file": os.path.abspath(__file__)}), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
