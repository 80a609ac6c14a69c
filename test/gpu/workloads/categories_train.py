#!/usr/bin/env python3
"""Issue 17's category workload: GPT-2 small (AdamW, bf16 autocast; built from GPT2Config, no network) or
ResNet-50 (torchvision, SGD with momentum, bf16 autocast), N steps, run under `gpumem run` by
test/gpu/categories_check.py. The loop is the plain one (zero_grad(set_to_none=True), forward, backward, step)
with no gpumem code: the tool must find steps and categories by itself.

It measures the reference figures the check compares with, from PyTorch objects only:
- at each step end (right after opt.step(), where the tool's step ends): Σ over parameters, over .grad and over
  the optimizer's CUDA state tensors of round512(numel·element_size), and torch.cuda.memory_allocated();
- per step, the activations by module class: each storage an op creates during the forward (a
  TorchDispatchMode, active only around the forward) is attributed to the innermost module whose forward is
  running (global module forward hooks of this workload — the tool has none), named like the tool names it:
  the qualname of the class in the MRO that defines forward; a storage counts when autograd saves a tensor on it
  (torch.autograd.graph.saved_tensors_hooks) — the saved tensors are what backward keeps alive.
Prints one line `RESULT {json}`."""
import argparse
import json
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def r512(n):
    return (n + 511) // 512 * 512


def tensor_bytes(t):
    return r512(t.numel() * t.element_size())


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


def forward_class(module):
    for c in type(module).__mro__:
        if "forward" in c.__dict__:
            return c.__qualname__
    return type(module).__qualname__


class Attribution(TorchDispatchMode):
    """Storage pointer → module class of the innermost running forward, for every storage an op creates."""

    def __init__(self, stack):
        super().__init__()
        self.stack, self.owner = stack, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.is_cuda:
                s = t.untyped_storage()
                ptr = s.data_ptr()
                if ptr and ptr not in self.owner:
                    self.owner[ptr] = (forward_class(self.stack[-1]) if self.stack else "<no forward frame>", s.nbytes())
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
    ends, activations = [], []
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        saved = {}

        def pack(t):
            if t.is_cuda:
                saved[t.untyped_storage().data_ptr()] = True
            return t

        mode = Attribution(stack)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                with mode:
                    loss = forward()
        by_module = {}
        for ptr in saved:
            if ptr in mode.owner:  # made in this forward (not a parameter, not the input batch)
                cls, nbytes = mode.owner[ptr]
                by_module[cls] = by_module.get(cls, 0) + r512(nbytes)
        activations.append(by_module)
        del mode, saved
        loss.backward()
        opt.step()
        state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor) and v.is_cuda]
        ends.append({
            "parameter": sum(tensor_bytes(p) for p in params),
            "gradient": sum(tensor_bytes(p.grad) for p in params if p.grad is not None),
            "optimizer_state": sum(tensor_bytes(v) for v in state),
            "allocated": torch.cuda.memory_allocated(),
        })
        del loss
    torch.cuda.synchronize()
    print("RESULT " + json.dumps({"model": a.model, "steps": a.steps, "step_ends": ends, "activations": activations,
                                  "file": os.path.abspath(__file__)}), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
