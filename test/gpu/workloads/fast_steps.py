"""On the GPU: a fast-step training loop (a few ms a step) that runs for SECONDS and knows nothing
of GPU Memory Lens. Many steps, each with module forwards, phases and new gradients: the records that outgrew any
capture budget before Note [Budget as a cap]. Deterministic in its allocations, so every run has the same peak and
the same lines at it, however many steps it gets through.

    python3 fast_steps.py SECONDS
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "300")), exit=True)  # a stall comes back as a stack
import json
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
torch.manual_seed(0)
blocks = [torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU()) for _ in range(12)]
model = torch.nn.Sequential(*blocks).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(256, 512, device="cuda")
steps, t0 = 0, time.time()
while time.time() - t0 < seconds:
    loss = model(x).pow(2).mean()  # FAST_STEP_FORWARD
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    steps += 1
    if steps % 200 == 0:
        torch.cuda.synchronize()
torch.cuda.synchronize()
elapsed = time.time() - t0
print("RESULT " + json.dumps({"steps": steps, "ms_per_step": 1000 * elapsed / max(steps, 1),
                              "max_allocated": torch.cuda.max_memory_allocated(),
                              "max_reserved": torch.cuda.max_memory_reserved()}), flush=True)
