"""A small training loop for the summaries check (test/gpu/summaries_check.py).

    summaries_train.py oom      trains 6 steps; after the 4th (in iteration 5) it asks for twice the GPU and survives the OOM; exit 0
    summaries_train.py forever  prints READY after 3 steps, then trains until killed
    summaries_train.py steps N  trains N steps (many allocations: fills a small file-size limit), prints DONE
    summaries_train.py ddp      2-rank DDP on the gloo backend, both ranks on cuda:0 (under torchrun)

Every optimizer.step() is a record_function range PyTorch itself opens: the summaries' steps come from it.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import sys

import torch
import torch.nn.functional as F

mode = sys.argv[1]
device = torch.device("cuda", 0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(device)
ddp = None
if mode == "ddp":
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    ddp = DDP(model, device_ids=[0])
opt = torch.optim.AdamW((ddp or model).parameters(), lr=1e-3)


def step():
    x = torch.randn(256, 1024, device=device)
    loss = F.mse_loss((ddp or model)(x), x)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


if mode == "oom":
    total = torch.cuda.get_device_properties(0).total_memory
    for i in range(6):
        step()
        if i == 3:
            try:
                torch.empty(2 * total, dtype=torch.uint8, device=device)  # OOM_LINE
            except RuntimeError as e:  # torch.OutOfMemoryError, or the lens allocator's "CUDA out of memory."
                print("OOM survived:", str(e).splitlines()[0], flush=True)
    print("DONE", flush=True)
elif mode == "forever":
    for i in range(3):
        step()
    torch.cuda.synchronize()
    print("READY %d" % os.getpid(), flush=True)
    while True:
        step()
elif mode == "steps":
    for i in range(int(sys.argv[2])):
        step()
    torch.cuda.synchronize()
    print("DONE", flush=True)
elif mode == "ddp":
    for i in range(5):
        step()
    torch.cuda.synchronize()
    print("DONE rank %d" % dist.get_rank(), flush=True)
    dist.destroy_process_group()
