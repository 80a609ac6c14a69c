"""Workload: a small MLP training loop run with the user's PYTORCH_CUDA_ALLOC_CONF.
    train_small.py [--history PICKLE] [--handshake DIR] [--oom]
--history: PyTorch's own _record_memory_history(stacks="python") from the start, _dump_snapshot at the end of
training (the same run the lens records). --handshake: writes DIR/ready, waits for DIR/done (the check
runs Empty Cache through the control channel meanwhile), then reports what torch.cuda.empty_cache() still
releases. --oom: one allocation larger than the device, caught. Prints one RESULT line."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--history")
    ap.add_argument("--handshake")
    ap.add_argument("--oom", action="store_true")
    a = ap.parse_args()
    torch.cuda.init()  # PyTorch's allocator exists from here: history set before it would be lost
    if a.history:
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(8):
        x = torch.randn(64 * (1 + step % 3), 1024, device="cuda")
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    res = {"backend": torch.cuda.memory.get_allocator_backend(), "mode": os.environ.get("GPUMEM_ALLOCATOR"),
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    try:
        res["expandable_segments"] = torch.cuda.memory._snapshot()["allocator_settings"].get("expandable_segments")
    except Exception as exc:
        res["expandable_segments"] = "n/a (%s)" % type(exc).__name__
    if a.history:
        torch.cuda.memory._dump_snapshot(a.history)
        torch.cuda.memory._record_memory_history(enabled=None)
    del x, loss
    torch.cuda.synchronize()
    if a.handshake:
        res["reserved_before"] = torch.cuda.memory_reserved()
        open(os.path.join(a.handshake, "ready"), "w").close()
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(a.handshake, "done")) and time.time() < deadline:
            time.sleep(0.05)
        res["reserved_after_channel"] = torch.cuda.memory_reserved()
        torch.cuda.empty_cache()
        res["reserved_after_torch"] = torch.cuda.memory_reserved()
    if a.oom:
        try:
            torch.empty(torch.cuda.get_device_properties(0).total_memory * 2, dtype=torch.uint8, device="cuda")
            res["oom"] = False
        except torch.OutOfMemoryError:
            res["oom"] = True
    print("RESULT " + json.dumps(res))


if __name__ == "__main__":
    main()
