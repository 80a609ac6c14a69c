"""A long real training loop for the default capture budget (test/gpu/long_run_check.py).

    long_train.py SECONDS

GPT-2 small (transformers config, random weights, 8×512 tokens, bf16 autocast, AdamW) trains for SECONDS of wall
time; every 16th step keeps its logits' argmax in a list (a slow leak), and one long batch (2× tokens) at 80 % of
the run is the late peak. Prints one line per minute, `MINUTE k median_ms=… steps=…` (median step time of that
minute, synchronized), then `DONE steps=N`.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "720")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import statistics
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

seconds = float(sys.argv[1])
device = torch.device("cuda", 0)
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config()).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
kept = []


def step(batch, seq):
    x = torch.randint(0, 50257, (batch, seq), device=device)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(x, labels=x)  # LONG_RUN_LINE
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return out


start = time.time()
minute, times, n, late_done = 0, [], 0, False
while True:
    now = time.time() - start
    if now >= seconds:
        break
    t0 = time.perf_counter()
    long_batch = not late_done and now >= 0.8 * seconds
    out = step(16 if long_batch else 8, 512)
    late_done = late_done or long_batch
    if n % 16 == 15:
        kept.append(out.logits[:, -1].argmax(-1))  # slow leak
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
    n += 1
    if int((time.time() - start) // 60) > minute:
        minute += 1
        warm = times[10:] if minute == 1 else times
        print("MINUTE %d median_ms=%.3f steps=%d" % (minute, statistics.median(warm), len(warm)), flush=True)
        times = []
if times:
    print("MINUTE %d median_ms=%.3f steps=%d (partial)" % (minute + 1, statistics.median(times), len(times)), flush=True)
print("DONE steps=%d" % n, flush=True)
