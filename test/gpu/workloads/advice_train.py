"""GPT-2 small (AdamW, bf16 autocast) at a fixed sequence length, the workload whose advice the GPU check of `gpumem advise`
applies (test/gpu/advice_check.py). An ordinary training script: it knows nothing of GPU Memory Lens and prints
its peaks the way training loops log them.

    python3 test/gpu/workloads/advice_train.py [--batch 4] [--seq 512] [--steps 4] [--checkpoint CLASS]
                                               [--capacity BYTES] [--keep-grads]

--checkpoint CLASS  wrap the forward of every module of that class in torch.utils.checkpoint (non-reentrant)
--capacity BYTES    torch.cuda.set_per_process_memory_fraction(BYTES / device total): the device is that big
--keep-grads        zero_grad(set_to_none=False): gradients stay allocated between steps
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import json

import torch
import torch.utils.checkpoint as cp
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seq", type=int, default=512)
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--checkpoint", default="")
ap.add_argument("--capacity", type=int, default=0)
ap.add_argument("--keep-grads", action="store_true")
args = ap.parse_args()

torch.manual_seed(0)
if args.capacity:
    torch.cuda.set_per_process_memory_fraction(args.capacity / torch.cuda.get_device_properties(0).total_memory)
# no KV cache in training: a cache updated inside a checkpointed forward would be updated again by its recompute
model = GPT2LMHeadModel(GPT2Config(n_positions=1024, use_cache=False)).cuda()
wrapped = 0
if args.checkpoint:
    for m in model.modules():
        if type(m).__name__ == args.checkpoint:
            fwd = m.forward
            m.forward = (lambda f: (lambda *a, **k: cp.checkpoint(f, *a, use_reentrant=False, **k)))(fwd)
            wrapped += 1
    if not wrapped:
        raise SystemExit("no module of class %s" % args.checkpoint)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
oom = None
try:
    for step in range(args.steps):
        ids = torch.randint(0, 50257, (args.batch, args.seq), device="cuda")
        opt.zero_grad(set_to_none=not args.keep_grads)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
except torch.OutOfMemoryError as e:
    oom = str(e).splitlines()[0]
print("RESULT " + json.dumps({
    "batch": args.batch,
    "seq": args.seq,
    "checkpoint": args.checkpoint,
    "wrapped": wrapped,
    "peak_allocated": torch.cuda.max_memory_allocated(),
    "peak_reserved": torch.cuda.max_memory_reserved(),
    "oom": oom,
}))
