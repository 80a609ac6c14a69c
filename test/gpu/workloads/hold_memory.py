"""Holds cached memory while computing (check (c)): a control client empties the cache and takes a
snapshot while this runs. argv[1] is a flag file whose appearance ends the run."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import json
import sys
import time

import torch

keep = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]
scratch = [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]
del scratch  # now cached: reserved is well above allocated
torch.cuda.synchronize()
print("READY " + json.dumps({"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}), flush=True)
a = torch.randn(1024, 1024, device="cuda")
deadline = time.time() + 90
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    b = a @ a  # keep the GPU and the Python thread busy while the control channel is used
    torch.cuda.synchronize()
print("AFTER " + json.dumps({"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}), flush=True)
