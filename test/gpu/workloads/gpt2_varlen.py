"""GPT-2 small trained with sequence lengths varying 128…1024 at a fixed 8192 tokens per batch (the
fragmentation workload of bench_allocator.py's frag stage), as an ordinary script: it knows nothing of
GPU Memory Lens and prints the peaks the way training loops log them. Run natively, with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, and under `gpumem run`; the capture of the last is what
`gpumem replay` replays to predict the first two.

    python3 test/gpu/workloads/gpt2_varlen.py [--steps 40] [--batch-tokens 8192]
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import json
import random

import torch
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--batch-tokens", type=int, default=8192)
args = ap.parse_args()

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_positions=1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
rng = random.Random(3)
for step in range(args.steps):
    seq = rng.choice(range(128, 1025, 64))
    ids = torch.randint(0, 50257, (max(1, args.batch_tokens // seq), seq), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("RESULT " + json.dumps({
    "peak_reserved": torch.cuda.max_memory_reserved(),
    "peak_allocated": torch.cuda.max_memory_allocated(),
    "backend": torch.cuda.memory.get_allocator_backend(),
    "alloc_conf": __import__("os").environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    "loss": loss.item(),
}))
