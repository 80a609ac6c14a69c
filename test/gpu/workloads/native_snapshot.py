"""PyTorch's own snapshot (no lens) as the schema reference for check (c): argv[1] = output pickle."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import sys

import torch

torch.cuda.memory._record_memory_history(max_entries=10000)
keep = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(2)]
tmp = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
del tmp
torch.cuda.memory._dump_snapshot(sys.argv[1])
