"""An ordinary training script that knows nothing about GPU Memory Lens: it logs peak memory and
the allocator summary the way training loops commonly do (check (a) of workload_checks.py)."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import json

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(20):
    x = torch.randn(64, 1024, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
peak = torch.cuda.max_memory_allocated()
print(torch.cuda.memory_summary())
print("RESULT " + json.dumps({
    "peak": peak,
    "allocated": torch.cuda.memory_allocated(),
    "reserved": torch.cuda.memory_reserved(),
    "max_reserved": torch.cuda.max_memory_reserved(),
    "backend": torch.cuda.memory.get_allocator_backend(),
    "loss": loss.item(),
}))
