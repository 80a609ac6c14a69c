"""Workload for stack_equivalence.py: real PyTorch allocations from stack shapes a frame walker can get
wrong — nn.Module nesting, a custom autograd Function (Python code on the autograd thread), activation
checkpointing (forward recomputed during backward), a generator, a comprehension, an exception handler
— for a few steps. Prints how the lens captured stacks as its last line ("STACK_INFO {json}")."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import json
import sys

import torch
import torch.utils.checkpoint as cp


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        scratch = torch.empty_like(x)  # Python frames on the autograd thread
        torch.mul(x, 2.0, out=scratch)
        return grad * scratch


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.a = torch.nn.Linear(d, 4 * d)
        self.b = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return self.b(Square.apply(self.a(x)))


class Net(torch.nn.Module):
    def __init__(self, d=512, n=4):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x):
        for i, blk in enumerate(self.blocks):
            x = cp.checkpoint(blk, x, use_reentrant=False) if i % 2 else blk(x)
        return x


def batches(n, d):
    for _ in range(n):
        yield torch.randn(64, d, device="cuda")


def main():
    torch.manual_seed(0)
    net = Net().cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    for x in batches(4, 512):
        loss = net(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        extra = [torch.empty(1 << k, device="cuda") for k in range(10, 14)]
        try:
            raise RuntimeError("handled")
        except RuntimeError:
            extra.append(torch.zeros(4096, device="cuda"))
        del extra
    torch.cuda.synchronize()
    st = sys.modules.get("gpumem._state")  # the bootstrap, when run under `gpumem run`
    print("STACK_INFO " + json.dumps(st.STATE.native.stack_info() if st and st.STATE.native else None))


if __name__ == "__main__":
    main()
