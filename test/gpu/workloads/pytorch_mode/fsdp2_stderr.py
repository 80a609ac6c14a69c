"""Workload: FSDP2 (`fully_shard`) on one GPU (a world of one: the sharding, its hooks, its all-gather
stream and its memory all run), a few training steps, outputs saved to argv[1]. The check runs it natively and under
`gpumem run` and diffs stderr line by line (gpumem's own lines aside): the tool must add no warning, change no
output, fire no hook an extra time, and leave torch.cuda.max_memory_allocated() as it is."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)
import json  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    d = 512
    model = torch.nn.Sequential(*[Block(d) for _ in range(4)]).cuda()
    calls = {"n": 0}
    model[1].register_forward_hook(lambda m, a, o: calls.__setitem__("n", calls["n"] + 1))  # the user's own hook
    for block in model:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 128, d, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    outs = []
    for _ in range(5):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        outs.append(loss.detach().clone())
    torch.cuda.synchronize()
    torch.save([o.cpu() for o in outs], sys.argv[1])
    print("RESULT " + json.dumps({"hook_calls": calls["n"], "max_allocated": torch.cuda.max_memory_allocated(),
                                  "mode": os.environ.get("GPUMEM_ALLOCATOR")}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
