"""Reaches a fragmented state on whatever allocator runs it (the what-if GPU check, test/gpu/what_if_check.py),
prints READY, then obeys lines on stdin:
    alloc N   allocate N bytes on the current stream; print {"ok", device free and reserved before/after}
    exit
The state: 24 tensors of 30 MiB with every other one freed (free 30 MiB runs between live tensors, so an
expandable segment holds both tensors and whole free pages), small-pool tensors with gaps, and a phase that
raised the reserved peak and gave it back (so trim on growth has a peak to defend, or not: --at-peak)."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import json
import sys

import torch

at_peak = "--at-peak" in sys.argv
MiB = 1 << 20
if not at_peak:  # raise the reserved peak, then give it back: later growth stays under the peak
    tmp = torch.empty(400 * MiB, dtype=torch.uint8, device="cuda")
    del tmp
    torch.cuda.empty_cache()
big = [torch.empty(30 * MiB, dtype=torch.uint8, device="cuda") for _ in range(24)]
small = [torch.empty(300 * 1024, dtype=torch.uint8, device="cuda") for _ in range(40)]
for i in range(0, 24, 2):
    big[i] = None
for i in range(0, 40, 3):
    small[i] = None
torch.cuda.synchronize()


def figures():
    free, _total = torch.cuda.mem_get_info()
    return {"device_free": free, "reserved": torch.cuda.memory_reserved(), "allocated": torch.cuda.memory_allocated()}


print("READY " + json.dumps(figures()), flush=True)
held = []
for line in sys.stdin:
    words = line.split()
    if not words or words[0] == "exit":
        break
    if words[0] == "alloc":
        before = figures()
        try:
            held.append(torch.empty(int(words[1]), dtype=torch.uint8, device="cuda"))
            ok, err = True, ""
        except RuntimeError as exc:
            ok, err = False, str(exc)[:300]
        torch.cuda.synchronize()
        print("RESULT " + json.dumps({"ok": ok, "error": err, "before": before, "after": figures()}), flush=True)
