"""The 2-GPU run: DDP on NCCL under torchrun, one rank per GPU (LOCAL_RANK → cuda:LOCAL_RANK).

    torchrun --nproc-per-node 2 ddp_two_gpus.py OUT_DIR [STEPS]

Every rank trains the same MLP; rank 1 also keeps one extra 512 MiB tensor alive from step 2 on (# EXTRA_LINE),
so the rank table must show rank 1 higher by that much and flag it. Each rank writes OUT_DIR/rank<R>.json with what
it measured itself: its device, torch.cuda.max_memory_allocated() and the extra bytes.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import json
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

EXTRA = 512 << 20
out = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
rank = dist.get_rank()
device = torch.device("cuda", local_rank)
model = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 2048)).to(device)
ddp = DDP(model, device_ids=[local_rank])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
extra = None
for i in range(steps):
    x = torch.randn(512, 2048, device=device)
    loss = F.mse_loss(ddp(x), x)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if rank == 1 and i == 2:
        extra = torch.empty(EXTRA, dtype=torch.uint8, device=device)  # EXTRA_LINE
torch.cuda.synchronize()
dist.barrier()
with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
    json.dump({"rank": rank, "world_size": dist.get_world_size(), "device": local_rank,
               "device_name": torch.cuda.get_device_name(device),
               "max_memory_allocated": torch.cuda.max_memory_allocated(device),
               "extra_bytes": EXTRA if extra is not None else 0,
               "allocator_backend": torch.cuda.memory.get_allocator_backend()}, f)
dist.destroy_process_group()
print("DONE rank %d" % rank, flush=True)
