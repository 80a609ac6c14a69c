"""Deterministic 2-rank DDP training (check (b)): writes each rank's losses, as float.hex, to
<out>/losses-rank<R>.json so runs with and without the lens can be compared bit for bit."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import json
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
dist.init_process_group("nccl")
rank = dist.get_rank()
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
torch.manual_seed(1234)
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda()
ddp = DDP(model, device_ids=[local_rank])
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
gen = torch.Generator(device="cuda").manual_seed(100 + rank)
losses = []
for step in range(15):
    x = torch.randn(32, 256, device="cuda", generator=gen)
    y = torch.randn(32, 256, device="cuda", generator=gen)
    loss = F.mse_loss(ddp(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item().hex())
with open(os.path.join(sys.argv[1], "losses-rank%d.json" % rank), "w") as f:
    json.dump({"rank": rank, "world_size": dist.get_world_size(), "losses": losses,
               "backend": torch.cuda.memory.get_allocator_backend()}, f)
dist.destroy_process_group()
